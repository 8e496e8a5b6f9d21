"""Augmented Random Search (Mania, Guy & Recht, 2018) in one NumPy file.

ARS trains a policy with parameters ``theta`` without gradients. Each iteration draws
``N = n_delta`` random directions ``delta_k ~ N(0, I)``, rolls out the two policies
``theta + nu * delta_k`` and ``theta - nu * delta_k`` (``nu = delta_std``), keeps the
``b = n_top`` directions with the largest ``max(r+_k, r-_k)``, and moves

    theta <- theta + alpha / (b * sigma_R) * sum_k (r+_k - r-_k) * delta_k

where ``alpha = learning_rate`` and ``sigma_R`` is the standard deviation of the ``2b``
kept returns (arXiv 1803.07055, Algorithm 2). V2 also normalises each observation with
the mean and variance of every state visited so far.

How to read this file. The algorithm comes first and is complete on its own: the
paper's settings, running statistics, the policies, rollouts, and the learner
(construction, one iteration, ``learn``). Everything after the line "Plumbing" serves
it: evaluation in worker processes or on a cluster, logging and callbacks, model
files, the adapters for Stable-Baselines3 users, and the command line.

Example
-------
>>> from ars import ARS
>>> model = ARS("LinearPolicy", "CartPole-v1", n_delta=2, seed=0)
>>> model = model.learn(total_timesteps=20_000)
>>> action, _ = model.predict(model.gym_env.reset(seed=0)[0])

Command line: ``python ars.py`` trains CartPole in seconds; ``python ars.py --env
Hopper-v4`` runs the paper's Hopper; ``--help`` lists every flag.
"""

from __future__ import annotations

import argparse
import collections
import collections.abc
import csv
import functools
import hashlib
import inspect
import io
import json
import math
import multiprocessing
import multiprocessing.connection
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import types
import warnings
import weakref
import zipfile
import zlib
from collections.abc import Callable, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any, NamedTuple

import cloudpickle
import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.wrappers import OrderEnforcing, PassiveEnvChecker, TimeLimit

__version__ = "0.2.0"


def _require(module: str, install: str) -> Any:
    """Import an optional dependency, or fail with the command that installs it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ModuleNotFoundError(f"this feature needs {module}: {install}") from error


# ===========================================================================================
# The paper's settings
# ===========================================================================================
#
# Table 9 of the paper for the MuJoCo tasks, as kept by rl-baselines3-zoo, plus the zoo's
# CartPole and Pendulum rows: step size alpha, exploration noise nu, directions N, top
# directions b, the per-step shift that cancels the survival bonus, and V1 (no
# normalisation) or V2. Humanoid uses the paper's N = b = 230 (the zoo: 256). The budgets
# are the zoo's n_timesteps.

_PAPER_TABLE = {
    # task: alpha, nu, N, b, shift, V2, budget (timesteps)
    "Swimmer": (0.02, 0.01, 1, 1, 0, False, 2_000_000),
    "Hopper": (0.01, 0.025, 8, 4, -1, True, 7_000_000),
    "HalfCheetah": (0.02, 0.03, 32, 4, 0, True, 12_500_000),
    "Walker2d": (0.03, 0.025, 40, 30, -1, True, 75_000_000),
    "Ant": (0.015, 0.025, 60, 20, -1, True, 75_000_000),
    "Humanoid": (0.02, 0.0075, 230, 230, -5, True, 250_000_000),
    "CartPole": (0.02, 0.05, 2, 2, 0, False, 50_000),
    "Pendulum": (0.018, 0.1, 4, 1, 0, True, 2_000_000),
}
_COLUMNS = tuple(
    "learning_rate delta_std n_delta n_top alive_bonus_offset normalize_obs total_timesteps".split()
)
PAPER_SETTINGS: dict[str, dict[str, Any]] = {
    task: dict(zip(_COLUMNS, row)) for task, row in _PAPER_TABLE.items()
}
PAPER_SETTINGS["Pendulum"].update(policy="MlpPolicy", net_arch=[16], zero_policy=False)
GENERIC_SETTINGS: dict[str, Any] = dict(
    policy="LinearPolicy",
    net_arch=None,
    learning_rate=0.02,
    delta_std=0.03,
    n_delta=8,
    n_top=None,
    alive_bonus_offset=0.0,
    normalize_obs=True,
    zero_policy=True,
    common_random_numbers=True,
    n_eval_episodes=1,
    total_timesteps=1_000_000,
)


def settings_for(env_id: str) -> dict[str, Any]:
    """The paper's hyper-parameters for ``env_id`` (any version), else generic defaults.

    Examples
    --------
    >>> settings_for("Hopper-v5")["n_delta"]
    8
    """
    task = env_id.split("/")[-1].rsplit("-v", 1)[0]
    return {**GENERIC_SETTINGS, **PAPER_SETTINGS.get(task, {})}


# ===========================================================================================
# Running statistics
# ===========================================================================================


class RunningMeanStd:
    """Mean and (population) variance of every row seen so far.

    Two statistics merge exactly (Chan, Golub & LeVeque, 1979), so the statistics of
    each rollout combine into those of all the data, in any grouping. With no data yet,
    ``mean`` is 0 and ``var`` is 1: normalising is then the identity.

    Parameters
    ----------
    shape : tuple of int
        Shape of one row (one flattened observation).

    Examples
    --------
    >>> a, b = RunningMeanStd((2,)), RunningMeanStd((2,))
    >>> a.update(np.ones((3, 2))).combine(b.update(np.zeros((1, 2)))).mean
    array([0.75, 0.75])
    """

    def __init__(self, shape: tuple[int, ...] = ()):
        self.mean = np.zeros(shape, dtype=np.float64)
        self.var = np.ones(shape, dtype=np.float64)
        self.count = 0

    def update(self, batch: np.ndarray) -> RunningMeanStd:
        """Add the rows of ``batch`` (shape ``(n, *shape)``); returns ``self``."""
        batch = np.asarray(batch, dtype=np.float64).reshape((-1, *self.mean.shape))
        if len(batch):
            with np.errstate(invalid="ignore"):  # inf gives nan statistics; the learner reports it
                moments = batch.mean(axis=0), batch.var(axis=0), len(batch)
            self.combine(RunningMeanStd.from_moments(*moments))
        return self

    def combine(self, other: RunningMeanStd) -> RunningMeanStd:
        """Merge ``other`` into ``self`` exactly (the parallel algorithm); returns ``self``."""
        if other.count == 0:
            return self
        if self.count == 0:
            self.mean, self.var, self.count = other.mean.copy(), other.var.copy(), other.count
            return self
        count = self.count + other.count
        delta = other.mean - self.mean
        m2 = (
            self.var * self.count
            + other.var * other.count
            + delta**2 * (self.count * other.count / count)
        )
        self.mean = self.mean + delta * (other.count / count)
        self.var = m2 / count
        self.count = count
        return self

    def copy(self) -> RunningMeanStd:
        """An independent copy."""
        return RunningMeanStd.from_moments(self.mean.copy(), self.var.copy(), self.count)

    @staticmethod
    def from_moments(mean: np.ndarray, var: np.ndarray, count: int) -> RunningMeanStd:
        """The statistics of ``count`` rows with this mean and variance."""
        rms = RunningMeanStd(np.shape(mean))
        rms.mean, rms.var, rms.count = mean, var, count
        return rms


# ===========================================================================================
# Policies
# ===========================================================================================

ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "relu": lambda x: np.maximum(x, 0.0),
    "tanh": np.tanh,
    "sigmoid": lambda x: 0.5 * (1.0 + np.tanh(0.5 * x)),
    "identity": lambda x: x,
}
MIN_VARIANCE = 1e-8  # V2: inputs with a smaller variance are treated as constant and zeroed
MAX_PARAMETERS = 10**7  # a random direction of this size per candidate is already slow


def _flattener(space: spaces.Space) -> Callable[[np.ndarray], np.ndarray]:
    """``obs -> float vector`` for observations with any leading axes, as ``spaces.flatten``.

    Box observations are flattened; Discrete ones become one-hot vectors, MultiDiscrete
    ones concatenated one-hot vectors, MultiBinary ones 0/1 vectors.
    """
    dim = spaces.flatdim(space)
    if isinstance(space, spaces.Box):
        shape = space.shape
        return lambda x: x.reshape(x.shape[: x.ndim - len(shape)] + (dim,))
    if isinstance(space, spaces.Discrete):
        values = np.arange(dim) + int(space.start)  # no dim x dim table: n may be large
        return lambda x: (np.asarray(x, dtype=np.int64)[..., None] == values).astype(np.float64)
    if isinstance(space, spaces.MultiBinary):
        size = len(space.shape)
        return lambda x: np.asarray(x, np.float64).reshape(
            np.shape(x)[: np.ndim(x) - size] + (dim,)
        )
    # MultiDiscrete: one one-hot block per entry, side by side
    offsets = np.concatenate([[0], np.cumsum(space.nvec.reshape(-1))[:-1]]) - space.start.reshape(
        -1
    )
    n_entries = len(offsets)

    def multi_one_hot(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.int64)
        index = x.reshape(x.shape[: x.ndim - len(space.shape)] + (n_entries,)) + offsets
        out = np.zeros(index.shape[:-1] + (dim,))
        np.put_along_axis(out, index, 1.0, axis=-1)
        return out

    return multi_one_hot


OBSERVATION_SPACES = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)


def _spaces_of(holder: Any) -> tuple[spaces.Space, spaces.Space]:
    return holder.observation_space, holder.action_space


def _check_same_spaces(
    found: tuple, expected: tuple, what: str = "the policy", built_for: str = "the model"
) -> None:
    """A ValueError unless ``what``'s (observation, action) spaces are those expected."""
    if found != expected:
        raise ValueError(
            f"{what} has observation space {found[0]} and action space {found[1]}, but "
            f"{built_for} was built for {expected[0]} and {expected[1]}"
        )


def check_spaces(observation_space: spaces.Space, action_space: spaces.Space) -> None:
    """Raise ``NotImplementedError`` naming the space when ARS cannot use it."""
    if not isinstance(observation_space, OBSERVATION_SPACES):
        raise NotImplementedError(
            f"ARS supports Box, Discrete, MultiDiscrete and MultiBinary observation spaces; "
            f"got {observation_space}. Flatten it first: gymnasium.wrappers.FlattenObservation."
        )
    if not isinstance(action_space, (spaces.Box, spaces.Discrete)):
        raise NotImplementedError(
            f"ARS supports Box and Discrete action spaces; got {action_space}."
        )


def _activation_name(activation_fn: Any) -> str:
    """'relu', 'tanh', ... from a name or a torch.nn activation class such as nn.ReLU."""
    name = (
        activation_fn if isinstance(activation_fn, str) else getattr(activation_fn, "__name__", "")
    )
    if name.lower() not in ACTIVATIONS:
        raise ValueError(
            f"activation_fn {activation_fn!r} is not supported; use one of {sorted(ACTIVATIONS)}"
        )
    return name.lower()


class ARSPolicy:
    """A deterministic MLP policy held as one flat NumPy parameter vector.

    The observation is flattened, normalised with ``obs_rms`` when that is set (V2:
    ``(x - mean) / sqrt(var)``, inputs with variance below 1e-8 zeroed), passed through
    the layers, and mapped to an action: ``argmax`` for Discrete actions; for Box actions
    ``tanh`` rescaled to ``[low, high]`` when ``squash_output`` is set, else clipped.

    Parameters
    ----------
    observation_space : gymnasium.spaces.Space
        Box of any shape, Discrete, MultiDiscrete or MultiBinary.
    action_space : gymnasium.spaces.Box or gymnasium.spaces.Discrete
    net_arch : list of int, optional
        Hidden layer sizes, ``[64, 64]`` by default; ``[]`` gives a linear policy.
    activation_fn : str or torch.nn activation class
        ``"relu"`` (default), ``"tanh"``, ``"sigmoid"``, ``"identity"`` or e.g. ``nn.ReLU``.
    with_bias : bool
        Whether the layers add a bias.
    squash_output : bool
        Box actions: tanh-squash and rescale (True) or clip (False).

    Examples
    --------
    >>> env = gym.make("Pendulum-v1")
    >>> policy = ARSPolicy(env.observation_space, env.action_space, net_arch=[16])
    >>> policy.predict(env.reset(seed=0)[0])[0].shape
    (1,)
    """

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        net_arch: Sequence[int] | None = None,
        activation_fn: Any = "relu",
        with_bias: bool = True,
        squash_output: bool = True,
    ):
        check_spaces(observation_space, action_space)
        self.observation_space, self.action_space = observation_space, action_space
        self.net_arch = [64, 64] if net_arch is None else [int(n) for n in net_arch]
        if any(n < 1 for n in self.net_arch):
            raise ValueError(f"net_arch sizes must be at least 1; got {self.net_arch}")
        self.activation_fn = _activation_name(activation_fn)
        self.with_bias, self.squash_output = bool(with_bias), bool(squash_output)
        self.obs_dim = spaces.flatdim(observation_space)
        self._flat_box = (
            isinstance(observation_space, spaces.Box) and len(observation_space.shape) == 1
        )
        if isinstance(action_space, spaces.Discrete):
            self.action_dim = int(action_space.n)
        else:
            self.action_dim = int(np.prod(action_space.shape))
            self._low = action_space.low.astype(np.float64).reshape(-1)
            self._high = action_space.high.astype(np.float64).reshape(-1)
            bounded = np.isfinite(self._low).all() and np.isfinite(self._high).all()
            if self.squash_output and not bounded:
                raise ValueError(
                    f"squash_output=True rescales tanh to the action bounds, but {action_space} is "
                    "unbounded; use squash_output=False (actions are clipped) or bound the space."
                )
        sizes = [self.obs_dim, *self.net_arch, self.action_dim]
        self.layer_shapes = list(zip(sizes[1:], sizes[:-1]))  # (out, in) per layer
        self.n_params = sum(o * i + (o if self.with_bias else 0) for o, i in self.layer_shapes)
        if self.n_params > MAX_PARAMETERS:
            raise ValueError(
                f"a policy of {self.n_params:,} parameters is more than ars handles "
                f"({MAX_PARAMETERS:,}): ARS draws that many normals per candidate"
            )
        self._theta = np.zeros(self.n_params)
        self.obs_rms: RunningMeanStd | None = None  # set by ARS(normalize_obs=True): V2

    # -- parameters -----------------------------------------------------------------------
    def parameters_to_vector(self) -> np.ndarray:
        """A copy of the flat parameter vector (layer by layer: weight row-major, then bias)."""
        return self._theta.copy()

    def load_from_vector(self, vector: Any) -> None:
        """Set the parameters from a flat vector (NumPy array, list or CPU torch tensor)."""
        vector = _as_array(vector)
        if vector.shape != (self.n_params,):
            raise ValueError(
                f"expected a parameter vector of shape ({self.n_params},), got {vector.shape}"
            )
        self._theta = vector.copy()

    def init_weights(self, rng: np.random.Generator) -> np.ndarray:
        """Random parameters, uniform in +-1/sqrt(fan_in) per layer (torch's nn.Linear default)."""
        parts = []
        for out, inp in self.layer_shapes:
            bound = 1.0 / math.sqrt(inp)
            parts.append(rng.uniform(-bound, bound, out * inp + (out if self.with_bias else 0)))
        return np.concatenate(parts)

    def config(self) -> dict[str, Any]:
        """The constructor arguments beyond the spaces, as plain data."""
        return dict(
            net_arch=self.net_arch,
            activation_fn=self.activation_fn,
            with_bias=self.with_bias,
            squash_output=self.squash_output,
        )

    # -- the forward pass -----------------------------------------------------------------
    def layers(self, theta: np.ndarray | None = None) -> list[tuple[np.ndarray, np.ndarray | None]]:
        """``(weight, bias)`` per layer for ``theta`` (``(n_params,)`` or a population).

        V2 normalisation is folded into the first layer, so it costs nothing per step:
        ``W ((x - mean) * s) + b == (W * s) x + (b - (W * s) mean)``.
        """
        theta = self._theta if theta is None else theta
        lead, start, layers = theta.shape[:-1], 0, []
        for out, inp in self.layer_shapes:
            weight = theta[..., start : start + out * inp].reshape(*lead, out, inp)
            start += out * inp
            bias = None
            if self.with_bias:
                bias, start = theta[..., start : start + out], start + out
            layers.append((weight, bias))
        if self.obs_rms is not None:
            weight, bias = layers[0]
            weight = weight * _inverse_std(self.obs_rms.var)
            shift = -(weight @ self.obs_rms.mean.reshape(-1))
            layers[0] = (weight, shift if bias is None else bias + shift)
        return layers

    def _to_action(self) -> Callable[[np.ndarray], Any]:
        """The map from network outputs ``(..., action_dim)`` (a fresh array) to actions."""
        if isinstance(self.action_space, spaces.Discrete):
            start = int(self.action_space.start)
            return lambda out: out.argmax(axis=-1) + start
        if self.squash_output:
            center, scale = (self._high + self._low) / 2, (self._high - self._low) / 2
            to_box = lambda out: center + scale * np.tanh(out)
        else:  # np.clip, in place and without its per-call overhead
            low, high, maximum, minimum = self._low, self._high, np.maximum, np.minimum
            to_box = lambda out: minimum(maximum(out, low, out=out), high, out=out)
        shape = self.action_space.shape
        return (
            to_box if len(shape) == 1 else lambda out: to_box(out).reshape(out.shape[:-1] + shape)
        )

    def forward(self, obs: Any, theta: Any = None) -> Any:
        """Actions for observations, for one parameter vector or a population of them.

        Parameters
        ----------
        obs : array_like or torch.Tensor
            One observation or a batch ``(B, *obs_shape)``; with a population of ``P``
            parameter vectors, ``(P, *obs_shape)`` or ``(P, B, *obs_shape)``.
        theta : array_like, optional
            ``(n_params,)`` (default: the policy's own) or a population ``(P, n_params)``.

        Returns
        -------
        numpy.ndarray or torch.Tensor
            Actions with the leading axes of ``obs`` (a torch tensor for a torch input).
        """
        theta = self._theta if theta is None else _as_array(theta)
        x = _as_array(obs, None)
        obs_shape = self.observation_space.shape
        n_lead = x.ndim - len(obs_shape)
        if n_lead < 0 or x.shape[n_lead:] != obs_shape:
            raise ValueError(
                f"expected observations of shape {obs_shape} or (batch, *{obs_shape}), got "
                f"{x.shape}"
            )
        if theta.ndim == 2 and (n_lead == 0 or x.shape[0] != len(theta)):
            raise ValueError(
                f"{len(theta)} parameter vectors need observations of shape ({len(theta)}, ...), "
                f"got {x.shape}"
            )
        h = _flattener(self.observation_space)(x).astype(np.float64)
        if theta.ndim == 2 and n_lead == 1:
            h = h[:, None, :]  # one observation per parameter vector
        activation, layers = ACTIVATIONS[self.activation_fn], self.layers(theta)
        for i, (weight, bias) in enumerate(layers):  # the network, for any leading axes
            h = h @ np.swapaxes(weight, -1, -2)
            if bias is not None:
                h = h + (bias[:, None, :] if theta.ndim == 2 else bias)
            if i < len(layers) - 1:
                h = activation(h)
        actions = self._to_action()(h)
        if theta.ndim == 2 and n_lead == 1:
            actions = actions[:, 0]
        return _like(obs, actions)

    __call__ = forward  # as torch policies: policy(obs)

    def actor(self, theta: np.ndarray | None = None) -> Callable[[Any], Any]:
        """A fast ``obs -> action`` for one observation: the rollout's hot path.

        The same network as :meth:`forward` (a test checks it), specialised to a single
        observation and a precomputed set of layers.
        """
        layers = self.layers(self._theta if theta is None else theta)
        hidden, (w_out, b_out) = layers[:-1], layers[-1]
        activation, to_action = ACTIVATIONS[self.activation_fn], self._to_action()
        flatten = None if self._flat_box else _flattener(self.observation_space)
        dot = np.dot  # cheaper per call than the @ operator on one small vector

        def act(obs: Any) -> Any:
            h = obs if flatten is None else flatten(obs)
            for weight, bias in hidden:
                h = activation(dot(weight, h) if bias is None else dot(weight, h) + bias)
            return to_action(dot(w_out, h) if b_out is None else dot(w_out, h) + b_out)

        return act

    def predict(
        self,
        observation: Any,
        state: Any = None,
        episode_start: Any = None,
        deterministic: bool = True,
    ) -> tuple[Any, None]:
        """``(action, None)`` for one observation or a batch, in the action space's dtype.

        SB3's signature and shapes; ``state``, ``episode_start`` and ``deterministic``
        are accepted and ignored (ARS policies are deterministic and stateless).
        """
        actions = self.forward(observation)
        dtype = self.action_space.dtype
        if _is_torch(actions):
            return actions.to(getattr(sys.modules["torch"], str(np.dtype(dtype)))), None
        return np.asarray(actions).astype(dtype, copy=False), None

    # -- plumbing: Stable-Baselines3's policy API, defined with the model files below ------
    device = property(lambda self: _cpu_device(), doc="Always the CPU: ARS computes in NumPy.")

    def state_dict(self) -> dict[str, np.ndarray]:
        """Parameters under sb3-contrib's names (``action_net.0.weight``, ...)."""
        return _policy_state_dict(self)

    def load_state_dict(self, state_dict: dict[str, Any], strict: bool = True) -> None:
        """Set parameters from :meth:`state_dict`'s names (NumPy arrays or torch tensors)."""
        _load_policy_state_dict(self, state_dict, strict)

    def save(self, path: str | os.PathLike | io.IOBase) -> None:
        """Write the policy alone (spaces, options, parameters, statistics) as plain data."""
        _save_policy(self, path)

    @classmethod
    def load(cls, path: str | os.PathLike | io.IOBase, device: Any = "auto") -> ARSPolicy:
        """A policy written by :meth:`save` (or the policy of a saved model).

        ``device`` is accepted for SB3 compatibility: ars computes on the CPU.
        """
        return _load_policy(path)

    def to_torch(self) -> Any:
        """A ``torch.nn.Module`` computing the same actions (normalisation included)."""
        return _policy_to_torch(self)


class ARSLinearPolicy(ARSPolicy):
    """The paper's linear policy ``a = M x`` (V2: ``a = M diag(var)^-1/2 (x - mean)``).

    An :class:`ARSPolicy` with no hidden layer, no bias and clipped actions by default.
    """

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        with_bias: bool = False,
        squash_output: bool = False,
    ):
        super().__init__(
            observation_space,
            action_space,
            net_arch=[],
            with_bias=with_bias,
            squash_output=squash_output,
        )


MlpPolicy, LinearPolicy = ARSPolicy, ARSLinearPolicy  # sb3-contrib's names
POLICY_ALIASES = {"LinearPolicy": ARSLinearPolicy, "MlpPolicy": ARSPolicy}


def _inverse_std(var: np.ndarray) -> np.ndarray:
    """``1 / sqrt(var)``, with 0 where ``var < 1e-8`` (the input is then ignored)."""
    var = var.reshape(-1)
    return np.where(var < MIN_VARIANCE, 0.0, 1.0 / np.sqrt(np.maximum(var, MIN_VARIANCE)))


def _is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "detach")


def _as_array(x: Any, dtype: Any = np.float64) -> np.ndarray:
    """A NumPy array from an array-like or a CPU torch tensor (torch is never imported)."""
    if _is_torch(x):
        if x.device.type != "cpu":
            raise ValueError(
                f"got a torch tensor on {x.device}; move it to the CPU first (tensor.cpu())"
            )
        x = x.detach().numpy()
    return np.asarray(x, dtype=dtype)


def _like(reference: Any, array: Any) -> Any:
    """``array`` as a torch tensor when ``reference`` is one: torch in, torch out."""
    if _is_torch(reference):
        return sys.modules["torch"].as_tensor(np.asarray(array))
    return array


def _cpu_device() -> Any:
    """``torch.device("cpu")`` when torch is already imported, else the string ``"cpu"``."""
    torch = sys.modules.get("torch")
    return torch.device("cpu") if torch is not None and hasattr(torch, "device") else "cpu"


# ===========================================================================================
# Rollouts
# ===========================================================================================
#
# Every random number of a run comes from a stream named by its coordinates, never from a
# generator that advances: a direction or an env seed is the same whoever computes it, so
# any number of workers gives the same run, and a worker rebuilds a candidate from a few
# integers instead of receiving its parameters.

