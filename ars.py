"""Augmented Random Search (Mania, Guy & Recht, 2018) in one NumPy file.

ARS trains a policy with parameters ``theta`` without gradients. Each iteration
draws ``N = n_delta`` directions ``delta_k ~ N(0, I)``, rolls out the policies
``theta + nu * delta_k`` and ``theta - nu * delta_k`` (``nu = delta_std``), keeps
the ``b = n_top`` directions with the largest ``max(r+_k, r-_k)`` and moves

    theta <- theta + alpha / (b * sigma_R) * sum_k (r+_k - r-_k) * delta_k

where ``alpha = learning_rate`` and ``sigma_R`` is the standard deviation of the
``2b`` kept returns (arXiv 1803.07055, Algorithm 2). V2 also normalises each
observation with the mean and variance of every state visited so far.

The file reads top to bottom: running statistics, policies, rollouts, parallel
evaluation, logging and callbacks, model files, the learner, the command line.

Example
-------
>>> from ars import ARS
>>> model = ARS("LinearPolicy", "CartPole-v1", n_delta=2, seed=0)
>>> model = model.learn(total_timesteps=20_000)
>>> action, _ = model.predict(model.env.reset(seed=0)[0])

Command line: ``python ars.py --env Hopper-v4`` (``--help`` lists every flag).
"""

from __future__ import annotations

import argparse
import collections
import csv
import functools
import hashlib
import json
import math
import multiprocessing
import multiprocessing.connection
import os
import sys
import tempfile
import threading
import time
import traceback
import warnings
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import cloudpickle
import gymnasium as gym
import numpy as np
from gymnasium import spaces

__version__ = "0.1.0"

FORMAT = "ars-numpy"  # marks the files written by ARS.save
FORMAT_VERSION = 1


def _require(module: str, install: str) -> Any:
    """Import an optional dependency, or fail with the command that installs it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ModuleNotFoundError(f"this feature needs {module}: {install}") from error


# ---------------------------------------------------------------------------
# Running statistics
# ---------------------------------------------------------------------------


class RunningMeanStd:
    """Mean and (population) variance of every row seen so far.

    Two statistics merge exactly (Chan, Golub & LeVeque, 1979), so per-rollout
    or per-worker statistics combine into those of all the data, in any grouping.
    With no data yet, ``mean`` is 0 and ``var`` is 1, so normalising is the identity.

    Parameters
    ----------
    shape : tuple of int
        Shape of one row (one observation).

    Examples
    --------
    >>> a, b = RunningMeanStd((2,)), RunningMeanStd((2,))
    >>> a.update(np.ones((3, 2))); b.update(np.zeros((1, 2)))
    >>> a.combine(b).mean
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
            other = RunningMeanStd(self.mean.shape)
            with np.errstate(invalid="ignore"):  # inf rows give nan statistics; the learner reports them
                other.mean, other.var, other.count = batch.mean(axis=0), batch.var(axis=0), len(batch)
            self.combine(other)
        return self

    def combine(self, other: RunningMeanStd) -> RunningMeanStd:
        """Merge ``other`` into ``self`` exactly (parallel algorithm); returns ``self``."""
        if other.count == 0:
            return self
        if self.count == 0:
            self.mean, self.var, self.count = other.mean.copy(), other.var.copy(), other.count
            return self
        count = self.count + other.count
        delta = other.mean - self.mean
        m2 = self.var * self.count + other.var * other.count + delta**2 * (self.count * other.count / count)
        self.mean = self.mean + delta * (other.count / count)
        self.var = m2 / count
        self.count = count
        return self

    def copy(self) -> RunningMeanStd:
        """An independent copy."""
        new = RunningMeanStd(self.mean.shape)
        new.mean, new.var, new.count = self.mean.copy(), self.var.copy(), self.count
        return new


# ---------------------------------------------------------------------------
# Policies
# ---------------------------------------------------------------------------

ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "relu": lambda x: np.maximum(x, 0.0),
    "tanh": np.tanh,
    "sigmoid": lambda x: 0.5 * (1.0 + np.tanh(0.5 * x)),
    "identity": lambda x: x,
}
MIN_VARIANCE = 1e-8  # V2: inputs with a smaller variance are treated as constant and zeroed


def _as_array(x: Any, dtype: Any = np.float64) -> np.ndarray:
    """A NumPy array from an array-like or a CPU torch tensor (torch is never imported)."""
    if hasattr(x, "detach") and hasattr(x, "device"):
        if x.device.type != "cpu":
            raise ValueError(f"got a torch tensor on {x.device}; move it to the CPU first (tensor.cpu())")
        x = x.detach().numpy()
    return np.asarray(x, dtype=dtype)


def _activation_name(activation_fn: Any) -> str:
    """'relu', 'tanh', ... from a name or a torch.nn activation class such as nn.ReLU."""
    name = activation_fn if isinstance(activation_fn, str) else getattr(activation_fn, "__name__", "")
    name = name.lower()
    if name not in ACTIVATIONS:
        raise ValueError(f"activation_fn {activation_fn!r} is not supported; use one of {sorted(ACTIVATIONS)}")
    return name


def _check_spaces(observation_space: spaces.Space, action_space: spaces.Space) -> None:
    if not isinstance(observation_space, spaces.Box):
        raise TypeError(
            f"ARS supports Box observation spaces (of any shape); got {observation_space}. "
            "Wrap the env to give Box observations, e.g. gymnasium.wrappers.FlattenObservation."
        )
    if not isinstance(action_space, (spaces.Box, spaces.Discrete)):
        raise TypeError(f"ARS supports Box and Discrete action spaces; got {action_space}.")


class ARSPolicy:
    """A deterministic MLP policy held as one flat NumPy parameter vector.

    The observation is flattened, normalised with ``obs_rms`` when that is set
    (V2: ``(x - mean) / sqrt(var)``, inputs with variance below 1e-8 zeroed),
    passed through the layers, and mapped to an action: ``argmax`` for Discrete
    actions; for Box actions ``tanh`` rescaled to ``[low, high]`` when
    ``squash_output`` is set, else clipped to the bounds.

    Parameters
    ----------
    observation_space : gymnasium.spaces.Box
        Observations of any shape; they are flattened.
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
    >>> import gymnasium as gym
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
        _check_spaces(observation_space, action_space)
        self.observation_space, self.action_space = observation_space, action_space
        self.net_arch = [64, 64] if net_arch is None else [int(n) for n in net_arch]
        self.activation_fn = _activation_name(activation_fn)
        self.with_bias, self.squash_output = bool(with_bias), bool(squash_output)
        self.obs_dim = int(np.prod(observation_space.shape))
        if isinstance(action_space, spaces.Discrete):
            self.action_dim = int(action_space.n)
        else:
            self.action_dim = int(np.prod(action_space.shape))
            low, high = action_space.low.astype(np.float64), action_space.high.astype(np.float64)
            if self.squash_output and not (np.isfinite(low).all() and np.isfinite(high).all()):
                raise ValueError(
                    f"squash_output=True rescales tanh to the action bounds, but {action_space} is unbounded; "
                    "use squash_output=False (actions are then clipped) or bound the action space."
                )
            self._low, self._high = low.reshape(-1), high.reshape(-1)
            if self.squash_output:
                self._center, self._scale = (self._high + self._low) / 2, (self._high - self._low) / 2
        sizes = [self.obs_dim, *self.net_arch, self.action_dim]
        self._layer_shapes = list(zip(sizes[1:], sizes[:-1]))  # (out, in) per layer
        self.n_params = sum(o * i + (o if self.with_bias else 0) for o, i in self._layer_shapes)
        self._theta = np.zeros(self.n_params)
        self.obs_rms: RunningMeanStd | None = None  # set by ARS(normalize_obs=True): V2

    # -- parameters -------------------------------------------------------
    def parameters_to_vector(self) -> np.ndarray:
        """A copy of the flat parameter vector (layer by layer: weights row-major, then bias)."""
        return self._theta.copy()

    def load_from_vector(self, vector: Any) -> None:
        """Set the parameters from a flat vector (NumPy array, list or CPU torch tensor)."""
        vector = _as_array(vector)
        if vector.shape != (self.n_params,):
            raise ValueError(f"expected a parameter vector of shape ({self.n_params},), got {vector.shape}")
        self._theta = vector.copy()

    def init_weights(self, rng: np.random.Generator) -> np.ndarray:
        """Random parameters, uniform in +-1/sqrt(fan_in) per layer (torch's nn.Linear default)."""
        parts = []
        for out, inp in self._layer_shapes:
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

    # -- forward ----------------------------------------------------------
    def _layers(self, theta: np.ndarray) -> list[tuple[np.ndarray, np.ndarray | None]]:
        """(W, b) per layer for ``theta`` of shape ``(..., n_params)``, normalisation folded in.

        ``W ((x - mean) * s) + b == (W * s) x + (b - (W * s) mean)``: folding the
        frozen observation statistics into the first layer costs nothing per step.
        """
        lead, start, layers = theta.shape[:-1], 0, []
        for out, inp in self._layer_shapes:
            weight = theta[..., start : start + out * inp].reshape(*lead, out, inp)
            start += out * inp
            bias = None
            if self.with_bias:
                bias, start = theta[..., start : start + out], start + out
            layers.append((weight, bias))
        if self.obs_rms is not None:
            var = self.obs_rms.var.reshape(-1)
            inv_std = np.where(var < MIN_VARIANCE, 0.0, 1.0 / np.sqrt(np.maximum(var, MIN_VARIANCE)))
            weight, bias = layers[0]
            weight = weight * inv_std
            shift = -(weight @ self.obs_rms.mean.reshape(-1))
            layers[0] = (weight, shift if bias is None else bias + shift)
        return layers

    def _action_map(self) -> Callable[[np.ndarray], Any]:
        """The function from network outputs ``(..., action_dim)`` (a fresh array) to actions.

        Chosen once per policy, not per call: it runs at every env step.
        """
        if isinstance(self.action_space, spaces.Discrete):
            start = int(self.action_space.start)
            return lambda out: out.argmax(axis=-1) + start
        if self.squash_output:
            center, scale, tanh = self._center, self._scale, np.tanh
            to_box = lambda out: center + scale * tanh(out)
        else:  # np.clip, in place and without its per-call overhead
            low, high, maximum, minimum = self._low, self._high, np.maximum, np.minimum
            to_box = lambda out: minimum(maximum(out, low, out=out), high, out=out)
        shape = self.action_space.shape
        return to_box if len(shape) == 1 else lambda out: to_box(out).reshape(out.shape[:-1] + shape)

    def actor(self, theta: Any = None) -> Callable[[np.ndarray], Any]:
        """A fast function ``obs -> action`` for one parameter vector (the rollout hot path)."""
        layers = self._layers(self._theta if theta is None else _as_array(theta))
        hidden, (w_out, b_out) = layers[:-1], layers[-1]
        activation, to_action, obs_dim = ACTIVATIONS[self.activation_fn], self._action_map(), self.obs_dim
        flat = len(self.observation_space.shape) == 1

        dot = np.dot  # cheaper per call than the @ operator on one small vector

        def act(obs: np.ndarray) -> Any:
            h = obs if flat else obs.reshape(obs_dim)
            for weight, bias in hidden:
                h = activation(dot(weight, h) if bias is None else dot(weight, h) + bias)
            return to_action(dot(w_out, h) if b_out is None else dot(w_out, h) + b_out)

        return act

    def forward(self, obs: Any, theta: Any = None) -> np.ndarray:
        """Actions for a batch of observations, for one or a population of parameter vectors.

        Parameters
        ----------
        obs : array_like
            ``obs_shape`` or ``(B, *obs_shape)``; with a population, ``(P, *obs_shape)``
            or ``(P, B, *obs_shape)``.
        theta : array_like, optional
            ``(n_params,)`` (default: the policy's own) or a population ``(P, n_params)``.

        Returns
        -------
        numpy.ndarray
            Actions with the leading axes of ``obs``.
        """
        theta = self._theta if theta is None else _as_array(theta)
        obs = _as_array(obs)
        obs_shape = self.observation_space.shape
        n_lead = obs.ndim - len(obs_shape)
        if n_lead < 0 or obs.shape[n_lead:] != obs_shape:
            raise ValueError(f"expected observations of shape {obs_shape} or (batch, *{obs_shape}), got {obs.shape}")
        lead = obs.shape[:n_lead]
        layers = self._layers(theta)
        activation = ACTIVATIONS[self.activation_fn]
        if theta.ndim == 2:  # a population: one parameter vector per leading entry
            if n_lead == 0 or lead[0] != len(theta):
                raise ValueError(f"{len(theta)} parameter vectors need observations of shape ({len(theta)}, ...), got {obs.shape}")
            h = obs.reshape(len(theta), -1, self.obs_dim)
            for i, (weight, bias) in enumerate(layers):
                h = h @ np.swapaxes(weight, -1, -2) + (0.0 if bias is None else bias[:, None, :])
                h = activation(h) if i < len(layers) - 1 else h
        else:
            h = obs.reshape(*lead, self.obs_dim)
            for i, (weight, bias) in enumerate(layers):
                h = h @ weight.T + (0.0 if bias is None else bias)
                h = activation(h) if i < len(layers) - 1 else h
        return self._action_map()(h).reshape(lead + self.action_space.shape)

    def predict(self, observation: Any, state: Any = None, episode_start: Any = None, deterministic: bool = True) -> tuple[np.ndarray, None]:
        """``(action, None)`` for one observation or a batch (SB3's signature; ARS is deterministic)."""
        return self.forward(observation), None

    def to_torch(self) -> Any:
        """A ``torch.nn.Module`` computing the same actions as :meth:`predict` (normalisation included)."""
        torch = _require("torch", "pip install 'ars-numpy[torch]'")
        nn = torch.nn
        modules: list[Any] = []
        layers = self._layers(self._theta)
        for i, (weight, bias) in enumerate(layers):
            linear = nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None, dtype=torch.float64)
            with torch.no_grad():
                linear.weight.copy_(torch.from_numpy(weight))
                if bias is not None:
                    linear.bias.copy_(torch.from_numpy(bias))
            modules.append(linear)
            if i < len(layers) - 1:
                modules.append({"relu": nn.ReLU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid, "identity": nn.Identity}[self.activation_fn]())
        policy = self

        class TorchARSPolicy(nn.Module):
            """The ARS policy as a torch module: flattened observations in, actions out."""

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