ENV_SEEDS, DIRECTIONS, WARM_UP = 0, 1, 2  # first coordinate: streams never overlap
WARM_UP_BATCH = 8  # normalization_samples episodes per round: fixed, not from the workers


def _stream(seed: int, purpose: int, *coordinates: int) -> np.random.SeedSequence:
    return np.random.SeedSequence(seed, spawn_key=(purpose, *coordinates))


def episode_seed(seed: int, iteration: int, candidate: int, episode: int) -> int:
    """The env seed of one rollout: a function of its coordinates alone."""
    return int(_stream(seed, ENV_SEEDS, iteration, candidate, episode).generate_state(1)[0])


def direction(seed: int, iteration: int, k: int, n_params: int) -> np.ndarray:
    """``delta_k ~ N(0, I)`` of an iteration, regenerated from its coordinates."""
    return np.random.default_rng(_stream(seed, DIRECTIONS, iteration, k)).standard_normal(n_params)


def make_env(env: Any) -> gym.Env:
    """A gymnasium env from an id (``"Hopper-v4"``), an env, a function returning one, or an
    SB3 VecEnv holding one env (``DummyVecEnv``, ``VecNormalize``; see :func:`unwrap_vec_env`)."""
    if isinstance(env, str):
        with warnings.catch_warnings():  # v4 MuJoCo ids still work; don't bury the output
            warnings.filterwarnings("ignore", message=".*is out of date.*")
            try:
                return gym.make(env)
            except gym.error.DependencyNotInstalled as error:
                if "mujoco" in str(error).lower():
                    raise ModuleNotFoundError(
                        f"{env} needs MuJoCo: pip install 'gymnasium[mujoco]' (ars's "
                        "'mujoco' extra)"
                    ) from error
                raise
    if _is_vec_env(env):
        return unwrap_vec_env(env)[0]
    made = env() if callable(env) and not isinstance(env, gym.Env) else env
    if _is_vec_env(made):
        return unwrap_vec_env(made)[0]
    if not isinstance(made, gym.Env):
        raise TypeError(
            f"expected an env id, a gymnasium.Env, an SB3 VecEnv or a function returning one; "
            f"got {type(made).__name__}"
        )
    return made


def _inner_step(env: gym.Env) -> tuple[Callable[[Any], tuple], int | None]:
    """``env.step`` past gymnasium's pass-through wrappers, and the time limit to enforce.

    TimeLimit, OrderEnforcing and PassiveEnvChecker change nothing in a rollout that
    resets through them first; stepping past them saves about a microsecond per step.
    Any other wrapper is kept, and so is everything inside it.
    """
    inner, limit = env, None
    while isinstance(inner, (TimeLimit, OrderEnforcing, PassiveEnvChecker)):
        if isinstance(inner, TimeLimit):
            if limit is not None:  # nested limits: keep the inner one as a wrapper
                break
            limit = inner._max_episode_steps
        inner = inner.env
    return inner.step, limit


OBS_CHUNK_BYTES = 8 << 20  # visited observations are folded into statistics in chunks this big
NO_LIMIT_STEPS = 100_000  # an episode this long in an env without a time limit is an error