class ARSLinearPolicy(ARSPolicy):
    """The paper's linear policy ``a = M x`` (with ``obs_rms``: ``a = M diag(var)^-1/2 (x - mean)``).

    An :class:`ARSPolicy` with no hidden layer, no bias and clipped actions by default.
    """

    def __init__(self, observation_space: spaces.Space, action_space: spaces.Space, with_bias: bool = False, squash_output: bool = False):
        super().__init__(observation_space, action_space, net_arch=[], with_bias=with_bias, squash_output=squash_output)


POLICY_ALIASES = {"LinearPolicy": ARSLinearPolicy, "MlpPolicy": ARSPolicy}


# ---------------------------------------------------------------------------
# Environments and rollouts
# ---------------------------------------------------------------------------


def make_env(env: str | gym.Env | Callable[[], gym.Env]) -> gym.Env:
    """A gymnasium env from an id (``"Hopper-v4"``), an env, or a function returning one."""
    if isinstance(env, str):
        with warnings.catch_warnings():  # v4 MuJoCo ids still work; don't bury the output in notices
            warnings.filterwarnings("ignore", message=".*is out of date.*")
            try:
                return gym.make(env)
            except gym.error.DependencyNotInstalled as error:
                if "mujoco" in str(error).lower():
                    raise ModuleNotFoundError(f"{env} needs MuJoCo: pip install 'ars-numpy[mujoco]'  (or: pip install 'gymnasium[mujoco]')") from error
                raise
    made = env() if callable(env) and not isinstance(env, gym.Env) else env
    if not isinstance(made, gym.Env):
        raise TypeError(
            f"expected an env id, a gymnasium.Env or a function returning one; got {type(made).__name__}. "
            "ARS steps single envs: for parallel rollouts use AsyncEval, not a vectorised env."
        )
    return made


# Every random number of a run comes from a stream named by its coordinates, never from a
# generator that advances: a direction or an env seed is the same whoever computes it, so a
# worker can regenerate a direction from four integers instead of receiving it.
ENV_SEEDS, DIRECTIONS, WARM_UP = 0, 1, 2


def _stream(seed: int, purpose: int, *coordinates: int) -> np.random.SeedSequence:
    return np.random.SeedSequence(seed, spawn_key=(purpose, *coordinates))


def episode_seed(seed: int, iteration: int, candidate: int, episode: int) -> int:
    """The env seed of one rollout: a function of its coordinates alone, never of who runs it."""
    return int(_stream(seed, ENV_SEEDS, iteration, candidate, episode).generate_state(1)[0])


def direction(seed: int, iteration: int, k: int, n_params: int) -> np.ndarray:
    """``delta_k ~ N(0, I)`` of an iteration, regenerated from its coordinates."""
    return np.random.default_rng(_stream(seed, DIRECTIONS, iteration, k)).standard_normal(n_params)


def _inner_step(env: gym.Env) -> tuple[Callable[[Any], tuple], int | None]:
    """``env.step`` past gymnasium's pass-through wrappers, and the time limit to enforce instead.

    TimeLimit, OrderEnforcing and PassiveEnvChecker change nothing in a rollout that resets
    through them first; stepping past them saves about a microsecond per step. Any
    other wrapper is kept, and so is everything inside it.
    """
    from gymnasium.wrappers import OrderEnforcing, PassiveEnvChecker, TimeLimit

    inner, limit = env, None
    while isinstance(inner, (TimeLimit, OrderEnforcing, PassiveEnvChecker)):
        if isinstance(inner, TimeLimit):
            if limit is not None:  # nested limits: keep the inner one as a wrapper
                break
            limit = inner._max_episode_steps
        inner = inner.env
    return inner.step, limit


OBS_CHUNK_BYTES = 8 << 20  # visited observations are folded into statistics in chunks this big