def run_episodes(
    env: gym.Env,
    act: Callable[[Any], Any],
    seeds: Sequence[int],
    options: dict[str, Any] | None = None,
    track_obs: bool = True,
    max_episode_steps: int | None = None,
    on_step: Callable[[Any, tuple], None] | None = None,
) -> tuple[np.ndarray, np.ndarray, RunningMeanStd]:
    """Roll out ``act`` for one episode per env seed.

    Parameters
    ----------
    env : gymnasium.Env
    act : callable
        ``obs -> action`` (e.g. :meth:`ARSPolicy.actor`).
    seeds : sequence of int
        One env seed per episode, given to ``env.reset``.
    options : dict, optional
        Passed to every ``env.reset``.
    track_obs : bool
        Keep statistics of the observations acted on (V2 needs them; V1 does not).
    max_episode_steps : int, optional
        End episodes after this many steps (or the env's own time limit, if sooner). An
        env with neither that runs ``NO_LIMIT_STEPS`` steps raises an error.
    on_step : callable, optional
        ``on_step(action, (obs, reward, terminated, truncated, info))`` after every step.

    Returns
    -------
    returns : numpy.ndarray
        Undiscounted return of each episode (the env's own rewards).
    lengths : numpy.ndarray
        Steps of each episode.
    visited : RunningMeanStd
        Statistics of every observation acted on (empty unless ``track_obs``), folded in
        chunks: memory stays bounded however long the episodes.
    """
    returns, lengths = np.zeros(len(seeds)), np.zeros(len(seeds), dtype=np.int64)
    space = env.observation_space
    dim = spaces.flatdim(space)
    visited, rows = RunningMeanStd((dim,)), []
    chunk = max(1, min(1000, OBS_CHUNK_BYTES // (8 * dim)))
    flatten = _flattener(space)
    step, env_limit = _inner_step(env)
    limits = [x for x in (env_limit, max_episode_steps) if x is not None]
    limit = min(limits) if limits else NO_LIMIT_STEPS
    if on_step is not None:
        step = _observed(step, on_step)
    for i, seed in enumerate(seeds):
        obs, _ = env.reset(seed=int(seed), options=options)
        total, steps = 0.0, 0
        while True:  # the hot loop: nothing here that could be done once per episode
            if track_obs:
                rows.append(obs)
                if len(rows) == chunk:
                    visited.update(flatten(np.asarray(rows, dtype=np.float64)))
                    rows.clear()
            obs, reward, terminated, truncated, _ = step(act(obs))
            total += reward
            steps += 1
            if terminated or truncated or steps == limit:
                break
        if not limits and steps == NO_LIMIT_STEPS and not (terminated or truncated):
            raise RuntimeError(
                f"an episode ran {NO_LIMIT_STEPS:,} steps without ending (env seed {seed}) and "
                "the env has no time limit: wrap it in gymnasium.wrappers.TimeLimit, or pass "
                "max_episode_steps= to ARS"
            )
        returns[i], lengths[i] = total, steps
    if rows:
        visited.update(flatten(np.asarray(rows, dtype=np.float64)))
    return returns, lengths, visited


def _observed(step: Callable[[Any], tuple], on_step: Callable[[Any, tuple], None]) -> Callable:
    """``step`` that reports every transition to ``on_step`` (for per-step callbacks)."""

    def observed_step(action: Any) -> tuple:
        transition = step(action)
        on_step(action, transition)
        return transition

    return observed_step


class Iteration(NamedTuple):
    """What an evaluator needs, once per iteration, to rebuild any candidate of it."""

    policy: ARSPolicy  # structure and the frozen observation statistics
    theta: np.ndarray  # the current parameters
    delta_std: float  # nu
    seed: int  # with ``index``, names the iteration's random directions
    index: int  # the iteration number
    track_obs: bool = False  # return statistics of the visited observations
    max_episode_steps: int | None = None
    obs_filter: Any = None  # an SB3 VecNormalize's normalisation, applied before the policy


class Job(NamedTuple):
    """One candidate to evaluate: ``theta + sign * nu * delta_k``, or explicit ``weights``."""

    candidate: int
    k: int
    sign: int
    seeds: np.ndarray  # one env seed per episode
    weights: np.ndarray | None = None


class Result(NamedTuple):
    returns: np.ndarray  # per episode, the env's own rewards
    lengths: np.ndarray
    visited: RunningMeanStd | None

    def training_return(self, alive_bonus_offset: float) -> float:
        """The candidate's r: the mean over its episodes, shifted per step (the paper's
        "shift", which cancels the survival bonus during training only)."""
        return float(np.mean(self.returns + alive_bonus_offset * self.lengths))


_LAST_DIRECTION = threading.local()  # per thread: executors may run jobs in threads


def candidate_parameters(it: Iteration, job: Job) -> np.ndarray:
    """The parameters a job evaluates (the same bits wherever it is computed)."""
    if job.weights is not None:
        return job.weights
    key = (it.seed, it.index, job.k, it.policy.n_params)
    # The + and - candidates of a direction come one after the other: draw it once.
    if getattr(_LAST_DIRECTION, "key", None) != key:
        _LAST_DIRECTION.key, _LAST_DIRECTION.delta = key, direction(*key)
    delta = _LAST_DIRECTION.delta
    return it.theta + it.delta_std * delta if job.sign > 0 else it.theta - it.delta_std * delta


def _structure(policy: ARSPolicy) -> ARSPolicy:
    """The policy without its parameters (an Iteration carries them once, as ``theta``)."""
    structure = object.__new__(type(policy))
    structure.__dict__.update(policy.__dict__, _theta=np.zeros(0))
    return structure


def run_job(
    env: gym.Env,
    it: Iteration,
    job: Job,
    options: dict | None = None,
    on_step: Callable | None = None,
) -> Result:
    """Evaluate one candidate: its episodes, their lengths, the states it visited."""
    act = it.policy.actor(candidate_parameters(it, job))
    if it.obs_filter is not None:
        act = it.obs_filter.wrap(act)
    returns, lengths, visited = run_episodes(
        env, act, job.seeds, options, it.track_obs, it.max_episode_steps, on_step
    )
    return Result(returns, lengths, visited if it.track_obs else None)


# ===========================================================================================
# The learner
# ===========================================================================================

Schedule = Callable[[float], float]
INTEGER_RANGES = {  # name: (lowest, highest); beyond these a run is a mistake, not a plan
    "n_delta": (1, 10**6),
    "n_top": (1, 10**6),
    "n_eval_episodes": (1, 10**6),
    "stats_window_size": (1, 10**7),
    "seed": (0, 2**63 - 1),
    "normalization_samples": (0, 10**12),
}
HPARAMS = tuple(
    "n_delta n_top learning_rate delta_std zero_policy alive_bonus_offset n_eval_episodes "
    "policy_kwargs stats_window_size tensorboard_log seed verbose device normalize_obs "
    "common_random_numbers normalization_samples max_episode_steps".split()
)


class ARS:
    """Augmented Random Search (Mania, Guy & Recht 2018, Algorithm 2).

    Parameters
    ----------
    policy : str, ARSPolicy class or instance
        ``"LinearPolicy"`` (the paper's) or ``"MlpPolicy"``. An instance brings its spaces,
        so the model is built at once, env or not.
    env : str, gymnasium.Env, SB3 VecEnv or callable, optional
        Env id, env, a VecEnv holding one env, or a function returning one of those. Without
        it, the policy is built at the first ``learn(total_timesteps, env=...)``.
    n_delta : int
        ``N``: random directions per iteration (2N rollouts).
    n_top : int, optional
        ``b``: directions kept for the update (default ``n_delta``; ``b < N`` is "-t").
    learning_rate : float or callable
        ``alpha``, or a schedule ``f(progress_remaining)`` going from 1 to 0.
    delta_std : float or callable
        ``nu``, the exploration noise, or a schedule.
    zero_policy : bool
        Start from all-zero parameters (the paper); else torch-like random ones.
    alive_bonus_offset : float
        Added to every training reward (the paper's "shift"); never to evaluations.
    n_eval_episodes : int
        Episodes per candidate; its return is their mean.
    policy_kwargs : dict, optional
        ``net_arch``, ``activation_fn``, ``with_bias``, ``squash_output``.
    stats_window_size : int
        Episodes averaged in ``rollout/ep_rew_mean`` and ``rollout/ep_len_mean``.
    tensorboard_log : str, optional
        Folder for ``<tb_log_name>_<n>/``: progress.csv, and TensorBoard event files when a
        writer is installed (``pip install tensorboard``).
    seed : int, optional
        One seed gives bit-identical weights, whatever evaluates the rollouts. Default:
        drawn from NumPy's global generator (so SB3's ``set_random_seed`` fixes it).
    verbose : int
        1 prints a table every ``log_interval`` iterations.
    device : str
        Accepted for compatibility; ARS computes on the CPU (a GPU device warns once).
    normalize_obs : bool
        V2 (True): normalise observations with the statistics of all visited states.
    common_random_numbers : bool
        Give the + and - rollouts of a direction the same env seeds.
    normalization_samples : int
        V2: before the first iteration, estimate the statistics from whole episodes of
        the initial policy totalling at least this many steps (counted as timesteps).
    max_episode_steps : int, optional
        End every episode after this many steps; required for an env that has no time
        limit of its own and may never end.

    Positional arguments after ``policy`` follow the seed's order (``n_delta, n_top, ...``)
    when the first is an int, else sb3-contrib's (``env, n_delta, ...``).

    Examples
    --------
    >>> model = ARS("LinearPolicy", "Pendulum-v1", n_delta=4, n_top=1, normalize_obs=True)
    >>> model = model.learn(2_000)
    >>> model.save("pendulum.zip"); model = ARS.load("pendulum")
    """

    def __init__(
        self,
        policy: str | type[ARSPolicy] | ARSPolicy,
        *args: Any,
        env: Any = None,
        n_delta: int = 8,
        n_top: int | None = None,
        learning_rate: float | Schedule = 0.02,
        delta_std: float | Schedule = 0.05,
        zero_policy: bool = True,
        alive_bonus_offset: float = 0.0,
        n_eval_episodes: int = 1,
        policy_kwargs: dict[str, Any] | None = None,
        stats_window_size: int = 100,
        tensorboard_log: str | os.PathLike | None = None,
        seed: int | None = None,
        verbose: int = 0,
        device: Any = "cpu",
        _init_setup_model: bool = True,
        normalize_obs: bool = False,
        common_random_numbers: bool = True,
        normalization_samples: int = 0,
        max_episode_steps: int | None = None,
    ):
        a = _arguments(locals(), "ARS", SEED_ORDER if _is_int(args[:1]) else SB3_ORDER)
        for name in HPARAMS:
            setattr(self, name, getattr(a, name))
        self.policy_class = policy
        self.seed = int(np.random.randint(0, 2**31 - 1)) if self.seed is None else self.seed
        self.num_timesteps, self._n_updates, self._total_timesteps = 0, 0, 0
        self._current_progress_remaining = 1.0
        self.ep_info_buffer: collections.deque = collections.deque(maxlen=int(stats_window_size))
        self._logger: Any = None
        self.gym_env: gym.Env | None = None  # what the rollouts step
        self.env_id: str | None = None
        self._vec_env = self._vec_normalize = None  # an SB3 VecEnv given by the user
        self.policy: ARSPolicy | None = None
        self.observation_space = self.action_space = None
        if isinstance(policy, ARSPolicy):  # an instance brings its spaces
            self.observation_space = policy.observation_space
            self.action_space = policy.action_space
        if a.env is not None:
            self.set_env(a.env)
        self._check_hparams()
        self.hparams_initial = _FrozenHParams(self.hparams)
        if a._init_setup_model and self.observation_space is not None:
            self._setup_model()

    def _check_hparams(self) -> None:
        """Refuse settings that cannot train, naming the parameter, before any rollout."""
        if self.n_top is None:
            self.n_top = self.n_delta
        for name, (low, high) in INTEGER_RANGES.items():
            value = getattr(self, name)
            if not _is_int(value) or not low <= value <= high:
                raise ValueError(f"{name} must be an integer from {low} to {high:,}; got {value!r}")
        if self.max_episode_steps is not None and (
            not _is_int(self.max_episode_steps) or self.max_episode_steps < 1
        ):
            raise ValueError(
                f"max_episode_steps must be None or at least 1; got {self.max_episode_steps!r}"
            )
        if self.n_top > self.n_delta:
            warnings.warn(
                f"n_top={self.n_top} is larger than n_delta={self.n_delta}; using "
                f"n_top={self.n_delta}",
                stacklevel=3,
            )
            self.n_top = self.n_delta
        for name, low in (("learning_rate", 0.0), ("delta_std", None)):
            if not callable(getattr(self, name)):
                _check_float(name, getattr(self, name), low=low, positive=low is None)
        _check_float("alive_bonus_offset", self.alive_bonus_offset)
        if self.normalize_obs and self._vec_normalize is not None and self._vec_normalize.norm_obs:
            raise ValueError(
                "the env is an SB3 VecNormalize, which already normalises observations: use "
                "normalize_obs=False (V1 on its observations, as sb3-contrib), or drop VecNormalize"
            )

    def _setup_model(self) -> None:
        """Build the policy for the model's spaces (V2 statistics, initial parameters)."""
        if isinstance(self.policy_class, ARSPolicy):
            policy = self.policy_class
        else:
            cls = POLICY_ALIASES.get(self.policy_class, self.policy_class)
            if not (isinstance(cls, type) and issubclass(cls, ARSPolicy)):
                raise ValueError(
                    f"policy must be one of {list(POLICY_ALIASES)}, an ARSPolicy class "
                    f"or instance; got {self.policy_class!r}"
                )
            policy = cls(self.observation_space, self.action_space, **(self.policy_kwargs or {}))
        _check_same_spaces(_spaces_of(policy), (self.observation_space, self.action_space))
        if self.normalize_obs and policy.obs_rms is None:
            policy.obs_rms = RunningMeanStd((policy.obs_dim,))
        if self.zero_policy:
            policy.load_from_vector(np.zeros(policy.n_params))
        elif not isinstance(self.policy_class, ARSPolicy):
            policy.load_from_vector(policy.init_weights(np.random.default_rng(self.seed)))
        self.policy = policy

    # -- environments -----------------------------------------------------------------------
    def set_env(self, env: Any, force_reset: bool = True) -> None:
        """Train on ``env`` (id, env, SB3 VecEnv or function); its spaces must match the model's.

        ``force_reset`` is accepted for SB3 compatibility: every rollout resets anyway.
        """
        gym_env, vec_env, vec_normalize = resolve_env(env)
        check_spaces(gym_env.observation_space, gym_env.action_space)
        if self.observation_space is not None:
            _check_same_spaces(
                _spaces_of(gym_env), (self.observation_space, self.action_space), "the env"
            )
        self.observation_space, self.action_space = gym_env.observation_space, gym_env.action_space
        self.gym_env, self._vec_env, self._vec_normalize, self._env_view = (
            gym_env,
            vec_env,
            vec_normalize,
            None,
        )
        self.env_id = gym_env.spec.id if gym_env.spec is not None else self.env_id

    # -- one iteration ------------------------------------------------------------------------
    def _iteration(self, evaluator: Any, callbacks: _Callbacks) -> None:
        """One iteration of Algorithm 2; the comments give the paper's line numbers.

        Line 2 (M = 0, mu = 0, Sigma = I) is where the policy and RunningMeanStd start.
        """
        alpha, nu = self._schedule_value("learning_rate"), self._schedule_value("delta_std")
        theta, n_params = self.policy.parameters_to_vector(), self.policy.n_params
        # Line 4: N directions delta_k with i.i.d. standard normal entries. Each is the stream
        # direction(seed, iteration, k), so it is drawn where it is used: in the rollouts and,
        # for the b kept directions, in the step below.
        # Line 5: 2N rollouts, of theta + nu delta_k and theta - nu delta_k, statistics frozen.
        returns, visited = self._rollouts(evaluator, theta, nu, callbacks)
        r_plus, r_minus = returns[: self.n_delta], returns[self.n_delta :]
        # Line 6: order the directions by max(r+_k, r-_k) and keep the best b.
        top = np.argsort(-np.maximum(r_plus, r_minus), kind="stable")[: self.n_top]
        # Line 7: step along sum_k (r+_k - r-_k) delta_k, scaled by alpha / (b sigma_R), with
        # sigma_R the std of the 2b kept returns. sigma_R = 0 means every kept return is the
        # same, so every r+_k - r-_k is 0: no step.
        sigma_r = np.concatenate([r_plus[top], r_minus[top]]).std()
        step_size = alpha / (self.n_top * sigma_r) if sigma_r > 0 else 0.0
        deltas = np.stack([direction(self.seed, self._n_updates, k, n_params) for k in top])
        self.policy.load_from_vector(theta + step_size * ((r_plus[top] - r_minus[top]) @ deltas))
        # Line 8 (V2): mu and Sigma absorb every state visited in this iteration, in order.
        self.policy.obs_rms = merge_statistics(self.policy.obs_rms, visited)
        _update_vec_normalize(self._vec_normalize, visited)  # an SB3 VecNormalize env, likewise
        # Line 9: on to the next iteration (the log gives the index of this one).
        self.logger.record("train/iterations", self._n_updates, exclude="tensorboard")
        self._n_updates += 1
        self.logger.record("train/delta_std", nu)
        self.logger.record("train/learning_rate", alpha)
        self.logger.record("train/step_size", float(step_size))
        self.logger.record("rollout/return_std", float(sigma_r))

    def _rollouts(
        self, evaluator: Any, theta: np.ndarray, nu: float, callbacks: _Callbacks
    ) -> tuple[np.ndarray, list]:
        """The 2N candidates' returns (with the shift) and visited-state statistics.

        Candidate ``c < N`` is ``theta + nu delta_c``, candidate ``N + c`` is
        ``theta - nu delta_c``; with common random numbers both share the env seeds.
        """
        n, track = self.n_delta, self.policy.obs_rms is not None or _filters(self._vec_normalize)
        it = Iteration(
            policy=_structure(self.policy),
            theta=theta,
            delta_std=nu,
            seed=self.seed,
            index=self._n_updates,
            track_obs=track,
            max_episode_steps=self.max_episode_steps,
            obs_filter=_obs_filter(self._vec_normalize),
        )
        keys = [c % n if self.common_random_numbers else c for c in range(2 * n)]
        jobs = [Job(c, c % n, 1 if c < n else -1, self._env_seeds(keys[c])) for c in range(2 * n)]
        # A direction's + and - candidates side by side: a worker draws the direction once.
        order = [c for k in range(n) for c in (k, n + k)]
        callbacks.on_rollout_start()
        start = self.num_timesteps
        evaluated = evaluator.evaluate(it, [jobs[c] for c in order], callbacks.step_reporter())
        by_candidate = dict(zip(order, evaluated))
        callbacks.on_rollout_end()
        results = [by_candidate[c] for c in range(2 * n)]
        for job, result in zip(jobs, results):
            _check_finite(result, job, self._n_updates, n)
        for result in results:
            self.ep_info_buffer.extend(
                {"r": float(r), "l": int(n_steps)}
                for r, n_steps in zip(result.returns, result.lengths)
            )
        self.num_timesteps = start + int(sum(r.lengths.sum() for r in results))
        shifted = [r.training_return(self.alive_bonus_offset) for r in results]
        return np.array(shifted), [r.visited for r in results]

    def _env_seeds(self, key: int) -> np.ndarray:
        episodes = range(self.n_eval_episodes)
        return np.array(
            [episode_seed(self.seed, self._n_updates, key, e) for e in episodes], dtype=np.uint64
        )

    def _schedule_value(self, name: str) -> float:
        """A hyper-parameter's current value: a float, or its schedule's value now."""
        value = getattr(self, name)
        if callable(value):
            value = value(self._current_progress_remaining)
            _check_float(
                f"{name} (its schedule at progress {self._current_progress_remaining:.3f})",
                value,
                low=0.0 if name == "learning_rate" else None,
                positive=name == "delta_std",
            )
        return float(value)

    def _warm_up_statistics(self, evaluator: Any) -> None:
        """``normalization_samples``: V2 statistics from episodes of the initial policy."""
        theta, visited, episode = self.policy.parameters_to_vector(), [], 0
        it = Iteration(self.policy, theta, 0.0, self.seed, 0, True, self.max_episode_steps)
        steps, batch = 0, WARM_UP_BATCH
        while steps < self.normalization_samples:
            seeds = [
                _stream(self.seed, WARM_UP, episode + i).generate_state(1) for i in range(batch)
            ]
            jobs = [Job(i, 0, 1, np.asarray(s, np.uint64), theta) for i, s in enumerate(seeds)]
            for result in evaluator.evaluate(it, jobs):
                visited.append(result.visited)
                steps += int(result.lengths.sum())
            episode += batch
        self.num_timesteps += steps
        self.policy.obs_rms = merge_statistics(self.policy.obs_rms, visited)

    # -- training ------------------------------------------------------------------------------
    def learn(
        self,
        total_timesteps: int,
        *args: Any,
        env: Any = None,
        callback: Any = None,
        log_interval: int | None = 1,
        tb_log_name: str = "ARS",
        reset_num_timesteps: bool = True,
        async_eval: Any = None,
        progress_bar: bool = False,
        default_root_dir: str | os.PathLike | None = None,
        checkpoint_interval: int | None = None,
        log_every_n_steps: int | None = None,
    ) -> ARS:
        """Train for ``total_timesteps`` env steps (the last iteration may overshoot).

        Parameters
        ----------
        total_timesteps : int
            Env steps to train for, counted over all candidates and episodes.
        env : optional
            Env id, env, SB3 VecEnv or env function to (re)train on.
        callback : optional
            A function ``f(locals, globals)`` called after every iteration, an SB3 callback
            (called after every env step, as in SB3), ars's :class:`EvalCallback`, or a list
            of them. Returning False stops training.
        log_interval : int, optional
            Log (and with ``verbose=1`` print) every this many iterations; None: never.
            ``log_every_n_steps`` is the seed's name for it.
        tb_log_name : str
            Run name under ``tensorboard_log``.
        reset_num_timesteps : bool
            False continues the step count (and schedules) of the previous call.
        async_eval : AsyncEval or ExecutorEval, optional
            Evaluate the candidates elsewhere; ``learn`` never closes it.
        progress_bar : bool
            Show a tqdm progress bar (``pip install tqdm``).
        default_root_dir : str, optional
            The seed's name for a log folder used as it is (``tensorboard_log`` adds
            ``<tb_log_name>_<n>`` sub-folders).
        checkpoint_interval : int, optional
            Every this many iterations, and at the end, write ``checkpoint.npz`` to the log
            folder, atomically, with the callbacks' state. To resume exactly:
            ``ARS.load(checkpoint)``, then ``learn(total - model.num_timesteps,
            reset_num_timesteps=False)``.

        Positional arguments after ``total_timesteps`` follow the seed's order (``env,
        callback, log_every_n_steps, ...``) when the first is an env, else sb3-contrib's
        (``callback, log_interval, ...``).

        Returns
        -------
        ARS
            ``self``.
        """
        a = _arguments(
            locals(), "learn", LEARN_SEED_ORDER if _looks_like_env(args) else LEARN_SB3_ORDER
        )
        if a.env is not None:
            self.set_env(a.env)
        if self.policy is None:
            if self.observation_space is None:
                raise ValueError("no env to train on: pass env= to ARS(...) or to learn(...)")
            self._setup_model()
        self._check_hparams()
        _check_float("total_timesteps", total_timesteps, low=0.0)
        evaluator = a.async_eval or InProcessEval(self.gym_env, missing="an env or an async_eval")
        if a.reset_num_timesteps:
            self.num_timesteps = 0
            self.ep_info_buffer.clear()
        self._total_timesteps = int(total_timesteps) + self.num_timesteps
        log_interval = a.log_interval if a.log_every_n_steps is None else a.log_every_n_steps
        self._setup_logger(a.default_root_dir, a.tb_log_name, a.reset_num_timesteps)
        if a.checkpoint_interval and self.logger.dir is None:
            raise ValueError(
                "checkpoint_interval needs a log folder: default_root_dir or tensorboard_log"
            )
        checkpoint = self.logger.dir / "checkpoint.npz" if a.checkpoint_interval else None
        callbacks = _Callbacks(a.callback, self, a.progress_bar)
        self._start_time, self._start_steps = time.perf_counter(), self.num_timesteps
        rms = self.policy.obs_rms
        if self.normalization_samples and rms is not None and rms.count == 0:
            self._warm_up_statistics(evaluator)
        if checkpoint and self._n_updates == 0:  # a run killed early can resume too
            write_checkpoint(self, checkpoint, callbacks)
        callbacks.on_training_start(dict(locals(), total_timesteps=int(total_timesteps)), globals())
        while self.num_timesteps < self._total_timesteps:
            self._current_progress_remaining = 1.0 - self.num_timesteps / self._total_timesteps
            if not self._step(evaluator, callbacks, log_interval):
                break
            if checkpoint and self._n_updates % a.checkpoint_interval == 0:
                write_checkpoint(self, checkpoint, callbacks)
        if checkpoint:
            write_checkpoint(self, checkpoint, callbacks)
        callbacks.on_training_end()
        return self

    def _step(self, evaluator: Any, callbacks: _Callbacks, log_interval: int | None) -> bool:
        """One iteration, its callbacks and its log row, or nothing at all.

        On Ctrl+C, an error or a callback's stop in the middle, the model and the
        callbacks are left exactly as they were before. Returns False to stop training.
        """
        saved = self._state(callbacks)
        try:
            self._iteration(evaluator, callbacks)
            # Before the log row is written: the evaluations go in it.
            keep_going = callbacks.on_iteration(locals())
            if log_interval and self._n_updates % log_interval == 0:
                self.dump_logs()
            return keep_going
        except BaseException as error:
            self._restore(saved, callbacks)
            if isinstance(error, StopTraining):
                return False
            raise

    def _state(self, callbacks: _Callbacks) -> dict[str, Any]:
        """What an iteration changes, to be put back if it does not finish."""
        return dict(
            theta=self.policy.parameters_to_vector(),
            obs_rms=self.policy.obs_rms,
            counters=(self.num_timesteps, self._n_updates),
            episodes=list(self.ep_info_buffer),
            vec_normalize=_copy_vec_normalize(self._vec_normalize),
            callbacks=callbacks.state_dict(),
        )

    def _restore(self, state: dict[str, Any], callbacks: _Callbacks) -> None:
        self.policy.load_from_vector(state["theta"])
        self.policy.obs_rms = state["obs_rms"]
        self.num_timesteps, self._n_updates = state["counters"]
        self.ep_info_buffer.clear()
        self.ep_info_buffer.extend(state["episodes"])
        _restore_vec_normalize(self._vec_normalize, state["vec_normalize"])
        callbacks.load_state_dict(state["callbacks"])
        getattr(self.logger, "values", {}).clear()

    def predict(
        self,
        observation: Any,
        state: Any = None,
        episode_start: Any = None,
        deterministic: bool = True,
    ) -> tuple[Any, None]:
        """``(action, None)`` for one observation or a batch (SB3's signature and shapes)."""
        if self.policy is None:
            raise ValueError("the model has no policy yet: give it an env, or learn(..., env=...)")
        return self.policy.predict(observation, state, episode_start, deterministic)

    # -- plumbing: defined in the sections below ---------------------------------------------
    def dump_logs(self) -> None:
        """Record the rollout and time statistics, and write the log row."""
        _dump_logs(self)

    logger = property(
        lambda self: self._logger if self._logger is not None else _null_logger(self),
        doc="The logger ``learn`` writes to (see :meth:`set_logger`).",
    )

    def set_logger(self, logger: Any) -> None:
        """Log to ``logger``: ars's :class:`Logger` or SB3's ``configure(folder, formats)``."""
        self._logger, self._custom_logger = logger, True

    def _setup_logger(self, root_dir: Any, tb_log_name: str, reset: bool) -> None:
        if not getattr(self, "_custom_logger", False):
            self._logger = Logger(
                self.verbose,
                _log_dir(self, root_dir, tb_log_name, reset),
                tensorboard=self.tensorboard_log is not None,
            )

    env = property(
        lambda self: _vec_env_view(self), doc="The training env as an SB3 VecEnv (or None)."
    )

    def get_env(self) -> Any:
        """The training env as a VecEnv (SB3's ``reset``/``step`` API); ``gym_env`` is the
        gymnasium env itself."""
        return self.env

    def get_vec_normalize_env(self) -> Any:
        """The SB3 ``VecNormalize`` env given by the user, if any."""
        return self._vec_normalize

    def set_random_seed(self, seed: int | None = None) -> None:
        """Use ``seed`` from now on (directions and env seeds of later iterations)."""
        self.seed = int(np.random.randint(0, 2**31 - 1)) if seed is None else seed
        self._check_hparams()
        if self.action_space is not None:
            self.action_space.seed(self.seed)

    hparams = property(lambda self: _HParams(self), doc="The hyper-parameters in use (writable).")
    device = property(
        lambda self: _cpu_device(),
        lambda self, value: _check_device(value),
        doc="Always the CPU: ARS computes in NumPy.",
    )

    def evaluate_candidates(
        self, candidate_weights: Any, callback: Any = None, async_eval: Any = None
    ) -> Any:
        """Return of each row of ``candidate_weights`` (mean over ``n_eval_episodes``, shifted).

        The seed's method: an array (or torch tensor) in, the same kind out.
        """
        return _evaluate_candidates(self, candidate_weights, callback, async_eval)

    def warm_start(self, demonstrations: Any, ridge: float = 1e-3) -> None:
        """Fit the linear policy to demonstrations before training (see :func:`warm_start`)."""
        warm_start(self, demonstrations, ridge)

    def get_parameters(self) -> dict[str, dict[str, np.ndarray]]:
        """``{"policy": policy.state_dict()}``: sb3-contrib's names, NumPy arrays."""
        if self.policy is None:
            raise ValueError("the model has no policy yet: give it an env, or learn(..., env=...)")
        return {"policy": self.policy.state_dict()}

    def set_parameters(
        self, load_path_or_dict: Any, exact_match: bool = True, device: Any = "auto"
    ) -> None:
        """Load parameters from a model file or a :meth:`get_parameters` dict, all or nothing.

        ``device`` is accepted for SB3 compatibility: ars computes on the CPU.
        """
        _set_parameters(self, load_path_or_dict, exact_match)

    def save(
        self,
        path: str | os.PathLike | io.IOBase,
        exclude: Sequence[str] | None = None,
        include: Sequence[str] | None = None,
    ) -> Path | None:
        """Write the model as plain arrays and JSON (an ``.npz``, itself a zip), atomically.

        A path without a suffix gets ``.zip``, as in SB3. ``exclude`` may drop the episode
        window (``"ep_info_buffer"``); ``include`` adds attributes with JSON values.
        """
        return save_model(self, path, exclude=exclude, include=include)

    @classmethod
    def load(
        cls,
        path: str | os.PathLike | io.IOBase,
        env: Any = None,
        device: Any = "auto",
        custom_objects: dict[str, Any] | None = None,
        print_system_info: bool = False,
        force_reset: bool = True,
        **kwargs: Any,
    ) -> ARS:
        """A model from a file of :meth:`save` (or sb3-contrib's ``ARS.save``); ``learn``
        continues from it. ``custom_objects`` and ``kwargs`` override saved settings.
        ``device`` falls back to the CPU as in the constructor; ``force_reset`` is accepted
        for SB3 compatibility (every rollout resets anyway)."""
        return load_model(
            cls, path, env, device, {**(custom_objects or {}), **kwargs}, print_system_info
        )


def merge_statistics(
    obs_rms: RunningMeanStd | None, visited: Sequence[RunningMeanStd | None]
) -> Any:
    """``obs_rms`` merged with each candidate's visited states, in candidate order (None: V1).

    The order is fixed, so the result has the same bits whoever ran the candidates.
    """
    if obs_rms is None:
        return None
    merged = obs_rms.copy()
    for rms in visited:
        merged.combine(rms)
    return merged


class StopTraining(Exception):
    """Raised inside a rollout when a per-step callback returns False."""


def _check_finite(result: Result, job: Job, iteration: int, n_delta: int) -> None:
    """A NaN or inf reward or observation stops training with the candidate named."""
    bad_reward = not np.isfinite(result.returns).all()
    visited = result.visited
    if bad_reward or (
        visited is not None
        and not (np.isfinite(visited.mean).all() and np.isfinite(visited.var).all())
    ):
        raise FloatingPointError(
            f"iteration {iteration}, candidate {job.candidate} (direction {job.k}, "
            f"{'+' if job.sign > 0 else '-'}): the env returned a non-finite "
            f"{'reward' if bad_reward else 'observation'} (nan or inf) in an episode with env "
            f"seeds {[int(s) for s in job.seeds]}. The weights are as they were before this "
            "iteration."
        )


def _check_float(name: str, value: Any, low: float | None = None, positive: bool = False) -> None:
    """A finite number (and at least ``low``, or > 0), else a ValueError naming ``name``."""
    if not isinstance(value, (int, float, np.integer, np.floating)) or isinstance(value, bool):
        raise ValueError(f"{name} must be a number; got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite; got {value!r}")
    if positive and value <= 0:
        raise ValueError(f"{name} must be positive; got {value!r}")
    if low is not None and value < low:
        raise ValueError(f"{name} must be at least {low:g}; got {value!r}")


def _is_int(value: Any) -> bool:
    """An int (not a bool); for a tuple of one item, whether that item is."""
    if isinstance(value, tuple):
        return len(value) == 1 and _is_int(value[0])
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


# ===========================================================================================
# Plumbing
# ===========================================================================================
#
# The algorithm is complete above. What follows serves it, in the order it is used:
# evaluators (this process, worker processes, any executor), logging and callbacks,
# model files, adapters for Stable-Baselines3 users, and the command line.

# -------------------------------------------------------------------------------------------
# Evaluators: InProcessEval, AsyncEval, ExecutorEval
# -------------------------------------------------------------------------------------------
#
# An evaluator turns (Iteration, jobs) into one Result per job, in job order. The learner
# sends the iteration (policy, parameters, statistics) once per worker, then jobs of a
# few integers each: candidate, direction, sign and env seeds. Workers rebuild the
# candidate from its direction's stream, so the result never depends on who ran it.

DEFAULT_JOB_TIMEOUT = 600.0  # seconds without a finished job: a stuck env, not a long episode
DEFAULT_START_TIMEOUT = 120.0  # seconds for a worker to start and build its env
RESULT_INTERVAL = 0.25  # seconds: a worker sends its finished jobs at least this often


def batch_sizes(n_jobs: int, n_workers: int) -> list[int]:
    """Guided self-scheduling: each batch is the jobs left over twice the workers.

    Large batches first keep the messages few; ever smaller ones at the end keep every
    worker busy until the last job (for 460 jobs on 2 workers: 115, 87, 65, ..., 1).
    """
    sizes, left = [], n_jobs
    while left:
        size = min(left, max(1, -(-left // (2 * n_workers))))
        sizes.append(size)
        left -= size
    return sizes


class _Evaluator:
    """The seed's evaluator API (``send_jobs``, ``get_results``, ``get_obs_rms``,
    ``sync_obs_rms``, ``seed``, ``set_options``, ``close``), built on ``evaluate``."""

    n_workers = 1

    def _setup(self, train_policy: Any, n_eval_episodes: int) -> None:
        self.set_policy(train_policy)
        if not _is_int(n_eval_episodes) or n_eval_episodes < 1:
            raise ValueError(
                f"n_eval_episodes must be an integer of at least 1; got {n_eval_episodes!r}"
            )
        self.n_eval_episodes = int(n_eval_episodes)
        self._seed, self._n_sends = int(np.random.randint(0, 2**31 - 1)), 0
        self._pending: tuple | None = None
        self._options: list[dict | None] = [None] * self.n_workers
        self._lock = threading.Lock()

    def _exclusive(self) -> Any:
        """One caller at a time: a second thread gets a clear error, not corrupted messages."""
        if not self._lock.acquire(blocking=False):
            raise RuntimeError(
                f"this {type(self).__name__} is in use by another thread; "
                "give each thread its own evaluator"
            )
        return _Release(self._lock)

    def _record_visited(self, worker: int, result: Result) -> None:
        if result.visited is not None:  # an empty RunningMeanStd takes the shape of the first
            self._visited[worker].combine(result.visited)

    def set_policy(self, policy: Any) -> None:
        """Evaluate later ``send_jobs`` with ``policy``'s structure and statistics (a copy:
        :meth:`sync_obs_rms` changes the evaluator's, never the caller's)."""
        policy = _policy_of(policy)
        self.policy = None if policy is None else _structure(policy)
        self._visited = [self._no_statistics() for _ in range(self.n_workers)]

    def send_jobs(
        self, candidate_weights: Any, pop_size: int | None = None, episode_seeds: Any = None
    ) -> None:
        """Queue the evaluation of the first ``pop_size`` rows of ``candidate_weights``.

        Parameters
        ----------
        candidate_weights : array_like or torch.Tensor
            ``(n, n_params)`` parameter vectors.
        pop_size : int, optional
            How many rows to evaluate (default: all), as in sb3-contrib.
        episode_seeds : array_like, optional
            ``(pop_size, n_eval_episodes)`` env seeds; by default they derive from
            :meth:`seed` and a counter of calls.
        """
        if self.closed:
            raise RuntimeError(f"this {type(self).__name__} is closed")
        if self._pending is not None:
            raise RuntimeError(
                "send_jobs was called twice without get_results in between: "
                "call get_results() to collect the first jobs"
            )
        if self.policy is None:
            raise ValueError(
                f"this {type(self).__name__} has no policy: pass train_policy, or set_policy()"
            )
        weights = _as_array(candidate_weights)
        n = len(weights) if pop_size is None else int(pop_size)
        if (
            weights.ndim != 2
            or weights.shape[1] != self.policy.n_params
            or not 0 < n <= len(weights)
        ):
            raise ValueError(
                f"candidate_weights must have shape (>= pop_size, {self.policy.n_params}) "
                f"with pop_size >= 1; got {weights.shape} and pop_size={pop_size}"
            )
        if episode_seeds is None:
            episode_seeds = [
                [episode_seed(self._seed, self._n_sends, c, e) for e in range(self.n_eval_episodes)]
                for c in range(n)
            ]
        seeds = np.asarray(episode_seeds, dtype=np.uint64)
        if seeds.ndim != 2 or len(seeds) != n:
            raise ValueError(f"episode_seeds must have shape ({n}, n_episodes); got {seeds.shape}")
        self._n_sends += 1
        it = Iteration(self.policy, np.zeros(0), 0.0, 0, 0, track_obs=True)  # for get_obs_rms
        self._pending = (it, [Job(c, 0, 1, seeds[c], weights[c]) for c in range(n)])

    def get_results(self) -> list[tuple[int, tuple[np.ndarray, np.ndarray]]]:
        """``[(candidate_index, (episode_rewards, episode_lengths)), ...]`` for the jobs sent."""
        if self._pending is None:
            raise RuntimeError("get_results() without send_jobs(): there is nothing to collect")
        (it, jobs), self._pending = self._pending, None
        results = self.evaluate(it, jobs, record=True)
        return [(job.candidate, (r.returns, r.lengths)) for job, r in zip(jobs, results)]

    def get_obs_rms(self) -> list[RunningMeanStd]:
        """Per worker, the statistics of the states visited since the last sync."""
        return [rms.copy() for rms in self._visited]

    def sync_obs_rms(self, obs_rms: RunningMeanStd | None) -> None:
        """Normalise with ``obs_rms`` from now on (V2); resets the visited-state statistics."""
        if self.policy is None:
            raise ValueError(f"this {type(self).__name__} has no policy to normalise for")
        self.policy.obs_rms = None if obs_rms is None else _as_rms(obs_rms).copy()
        self._visited = [self._no_statistics() for _ in range(self.n_workers)]

    def _no_statistics(self) -> RunningMeanStd:
        return RunningMeanStd((0 if self.policy is None else self.policy.obs_dim,))

    def seed(self, seed: int | None = None) -> list:
        """Seed the env seeds of later ``send_jobs``; as sb3-contrib, ``None`` does nothing."""
        if seed is None:
            return []
        self._seed, self._n_sends = int(seed), 0
        return [[int(seed) + i] for i in range(self.n_workers)]

    def set_options(self, options: list[dict] | dict | None = None) -> list[None]:
        """Options for every ``env.reset``: one dict for all workers, or one per worker."""
        if isinstance(options, list) and len(options) != self.n_workers:
            raise ValueError(f"got {len(options)} options for {self.n_workers} workers")
        self._options = list(options) if isinstance(options, list) else [options] * self.n_workers
        return [None] * self.n_workers

    def __enter__(self) -> _Evaluator:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    closed = False

    def close(self) -> None:
        """Free what the evaluator holds. Idempotent."""


class _Release:
    def __init__(self, lock: threading.Lock):
        self.lock = lock

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc_info: Any) -> None:
        self.lock.release()


class InProcessEval(_Evaluator):
    """Evaluate candidates one after the other in this process (``learn``'s default).

    Parameters
    ----------
    env : str, gymnasium.Env, SB3 VecEnv or callable
    train_policy : ARSPolicy or ARS, optional
        For the seed's ``send_jobs``/``get_results``.
    n_eval_episodes : int
    """

    def __init__(
        self, env: Any, train_policy: Any = None, n_eval_episodes: int = 1, missing: str = "an env"
    ):
        if env is None:
            raise ValueError(f"no env to evaluate on: pass {missing}")
        self.env = make_env(env)
        self._setup(train_policy, n_eval_episodes)

    def evaluate(
        self, it: Iteration, jobs: Sequence[Job], on_step: Any = None, record: bool = False
    ) -> list[Result]:
        """One Result per job, in job order.

        ``on_step`` is told about every env step; ``record`` adds the visited states to what
        :meth:`get_obs_rms` returns (the seed's API; ``learn`` merges them itself).
        """
        with self._exclusive():
            results = [run_job(self.env, it, job, self._options[0], on_step) for job in jobs]
        for result in results if record else ():
            self._record_visited(0, result)
        return results


class EvaluationTimeout(RuntimeError):
    """A job took longer than the evaluator's ``job_timeout``."""


def _worker(remote: Any, parent_remote: Any, env_fn_bytes: bytes) -> None:
    """An AsyncEval worker: builds its env once, then evaluates the batches it receives.

    The protocol alternates strictly: the main process sends a batch only when the
    previous one's results are all in, so neither side ever blocks on a full pipe while
    the other does too, whatever the size of the messages.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C is the main process's to handle
    parent_remote.close()
    try:
        env = make_env(cloudpickle.loads(env_fn_bytes))
        check_spaces(env.observation_space, env.action_space)
        remote.send(("ready", None))
    except BaseException:
        remote.send(("error", (None, traceback.format_exc())))
        return
    it = None
    while True:
        try:
            command, data = remote.recv()
        except (EOFError, OSError):  # the main process is gone
            break
        if command == "close":
            break
        it_bytes, options, batch = data
        it = cloudpickle.loads(it_bytes) if it_bytes is not None else it
        done, sent_at = [], time.monotonic()
        for position, job in enumerate(batch, 1):
            try:
                done.append((job.candidate, run_job(env, it, job, options)))
            except BaseException:
                remote.send(("results", done))
                remote.send(("error", (job.candidate, traceback.format_exc())))
                break
            # Few messages per batch, yet regular news of progress.
            if position == len(batch) or time.monotonic() - sent_at > RESULT_INTERVAL:
                remote.send(("results", done))
                done, sent_at = [], time.monotonic()
    env.close()
    remote.close()


def _shutdown(processes: list[Any], remotes: list[Any]) -> None:
    """Stop the workers: ask, then terminate, then kill. Safe to call more than once."""
    for remote in remotes:
        try:
            remote.send(("close", None))
        except (OSError, ValueError):
            pass
    deadline = time.monotonic() + 1.0  # idle workers exit at once; busy ones are terminated
    for process in processes:
        process.join(max(deadline - time.monotonic(), 0.0))
    for process in processes:
        if process.is_alive():
            process.terminate()
            process.join(1.0)
        if process.is_alive():
            process.kill()
            process.join()
    for remote in remotes:
        remote.close()


class AsyncEval(_Evaluator):
    """Evaluate candidates in worker processes, one env each, over ``multiprocessing`` Pipes.

    Work is dealt in batches sized from the jobs left and the number of workers (see
    :func:`batch_sizes`), to whichever worker is free. ``learn(async_eval=...)`` gives the
    same weights as the single-process run for any number of workers, and does not close
    the evaluator: one AsyncEval serves many ``learn`` calls. Close it with :meth:`close`
    or a ``with`` block (it also closes when garbage-collected or at exit).

    Parameters
    ----------
    envs_fn : list of callables
        One function per worker returning a gymnasium env, an SB3 VecEnv holding one env,
        or an env id; sent with cloudpickle.
    train_policy : ARSPolicy or ARS, optional
        The policy for the seed's ``send_jobs`` (``learn`` sends its own).
    start_method : str, optional
        ``"forkserver"`` (default where available), ``"spawn"`` or ``"fork"``. With the first
        two, guard your script with ``if __name__ == "__main__":``.
    n_eval_episodes : int
        Episodes per candidate for ``send_jobs``.
    job_timeout : float
        Seconds a worker may take for one job before it is taken for stuck: the error
        names the worker, the candidate and its env seeds, and the workers are stopped.
    start_timeout : float
        Seconds for each worker to start and build its env.

    Examples
    --------
    >>> model = ARS("LinearPolicy", "HalfCheetah-v4", n_delta=32, n_top=4)
    >>> with AsyncEval([lambda: make_env("HalfCheetah-v4")] * 2) as async_eval:
    ...     model.learn(100_000, async_eval=async_eval)
    """

    def __init__(
        self,
        envs_fn: Sequence[Callable[[], Any]],
        train_policy: Any = None,
        start_method: str | None = None,
        n_eval_episodes: int = 1,
        job_timeout: float = DEFAULT_JOB_TIMEOUT,
        start_timeout: float = DEFAULT_START_TIMEOUT,
    ):
        if not envs_fn:
            raise ValueError("envs_fn must hold at least one env function (one per worker)")
        _check_float("job_timeout", job_timeout, positive=True)
        _check_float("start_timeout", start_timeout, positive=True)
        methods = multiprocessing.get_all_start_methods()
        start_method = start_method or ("forkserver" if "forkserver" in methods else "spawn")
        if start_method not in methods:
            raise ValueError(f"start_method must be one of {methods}; got {start_method!r}")
        self.n_workers, self.job_timeout = len(envs_fn), float(job_timeout)
        self._setup(train_policy, n_eval_episodes)
        self.remotes: list[Any] = []
        self.processes: list[Any] = []
        self._closer = weakref.finalize(self, _shutdown, self.processes, self.remotes)
        self._batches: list[collections.deque] = [collections.deque() for _ in envs_fn]
        self._deadlines = [math.inf] * self.n_workers  # a busy worker's next result is due by then
        ctx = multiprocessing.get_context(start_method)
        for env_fn in envs_fn:
            remote, work_remote = ctx.Pipe()
            process = ctx.Process(
                target=_worker, args=(work_remote, remote, cloudpickle.dumps(env_fn)), daemon=True
            )
            process.start()
            work_remote.close()
            self.remotes.append(remote)
            self.processes.append(process)
        deadline = time.monotonic() + float(start_timeout)
        for i in range(self.n_workers):  # every env must build before any job is sent
            self._receive(i, "starting its env", deadline)

    def _fail(self, message: str, kind: type = RuntimeError) -> RuntimeError:
        self.close()
        return kind(message + "\nThe AsyncEval has been closed: create a new one to go on.")

    def _receive(self, i: int, doing: str, deadline: float) -> Any:
        """Worker ``i``'s next message by ``deadline``; death or silence raise, never hang."""
        remote, process = self.remotes[i], self.processes[i]
        try:
            while not remote.poll(min(0.2, max(deadline - time.monotonic(), 0.0))):
                if not process.is_alive() and not remote.poll():
                    raise self._fail(
                        f"AsyncEval worker {i} (pid {process.pid}) died "
                        f"(exit code {process.exitcode}) while {doing}"
                    )
                if time.monotonic() >= deadline:
                    raise self._fail(
                        f"AsyncEval worker {i} (pid {process.pid}) did not answer in time "
                        f"while {doing}"
                    )
            kind, payload = remote.recv()
        except (EOFError, OSError) as error:
            process.join(1.0)
            raise self._fail(
                f"AsyncEval worker {i} (pid {process.pid}) died (exit code "
                f"{process.exitcode}) while {doing} ({error!r})"
            ) from error
        if kind == "error":
            candidate, trace = payload
            what = doing if candidate is None else f"evaluating candidate {candidate}"
            raise self._fail(f"AsyncEval worker {i} failed while {what}:\n{trace}")
        return payload

    def _send(self, i: int, message: tuple) -> None:
        try:
            self.remotes[i].send(message)
        except (OSError, ValueError) as error:
            raise self._fail(
                f"AsyncEval worker {i} (pid {self.processes[i].pid}) cannot be reached ({error!r})"
            ) from error

    def _deal(self, i: int, queue: collections.deque, it_bytes: bytes | None) -> None:
        size = batch_sizes(len(queue), self.n_workers)[0]
        batch = [queue.popleft() for _ in range(size)]
        self._batches[i].extend(batch)
        self._deadlines[i] = time.monotonic() + self.job_timeout
        self._send(i, ("run", (it_bytes, self._options[i], batch)))

    def _drain(self) -> None:
        """Collect and discard what an interrupted call left running in the workers."""
        for i, batch in enumerate(self._batches):
            while batch:
                for _ in self._receive(
                    i, "finishing an interrupted batch", time.monotonic() + self.job_timeout
                ):
                    batch.popleft()

    closed = property(lambda self: not self._closer.alive, doc="Whether :meth:`close` was called.")

    def evaluate(
        self, it: Iteration, jobs: Sequence[Job], on_step: Any = None, record: bool = False
    ) -> list[Result]:
        """One Result per job, in job order, whoever ran it (see InProcessEval.evaluate)."""
        if self.closed:
            raise RuntimeError("this AsyncEval is closed")
        with self._exclusive():
            self._drain()
            it_bytes, queue, results = cloudpickle.dumps(it), collections.deque(jobs), {}
            sent = [False] * self.n_workers
            for i in range(self.n_workers):
                if queue:
                    self._deal(i, queue, it_bytes)
                    sent[i] = True
            while len(results) < len(jobs):
                i = self._next_ready()
                for candidate, result in self._receive(
                    i, "evaluating candidates", time.monotonic() + 1.0
                ):
                    self._batches[i].popleft()
                    results[candidate] = result
                    if record:
                        self._record_visited(i, result)
                self._deadlines[i] = time.monotonic() + self.job_timeout
                if not self._batches[i] and queue:
                    self._deal(i, queue, None if sent[i] else it_bytes)
                    sent[i] = True
        if on_step is not None:
            on_step.after(sum(int(r.lengths.sum()) for r in results.values()), self.n_workers)
        return [results[job.candidate] for job in jobs]

    def _next_ready(self) -> int:
        """The index of a worker with a message; a worker late with its job raises."""
        busy = [i for i, batch in enumerate(self._batches) if batch]
        while True:
            late = min(busy, key=lambda i: self._deadlines[i])
            waits = [self.remotes[i] for i in busy] + [self.processes[i].sentinel for i in busy]
            timeout = max(self._deadlines[late] - time.monotonic(), 0.0)
            ready = multiprocessing.connection.wait(waits, timeout=timeout)
            for i in busy:
                if self.remotes[i] in ready or self.processes[i].sentinel in ready:
                    return i
            if time.monotonic() >= self._deadlines[late]:
                job = self._batches[late][0]
                raise self._fail(
                    f"AsyncEval worker {late} (pid {self.processes[late].pid}) has not finished "
                    f"candidate {job.candidate} (env seeds {[int(s) for s in job.seeds]}) in "
                    f"{self.job_timeout:g} s: is the env stuck? Pass a larger job_timeout for "
                    "longer episodes.",
                    EvaluationTimeout,
                )

    def close(self) -> None:
        """Stop the workers and free their resources. Idempotent."""
        self._closer()


_TASK_ENVS: dict[tuple[str, int], gym.Env] = {}  # per process and thread: tasks reuse their env


def _run_task(env_fn_bytes: bytes, it_bytes: bytes, jobs: list[Job], options: dict | None) -> list:
    """One executor task: evaluate ``jobs`` with the env this process (and thread) cached."""
    key = (hashlib.sha256(env_fn_bytes).hexdigest(), threading.get_ident())
    if key not in _TASK_ENVS:
        _TASK_ENVS[key] = make_env(cloudpickle.loads(env_fn_bytes))
    it = cloudpickle.loads(it_bytes)
    return [(job.candidate, run_job(_TASK_ENVS[key], it, job, options)) for job in jobs]


class ExecutorEval(_Evaluator):
    """Evaluate candidates as tasks on any ``concurrent.futures.Executor``.

    ProcessPoolExecutor, Dask (``client.get_executor(pure=False)``), mpi4py's
    MPIPoolExecutor, or Ray through a small adapter (``examples/ray_cluster.py``). Each
    task carries the iteration once and a batch of jobs; each worker process builds the
    env once and caches it. The workers must be able to ``import ars``. The executor
    stays the caller's: :meth:`close` does not shut it down.

    Parameters
    ----------
    executor : concurrent.futures.Executor
        Anything with ``submit(fn, *args) -> Future``.
    env_fn : callable or str
        Function returning the env (or an env id), sent to the workers with cloudpickle.
    train_policy : ARSPolicy or ARS, optional
    n_eval_episodes : int
    jobs_per_task : int, optional
        Fix the jobs per task; by default tasks are sized from the workers and the jobs
        (:func:`batch_sizes`).
    n_workers : int, optional
        Workers behind the executor, for sizing tasks. By default read from the executor
        at every evaluation where it says (ProcessPoolExecutor, Dask: a cluster that grows
        is seen), else this machine's CPU count: pass it for Ray or MPI.
    job_timeout : float
        Seconds per job before a task that has not finished is taken for stuck; once tasks
        have been timed, at most ``job_timeout`` plus 20 times the task's measured length.
        The futures are cancelled, this evaluator closes and, for a ProcessPoolExecutor,
        the pool's processes are ended (a stuck env cannot be interrupted otherwise; the
        pool is then broken).
    """

    def __init__(
        self,
        executor: Any,
        env_fn: Callable[[], Any] | str,
        train_policy: Any = None,
        n_eval_episodes: int = 1,
        jobs_per_task: int | None = None,
        n_workers: int | None = None,
        job_timeout: float = DEFAULT_JOB_TIMEOUT,
    ):
        _check_float("job_timeout", job_timeout, positive=True)
        if jobs_per_task is not None and (not _is_int(jobs_per_task) or jobs_per_task < 1):
            raise ValueError(
                f"jobs_per_task must be a positive integer or None; got {jobs_per_task!r}"
            )
        self.executor, self.jobs_per_task, self.job_timeout = (
            executor,
            jobs_per_task,
            float(job_timeout),
        )
        self._given_workers = n_workers  # else read from the executor at every evaluate
        self.n_workers = int(n_workers or _executor_workers(executor))
        self._setup(train_policy, n_eval_episodes)
        self._env_fn_bytes = cloudpickle.dumps(env_fn)
        self.closed = False
        self._job_seconds: float | None = None  # the slowest measured seconds per job

    def set_options(self, options: dict | None = None) -> list[None]:
        """Options passed to every ``env.reset`` of later jobs (one dict for all workers)."""
        if isinstance(options, list):
            raise ValueError("ExecutorEval has no fixed workers: pass one options dict for all")
        self._options = [options] * self.n_workers
        return [None]

    def evaluate(
        self, it: Iteration, jobs: Sequence[Job], on_step: Any = None, record: bool = False
    ) -> list[Result]:
        """One Result per job, in job order (see InProcessEval.evaluate)."""
        import concurrent.futures

        if self.closed:
            raise RuntimeError("this ExecutorEval is closed")
        if not self._given_workers:  # a cluster may have grown since the last iteration
            self.n_workers = _executor_workers(self.executor)
        sizes = (
            [self.jobs_per_task] * -(-len(jobs) // self.jobs_per_task)
            if self.jobs_per_task
            else batch_sizes(len(jobs), self.n_workers)
        )
        it_bytes, tasks, start = cloudpickle.dumps(it), {}, 0
        with self._exclusive():
            try:
                for size in sizes:
                    chunk = list(jobs[start : start + size])
                    start += size
                    future = self.executor.submit(
                        _run_task, self._env_fn_bytes, it_bytes, chunk, self._options[0]
                    )
                    tasks[future] = chunk
                results = self._collect(tasks, concurrent.futures, record)
            except BaseException as error:
                stuck = isinstance(error, EvaluationTimeout)
                self.closed |= stuck
                _abandon(self.executor, tasks, stuck)
                raise
        if on_step is not None:
            on_step.after(sum(int(r.lengths.sum()) for r in results.values()), self.n_workers)
        return [results[job.candidate] for job in jobs]

    def _timeout(self, n_jobs: int) -> float:
        """Seconds to wait for a task of ``n_jobs``: generous, but hours only if measured."""
        timeout = self.job_timeout * n_jobs
        if self._job_seconds is not None:
            timeout = min(timeout, self.job_timeout + 20 * self._job_seconds * n_jobs)
        return timeout

    def _collect(self, tasks: dict, futures_module: Any, record: bool) -> dict[int, Result]:
        pending, results, start = set(tasks), {}, time.monotonic()
        while pending:
            timeout = self._timeout(max(len(tasks[f]) for f in pending))
            done, pending = futures_module.wait(
                pending, timeout=timeout, return_when="FIRST_COMPLETED"
            )
            if not done:
                jobs = tasks[next(iter(pending))]
                raise EvaluationTimeout(
                    f"no executor task finished in {timeout:g} s; still waiting for the task of "
                    f"candidates {jobs[0].candidate}-{jobs[-1].candidate} (env seeds from "
                    f"{[int(s) for s in jobs[0].seeds]}) among others: is an env stuck, or are "
                    "the workers gone? Pass a larger job_timeout for longer episodes."
                )
            per_job = (time.monotonic() - start) / min(len(tasks[f]) for f in done)
            self._job_seconds = max(self._job_seconds or 0.0, per_job)
            for future in done:
                try:
                    out = future.result()
                except BaseException as error:
                    job = tasks[future][0]
                    raise RuntimeError(
                        f"an executor task failed (candidates from {job.candidate}): "
                        f"{type(error).__name__}: {error}"
                    ) from error
                for candidate, result in out:
                    results[candidate] = result
                    if record:
                        self._record_visited(0, result)
        return results

    def close(self) -> None:
        """Refuse further work; the executor itself is left running. Idempotent."""
        self.closed = True


def _executor_workers(executor: Any) -> int:
    """How many workers an executor has, where it says; else the CPU count."""
    if getattr(executor, "_max_workers", None):
        return int(executor._max_workers)
    client = getattr(executor, "_client", None)
    if client is not None and hasattr(client, "nthreads"):
        return max(1, sum(client.nthreads().values()))
    return int(getattr(executor, "n_workers", None) or os.cpu_count() or 1)


def _abandon(executor: Any, tasks: dict, stuck: bool) -> None:
    """Cancel unfinished tasks; for stuck ones, a ProcessPoolExecutor's processes are ended."""
    for future in tasks:
        future.cancel()
    if stuck and type(executor).__name__ == "ProcessPoolExecutor":
        processes = list((getattr(executor, "_processes", None) or {}).values())
        for process in processes:
            process.terminate()
        for process in processes:  # reaped: no zombies left behind
            process.join(timeout=5)
        executor.shutdown(wait=False, cancel_futures=True)


def _policy_of(policy: Any) -> ARSPolicy | None:
    """The ARSPolicy of a model or policy (None stays None)."""
    policy = getattr(policy, "policy", policy) if not isinstance(policy, ARSPolicy) else policy
    if policy is not None and not isinstance(policy, ARSPolicy):
        raise TypeError(
            f"expected an ARSPolicy or an ARS model (model.policy); got {type(policy).__name__}"
        )
    return policy


def _as_rms(obs_rms: Any) -> RunningMeanStd:
    """ars's RunningMeanStd from one with ``mean``, ``var`` and ``count`` (SB3's, say)."""
    if isinstance(obs_rms, RunningMeanStd):
        return obs_rms
    return RunningMeanStd.from_moments(
        np.asarray(obs_rms.mean, np.float64).reshape(-1),
        np.asarray(obs_rms.var, np.float64).reshape(-1),
        obs_rms.count,
    )


def _evaluate_candidates(model: ARS, candidate_weights: Any, callback: Any, async_eval: Any) -> Any:
    """The seed's ``ARS.evaluate_candidates``: shifted mean return of each row."""
    weights = _as_array(candidate_weights)
    if weights.ndim != 2 or weights.shape[1] != model.policy.n_params:
        raise ValueError(
            f"candidate_weights must have shape (n_candidates, {model.policy.n_params}); "
            f"got {weights.shape}"
        )
    evaluator = async_eval or InProcessEval(model.gym_env, missing="an env or an async_eval")
    it = Iteration(
        model.policy,
        model.policy.parameters_to_vector(),
        0.0,
        model.seed,
        model._n_updates,
        False,
        model.max_episode_steps,
        _obs_filter(model._vec_normalize),
    )
    jobs = [Job(c, 0, 1, model._env_seeds(c), w) for c, w in enumerate(weights)]
    callbacks = callback if isinstance(callback, _Callbacks) else _Callbacks(callback, model)
    callbacks.on_rollout_start()
    results = evaluator.evaluate(it, jobs, callbacks.step_reporter())
    callbacks.on_rollout_end()
    returns = np.array([r.training_return(model.alive_bonus_offset) for r in results])
    return _like(candidate_weights, returns)


# -------------------------------------------------------------------------------------------
# Logging and callbacks (the shapes Stable-Baselines3 users know)
# -------------------------------------------------------------------------------------------

# The columns of progress.csv known up front, so the file never needs a wider header.
LOG_KEYS = tuple(
    "rollout/ep_rew_mean rollout/ep_len_mean rollout/return_std train/iterations "
    "train/delta_std train/learning_rate train/step_size eval/mean_reward eval/std_reward "
    "eval/mean_ep_length eval/best_mean_reward time/fps time/time_elapsed "
    "time/total_timesteps".split()
)


class Logger:
    """Key/value logger in SB3's shape: ``record`` values, then ``dump`` writes one row.

    A row goes to the screen as a table (``verbose >= 1``), to ``folder/progress.csv`` (one
    write per row, so a killed run never leaves half a row), and, with ``tensorboard``, to
    TensorBoard event files when a writer is installed (torch's or tensorboardX).

    Parameters
    ----------
    verbose : int
    folder : str, optional
    tensorboard : bool
    """

    def __init__(
        self, verbose: int = 0, folder: str | os.PathLike | None = None, tensorboard: bool = False
    ):
        self.verbose, self.values = verbose, {}
        self.dir = None if folder is None else Path(folder)
        self._columns: list[str] = []
        self._writer = None
        if self.dir is not None:
            self.dir.mkdir(parents=True, exist_ok=True)
            path = self.dir / "progress.csv"
            if path.exists():  # a resumed run goes on with its file
                with path.open(newline="") as f:
                    self._columns = next(csv.reader(f), [])
            if tensorboard:
                self._writer = _tensorboard_writer(self.dir)

    def record(self, key: str, value: Any, exclude: Any = None) -> None:
        """Set ``key`` for the next :meth:`dump` (``exclude`` is accepted for SB3 callbacks)."""
        self.values[key] = value

    def record_mean(self, key: str, value: Any, exclude: Any = None) -> None:
        """SB3's ``record_mean``: here the last value is kept."""
        self.values[key] = value

    def get_dir(self) -> str | None:
        """The log folder (SB3's API)."""
        return None if self.dir is None else str(self.dir)

    def dump(self, step: int = 0) -> None:
        """Write the recorded values as one row, then clear them."""
        if not self.values:
            return
        if self.verbose >= 1:
            print(_table(self.values), flush=True)
        if self.dir is not None:
            self._append_row()
        if self._writer is not None:
            for key, value in self.values.items():
                if isinstance(value, (int, float, np.number)):
                    self._writer.add_scalar(key, value, step)
            self._writer.flush()
        self.values = {}

    def _append_row(self) -> None:
        path = self.dir / "progress.csv"
        new = [k for k in self.values if k not in self._columns]
        if new:  # a new column: the file is rewritten whole, atomically, never in place
            rows = _read_csv(path) if self._columns else []
            self._columns = list(dict.fromkeys([*self._columns, *LOG_KEYS, *sorted(new)]))
            _write_csv_atomic(path, self._columns, rows)
        line = io.StringIO()
        csv.DictWriter(line, self._columns).writerow(self.values)
        with path.open("a", newline="") as f:  # one write: a row is all there or not at all
            f.write(line.getvalue())

    def close(self) -> None:
        """Close the TensorBoard writer, if any."""
        if self._writer is not None:
            self._writer.close()


def _table(values: dict[str, Any]) -> str:
    """SB3's log table: keys grouped by what comes before their "/"."""
    rows: list[tuple[str, str]] = []
    for group in sorted({k.split("/")[0] for k in values}, key=lambda g: (g in values, g)):
        keys = sorted(k for k in values if k.split("/")[0] == group)
        if keys != [group]:
            rows.append((f"{group}/", ""))
        for key in keys:
            value = values[key]
            text = f"{value:<.4g}" if isinstance(value, float) else str(value)
            rows.append((key if "/" not in key else "    " + key.split("/", 1)[1], text))
    width_k, width_v = max(len(k) for k, _ in rows), max(len(v) for _, v in rows)
    line = "-" * (width_k + width_v + 7)
    return "\n".join([line, *(f"| {k:<{width_k}} | {v:<{width_v}} |" for k, v in rows), line])


def _read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _write_csv_atomic(path: Path, columns: list[str], rows: list[dict[str, str]]) -> None:
    with _atomic_file(path, "w") as f:
        writer = csv.DictWriter(f, columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


_TB_WARNED: list[bool] = []


def _tensorboard_writer(folder: Path) -> Any:
    """A TensorBoard SummaryWriter (torch's or tensorboardX), or None with a note once."""
    for module in ("torch.utils.tensorboard", "tensorboardX"):
        try:
            return __import__(module, fromlist=["SummaryWriter"]).SummaryWriter(str(folder))
        except ImportError:
            continue
    if not _TB_WARNED:
        _TB_WARNED.append(True)
        warnings.warn(
            "tensorboard_log: no TensorBoard writer is installed, so only progress.csv is "
            "written (pip install tensorboard)",
            stacklevel=4,
        )
    return None


def _log_dir(model: ARS, root_dir: Any, tb_log_name: str, reset: bool) -> Path | None:
    """``root_dir`` as it is, or ``tensorboard_log/<tb_log_name>_<n>`` as SB3 numbers runs."""
    if root_dir is not None:
        return Path(root_dir)
    if model.tensorboard_log is None:
        return None
    root = Path(model.tensorboard_log)
    taken = [p.name.rsplit("_", 1)[1] for p in root.glob(f"{tb_log_name}_*")]
    last = max((int(n) for n in taken if n.isdigit()), default=0)
    return root / f"{tb_log_name}_{last if (last and not reset) else last + 1}"


def _dump_logs(model: ARS) -> None:
    if model.ep_info_buffer:
        model.logger.record(
            "rollout/ep_rew_mean", float(np.mean([e["r"] for e in model.ep_info_buffer]))
        )
        model.logger.record(
            "rollout/ep_len_mean", float(np.mean([e["l"] for e in model.ep_info_buffer]))
        )
    elapsed = max(time.perf_counter() - model._start_time, 1e-9)
    model.logger.record("time/fps", int((model.num_timesteps - model._start_steps) / elapsed))
    model.logger.record("time/time_elapsed", int(elapsed), exclude="tensorboard")
    model.logger.record("time/total_timesteps", model.num_timesteps, exclude="tensorboard")
    model.logger.dump(model.num_timesteps)


def _null_logger(model: ARS) -> Logger:
    """Before ``learn``: a logger without a folder, so callbacks can record from the start."""
    model._logger = Logger(model.verbose)
    return model._logger


def _is_sb3_callback(callback: Any) -> bool:
    """An SB3-style callback object: ``on_step`` runs after every env step, as in SB3."""
    return hasattr(callback, "on_step") and hasattr(callback, "init_callback")


class _Callbacks:
    """What ``learn`` calls: SB3 callbacks after every env step (and around rollouts),
    functions ``f(locals, globals)`` and ars's own callbacks after every iteration."""

    def __init__(self, callback: Any, model: ARS, progress_bar: bool = False):
        items = (
            []
            if callback is None
            else list(callback)
            if isinstance(callback, (list, tuple))
            else [callback]
        )
        if progress_bar:
            items.append(_ProgressBar())
        for cb in items:
            if not (_is_sb3_callback(cb) or hasattr(cb, "on_iteration") or callable(cb)):
                raise TypeError(
                    f"callback must be a function f(locals, globals), an SB3 callback or "
                    f"ars's EvalCallback; got {cb!r}"
                )
        self.model, self.items = model, items
        self.per_step = [cb for cb in items if _is_sb3_callback(cb)]
        for cb in items:
            if hasattr(cb, "init_callback"):
                cb.init_callback(model)

    def _hook(self, name: str, *args: Any) -> None:
        for cb in self.items:
            if hasattr(cb, name):
                getattr(cb, name)(*args)

    def on_training_start(self, locals_: dict, globals_: dict) -> None:
        self._hook("on_training_start", locals_, globals_)

    def on_rollout_start(self) -> None:
        self._hook("on_rollout_start")

    def on_rollout_end(self) -> None:
        self._hook("on_rollout_end")

    def on_training_end(self) -> None:
        self._hook("on_training_end")

    def step_reporter(self) -> _StepReporter | None:
        """What evaluators tell about env steps; None (the fast path) without SB3 callbacks."""
        return _StepReporter(self.model, self.per_step) if self.per_step else None

    def on_iteration(self, locals_: dict) -> bool:
        """Call the per-iteration callbacks; False when one of them asks to stop."""
        keep_going = True
        for cb in self.items:
            if hasattr(cb, "on_iteration"):
                keep_going &= cb.on_iteration() is not False
            elif not _is_sb3_callback(cb):
                keep_going &= cb(locals_, globals()) is not False
        return keep_going

    def load_state_dict(self, states: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        for cb in self.items:
            if (
                type(cb).__name__ in states
                and hasattr(cb, "load_state_dict")
                and not _is_sb3_callback(cb)
            ):
                cb.load_state_dict(states[type(cb).__name__])

    def state_dict(self) -> dict[str, Any]:
        """The state of the callbacks that have one, by class name (saved in checkpoints)."""
        return {
            type(cb).__name__: cb.state_dict()
            for cb in self.items
            if hasattr(cb, "state_dict") and not _is_sb3_callback(cb)
        }


class _StepReporter:
    """Calls SB3 callbacks' ``on_step`` as SB3 does, with ``num_timesteps`` and ``locals``."""

    def __init__(self, model: ARS, callbacks: list[Any]):
        self.model, self.callbacks = model, callbacks

    def __call__(self, action: Any, transition: tuple) -> None:
        """After one env step in this process."""
        obs, reward, terminated, truncated, info = transition
        self.model.num_timesteps += 1
        done = terminated or truncated
        self._step(
            {
                "actions": np.asarray(action)[None],
                "new_obs": np.asarray(obs)[None],
                "rewards": np.array([reward]),
                "dones": np.array([done]),
                "infos": [info],
            }
        )

    def after(self, n_steps: int, n_workers: int) -> None:
        """After rollouts in worker processes, as sb3-contrib's AsyncEval does: one call per
        ``n_workers`` steps, each adding ``n_workers`` to ``num_timesteps``."""
        for _ in range(n_steps // n_workers):
            self.model.num_timesteps += n_workers
            self._step({})

    def _step(self, extra: dict[str, Any]) -> None:
        locals_ = {"self": self.model, **extra}
        for cb in self.callbacks:
            if hasattr(cb, "update_locals"):
                cb.update_locals(locals_)
            if cb.on_step() is False:
                raise StopTraining


class _ProgressBar:
    """``learn(progress_bar=True)``: a tqdm bar over the timesteps."""

    def init_callback(self, model: ARS) -> None:
        self.model = model
        self.tqdm = _require("tqdm", "pip install tqdm (ars's 'progress' extra)")

    def on_training_start(self, locals_: dict, globals_: dict) -> None:
        self.bar = self.tqdm.tqdm(total=locals_["total_timesteps"], unit="steps")
        self.start = self.model.num_timesteps

    def on_iteration(self) -> bool:
        self.bar.update(self.model.num_timesteps - self.start - self.bar.n)
        return True

    def on_training_end(self) -> None:
        self.bar.close()


class EvalCallback:
    """Evaluate the policy every ``eval_freq`` timesteps on a separate env; keep the best model.

    SB3's parameters, with ARS's protocol: evaluations happen between iterations (the
    first when training starts), are deterministic, use the env's own rewards (no
    ``alive_bonus_offset``) and fixed episode seeds of their own, so successive
    evaluations compare like with like. Results go to the log (``eval/...``), to
    ``self.evaluations`` as ``(timesteps, train_seconds, mean, std)`` (``train_seconds``
    leaves out the evaluations' time), and with ``log_path`` to ``evaluations.npz``.

    Parameters
    ----------
    eval_env : str, gymnasium.Env, SB3 VecEnv or callable
        An id or a function is needed for ``eval_concurrency > 1``.
    callback_on_new_best : callback, optional
        Called (``on_step``) when the mean return improves; False stops training.
    callback_after_eval : callback, optional
        Called after every evaluation; False stops training.
    n_eval_episodes : int
    eval_freq : int
        Timesteps between evaluations, checked after each iteration.
    log_path : str, optional
        Folder for ``evaluations.npz`` (SB3's ``timesteps``, ``results``, ``ep_lengths``).
    best_model_save_path : str, optional
        Folder for ``best_model.zip`` (or ``best_model_name``), rewritten on every improvement.
    deterministic : bool
        Accepted for SB3 compatibility: ARS policies are deterministic.
    render : bool
        Render the evaluation env at every step.
    verbose : int
        1 prints each evaluation.
    warn : bool
        Accepted for SB3 compatibility (there is no Monitor wrapper to warn about).
    eval_concurrency : int
        Worker processes for the evaluation episodes (1: this process).
    seed : int
        Seeds the evaluation episodes.
    best_model_name : str
        File name of the best model in ``best_model_save_path``.
    """

    def __init__(
        self,
        eval_env: Any,
        callback_on_new_best: Any = None,
        callback_after_eval: Any = None,
        n_eval_episodes: int = 5,
        eval_freq: int = 10_000,
        log_path: str | os.PathLike | None = None,
        best_model_save_path: str | os.PathLike | None = None,
        deterministic: bool = True,
        render: bool = False,
        verbose: int = 1,
        warn: bool = True,
        eval_concurrency: int = 1,
        seed: int = 0,
        best_model_name: str = "best_model.zip",
    ):
        for name, value in (
            ("n_eval_episodes", n_eval_episodes),
            ("eval_freq", eval_freq),
            ("eval_concurrency", eval_concurrency),
        ):
            if not _is_int(value) or value < 1:
                raise ValueError(f"{name} must be an integer of at least 1; got {value!r}")
        if eval_concurrency > 1 and (isinstance(eval_env, gym.Env) or render):
            raise ValueError(
                "eval_concurrency > 1 needs the eval env as an id or a function, to build it in "
                "each worker, and cannot render"
            )
        self.eval_env, self.eval_freq, self.n_eval_episodes = (
            eval_env,
            int(eval_freq),
            int(n_eval_episodes),
        )
        self.callback_on_new_best, self.callback_after_eval = (
            callback_on_new_best,
            callback_after_eval,
        )
        self.log_path = None if log_path is None else Path(log_path)
        self.best_model_save_path = (
            None if best_model_save_path is None else Path(best_model_save_path)
        )
        self.best_model_name, self.render, self.verbose = best_model_name, render, verbose
        self.deterministic, self.warn, self.eval_concurrency = (
            deterministic,
            warn,
            int(eval_concurrency),
        )
        self.seeds = evaluation_seeds(seed, self.n_eval_episodes)
        self.evaluations: list[tuple[int, float, float, float]] = []
        self.evaluations_results: list[list[float]] = []
        self.evaluations_length: list[list[int]] = []
        self.best_mean_reward, self.last_mean_reward = -np.inf, -np.inf
        self._next, self._train_seconds = 0, 0.0
        self._evaluator: Any = None

    def init_callback(self, model: ARS) -> None:
        self.model = model
        if self._evaluator is None:
            if self.eval_concurrency > 1:
                env_fn = (
                    self.eval_env
                    if callable(self.eval_env)
                    else functools.partial(make_env, self.eval_env)
                )
                self._evaluator = AsyncEval([env_fn] * self.eval_concurrency)
            else:
                self._evaluator = InProcessEval(self.eval_env)
        for child in (self.callback_on_new_best, self.callback_after_eval):
            if child is not None:
                child.parent = self
                child.init_callback(model)

    def on_training_start(self, locals_: dict, globals_: dict) -> None:
        self._mark = time.perf_counter()
        if self.model.num_timesteps >= self._next:  # a resumed run evaluates on its schedule
            self.evaluate()

    def on_iteration(self) -> bool:
        """After each iteration: evaluate when ``eval_freq`` timesteps have passed."""
        if self.model.num_timesteps < self._next:
            return True
        return self.evaluate()

    def evaluate(self) -> bool:
        """Evaluate now and log it; False when a child callback asks to stop training."""
        now = time.perf_counter()
        self._train_seconds += now - self._mark
        policy = self.model.policy
        it = Iteration(
            policy,
            policy.parameters_to_vector(),
            0.0,
            0,
            0,
            False,
            self.model.max_episode_steps,
            _obs_filter(self.model.get_vec_normalize_env()),
        )
        jobs = [Job(e, 0, 1, self.seeds[e : e + 1], it.theta) for e in range(self.n_eval_episodes)]
        if self.render:
            env = self._evaluator.env
            results = [run_job(env, it, job, on_step=lambda *_: env.render()) for job in jobs]
        else:
            results = self._evaluator.evaluate(it, jobs)
        returns = np.array([r.returns[0] for r in results])
        lengths = np.array([int(r.lengths[0]) for r in results])
        mean, std = float(returns.mean()), float(returns.std())
        self.last_mean_reward = mean
        self.evaluations.append((self.model.num_timesteps, self._train_seconds, mean, std))
        self.evaluations_results.append(returns.tolist())
        self.evaluations_length.append(lengths.tolist())
        while self._next <= self.model.num_timesteps:  # the schedule: 0, f, 2f, ... as reached
            self._next += self.eval_freq
        if self.log_path is not None:
            self._write_log()
        logger = self.model.logger
        logger.record("eval/mean_reward", mean)
        logger.record("eval/std_reward", std)
        logger.record("eval/mean_ep_length", float(lengths.mean()))
        keep_going = True
        if mean > self.best_mean_reward:
            self.best_mean_reward = mean
            if self.best_model_save_path is not None:
                self.model.save(self.best_model_save_path / self.best_model_name)
            if self.callback_on_new_best is not None:
                keep_going &= self.callback_on_new_best.on_step() is not False
        logger.record("eval/best_mean_reward", self.best_mean_reward)
        if self.verbose >= 1:
            print(
                f"Eval num_timesteps={self.model.num_timesteps}, episode_reward={mean:.2f} +/- "
                f"{std:.2f}, "
                f"best {self.best_mean_reward:.2f}",
                flush=True,
            )
        if self.callback_after_eval is not None:
            keep_going &= self.callback_after_eval.on_step() is not False
        self._mark = time.perf_counter()
        return keep_going

    def _write_log(self) -> None:
        self.log_path.mkdir(parents=True, exist_ok=True)
        arrays = dict(
            timesteps=np.array([e[0] for e in self.evaluations]),
            results=np.array(self.evaluations_results),
            ep_lengths=np.array(self.evaluations_length),
        )
        with _atomic_file(self.log_path / "evaluations.npz", "wb") as f:
            np.savez(f, **arrays)

    def state_dict(self) -> dict[str, Any]:
        """Plain data to resume the schedule and the best score exactly (checkpoints)."""
        return dict(
            next=self._next,
            train_seconds=self._train_seconds,
            best_mean_reward=self.best_mean_reward,
            evaluations=[list(e) for e in self.evaluations],
            results=[list(r) for r in self.evaluations_results],
            lengths=[list(n) for n in self.evaluations_length],
        )

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (from a checkpoint); a ValueError if it is not one."""
        if not (
            isinstance(state, dict)
            and _is_int(state.get("next"))
            and _is_number(state.get("train_seconds"))
            and isinstance(state.get("best_mean_reward"), (int, float))
            and all(
                isinstance(state.get(key), list)
                and all(isinstance(r, list) and all(map(_is_number, r)) for r in state[key])
                for key in ("evaluations", "results", "lengths")
            )
        ):
            raise ValueError(
                "the EvalCallback state must hold next, train_seconds, best_mean_reward and "
                f"lists of numbers evaluations, results, lengths; got {state!r:.200}"
            )
        self._next, self._train_seconds = int(state["next"]), float(state["train_seconds"])
        self.best_mean_reward = float(state["best_mean_reward"])
        self.evaluations = [tuple(e) for e in state["evaluations"]]
        self.evaluations_results = [list(r) for r in state["results"]]
        self.evaluations_length = [list(n) for n in state["lengths"]]

    def on_training_end(self) -> None:
        if isinstance(self._evaluator, AsyncEval):
            self._evaluator.close()
            self._evaluator = None


def evaluation_seeds(seed: int | None, n_episodes: int) -> np.ndarray:
    """The env seeds of evaluation episodes: their own stream, never a training one's."""
    return np.random.SeedSequence(None if seed is None else [seed, 1]).generate_state(n_episodes)


def evaluate_policy(
    model: Any,
    env: Any,
    n_eval_episodes: int = 10,
    deterministic: bool = True,
    render: bool = False,
    callback: Callable[[dict, dict], Any] | None = None,
    reward_threshold: float | None = None,
    return_episode_rewards: bool = False,
    warn: bool = True,
    seed: int | None = None,
) -> tuple[float, float] | tuple[list[float], list[int]]:
    """Mean and std of the return of ``model`` (an ARS or a policy) over ``n_eval_episodes``.

    SB3's signature. Rewards are the env's own (no ``alive_bonus_offset``); each episode
    gets its own seed drawn from ``seed``. With ``return_episode_rewards``, returns the
    lists of episode returns and lengths. ``callback(locals, globals)`` runs after every
    step; ``render`` renders every step; ``reward_threshold`` raises below it.
    """
    policy = _policy_of(model)
    gym_env, _, vec_normalize = resolve_env(env)
    seeds = evaluation_seeds(seed, n_eval_episodes)
    act = policy.actor()
    if _obs_filter(vec_normalize) is not None:
        act = _obs_filter(vec_normalize).wrap(act)

    def on_step(action: Any, transition: tuple) -> None:
        if render:
            gym_env.render()
        if callback is not None:
            callback({"actions": action, "transition": transition, "model": model}, globals())

    hook = on_step if (render or callback is not None) else None
    max_steps = getattr(model, "max_episode_steps", None)
    returns, lengths, _ = run_episodes(gym_env, act, seeds, None, False, max_steps, hook)
    mean = float(returns.mean())
    if reward_threshold is not None and mean < reward_threshold:
        raise AssertionError(f"mean reward below threshold: {mean:.2f} < {reward_threshold:.2f}")
    if return_episode_rewards:
        return [float(r) for r in returns], [int(n) for n in lengths]
    return mean, float(returns.std())


# -------------------------------------------------------------------------------------------
# Model files: plain arrays and JSON in an .npz (a zip archive), never pickle
# -------------------------------------------------------------------------------------------
#
# A file is checked before anything is decompressed or allocated: the member names, the
# metadata's size, every field's type, and every array's declared shape against what the
# metadata implies. Settings that name paths (tensorboard_log) are never read from a file.

FORMAT, FORMAT_VERSION = "ars-numpy", 2
MAX_METADATA_BYTES = 4 << 20
SAVED_HPARAMS = {  # name: (type check, description); what a file may set
    "n_delta": (lambda v: _in_range(v, "n_delta"), "an integer from 1 to 1,000,000"),
    "n_top": (lambda v: _in_range(v, "n_top"), "an integer from 1 to 1,000,000"),
    "learning_rate": (lambda v: _is_number(v) and v >= 0, "a number >= 0"),
    "delta_std": (lambda v: _is_number(v) and v > 0, "a positive number"),
    "zero_policy": (lambda v: isinstance(v, bool), "true or false"),
    "alive_bonus_offset": (lambda v: _is_number(v), "a number"),
    "n_eval_episodes": (
        lambda v: _in_range(v, "n_eval_episodes"),
        "an integer from 1 to 1,000,000",
    ),
    "stats_window_size": (
        lambda v: _in_range(v, "stats_window_size"),
        "an integer from 1 to 10,000,000",
    ),
    "normalize_obs": (lambda v: isinstance(v, bool), "true or false"),
    "common_random_numbers": (lambda v: isinstance(v, bool), "true or false"),
    "normalization_samples": (
        lambda v: _in_range(v, "normalization_samples"),
        "an integer from 0 to 10**12",
    ),
    "max_episode_steps": (
        lambda v: v is None or (_is_int(v) and v >= 1),
        "a positive integer or null",
    ),
    "seed": (lambda v: _in_range(v, "seed"), "an integer from 0 to 2**63 - 1"),
}
METADATA_FIELDS = set(
    "format format_version kind ars_version policy policy_kwargs observation_space action_space "
    "system_info hparams env_id num_timesteps n_updates schedules ep_info_buffer callbacks "
    "included rng_state".split()  # rng_state: written by ars 0.1, not read
)


def _in_range(value: Any, name: str) -> bool:
    low, high = INTEGER_RANGES[name]
    return _is_int(value) and low <= value <= high


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _file_mode() -> int:
    """The permissions a new file gets under the current umask."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


class _atomic_file:
    """Write ``path`` through a temporary file and a rename: never half a file, and no
    temporary file left behind on failure (a full disk gives an OSError naming ``path``)."""

    def __init__(self, path: Path, mode: str):
        self.path, self.mode = Path(path), mode

    def __enter__(self) -> Any:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, self.tmp = tempfile.mkstemp(
                dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp"
            )
        except OSError as error:
            raise OSError(error.errno, f"could not write {self.path}: {error.strerror}") from None
        self.file = os.fdopen(fd, self.mode, **({"newline": ""} if "b" not in self.mode else {}))
        return self.file

    def __exit__(self, kind: Any, error: Any, trace: Any) -> None:
        try:
            if kind is None:
                self.file.flush()
                os.fsync(self.file.fileno())
            self.file.close()
            if kind is None:
                os.chmod(self.tmp, _file_mode())
                os.replace(self.tmp, self.path)
        except OSError as failure:
            Path(self.tmp).unlink(missing_ok=True)
            raise OSError(
                failure.errno, f"could not write {self.path}: {failure.strerror}"
            ) from failure
        finally:
            if kind is not None:
                Path(self.tmp).unlink(missing_ok=True)
        if isinstance(error, OSError) and not str(error).startswith("could not write"):
            raise OSError(error.errno, f"could not write {self.path}: {error.strerror}") from error


def _model_path(path: str | os.PathLike) -> Path:
    """SB3's rule: a path without a suffix gets ``.zip``."""
    path = Path(path)
    return path if path.suffix else path.with_suffix(".zip")


@functools.cache
def _own_attributes() -> frozenset[str]:
    """The names every ARS model has: its methods, properties and settings."""
    return frozenset(dir(ARS)) | frozenset(vars(ARS("LinearPolicy", seed=0)))  # no global draw


def _write_npz(target: Any, arrays: dict[str, np.ndarray]) -> Path | None:
    """``np.savez`` to a file object, or atomically to a path (returned)."""
    if hasattr(target, "write"):
        np.savez(target, **arrays)
        return None
    path = _model_path(target)
    with _atomic_file(path, "wb") as f:
        np.savez(f, **arrays)
    return path


def _space_to_json(space: spaces.Space) -> dict[str, Any]:
    if isinstance(space, spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, spaces.MultiDiscrete):
        return {"type": "MultiDiscrete", "nvec": space.nvec.tolist(), "start": space.start.tolist()}
    if isinstance(space, spaces.MultiBinary):
        return {"type": "MultiBinary", "n": np.asarray(space.n).tolist()}

    def bound(values: np.ndarray) -> Any:  # one number when all are equal: files stay small
        flat = values.reshape(-1)
        return flat[0].item() if len(flat) and (flat == flat[0]).all() else values.tolist()

    return {
        "type": "Box",
        "low": bound(space.low),
        "high": bound(space.high),
        "shape": list(space.shape),
        "dtype": str(space.dtype),
    }


def _space_size(data: Any, where: str) -> int:
    """The flat size of a space's JSON (``spaces.flatdim``), computed without building it."""
    if not isinstance(data, dict) or data.get("type") not in (
        "Box",
        "Discrete",
        "MultiDiscrete",
        "MultiBinary",
    ):
        raise ValueError(
            f"{where} must be a Box, Discrete, MultiDiscrete or MultiBinary space; got "
            f"{data!r:.200}"
        )
    kind = data["type"]
    sizes = data.get(
        {"Discrete": "n", "MultiDiscrete": "nvec", "MultiBinary": "n"}.get(kind, "shape")
    )
    sizes = np.asarray(sizes if isinstance(sizes, list) else [sizes], dtype=object).reshape(-1)
    if not (len(sizes) <= 10**6 and all(_is_int(n) and 0 <= n <= MAX_PARAMETERS for n in sizes)):
        raise ValueError(
            f"{where} is not a valid space (sizes must be integers); got {data!r:.200}"
        )
    size = int(sum(sizes)) if kind == "MultiDiscrete" else math.prod(int(n) for n in sizes)
    if size > MAX_PARAMETERS:
        raise ValueError(f"{where} has {size:,} elements; ars takes at most {MAX_PARAMETERS:,}")
    return size


def _space_from_json(data: Any, where: str) -> spaces.Space:
    """A space from its JSON, checked: sizes before any array is built."""
    _space_size(data, where)
    try:
        if data["type"] == "Discrete":
            if not (_is_int(data["n"]) and data["n"] >= 1 and _is_int(data.get("start", 0))):
                raise ValueError("n must be a positive integer")
            return spaces.Discrete(data["n"], start=data.get("start", 0))
        if data["type"] == "MultiBinary":
            n = data["n"]
            if not (
                _is_int(n)
                and n >= 1
                or isinstance(n, list)
                and n
                and all(_is_int(x) and x >= 1 for x in n)
            ):
                raise ValueError("n must be positive integers")
            return spaces.MultiBinary(n)
        if data["type"] == "MultiDiscrete":
            nvec = data["nvec"]
            if not isinstance(nvec, list):
                raise ValueError("nvec must be a list")
            return spaces.MultiDiscrete(
                np.array(nvec, dtype=np.int64), start=np.array(data["start"], dtype=np.int64)
            )
        shape = data["shape"]
        if not (isinstance(shape, list) and len(shape) <= 32):
            raise ValueError("shape must be a list of at most 32 non-negative integers")
        size = math.prod(shape)
        dtype = np.dtype(data["dtype"])
        if dtype.kind not in "fiu":
            raise ValueError(f"dtype {dtype} is not a number type")
        low, high = (_bounds(data[key], size, shape, dtype) for key in ("low", "high"))
        return spaces.Box(low, high, shape=tuple(shape), dtype=dtype)
    except (KeyError, TypeError, ValueError, OverflowError) as error:
        raise ValueError(
            f"{where} is not a valid space ({type(error).__name__}: {error})"
        ) from error


def _bounds(value: Any, size: int, shape: list[int], dtype: np.dtype) -> np.ndarray:
    if _is_number(value) or value in (math.inf, -math.inf):
        return np.full(shape, value, dtype=dtype)
    flat = np.array(value, dtype=dtype) if isinstance(value, list) else None
    if flat is None or flat.size != size:
        raise ValueError(f"bounds must be one number or {size} numbers")
    return flat.reshape(shape)


def _metadata(model: ARS, kind: str = "model") -> dict[str, Any]:
    """The plain-data description of a model (or, with ``kind="policy"``, of its policy)."""
    policy = model.policy if isinstance(model, ARS) else model
    is_linear = isinstance(policy, ARSLinearPolicy)
    config = policy.config()
    if is_linear:
        config = {k: config[k] for k in ("with_bias", "squash_output")}
    meta = dict(
        format=FORMAT,
        format_version=FORMAT_VERSION,
        kind=kind,
        ars_version=__version__,
        policy="LinearPolicy" if is_linear else "MlpPolicy",
        policy_kwargs=config,
        observation_space=_space_to_json(policy.observation_space),
        action_space=_space_to_json(policy.action_space),
        system_info=_system_info(),
    )
    if kind == "policy":
        return meta
    hparams = {
        k: getattr(model, k) for k in SAVED_HPARAMS if k not in ("learning_rate", "delta_std")
    }
    hparams.update(
        learning_rate=model._schedule_value("learning_rate"),
        delta_std=model._schedule_value("delta_std"),
    )
    meta.update(
        hparams=hparams,
        env_id=model.env_id,
        num_timesteps=model.num_timesteps,
        n_updates=model._n_updates,
        schedules=[k for k in ("learning_rate", "delta_std") if callable(getattr(model, k))],
        ep_info_buffer=[[e["r"], e["l"]] for e in model.ep_info_buffer],
    )
    return meta


def _system_info() -> dict[str, str]:
    import platform

    return {
        "ars": __version__,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "gymnasium": gym.__version__,
        "os": platform.platform(),
    }


def _policy_arrays(policy: ARSPolicy) -> dict[str, np.ndarray]:
    arrays = {"parameters": policy.parameters_to_vector()}
    if policy.obs_rms is not None:
        rms = policy.obs_rms
        arrays.update(
            obs_rms_mean=rms.mean.copy(),
            obs_rms_var=rms.var.copy(),
            obs_rms_count=np.array(rms.count),
        )
    return arrays


def save_model(
    model: ARS,
    path: Any,
    exclude: Sequence[str] | None = None,
    include: Sequence[str] | None = None,
    callbacks: Any = None,
) -> Path | None:
    """Write ``model`` as plain arrays and JSON; see :meth:`ARS.save`."""
    if model.policy is None:
        raise ValueError(
            "the model has no policy to save yet: give it an env, or learn(..., env=...)"
        )
    meta = _metadata(model)
    for name in exclude or ():  # SB3's meaning: an excluded setting loads as its default
        meta["hparams"].pop(name, None)
        if name == "ep_info_buffer":
            meta.pop(name)
    included = {}
    for name in include or ():
        if name in HPARAMS or name in meta:  # saved anyway
            continue
        if name in _own_attributes():
            raise ValueError(f"include={name!r}: it is part of every ARS model, not an extra")
        value = getattr(model, name)
        try:
            json.dumps(value)
        except TypeError:
            raise ValueError(
                f"include={name!r}: {type(value).__name__} is not plain data (JSON)"
            ) from None
        included[name] = value
    if included:
        meta["included"] = included
    if callbacks is not None:
        meta["callbacks"] = callbacks.state_dict()
    arrays = dict(_policy_arrays(model.policy), metadata=np.array(json.dumps(meta)))
    return _write_npz(path, arrays)


def write_checkpoint(model: ARS, path: Path, callbacks: _Callbacks) -> None:
    """A model file that also holds the callbacks' state, so a resumed run repeats exactly."""
    save_model(model, path, callbacks=callbacks)


def _save_policy(policy: ARSPolicy, path: Any) -> None:
    arrays = dict(
        _policy_arrays(policy), metadata=np.array(json.dumps(_metadata(policy, "policy")))
    )
    _write_npz(path, arrays)


def _open_source(source: Any) -> tuple[Any, str]:
    """A readable binary file for a path (SB3's suffix rule) or file object, and its name."""
    if hasattr(source, "read"):
        return source, getattr(source, "name", "the given file object")
    path = Path(source)
    if not path.exists() and not path.suffix:
        path = next(
            (p for p in (path.with_suffix(".zip"), path.with_suffix(".npz")) if p.exists()), path
        )
    if not path.exists():
        raise FileNotFoundError(f"no model file at {path}")
    return path.open("rb"), str(path)


def _read_member(archive: zipfile.ZipFile, name: str, limit: int, where: str) -> bytes:
    """A member's bytes, refusing more than ``limit`` whatever its header says."""
    if archive.getinfo(name).file_size > limit:
        raise ValueError(f"{where}: member {name} is larger than the metadata allows")
    with archive.open(name) as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{where}: member {name} is larger than the metadata allows")
    return data


def _npy(data: bytes, shape: tuple[int, ...], kinds: str, where: str, name: str) -> np.ndarray:
    """An array from ``.npy`` bytes; its header is checked before anything is allocated."""
    f = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(f)
        if version not in ((1, 0), (2, 0)):
            raise ValueError(f"npy format {version}")
        read_header = (
            np.lib.format.read_array_header_1_0
            if version == (1, 0)
            else np.lib.format.read_array_header_2_0
        )
        found, _, dtype = read_header(f)
    except (ValueError, TypeError, SyntaxError, EOFError) as error:
        raise ValueError(f"{where}: {name} is not a valid array ({error})") from error
    if dtype.hasobject or dtype.kind not in kinds or found != shape:
        raise ValueError(
            f"{where}: {name} holds {found} of {dtype}; expected {shape} of kind {kinds!r} "
            "(object arrays are never loaded)"
        )
    if math.prod(found) * dtype.itemsize > len(data):
        raise ValueError(f"{where}: {name} is truncated")
    f.seek(0)
    return np.lib.format.read_array(f, allow_pickle=False)


def read_model_file(source: Any) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The checked metadata and arrays of a file of :meth:`ARS.save` or
    :meth:`ARSPolicy.save`, or (converted) of sb3-contrib's ``ARS.save``. Nothing in the
    file is ever unpickled, and nothing is allocated before its size is checked."""
    f, where = _open_source(source)
    try:
        with zipfile.ZipFile(f) as archive:
            names = set(archive.namelist())
            if {"data", "policy.pth"} <= names:
                return _read_sb3_zip(archive, where)
            allowed = {
                "metadata.npy",
                "parameters.npy",
                "obs_rms_mean.npy",
                "obs_rms_var.npy",
                "obs_rms_count.npy",
            }
            if "metadata.npy" not in names or names - allowed:
                raise ValueError(
                    f"{where} is a zip archive but not a model written by ars or sb3-contrib "
                    f"(members: {sorted(names)[:8]})"
                )
            meta = _read_metadata(archive, where)
            return meta, _read_arrays(archive, names, meta, where)
    except zipfile.BadZipFile as error:
        raise ValueError(
            f"{where} is not a readable ars model file ({error}); is it truncated, or "
            "written by another program?"
        ) from error
    except (OSError, EOFError, zlib.error, json.JSONDecodeError, UnicodeDecodeError) as error:
        if isinstance(error, FileNotFoundError):
            raise
        raise ValueError(
            f"{where} is not a readable ars model file ({type(error).__name__}: {error}); "
            "is it truncated, or written by another program?"
        ) from error
    finally:
        if not hasattr(source, "read"):
            f.close()


def _read_metadata(archive: zipfile.ZipFile, where: str) -> dict[str, Any]:
    raw = _read_member(archive, "metadata.npy", MAX_METADATA_BYTES, where)
    meta = _json(str(_npy(raw, (), "U", where, "metadata")), f"{where}: the metadata")
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ValueError(f"{where} is an .npz file but not one written by ars (ARS.save)")
    version = meta.get("format_version")
    if not _is_int(version) or version < 1:
        raise ValueError(f"{where}: format_version must be a positive integer; got {version!r}")
    if version > FORMAT_VERSION:
        raise ValueError(
            f"{where} was written by a newer ars (format {version}); upgrade ars to load it"
        )
    unknown = set(meta) - METADATA_FIELDS
    if unknown:
        raise ValueError(f"{where}: the metadata holds fields ars does not know: {sorted(unknown)}")
    _check_metadata(meta, where)
    return meta


def _json(text: str | bytes, where: str) -> Any:
    """Parsed JSON, or a ValueError naming the file (also for too deep or too long numbers)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as error:
        raise ValueError(f"{where} is not valid JSON ({error})") from None


def _check_metadata(meta: dict[str, Any], where: str) -> None:
    """Every field the loader uses, of the right type; unknown hyper-parameters refused."""

    def need(ok: bool, field: str, what: str) -> None:
        if not ok:
            raise ValueError(
                f"{where}: metadata field {field!r} must be {what}; got {meta.get(field)!r:.200}"
            )

    kind = meta.setdefault("kind", "model")
    need(kind in ("model", "policy"), "kind", '"model" or "policy"')
    need(meta.get("policy") in POLICY_ALIASES, "policy", f"one of {list(POLICY_ALIASES)}")
    kwargs = meta.get("policy_kwargs")
    need(
        isinstance(kwargs, dict)
        and set(kwargs) <= {"net_arch", "activation_fn", "with_bias", "squash_output"},
        "policy_kwargs",
        "a dict of net_arch, activation_fn, with_bias, squash_output",
    )
    arch = kwargs.get("net_arch", [])
    need(
        isinstance(arch, list)
        and len(arch) <= 100
        and all(_is_int(n) and 1 <= n <= MAX_PARAMETERS for n in arch),
        "policy_kwargs",
        "a dict whose net_arch is a list of positive integers",
    )
    need(
        all(isinstance(kwargs.get(k, True), bool) for k in ("with_bias", "squash_output")),
        "policy_kwargs",
        "a dict whose with_bias and squash_output are true or false",
    )
    need(
        kwargs.get("activation_fn", "relu") in ACTIVATIONS,
        "policy_kwargs",
        f"a dict whose activation_fn is one of {sorted(ACTIVATIONS)}",
    )
    obs_dim = _space_size(meta.get("observation_space"), f"{where}: observation_space")
    n_outputs = _space_size(meta.get("action_space"), f"{where}: action_space")
    n_params = _n_params(meta["policy"], kwargs, obs_dim, n_outputs)
    if n_params > MAX_PARAMETERS:
        raise ValueError(f"{where}: the metadata describes a policy of {n_params:,} parameters")
    meta["observation_space"] = _space_from_json(
        meta.get("observation_space"), f"{where}: observation_space"
    )
    meta["action_space"] = _space_from_json(meta.get("action_space"), f"{where}: action_space")
    if kind == "policy":
        return
    hparams = meta.get("hparams")
    need(isinstance(hparams, dict), "hparams", "a dict")
    for name, value in list(hparams.items()):
        if name not in SAVED_HPARAMS:  # e.g. a path (tensorboard_log): never taken from a file
            raise ValueError(f"{where}: hparams holds {name!r}, which a model file may not set")
        check, what = SAVED_HPARAMS[name]
        if not check(value):
            raise ValueError(f"{where}: hparams {name!r} must be {what}; got {value!r:.200}")
    for field in ("num_timesteps", "n_updates"):
        need(_is_int(meta.get(field)) and 0 <= meta[field] < 2**63, field, "an integer >= 0")
    env_id = meta.get("env_id")
    need(
        env_id is None or isinstance(env_id, str) and re.fullmatch(r"[\w./-]{1,200}", env_id),
        "env_id",
        "a registered env id such as 'Hopper-v4' or null (never 'module:Env', which imports)",
    )
    schedules = meta.get("schedules", [])
    need(
        isinstance(schedules, list) and set(schedules) <= {"learning_rate", "delta_std"},
        "schedules",
        "a list of learning_rate, delta_std",
    )
    episodes = meta.get("ep_info_buffer", [])
    need(
        isinstance(episodes, list)
        and all(
            isinstance(e, list)
            and len(e) == 2
            and _is_number(e[0])
            and _is_int(e[1])
            and 0 <= e[1] < 2**63
            for e in episodes
        ),
        "ep_info_buffer",
        "a list of [return, length]",
    )
    need(isinstance(meta.get("callbacks", {}), dict), "callbacks", "a dict")
    included = meta.get("included", {})
    need(
        isinstance(included, dict)
        and not set(included) & set(HPARAMS)
        and all(str(k).isidentifier() and not str(k).startswith("_") for k in included),
        "included",
        "a dict of public extra attributes",
    )


def _n_params(policy: str, kwargs: dict[str, Any], obs_dim: int, n_outputs: int) -> int:
    """The parameter count the metadata implies, computed without building anything."""
    arch = kwargs.get("net_arch", [] if policy == "LinearPolicy" else [64, 64])
    bias = kwargs.get("with_bias", policy != "LinearPolicy")
    sizes = [obs_dim, *arch, n_outputs]
    return sum(o * i + (o if bias else 0) for i, o in zip(sizes[:-1], sizes[1:]))


def _read_arrays(
    archive: zipfile.ZipFile, names: set[str], meta: dict, where: str
) -> dict[str, np.ndarray]:
    obs_space, action_space = meta["observation_space"], meta["action_space"]
    obs_dim, n_outputs = spaces.flatdim(obs_space), spaces.flatdim(action_space)
    n_params = _n_params(meta["policy"], meta["policy_kwargs"], obs_dim, n_outputs)
    expected = {"parameters": ((n_params,), "f")}
    if "obs_rms_mean.npy" in names:
        expected.update(
            obs_rms_mean=((obs_dim,), "f"), obs_rms_var=((obs_dim,), "f"), obs_rms_count=((), "iu")
        )
    if {f"{k}.npy" for k in expected} != names - {"metadata.npy"}:
        raise ValueError(
            f"{where}: expected the arrays {sorted(expected)}; the file holds "
            f"{sorted(n[:-4] for n in names - {'metadata.npy'})}"
        )
    arrays = {}
    for name, (shape, kinds) in expected.items():
        data = _read_member(archive, f"{name}.npy", 8 * math.prod(shape) + 4096, where)
        arrays[name] = _npy(data, shape, kinds, where, name)
    if not np.isfinite(arrays["parameters"]).all():
        raise ValueError(f"{where}: the policy's parameters hold NaN or infinite values")
    normalize_obs = meta.get("hparams", {}).get("normalize_obs")
    if normalize_obs is not None and normalize_obs != ("obs_rms_mean" in arrays):
        raise ValueError(
            f"{where}: normalize_obs is {normalize_obs} but the file "
            f"{'holds' if 'obs_rms_mean' in arrays else 'lacks'} observation statistics"
        )
    if "obs_rms_var" in arrays:
        if not (
            np.isfinite(arrays["obs_rms_mean"]).all()
            and np.isfinite(arrays["obs_rms_var"]).all()
            and (arrays["obs_rms_var"] >= 0).all()
            and int(arrays["obs_rms_count"]) >= 0
        ):
            raise ValueError(
                f"{where}: the observation statistics must be finite, with variances and "
                "a count >= 0"
            )
    return arrays


def load_model(
    cls: type, path: Any, env: Any, device: Any, overrides: dict[str, Any], print_system_info: bool
) -> ARS:
    """See :meth:`ARS.load`."""
    meta, arrays = read_model_file(path)
    if meta["kind"] != "model":
        raise ValueError(f"{path} holds a policy alone: load it with ARSPolicy.load")
    if print_system_info:
        print("== saved with:", meta.get("system_info"), "\n== now:", _system_info())
    unknown = set(overrides) - set(HPARAMS) - {"policy_kwargs"}
    if unknown:
        raise TypeError(f"ARS.load got settings it does not know: {sorted(unknown)}")
    hparams = {**meta["hparams"], **overrides}
    for name in meta.get("schedules", []):
        if name not in overrides:
            warnings.warn(
                f"{path}: {name} was a schedule, saved as its last value {hparams[name]}; pass "
                f"{name}= to ARS.load to restore it",
                stacklevel=3,
            )
    for name in meta.get("unreadable", []):
        if name not in overrides:
            warnings.warn(
                f"{path}: {name} is a schedule sb3-contrib stored as a pickle, which ars never "
                f"loads; using the default {_DEFAULTS['ARS'][name]}; pass {name}= to ARS.load",
                stacklevel=3,
            )
    policy_kwargs = hparams.pop("policy_kwargs", meta["policy_kwargs"])
    model = cls(meta["policy"], policy_kwargs=policy_kwargs, _init_setup_model=False, **hparams)
    model.device = device
    model.observation_space, model.action_space = meta["observation_space"], meta["action_space"]
    model.env_id = meta.get("env_id")
    model._setup_model()
    _load_arrays(model.policy, arrays, str(path))
    model.num_timesteps, model._n_updates = meta["num_timesteps"], meta["n_updates"]
    model.ep_info_buffer.extend(
        {"r": float(r), "l": int(n)} for r, n in meta.get("ep_info_buffer", [])
    )
    for name, value in meta.get("included", {}).items():
        if name in _own_attributes():  # a file adds attributes; never replaces the model's own
            raise ValueError(f"{path}: included {name!r} would replace part of the model")
        setattr(model, name, value)
    if env is not None:
        model.set_env(env)
    return model


def _load_arrays(policy: ARSPolicy, arrays: dict[str, np.ndarray], where: str) -> None:
    policy.load_from_vector(arrays["parameters"].astype(np.float64))
    if "obs_rms_mean" in arrays:
        policy.obs_rms = RunningMeanStd.from_moments(
            arrays["obs_rms_mean"].astype(np.float64),
            arrays["obs_rms_var"].astype(np.float64),
            int(arrays["obs_rms_count"]),
        )
    elif policy.obs_rms is not None:
        raise ValueError(f"{where}: a V2 (normalize_obs) model needs its observation statistics")


def _load_policy(source: Any) -> ARSPolicy:
    meta, arrays = read_model_file(source)
    cls = POLICY_ALIASES[meta["policy"]]
    policy = cls(meta["observation_space"], meta["action_space"], **meta["policy_kwargs"])
    if "obs_rms_mean" in arrays:
        policy.obs_rms = RunningMeanStd((policy.obs_dim,))
    _load_arrays(policy, arrays, str(source))
    return policy


def checkpoint_state(path: Any) -> dict[str, Any]:
    """The callbacks' state saved in a checkpoint by ``learn(checkpoint_interval=...)``."""
    return read_model_file(path)[0].get("callbacks", {})


# -------------------------------------------------------------------------------------------
# Adapters for Stable-Baselines3 users: VecEnvs, VecNormalize, sb3-contrib files, torch
# -------------------------------------------------------------------------------------------
#
# Duck-typed: SB3 and torch are never imported here unless the user's objects come from
# them (a VecEnv given, an sb3-contrib file loaded, a torch tensor passed).


def _is_vec_env(env: Any) -> bool:
    return all(hasattr(env, name) for name in ("num_envs", "step_async", "step_wait", "reset"))


def unwrap_vec_env(venv: Any) -> tuple[gym.Env, Any]:
    """The gymnasium env inside an SB3 VecEnv holding one env, and its VecNormalize if any.

    ``DummyVecEnv`` (as ``make_vec_env(id, n_envs=1)`` builds), with ``VecNormalize`` and
    ``VecMonitor`` around it, is accepted; wrappers that change observations in ways ARS
    cannot see through, several envs, or envs in other processes are refused clearly.
    """
    vec_normalize, layer = None, venv
    while hasattr(layer, "venv"):
        name = type(layer).__name__
        if name == "VecNormalize":
            vec_normalize = vec_normalize or layer
        elif name != "VecMonitor":
            raise ValueError(
                f"ARS cannot see through {name}: give it the env, a DummyVecEnv, or VecNormalize "
                "or VecMonitor around one"
            )
        layer = layer.venv
    if not hasattr(layer, "envs"):
        raise ValueError(
            f"{type(layer).__name__} runs its envs in other processes; ARS steps one env here. "
            "Pass a DummyVecEnv (make_vec_env(..., n_envs=1)); for parallel rollouts use "
            "AsyncEval"
        )
    if layer.num_envs != 1:
        raise ValueError(
            f"the VecEnv holds {layer.num_envs} envs; ARS steps one (n_envs=1). For parallel "
            "rollouts, use AsyncEval with one env function per worker"
        )
    return layer.envs[0], vec_normalize


def resolve_env(env: Any) -> tuple[gym.Env, Any, Any]:
    """``(gymnasium env, the SB3 VecEnv given or None, its VecNormalize or None)``."""
    if not isinstance(env, (str, gym.Env)) and not _is_vec_env(env) and callable(env):
        env = env()
    if _is_vec_env(env):
        gym_env, vec_normalize = unwrap_vec_env(env)
        return gym_env, env, vec_normalize
    return make_env(env), None, None


class _VecNormalizeFilter:
    """VecNormalize's observation normalisation, with its statistics frozen for an iteration:
    ``clip((obs - mean) / sqrt(var + epsilon), -clip_obs, clip_obs)`` as float32."""

    def __init__(self, mean: np.ndarray, var: np.ndarray, epsilon: float, clip_obs: float):
        self.mean, self.scale, self.clip = mean, np.sqrt(var + epsilon), clip_obs

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        return np.clip((obs - self.mean) / self.scale, -self.clip, self.clip).astype(np.float32)

    def wrap(self, act: Callable[[Any], Any]) -> Callable[[Any], Any]:
        return lambda obs: act(self(obs))


def _obs_filter(vec_normalize: Any) -> _VecNormalizeFilter | None:
    if vec_normalize is None or not vec_normalize.norm_obs:
        return None
    rms = vec_normalize.obs_rms
    return _VecNormalizeFilter(
        np.array(rms.mean), np.array(rms.var), vec_normalize.epsilon, vec_normalize.clip_obs
    )


def _filters(vec_normalize: Any) -> bool:
    """Whether a VecNormalize is learning its statistics (then rollouts keep them)."""
    return vec_normalize is not None and vec_normalize.norm_obs and vec_normalize.training


def _update_vec_normalize(vec_normalize: Any, visited: Sequence[RunningMeanStd | None]) -> None:
    """Merge the raw observations of an iteration into VecNormalize's statistics, exactly
    and in candidate order (sb3-contrib updates them during the rollouts, and merges
    workers with inflated counts)."""
    if _filters(vec_normalize):
        shape = np.shape(vec_normalize.obs_rms.mean)
        for rms in visited:
            if rms is not None and rms.count:
                vec_normalize.obs_rms.update_from_moments(
                    rms.mean.reshape(shape), rms.var.reshape(shape), rms.count
                )


def _copy_vec_normalize(vec_normalize: Any) -> Any:
    return None if vec_normalize is None else vec_normalize.obs_rms.copy()


def _restore_vec_normalize(vec_normalize: Any, saved: Any) -> None:
    if vec_normalize is not None:
        vec_normalize.obs_rms = saved


class _VecEnvView:
    """A gymnasium env seen as SB3's VecEnv of one env: batched ``reset``/``step``,
    auto-reset with ``terminal_observation``. Used when SB3 itself is not imported."""

    num_envs = 1

    def __init__(self, env: gym.Env):
        self.envs, self.observation_space, self.action_space = (
            [env],
            env.observation_space,
            env.action_space,
        )
        self._seed: int | None = None

    def reset(self) -> np.ndarray:
        obs, _ = self.envs[0].reset(seed=self._seed)
        self._seed = None
        return np.asarray(obs)[None]

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict]]:
        action = np.asarray(actions)[0]
        obs, reward, terminated, truncated, info = self.envs[0].step(action)
        info = dict(info, **{"TimeLimit.truncated": truncated and not terminated})
        if terminated or truncated:
            info["terminal_observation"] = obs
            obs, _ = self.envs[0].reset()
        return (
            np.asarray(obs)[None],
            np.array([reward], np.float32),
            np.array([terminated or truncated]),
            [info],
        )

    def step_async(self, actions: Any) -> None:
        self._actions = actions

    def step_wait(self) -> tuple:
        return self.step(self._actions)

    def seed(self, seed: int | None = None) -> list[int | None]:
        self._seed = seed
        return [seed]

    def render(self, mode: str | None = None) -> Any:
        return self.envs[0].render()

    def close(self) -> None:
        self.envs[0].close()


def _vec_env_view(model: ARS) -> Any:
    """``model.env``: the user's VecEnv, else a VecEnv over ``gym_env`` (SB3's DummyVecEnv
    when SB3 is imported, so SB3's callbacks see the type they expect)."""
    if model._vec_env is not None or model.gym_env is None:
        return model._vec_env
    if getattr(model, "_env_view", None) is None:
        sb3 = sys.modules.get("stable_baselines3.common.vec_env")
        env = model.gym_env
        model._env_view = sb3.DummyVecEnv([lambda: env]) if sb3 is not None else _VecEnvView(env)
    return model._env_view


class _HParams(collections.abc.MutableMapping):
    """``model.hparams``: the hyper-parameters in use, by key or attribute, writable."""

    def __init__(self, model: ARS):
        object.__setattr__(self, "_model", model)

    def __getitem__(self, key: str) -> Any:
        if key not in HPARAMS:
            raise KeyError(key)
        return getattr(self._model, key)

    def __setitem__(self, key: str, value: Any) -> None:
        if key not in HPARAMS:
            raise KeyError(f"{key!r} is not a hyper-parameter of ARS: {list(HPARAMS)}")
        setattr(self._model, key, value)

    def __delitem__(self, key: str) -> None:
        raise TypeError("hyper-parameters cannot be deleted")

    def __iter__(self) -> Any:
        return iter(HPARAMS)

    def __len__(self) -> int:
        return len(HPARAMS)

    def __getattr__(self, key: str) -> Any:
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None

    def __setattr__(self, key: str, value: Any) -> None:
        self[key] = value

    def __repr__(self) -> str:
        return repr(dict(self))


class _FrozenHParams(dict):
    """``model.hparams_initial``: the hyper-parameters given at construction, read-only."""

    def __getattr__(self, key: str) -> Any:
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None

    def _refuse(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("hparams_initial is read-only; change model.hparams instead")

    __setitem__ = __delitem__ = __setattr__ = update = pop = clear = setdefault = _refuse


_DEVICE_WARNED: list[bool] = []


def _check_device(device: Any) -> None:
    """Any device is accepted; a GPU falls back to the CPU with one warning, as SB3 does."""
    kind = str(getattr(device, "type", device)).split(":")[0]
    if kind not in ("cpu", "auto") and not _DEVICE_WARNED:
        _DEVICE_WARNED.append(True)
        warnings.warn(
            f"device={device!r}: ars computes with NumPy on the CPU, so it uses the CPU",
            stacklevel=4,
        )


def _policy_to_torch(policy: ARSPolicy) -> Any:
    """``ARSPolicy.to_torch``: the layers of :meth:`ARSPolicy.layers` as a torch module."""
    torch = _require("torch", "pip install torch (ars's 'torch' extra)")
    if not isinstance(policy.observation_space, spaces.Box):
        raise NotImplementedError("to_torch supports Box observation spaces")
    nn, modules = torch.nn, []
    layers = policy.layers()
    for i, (weight, bias) in enumerate(layers):
        linear = nn.Linear(
            weight.shape[1], weight.shape[0], bias=bias is not None, dtype=torch.float64
        )
        with torch.no_grad():
            linear.weight.copy_(torch.from_numpy(weight))
            if bias is not None:
                linear.bias.copy_(torch.from_numpy(bias))
        modules.append(linear)
        if i < len(layers) - 1:
            modules.append(
                {"relu": nn.ReLU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid, "identity": nn.Identity}[
                    policy.activation_fn
                ]()
            )

    class TorchARSPolicy(nn.Module):
        """The ARS policy as a torch module: observations in, actions out."""

        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(*modules)
            if isinstance(policy.action_space, spaces.Box):
                self.register_buffer("low", torch.from_numpy(policy._low))
                self.register_buffer("high", torch.from_numpy(policy._high))

        def forward(self, obs: Any) -> Any:
            obs = torch.as_tensor(obs, dtype=torch.float64)
            n_lead = obs.dim() - len(policy.observation_space.shape)
            out = self.net(obs.reshape(*obs.shape[:n_lead], policy.obs_dim))
            if isinstance(policy.action_space, spaces.Discrete):
                return out.argmax(dim=-1) + int(policy.action_space.start)
            if policy.squash_output:
                out = (self.high + self.low) / 2 + (self.high - self.low) / 2 * torch.tanh(out)
            else:
                out = torch.clamp(out, self.low, self.high)
            return out.reshape(*out.shape[:-1], *policy.action_space.shape)

    return TorchARSPolicy()


# -- the positional orders of lit_sb3 and sb3-contrib -----------------------------------------

# Positional parameters after ``policy``: the seed's order and sb3-contrib's (which adds env).
SEED_ORDER = tuple(
    "n_delta n_top learning_rate delta_std zero_policy alive_bonus_offset n_eval_episodes "
    "policy_kwargs stats_window_size seed verbose device _init_setup_model".split()
)
SB3_ORDER = ("env", *SEED_ORDER[:9], "tensorboard_log", *SEED_ORDER[9:])


LEARN_SEED_ORDER = tuple(
    "env callback log_every_n_steps tb_log_name reset_num_timesteps async_eval "
    "progress_bar default_root_dir".split()
)
LEARN_SB3_ORDER = tuple(
    "callback log_interval tb_log_name reset_num_timesteps async_eval progress_bar".split()
)
_DEFAULTS = {  # the keyword parameters of ARS() and learn(), with their defaults
    name: {
        p.name: p.default
        for p in inspect.signature(fn).parameters.values()
        if p.kind == p.KEYWORD_ONLY
    }
    for name, fn in (("ARS", ARS.__init__), ("learn", ARS.learn))
}


def _looks_like_env(args: tuple) -> bool:
    """Whether ``learn``'s positional arguments start with an env (the seed's order)."""
    if not args:
        return False
    value = args[0]
    if value is None:  # both orders have None there; sb3-contrib's has an int next
        return not _is_int(args[1:2])
    if isinstance(value, (str, gym.Env)) or _is_vec_env(value):
        return True
    if callable(value) and not _is_sb3_callback(value) and not hasattr(value, "on_iteration"):
        try:  # an env factory takes no argument; a callback function takes (locals, globals)
            return len(inspect.signature(value).parameters) == 0
        except (TypeError, ValueError):
            return False
    return False


def _arguments(given: dict[str, Any], where: str, order: Sequence[str]) -> Any:
    """The parameters of ``ARS()`` or ``learn()`` by name, the positional ones placed by ``order``.

    ``given`` is the function's ``locals()``; a parameter given both ways is an error.
    """
    args, defaults = given["args"], _DEFAULTS[where]
    values = {k: v for k, v in given.items() if k in defaults}
    if len(args) > len(order):
        raise TypeError(
            f"{where}() takes at most {len(order)} positional arguments after the "
            f"first; got {len(args)}"
        )
    for name, value in zip(order, args):
        if values[name] is not defaults[name]:
            raise TypeError(f"{where}() got two values for {name!r}")
        values[name] = value
    return types.SimpleNamespace(**values)


# -- parameters under sb3-contrib's names ---------------------------------------------------------


def _policy_state_dict(policy: ARSPolicy) -> dict[str, np.ndarray]:
    """``action_net.<2i>.weight`` and ``.bias`` per layer (torch's layout), plus V2's statistics."""
    state, start = {}, 0
    for i, (out, inp) in enumerate(policy.layer_shapes):
        state[f"action_net.{2 * i}.weight"] = (
            policy._theta[start : start + out * inp].reshape(out, inp).copy()
        )
        start += out * inp
        if policy.with_bias:
            state[f"action_net.{2 * i}.bias"] = policy._theta[start : start + out].copy()
            start += out
    if policy.obs_rms is not None:
        state.update(
            {
                "obs_rms.mean": policy.obs_rms.mean.copy(),
                "obs_rms.var": policy.obs_rms.var.copy(),
                "obs_rms.count": np.array(policy.obs_rms.count),
            }
        )
    return state


def _load_policy_state_dict(policy: ARSPolicy, state_dict: dict[str, Any], strict: bool) -> None:
    """Check every key and shape first, then set all at once: never a half-updated policy."""
    given = {}
    for key, value in state_dict.items():
        if key in ("action_net.weight", "action_net.bias"):  # sb3-contrib < 1.7's LinearPolicy
            key = key.replace("action_net.", "action_net.0.")
        given[key] = _as_array(value, None)
    expected = _policy_state_dict(policy)
    unknown, missing = sorted(set(given) - set(expected)), sorted(set(expected) - set(given))
    if unknown or (strict and missing):
        raise ValueError(
            f"parameters do not match the policy: unknown {unknown}, missing "
            f"{missing if strict else []}; "
            f"expected {sorted(expected)}"
        )
    for key, value in given.items():
        if value.shape != expected[key].shape:
            raise ValueError(
                f"parameter {key!r} has shape {value.shape}, the policy expects "
                f"{expected[key].shape}"
            )
        if value.dtype.kind not in "fiub" or not np.isfinite(value.astype(np.float64)).all():
            raise ValueError(f"parameter {key!r} must hold finite numbers")
    if "obs_rms.var" in given and (given["obs_rms.var"] < 0).any():
        raise ValueError("obs_rms.var must be >= 0")
    if "obs_rms.count" in given and (
        int(given["obs_rms.count"]) < 0 or given["obs_rms.count"] % 1 != 0
    ):
        raise ValueError("obs_rms.count must be a whole number >= 0")
    merged = {**expected, **given}
    theta = np.concatenate(
        [merged[k].astype(np.float64).reshape(-1) for k in expected if k.startswith("action_net")]
    )
    policy.load_from_vector(theta)
    if policy.obs_rms is not None:
        policy.obs_rms = RunningMeanStd.from_moments(
            merged["obs_rms.mean"].astype(np.float64),
            merged["obs_rms.var"].astype(np.float64),
            int(merged["obs_rms.count"]),
        )


def _set_parameters(model: ARS, load_path_or_dict: Any, exact_match: bool) -> None:
    if model.policy is None:
        raise ValueError("the model has no policy yet: give it an env first")
    if isinstance(load_path_or_dict, (str, os.PathLike)) or hasattr(load_path_or_dict, "read"):
        meta, arrays = read_model_file(load_path_or_dict)
        source = POLICY_ALIASES[meta["policy"]](
            meta["observation_space"], meta["action_space"], **meta["policy_kwargs"]
        )
        if "obs_rms_mean" in arrays:
            source.obs_rms = RunningMeanStd((source.obs_dim,))
        _load_arrays(source, arrays, str(load_path_or_dict))
        load_path_or_dict = {"policy": source.state_dict()}
    if not isinstance(load_path_or_dict, dict) or not isinstance(
        load_path_or_dict.get("policy"), dict
    ):
        raise ValueError(
            "expected a path, or a dict {'policy': {name: array}} as get_parameters() returns"
        )
    unknown = sorted(set(load_path_or_dict) - {"policy"})
    if unknown:
        raise ValueError(f"unknown parameter groups {unknown}: an ARS model has only 'policy'")
    model.policy.load_state_dict(load_path_or_dict["policy"], strict=exact_match)


# -- sb3-contrib's model files: its JSON and its weights, never its pickles ------------------------


def _read_sb3_zip(
    archive: zipfile.ZipFile, where: str
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Metadata and arrays in ars's form from a file of sb3-contrib's ``ARS.save``.

    The JSON's readable fields give the settings and, where they can be parsed, the
    spaces; the weights come from ``policy.pth`` through ``torch.load(weights_only=True)``.
    """
    data = _json(_read_member(archive, "data", MAX_METADATA_BYTES, where), f"{where}: data")
    if not isinstance(data, dict):
        raise ValueError(f"{where}: sb3-contrib's 'data' must be a JSON object")
    torch = _require(
        "torch", "pip install torch (ars's 'torch' extra): reading sb3-contrib's weights needs it"
    )
    raw = _read_member(archive, "policy.pth", 8 * MAX_PARAMETERS + (1 << 20), where)
    state = torch.load(io.BytesIO(raw), map_location="cpu", weights_only=True)
    policy_class = data.get("policy_class") if isinstance(data.get("policy_class"), dict) else {}
    linear = "Linear policy" in str(policy_class.get("__doc__", ""))
    kwargs = data.get("policy_kwargs") if isinstance(data.get("policy_kwargs"), dict) else {}
    kwargs = {
        k: v
        for k, v in kwargs.items()
        if k in ("net_arch", "with_bias", "squash_output", "activation_fn")
    }
    if ":serialized:" in kwargs or isinstance(kwargs.get("activation_fn"), str):
        name = re.search(r"\.(\w+)'>", str(kwargs.get("activation_fn", "")))
        kwargs["activation_fn"] = name.group(1).lower() if name else "relu"
    layers = sorted({int(k.split(".")[-2]) for k in state if k.startswith("action_net.")})
    parts = [
        state[f"action_net.{i}.{name}"].detach().double().numpy().reshape(-1)
        for i in layers
        for name in ("weight", "bias")
        if f"action_net.{i}.{name}" in state
    ]
    kwargs["with_bias"] = any(k.endswith(".bias") for k in state)
    if linear:
        kwargs = {k: kwargs[k] for k in ("with_bias", "squash_output") if k in kwargs}
    hparams = {
        k: data[k]
        for k in (
            "n_delta",
            "n_top",
            "n_eval_episodes",
            "zero_policy",
            "alive_bonus_offset",
            "seed",
        )
        if k in SAVED_HPARAMS and SAVED_HPARAMS[k][0](data.get(k))
    }
    unreadable = []  # schedules other than constants exist only as pickles: never read
    for name, key in (("learning_rate", "lr_schedule"), ("delta_std", "delta_std_schedule")):
        value = re.search(
            r"val=([-+0-9.eE]+)", str((data.get(key) or {}).get("value_schedule", ""))
        )
        if value:
            hparams[name] = float(value.group(1))
        else:
            unreadable.append(name)
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "kind": "model",
        "policy": "LinearPolicy" if linear else "MlpPolicy",
        "policy_kwargs": kwargs,
        "hparams": hparams,
        "observation_space": _sb3_space(data.get("observation_space")),
        "action_space": _sb3_space(data.get("action_space")),
        "env_id": None,
        "num_timesteps": steps if _is_int(steps := data.get("num_timesteps")) and steps >= 0 else 0,
        "n_updates": int(data.get("_n_updates") or 0),
        "unreadable": unreadable,
    }
    return meta, {"parameters": np.concatenate(parts) if parts else np.zeros(0)}


def _sb3_space(data: Any) -> spaces.Space | None:
    """A space from the readable fields SB3 writes beside its pickle, when they parse."""
    if not isinstance(data, dict):
        return None
    kind = str(data.get(":type:", ""))
    try:
        if "Discrete" in kind and "Multi" not in kind:
            return spaces.Discrete(int(data["n"]), start=int(data.get("start", 0)))
        if "Box" in kind and "..." not in str(data.get("low")) + str(data.get("high")):
            shape, dtype = tuple(data["_shape"]), np.dtype(data["dtype"])
            low, high = (
                np.array(_parse_numpy_str(data[k]), dtype=dtype).reshape(shape)
                for k in ("low", "high")
            )
            return spaces.Box(low, high, shape=shape, dtype=dtype)
    except (KeyError, TypeError, ValueError):
        pass
    return None


def _parse_numpy_str(text: str) -> list[float]:
    return [float(x) for x in str(text).replace("[", " ").replace("]", " ").split()]


# -------------------------------------------------------------------------------------------
# Demonstrations: a warm start before training
# -------------------------------------------------------------------------------------------


def load_demonstrations(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """``(observations, actions)`` from a ``.npz`` trajectory or a folder of them (no pickle)."""
    path = Path(path)
    files = sorted(path.glob("*.npz")) if path.is_dir() else [path]
    if not files or not files[0].exists():
        raise FileNotFoundError(f"no .npz trajectories at {path}")
    observations, actions = [], []
    for file in files:
        try:
            with np.load(file, allow_pickle=False) as data:
                names = set(data.files)
                if {"observations", "actions"} <= names:
                    observations.append(data["observations"])
                    actions.append(data["actions"])
        except (OSError, EOFError, ValueError, zipfile.BadZipFile) as error:  # ValueError: pickles
            raise ValueError(
                f"{file} is not a readable .npz trajectory of plain arrays "
                f"({type(error).__name__}: {error})"
            ) from error
        if not {"observations", "actions"} <= names:
            raise ValueError(
                f"{file} must hold arrays 'observations' and 'actions'; it has {sorted(names)}"
            )
    try:
        return np.concatenate(observations), np.concatenate(actions)
    except ValueError as error:
        raise ValueError(f"the trajectories in {path} do not fit together: {error}") from error


def warm_start(model: ARS, demonstrations: Any, ridge: float = 1e-3) -> None:
    """Fit the model's linear policy to demonstrations in closed form, before training.

    The demonstrations' observations seed the V2 statistics; the policy is then the ridge
    regression of the actions on the normalised observations. Squashed Box actions are
    regressed through ``atanh``; Discrete actions through one-hot targets.

    Parameters
    ----------
    model : ARS
    demonstrations : tuple or path
        ``(observations, actions)`` arrays, or a ``.npz`` file or a folder of them.
    ridge : float
        The L2 penalty of the regression.
    """
    policy = model.policy
    if policy is None or policy.net_arch:
        raise ValueError(
            "warm_start fits linear policies (LinearPolicy, or MlpPolicy with net_arch=[])"
        )
    if isinstance(demonstrations, (str, os.PathLike)):
        demonstrations = load_demonstrations(demonstrations)
    _check_float("ridge", ridge, low=0.0)
    observations, actions = (_as_array(x, None) for x in demonstrations)
    shape = policy.observation_space.shape
    if (
        observations.ndim != len(shape) + 1
        or observations.shape[1:] != shape
        or not len(observations)
    ):
        raise ValueError(
            f"demonstration observations must have shape (n >= 1, *{shape}); "
            f"got {observations.shape}"
        )
    observations = _flattener(policy.observation_space)(observations).astype(np.float64)
    if len(actions) != len(observations):
        raise ValueError(f"got {len(observations)} observations but {len(actions)} actions")
    if not np.isfinite(observations).all() or not np.isfinite(actions.astype(np.float64)).all():
        raise ValueError("the demonstrations hold non-finite values (nan or inf)")
    space = policy.action_space
    if isinstance(space, spaces.Discrete):
        index = actions.reshape(-1) - int(space.start)
        if (actions.reshape(-1) % 1 != 0).any() or index.min() < 0 or index.max() >= space.n:
            raise ValueError(
                f"demonstration actions must be integers in {space}; got values from "
                f"{actions.min()} to {actions.max()}"
            )
        targets = -np.ones((len(actions), policy.action_dim))
        targets[np.arange(len(actions)), index.astype(np.int64)] = 1.0
    else:
        targets = actions.astype(np.float64).reshape(len(actions), -1)
        if (
            targets.shape[1] != policy.action_dim
            or (targets < policy._low).any()
            or (targets > policy._high).any()
        ):
            raise ValueError(
                f"demonstration actions must lie in {space}; got shape {actions.shape} and values "
                f"from {actions.min()} to {actions.max()}"
            )
        if policy.squash_output:
            center, scale = (policy._high + policy._low) / 2, (policy._high - policy._low) / 2
            targets = np.arctanh(np.clip((targets - center) / scale, -0.999, 0.999))
    if policy.obs_rms is not None:  # regress on what the first layer sees: normalised observations
        policy.obs_rms = policy.obs_rms.copy().update(observations)
        inputs = (observations - policy.obs_rms.mean) * _inverse_std(policy.obs_rms.var)
    else:
        inputs = observations
    if policy.with_bias:
        inputs = np.hstack([inputs, np.ones((len(inputs), 1))])
    solution = np.linalg.solve(
        inputs.T @ inputs + ridge * np.eye(inputs.shape[1]), inputs.T @ targets
    ).T
    weight, bias = (solution[:, :-1], solution[:, -1]) if policy.with_bias else (solution, None)
    policy.load_from_vector(np.concatenate([weight.ravel(), [] if bias is None else bias]))


def paper_model(env_id: str, env: Any = None, **overrides: Any) -> ARS:
    """An :class:`ARS` with the paper's hyper-parameters for ``env_id`` (:func:`settings_for`).

    ``overrides`` replace any setting (``n_delta=16``, ``net_arch=[32]``, ...) or pass other
    ``ARS`` arguments (``seed``, ``verbose``, ...). ``env`` defaults to ``env_id``.

    Examples
    --------
    >>> model = paper_model("Hopper-v4", seed=237)  # alpha=0.01, nu=0.025, N=8, b=4, shift -1, V2
    """
    config = {**settings_for(env_id), **overrides}
    config.pop("total_timesteps")
    net_arch = config.pop("net_arch")
    if net_arch:
        if config["policy"] == "LinearPolicy":
            raise ValueError(
                f"net_arch={net_arch} needs policy='MlpPolicy' (LinearPolicy has no hidden layer)"
            )
        config["policy_kwargs"] = {**(config.get("policy_kwargs") or {}), "net_arch": net_arch}
    return ARS(config.pop("policy"), env=env if env is not None else env_id, **config)


# -------------------------------------------------------------------------------------------
# Videos
# -------------------------------------------------------------------------------------------


GIF_FPS = 10  # frames per second of a GIF; MP4s keep every frame


def record_video(
    model: Any,
    path: str | os.PathLike,
    env: Any = None,
    seed: int | None = None,
    max_steps: int | None = None,
    width: int = 200,
) -> tuple[float, int]:
    """Record one deterministic episode of ``model`` (an ARS or a policy) to an MP4 or GIF.

    The clip plays in real time at the env's frame rate (``metadata["render_fps"]``). An
    MP4 keeps every frame at the env's size; a GIF keeps 10 frames per second, ``width``
    pixels square (MuJoCo envs), 48 colors, a coarser floor checker, and only what changes
    from frame to frame: a 10-second clip of a MuJoCo walker is a few hundred KB. Needs
    ``pip install imageio-ffmpeg`` (ars's ``video`` extra; it ships ffmpeg), and pygame
    for classic-control envs. MuJoCo renders without a display through ``MUJOCO_GL=egl``,
    which is set when nothing else is. The file is written whole or not at all.

    Parameters
    ----------
    model : ARS or ARSPolicy
    path : str or path
        ``.mp4`` or ``.gif``.
    env : str, Env or callable, optional
        The env id (default: the one saved with the model), made with
        ``render_mode="rgb_array"``; or an env (or a function returning one) made so.
    seed : int, optional
        The episode's env seed (default: the model's first evaluation seed).
    max_steps : int, optional
        Stop the clip after this many steps (default: the model's ``max_episode_steps``).
    width : int
        A GIF's width and height in pixels, for MuJoCo envs (others keep their size).

    Returns
    -------
    (float, int)
        The episode's return and the number of frames rendered (one per step, and the
        first); a GIF keeps ``GIF_FPS`` of them a second.
    """
    path = Path(path)
    if path.suffix.lower() not in (".mp4", ".gif"):
        raise ValueError(f"a video file must end in .mp4 or .gif; got {str(path)!r}")
    ffmpeg = _require("imageio_ffmpeg", "pip install imageio-ffmpeg (ars's 'video' extra)")
    gif = path.suffix.lower() == ".gif"
    if max_steps is None:
        max_steps = getattr(model, "max_episode_steps", None)
    target = _atomic_file(path, "wb")
    with target:  # a target that cannot be written fails before the episode is rendered
        frames, fps, total = _render_episode(
            model, env, seed, max_steps, "rgb_array", width if gif else None
        )
        _encode(ffmpeg.get_ffmpeg_exe(), target.tmp, path, frames, fps)
    return total, len(frames)


def _render_env(env_id: str, render_mode: str, size: int | None = None) -> gym.Env:
    """``gym.make(env_id, render_mode=...)``, or one line saying what to set or install.

    MuJoCo without a display needs ``MUJOCO_GL=egl`` before it is first imported (its
    default, GLFW, aborts the process without a display), so that is set when it can be.
    With ``size`` (for GIFs), MuJoCo renders ``size`` pixels square and draws its floor's
    checker 8 times coarser: a moving fine checker is most of a GIF's bytes.
    """
    display = os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    mujoco = "mujoco" in str(getattr(gym.spec(env_id), "entry_point", ""))
    if render_mode == "human" and not display:
        raise RuntimeError(f"cannot render {env_id} in a window: there is no display; use --video")
    if mujoco and render_mode == "rgb_array" and not os.environ.get("MUJOCO_GL"):
        os.environ["MUJOCO_GL"] = "egl"  # off-screen frames need no display (read per renderer)
    try:
        env = gym.make(
            env_id,
            render_mode=render_mode,
            **({"width": size, "height": size} if mujoco and size else {}),
        )
        if mujoco and size:
            env.unwrapped.model.mat_texrepeat[:] /= 8
        env.reset(seed=0)
        env.render()
        if mujoco:
            _follow_the_agent(env, render_mode)
        return env
    except Exception as error:  # GL and display errors come from several libraries
        fix = (
            "set MUJOCO_GL=egl (or osmesa) and check that its library is installed"
            if mujoco
            else "pip install pygame (gymnasium's 'classic-control' extra)"
        )
        raise RuntimeError(
            f"cannot render {env_id}: {type(error).__name__}: {error}; {fix}"
        ) from error


def _follow_the_agent(env: gym.Env, render_mode: str) -> None:
    """Make MuJoCo's camera follow the agent.

    gymnasium's locomotion envs ask their free camera to track a body, which MuJoCo only
    does for a tracking camera: without this, the agent soon walks out of the picture.
    """
    import mujoco

    renderer = env.unwrapped.mujoco_renderer
    renderer.camera_id = None  # keep the camera we set: a camera id would reset its type
    camera = renderer._get_viewer(render_mode).cam
    camera.type = mujoco.mjtCamera.mjCAMERA_TRACKING
    camera.trackbodyid = int(renderer.default_cam_config.get("trackbodyid", 1) or 1)


def _render_episode(
    model: Any,
    env: Any,
    seed: int | None,
    max_steps: int | None,
    render_mode: str,
    size: int | None = None,
) -> tuple[list, float, float]:
    """The frames (for ``rgb_array``), frame rate and return of one deterministic episode."""
    policy = _policy_of(model)
    env = env or getattr(model, "env_id", None)
    if isinstance(env, str):
        render_env = _render_env(env, render_mode, size)
    elif env is not None:
        render_env = env() if callable(env) and not isinstance(env, gym.Env) else env
        if getattr(render_env, "render_mode", None) != render_mode:
            raise ValueError(f"the env must be made with render_mode={render_mode!r}")
    else:
        raise ValueError("recording needs an env: pass env='Hopper-v4' (or a model saving it)")
    _check_same_spaces(_spaces_of(render_env), _spaces_of(policy), "the env", "the policy")
    seed = int(evaluation_seeds(getattr(model, "seed", 0) + 1, 1)[0]) if seed is None else seed
    frames = []

    def grab(action: Any, transition: tuple) -> None:
        frames.append(render_env.render())

    render_env.reset(seed=seed)
    frames.append(render_env.render())
    returns, _, _ = run_episodes(render_env, policy.actor(), [seed], None, False, max_steps, grab)
    fps = float(render_env.metadata.get("render_fps") or 30)
    render_env.close()
    return [f for f in frames if f is not None], fps, float(returns[0])


def _encode(ffmpeg: str, tmp: str, path: Path, frames: list, fps: float) -> None:
    """Encode ``frames`` (RGB arrays) into ``tmp`` with ffmpeg; an OSError naming ``path``."""
    frames = [np.ascontiguousarray(f, dtype=np.uint8) for f in frames if f is not None]
    height, width = frames[0].shape[:2]
    if path.suffix.lower() == ".mp4":  # H.264 needs even sides
        codec = ["-vf", "pad=ceil(iw/2)*2:ceil(ih/2)*2", "-vcodec", "libx264", "-crf", "25"]
        codec += ["-pix_fmt", "yuv420p"]
    else:  # one palette for the clip, and only the changed rectangle of each frame
        graph = (
            f"fps={min(fps, GIF_FPS)},split[a][b];"
            "[a]palettegen=max_colors=48[p];[b][p]paletteuse=dither=none:diff_mode=rectangle"
        )
        codec = ["-filter_complex", graph, "-vcodec", "gif", "-pix_fmt", "pal8", "-qscale:v", "16"]
    rate = str(Fraction(fps).limit_denominator())
    command = [ffmpeg, "-y", "-v", "error", "-f", "rawvideo", "-pix_fmt", "rgb24"]
    container = ["-f", path.suffix.lower()[1:]]  # the temporary file's name ends in .tmp
    command += ["-s", f"{width}x{height}", "-r", rate, "-i", "-", *codec, *container, f"file:{tmp}"]
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        for frame in frames:
            process.stdin.write(frame.tobytes())
    except BrokenPipeError:
        pass  # ffmpeg stopped early: its own message follows
    _, errors = process.communicate()
    if process.returncode != 0:
        lines = errors.decode(errors="replace").strip().splitlines() or [
            f"exit {process.returncode}"
        ]
        raise OSError(f"could not write {path}: ffmpeg: {lines[-1]}")


# -------------------------------------------------------------------------------------------
# Command line
# -------------------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit status 2
        self.exit(2, f"error: {message} (python ars.py --help)\n")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def _finite_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} must be finite")
    return value


def _timesteps(text: str) -> int:
    value = _finite_float(text)
    if value < 1 or value != int(value):
        raise argparse.ArgumentTypeError(
            f"{text!r} must be a whole number of timesteps, at least 1"
        )
    return int(value)


def _net_arch(text: str) -> list[int]:
    sizes = [_positive_int(n) for n in text.split(",") if n.strip()]
    if not sizes:
        raise argparse.ArgumentTypeError(f"{text!r} names no layer sizes; e.g. 64,64")
    return sizes


# Flags whose value defines a run: refused on --resume unless equal to the run's.
RUN_FLAGS = tuple(
    "env policy net_arch n_delta n_top learning_rate delta_std alive_bonus_offset "
    "normalize_obs zero_policy common_random_numbers n_eval_episodes seed eval_freq "
    "eval_episodes checkpoint_interval demos normalization_samples max_episode_steps".split()
)


def _parser() -> argparse.ArgumentParser:
    """The command line's flags."""
    p = _Parser(
        prog="python ars.py",
        description="Train a policy with Augmented Random Search. Unset flags take the "
        f"paper's (or rl-baselines3-zoo's) value for the env ({', '.join(PAPER_SETTINGS)}; "
        "any -v4/-v5 id) or a generic default.",
        epilog="examples:\n  python ars.py                        CartPole-v1 to 500 in seconds\n"
        "  python ars.py --env Hopper-v4        the paper's Hopper run\n"
        "  python ars.py --eval runs/Hopper-v4-20261129-101500/model.npz\n"
        "  python ars.py --resume runs/Hopper-v4-20261129-101500",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = p.add_argument
    add(
        "--env",
        help="gymnasium env id (default CartPole-v1; with --eval, the env saved in the model)",
    )
    add("--policy", choices=list(POLICY_ALIASES), help="LinearPolicy (the paper's) or MlpPolicy")
    add("--net-arch", type=_net_arch, help="MlpPolicy hidden sizes, e.g. 64,64 (selects MlpPolicy)")
    add("--n-delta", type=_positive_int, help="N: directions per iteration")
    add("--n-top", type=_positive_int, help="b: best directions kept for the update (default N)")
    add("--learning-rate", type=_finite_float, help="alpha: step size")
    add("--delta-std", type=_finite_float, help="nu: exploration noise")
    add(
        "--alive-bonus-offset",
        type=_finite_float,
        help="added to every training reward (e.g. -1 for Hopper)",
    )
    add(
        "--normalize-obs",
        action=argparse.BooleanOptionalAction,
        help="V2 observation normalisation",
    )
    add("--zero-policy", action=argparse.BooleanOptionalAction, help="start from zero parameters")
    add(
        "--common-random-numbers",
        action=argparse.BooleanOptionalAction,
        help="same env seeds for the +/- rollouts of a direction (default on)",
    )
    add("--n-eval-episodes", type=_positive_int, help="episodes per candidate (default 1)")
    add(
        "--total-timesteps",
        type=_timesteps,
        help="env steps to train for (on --resume: a new, larger total)",
    )
    add("--seed", type=int, help="random seed (default: drawn, and saved in config.json)")
    add(
        "--max-episode-steps",
        type=_positive_int,
        help="end episodes after this many steps (with --video: the clip's length)",
    )
    add(
        "--workers",
        type=int,
        help="worker processes for the rollouts (default: one per core for MuJoCo "
        "tasks, else 0: this process)",
    )
    add(
        "--job-timeout",
        type=_finite_float,
        default=DEFAULT_JOB_TIMEOUT,
        help=f"seconds a worker may spend on one candidate before it is taken for stuck "
        f"(default {DEFAULT_JOB_TIMEOUT:g})",
    )
    add(
        "--start-timeout",
        type=_finite_float,
        default=DEFAULT_START_TIMEOUT,
        help=f"seconds for a worker to start and build its env (default {DEFAULT_START_TIMEOUT:g})",
    )
    add("--run-dir", help="output folder (default runs/<env>-<date>-<time>)")
    add("--overwrite", action="store_true", help="start a new run in a --run-dir that holds one")
    add("--eval", metavar="MODEL", help="evaluate a saved model instead of training")
    add(
        "--video",
        metavar="FILE",
        help="with --eval: record one deterministic episode (.mp4 or .gif)",
    )
    add("--render", action="store_true", help="with --eval: show one episode in a window")
    add(
        "--eval-episodes",
        type=_positive_int,
        default=10,
        help="episodes per evaluation, during training and at the end (default 10)",
    )
    add(
        "--eval-freq",
        type=_positive_int,
        help="timesteps between evaluations (default: total / 20)",
    )
    add(
        "--checkpoint-interval",
        type=_positive_int,
        default=10,
        help="iterations between checkpoints (default 10)",
    )
    add(
        "--resume",
        metavar="RUN_DIR",
        help="continue an interrupted run from its checkpoint, exactly",
    )
    add(
        "--demos",
        metavar="PATH",
        help="warm start: fit the linear policy to demonstrations (.npz or a folder)",
    )
    add(
        "--normalization-samples",
        type=int,
        default=0,
        help="V2: steps of the initial policy to estimate the statistics from",
    )
    add("--verbose", type=int, default=0, help="1: print the full log table each iteration")
    return p


MAX_WORKERS = 1024  # more processes than this on one machine is a typo


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = _parser()
    args = p.parse_args(argv)
    if args.workers is not None and not 0 <= args.workers <= MAX_WORKERS:
        p.error(f"--workers must be from 0 to {MAX_WORKERS}; got {args.workers}")
    if args.env is not None and not args.env.strip():
        p.error("--env needs an env id, e.g. CartPole-v1")
    if args.verbose < 0:
        p.error(f"--verbose must be 0 or more; got {args.verbose}")
    if (args.video is not None or args.render) and not args.eval:
        p.error("--video and --render show a saved model: add --eval MODEL")
    if args.video is not None and (args.render or not args.video.strip()):
        p.error("--video needs a file name (.mp4 or .gif), and goes without --render")
    if args.normalization_samples < 0:
        p.error(f"--normalization-samples must be 0 or more; got {args.normalization_samples}")
    if args.job_timeout <= 0 or args.start_timeout <= 0:
        p.error(
            f"--job-timeout and --start-timeout must be positive; got {args.job_timeout}, "
            f"{args.start_timeout}"
        )
    given = [f for f in vars(args) if f in RUN_FLAGS and getattr(args, f) != p.get_default(f)]
    args.explicit = set(given)
    return args


class _Interrupts:
    """Ctrl+C (SIGINT) once: finish the current iteration, then stop. Again, or SIGTERM:
    stop now, discarding the unfinished iteration. Either way a checkpoint is written."""

    def __init__(self) -> None:
        self.requested = self.discarded = False
        self.training = True  # afterwards, signals are noted but the final files are written
        self.previous = {
            sig: signal.signal(sig, self._handle) for sig in (signal.SIGINT, signal.SIGTERM)
        }

    def _handle(self, signum: int, frame: Any) -> None:
        if not self.training:  # the final files are being written: noted, acted on after
            self.requested = True
        elif signum == signal.SIGINT and not self.requested:
            self.requested = True
            print(
                "\nstopping after this iteration (Ctrl+C again to stop now, discarding it)",
                flush=True,
            )
        else:
            self.discarded = True
            raise KeyboardInterrupt

    def restore(self) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)


class _RunLock:
    """An exclusive lock on a run folder for the life of the process (the kernel frees it if
    the process dies, so a killed run never leaves a stale lock)."""

    def __init__(self, run_dir: Path):
        path = run_dir / ".lock"
        while True:
            self.file = path.open("a+")
            try:
                import fcntl

                fcntl.flock(self.file, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except ImportError:  # no fcntl (Windows): the folder is not locked
                return
            except OSError:
                self.file.seek(0)
                holder = self.file.read().strip() or "another process"
                self.file.close()
                raise ValueError(
                    f"{run_dir} is in use by {holder}; wait for it to end, or pick another "
                    "--run-dir"
                ) from None
            # The holder may have removed the file between our open and lock: then this lock
            # is on a file nobody else will open; take the new one instead.
            if path.exists() and os.stat(path).st_ino == os.fstat(self.file.fileno()).st_ino:
                break
            self.file.close()
        self.file.seek(0)
        self.file.truncate()
        self.file.write(f"pid {os.getpid()}")
        self.file.flush()

    def release(self) -> None:
        """Remove the lock file and free the lock (a killed process frees it too)."""
        Path(self.file.name).unlink(missing_ok=True)
        self.file.close()


def _print_progress(total: int, evaluation: EvalCallback, interrupts: _Interrupts) -> Callable:
    """A per-iteration callback: a progress line every two seconds; stops on request."""
    last = [0.0]

    def callback(locals_: dict[str, Any], globals_: dict[str, Any]) -> bool:
        model: ARS = locals_["self"]
        now = time.perf_counter()
        if (
            now - last[0] >= 2.0
            or model.num_timesteps >= model._total_timesteps
            or interrupts.requested
        ):
            last[0] = now
            fps = (model.num_timesteps - model._start_steps) / max(now - model._start_time, 1e-9)
            reward = (
                np.mean([e["r"] for e in model.ep_info_buffer])
                if model.ep_info_buffer
                else float("nan")
            )
            latest = evaluation.evaluations[-1][2] if evaluation.evaluations else float("nan")
            eta = max(model._total_timesteps - model.num_timesteps, 0) / max(fps, 1e-9)
            print(
                f"{model.num_timesteps:>12,} / {total:,} steps | iter {model._n_updates:>6} | "
                "train return "
                f"{reward:10.2f} | eval {latest:10.2f} (best {evaluation.best_mean_reward:10.2f}) "
                "| "
                f"{fps:9,.0f} steps/s | eta {eta / 60:6.1f} min",
                flush=True,
            )
        return not interrupts.requested

    return callback


def _trim_progress(path: Path, n_updates: int) -> None:
    """Drop the rows a resumed run writes again (and a row cut short by a kill)."""
    if path.exists():
        with path.open(newline="") as f:
            reader = csv.DictReader(f)
            columns = reader.fieldnames or []
            rows = [
                r
                for r in reader
                if None not in r.values()
                and None not in r
                and r.get("train/iterations", "").isdigit()
                and int(r["train/iterations"]) < n_updates
            ]
        _write_csv_atomic(path, columns, rows)


RUN_CONFIG = set(  # what --resume reads from config.json
    "env total_timesteps workers eval_freq eval_episodes checkpoint_interval".split()
)
RUN_FILES = tuple(
    "config.json progress.csv checkpoint.npz model.npz best_model.npz evaluations.npz".split()
)


def _new_run(args: argparse.Namespace) -> tuple[ARS, dict[str, Any], Path]:
    env_id = args.env or "CartPole-v1"
    config = settings_for(env_id)
    if args.net_arch and args.policy is None:
        args.policy = "MlpPolicy"  # hidden layers mean an MLP
    config.update({k: v for k, v in vars(args).items() if k in config and v is not None})
    env = make_env(env_id)
    is_mujoco = "mujoco" in str(getattr(env.spec, "entry_point", ""))
    config.update(
        env=env_id,
        workers=args.workers if args.workers is not None else (os.cpu_count() or 1) * is_mujoco,
        eval_freq=args.eval_freq or max(config["total_timesteps"] // 20, 1),
        eval_episodes=args.eval_episodes,
        checkpoint_interval=args.checkpoint_interval,
        demos=args.demos,
        job_timeout=args.job_timeout,
        start_timeout=args.start_timeout,
        normalization_samples=args.normalization_samples,
        max_episode_steps=args.max_episode_steps,
    )
    model = paper_model(
        env_id,
        env,
        **{k: v for k, v in config.items() if k in GENERIC_SETTINGS},
        seed=args.seed,
        verbose=args.verbose,
        normalization_samples=args.normalization_samples,
        max_episode_steps=args.max_episode_steps,
    )
    if args.demos:
        warm_start(model, args.demos)
    config.update(seed=model.seed, n_top=model.n_top, ars_version=__version__)
    run_dir = Path(
        args.run_dir
        or Path("runs") / f"{env_id.replace('/', '_')}-{time.strftime('%Y%m%d-%H%M%S')}"
    )
    existing = [name for name in RUN_FILES if (run_dir / name).exists()]
    if existing and not args.overwrite:
        raise ValueError(
            f"{run_dir} holds a run ({', '.join(existing)}): --resume {run_dir} to continue it, "
            "or --overwrite to replace it"
        )
    run_dir.mkdir(parents=True, exist_ok=True)
    return model, config, run_dir


def _resume(args: argparse.Namespace) -> tuple[ARS, dict[str, Any], Path]:
    run_dir = Path(args.resume)
    if not (run_dir / "config.json").exists() or not (run_dir / "checkpoint.npz").exists():
        raise ValueError(f"{run_dir} has no config.json and checkpoint.npz to resume from")
    config = _json((run_dir / "config.json").read_text(), f"{run_dir / 'config.json'}")
    missing = set(RUN_CONFIG) - set(config) if isinstance(config, dict) else RUN_CONFIG
    if missing:
        raise ValueError(f"{run_dir / 'config.json'} lacks {sorted(missing)}: it is not ars's")
    for flag in sorted(args.explicit):
        if (
            flag != "env"
            and config.get(flag) != getattr(args, flag)
            or flag == "env"
            and config["env"] != args.env
        ):
            raise ValueError(
                f"--{flag.replace('_', '-')} cannot change on --resume (the run has "
                f"{config.get(flag)!r}); start a new run for other settings"
            )
    model = ARS.load(run_dir / "checkpoint.npz", env=config["env"], verbose=args.verbose)
    if args.total_timesteps is not None:
        original = args.total_timesteps == config["total_timesteps"]  # a finished run: no-op
        if args.total_timesteps < model.num_timesteps and not original:
            raise ValueError(
                f"--total-timesteps {args.total_timesteps:,} is below the {model.num_timesteps:,} "
                "steps this run has trained"
            )
        config["total_timesteps"] = args.total_timesteps
    config["workers"] = args.workers if args.workers is not None else config["workers"]
    config["job_timeout"], config["start_timeout"] = args.job_timeout, args.start_timeout
    return model, config, run_dir


def _evaluate_saved(args: argparse.Namespace) -> int:
    meta = read_model_file(args.eval)[0]  # a model, or a policy alone (ARSPolicy.save)
    model = ARS.load(args.eval) if meta["kind"] == "model" else ARSPolicy.load(args.eval)
    env_id = args.env or getattr(model, "env_id", None)
    if env_id is None:
        raise ValueError(f"{args.eval} does not record its env; pass --env")
    if args.max_episode_steps is not None:
        model.max_episode_steps = args.max_episode_steps
    if args.video:
        total, n_frames = record_video(model, args.video, env_id)
        print(
            f"{env_id}: return {total:.2f} in one episode of {n_frames - 1} steps, recorded in "
            f"{args.video}"
        )
        return 0
    if args.render:
        total = _render_episode(model, env_id, None, model.max_episode_steps, "human")[2]
        print(f"{env_id}: return {total:.2f} in one episode")
        return 0
    env = make_env(env_id)
    _check_same_spaces(_spaces_of(env), _spaces_of(_policy_of(model)), env_id, str(args.eval))
    seed = getattr(model, "seed", 0) + 1  # a model's own evaluation seeds
    mean, std = evaluate_policy(model, env, args.eval_episodes, seed=seed)
    print(
        f"{env_id}: mean return {mean:.2f} +/- {std:.2f} over {args.eval_episodes} episodes "
        f"({args.eval})"
    )
    return 0


def _restore_evaluation(evaluation: EvalCallback, checkpoint: Path) -> None:
    """The evaluation schedule and best score where the checkpoint left them."""
    try:
        evaluation.load_state_dict(checkpoint_state(checkpoint).get("EvalCallback"))
    except ValueError as error:
        raise ValueError(f"{checkpoint} is not a checkpoint of ars.py ({error})") from None


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: train, resume or ``--eval``, and report; returns the exit status."""
    args, lock = _parse_args(argv), None
    try:
        if args.eval:
            return _evaluate_saved(args)
        model, config, run_dir = _resume(args) if args.resume else _new_run(args)
        lock = _RunLock(run_dir)  # before anything in the folder changes
        evaluation = EvalCallback(
            config["env"],
            n_eval_episodes=config["eval_episodes"],
            eval_freq=config["eval_freq"],
            best_model_save_path=run_dir,
            best_model_name="best_model.npz",
            verbose=0,
            seed=model.seed + 1,
        )
        if args.resume:
            _restore_evaluation(evaluation, run_dir / "checkpoint.npz")  # checked, then:
            for stale in run_dir.glob(".*.tmp"):  # left by a kill in the middle of a write
                stale.unlink(missing_ok=True)
            _trim_progress(run_dir / "progress.csv", model._n_updates)
            print(
                f"resuming {run_dir} at {model.num_timesteps:,} steps (iteration "
                f"{model._n_updates})"
            )
        else:
            for name in RUN_FILES:  # --overwrite: the old run's files go
                (run_dir / name).unlink(missing_ok=True)
            with _atomic_file(run_dir / "config.json", "w") as f:
                f.write(json.dumps(config, indent=2) + "\n")
            shown = {k: v for k, v in config.items() if k not in ("env", "ars_version")}
            print(f"ARS on {config['env']}: {json.dumps(shown)}")
    except (
        ModuleNotFoundError,
        ValueError,
        TypeError,
        NotImplementedError,
        OSError,
        RuntimeError,
        gym.error.Error,
    ) as error:
        print(f"error: {error}", file=sys.stderr)
        if lock is not None:
            lock.release()
        return 2
    return _train(model, config, run_dir, evaluation, lock)


def _train(
    model: ARS, config: dict[str, Any], run_dir: Path, evaluation: EvalCallback, lock: _RunLock
) -> int:
    env_id, total = config["env"], config["total_timesteps"]
    interrupts, status = _Interrupts(), 0
    try:
        try:
            if total > model.num_timesteps:
                _learn(model, config, run_dir, evaluation, interrupts)
            else:
                print(f"the run has trained its {total:,} steps; --total-timesteps N for more")
        except KeyboardInterrupt:
            status = 130
        except (RuntimeError, FloatingPointError, OSError, ValueError) as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
        finally:
            interrupts.training = False  # from here a signal waits until the files are written
        save_model(model, run_dir / "checkpoint.npz", callbacks=_Callbacks([evaluation], model))
        path = save_model(model, run_dir / "model.npz")
        interrupts.restore()
        if status or interrupts.requested:
            how = (
                "discarded the unfinished iteration"
                if interrupts.discarded
                else "finished the current iteration"
            )
            print(
                f"interrupted: {how}; {path} and the checkpoint hold iteration {model._n_updates} "
                f"({model.num_timesteps:,} steps). Continue with: python ars.py --resume {run_dir}"
            )
            return 130
        print(f"saved {path} (best evaluation kept in {run_dir / 'best_model.npz'})")
        try:
            mean, std = evaluate_policy(model, env_id, config["eval_episodes"], seed=model.seed + 1)
        except KeyboardInterrupt:
            print("final evaluation interrupted; the run's files are complete")
            return 130
        print(
            f"evaluation: mean return {mean:.2f} +/- {std:.2f} over {config['eval_episodes']} "
            "episodes"
        )
        return 0
    finally:
        interrupts.restore()
        lock.release()


def _learn(
    model: ARS,
    config: dict[str, Any],
    run_dir: Path,
    evaluation: EvalCallback,
    interrupts: _Interrupts,
) -> None:
    """Train to the run's total, in worker processes when the config asks for them."""
    env_id, total, workers = config["env"], config["total_timesteps"], config["workers"]
    print(
        f"writing to {run_dir}/; rollouts "
        + (f"in {workers} worker processes" if workers else "in this process")
    )
    async_eval = None
    try:
        if workers > 0:
            async_eval = AsyncEval(
                [functools.partial(make_env, env_id)] * workers,
                job_timeout=config["job_timeout"],
                start_timeout=config.get("start_timeout", DEFAULT_START_TIMEOUT),
            )
        model.learn(
            total - model.num_timesteps,
            callback=[evaluation, _print_progress(total, evaluation, interrupts)],
            default_root_dir=run_dir,
            async_eval=async_eval,
            reset_num_timesteps=False,
            checkpoint_interval=config["checkpoint_interval"],
        )
    finally:
        if async_eval is not None:
            async_eval.close()


if __name__ == "__main__":
    # Run as the module ``ars``, so what the workers receive refers to it by name instead of
    # carrying copies of this script's classes and functions.
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import ars

    sys.exit(ars.main())