def run_episodes(
    env: gym.Env,
    act: Callable[[np.ndarray], Any],
    seeds: Sequence[int],
    options: dict[str, Any] | None = None,
    track_obs: bool = True,
) -> tuple[np.ndarray, np.ndarray, RunningMeanStd]:
    """Roll out ``act`` for one episode per env seed (``options`` go to every ``env.reset``).

    Returns
    -------
    returns : numpy.ndarray
        Undiscounted return of each episode (the env's own rewards).
    lengths : numpy.ndarray
        Steps of each episode.
    visited : RunningMeanStd
        Statistics of every observation the policy acted on (empty unless ``track_obs``).
        They are folded in chunks, so memory stays bounded however long the episodes.
    """
    returns, lengths = np.zeros(len(seeds)), np.zeros(len(seeds), dtype=np.int64)
    shape = env.observation_space.shape
    dim = int(np.prod(shape))
    visited = RunningMeanStd((dim,))
    chunk = max(1, min(1000, OBS_CHUNK_BYTES // (8 * dim)))
    buffer = np.empty((chunk, *shape)) if track_obs else None
    rows = 0
    step, limit = _inner_step(env)
    for i, seed in enumerate(seeds):
        obs, _ = env.reset(seed=int(seed), options=options)
        total, steps = 0.0, 0
        while True:  # the hot loop: nothing here that could be done once per episode
            if track_obs:
                buffer[rows] = obs
                rows += 1
                if rows == chunk:
                    visited.update(buffer.reshape(chunk, dim))
                    rows = 0
            obs, reward, terminated, truncated, _ = step(act(obs))
            total += reward
            steps += 1
            if terminated or truncated or steps == limit:
                break
        returns[i], lengths[i] = total, steps
    if rows:
        visited.update(buffer[:rows].reshape(rows, dim))
    return returns, lengths, visited


def evaluate_policy(
    model: Any, env: str | gym.Env | Callable[[], gym.Env], n_eval_episodes: int = 10, seed: int | None = None, return_episode_rewards: bool = False
) -> tuple[float, float] | tuple[np.ndarray, np.ndarray]:
    """Mean and std of the return of ``model`` (an ARS or a policy) over ``n_eval_episodes``.

    Rewards are the env's own (no ``alive_bonus_offset``); each episode gets its
    own seed drawn from ``seed``. With ``return_episode_rewards``, returns the
    per-episode returns and lengths instead.
    """
    policy = getattr(model, "policy", model)
    seeds = np.random.SeedSequence(seed).generate_state(n_eval_episodes)
    returns, lengths, _ = run_episodes(make_env(env), policy.actor(), seeds, track_obs=False)
    if return_episode_rewards:
        return returns, lengths
    return float(returns.mean()), float(returns.std())


# ---------------------------------------------------------------------------
# Parallel evaluation
# ---------------------------------------------------------------------------
#
# The 2N rollouts of an iteration are independent. Each job carries its
# candidate's parameters and env seeds, so a result never depends on which
# process ran it: any number of workers gives bit-identical training.


def _rms_to_tuple(rms: RunningMeanStd) -> tuple[np.ndarray, np.ndarray, int]:
    return rms.mean, rms.var, rms.count


def _rms_from_tuple(data: tuple[np.ndarray, np.ndarray, int]) -> RunningMeanStd:
    rms = RunningMeanStd(np.shape(data[0]))
    rms.mean, rms.var, rms.count = data
    return rms


class _Evaluator:
    """What AsyncEval and ExecutorEval share: job seeds, the policy sent with jobs, results in order."""

    def __init__(self, train_policy: Any, n_eval_episodes: int):
        self.policy: ARSPolicy = getattr(train_policy, "policy", train_policy)
        if not isinstance(self.policy, ARSPolicy):
            raise TypeError(f"train_policy must be an ARSPolicy (model.policy); got {type(train_policy).__name__}")
        self.n_eval_episodes = int(n_eval_episodes)
        self._seed, self._n_jobs = int(np.random.SeedSequence().entropy % 2**63), 0
        self.last_visited: list[RunningMeanStd] = []

    def seed(self, seed: int | None = None) -> list[int | None]:
        """Seed the env seeds of later jobs that are sent without ``episode_seeds``."""
        self._seed = int(np.random.SeedSequence().entropy % 2**63) if seed is None else int(seed)
        self._n_jobs = 0
        return [seed] * self.n_workers

    def _job_seeds(self, n_candidates: int, episode_seeds: Any) -> np.ndarray:
        if episode_seeds is None:
            episode_seeds = [[episode_seed(self._seed, self._n_jobs, c, e) for e in range(self.n_eval_episodes)] for c in range(n_candidates)]
        self._n_jobs += 1
        episode_seeds = np.asarray(episode_seeds, dtype=np.uint64)
        if episode_seeds.ndim != 2 or len(episode_seeds) != n_candidates:
            raise ValueError(f"episode_seeds must have shape ({n_candidates}, n_episodes); got {episode_seeds.shape}")
        return episode_seeds

    @staticmethod
    def _check_weights(candidate_weights: Any, pop_size: int | None, n_params: int) -> np.ndarray:
        weights = _as_array(candidate_weights)
        if weights.ndim != 2 or weights.shape[1] != n_params or (pop_size is not None and len(weights) != pop_size):
            raise ValueError(f"candidate_weights must have shape ({pop_size or 'pop_size'}, {n_params}); got {weights.shape}")
        return weights

    def _ordered(self, results: dict[int, tuple[np.ndarray, np.ndarray, tuple]]) -> list[tuple[int, tuple[np.ndarray, np.ndarray]]]:
        """Results by candidate index; the visited-state statistics go to ``last_visited``."""
        order = sorted(results)
        self.last_visited = [_rms_from_tuple(results[i][2]) for i in order]
        return [(i, (results[i][0], results[i][1])) for i in order]

    def __enter__(self) -> _Evaluator:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


def _worker(remote: Any, parent_remote: Any, env_fn_bytes: bytes, policy_bytes: bytes) -> None:
    """A worker process: builds its env once, then runs the commands it receives."""
    parent_remote.close()
    try:
        env = make_env(cloudpickle.loads(env_fn_bytes))
        policy: ARSPolicy = cloudpickle.loads(policy_bytes)
        _check_spaces(env.observation_space, env.action_space)
        visited, options = RunningMeanStd((policy.obs_dim,)), None
        remote.send(("ok", None))
    except BaseException:
        remote.send(("error", traceback.format_exc()))
        return
    while True:
        try:
            command, data = remote.recv()
        except (EOFError, OSError, KeyboardInterrupt):  # the main process is gone
            break
        try:
            if command == "eval":
                index, theta, seeds = data
                returns, lengths, rms = run_episodes(env, policy.actor(theta), seeds, options, policy.obs_rms is not None)
                visited.combine(rms)
                remote.send(("ok", (index, returns, lengths, _rms_to_tuple(rms))))
            elif command == "set_policy":
                policy, visited = cloudpickle.loads(data), RunningMeanStd((policy.obs_dim,))
            elif command == "sync_obs_rms":
                policy.obs_rms, visited = data, RunningMeanStd((policy.obs_dim,))
            elif command == "set_options":
                options = data
            elif command == "get_obs_rms":
                remote.send(("ok", _rms_to_tuple(visited)))
            elif command == "close":
                break
        except BaseException:
            remote.send(("error", traceback.format_exc()))
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
    """Evaluate candidates in worker processes, one env per worker, over ``multiprocessing`` Pipes.

    Jobs go out one candidate at a time to whichever worker is free, so long
    and short episodes balance across workers. ``learn(async_eval=...)`` gives
    the same weights as the single-process run, for any number of workers, and
    does not close the evaluator: one AsyncEval serves many ``learn`` calls and
    models with the same spaces. Close it with :meth:`close` or a ``with`` block
    (it is also closed when garbage-collected or at interpreter exit).

    Parameters
    ----------
    envs_fn : list of callables
        One function per worker returning a gymnasium env (or an env id); sent with cloudpickle.
    train_policy : ARSPolicy or ARS
        The policy (structure and observation statistics) the workers evaluate.
    start_method : str, optional
        ``"forkserver"`` (default where available), ``"spawn"`` or ``"fork"``.
        With the first two, guard your script with ``if __name__ == "__main__":``.
    n_eval_episodes : int
        Episodes per candidate.

    Examples
    --------
    >>> model = ARS("LinearPolicy", "HalfCheetah-v4", n_delta=32, n_top=4, seed=0)
    >>> with AsyncEval([lambda: make_env("HalfCheetah-v4")] * 2, model.policy) as async_eval:
    ...     model.learn(100_000, async_eval=async_eval)
    """

    def __init__(self, envs_fn: Sequence[Callable[[], gym.Env]], train_policy: Any, start_method: str | None = None, n_eval_episodes: int = 1):
        super().__init__(train_policy, n_eval_episodes)
        if not envs_fn:
            raise ValueError("envs_fn must hold at least one env function (one per worker)")
        methods = multiprocessing.get_all_start_methods()
        start_method = start_method or ("forkserver" if "forkserver" in methods else "spawn")
        if start_method not in methods:
            raise ValueError(f"start_method must be one of {methods}; got {start_method!r}")
        ctx = multiprocessing.get_context(start_method)
        self.n_workers = len(envs_fn)
        self.remotes, self.processes = [], []
        self._closer = weakref.finalize(self, _shutdown, self.processes, self.remotes)
        policy_bytes = cloudpickle.dumps(self.policy)
        for env_fn in envs_fn:
            remote, work_remote = ctx.Pipe()
            process = ctx.Process(target=_worker, args=(work_remote, remote, cloudpickle.dumps(env_fn), policy_bytes), daemon=True)
            process.start()
            work_remote.close()
            self.remotes.append(remote)
            self.processes.append(process)
        for i in range(self.n_workers):  # every env must build before any job is sent
            self._receive(i, "starting its env")
        self._queue: collections.deque = collections.deque()
        self._results: dict[int, Any] = {}
        self._expected = 0

    def _fail(self, message: str) -> RuntimeError:
        self.close()
        return RuntimeError(message + "\nThe AsyncEval has been closed; create a new one to continue.")

    def _receive(self, i: int, doing: str) -> Any:
        """The next message of worker ``i``; a worker that died or failed raises, never hangs."""
        remote, process = self.remotes[i], self.processes[i]
        try:
            while not remote.poll(0.2):
                if not process.is_alive() and not remote.poll():
                    raise self._fail(f"AsyncEval worker {i} (pid {process.pid}) died (exit code {process.exitcode}) while {doing}")
            status, payload = remote.recv()
        except (EOFError, OSError) as error:
            process.join(1.0)
            state = f"died (exit code {process.exitcode})" if process.exitcode is not None else f"stopped answering ({error!r})"
            raise self._fail(f"AsyncEval worker {i} (pid {process.pid}) {state} while {doing}") from error
        if status == "error":
            raise self._fail(f"AsyncEval worker {i} failed while {doing}:\n{payload}")
        return payload

    def _send(self, i: int, message: tuple[str, Any]) -> None:
        try:
            self.remotes[i].send(message)
        except (OSError, ValueError) as error:
            raise self._fail(f"AsyncEval worker {i} (pid {self.processes[i].pid}) cannot be reached ({error!r})") from error

    def _broadcast(self, command: str, data: Any) -> None:
        if not self._closer.alive:
            raise RuntimeError("this AsyncEval is closed")
        for i in range(self.n_workers):
            self._send(i, (command, data[i] if isinstance(data, list) else data))

    def send_jobs(self, candidate_weights: Any, pop_size: int | None = None, episode_seeds: Any = None) -> None:
        """Queue the evaluation of each row of ``candidate_weights`` (NumPy array or CPU torch tensor).

        ``episode_seeds`` (shape ``(pop_size, n_eval_episodes)``) fixes each rollout's
        env seed; by default they derive from :meth:`seed` and a job counter.
        """
        if not self._closer.alive:
            raise RuntimeError("this AsyncEval is closed")
        weights = self._check_weights(candidate_weights, pop_size, self.policy.n_params)
        seeds = self._job_seeds(len(weights), episode_seeds)
        self._queue.extend((c, weights[c], seeds[c]) for c in range(len(weights)))
        self._expected += len(weights)
        for _ in range(2):  # two jobs in flight per worker keeps every core busy; dealt round-robin
            for i in range(self.n_workers):
                if self._queue:
                    self._send(i, ("eval", self._queue.popleft()))

    def get_results(self) -> list[tuple[int, tuple[np.ndarray, np.ndarray]]]:
        """``[(candidate_index, (episode_rewards, episode_lengths)), ...]`` for every job sent."""
        while len(self._results) < self._expected:
            ready = multiprocessing.connection.wait([*self.remotes, *(p.sentinel for p in self.processes)], timeout=1.0)
            for i, remote in enumerate(self.remotes):
                if remote in ready or self.processes[i].sentinel in ready:
                    index, returns, lengths, rms = self._receive(i, "evaluating candidates")
                    self._results[index] = (returns, lengths, rms)
                    if self._queue:
                        self._send(i, ("eval", self._queue.popleft()))
        results, self._results, self._expected = self._results, {}, 0
        return self._ordered(results)

    def set_policy(self, policy: Any) -> None:
        """Evaluate later jobs with ``policy`` (structure and statistics); resets the visited-state statistics."""
        self.policy = getattr(policy, "policy", policy)
        self._broadcast("set_policy", cloudpickle.dumps(self.policy))

    def set_options(self, options: list[dict] | dict | None = None) -> list[None]:
        """Options for ``env.reset``: one dict for all workers, or a list with one per worker.

        They are used from the next reset on, at every reset.
        """
        if isinstance(options, list) and len(options) != self.n_workers:
            raise ValueError(f"got {len(options)} options for {self.n_workers} workers")
        self._broadcast("set_options", options)
        return [None] * self.n_workers

    def get_obs_rms(self) -> list[RunningMeanStd]:
        """Each worker's statistics of the states it visited since the last sync."""
        self._broadcast("get_obs_rms", None)
        return [_rms_from_tuple(self._receive(i, "sending its statistics")) for i in range(self.n_workers)]

    def sync_obs_rms(self, obs_rms: RunningMeanStd | None) -> None:
        """Normalise with ``obs_rms`` from now on; resets the workers' visited-state statistics."""
        self.policy.obs_rms = None if obs_rms is None else obs_rms.copy()
        self._broadcast("sync_obs_rms", self.policy.obs_rms)

    def close(self) -> None:
        """Stop the workers and free their resources. Idempotent."""
        self._closer()


_TASK_ENVS: dict[tuple[str, int], gym.Env] = {}  # per process and thread: executor tasks reuse their env


def _evaluate_task(env_fn_bytes: bytes, policy_bytes: bytes, jobs: list[tuple[int, np.ndarray, np.ndarray]], options: dict | None) -> list[tuple]:
    """One executor task: evaluate ``jobs`` with the env this process (and thread) has cached."""
    key = (hashlib.sha256(env_fn_bytes).hexdigest(), threading.get_ident())
    if key not in _TASK_ENVS:
        _TASK_ENVS[key] = make_env(cloudpickle.loads(env_fn_bytes))
    env, policy = _TASK_ENVS[key], cloudpickle.loads(policy_bytes)
    out = []
    for index, theta, seeds in jobs:
        returns, lengths, rms = run_episodes(env, policy.actor(theta), seeds, options, policy.obs_rms is not None)
        out.append((index, returns, lengths, _rms_to_tuple(rms)))
    return out


class ExecutorEval(_Evaluator):
    """Evaluate candidates as tasks on any ``concurrent.futures.Executor``.

    ProcessPoolExecutor, Dask (``client.get_executor(pure=False)``), mpi4py's
    MPIPoolExecutor, or Ray through a small adapter (see ``examples/ray_cluster.py``).
    Each worker process builds the env once and caches it; observation statistics
    come back with the results, so training gives the same weights as AsyncEval
    and the single-process run. The workers must be able to ``import ars``. The
    executor stays the caller's: :meth:`close` does not shut it down.

    Parameters
    ----------
    executor : concurrent.futures.Executor
        Anything with ``submit(fn, *args) -> Future``.
    env_fn : callable or str
        Function returning the env (or an env id), sent to the workers with cloudpickle.
    train_policy : ARSPolicy or ARS
    n_eval_episodes : int
    jobs_per_task : int
        Candidates per task: more amortises a slow executor's per-task cost.
    """

    def __init__(self, executor: Any, env_fn: Callable[[], gym.Env] | str, train_policy: Any, n_eval_episodes: int = 1, jobs_per_task: int = 1):
        super().__init__(train_policy, n_eval_episodes)
        self.executor, self.n_workers, self.jobs_per_task = executor, 1, int(jobs_per_task)
        self._env_fn_bytes = cloudpickle.dumps(env_fn)
        self._options: dict | None = None
        self._futures: list[Any] = []
        self._visited = RunningMeanStd((self.policy.obs_dim,))
        self._closed = False

    def send_jobs(self, candidate_weights: Any, pop_size: int | None = None, episode_seeds: Any = None) -> None:
        """Submit the evaluation of each row of ``candidate_weights``; see :meth:`AsyncEval.send_jobs`."""
        if self._closed:
            raise RuntimeError("this ExecutorEval is closed")
        weights = self._check_weights(candidate_weights, pop_size, self.policy.n_params)
        seeds = self._job_seeds(len(weights), episode_seeds)
        policy_bytes = cloudpickle.dumps(self.policy)
        jobs = [(c, weights[c], seeds[c]) for c in range(len(weights))]
        for start in range(0, len(jobs), self.jobs_per_task):
            chunk = jobs[start : start + self.jobs_per_task]
            self._futures.append(self.executor.submit(_evaluate_task, self._env_fn_bytes, policy_bytes, chunk, self._options))

    def get_results(self) -> list[tuple[int, tuple[np.ndarray, np.ndarray]]]:
        """``[(candidate_index, (episode_rewards, episode_lengths)), ...]`` for every job sent."""
        futures, self._futures, results = self._futures, [], {}
        try:
            for future in futures:
                for index, returns, lengths, rms in future.result():
                    results[index] = (returns, lengths, rms)
                    self._visited.combine(_rms_from_tuple(rms))
        except Exception as error:
            for future in futures:
                future.cancel()
            raise RuntimeError(f"an executor task failed: {type(error).__name__}: {error}") from error
        return self._ordered(results)

    def set_policy(self, policy: Any) -> None:
        """Evaluate later jobs with ``policy``; resets the visited-state statistics."""
        self.policy = getattr(policy, "policy", policy)
        self._visited = RunningMeanStd((self.policy.obs_dim,))

    def set_options(self, options: dict | None = None) -> list[None]:
        """Options passed to every ``env.reset`` of later jobs."""
        if isinstance(options, list):
            raise ValueError("ExecutorEval has no fixed workers: pass one options dict for all")
        self._options = options
        return [None]

    def get_obs_rms(self) -> list[RunningMeanStd]:
        """The statistics of the states visited since the last sync (one entry: the executor)."""
        return [self._visited.copy()]

    def sync_obs_rms(self, obs_rms: RunningMeanStd | None) -> None:
        """Normalise with ``obs_rms`` from now on; resets the visited-state statistics."""
        self.policy.obs_rms = None if obs_rms is None else obs_rms.copy()
        self._visited = RunningMeanStd((self.policy.obs_dim,))

    def close(self) -> None:
        """Forget pending jobs; the executor itself is left running. Idempotent."""
        for future in self._futures:
            future.cancel()
        self._futures, self._closed = [], True


# ---------------------------------------------------------------------------
# Logging and callbacks (the shapes Stable-Baselines3 users know)
# ---------------------------------------------------------------------------


class Logger:
    """Key/value logger: ``record`` values, then ``dump`` prints a table and appends a CSV row."""

    def __init__(self, verbose: int = 0, folder: str | os.PathLike | None = None):
        self.verbose = verbose
        self.dir = None if folder is None else Path(folder)
        self.values: dict[str, Any] = {}
        self._columns: list[str] = []
        if self.dir is not None:
            self.dir.mkdir(parents=True, exist_ok=True)
            if (self.dir / "progress.csv").exists():  # continue the file: a resumed run keeps its earlier rows
                with (self.dir / "progress.csv").open() as f:
                    self._columns = next(csv.reader(f), [])

    def record(self, key: str, value: Any, exclude: Any = None) -> None:
        """Set ``key`` for the next dump (``exclude`` is accepted for SB3 callbacks)."""
        self.values[key] = value

    def dump(self, step: int = 0) -> None:
        """Print the recorded values (``verbose >= 1``), write them to progress.csv, clear them."""
        if not self.values:
            return
        if self.verbose >= 1:
            print(self._table(), flush=True)
        if self.dir is not None:
            self._write_csv()
        self.values = {}

    def _table(self) -> str:
        rows: list[tuple[str, str]] = []
        for group in sorted({k.split("/")[0] for k in self.values}):
            rows.append((f"{group}/", ""))
            for key in sorted(k for k in self.values if k.split("/")[0] == group):
                value = self.values[key]
                text = f"{value:<.4g}" if isinstance(value, float) else str(value)
                rows.append(("    " + key.split("/", 1)[-1], text))
        width_k, width_v = max(len(k) for k, _ in rows), max(len(v) for _, v in rows)
        line = "-" * (width_k + width_v + 7)
        return "\n".join([line, *(f"| {k:<{width_k}} | {v:<{width_v}} |" for k, v in rows), line])

    def _write_csv(self) -> None:
        path = self.dir / "progress.csv"
        new = [k for k in self.values if k not in self._columns]
        if new:  # a new key: rewrite the file with the wider header, keeping every row
            old_rows = list(csv.DictReader(path.open())) if path.exists() and self._columns else []
            self._columns += new
            with path.open("w", newline="") as f:
                writer = csv.DictWriter(f, self._columns)
                writer.writeheader()
                writer.writerows(old_rows)
        with path.open("a", newline="") as f:
            csv.DictWriter(f, self._columns).writerow(self.values)


class _Callbacks:
    """Calls what the user gave: SB3-style callback objects and/or functions ``f(locals, globals)``."""

    def __init__(self, callback: Any, model: ARS):
        items = [] if callback is None else list(callback) if isinstance(callback, (list, tuple)) else [callback]
        for cb in items:
            if hasattr(cb, "init_callback"):
                cb.init_callback(model)
            elif not hasattr(cb, "on_step") and not callable(cb):
                raise TypeError(f"callback must be a function f(locals, globals) or an object with SB3 hooks; got {cb!r}")
        self.items = items

    def hook(self, name: str, *args: Any) -> None:
        for cb in self.items:
            if hasattr(cb, name):
                getattr(cb, name)(*args)

    def on_step(self, locals_: dict[str, Any]) -> bool:
        """True unless a callback returned False (which stops training)."""
        keep_going = True
        for cb in self.items:
            if hasattr(cb, "on_step"):
                if hasattr(cb, "update_locals"):
                    cb.update_locals(locals_)
                result = cb.on_step()
            else:
                result = cb(locals_, globals())
            keep_going = keep_going and result is not False
        return keep_going



class EvalCallback:
    """Evaluate the policy every ``eval_freq`` timesteps on a separate env; keep the best model.

    Evaluations are deterministic, use the env's own rewards (no ``alive_bonus_offset``)
    and a fixed set of episode seeds of their own, so successive evaluations compare
    like with like. Results go to the log table and ``progress.csv`` as ``eval/...``,
    and to ``self.evaluations``: ``(timesteps, train_seconds, mean, std)``, where
    ``train_seconds`` leaves out the time spent evaluating.

    Parameters
    ----------
    eval_env : str, gymnasium.Env or callable
        The env to evaluate on (an id or a function is needed for ``eval_concurrency > 1``).
    eval_freq : int
        Timesteps between evaluations, checked after each iteration. It also evaluates when training starts.
    n_eval_episodes : int
        Episodes per evaluation.
    eval_concurrency : int
        Worker processes for the evaluation episodes (1: in this process).
    best_model_save_path : str, optional
        Folder for ``best_model.npz``, rewritten whenever the mean return improves.
    seed : int
        Seeds the evaluation episodes.
    verbose : int
        1 prints each evaluation.
    """

    def __init__(
        self,
        eval_env: str | gym.Env | Callable[[], gym.Env],
        eval_freq: int = 10_000,
        n_eval_episodes: int = 10,
        eval_concurrency: int = 1,
        best_model_save_path: str | os.PathLike | None = None,
        seed: int = 0,
        verbose: int = 0,
    ):
        self.eval_env, self.eval_freq, self.n_eval_episodes = eval_env, int(eval_freq), int(n_eval_episodes)
        self.eval_concurrency, self.verbose = int(eval_concurrency), verbose
        self.best_model_save_path = None if best_model_save_path is None else Path(best_model_save_path)
        self.seeds = np.random.SeedSequence([seed, 1]).generate_state(self.n_eval_episodes)
        self.evaluations: list[tuple[int, float, float, float]] = []
        self.best_mean_reward = -np.inf
        self._env: gym.Env | None = None
        self._async_eval: AsyncEval | None = None

    def init_callback(self, model: ARS) -> None:
        self.model = model
        if self.eval_concurrency > 1 and self._async_eval is None:
            if isinstance(self.eval_env, gym.Env):
                raise ValueError("eval_concurrency > 1 needs the eval env as an id or a function, to build it in each worker")
            env_fn = self.eval_env if callable(self.eval_env) else functools.partial(make_env, self.eval_env)
            self._async_eval = AsyncEval([env_fn] * self.eval_concurrency, model.policy)
        elif self._env is None and self.eval_concurrency <= 1:
            self._env = make_env(self.eval_env)

    def on_training_start(self, locals_: dict[str, Any], globals_: dict[str, Any]) -> None:
        self._eval_seconds, self._start = 0.0, time.perf_counter()
        self.evaluate()  # where training starts from
        self._next = self.model.num_timesteps + self.eval_freq

    def on_step(self) -> bool:
        if self.model.num_timesteps >= self._next:
            self._next = self.model.num_timesteps + self.eval_freq
            self.evaluate()
        return True

    def evaluate(self) -> tuple[float, float]:
        """Evaluate now; returns (mean, std) of the episode returns."""
        began = time.perf_counter()
        policy = self.model.policy
        if self._async_eval is not None:
            self._async_eval.set_policy(policy)
            weights = np.tile(policy.parameters_to_vector(), (self.n_eval_episodes, 1))
            self._async_eval.send_jobs(weights, self.n_eval_episodes, episode_seeds=self.seeds[:, None])
            returns = np.array([r[0] for _, (r, _) in self._async_eval.get_results()])
        else:
            returns = run_episodes(self._env, policy.actor(), self.seeds, track_obs=False)[0]
        mean, std = float(returns.mean()), float(returns.std())
        self._eval_seconds += time.perf_counter() - began
        seconds = time.perf_counter() - self._start - self._eval_seconds
        self.evaluations.append((self.model.num_timesteps, seconds, mean, std))
        self.model.logger.record("eval/mean_reward", mean)
        self.model.logger.record("eval/std_reward", std)
        if mean > self.best_mean_reward:
            self.best_mean_reward = mean
            if self.best_model_save_path is not None:
                self.model.save(self.best_model_save_path / "best_model.npz")
        self.model.logger.record("eval/best_mean_reward", self.best_mean_reward)
        if self.verbose >= 1:
            print(f"eval at {self.model.num_timesteps:,} steps: {mean:.2f} +/- {std:.2f} (best {self.best_mean_reward:.2f})", flush=True)
        return mean, std

    def on_training_end(self) -> None:
        if self._async_eval is not None:
            self._async_eval.close()
            self._async_eval = None


# ---------------------------------------------------------------------------
# Model files: plain arrays and JSON, never pickle
# ---------------------------------------------------------------------------


def _space_to_json(space: spaces.Space) -> dict[str, Any]:
    if isinstance(space, spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    return {"type": "Box", "low": space.low.tolist(), "high": space.high.tolist(), "shape": list(space.shape), "dtype": str(space.dtype)}


def _space_from_json(data: dict[str, Any]) -> spaces.Space:
    if data["type"] == "Discrete":
        return spaces.Discrete(data["n"], start=data["start"])
    dtype = np.dtype(data["dtype"])
    low = np.array(data["low"], dtype=dtype).reshape(data["shape"])
    return spaces.Box(low, np.array(data["high"], dtype=dtype).reshape(data["shape"]), dtype=dtype)


def _npz_path(path: str | os.PathLike) -> Path:
    path = Path(path)
    return path if path.suffix else path.with_suffix(".npz")


def _write_npz_atomic(path: str | os.PathLike, arrays: dict[str, np.ndarray]) -> Path:
    """Write ``arrays`` to ``path`` through a temporary file and a rename: never half a file."""
    path = _npz_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _read_model_file(path: str | os.PathLike) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Metadata and arrays of a file written by ``ARS.save``, never unpickling anything."""
    path = Path(path)
    if not path.exists() and not path.suffix and path.with_suffix(".npz").exists():
        path = path.with_suffix(".npz")
    if not path.exists():
        raise FileNotFoundError(f"no model file at {path}")
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {key: data[key] for key in data.files}
        meta = json.loads(str(arrays.pop("metadata")))
    except Exception as error:  # zip, zlib, npy and JSON errors all mean the same to the user
        raise ValueError(f"{path} is not a readable ars model file ({type(error).__name__}: {error}); is it truncated, or written by another program?") from error
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ValueError(f"{path} is an .npz file but not one written by ars (ARS.save)")
    if meta.get("format_version", 0) > FORMAT_VERSION:
        raise ValueError(f"{path} was written by a newer ars (format {meta['format_version']}); upgrade ars to load it")
    return meta, arrays


def load_demonstrations(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """``(observations, actions)`` from a ``.npz`` trajectory or a folder of them (plain arrays only)."""
    path = Path(path)
    files = sorted(path.glob("*.npz")) if path.is_dir() else [path]
    if not files:
        raise FileNotFoundError(f"no .npz trajectories in {path}")
    observations, actions = [], []
    for file in files:
        with np.load(file, allow_pickle=False) as data:
            if not {"observations", "actions"} <= set(data.files):
                raise ValueError(f"{file} must hold arrays 'observations' and 'actions'; it holds {sorted(data.files)}")
            observations.append(data["observations"])
            actions.append(data["actions"])
    return np.concatenate(observations), np.concatenate(actions)


# ---------------------------------------------------------------------------
# The learner
# ---------------------------------------------------------------------------

Schedule = Callable[[float], float]


class ARS:
    """Augmented Random Search (Mania, Guy & Recht 2018, Algorithm 2).

    Parameters
    ----------
    policy : str, ARSPolicy class or instance
        ``"LinearPolicy"`` (the paper's) or ``"MlpPolicy"``.
    env : str, gymnasium.Env or callable, optional
        Env id, env, or function returning one. Needed to build the policy.
    n_delta : int
        ``N``: random directions per iteration (2N rollouts).
    n_top : int, optional
        ``b``: directions kept for the update (default ``n_delta``; ``b < N`` is the "-t" variant).
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
        Passed to the policy (``net_arch``, ``activation_fn``, ``with_bias``, ``squash_output``).
    stats_window_size : int
        Episodes averaged in ``rollout/ep_rew_mean`` and ``rollout/ep_len_mean``.
    tensorboard_log : str, optional
        Folder for ``<tb_log_name>_<n>/progress.csv`` (CSV; no TensorBoard event files).
    seed : int, optional
        One seed gives bit-identical weights, whatever evaluates the rollouts.
    verbose : int
        1 prints a table every ``log_every_n_steps`` iterations.
    device : str
        ``"cpu"`` or ``"auto"``: ARS runs in NumPy.
    normalize_obs : bool
        V2 (True): normalise observations with the statistics of all visited states. V1: False.
    common_random_numbers : bool
        Give the + and - rollouts of a direction the same env seed.
    normalization_samples : int
        V2: before the first iteration, estimate the observation statistics from whole
        episodes of the initial policy totalling at least this many steps (counted in
        ``num_timesteps``), so that V2 does not start from unit statistics.

    Examples
    --------
    >>> model = ARS("LinearPolicy", "Pendulum-v1", n_delta=4, n_top=1, normalize_obs=True, seed=1)
    >>> model = model.learn(2_000)
    >>> model.save("pendulum.npz"); model = ARS.load("pendulum.npz")
    """

    def __init__(
        self,
        policy: str | type[ARSPolicy] | ARSPolicy,
        env: str | gym.Env | Callable[[], gym.Env] | None = None,
        n_delta: int = 8,
        n_top: int | None = None,
        learning_rate: float | Schedule = 0.02,
        delta_std: float | Schedule = 0.05,
        zero_policy: bool = True,
        alive_bonus_offset: float = 0,
        n_eval_episodes: int = 1,
        policy_kwargs: dict[str, Any] | None = None,
        stats_window_size: int = 100,
        tensorboard_log: str | None = None,
        seed: int | None = None,
        verbose: int = 0,
        device: Any = "cpu",
        _init_setup_model: bool = True,
        normalize_obs: bool = False,
        common_random_numbers: bool = True,
        normalization_samples: int = 0,
    ):
        if str(device) not in ("cpu", "auto"):
            raise ValueError(f"ars runs on the CPU with NumPy; device must be 'cpu' or 'auto', got {device!r}")
        if int(n_delta) < 1 or int(n_eval_episodes) < 1:
            raise ValueError(f"n_delta and n_eval_episodes must be at least 1; got {n_delta} and {n_eval_episodes}")
        n_top = int(n_delta) if n_top is None else int(n_top)
        if n_top < 1:
            raise ValueError(f"n_top must be at least 1; got {n_top}")
        if n_top > n_delta:
            warnings.warn(f"n_top={n_top} is larger than n_delta={n_delta}; using n_top={n_delta}", stacklevel=2)
            n_top = int(n_delta)
        if seed is not None and (int(seed) != seed or seed < 0):
            raise ValueError(f"seed must be a non-negative integer or None; got {seed!r}")
        self.hparams = dict(
            policy=policy, n_delta=n_delta, n_top=n_top, learning_rate=learning_rate, delta_std=delta_std,
            zero_policy=zero_policy, alive_bonus_offset=alive_bonus_offset, n_eval_episodes=n_eval_episodes,
            policy_kwargs=policy_kwargs, stats_window_size=stats_window_size, tensorboard_log=tensorboard_log,
            seed=seed, verbose=verbose, device=device, normalize_obs=normalize_obs, common_random_numbers=common_random_numbers,
            normalization_samples=normalization_samples,
        )  # fmt: skip
        self.policy_class, self.policy_kwargs = policy, dict(policy_kwargs or {})
        self.n_delta, self.n_top, self.n_eval_episodes = int(n_delta), n_top, int(n_eval_episodes)
        self.learning_rate, self.delta_std = learning_rate, delta_std
        self.zero_policy, self.alive_bonus_offset = bool(zero_policy), float(alive_bonus_offset)
        self.normalize_obs, self.common_random_numbers = bool(normalize_obs), bool(common_random_numbers)
        self.normalization_samples = int(normalization_samples)
        self.tensorboard_log, self.verbose = tensorboard_log, int(verbose)
        self.seed = int(seed) if seed is not None else int(np.random.SeedSequence().entropy % 2**63)
        self._rng = np.random.default_rng(self.seed)  # draws the initial weights (zero_policy=False)
        self.num_timesteps, self._n_updates, self._total_timesteps = 0, 0, 0
        self._current_progress_remaining = 1.0
        self.ep_info_buffer: collections.deque = collections.deque(maxlen=int(stats_window_size))
        self.logger = Logger(self.verbose)
        self.env: gym.Env | None = None
        self.env_id: str | None = None
        self.policy: ARSPolicy | None = None
        self.observation_space = self.action_space = None
        if env is not None:
            self.set_env(env)
        if _init_setup_model:
            if self.env is None:
                raise ValueError("ARS needs an env to build its policy: ARS(policy, env), or ARS.load(path) for a saved model")
            self._setup_model()

    def _setup_model(self) -> None:
        if isinstance(self.policy_class, ARSPolicy):
            self.policy = self.policy_class
        else:
            cls = POLICY_ALIASES.get(self.policy_class, self.policy_class) if isinstance(self.policy_class, str) else self.policy_class
            if not (isinstance(cls, type) and issubclass(cls, ARSPolicy)):
                raise ValueError(f"policy must be one of {list(POLICY_ALIASES)} or an ARSPolicy class; got {self.policy_class!r}")
            self.policy = cls(self.observation_space, self.action_space, **self.policy_kwargs)
        if self.policy.observation_space != self.observation_space or self.policy.action_space != self.action_space:
            raise ValueError(self._space_mismatch(self.policy.observation_space, self.policy.action_space, "the policy"))
        if self.normalize_obs and self.policy.obs_rms is None:
            self.policy.obs_rms = RunningMeanStd((self.policy.obs_dim,))
        if self.zero_policy:
            self.policy.load_from_vector(np.zeros(self.policy.n_params))
        elif isinstance(self.policy_class, (str, type)):
            self.policy.load_from_vector(self.policy.init_weights(self._rng))

    # -- env --------------------------------------------------------------
    def _space_mismatch(self, observation_space: spaces.Space, action_space: spaces.Space, what: str) -> str:
        return (
            f"{what} has observation space {observation_space} and action space {action_space}, "
            f"but the model was built for {self.observation_space} and {self.action_space}"
        )

    def set_env(self, env: str | gym.Env | Callable[[], gym.Env]) -> None:
        """Use ``env`` for training; its spaces must match the model's."""
        env = make_env(env)
        _check_spaces(env.observation_space, env.action_space)
        if self.observation_space is not None and (env.observation_space != self.observation_space or env.action_space != self.action_space):
            raise ValueError(self._space_mismatch(env.observation_space, env.action_space, "the env"))
        self.env, self.observation_space, self.action_space = env, env.observation_space, env.action_space
        self.env_id = env.spec.id if env.spec is not None else self.env_id

    def get_env(self) -> gym.Env | None:
        """The training env."""
        return self.env

    # -- one iteration ------------------------------------------------------
    def _candidate_seeds(self, n_candidates: int) -> list[list[int]]:
        """Env seeds per candidate; with common random numbers, +delta_k and -delta_k share them."""
        keys = np.arange(n_candidates) % self.n_delta if self.common_random_numbers else np.arange(n_candidates)
        return [[episode_seed(self.seed, self._n_updates, int(k), e) for e in range(self.n_eval_episodes)] for k in keys]

    def evaluate_candidates(self, candidate_weights: Any, callback: Any = None, async_eval: Any = None) -> np.ndarray:
        """Return of each candidate: mean over ``n_eval_episodes``, with ``alive_bonus_offset`` per step.

        Parameters
        ----------
        candidate_weights : array_like
            ``(n_candidates, n_params)``: NumPy array or CPU torch tensor.
        callback : optional
            SB3-style callbacks: ``on_rollout_start`` and ``on_rollout_end`` bracket the rollouts.
        async_eval : AsyncEval, optional
            Evaluate in worker processes instead of this one.

        Returns
        -------
        numpy.ndarray
            ``(n_candidates,)`` returns. The statistics of the visited states are kept
            in ``self._visited`` (one RunningMeanStd per candidate) for the update.
        """
        candidate_weights = _as_array(candidate_weights)
        if candidate_weights.ndim != 2 or candidate_weights.shape[1] != self.policy.n_params:
            raise ValueError(f"candidate_weights must have shape (n_candidates, {self.policy.n_params}); got {candidate_weights.shape}")
        callbacks = callback if isinstance(callback, _Callbacks) else _Callbacks(callback, self)
        seeds = self._candidate_seeds(len(candidate_weights))
        callbacks.hook("on_rollout_start")
        results = self._rollouts(candidate_weights, seeds, async_eval)
        callbacks.hook("on_rollout_end")
        for candidate, (returns, _, visited) in enumerate(results):
            if not (np.isfinite(returns).all() and np.isfinite(visited.mean).all() and np.isfinite(visited.var).all()):
                what = "reward" if not np.isfinite(returns).all() else "observation"
                raise FloatingPointError(
                    f"iteration {self._n_updates}, candidate {candidate} (direction {candidate % self.n_delta}, "
                    f"{'+' if candidate < self.n_delta else '-'}): the env returned a non-finite {what} (nan or inf) "
                    f"in an episode with env seeds {seeds[candidate]}. The weights are as they were before this iteration."
                )
        self._visited = [visited for _, _, visited in results]
        for returns, lengths, _ in results:
            self.ep_info_buffer.extend({"r": float(r), "l": int(n)} for r, n in zip(returns, lengths))
            self.num_timesteps += int(lengths.sum())
        return np.array([np.mean(r + self.alive_bonus_offset * n) for r, n, _ in results])

    def _rollouts(self, weights: np.ndarray, seeds: Sequence[Sequence[int]], async_eval: Any) -> list[tuple[np.ndarray, np.ndarray, RunningMeanStd]]:
        """(returns, lengths, visited) per parameter vector: in worker processes if given, else here."""
        if async_eval is not None:
            async_eval.set_policy(self.policy)  # the frozen statistics go with the policy
            async_eval.send_jobs(weights, len(weights), episode_seeds=seeds)
            return [(r, n, v) for (_, (r, n)), v in zip(async_eval.get_results(), async_eval.last_visited)]
        if self.env is None:
            raise ValueError("no env to evaluate on: pass env= to ARS(...), set_env() or learn(), or an async_eval")
        track = self.policy.obs_rms is not None
        return [run_episodes(self.env, self.policy.actor(theta), s, track_obs=track) for theta, s in zip(weights, seeds)]

    def _warm_up_statistics(self, async_eval: Any) -> None:
        """``normalization_samples``: observation statistics from episodes of the initial policy."""
        theta, visited, episode = self.policy.parameters_to_vector(), RunningMeanStd((self.policy.obs_dim,)), 0
        batch = max(getattr(async_eval, "n_workers", 1), 1)
        while visited.count < self.normalization_samples:
            seeds = [[int(_stream(self.seed, WARM_UP, episode + i).generate_state(1)[0])] for i in range(batch)]
            for _, lengths, rms in self._rollouts(np.tile(theta, (batch, 1)), seeds, async_eval):
                visited.combine(rms)
                self.num_timesteps += int(lengths.sum())
            episode += batch
        self.policy.obs_rms = self.policy.obs_rms.copy().combine(visited)

    def warm_start(self, demonstrations: Any, ridge: float = 1e-3) -> None:
        """Fit the linear policy to demonstrations in closed form, before training.

        The demonstrations' observations seed the observation statistics (V2); the
        policy is then the ridge regression of the actions on the normalised
        observations. Squashed Box actions are regressed through ``atanh`` of the
        rescaled actions; Discrete actions through one-hot targets.

        Parameters
        ----------
        demonstrations : tuple or path
            ``(observations, actions)`` arrays, or a ``.npz`` file or a folder of them,
            each holding ``observations`` and ``actions``.
        ridge : float
            The L2 penalty of the regression.
        """
        if self.policy.net_arch:
            raise ValueError("warm_start fits linear policies (LinearPolicy, or MlpPolicy with net_arch=[])")
        observations, actions = load_demonstrations(demonstrations) if isinstance(demonstrations, (str, os.PathLike)) else demonstrations
        observations = _as_array(observations).reshape(-1, self.policy.obs_dim)
        actions = _as_array(actions, None)
        if len(actions) != len(observations):
            raise ValueError(f"got {len(observations)} observations but {len(actions)} actions")
        if self.policy.obs_rms is not None:
            self.policy.obs_rms = self.policy.obs_rms.copy().update(observations)
        policy = self.policy
        if isinstance(self.action_space, spaces.Discrete):
            targets = -np.ones((len(actions), policy.action_dim))
            targets[np.arange(len(actions)), actions.astype(np.int64).reshape(-1) - int(self.action_space.start)] = 1.0
        else:
            targets = actions.astype(np.float64).reshape(len(actions), -1)
            if policy.squash_output:
                targets = np.arctanh(np.clip((targets - policy._center) / policy._scale, -0.999, 0.999))
        if policy.obs_rms is not None:  # regress on what the first layer sees: normalised observations
            var = policy.obs_rms.var.reshape(-1)
            inv_std = np.where(var < MIN_VARIANCE, 0.0, 1.0 / np.sqrt(np.maximum(var, MIN_VARIANCE)))
            inputs = (observations - policy.obs_rms.mean.reshape(-1)) * inv_std
        else:
            inputs = observations
        if policy.with_bias:
            inputs = np.hstack([inputs, np.ones((len(inputs), 1))])
        solution = np.linalg.solve(inputs.T @ inputs + ridge * np.eye(inputs.shape[1]), inputs.T @ targets).T
        weight, bias = (solution[:, :-1], solution[:, -1]) if policy.with_bias else (solution, None)
        policy.load_from_vector(np.concatenate([weight.ravel(), [] if bias is None else bias]))

    def _schedule_value(self, value: float | Schedule) -> float:
        return float(value(self._current_progress_remaining) if callable(value) else value)

    def _do_one_update(self, callbacks: _Callbacks, async_eval: Any) -> None:
        """One iteration of Algorithm 2 (Mania, Guy & Recht 2018)::

            delta_k ~ N(0, I), k = 1..N                  rollouts of theta + nu delta_k and theta - nu delta_k
            keep the b directions with the largest max(r+_k, r-_k)
            theta <- theta + alpha / (b sigma_R) * sum_k (r+_k - r-_k) delta_k

        with ``sigma_R`` the standard deviation (ddof=0) of the 2b kept returns. Under V2
        the observation statistics stay frozen during the rollouts and absorb every
        visited state afterwards.
        """
        alpha, nu = self._schedule_value(self.learning_rate), self._schedule_value(self.delta_std)
        theta = self.policy.parameters_to_vector()
        deltas = np.stack([direction(self.seed, self._n_updates, k, self.policy.n_params) for k in range(self.n_delta)])
        candidates = np.concatenate([theta + nu * deltas, theta - nu * deltas])
        returns = self.evaluate_candidates(candidates, callbacks, async_eval)
        r_plus, r_minus = returns[: self.n_delta], returns[self.n_delta :]
        top = np.argsort(-np.maximum(r_plus, r_minus), kind="stable")[: self.n_top]
        sigma_r = np.concatenate([r_plus[top], r_minus[top]]).std()
        # sigma_R == 0 means every kept return is equal, so every r+ - r- is 0: no step.
        step_size = alpha / (self.n_top * sigma_r) if sigma_r > 0 else 0.0
        self.policy.load_from_vector(theta + step_size * ((r_plus[top] - r_minus[top]) @ deltas[top]))
        if self.policy.obs_rms is not None:  # frozen during the iteration, updated after it
            obs_rms = self.policy.obs_rms.copy()
            for visited in self._visited:
                obs_rms.combine(visited)
            self.policy.obs_rms = obs_rms
        self._n_updates += 1
        self.logger.record("rollout/return_std", float(sigma_r))
        self.logger.record("train/step_size", float(step_size))
        self.logger.record("train/delta_std", nu)
        self.logger.record("train/learning_rate", alpha)

    # -- training -----------------------------------------------------------
    def learn(
        self,
        total_timesteps: int,
        env: str | gym.Env | Callable[[], gym.Env] | None = None,
        callback: Any = None,
        log_every_n_steps: int | None = 1,
        tb_log_name: str = "ARS",
        reset_num_timesteps: bool = True,
        async_eval: Any = None,
        progress_bar: bool = False,
        default_root_dir: str | os.PathLike | None = None,
        log_interval: int | None = None,
        checkpoint_interval: int | None = None,
    ) -> ARS:
        """Train for ``total_timesteps`` env steps (the last iteration may overshoot).

        Parameters
        ----------
        total_timesteps : int
            Env steps to train for (counted over all candidates and episodes).
        env : optional
            Env id, env or env function to (re)train on.
        callback : optional
            A function ``f(locals, globals)``, an SB3-style callback object, or a list of them.
            Called after every iteration; returning False stops training.
        log_every_n_steps : int, optional
            Log (and print with ``verbose=1``) every this many iterations; None: never.
        tb_log_name : str
            Run name under ``tensorboard_log``.
        reset_num_timesteps : bool
            False continues the step count (and schedules) of the previous call.
        async_eval : AsyncEval, optional
            Evaluate candidates in worker processes. Not closed by ``learn``.
        progress_bar : bool
            Show a tqdm progress bar (``pip install 'ars-numpy[progress]'``).
        default_root_dir : str, optional
            Folder for ``progress.csv``.
        log_interval : int, optional
            Stable-Baselines3's name for ``log_every_n_steps``.
        checkpoint_interval : int, optional
            Every this many iterations (and at the end), write ``checkpoint.npz`` to the log
            folder, atomically. To resume exactly: ``ARS.load(checkpoint)`` then
            ``learn(total - model.num_timesteps, reset_num_timesteps=False)``.

        Returns
        -------
        ARS
            ``self``.
        """
        if env is not None:
            self.set_env(env)
        if self.env is None and async_eval is None:
            raise ValueError("no env to train on: pass env= to ARS(...) or learn(), or an async_eval")
        log_every = log_interval if log_interval is not None else log_every_n_steps
        if reset_num_timesteps:
            self.num_timesteps = 0
            self.ep_info_buffer.clear()
        self._total_timesteps = int(total_timesteps) + self.num_timesteps
        self.logger = Logger(self.verbose, self._log_dir(default_root_dir, tb_log_name, reset_num_timesteps))
        if checkpoint_interval and self.logger.dir is None:
            raise ValueError("checkpoint_interval needs a folder: pass default_root_dir (or set tensorboard_log)")
        bar = None
        if progress_bar:
            tqdm = _require("tqdm", "pip install 'ars-numpy[progress]'")
            bar = tqdm.tqdm(total=int(total_timesteps), unit="steps")
        callbacks = _Callbacks(callback, self)
        start_time, start_steps = time.perf_counter(), self.num_timesteps
        self._start_time, self._start_steps = start_time, start_steps
        if self.normalization_samples and self.policy.obs_rms is not None and self.policy.obs_rms.count == 0:
            self._warm_up_statistics(async_eval)
        callbacks.hook("on_training_start", locals(), globals())
        while self.num_timesteps < self._total_timesteps:
            self._current_progress_remaining = 1.0 - self.num_timesteps / self._total_timesteps
            before = self.num_timesteps
            self._do_one_update(callbacks, async_eval)
            if bar is not None:
                bar.update(self.num_timesteps - before)
            keep_going = callbacks.on_step(locals())  # before the log row, so an evaluation lands in it
            if log_every and self._n_updates % log_every == 0:
                self.dump_logs()
            if checkpoint_interval and self._n_updates % checkpoint_interval == 0:
                self.save(self.logger.dir / "checkpoint.npz")
            if not keep_going:
                break
        if checkpoint_interval:
            self.save(self.logger.dir / "checkpoint.npz")
        callbacks.hook("on_training_end")
        if bar is not None:
            bar.close()
        return self

    def _log_dir(self, default_root_dir: Any, tb_log_name: str, reset_num_timesteps: bool) -> Path | None:
        if default_root_dir is not None:
            return Path(default_root_dir)
        if self.tensorboard_log is None:
            return None
        root = Path(self.tensorboard_log)
        taken = [int(p.name.rsplit("_", 1)[1]) for p in root.glob(f"{tb_log_name}_*") if p.name.rsplit("_", 1)[1].isdigit()]
        last = max(taken, default=0)
        return root / f"{tb_log_name}_{last if (last and not reset_num_timesteps) else last + 1}"

    def dump_logs(self) -> None:
        """Record the rollout and time statistics and write the log row."""
        if self.ep_info_buffer:
            self.logger.record("rollout/ep_rew_mean", float(np.mean([e["r"] for e in self.ep_info_buffer])))
            self.logger.record("rollout/ep_len_mean", float(np.mean([e["l"] for e in self.ep_info_buffer])))
        elapsed = max(time.perf_counter() - self._start_time, 1e-9)
        self.logger.record("train/iterations", self._n_updates)
        self.logger.record("time/fps", int((self.num_timesteps - self._start_steps) / elapsed))
        self.logger.record("time/time_elapsed", round(elapsed, 3))
        self.logger.record("time/total_timesteps", self.num_timesteps)
        self.logger.dump(self.num_timesteps)

    def predict(self, observation: Any, state: Any = None, episode_start: Any = None, deterministic: bool = True) -> tuple[np.ndarray, None]:
        """``(action, None)`` for one observation or a batch (SB3's signature)."""
        return self.policy.predict(observation, state, episode_start, deterministic)

    # -- saving and loading ---------------------------------------------------
    def get_parameters(self) -> dict[str, dict[str, np.ndarray]]:
        """``{"policy": {name: array}}``: the parameters and, with V2, the observation statistics."""
        params = {"parameters": self.policy.parameters_to_vector()}
        if self.policy.obs_rms is not None:
            rms = self.policy.obs_rms
            params.update(obs_rms_mean=rms.mean.copy(), obs_rms_var=rms.var.copy(), obs_rms_count=np.array(rms.count))
        return {"policy": params}

    def set_parameters(self, load_path_or_dict: str | os.PathLike | dict[str, dict[str, Any]], exact_match: bool = True, device: Any = "auto") -> None:
        """Load parameters from a saved model or from a dict shaped like :meth:`get_parameters`.

        With ``exact_match``, every expected array must be given and nothing else.
        """
        if isinstance(load_path_or_dict, (str, os.PathLike)):
            load_path_or_dict = {"policy": _read_model_file(load_path_or_dict)[1]}
        if not isinstance(load_path_or_dict, dict) or not isinstance(load_path_or_dict.get("policy"), dict):
            raise ValueError("expected a path or a dict {'policy': {name: array}} as returned by get_parameters()")
        expected = self.get_parameters()["policy"]
        given = {k: _as_array(v, None) for k, v in load_path_or_dict["policy"].items()}
        missing, unexpected = sorted(set(expected) - set(given)), sorted(set(given) - set(expected))
        if exact_match and (missing or unexpected or set(load_path_or_dict) != {"policy"}):
            raise ValueError(f"parameters do not match the model: missing {missing}, unexpected {unexpected + sorted(set(load_path_or_dict) - {'policy'})}")
        for key in set(given) & set(expected):
            if given[key].shape != expected[key].shape:
                raise ValueError(f"parameter {key!r} has shape {given[key].shape}, the model expects {expected[key].shape}")
        if "parameters" in given:
            self.policy.load_from_vector(given["parameters"])
        if self.policy.obs_rms is not None and {"obs_rms_mean", "obs_rms_var", "obs_rms_count"} <= set(given):
            rms = RunningMeanStd(self.policy.obs_rms.mean.shape)
            rms.mean, rms.var, rms.count = given["obs_rms_mean"].astype(np.float64), given["obs_rms_var"].astype(np.float64), int(given["obs_rms_count"])
            self.policy.obs_rms = rms

    def _metadata(self) -> dict[str, Any]:
        policy_name = "LinearPolicy" if isinstance(self.policy, ARSLinearPolicy) else "MlpPolicy"
        config = self.policy.config()
        if policy_name == "LinearPolicy":
            config = {k: config[k] for k in ("with_bias", "squash_output")}
        names = ("n_delta", "n_top", "zero_policy", "alive_bonus_offset", "n_eval_episodes", "stats_window_size", "normalize_obs", "common_random_numbers", "normalization_samples")
        hparams = {k: self.hparams[k] for k in names}
        hparams.update(seed=self.seed, learning_rate=self._schedule_value(self.learning_rate), delta_std=self._schedule_value(self.delta_std))
        return dict(
            format=FORMAT, format_version=FORMAT_VERSION, ars_version=__version__,
            policy=policy_name, policy_kwargs=config, hparams=hparams,
            schedules=[k for k in ("learning_rate", "delta_std") if callable(getattr(self, k))],
            observation_space=_space_to_json(self.observation_space), action_space=_space_to_json(self.action_space),
            env_id=self.env_id, num_timesteps=self.num_timesteps, n_updates=self._n_updates,
            rng_state=self._rng.bit_generator.state,
        )  # fmt: skip

    def save(self, path: str | os.PathLike) -> Path:
        """Write the model to one ``.npz`` (plain arrays + JSON metadata, no pickle), atomically.

        Returns the path written (``.npz`` is appended when ``path`` has no suffix).
        """
        arrays = dict(self.get_parameters()["policy"], metadata=np.array(json.dumps(self._metadata())))
        return _write_npz_atomic(path, arrays)

    @classmethod
    def load(cls, path: str | os.PathLike, env: str | gym.Env | Callable[[], gym.Env] | None = None, device: Any = "auto", **kwargs: Any) -> ARS:
        """Build a model from a file written by :meth:`save`; ``learn`` continues from it.

        ``kwargs`` override saved hyper-parameters (e.g. a ``learning_rate`` schedule,
        which a file stores only as its value at the time of saving).
        """
        meta, arrays = _read_model_file(path)
        hparams = dict(meta["hparams"])
        for name in meta.get("schedules", []):
            if name not in kwargs:
                warnings.warn(f"{path}: {name} was a schedule, saved as its last value {hparams[name]}; pass {name}= to ARS.load to restore it", stacklevel=2)
        hparams.update(kwargs)
        policy_kwargs = hparams.pop("policy_kwargs", meta["policy_kwargs"])
        model = cls(meta["policy"], policy_kwargs=policy_kwargs, device=device, _init_setup_model=False, **hparams)
        model.observation_space = _space_from_json(meta["observation_space"])
        model.action_space = _space_from_json(meta["action_space"])
        model.env_id = meta.get("env_id")
        model._setup_model()
        model.set_parameters({"policy": arrays}, exact_match=True)
        model.num_timesteps, model._n_updates = int(meta["num_timesteps"]), int(meta["n_updates"])
        model._rng.bit_generator.state = meta["rng_state"]
        if env is not None:
            model.set_env(env)
        return model


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------

# The paper's hyper-parameters (as kept by rl-baselines3-zoo), by env name without its version.
PAPER_SETTINGS: dict[str, dict[str, Any]] = {
    "Swimmer": dict(learning_rate=0.02, delta_std=0.01, n_delta=1, n_top=1, alive_bonus_offset=0, normalize_obs=False, total_timesteps=2_000_000),
    "Hopper": dict(learning_rate=0.01, delta_std=0.025, n_delta=8, n_top=4, alive_bonus_offset=-1, normalize_obs=True, total_timesteps=7_000_000),
    "HalfCheetah": dict(learning_rate=0.02, delta_std=0.03, n_delta=32, n_top=4, alive_bonus_offset=0, normalize_obs=True, total_timesteps=12_500_000),
    "Walker2d": dict(learning_rate=0.03, delta_std=0.025, n_delta=40, n_top=30, alive_bonus_offset=-1, normalize_obs=True, total_timesteps=75_000_000),
    "Ant": dict(learning_rate=0.015, delta_std=0.025, n_delta=60, n_top=20, alive_bonus_offset=-1, normalize_obs=True, total_timesteps=75_000_000),
    "Humanoid": dict(learning_rate=0.02, delta_std=0.0075, n_delta=230, n_top=230, alive_bonus_offset=-5, normalize_obs=True, total_timesteps=250_000_000),
    "CartPole": dict(learning_rate=0.02, delta_std=0.05, n_delta=2, n_top=2, alive_bonus_offset=0, normalize_obs=False, total_timesteps=50_000),
    "Pendulum": dict(learning_rate=0.018, delta_std=0.1, n_delta=4, n_top=1, alive_bonus_offset=0, normalize_obs=True, total_timesteps=2_000_000,
                     policy="MlpPolicy", net_arch=[16], zero_policy=False),
}  # fmt: skip
GENERIC_SETTINGS: dict[str, Any] = dict(
    policy="LinearPolicy", net_arch=None, learning_rate=0.02, delta_std=0.03, n_delta=8, n_top=None, alive_bonus_offset=0.0,
    normalize_obs=True, zero_policy=True, common_random_numbers=True, n_eval_episodes=1, total_timesteps=1_000_000,
)  # fmt: skip


def settings_for(env_id: str) -> dict[str, Any]:
    """The paper's hyper-parameters for ``env_id`` (any version), else generic defaults."""
    return {**GENERIC_SETTINGS, **PAPER_SETTINGS.get(env_id.split("/")[-1].rsplit("-v", 1)[0], {})}


def paper_model(env_id: str, env: str | gym.Env | Callable[[], gym.Env] | None = None, **overrides: Any) -> ARS:
    """An :class:`ARS` with the paper's hyper-parameters for ``env_id`` (see :func:`settings_for`).

    ``overrides`` replace any setting (``n_delta=16``, ``net_arch=[32]``, ...) or pass other
    ``ARS`` arguments (``seed``, ``verbose``, ...). ``env`` defaults to ``env_id``.

    Examples
    --------
    >>> model = paper_model("Hopper-v4", seed=237)   # alpha=0.01, nu=0.025, N=8, b=4, shift -1, V2
    """
    config = {**settings_for(env_id), **overrides}
    config.pop("total_timesteps")
    net_arch = config.pop("net_arch")
    if config["policy"] == "MlpPolicy" and net_arch is not None:
        config["policy_kwargs"] = {**(config.get("policy_kwargs") or {}), "net_arch": net_arch}
    return ARS(config.pop("policy"), env if env is not None else env_id, **config)


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python ars.py",
        description="Train a policy with Augmented Random Search. Unset flags take the paper's value for "
        f"the env ({', '.join(PAPER_SETTINGS)}; any -v4/-v5 id) or a generic default.",
        epilog="examples:\n  python ars.py                        CartPole-v1 to 500 in seconds\n"
        "  python ars.py --env Hopper-v4        the paper's Hopper run\n"
        "  python ars.py --eval runs/Hopper-v4-20261129-101500/model.npz\n"
        "  python ars.py --resume runs/Hopper-v4-20261129-101500",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = p.add_argument
    add("--env", help="gymnasium env id (default CartPole-v1; with --eval, the env saved in the model)")
    add("--policy", choices=list(POLICY_ALIASES), help="LinearPolicy (the paper's) or MlpPolicy")
    add("--net-arch", type=lambda s: [int(n) for n in s.split(",") if n], help="MlpPolicy hidden sizes, e.g. 64,64")
    add("--n-delta", type=int, help="N: directions per iteration")
    add("--n-top", type=int, help="b: best directions kept for the update (default N)")
    add("--learning-rate", type=float, help="alpha: step size")
    add("--delta-std", type=float, help="nu: exploration noise")
    add("--alive-bonus-offset", type=float, help="added to every training reward (e.g. -1 for Hopper)")
    add("--normalize-obs", action=argparse.BooleanOptionalAction, help="V2 observation normalisation")
    add("--zero-policy", action=argparse.BooleanOptionalAction, help="start from zero parameters")
    add("--common-random-numbers", action=argparse.BooleanOptionalAction, help="same env seed for the +/- rollouts of a direction (default on)")
    add("--n-eval-episodes", type=int, help="episodes per candidate (default 1)")
    add("--total-timesteps", type=float, help="env steps to train for")
    add("--seed", type=int, help="random seed (default: drawn, and saved in config.json)")
    add("--workers", type=int, help="worker processes for the rollouts (default: one per core for MuJoCo tasks, else 0: this process)")
    add("--run-dir", help="output folder (default runs/<env>-<date>-<time>)")
    add("--eval", metavar="MODEL", help="evaluate a saved model.npz instead of training")
    add("--eval-episodes", type=int, default=10, help="episodes per evaluation, during training and at the end (default 10)")
    add("--eval-freq", type=int, help="timesteps between evaluations during training (default: total / 20)")
    add("--checkpoint-interval", type=int, default=10, help="iterations between checkpoints in the run folder (default 10)")
    add("--resume", metavar="RUN_DIR", help="continue an interrupted run from its checkpoint, exactly")
    add("--demos", metavar="PATH", help="warm start: fit the linear policy to demonstrations (.npz, or a folder of them)")
    add("--normalization-samples", type=int, default=0, help="V2: steps of the initial policy to estimate the statistics from")
    add("--verbose", type=int, default=0, help="1: print the full log table each iteration")
    return p.parse_args(argv)


def _print_progress(total: int, evaluation: EvalCallback) -> Callable[[dict[str, Any], dict[str, Any]], bool]:
    """A callback printing one progress line at most every two seconds, and at the end."""
    last = [0.0]

    def callback(locals_: dict[str, Any], globals_: dict[str, Any]) -> bool:
        model: ARS = locals_["self"]
        now = time.perf_counter()
        if now - last[0] >= 2.0 or model.num_timesteps >= model._total_timesteps:
            last[0] = now
            fps = (model.num_timesteps - model._start_steps) / max(now - model._start_time, 1e-9)
            reward = np.mean([e["r"] for e in model.ep_info_buffer]) if model.ep_info_buffer else float("nan")
            latest = evaluation.evaluations[-1][2] if evaluation.evaluations else float("nan")
            eta = max(model._total_timesteps - model.num_timesteps, 0) / max(fps, 1e-9)
            print(
                f"{model.num_timesteps:>12,} / {total:,} steps | iter {model._n_updates:>6} | train return {reward:10.2f} | "
                f"eval {latest:10.2f} (best {evaluation.best_mean_reward:10.2f}) | {fps:9,.0f} steps/s | eta {eta / 60:6.1f} min",
                flush=True,
            )
        return True

    return callback


def _trim_progress(path: Path, n_updates: int) -> float:
    """Drop the rows a resumed run will write again (and a row cut short by a kill); returns the best evaluation."""
    if not path.exists():
        return -np.inf
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        columns = reader.fieldnames or []
        rows = [r for r in reader if None not in r.values() and r.get("train/iterations", "").isdigit() and int(r["train/iterations"]) <= n_updates]
    with tempfile.NamedTemporaryFile("w", newline="", dir=path.parent, delete=False) as f:
        writer = csv.DictWriter(f, columns)
        writer.writeheader()
        writer.writerows(rows)
    os.replace(f.name, path)
    evaluations = [float(r["eval/mean_reward"]) for r in rows if r.get("eval/mean_reward")]
    return max(evaluations, default=-np.inf)


def _new_run(args: argparse.Namespace) -> tuple[ARS, dict[str, Any], Path]:
    env_id = args.env or "CartPole-v1"
    config = settings_for(env_id)
    config.update({k: v for k, v in vars(args).items() if k in config and v is not None})
    config["total_timesteps"] = int(config["total_timesteps"])
    env = make_env(env_id)
    model = paper_model(env_id, env, **config, seed=args.seed, verbose=args.verbose, normalization_samples=args.normalization_samples)
    if args.demos:
        model.warm_start(args.demos)
    is_mujoco = "mujoco" in str(getattr(env.spec, "entry_point", ""))
    config.update(
        env=env_id, seed=model.seed, n_top=model.n_top, ars_version=__version__, demos=args.demos, normalization_samples=args.normalization_samples,
        workers=args.workers if args.workers is not None else (os.cpu_count() or 1) if is_mujoco else 0,
        eval_freq=args.eval_freq or max(config["total_timesteps"] // 20, 1), eval_episodes=args.eval_episodes,
        checkpoint_interval=args.checkpoint_interval,
    )  # fmt: skip
    run_dir = Path(args.run_dir or Path("runs") / f"{env_id.replace('/', '_')}-{time.strftime('%Y%m%d-%H%M%S')}")
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return model, config, run_dir


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: train, resume or ``--eval``, and report; returns the exit status."""
    args = _parse_args(argv)
    best = -np.inf
    try:
        if args.eval:
            model = ARS.load(args.eval)
            env_id = args.env or model.env_id
            if env_id is None:
                print(f"{args.eval} does not record its env; pass --env", file=sys.stderr)
                return 2
            model.set_env(env_id)
            mean, std = evaluate_policy(model, model.env, args.eval_episodes, seed=model.seed + 1)
            print(f"{env_id}: mean return {mean:.2f} +/- {std:.2f} over {args.eval_episodes} episodes ({args.eval})")
            return 0
        if args.resume:
            run_dir = Path(args.resume)
            if not (run_dir / "config.json").exists() or not (run_dir / "checkpoint.npz").exists():
                print(f"{run_dir} has no config.json and checkpoint.npz to resume from", file=sys.stderr)
                return 2
            config = json.loads((run_dir / "config.json").read_text())
            model = ARS.load(run_dir / "checkpoint.npz", env=config["env"], verbose=args.verbose)
            best = _trim_progress(run_dir / "progress.csv", model._n_updates)
            if args.workers is not None:
                config["workers"] = args.workers
            print(f"resuming {run_dir} at {model.num_timesteps:,} steps (iteration {model._n_updates})")
        else:
            model, config, run_dir = _new_run(args)
            print(f"ARS on {config['env']}: {json.dumps({k: v for k, v in config.items() if k not in ('env', 'ars_version')})}")
    except (ModuleNotFoundError, FileNotFoundError, ValueError, TypeError, gym.error.Error) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    env_id, total, workers = config["env"], config["total_timesteps"], config["workers"]
    print(f"writing to {run_dir}/; rollouts " + (f"in {workers} worker processes" if workers else "in this process"))
    evaluation = EvalCallback(env_id, config["eval_freq"], config["eval_episodes"], best_model_save_path=run_dir, seed=model.seed + 1)
    evaluation.best_mean_reward = best
    async_eval = AsyncEval([functools.partial(make_env, env_id)] * workers, model.policy) if workers > 0 else None
    try:
        model.learn(
            total - model.num_timesteps, callback=[evaluation, _print_progress(total, evaluation)], default_root_dir=run_dir,
            async_eval=async_eval, reset_num_timesteps=False, checkpoint_interval=config["checkpoint_interval"],
        )  # fmt: skip
    except KeyboardInterrupt:
        print("interrupted: saving the current model")
    finally:
        if async_eval is not None:
            async_eval.close()
    path = model.save(run_dir / "model.npz")
    mean, std = evaluate_policy(model, env_id, config["eval_episodes"], seed=model.seed + 1)
    print(f"saved {path} (best evaluation kept in {run_dir / 'best_model.npz'})")
    print(f"evaluation: mean return {mean:.2f} +/- {std:.2f} over {config['eval_episodes']} episodes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
