"""Augmented Random Search (Mania, Guy & Recht, 2018, arXiv 1803.07055) in one NumPy file.

Each iteration rolls out ``theta +- nu delta_k`` for N directions ``delta_k ~ N(0, I)``, keeps
the b best by ``max(r+_k, r-_k)`` and steps ``alpha / (b sigma_R) sum_k (r+_k - r-_k) delta_k``
(Algorithm 2; V2 normalises observations). The core comes first: cut there, it trains the same.
"""

from __future__ import annotations

import collections
import functools
import math
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import Space, spaces
from gymnasium.wrappers import OrderEnforcing, PassiveEnvChecker, TimeLimit
from numpy._core.umath import clip  # np.clip's ufunc: 0.8-0.9 us a call, np.clip 2.7-4.4 us

__version__ = "0.4.0"  # the one place of the version: pyproject.toml reads it

# == Settings: one table, as CleanRL's Args ======================================================
# Each setting: its default, its rule and a line of help. A rule is data, read by check_rule
# after the algorithm: ("int", low, high), ("number", low) for a finite number >= low,
# ("positive",), ("switch",); a default of None also admits None. Greek letters are the paper's.
Setting = collections.namedtuple("Setting", "default rule help")
BIG = 2**63 - 1  # a count or a seed past int64 is a mistake, not a plan
SETTINGS = dict(
    policy=Setting("LinearPolicy", ("policy",), "LinearPolicy (the paper's) or MlpPolicy"),
    policy_kwargs=Setting(None, ("policy",), "net_arch, activation_fn, with_bias, squash_output"),
    n_delta=Setting(8, ("int", 1, 10**6), "N: directions per iteration (2N rollouts)"),
    n_top=Setting(None, ("int", 1, 10**6), "b: directions kept (default: N)"),
    learning_rate=Setting(0.02, ("number", 0), "alpha: the step size"),
    delta_std=Setting(0.05, ("positive",), "nu: the noise"),
    zero_policy=Setting(True, ("switch",), "start from zero parameters (M = 0)"),
    alive_bonus_offset=Setting(0.0, ("number", -math.inf), "a shift added to every step's reward"),
    n_eval_episodes=Setting(1, ("int", 1, 10**6), "episodes per candidate"),
    normalize_obs=Setting(False, ("switch",), "V2: normalise the observations"),
    common_random_numbers=Setting(True, ("switch",), "+ and - share their env seeds"),
    max_episode_steps=Setting(None, ("int", 1, BIG), "end episodes here too"),
    seed=Setting(None, ("int", 0, BIG), "random seed (default: drawn; a run saves it)"),
    total_timesteps=Setting(1_000_000, ("number", 0), "env steps to train for (rounded up)"),
)
DEFAULTS = {name: s.default for name, s in SETTINGS.items() if name != "total_timesteps"}
SCHEDULED = ("learning_rate", "delta_std")  # a number, or a schedule f(progress left) of them
POLICIES = dict(  # sb3-contrib's two policies (the paper's a = M x, and an MLP): their options
    LinearPolicy=dict(with_bias=False, squash_output=False),
    MlpPolicy=dict(net_arch=[64, 64], activation_fn="relu", with_bias=True, squash_output=True),
)


# == Running statistics ==========================================================================
class RunningMeanStd:
    """Mean and (population) variance of the rows seen, merged exactly (Chan, Golub & LeVeque
    1979); with no data, mean 0 and var 1 make normalising the identity."""

    def __init__(self, shape: tuple[int, ...] = ()):
        self.mean = np.zeros(shape)
        self.var = np.ones(shape)
        self.count = 0

    @staticmethod
    def from_moments(mean: np.ndarray, var: np.ndarray, count: int) -> RunningMeanStd:
        """The statistics of ``count`` rows with this mean and variance."""
        rms = RunningMeanStd()
        rms.mean = mean
        rms.var = var
        rms.count = count
        return rms

    def copy(self) -> RunningMeanStd:
        """An independent copy."""
        return RunningMeanStd.from_moments(self.mean.copy(), self.var.copy(), self.count)

    def update(self, batch: np.ndarray) -> RunningMeanStd:
        """Add the rows of ``batch`` (shape ``(n, *shape)``); returns ``self``."""
        batch = np.asarray(batch, dtype=np.float64).reshape((-1, *self.mean.shape))
        if len(batch):
            with np.errstate(invalid="ignore", over="ignore"):  # non-finite data is reported
                self.combine(RunningMeanStd.from_moments(batch.mean(0), batch.var(0), len(batch)))
        return self

    def combine(self, other: RunningMeanStd) -> RunningMeanStd:
        """Merge ``other`` into ``self`` exactly (the parallel algorithm); returns ``self``."""
        if other.count == 0:
            return self
        if self.count == 0:  # a copy: the same bits as the other's
            self.mean = other.mean.copy()
            self.var = other.var.copy()
            self.count = other.count
            return self
        count = self.count + other.count
        delta = other.mean - self.mean
        m2 = self.var * self.count + other.var * other.count
        m2 = m2 + delta**2 * (self.count * other.count / count)
        self.mean = self.mean + delta * (other.count / count)
        self.var = m2 / count
        self.count = count
        return self


def merge_statistics(obs_rms: RunningMeanStd | None, visited: Sequence[Any]) -> Any:
    """``obs_rms`` merged with each rollout's statistics in order: the same bits, whoever ran it."""
    if obs_rms is None:  # V1
        return None
    return functools.reduce(RunningMeanStd.combine, visited, obs_rms.copy())


# == The policy: a linear map or an MLP, with V2's normalisation folded into the first layer =====
MIN_VARIANCE = 1e-8  # V2: inputs with a smaller variance are treated as constant and zeroed
ACTIVATIONS: dict[str, Callable] = dict(
    relu=lambda x: np.maximum(x, 0.0),
    tanh=np.tanh,
    sigmoid=lambda x: 0.5 * (1.0 + np.tanh(0.5 * x)),
    identity=lambda x: x,
)


def flattener(space: spaces.Space) -> Callable[[Any], np.ndarray]:
    """``obs -> flat vector`` for any leading axes, as ``spaces.flatten`` (one-hot Discrete)."""

    def flatten(x: Any) -> np.ndarray:
        x = np.asarray(x)
        lead = x.shape[: x.ndim - len(space.shape)]
        if not isinstance(space, spaces.Box):  # a Box is only reshaped: no copy per step
            x = np.array([spaces.flatten(space, row) for row in x.reshape(-1, *space.shape)], float)
        return x.reshape(lead + (spaces.flatdim(space),))

    return flatten


def layer_shapes(obs_dim: int, net_arch: Sequence[int], n_outputs: int) -> list[tuple[int, int]]:
    """``(outputs, inputs)`` per layer; theta holds each weight (row-major), then its bias."""
    return list(zip([*net_arch, n_outputs], [obs_dim, *net_arch]))


def inverse_std(var: np.ndarray) -> np.ndarray:
    """``1 / sqrt(var)``, and 0 for inputs of variance below 1e-8: those are ignored."""
    var = np.reshape(var, -1)
    return np.where(var < MIN_VARIANCE, 0.0, 1 / np.sqrt(np.maximum(var, MIN_VARIANCE)))


class Network:
    """A policy's structure and forward pass (parameters passed in): ``policy``'s layers (POLICIES)
    from a flat, normalised observation to Discrete's argmax, or Box's tanh-rescaled or clipped."""

    def __init__(self, observation_space: Space, action_space: Space, policy: str, options: Any):
        check_spaces(observation_space, action_space)
        options = policy_options(policy, options)
        self.observation_space = observation_space
        self.action_space = action_space
        self.net_arch = options["net_arch"]
        self.activation_fn = options["activation_fn"]
        self.with_bias = options["with_bias"]
        self.squash_output = options["squash_output"]
        self.obs_dim = spaces.flatdim(observation_space)
        flat = isinstance(observation_space, spaces.Box) and len(observation_space.shape) == 1
        self.flatten = None if flat else flattener(observation_space)
        self.action_dim = spaces.flatdim(action_space)  # Discrete: one output per action
        if isinstance(action_space, spaces.Box):  # tanh-rescaled or clipped to these bounds
            self.bounds = action_bounds(action_space, self.squash_output)
        self.layer_shapes = layer_shapes(self.obs_dim, self.net_arch, self.action_dim)
        bias = self.with_bias  # theta's pieces: W1, b1, W2, b2, ... (b: empty without a bias)
        self.pieces = [n for out, inp in self.layer_shapes for n in (out * inp, out if bias else 0)]
        self.n_params = check_size(sum(self.pieces))

    def layers(self, theta: np.ndarray, obs_rms: RunningMeanStd | None = None) -> list[tuple]:
        """``(weight, bias)`` per layer of ``theta`` (or of a population), V2 folded into the
        first, free per step: ``W ((x - mean) * s) + b == (W * s) x + (b - (W * s) mean)``."""
        pieces = np.split(theta, np.cumsum(self.pieces)[:-1], axis=-1)  # W1, b1, W2, b2, ...
        layers = [
            (weight.reshape(*theta.shape[:-1], out, inp), bias if bias.size else None)
            for (out, inp), weight, bias in zip(self.layer_shapes, pieces[::2], pieces[1::2])
        ]
        if obs_rms is not None:
            weight = layers[0][0] * inverse_std(obs_rms.var)
            shift = -(weight @ obs_rms.mean.reshape(-1))
            layers[0] = (weight, shift if layers[0][1] is None else layers[0][1] + shift)
        return layers

    def to_action(self) -> Callable[[np.ndarray], Any]:
        """Outputs ``(..., action_dim)`` (a fresh array) to actions of the space's shape, dtype."""
        if isinstance(self.action_space, spaces.Discrete):
            start = int(self.action_space.start)
            return lambda out: out.argmax(axis=-1) + start
        dtype = self.action_space.dtype
        shape = self.action_space.shape
        low, high = self.bounds
        squash = self.squash_output
        cast = dtype != np.float64
        center = (high + low) / 2 if squash else 0.0
        scale = (high - low) / 2 if squash else 1.0

        def to_box(out: np.ndarray) -> np.ndarray:  # squashed too: center - scale can pass low
            out = clip(center + scale * np.tanh(out) if squash else out, low, high, out=out)
            return out.astype(dtype) if cast else out  # in bounds: they are numbers of the dtype

        if len(shape) == 1:
            return to_box
        return lambda out: to_box(out).reshape(out.shape[:-1] + shape)  # a Box of more axes

    def actor(self, theta: np.ndarray, obs_rms: RunningMeanStd | None = None) -> Callable:
        """A fast ``obs -> action`` for one observation: the rollout's hot path."""
        layers = self.layers(theta, obs_rms)
        hidden = layers[:-1]
        w_out, b_out = layers[-1]
        activation = ACTIVATIONS[self.activation_fn]
        to_action = self.to_action()
        flatten = self.flatten
        dot = np.dot  # 1.3-1.7 us a product of a 3x11 matrix where @ takes 2.1-2.3 us
        if not hidden and flatten is None and b_out is None:  # V1's a = M x: the least per step
            return lambda obs: to_action(dot(w_out, obs))

        def act(obs: Any) -> Any:
            h = obs if flatten is None else flatten(obs)
            for weight, bias in hidden:
                h = activation(dot(weight, h) if bias is None else dot(weight, h) + bias)
            return to_action(dot(w_out, h) if b_out is None else dot(w_out, h) + b_out)

        return act


# == Random streams ==============================================================================
# Every random number comes from a stream named by its coordinates, never from a generator that
# advances: any worker rebuilds a direction or an env seed from a few integers.
ENV_SEEDS = 0  # the first coordinate: the stream's purpose (training's env seeds, ...)
DIRECTIONS = 1


def stream(seed: int, *coordinates: int) -> np.random.SeedSequence:
    """The random stream of ``seed`` named by ``coordinates`` (none: the initial weights)."""
    return np.random.SeedSequence(seed, spawn_key=coordinates)


def env_seeds(seed: int, *coordinates: int, n: int, first: int = 0) -> np.ndarray:
    """The env seeds of episodes ``first`` to ``first + n - 1``: each the first word of the
    stream ``(*coordinates, episode)``; a training rollout's: ``(ENV_SEEDS, iteration, key)``."""
    words = [stream(seed, *coordinates, e).generate_state(1)[0] for e in range(first, first + n)]
    return np.array(words, np.uint64)


def direction(seed: int, iteration: int, k: int, n_params: int) -> np.ndarray:
    """``delta_k ~ N(0, I)`` of an iteration, regenerated from its coordinates."""
    return np.random.default_rng(stream(seed, DIRECTIONS, iteration, k)).standard_normal(n_params)


# == Rollouts: the one loop that runs episodes, and what it records ==============================
# What evaluators get and give back. An Iteration: the Network, theta, V2's frozen statistics, nu,
# the seed and index naming its directions, whether to track states, a step limit, an observation
# filter (SB3 VecNormalize's). A Job: candidate c, ``theta + sign nu delta_k`` (sign 0: theta, or
# ``weights``), with its env seeds. A Result: returns, lengths, the states' statistics (V1: None).
ITERATION = "network theta obs_rms delta_std seed index track_obs max_episode_steps obs_filter"
Iteration = collections.namedtuple("Iteration", ITERATION, defaults=[False, None, None])
Job = collections.namedtuple("Job", "candidate k sign seeds weights", defaults=[None])
Result = collections.namedtuple("Result", "returns lengths visited")


def candidate_parameters(it: Iteration, job: Job) -> np.ndarray:
    """The parameters a job evaluates (the same bits wherever it is computed)."""
    if job.weights is not None or job.sign == 0:
        return it.theta if job.weights is None else job.weights
    delta = direction(it.seed, it.index, job.k, it.network.n_params)
    return it.theta + (job.sign * it.delta_std) * delta  # theta +- nu delta


def run_job(env: gym.Env, it: Iteration, job: Job, options: Any = None, on_step: Any = None) -> Any:
    """One candidate's Result on ``env``, an episode per env seed: the loop that runs episodes
    (``options``: every reset's; ``on_step(action, transition)``: told of each step)."""
    policy = it.network.actor(candidate_parameters(it, job), it.obs_rms)
    obs_filter = it.obs_filter  # an SB3 VecNormalize's view of the observations, or None
    act = policy if obs_filter is None else lambda obs: policy(obs_filter(obs))
    step, env_limit = inner_step(env)
    limits = [env_limit, it.max_episode_steps]
    record = Recorder(env, len(job.seeds), limits, it.track_obs)
    tell = record.step  # bound once: the loop below runs at every step
    for seed in job.seeds:
        obs = record.start(env.reset(seed=int(seed), options=options)[0], int(seed))
        ended = False
        try:  # the shape of each episode's first and last states is checked; others', here
            while not ended:  # the hot loop: a step of the env, one of the policy
                action = act(obs)
                obs, reward, terminated, truncated, info = step(action)
                ended = tell(obs, reward, terminated, truncated)
                if on_step is not None:
                    limited = truncated or record.steps == record.limit
                    on_step(action, (obs, reward, terminated, limited, info))
        except ValueError:  # a product of the policy failed: an observation of another shape?
            check_observation(obs, env, int(seed), f"step {record.steps}")
            raise
    return record.result()


class Recorder:
    """A job's episodes as whoever steps the env tells them (:func:`run_job`, or envs side by
    side): returns, lengths and the statistics of the states acted on (V2's; V1's only flag a
    non-finite state), folded a chunk of rows at a time."""

    def __init__(self, env: Any, n_episodes: int, limits: list, track_obs: bool):
        known = [n for n in limits if n is not None]
        space = env.observation_space
        self.env = env  # named in the messages of its checks
        self.limit = min(known, default=NO_LIMIT_STEPS)  # the first limit reached ends it
        self.unlimited = not known
        self.space = space
        self.track_obs = track_obs
        self.keep = track_obs or np.dtype(space.dtype or int).kind == "f"  # ints are finite
        self.visited = RunningMeanStd((spaces.flatdim(space),))
        self.chunk = max(1, min(1000, OBS_CHUNK_BYTES // (8 * spaces.flatdim(space))))
        self.rows: list = []
        self.returns = np.zeros(n_episodes)
        self.lengths = np.zeros(n_episodes, dtype=np.int64)
        self.episode = -1

    def start(self, obs: Any, seed: int) -> Any:
        """A new episode, from its first state (returned) and its env seed."""
        check_observation(obs, self.env, seed, "its first observation")
        self.seed = seed
        self.episode += 1
        self.total = 0.0
        self.steps = 0
        self.keep_state(obs)
        return obs

    def keep_state(self, obs: Any) -> None:
        """A state the policy acts on."""
        if self.keep:
            self.rows.append(obs)
            if len(self.rows) >= self.chunk:
                self.fold()

    def step(self, obs: Any, reward: float, terminated: bool, truncated: bool) -> bool:
        """A step's reward and new state; True once the episode has ended (env or limit)."""
        self.total += reward
        self.steps += 1
        if not (terminated or truncated or self.steps == self.limit):
            if self.keep:  # keep_state's lines without its call, at every step (not measured apart)
                self.rows.append(obs)
                if len(self.rows) >= self.chunk:
                    self.fold()
            return False
        check_observation(obs, self.env, self.seed, f"its last step, {self.steps},")
        check_episode(self, terminated or truncated)
        if self.keep and not np.isfinite(obs).all():  # a final state is never acted on: checked
            self.rows.append(obs)
        self.returns[self.episode] = self.total
        self.lengths[self.episode] = self.steps
        return True

    def fold(self) -> None:
        """The rows kept, into the statistics."""
        box = isinstance(self.space, spaces.Box)
        rows = flat_rows(self.rows, self.space.dtype) if box else flattener(self.space)(self.rows)
        self.visited.update(rows.reshape(len(self.rows), -1))
        self.rows.clear()

    def result(self) -> Result:
        """The job's Result, once its last episode has ended."""
        if self.rows:
            self.fold()
        flagged = not np.isfinite(self.visited.mean).all()  # a V1 state was NaN or inf
        visited = self.visited if self.track_obs or flagged else None
        return Result(self.returns, self.lengths, visited)


# == One iteration of Algorithm 2, and training ==================================================
Update = collections.namedtuple("Update", "theta obs_rms results timesteps sigma_r step_size")


def shifted_return(result: Result, alive_bonus_offset: float) -> float:
    """A candidate's return: the mean over its episodes, with the paper's shift at every step."""
    return float(np.mean(result.returns + alive_bonus_offset * result.lengths))


def iteration(
    theta: np.ndarray, obs_rms: Any, evaluate: Callable, network: Network, index: int, hp: dict
) -> Update:
    """One iteration of Algorithm 2 (comments give its lines) with ``hp``'s numbers, rollouts
    by ``evaluate(it, jobs)``: the new theta and obs_rms, Results, timesteps, sigma_R, step."""
    n = hp["n_delta"]
    b = hp["n_top"]
    seed = hp["seed"]
    # Line 4: N directions delta_k ~ N(0, I), the streams direction(seed, index, k), drawn later.
    it = Iteration(
        network=network,
        theta=theta,
        obs_rms=obs_rms,  # frozen for the iteration
        delta_std=hp["delta_std"],
        seed=seed,
        index=index,
        track_obs=hp["normalize_obs"],  # V2 collects the states visited
        max_episode_steps=hp["max_episode_steps"],
    )
    # Line 5: 2N rollouts of theta +- nu delta_k (candidates k and N + k), mu and Sigma
    # frozen; common random numbers (ars's, not the paper's): a direction's two share env seeds.
    jobs = []
    for k in range(n):  # run as +delta_0, -delta_0, +delta_1, ...
        for c, sign in ((k, 1), (n + k, -1)):
            key = k if hp["common_random_numbers"] else c
            seeds = env_seeds(seed, ENV_SEEDS, index, key, n=hp["n_eval_episodes"])
            jobs.append(Job(c, k, sign, seeds))
    results = finite_results(it, jobs, evaluate(it, jobs))  # in candidate order
    r = np.array([shifted_return(x, hp["alive_bonus_offset"]) for x in results])
    r_plus = r[:n]
    r_minus = r[n:]
    # Line 6: order the directions by max(r+_k, r-_k) and keep the best b.
    top = np.argsort(-np.maximum(r_plus, r_minus), kind="stable")[:b]
    # Line 7: theta += alpha / (b sigma_R) sum_k (r+_k - r-_k) delta_k, sigma_R the std of the 2b
    # kept returns (0: no step); all in units of a scale that keeps them from overflowing.
    scale = overflow_scale(np.concatenate([r_plus[top], r_minus[top]]))
    plus = r_plus[top] / scale
    minus = r_minus[top] / scale
    sigma_r = finite_spread(np.concatenate([plus, minus]), index)
    step_size = hp["learning_rate"] / (b * sigma_r) if sigma_r > 0 else 0.0
    deltas = np.stack([direction(seed, index, k, network.n_params) for k in top])
    theta = theta + step_size * ((plus - minus) @ deltas)
    # Line 8 (V2): mu and Sigma absorb every state visited in this iteration, in order.
    obs_rms = merge_statistics(obs_rms, [x.visited for x in results])
    steps = int(sum(x.lengths.sum() for x in results))
    return Update(theta, obs_rms, results, steps, sigma_r * scale, step_size / scale)


def initial_parameters(network: Network, zero_policy: bool, seed: int) -> np.ndarray:
    """Line 2's M = 0, else uniform in +-1/sqrt(fan_in) per layer (torch's Linear), seeded."""
    if zero_policy:
        return np.zeros(network.n_params)
    rng = np.random.default_rng(stream(seed))
    fan_ins = np.repeat([inp for out, inp in network.layer_shapes], 2)  # a layer's W, then b
    pieces = zip(fan_ins, network.pieces)
    return np.concatenate([rng.uniform(-1 / math.sqrt(i), 1 / math.sqrt(i), n) for i, n in pieces])


def train(env: str | gym.Env, total_timesteps: int, **hyper_parameters: Any) -> tuple:
    """ARS on ``env`` for ``total_timesteps`` steps (the last iteration may overshoot), checked
    and with the same bits as ``ARS.learn``: theta, V2's statistics (V1: None), the Network."""
    hp = check_settings(hyper_parameters)
    total = math.ceil(check_setting("total_timesteps", total_timesteps))  # as learn() rounds it
    env = gym.make(env) if isinstance(env, str) else env
    network = Network(env.observation_space, env.action_space, hp["policy"], hp["policy_kwargs"])
    theta = initial_parameters(network, hp["zero_policy"], hp["seed"])
    obs_rms = RunningMeanStd((network.obs_dim,)) if hp["normalize_obs"] else None

    def evaluate(it, jobs):
        return [run_job(env, it, job) for job in jobs]  # in this process

    steps = 0
    index = 0
    while steps < total:  # Line 3: loop
        now = {name: setting_at(hp, name, 1 - steps / total) for name in SCHEDULED}
        update = iteration(theta, obs_rms, evaluate, network, index, {**hp, **now})
        theta = update.theta
        obs_rms = update.obs_rms
        steps += update.timesteps
        index += 1
    return theta, obs_rms, network


# == The core's checks: settings, spaces, and the guards the algorithm calls =====================
OBSERVATION_SPACES = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)
MAX_PARAMETERS = 10**7  # a direction this long per candidate is already slow
OBS_CHUNK_BYTES = 8 << 20  # visited observations are folded into statistics in chunks this big
NO_LIMIT_STEPS = 100_000  # an episode this long in an env without a time limit is an error


def is_int(value: Any) -> bool:
    """An int (NumPy's too), not a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def check_switch(name: str, value: Any) -> bool:
    """``value`` as a bool (NumPy's too), else a ValueError naming ``name``."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False; got {value!r:.100}")
    return bool(value)


def check_integer(name: str, value: Any, low: int, high: int = BIG) -> int:
    """``value`` as an int from ``low`` to ``high``, else a ValueError naming ``name``."""
    if not (is_int(value) and low <= value <= high):
        raise ValueError(f"{name} must be an integer from {low:,} to {high:,}; got {value!r:.60}")
    return int(value)


def check_number(name: str, value: Any, low: float = -math.inf, positive: bool = False) -> float:
    """``value`` as a float, else a ValueError naming ``name`` (finite, >= ``low``, or > 0)."""
    real = is_int(value) or isinstance(value, (float, np.floating))  # not a bool, not complex
    finite = real and (abs(int(value)) < 2**1023 if is_int(value) else math.isfinite(value))
    if finite and value >= low and (value > 0 or not positive):
        return float(value)
    what = "a finite number" if low == -math.inf else f"a number >= {low:g}"
    what = "a positive number" if positive else what
    raise ValueError(f"{name} must be {what}; got {value!r:.100}")


def check_setting(name: str, value: Any, label: str = "", table: dict = SETTINGS) -> Any:
    """``value`` of the setting ``name``, checked by its rule (an error names ``label``): None
    where the default is None, a schedule where the setting is SCHEDULED (checked as used)."""
    rule = table[name].rule
    label = label or name
    if value is None and table[name].default is None or name in SCHEDULED and callable(value):
        return value
    if callable(rule):  # a rule of the front's: a function of the name and the value
        return rule(label, value)
    if rule[0] == "switch":
        return check_switch(label, value)
    if rule[0] == "int":
        return check_integer(label, value, *rule[1:])
    if rule[0] == "number" or rule[0] == "positive":
        return check_number(label, value, *rule[1:], positive=rule[0] == "positive")
    return value  # the policy and its options are checked together, by policy_options


def policy_options(policy: Any, options: Any) -> dict[str, Any]:
    """``policy``'s options (``policy_kwargs`` over POLICIES' defaults), checked."""
    if not (isinstance(policy, str) and policy in POLICIES):
        raise ValueError(f"policy must be one of {list(POLICIES)}; got {policy!r:.100}")
    if not isinstance(options, (dict, type(None))):
        raise ValueError(f"policy_kwargs must be a dict or None; got {options!r:.100}")
    unknown = sorted(set(options or {}) - set(POLICIES[policy]))
    if unknown:
        raise ValueError(f"policy_kwargs {unknown}: {policy}'s are {list(POLICIES[policy])}")
    merged = {"net_arch": [], "activation_fn": "relu", **POLICIES[policy], **(options or {})}
    arch = merged["net_arch"]  # None: the default, as in SB3
    arch = POLICIES["MlpPolicy"]["net_arch"] if arch is None else arch
    if not (isinstance(arch, (list, tuple)) and all(is_int(n) and n > 0 for n in arch)):
        raise ValueError(f"net_arch must be a list of layer sizes >= 1; got {arch!r:.100}")
    activation = merged["activation_fn"]  # a name, or torch's class (nn.ReLU): not a function
    activation = str(activation.__name__ if isinstance(activation, type) else activation).lower()
    if activation not in ACTIVATIONS:
        raise ValueError(
            f"activation_fn must be one of {list(ACTIVATIONS)}; got {activation!r:.60}"
        )
    merged.update(net_arch=[int(n) for n in arch], activation_fn=activation)
    merged.update({k: check_switch(k, merged[k]) for k in ("with_bias", "squash_output")})
    return merged


def warn(message: str | Warning) -> None:
    """Warn at the first line outside this file: the user's, whichever door it came in by."""
    frame = sys._getframe(1)
    level = 2
    while frame is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back
        level += 1
    warnings.warn(message, stacklevel=level)


def check_settings(given: dict[str, Any], table: dict = SETTINGS) -> dict[str, Any]:
    """``given`` over the table's defaults (but the budget), each checked by its rule (a
    ValueError names the first bad one), then completed: a None seed is drawn (NumPy's global
    generator, as SB3's), b is N when None and at most N (with a warning)."""
    known = [name for name in table if name != "total_timesteps"]
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise TypeError(f"unknown settings {unknown}; the settings are {known}")
    hp = {
        name: check_setting(name, given.get(name, table[name].default), "", table) for name in known
    }
    if hp["seed"] is None:
        hp["seed"] = int(np.random.randint(0, 2**31 - 1))
    if hp["n_top"] is None:
        hp["n_top"] = hp["n_delta"]
    if hp["n_top"] > hp["n_delta"]:
        warn(f"n_top={hp['n_top']} is larger than n_delta={hp['n_delta']}; using n_delta")
        hp["n_top"] = hp["n_delta"]
    policy_options(hp["policy"], hp["policy_kwargs"])
    return hp


def setting_at(hp: dict[str, Any], name: str, progress: float) -> float:
    """A number, or a schedule's value at ``progress`` (the share of training left), checked."""
    if not callable(hp[name]):
        return hp[name]
    value = hp[name](progress)
    label = f"{name} (its schedule at progress {progress:.3f})"
    if callable(value):  # a schedule gives numbers, which its rule checks
        raise ValueError(f"{label} must be a number; got {value!r:.60}")
    return check_setting(name, value, label)


def check_spaces(observation_space: Space, action_space: Space) -> None:
    """Refuse the spaces a Network cannot map, naming what it takes; and float128, which ARS
    would round to float64 silently and could not save."""
    for space in (observation_space, action_space):
        if space.dtype is not None and space.dtype.kind == "f" and space.dtype.itemsize > 8:
            raise NotImplementedError(
                f"ARS computes in float64; got {space} (cast it with gymnasium.wrappers."
                "DtypeObservation, or make the env with float64 spaces)"
            )
    if not isinstance(observation_space, OBSERVATION_SPACES):
        raise NotImplementedError(
            f"ARS supports Box, Discrete, MultiDiscrete and MultiBinary observation spaces; "
            f"got {observation_space} ({flattening_hint(observation_space)})"
        )
    if not isinstance(action_space, (spaces.Box, spaces.Discrete)):
        raise NotImplementedError(f"ARS supports Box and Discrete actions; got {action_space}")
    if spaces.flatdim(observation_space) == 0:
        raise ValueError(f"the observation space {observation_space} has no elements to act on")


def flattening_hint(space: Space) -> str:
    """What turns ``space`` into one ARS takes: FlattenObservation, where it can."""
    try:
        spaces.flatten_space(space)
    except NotImplementedError:  # a space of the env's own kind, somewhere inside
        return (
            "FlattenObservation cannot flatten all of it: keep its numeric parts with a "
            "wrapper, such as minigrid's ImgObsWrapper or FlatObsWrapper"
        )
    except ValueError:  # an empty Dict or Tuple
        return "it has no elements to act on"
    return "gymnasium.wrappers.FlattenObservation flattens it"


def action_bounds(action_space: spaces.Box, squash_output: bool) -> np.ndarray:
    """A Box's low and high as float64 rows, finite in its dtype (clipping never overflows)."""
    if squash_output and not action_space.is_bounded():
        raise ValueError(f"{action_space} is unbounded: use squash_output=False")
    largest = np.finfo(action_space.dtype).max if action_space.dtype.kind == "f" else np.inf
    bounds = [np.ravel(x).astype(np.float64) for x in (action_space.low, action_space.high)]
    return np.clip(bounds, -largest, largest)


def check_size(n_params: int) -> int:
    """``n_params``, unless a direction of it would be too large to draw at every iteration."""
    if n_params > MAX_PARAMETERS:
        raise ValueError(f"{n_params:,} parameters: ars takes up to {MAX_PARAMETERS:,}")
    return n_params


def check_episode(record: Recorder, ended_by_env: bool) -> None:
    """An ended episode's return is a number, and only a runaway episode is stopped by the
    no-limit cap alone: else say what is wrong, naming its env seed."""
    if np.ndim(record.total) != 0:
        raise ValueError(
            f"the env's rewards have shape {np.shape(record.total)}: ARS needs a number a step "
            "(scalarise a vector reward, for instance with mo-gymnasium's LinearReward)"
        )
    if record.unlimited and not ended_by_env:
        raise RuntimeError(
            f"an episode ran {NO_LIMIT_STEPS:,} steps without ending (env seed {record.seed}) "
            "and the env has no time limit: wrap it in TimeLimit, or pass max_episode_steps="
        )


def check_observation(obs: Any, env: Any, seed: int, when: str) -> None:
    """An observation has its space's shape, else a message naming the env, the shape
    expected, the one received, and ``when`` in the episode of env seed ``seed``."""
    space = env.observation_space
    if np.shape(obs) != space.shape:
        name = getattr(env.spec, "id", None) or type(env).__name__
        raise ValueError(
            f"{name}'s observation has shape {np.shape(obs)} where its observation_space "
            f"{space} has {space.shape} ({when} of the episode of env seed {seed})"
        )


HUGE_PARAMETER = 1e100  # a candidate's parameter this large overflows the policy's products


def finite_results(it: Iteration, jobs: Sequence[Job], results: Sequence[Result]) -> list[Result]:
    """The Results by candidate, checked: a NaN or inf reward or observation stops training,
    blaming the settings where the candidate's parameters were too large to act with."""
    checked = {}
    for job, result in zip(jobs, results):
        rms = result.visited
        what = "reward (nan or inf)" if not np.isfinite(result.returns).all() else None
        largest = np.abs(candidate_parameters(it, job)).max(initial=0.0) if what else 0.0
        if not largest <= HUGE_PARAMETER:  # nan too
            raise FloatingPointError(
                f"iteration {it.index}, candidate {job.candidate}: its parameters reach "
                f"{largest:.3g}, so its actions overflow: lower the settings that make them "
                f"(delta_std {it.delta_std:g}, learning_rate); the env is not at fault"
            )
        if what is None and rms is not None and not np.isfinite([rms.mean, rms.var]).all():
            big = np.isfinite(rms.mean).all()  # finite states whose squares overflow
            what = "variance of the observations: scale them" if big else "observation (nan or inf)"
        if what:
            raise FloatingPointError(
                f"iteration {it.index}, candidate {job.candidate} (direction {job.k}, "
                f"{'+-'[job.sign < 0]}): a non-finite {what}, with env seeds "
                f"{[int(s) for s in job.seeds]}; the weights are unchanged"
            )
        checked[job.candidate] = result
    return [checked[c] for c in range(len(jobs))]


def overflow_scale(kept: np.ndarray) -> float:
    """1, or the largest kept return where returns far from 1 could overflow sigma_R's squares
    or the step: Line 7 then runs in its units (1 leaves the bits as they are)."""
    scale = np.abs(kept).max()
    return scale if scale and not 1e-100 < scale < 1e100 else 1.0


def finite_spread(kept: np.ndarray, index: int) -> float:
    """sigma_R, the std of the kept returns; never a silent zero step from an overflow."""
    sigma_r = kept.std()
    if not np.isfinite(sigma_r):  # returns (and the shift) past float64
        raise FloatingPointError(f"iteration {index}: sigma_R overflows: scale down the rewards")
    return sigma_r


def inner_step(env: gym.Env) -> tuple[Callable[[Any], tuple], int | None]:
    """``env.step`` past TimeLimit, OrderEnforcing and PassiveEnvChecker (their checks cost
    about 1 us a step, as much as ars's own work on a cheap env), and the time limit."""
    limits = []
    while isinstance(env, (TimeLimit, OrderEnforcing, PassiveEnvChecker)):
        limits += [env._max_episode_steps] if isinstance(env, TimeLimit) else []
        env = env.env
    return env.step, min(limits, default=None)  # nested limits: the first reached ends it


def flat_rows(rows: list, dtype: Any) -> np.ndarray:
    """The rows as one flat array, read as bytes if all are arrays of ``dtype`` (60-70 ns a
    row, np.asarray 200-285 ns; an env's int64 rows in a float64 Box are converted)."""
    flat = np.empty(0)
    if {getattr(row, "dtype", None) for row in rows} == {np.dtype(dtype)}:
        try:  # not a context manager: this runs at every step of envs side by side
            flat = np.frombuffer(b"".join(rows), dtype)
        except (TypeError, ValueError, BufferError):  # strided arrays
            pass
    return flat if flat.size == len(rows) * np.size(rows[0]) else np.asarray(rows, float).ravel()


# --------------------------------------------------- end of the core: the rest is built on it

__all__ = [  # what users import; the rest is reachable as ars.NAME, for the curious
    # the core
    "SETTINGS",
    "DEFAULTS",
    "POLICIES",
    "RunningMeanStd",
    "Network",
    "train",
    # the API, presets and envs
    "ARS",
    "ARSPolicy",
    "ARSLinearPolicy",  # and ars.TorchPolicy, made (with torch) only when asked for
    "settings_for",
    "paper_model",
    "PAPER_SETTINGS",
    "TUNED_SETTINGS",
    "make_env",
    # evaluators, callbacks, logging, files
    "Evaluator",
    "InProcessEval",
    "AsyncEval",
    "EvaluationTimeout",
    "EvalCallback",
    "evaluate_policy",
    "StopTraining",
    "Logger",
    "read_model_file",
    "main",
    "__version__",
]

# The API follows (ARSPolicy and ARS), then the plumbing in the order data flows. Optional
# dependencies are imported where they are used.

import argparse
import ast
import contextlib
import copy
import csv
import importlib
import io
import json
import multiprocessing
import multiprocessing.connection
import os
import re
import signal
import stat
import tempfile
import threading
import time
import traceback
import types
import weakref
import zipfile
import zlib
from pathlib import Path

# == Shared helpers: optional imports, small checks and conversions used below ====================

Schedule = Callable[[float], float]  # a number as a function of the progress left, 1 to 0
SPACE_KEYS = ("observation_space", "action_space")
BUILT_WITH = ("policy_kwargs", "zero_policy")  # settings read only when a policy is built


def _folder(name: str, value: Any) -> Any:
    """The rule of a folder or None."""
    if not isinstance(value, (str, os.PathLike, type(None))):
        raise ValueError(f"{name} must be a folder or None; got {value!r:.100}")
    return value


def _device(name: str, value: Any) -> Any:
    """The rule of a device: a name such as 'cpu' or a torch.device (ars computes on the CPU)."""
    if not isinstance(getattr(value, "type", value), str):
        raise ValueError(f"{name} must be a name such as 'cpu' or a torch.device; got {value!r}")
    return value


# ARS()'s settings: the core's table and SB3's own, each a name of ``model.hparams`` and an
# attribute (``model.n_delta``); the policy is ARS()'s first argument, the budget learn()'s.
MODEL_SETTINGS = dict(
    SETTINGS,
    normalization_samples=Setting(0, ("int", 0, 10**12), "V2: first, stats of this many steps"),
    stats_window_size=Setting(100, ("int", 1, 10**7), "episodes in rollout/ep_rew_mean"),
    tensorboard_log=Setting(None, _folder, "a folder for progress.csv (and TensorBoard's files)"),
    verbose=Setting(0, ("int", 0, 2), "1: print the log"),
    device=Setting("cpu", _device, "as SB3's (ars computes with NumPy, on the CPU)"),
)
HPARAMS = tuple(k for k in MODEL_SETTINGS if k not in ("policy", "total_timesteps"))


def require(module: str, install: str) -> Any:
    """Import an optional dependency, or fail with the command that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ModuleNotFoundError(f"this feature needs {module}: {install}") from error


def _is_number(value: Any) -> bool:
    """A file's number: an int or float that check_number takes (finite, a bool not)."""
    try:
        check_number("", value)
    except ValueError:
        return False
    return isinstance(value, (int, float))


def _is_count(value: Any, high: int = 2**63 - 1) -> bool:
    """A whole number from 0 to ``high`` (a file's counter or size)."""
    return is_int(value) and 0 <= value <= high


def _one_line(error: BaseException) -> str:
    """``Type: message`` on one line, for errors that cross a process boundary."""
    return f"{type(error).__name__}: {' '.join(str(error).split())[:300]}"


@contextlib.contextmanager
def atomic_file(path: Path, mode: str) -> Any:
    """Write ``path`` through a temporary file (``.name``) and a rename: never half a file."""
    path = Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        prefix = f".{path.name.encode()[:200].decode(errors='ignore')}."  # <= 255 bytes
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=prefix, suffix=".tmp")
        os.close(fd)
        with open(tmp, mode, **({} if "b" in mode else {"newline": ""})) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)  # read it (only set can read it): what a new file gets
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException as error:  # nothing left behind
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        if isinstance(error, OSError) and not str(error).startswith("could not write"):
            raise OSError(error.errno, f"could not write {path}: {error.strerror}") from error
        raise


def _spaces_of(holder: Any) -> tuple[spaces.Space, spaces.Space]:
    return holder.observation_space, holder.action_space


def _check_same_spaces(found, expected, what="the policy", built_for="the model") -> None:
    if found != expected:
        raise ValueError(
            f"{what} has observation space {found[0]} and action space {found[1]}, "
            f"but {built_for} was built for {expected[0]} and {expected[1]}"
        )


def _check_device(device: Any, given: bool = True) -> None:
    """A device by the settings' rule; a GPU falls back to the CPU, as SB3's, with a warning
    where the device is ``given``, not again where the settings are checked later."""
    kind = getattr(check_setting("device", device, table=MODEL_SETTINGS), "type", device)
    if given and kind.split(":")[0] not in ("cpu", "auto"):
        warn(f"device={device!r}: ars computes with NumPy: it uses the CPU")


def check_state(given: dict[str, Any], expected: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Weights and V2's statistics by name (sb3-contrib's, or ``parameters``), as NumPy
    arrays, each of its ``expected`` shape, real and finite; ``obs_rms.var`` >= 0 and
    ``obs_rms.count`` whole and >= 0: the one check of what a policy holds, set, saved or read."""
    checked = {}
    for key, value in given.items():
        value = _as_array(value, None)
        if value.shape != expected[key].shape:
            raise ValueError(f"{key!r} has shape {value.shape}; expected {expected[key].shape}")
        if value.dtype.kind not in "fiu" or not _finite(value):
            raise ValueError(f"{key!r} must be real numbers, no nan or inf; got {value.dtype}")
        checked[key] = value
    count = checked.get("obs_rms.count", 0)
    if np.any(checked.get("obs_rms.var", 0) < 0) or count < 0 or count % 1:
        raise ValueError("obs_rms.var must be >= 0, and obs_rms.count a whole number >= 0")
    return checked


def _is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "detach")


def _finite(x: np.ndarray) -> bool:
    """Whether every entry is finite, checked 262,144 at a time: no copy of a large array."""
    flat = x.reshape(-1)
    return all(np.isfinite(flat[i : i + 2**18]).all() for i in range(0, flat.size, 2**18))


def _as_array(x: Any, dtype: Any = np.float64) -> np.ndarray:
    """A NumPy array from an array-like or a CPU torch tensor (torch is never imported)."""
    if _is_torch(x) and x.device.type != "cpu":
        raise ValueError(f"got a torch tensor on {x.device}; move it to the CPU (tensor.cpu())")
    return np.asarray(x.detach().numpy() if _is_torch(x) else x, dtype=dtype)


def _same_kind_as(reference: Any, array: Any) -> Any:
    """``array`` as a torch tensor where ``reference`` is one: torch in, torch out."""
    return sys.modules["torch"].as_tensor(np.asarray(array)) if _is_torch(reference) else array


def _cpu_device() -> Any:
    torch = sys.modules.get("torch")
    return torch.device("cpu") if torch is not None and hasattr(torch, "device") else "cpu"


def forward_layers(layers: list, activation: Callable, h: np.ndarray) -> np.ndarray:
    """The network's outputs for inputs ``h`` of shape ``(..., inputs)``, each layer's weight
    ``(..., outputs, inputs)`` broadcast against them (a population's, or envs' side by side):
    np.matmul on stacked layers gives the actor's np.dot bits, row by row."""
    for i, (weight, bias) in enumerate(layers):
        h = np.matmul(weight, h[..., None])[..., 0]
        h = h if bias is None else h + bias
        h = activation(h) if i < len(layers) - 1 else h
    return h


def policy_of(policy: Any) -> Any:
    """The ARSPolicy of an ARS model, or the policy itself (None stays None); duck-typed."""
    policy = policy if hasattr(policy, "layers") else getattr(policy, "policy", policy)
    if policy is not None and not hasattr(policy, "parameters_to_vector"):
        raise TypeError(f"expected an ARSPolicy or an ARS model; got {type(policy).__name__}")
    return policy


# == The API: ARSPolicy and ARS, as lit_sb3 and Stable-Baselines3 shape them =======================
# Then the paper's settings per env (paper_model). Built on the plumbing that follows, in the
# order data flows: envs and SB3's VecEnvs, evaluators, logging and callbacks, files, torch
# interop; then the command line.


class ARSPolicy(Network):
    """A deterministic MLP policy that holds its flat parameters and V2's statistics.

    A :class:`Network` with lit_sb3's and SB3's policy API: ``predict``, ``forward`` on
    batches and populations (NumPy or torch in, the same out), ``parameters_to_vector``,
    ``state_dict`` (sb3-contrib's names), ``save`` and ``load``. Observations:
    Box of any shape, Discrete, MultiDiscrete, MultiBinary (flattened). Actions: Box or
    Discrete. ``net_arch``: hidden sizes (``[64, 64]``; ``[]``: linear); ``activation_fn``:
    ``"relu"``, ``"tanh"``, ``"sigmoid"``, ``"identity"`` or torch's class (``nn.ReLU``);
    ``squash_output``: Box actions tanh-rescaled to the bounds (True) or clipped.

    >>> env = gym.make("Pendulum-v1")
    >>> policy = ARSPolicy(env.observation_space, env.action_space, net_arch=[16])
    >>> policy.predict(env.reset(seed=0)[0])[0].shape
    (1,)
    """

    policy_name = "MlpPolicy"  # its name in POLICIES, in files and on the command line

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        net_arch: Sequence[int] | None = None,
        activation_fn: Any = "relu",
        with_bias: bool = True,
        squash_output: bool = True,
    ):
        options = dict(net_arch=net_arch, activation_fn=activation_fn, with_bias=with_bias)
        options.update(squash_output=squash_output)  # net_arch None: the default's, as SB3
        self._build(observation_space, action_space, options)

    def _build(self, observation_space: Space, action_space: Space, options: dict) -> None:
        check_spaces(observation_space, action_space)
        super().__init__(observation_space, action_space, self.policy_name, options)
        self._theta = np.zeros(self.n_params)
        self.obs_rms = None  # V2's statistics
        self.vec_normalize = None  # the SB3 VecNormalize (or a file's copy) it learned through

    def config(self) -> dict[str, Any]:
        """The constructor's arguments beyond the spaces, as plain data."""
        return {key: getattr(self, key) for key in POLICIES[self.policy_name]}

    def network(self) -> Network:
        """The structure alone, for evaluators (an Iteration carries the parameters)."""
        return Network(self.observation_space, self.action_space, self.policy_name, self.config())

    def parameters_to_vector(self) -> np.ndarray:
        """A copy of the flat parameter vector (layer by layer: weight row-major, then bias)."""
        return self._theta.copy()

    def load_from_vector(self, vector: Any) -> None:
        """Set the parameters from a flat vector (NumPy array, list or CPU torch tensor)."""
        vector = check_state({"parameters": vector}, {"parameters": self._theta})["parameters"]
        self._theta = vector.astype(np.float64)

    def forward(self, obs: Any, theta: Any = None) -> Any:
        """Actions for one observation or a batch, for the policy's parameters or a population.

        ``obs``: ``(*obs_shape)`` or ``(B, *obs_shape)``; with ``P`` parameter vectors
        (``theta`` of shape ``(P, n_params)``), ``(P, *obs_shape)`` or ``(P, B, *obs_shape)``.
        A torch tensor in gives a torch tensor out."""
        theta = self._theta if theta is None else _as_array(theta)
        x = _as_array(obs, None)
        shape = self.observation_space.shape
        n_lead = x.ndim - len(shape)
        population = theta.ndim == 2
        if n_lead < 0 or x.shape[n_lead:] != shape:
            raise ValueError(f"expected observations of shape {shape} or (B, *{shape}): {x.shape}")
        if population and (n_lead == 0 or x.shape[0] != len(theta)):
            raise ValueError(f"{len(theta)} parameter vectors need {len(theta)} observations")
        h = flattener(self.observation_space)(x).astype(np.float64)
        h = h[:, None, :] if population and n_lead == 1 else h  # one observation per vector
        layers = self.layers(theta, self.obs_rms)
        if population:  # each vector's layers against its own batch of observations
            layers = [(w[:, None], b if b is None else b[:, None]) for w, b in layers]
        h = forward_layers(layers, ACTIVATIONS[self.activation_fn], h)
        actions = self.to_action()(h)
        return _same_kind_as(obs, actions[:, 0] if population and n_lead == 1 else actions)

    __call__ = forward  # as torch policies: policy(obs)

    def predict(
        self,
        observation: Any,
        state: Any = None,
        episode_start: Any = None,
        deterministic: bool = True,
    ) -> tuple[Any, Any]:
        """``(action, state)`` for one observation or a batch, in the action space's dtype, as
        SB3's. ARS policies are deterministic and stateless: ``deterministic`` and
        ``episode_start`` change nothing (the README's table), and ``state`` comes back as given."""
        actions = self.forward(observation)
        dtype = self.action_space.dtype
        if _is_torch(actions):
            return actions.to(getattr(sys.modules["torch"], str(np.dtype(dtype)))), state
        return np.asarray(actions).astype(dtype, copy=False), state

    @property
    def device(self) -> Any:
        """Always the CPU: ARS computes in NumPy."""
        return _cpu_device()

    def to(self, device: Any) -> ARSPolicy:
        """``self``, as torch's ``module.to(device)``: ars computes on the CPU (see ``device``)."""
        _check_device(device)
        return self

    def _named(self, theta: np.ndarray, rms: Any = None) -> dict[str, np.ndarray]:
        """``theta``'s layers (views) and ``rms``'s moments under sb3-contrib's names."""
        named = {}
        for i, (weight, bias) in enumerate(self.layers(theta)):
            named[f"action_net.{2 * i}.weight"] = weight
            named.update({} if bias is None else {f"action_net.{2 * i}.bias": bias})
        if rms is not None:
            named.update({"obs_rms.mean": rms.mean, "obs_rms.var": rms.var})
            named["obs_rms.count"] = np.array(rms.count)
        return named

    def shapes(self) -> dict[str, np.ndarray]:
        """Arrays of the shapes :meth:`state_dict` holds (V2's statistics: one per input)."""
        rms = None if self.obs_rms is None else RunningMeanStd((self.obs_dim,))
        return self._named(self._theta, rms)

    def state_dict(self) -> dict[str, np.ndarray]:
        """Parameters under sb3-contrib's names (``action_net.0.weight``...), V2's ``obs_rms.*``."""
        return {k: np.array(v) for k, v in self._named(self._theta, self.obs_rms).items()}

    def load_state_dict(self, state_dict: dict[str, Any], strict: bool = True) -> None:
        """Set parameters by :meth:`state_dict`'s names (NumPy or torch): all checked, then set.
        Large weights are checked a million at a time and copied once, into the new vector."""
        # sb3-contrib before 1.7 named the linear layer without its index: both names are read
        old = {"action_net.weight": "action_net.0.weight", "action_net.bias": "action_net.0.bias"}
        given = {old.get(k, k): v for k, v in state_dict.items()}
        rms = self.obs_rms
        expected = self.shapes()
        unknown = sorted(set(given) - set(expected))
        missing = sorted(set(expected) - set(given))
        if unknown or (strict and missing):  # RuntimeError: torch's load_state_dict, as SB3
            raise RuntimeError(
                f"parameters do not match the policy: unknown {unknown}, missing "
                f"{missing if strict else []}; expected {sorted(expected)}"
            )
        merged = {**self._named(self._theta, rms), **check_state(given, expected)}
        count = merged.get("obs_rms.count", 0)
        theta = np.empty(self.n_params)
        for key, layer in self._named(theta).items():  # views of theta: each written in place
            layer[...] = merged[key]
        self._theta = theta
        if rms is not None:
            mean, var = (merged[f"obs_rms.{k}"].astype(np.float64) for k in ("mean", "var"))
            self.obs_rms = RunningMeanStd.from_moments(mean, var, int(count))

    def to_torch(self) -> Any:
        """This policy as a ``torch.nn.Module`` with the same actions (:class:`TorchPolicy`)."""
        return _torch_policy_class()(self)

    def save(self, path: str | os.PathLike | io.IOBase) -> None:
        """Write the policy alone (spaces, options, parameters, statistics) as plain data."""
        _write_npz(path, _arrays(self, _metadata(self, "policy")))

    @classmethod
    def load(cls, path: str | os.PathLike | io.IOBase, device: Any = "auto") -> ARSPolicy:
        """A policy of :meth:`save`, or a saved model's (``device``: checked, as ``to``'s)."""
        _check_device(device)
        return _build_policy(*read_model_file(path), str(path))


class ARSLinearPolicy(ARSPolicy):
    """The paper's linear policy ``a = M x`` (V2: ``a = M diag(var)^-1/2 (x - mean)``):
    an :class:`ARSPolicy` with no hidden layer, no bias and clipped actions by default."""

    policy_name = "LinearPolicy"  # its name in POLICIES, in files and on the command line

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        with_bias: bool = False,
        squash_output: bool = False,
    ):
        self._build(
            observation_space, action_space, dict(with_bias=with_bias, squash_output=squash_output)
        )


MlpPolicy = ARSPolicy  # sb3-contrib's names for the two
LinearPolicy = ARSLinearPolicy
POLICY_CLASSES = {"LinearPolicy": ARSLinearPolicy, "MlpPolicy": ARSPolicy}


def check_model_settings(policy: Any, settings: dict[str, Any], given: bool = True) -> dict:
    """:func:`check_settings` for ``ARS``'s settings (``policy_kwargs`` by the policy class's
    ``policy_name``) by MODEL_SETTINGS; a GPU device warns where the settings are ``given``
    (the user's now), not where they are checked again."""
    cls = policy if isinstance(policy, type) else type(policy)
    if not (isinstance(policy, str) or issubclass(cls, ARSPolicy)):
        raise ValueError(f"policy must be one of {list(POLICIES)} or an ARSPolicy: {policy!r:.40}")
    if isinstance(policy, ARSPolicy) and settings.get("policy_kwargs"):
        raise ValueError("policy_kwargs shape a policy ars builds; this instance is built")
    unknown = sorted(set(settings) - set(HPARAMS))  # the policy is ARS()'s first argument
    if unknown:
        raise TypeError(f"unknown settings {unknown}; the settings are {list(HPARAMS)}")
    name = getattr(policy, "policy_name", policy)
    hp = check_settings({"policy": name, **settings}, MODEL_SETTINGS)
    del hp["policy"]
    hp["policy_kwargs"] = copy.deepcopy(hp["policy_kwargs"])  # the user's dict may change later
    _check_device(hp["device"], given)
    if hp["normalization_samples"] and not hp["normalize_obs"]:  # V1 keeps no statistics
        raise ValueError("normalization_samples needs normalize_obs=True (V2's statistics)")
    return hp


def check_learn_arguments(
    total_timesteps: Any, callback: Any, evaluator: Any, counts: dict, switches: dict
) -> None:
    """``learn``'s arguments, checked before anything runs (``counts``: the intervals by name;
    ``switches``: the booleans); one given in lit_sb3's order (``learn(total, env,
    callback)``) is refused with the keyword to use."""
    if isinstance(callback, (str, gym.Env)) or _is_vec_env(callback):
        raise TypeError(
            f"callback must be a function, an SB3 callback or a list of them; got "
            f"the env {callback!r:.60} (learn takes it by keyword: env=...)"
        )
    if callable(counts["log_interval"]):
        raise TypeError("log_interval got a function: pass it second, or as callback=...")
    check_setting("total_timesteps", total_timesteps)
    for name, value in counts.items():
        if not (value is None or is_int(value) and value >= 1):
            raise ValueError(f"{name} must be an integer >= 1 or None; got {value!r:.60}")
    for name, value in switches.items():
        check_switch(name, value)
    sb3_contrib_async = all(hasattr(evaluator, k) for k in ("send_jobs", "get_results", "seed"))
    if not (evaluator is None or hasattr(evaluator, "evaluate") or sb3_contrib_async):
        raise TypeError(
            f"async_eval must be an AsyncEval or ExecutorEval (or sb3-contrib's AsyncEval); "
            f"got {evaluator!r:.60}"
        )


def match_normalization(policy: ARSPolicy, normalize_obs: bool) -> None:
    """V2 gives a V1 policy fresh statistics; V1 refuses a policy that normalises."""
    if normalize_obs and policy.obs_rms is None:
        policy.obs_rms = RunningMeanStd((policy.obs_dim,))
    if not normalize_obs and policy.obs_rms is not None:
        raise ValueError(
            "normalize_obs is False, but the policy normalises observations "
            "(V2): set normalize_obs=True, or start from a V1 policy"
        )


class Hparams(dict):
    """``model.hparams``: lit_sb3's open dict of the settings, each change checked when it is
    made, as ``ARS()`` checks (``model.hparams["n_delta"] = 4`` is ``model.n_delta = 4``), so
    that no use checks again. Settings are never removed; a copy or a pickle is a plain dict."""

    def __init__(self, model: ARS, settings: dict[str, Any]):
        super().__init__(settings)
        self._model = model

    def __setitem__(self, name: str, value: Any) -> None:
        self.update({name: value})

    def update(self, *args: Any, **changes: Any) -> None:
        """Check the settings with these changes as one, then keep them."""
        changed = {**self, **dict(*args, **changes)}
        super().update(self.checked(changed))

    def checked(self, hparams: dict[str, Any]) -> dict[str, Any]:
        """``hparams`` as ``ARS()`` checks them, for this model: the settings a built policy
        holds cannot change; a new window keeps the newest episodes."""
        model = self._model
        hp = check_model_settings(model.policy_class, hparams, given=False)
        for name in BUILT_WITH:  # once the policy is built, these have shaped it
            if model.policy is not None and hp[name] != self[name]:
                raise ValueError(f"{name} shapes a policy when it is built: pass it to ARS(...)")
        if model.policy is not None:  # as set: V2 from here, or refused
            match_normalization(model.policy, hp["normalize_obs"])
        if hp["stats_window_size"] != model.ep_info_buffer.maxlen:  # the newest episodes kept
            window = collections.deque(model.ep_info_buffer, hp["stats_window_size"])
            model.ep_info_buffer = window
        return hp

    def setdefault(self, name: str, value: Any = None) -> Any:
        """``dict.setdefault``, the value checked as any other change."""
        if name not in self:
            self[name] = value
        return self[name]

    def __ior__(self, changes: Any) -> Hparams:
        self.update(changes)
        return self

    def _refuse(self, *args: Any) -> None:
        raise TypeError("a model's settings are never removed: set them to other values")

    __delitem__ = _refuse
    pop = _refuse
    popitem = _refuse
    clear = _refuse

    def __reduce__(self) -> tuple:
        return dict, (dict(self),)


class ARS:
    """Augmented Random Search (Mania, Guy & Recht 2018, Algorithm 2), as SB3 shapes it.

    ``learn`` runs the core's :func:`iteration` with callbacks, logging and checkpoints
    around it; the same seed and settings give the bits of :func:`train`. After ``env``,
    arguments are keyword-only: one in another API's order is refused, naming the keyword.

    Parameters
    ----------
    policy : str, ARSPolicy class or instance
        ``"LinearPolicy"`` (the paper's) or ``"MlpPolicy"``; an instance brings its spaces
        (and, as lit_sb3's, ``zero_policy`` zeroes its weights, in place).
    env : str, gymnasium.Env, vector env or callable, optional
        An id, an env, an SB3 or gymnasium vector env (its ``n_envs`` envs run rollouts side
        by side), or a function returning one; else given at ``learn(..., env=...)``.
    env_kwargs : dict, optional
        An id's keyword arguments, as ``gym.make(id, **env_kwargs)`` takes them; the model
        keeps those of its env (``model.env_kwargs``), and its files, to make it again.

    The others are the settings of ``MODEL_SETTINGS`` (the core's table and SB3's five), where
    each has its default, its rule and a line of help. ``learning_rate`` and ``delta_std`` also
    take schedules ``f(progress_remaining)``, from 1 to 0. ``seed`` gives bit-identical weights
    whatever runs the rollouts (None: drawn from NumPy's global generator, which SB3's
    ``set_random_seed`` seeds). ARS computes on the CPU, whatever the ``device``.

    >>> model = ARS("LinearPolicy", "Pendulum-v1", n_delta=4, n_top=1, normalize_obs=True)
    >>> model = model.learn(2_000)
    >>> model.save("pendulum.zip"); model = ARS.load("pendulum")
    """

    def __init__(
        self,
        policy: str | type[ARSPolicy] | ARSPolicy,
        env: Any = None,
        *,
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
        env_kwargs: dict[str, Any] | None = None,
    ):
        if _is_number(env):  # lit_sb3's ARS(policy, n_delta, ...)
            raise TypeError(
                f"env must be an env id, a gymnasium.Env, an SB3 VecEnv or a function "
                f"returning one; got {env!r} (ARS takes its settings by keyword: "
                f"{'n_delta' if is_int(env) else 'learning_rate'}={env!r})"
            )
        settings = dict(
            n_delta=n_delta,
            n_top=n_top,
            learning_rate=learning_rate,
            delta_std=delta_std,
            zero_policy=zero_policy,
            alive_bonus_offset=alive_bonus_offset,
            n_eval_episodes=n_eval_episodes,
            policy_kwargs=policy_kwargs,
            stats_window_size=stats_window_size,
            tensorboard_log=tensorboard_log,
            seed=seed,
            verbose=verbose,
            device=device,
            normalize_obs=normalize_obs,
            common_random_numbers=common_random_numbers,
            normalization_samples=normalization_samples,
            max_episode_steps=max_episode_steps,
        )
        self.hparams = Hparams(self, check_model_settings(policy, settings))
        self.hparams_initial = types.MappingProxyType(copy.deepcopy(dict(self.hparams)))
        self.policy_class = policy
        self.policy = None
        self._logger = None
        self.num_timesteps = 0
        self.n_updates = 0
        self._total_timesteps = 0
        self._current_progress_remaining = 1.0
        self.ep_info_buffer: collections.deque = collections.deque(maxlen=self.stats_window_size)
        self.gym_env = None
        self.env_id = None
        self.env_kwargs = {}
        self._vec_env = None
        self._vec_normalize = None
        self.observation_space = None
        self.action_space = None
        if isinstance(policy, ARSPolicy):  # an instance brings its spaces
            self.observation_space, self.action_space = _spaces_of(policy)
        if env is not None or env_kwargs:
            self.set_env(env, env_kwargs=env_kwargs)
        if _init_setup_model and self.observation_space is not None:
            self._setup_model()

    def __getattr__(self, name: str) -> Any:
        """The settings, as SB3 has them: ``model.n_delta`` is ``model.hparams["n_delta"]``."""
        hparams = self.__dict__.get("hparams", {})
        if name in hparams:
            return hparams[name]
        raise AttributeError(f"'ARS' object has no attribute {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        if name in HPARAMS and "hparams" in self.__dict__:  # checked as the constructor's
            if name == "device":  # a GPU warns where it is given
                _check_device(value)
            self.hparams[name] = value
        elif name == "hparams" and "hparams" in self.__dict__:  # lit_sb3's dict, given anew:
            if not isinstance(value, dict):
                raise TypeError(f"hparams must be a dict of settings; got {value!r:.60}")
            self.hparams.update(value)  # the settings it names change, checked as one
        else:
            object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        if name in HPARAMS or name == "hparams":
            raise TypeError(f"a model's settings are never removed: set {name} to another value")
        object.__delattr__(self, name)

    def __getstate__(self) -> dict[str, Any]:
        """For ``copy`` and ``pickle``: the settings and ``hparams_initial`` go as dicts (a
        mappingproxy cannot), and come back as they were."""
        initial = dict(self.hparams_initial)
        return {**self.__dict__, "hparams": dict(self.hparams), "hparams_initial": initial}

    def __setstate__(self, state: dict[str, Any]) -> None:
        initial = types.MappingProxyType(state["hparams_initial"])
        self.__dict__.update(state, hparams_initial=initial)
        self.__dict__["hparams"] = Hparams(self, state["hparams"])

    def _setup_model(self) -> None:
        policy = self.policy_class
        cls = POLICY_CLASSES.get(self.policy_class, self.policy_class)
        if not isinstance(policy, ARSPolicy):  # a name or a class, checked by the settings'
            options = self.policy_kwargs or {}
            policy_options(cls.policy_name, options)  # the dict may have been edited in place
            policy = cls(self.observation_space, self.action_space, **options)
        match_normalization(policy, self.normalize_obs)
        if self.zero_policy or policy is not self.policy_class:  # else an instance keeps its own
            policy._theta = initial_parameters(policy, self.zero_policy, self.seed)
        if getattr(self._vec_normalize, "norm_obs", False):
            policy.vec_normalize = self._vec_normalize
        self.policy = policy

    def _need_policy(self) -> ARSPolicy:
        if self.policy is None:
            raise ValueError("the model has no policy yet: give it an env, or learn(..., env=...)")
        return self.policy

    def set_env(self, env: Any, force_reset: bool = True, env_kwargs: Any = None) -> None:
        """Train on ``env`` (id, env, vector env or function) of the model's spaces; an id is
        made with ``env_kwargs``. The model keeps the id and the kwargs that remake it."""
        if isinstance(env, str):  # the model's own env id: its own kwargs, and those given
            env_kwargs = env_kwargs_for(env, env_kwargs, self.env_id, self.env_kwargs)
        parts = resolve_env(env, env_kwargs)  # its spaces: checked by the policy
        gym_env = parts.gym_env
        if self.observation_space is not None:
            _check_same_spaces(_spaces_of(gym_env), _spaces_of(self), "the env")
        self.observation_space, self.action_space = _spaces_of(gym_env)
        self.gym_env = gym_env
        self._vec_env = parts.vec_env
        self._vec_normalize = parts.vec_normalize
        spec_id = getattr(gym_env.spec, "id", self.env_id)
        given = isinstance(env, str) and env.endswith(f":{spec_id}")  # module:Id: the module too
        self.env_id = env if given else spec_id
        self.env_kwargs = env_kwargs if isinstance(env, str) else recorded_kwargs(gym_env)
        _check_vec_normalize(self)
        if self.policy is not None and getattr(parts.vec_normalize, "norm_obs", False):
            self.policy.vec_normalize = parts.vec_normalize  # what it learns through from now on

    # -- training -------------------------------------------------------------------------------
    def learn(
        self,
        total_timesteps: int,
        callback: Any = None,
        log_interval: int | None = 1,
        tb_log_name: str = "ARS",
        reset_num_timesteps: bool = True,
        async_eval: Any = None,
        progress_bar: bool = False,
        *,
        env: Any = None,
        log_every_n_steps: int | None = None,
        default_root_dir: str | os.PathLike | None = None,
        checkpoint_interval: int | None = None,
    ) -> ARS:
        """Train for ``total_timesteps`` env steps (the last iteration may overshoot); returns
        ``self``. The arguments are SB3's, then lit_sb3's (keyword only):

        - ``callback``: an SB3 callback (called after every env step), a function ``f(locals,
          globals)`` or :class:`EvalCallback` (after every iteration), or a list; False stops.
        - ``log_interval`` (lit_sb3: ``log_every_n_steps``): log every this many iterations,
          printed with ``verbose=1``, to ``tb_log_name`` under ``tensorboard_log``.
        - ``reset_num_timesteps=False`` continues the step count and the schedules.
        - ``async_eval``: :class:`AsyncEval` or an ExecutorEval runs the rollouts (never
          closed here); sb3-contrib's is accepted, and its rollouts run in this process, as
          its workers cannot seed each episode. ``progress_bar`` needs ``pip install tqdm``.
        - ``env``: an env to (re)train on; ``default_root_dir``: a log folder used as it is.
        - ``checkpoint_interval``: write ``checkpoint.npz`` there every this many iterations
          and at the end, with the callbacks' state; ``ARS.load`` it and ``learn(total -
          model.num_timesteps, reset_num_timesteps=False)`` to resume exactly."""
        counts = dict(log_interval=log_interval, log_every_n_steps=log_every_n_steps)
        counts["checkpoint_interval"] = checkpoint_interval
        switches = dict(reset_num_timesteps=reset_num_timesteps, progress_bar=progress_bar)
        check_learn_arguments(total_timesteps, callback, async_eval, counts, switches)
        custom = getattr(self, "_custom_logger", False)  # the user's, from set_logger
        folder = log_folder(
            default_root_dir, self.tensorboard_log, tb_log_name, reset_num_timesteps
        )
        folder = self.logger.dir if custom else folder
        if checkpoint_interval and folder is None:  # refused before anything changes
            raise ValueError("checkpoint_interval needs default_root_dir or tensorboard_log")
        self._prepare_to_learn(env, async_eval)
        evaluator = evaluator_for(async_eval, self.gym_env)
        if reset_num_timesteps:
            self.num_timesteps = 0
            self.ep_info_buffer.clear()
        self._total_timesteps = math.ceil(total_timesteps) + self.num_timesteps  # as train()
        log_interval = log_interval if log_every_n_steps is None else log_every_n_steps
        if not custom:
            self._logger = Logger(self.verbose, folder, self.tensorboard_log is not None)
        checkpoint = Path(folder) / "checkpoint.npz" if checkpoint_interval else None
        callbacks = _Callbacks(callback, self, progress_bar)
        self._start_time = time.perf_counter()
        self._start_steps = self.num_timesteps
        if self.normalization_samples and getattr(self.policy.obs_rms, "count", 1) == 0:
            self.num_timesteps += warm_up_statistics(self.policy, evaluator, self.hparams)
        if checkpoint and self.n_updates == 0:  # a run killed early can resume too
            self.save(checkpoint, callbacks=callbacks)
        start = dict(self=self, callback=callback, tb_log_name=tb_log_name, **counts, **switches)
        start["total_timesteps"] = self._total_timesteps  # SB3's: the absolute target
        callbacks.hook("on_training_start", start, globals())
        self._iterate(evaluator, callbacks, log_interval, checkpoint, checkpoint_interval)
        callbacks.hook("on_training_end")
        return self

    def _prepare_to_learn(self, env: Any, async_eval: Any) -> None:
        """The env, the settings and the policy, checked and built before anything runs; a
        loaded model without an env makes the one its file names, as ``--resume`` does."""
        if env is None and self.gym_env is None and not hasattr(async_eval, "evaluate"):
            env = self.env_id  # made with the model's own kwargs
        if env is not None:
            self.set_env(env)
        no_spaces = self.policy is None and self.observation_space is None
        no_rollouts = self.gym_env is None and not hasattr(async_eval, "evaluate")
        if no_spaces or no_rollouts:  # a loaded model has spaces, yet no env
            raise ValueError("no env to train on: pass env= to ARS(...) or to learn(...)")
        if self.policy is None:
            self._setup_model()
        match_normalization(self.policy, self.normalize_obs)  # a policy assigned since
        _check_vec_normalize(self)

    def _iterate(
        self, evaluator: Any, callbacks: _Callbacks, log_interval: Any, checkpoint: Any, every: Any
    ) -> None:
        """Iterations up to the total (or a stop), ``checkpoint`` written every ``every`` of them
        and at the end."""
        while self.num_timesteps < self._total_timesteps:
            self._current_progress_remaining = 1.0 - self.num_timesteps / self._total_timesteps
            if not self._iteration(evaluator, callbacks, log_interval):
                break
            if checkpoint and self.n_updates % every == 0:
                self.save(checkpoint, callbacks=callbacks)
        if checkpoint:
            self.save(checkpoint, callbacks=callbacks)

    def _iteration(self, evaluator: Any, callbacks: _Callbacks, log_interval: int | None) -> bool:
        """One iteration of the core, computed, then committed, then its callbacks and its log
        row. Ctrl+C, an error or a per-step callback's stop during the rollouts leaves the
        model as it was: nothing was committed. Returns False to stop training."""
        hp = {**self.hparams, **{k: self._schedule_value(k) for k in SCHEDULED}}
        policy = self.policy
        start = self.num_timesteps  # per-step callbacks see the steps counted as they come
        try:
            evaluate = rollouts(self, evaluator, callbacks)
            theta = policy.parameters_to_vector()
            network = policy.network()
            update = iteration(theta, policy.obs_rms, evaluate, network, self.n_updates, hp)
        except BaseException as error:
            self.num_timesteps = start  # the count of an update never committed
            if isinstance(error, StopTraining):
                return False
            raise
        self._commit(update, hp, start)
        try:
            keep_going = callbacks.on_iteration(dict(self=self, update=update, hp=hp))
        except StopTraining:  # raised by an iteration callback: the iteration stays
            keep_going = False
        if log_interval and self.n_updates % log_interval == 0:
            self.dump_logs()
        return keep_going

    def _commit(self, update: Update, hp: dict[str, Any], start: int) -> None:
        """What a kept iteration changes: weights, statistics, counters, episodes, log records."""
        self.policy.load_from_vector(update.theta)
        self.policy.obs_rms = update.obs_rms
        _update_vec_normalize(self._vec_normalize, [r.visited for r in update.results])
        self.num_timesteps = start + update.timesteps  # as on_step counted
        for r in update.results:
            episodes = zip(r.returns.tolist(), r.lengths.tolist())
            self.ep_info_buffer.extend({"r": x, "l": n} for x, n in episodes)
        self.logger.record("train/iterations", self.n_updates, exclude="tensorboard")
        self.n_updates += 1
        for key in ("delta_std", "learning_rate", "step_size", "sigma_r"):
            name = "rollout/return_std" if key == "sigma_r" else f"train/{key}"
            self.logger.record(name, float(hp[key] if key in hp else getattr(update, key)))

    def _schedule_value(self, name: str) -> float:
        return setting_at(self.hparams, name, self._current_progress_remaining)

    # -- the policy, and SB3's methods ----------------------------------------------------------
    def predict(self, observation: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        """``(action, state)``: :meth:`ARSPolicy.predict`, SB3's signature and shapes."""
        return self._need_policy().predict(observation, *args, **kwargs)

    def evaluate_candidates(
        self, candidate_weights: Any, callback: Any = None, async_eval: Any = None
    ) -> Any:
        """lit_sb3's: the shifted return of each row of ``candidate_weights`` (the mean over
        ``n_eval_episodes``), on the env seeds of this iteration's first candidates. An array
        (or torch tensor) in, the same kind out."""
        self._need_policy()
        evaluator = evaluator_for(async_eval, self.gym_env)
        return candidate_returns(self, candidate_weights, evaluator, _Callbacks(callback, self))

    def dump_logs(self) -> None:
        """Record the rollout and time statistics, and write the log row."""
        logger = self.logger
        episodes = self.ep_info_buffer
        if episodes:
            logger.record("rollout/ep_rew_mean", float(np.mean([e["r"] for e in episodes])))
            logger.record("rollout/ep_len_mean", float(np.mean([e["l"] for e in episodes])))
        elapsed = max(time.perf_counter() - self._start_time, 1e-9)
        logger.record("time/fps", int((self.num_timesteps - self._start_steps) / elapsed))
        logger.record("time/time_elapsed", int(elapsed), exclude="tensorboard")
        logger.record("time/total_timesteps", self.num_timesteps, exclude="tensorboard")
        logger.dump(self.num_timesteps)

    @property
    def logger(self) -> Any:
        """The logger ``learn`` writes to; before ``learn``, one without a folder for callbacks."""
        self._logger = Logger(self.verbose) if self._logger is None else self._logger
        return self._logger

    def set_logger(self, logger: Any) -> None:
        """Log to ``logger``: ars's :class:`Logger` or SB3's ``configure(folder, formats)``."""
        self._logger = logger
        self._custom_logger = True

    @property
    def env(self) -> Any:
        """The training env as an SB3 VecEnv (else SB3's DummyVecEnv around ``gym_env``)."""
        if self._vec_env is None and self.gym_env is not None:  # made once, until set_env
            vec_env = require("stable_baselines3.common.vec_env", "pip install stable-baselines3")
            self._vec_env = vec_env.DummyVecEnv([lambda env=self.gym_env: env])
        return self._vec_env

    @env.deleter
    def env(self) -> None:  # rl-baselines3-zoo's ``del model.env``: SB3's env is an attribute
        self.gym_env = None
        self._vec_env = None
        self._vec_normalize = None

    get_env = env.fget  # SB3's name; ``gym_env`` is the env itself

    @property
    def n_envs(self) -> int:
        """The envs side by side (1: a gymnasium env)."""
        return getattr(self.gym_env, "num_envs", 1)

    def get_vec_normalize_env(self) -> Any:
        """The SB3 VecNormalize the model trains through, or None (SB3's name)."""
        return self._vec_normalize

    def set_random_seed(self, seed: int | None = None) -> None:
        """Use ``seed`` from now on (directions and env seeds of later iterations); None, as
        in SB3, changes nothing."""
        if seed is None:
            return
        self.seed = seed
        if self.action_space is not None:
            self.action_space.seed(self.seed)

    @property
    def device(self) -> Any:
        """Always the CPU: ARS computes in NumPy (setting another is checked, and warns)."""
        return _cpu_device()

    def get_parameters(self) -> dict[str, dict[str, np.ndarray]]:
        """``{"policy": policy.state_dict()}``: sb3-contrib's names, NumPy arrays."""
        return {"policy": self._need_policy().state_dict()}

    def set_parameters(
        self, load_path_or_dict: Any, exact_match: bool = True, device: Any = "auto"
    ) -> None:
        """Load parameters from a model file or a :meth:`get_parameters` dict, all or nothing
        (``device``: checked as the constructor's; ars computes on the CPU)."""
        _check_device(device)
        policy = self._need_policy()
        state = policy_parameters(load_path_or_dict, self.gym_env)
        policy.load_state_dict(state, strict=exact_match)

    def save(
        self,
        path: Any,
        exclude: Sequence[str] | None = None,
        include: Sequence[str] | None = None,
        callbacks: Any = None,
    ) -> Path | None:
        """Write the model as plain arrays and JSON (an ``.npz``, itself a zip), atomically.

        A path without a suffix gets ``.zip``, as in SB3. ``exclude`` drops settings (they
        load as their defaults) or the episode window (``"ep_info_buffer"``); ``include``
        adds attributes with JSON values; a checkpoint adds the ``callbacks``' state."""
        self._need_policy()
        scheduled = {name: self._schedule_value(name) for name in SCHEDULED}
        return _write_npz(path, _model_contents(self, scheduled, exclude, include, callbacks))

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
        continues from it. ``kwargs`` override saved settings (``env_kwargs``: the file's env
        made with these); ``custom_objects`` replace the
        settings the file holds and are otherwise ignored, as in SB3 (rl-baselines3-zoo
        passes ``lr_schedule`` and ``clip_range`` to every algorithm). ``device`` falls back
        to the CPU as in the constructor; ``force_reset`` is accepted for SB3 compatibility
        (every rollout resets anyway)."""
        meta, state = read_model_file(path, env)
        if print_system_info:
            print("== saved with:", meta.get("system_info"), "\n== now:", _system_info())
        where = str(getattr(path, "name", path) if hasattr(path, "read") else path)
        settings = _custom_objects(meta, custom_objects or {})
        return model_from_file(meta, state, where, env, device=device, **{**settings, **kwargs})


# Table 9 of the paper, as kept by rl-baselines3-zoo (Humanoid: the paper's N = b = 230; the
# zoo's 256), and the zoo's CartPole and Pendulum. The shift is per step, cancelling the
# survival bonus; V2 normalises observations; the budget is the zoo's n_timesteps.
_PAPER_TABLE = {  # task: step size alpha, noise nu, directions N, top b, shift, V2, budget
    "Swimmer": (0.02, 0.01, 1, 1, 0, False, 2_000_000),
    "Hopper": (0.01, 0.025, 8, 4, -1, True, 7_000_000),
    "HalfCheetah": (0.02, 0.03, 32, 4, 0, True, 12_500_000),
    "Walker2d": (0.03, 0.025, 40, 30, -1, True, 75_000_000),
    "Ant": (0.015, 0.025, 60, 20, -1, True, 75_000_000),
    "Humanoid": (0.02, 0.0075, 230, 230, -5, True, 250_000_000),
    "CartPole": (0.02, 0.05, 2, 2, 0, False, 50_000),
    "Pendulum": (0.018, 0.1, 4, 1, 0, True, 2_000_000),
}
_COLUMNS = "learning_rate delta_std n_delta n_top alive_bonus_offset normalize_obs total_timesteps"
PAPER_SETTINGS = {task: dict(zip(_COLUMNS.split(), row)) for task, row in _PAPER_TABLE.items()}
PAPER_SETTINGS["Pendulum"].update(policy="MlpPolicy", net_arch=[16], zero_policy=False)
# For envs the paper did not run: the table's defaults, but V2 and nu = 0.03 (net_arch None:
# the policy's own). A preset sets these settings and no others.
PRESET_KEYS = [
    name for name in SETTINGS if name not in ("policy_kwargs", "max_episode_steps", "seed")
]
GENERIC_SETTINGS = {
    **{name: SETTINGS[name].default for name in PRESET_KEYS},
    **dict(net_arch=None, delta_std=0.03, normalize_obs=True),
}


# Tuned presets: where a study of examples/tune.py found settings that need fewer episodes than
# the paper's beyond chance (p < 0.05) and reach the threshold on as many seeds, measured by
# the paper's protocol on its seeds (benchmarks/results/tuned.md); the paper's elsewhere.
TUNED_SETTINGS = {"Swimmer": dict(learning_rate=0.058, delta_std=0.38, n_delta=3, n_top=1)}
PRESETS = ("tuned", "paper")


def settings_for(env_id: str, preset: str = "tuned") -> dict[str, Any]:
    """The settings for ``env_id`` (any version) that the command line takes by default: a
    tuned preset's where one beat the paper's (TUNED_SETTINGS), else the paper's, else generic
    ones; with ``preset="paper"``, the paper's (or rl-baselines3-zoo's) everywhere.

    >>> settings_for("Swimmer-v4")["n_delta"], settings_for("Swimmer-v4", "paper")["n_delta"]
    (3, 1)
    >>> settings_for("Hopper-v5")["n_delta"]
    8
    """
    if not isinstance(env_id, str):
        raise TypeError(f"env_id must be an env id such as 'Hopper-v4'; got {env_id!r:.60}")
    task = env_id.split("/")[-1].rsplit("-v", 1)[0]
    if preset not in PRESETS:
        raise ValueError(f"preset must be one of {list(PRESETS)}; got {preset!r:.60}")
    tuned = TUNED_SETTINGS.get(task, {}) if preset == "tuned" else {}
    return {**GENERIC_SETTINGS, **PAPER_SETTINGS.get(task, {}), **tuned}


def paper_model(env_id: str, env: Any = None, **overrides: Any) -> ARS:
    """An :class:`ARS` with the paper's hyper-parameters for ``env_id`` (:func:`settings_for`).

    ``overrides`` replace any setting (``n_delta=16``, ``net_arch=[32]``, ...) or pass other
    ``ARS`` arguments (``seed``, ``verbose``, ...). ``env`` defaults to ``env_id``.

    >>> model = paper_model("Hopper-v4", seed=237)  # alpha=0.01, nu=0.025, N=8, b=4, shift -1, V2
    """
    config = {**settings_for(env_id, "paper"), **overrides}
    net_arch = config.pop("net_arch")  # given, or the preset's ([]: an MLP of no hidden layer)
    del config["total_timesteps"]  # learn()'s argument
    options = dict(config.get("policy_kwargs") or {})
    if net_arch is not None and "net_arch" in overrides:  # given: it shapes the policy
        options["net_arch"] = net_arch
    elif net_arch is not None and config["policy"] == "MlpPolicy":  # the preset's MLP's
        options.setdefault("net_arch", net_arch)
    config["policy_kwargs"] = options or None
    return ARS(config.pop("policy"), env=env if env is not None else env_id, **config)


def __getattr__(name: str) -> Any:
    """``TorchPolicy``, made when first asked for: torch is imported then, and only then."""
    if name == "TorchPolicy":
        return _torch_policy_class()
    raise AttributeError(f"module 'ars' has no attribute {name!r}")


# == Envs: ids, functions, vector envs, and SB3's VecEnvs and VecNormalize ========================
# Duck-typed: SB3 is never imported here unless the user's objects come from it.


def _is_vec_env(env: Any) -> bool:
    return isinstance(env, gym.vector.VectorEnv) or all(
        hasattr(env, name) for name in ("num_envs", "step_async", "step_wait", "env_method")
    )


def make_env(env: Any, env_kwargs: dict[str, Any] | None = None) -> gym.Env | VecEnvs:
    """The env (or :class:`VecEnvs`) of an id (made with ``env_kwargs``, as ``gym.make(id,
    **env_kwargs)``), env, vector env or function: :func:`resolve_env`."""
    return resolve_env(env, env_kwargs).gym_env


def check_env_kwargs(env_kwargs: Any, name: str = "env_kwargs") -> dict[str, Any]:
    """``env_kwargs`` (None: none) as a dict that JSON keeps as it is, so that a run's config
    and a model's file make the same env again; else a ValueError naming ``name``."""
    env_kwargs = {} if env_kwargs is None else env_kwargs
    try:
        text = json.dumps(env_kwargs, allow_nan=False)
        kept = isinstance(env_kwargs, dict) and json.loads(text) == env_kwargs
    except (TypeError, ValueError, RecursionError):  # not JSON, or nan and inf
        kept = False
    if not kept:
        raise ValueError(
            f"{name} must be a dict of names to finite numbers, strings, booleans, None, lists "
            f"or dicts (what a file keeps as given); got {env_kwargs!r:.100}"
        )
    return env_kwargs


def recorded_kwargs(gym_env: Any) -> dict[str, Any] | None:
    """The keyword arguments an env made elsewhere was made with beyond its registration's
    (its ``spec``'s kwargs and time limit; render_mode aside: how it shows, not what it is):
    what remakes it from its id. None where a file could not hold them."""
    spec = getattr(gym_env, "spec", None)
    if spec is None or spec.id not in gym.registry:
        return {}
    registered = gym.registry[spec.id]
    given = {}
    for key, value in spec.kwargs.items():
        if key in registered.kwargs and _same(registered.kwargs[key], value):
            continue
        if key != "render_mode":
            given[key] = value
    if spec.max_episode_steps != registered.max_episode_steps:
        given["max_episode_steps"] = spec.max_episode_steps
    with contextlib.suppress(ValueError):
        return check_env_kwargs(given)
    return None


def _same(a: Any, b: Any) -> bool:
    """Whether two kwargs' values are equal (arrays too); never an error."""
    try:
        return bool(np.array_equal(a, b)) if isinstance(a, np.ndarray) else bool(a == b)
    except Exception:  # a value of the env's own kind, whose comparison fails
        return False


def env_kwargs_for(env_id: Any, given: Any, recorded_id: Any, recorded: Any) -> dict[str, Any]:
    """The kwargs to make the id ``env_id`` with: a model's own where it is the model's env
    (``recorded_id``, with or without its module), updated by those ``given``."""
    own = isinstance(env_id, str) and isinstance(recorded_id, str)
    own = own and env_id.rpartition(":")[2] == recorded_id.rpartition(":")[2]
    return check_env_kwargs({**(recorded or {} if own else {}), **(given or {})})


EnvParts = collections.namedtuple("EnvParts", "gym_env vec_env vec_normalize")


def resolve_env(env: Any, env_kwargs: dict[str, Any] | None = None) -> EnvParts:
    """``EnvParts``: the env, the vector env given (or None), its VecNormalize (or None). An
    id is made with ``env_kwargs``. A vector env gives its one env (DummyVecEnv,
    SyncVectorEnv), else :class:`VecEnvs`; SB3's may have ``VecNormalize`` and ``VecMonitor``
    around it. Wrappers that change observations in ways ARS cannot see through are refused."""
    if isinstance(env, str):  # no MuJoCo: gymnasium's error names the pip install
        return EnvParts(gym.make(env, **check_env_kwargs(env_kwargs)), None, None)
    if env_kwargs:
        raise ValueError("env_kwargs go with an env id; give the env made with them instead")
    made = env
    if callable(env) and not isinstance(env, (gym.Env, VecEnvs)) and not _is_vec_env(env):
        made = env()
    if not (isinstance(made, (gym.Env, VecEnvs)) or _is_vec_env(made)):
        raise TypeError(
            f"expected an env id, a gymnasium.Env, a vector env or a function "
            f"returning one; got {type(made).__name__} {made!r:.60}"
        )
    vec_normalize = None
    layer = made
    while hasattr(layer, "venv"):  # SB3's VecEnv wrappers
        name = type(layer).__name__
        if name == "VecNormalize" and vec_normalize is not None:
            raise ValueError("a VecNormalize inside a VecNormalize: ARS applies one; keep one")
        if name == "VecNormalize":
            vec_normalize = layer
        elif name != "VecMonitor":
            raise ValueError(
                f"ARS cannot see through {name}: give it the env, a VecEnv, or "
                "VecNormalize or VecMonitor around one"
            )
        layer = layer.venv
    if not _is_vec_env(layer):
        return EnvParts(layer, None, None)
    one = layer.num_envs == 1 and type(layer).__name__ in ("DummyVecEnv", "SyncVectorEnv")
    return EnvParts(layer.envs[0] if one else VecEnvs(layer), made, vec_normalize)


class VecEnvs:
    """The envs of a vector env (SB3's VecEnv, gymnasium's Sync- or AsyncVectorEnv) for
    :func:`run_side_by_side`; each episode starts with a reset given its seed. Envs in this
    process are stepped one by one: never reset automatically, and with their float64 rewards
    (DummyVecEnv's are float32). Others step as one batch, and ARS resets after them."""

    def __init__(self, venv: Any):
        self.gymnasium = isinstance(venv, gym.vector.VectorEnv)
        name = type(venv).__name__
        seedable = name in ("SyncVectorEnv", "AsyncVectorEnv") and getattr(venv, "shared_memory", 1)
        if self.gymnasium and not seedable:
            raise ValueError(
                f"{name} cannot reset each env with its own seed, as ARS needs: pass "
                "a SyncVectorEnv, or an AsyncVectorEnv with shared_memory=True (gym."
                "make_vec(id, n, vectorization_mode=...)), without vector wrappers"
            )
        self.vector = venv
        self.num_envs = int(venv.num_envs)
        self.spec = venv.get_attr("spec")[0]
        single = "single_" if self.gymnasium else ""  # gymnasium's spaces are of the batch
        self.observation_space = getattr(venv, single + "observation_space")
        self.action_space = getattr(venv, single + "action_space")
        self.envs = getattr(venv, "envs", None)  # in this process
        if self.envs is None:
            warn(
                f"the {name} steps its envs in other processes, a message each step: ARS runs "
                "faster on a SyncVectorEnv or DummyVecEnv (AsyncEval's workers, for more cores)"
            )
        for env in self.envs or ():
            _check_same_spaces(_spaces_of(env), _spaces_of(self), "an env of it", "its first")
        self.inner = None  # per env in this process: (its step past the wrappers, its limit)
        if self.envs:
            self.inner = [inner_step(env) for env in self.envs]
        self.limit = getattr(self.spec, "max_episode_steps", None)  # the envs' own, if any

    def reset(self, i: int, seed: int, options: dict | None) -> Any:
        """Env ``i``'s first observation of an episode with env seed ``seed``."""
        if self.inner is not None:
            return self.envs[i].reset(seed=seed, options=options)[0]
        with self._failures():
            if self.gymnasium:  # env i alone: gymnasium's reset_mask
                seeds = [None] * self.num_envs
                seeds[i] = seed
                options = {**(options or {}), "reset_mask": np.arange(self.num_envs) == i}
                return self.vector.reset(seed=seeds, options=options)[0][i]
            return self.vector.env_method("reset", seed=seed, options=options, indices=[i])[0][0]

    def step(self, actions: list, active: list[int]) -> list[tuple[int, tuple]]:
        """``(i, (obs, reward, terminated, truncated, info))`` for each ``active`` env ``i``."""
        if self.inner is not None:
            return [(i, self.inner[i][0](actions[i])) for i in active]
        with self._failures():
            if self.gymnasium:  # an episode's final state: in the info where it reset itself
                obs, rewards, terminated, truncated, infos = self.vector.step(actions)
                finals = infos.get("final_obs", [None] * self.num_envs)
            else:
                self.vector.step_async(actions)
                obs, rewards, terminated, infos = self.vector.step_wait()  # SB3's: both kinds
                truncated = np.zeros(self.num_envs, bool)
                finals = [info.get("terminal_observation") for info in infos]
        obs = [obs[i] if final is None else final for i, final in enumerate(finals)]
        return [(i, (obs[i], rewards[i], terminated[i], truncated[i], {})) for i in active]

    @contextlib.contextmanager
    def _failures(self) -> Any:
        """Calls to envs in other processes: a sub-env that raises, exits or is killed ends them
        with one line naming it. gymnasium logs the child's traceback as warnings: dropped then,
        as the line says what failed; kept (shown again) when nothing failed."""
        try:
            with warnings.catch_warnings(record=True) as logged:
                yield
        except Exception as error:
            message = self._failure(error)
            for process in getattr(self.vector, "processes", []):  # broken for good: ended
                process.terminate()  # now, so that neither close() nor exit waits on it
            self.vector.closed = True
            raise RuntimeError(message) from None
        for w in logged:  # shown once per text, as warnings are
            warn(w.message)

    def _failure(self, error: Exception) -> str:
        """Which sub-env failed (gymnasium drops its pipe; SB3's process exits), and how."""
        name = type(self.vector).__name__
        processes = getattr(self.vector, "processes", [])
        gone = [i for i, pipe in enumerate(getattr(self.vector, "parent_pipes", [])) if not pipe]
        if gone:  # gymnasium read the child's error (its process may have ended since, code 0)
            return f"sub-env {gone[0]} of the {name} failed: {_one_line(error)}"
        deadline = time.monotonic() + 2.0  # a crashed process may still be exiting
        while not gone and processes and time.monotonic() < deadline:
            gone = [i for i, process in enumerate(processes) if not process.is_alive()]
            time.sleep(0.05)
        code = processes[gone[0]].exitcode if gone and gone[0] < len(processes) else None
        what = _one_line(error) if code is None else f"its process ended (exit code {code})"
        return f"sub-env {gone[0] if gone else '?'} of the {name} failed: {what}"

    def render(self) -> Any:
        """The vector env's frames."""
        return self.vector.render()

    def close(self) -> None:
        """Close the vector env."""
        self.vector.close()


def _observed_through(vec_normalize: Any, it: Iteration, training: bool = True) -> Iteration:
    """``it`` with an SB3 VecNormalize's observations, its statistics frozen for the
    iteration: the policy sees ``clip((obs - mean) / sqrt(var + epsilon), +-clip_obs)`` as
    float32, as sb3-contrib's does; while VecNormalize learns, the rollouts keep raw states'."""
    if vec_normalize is None or not vec_normalize.norm_obs:
        return it
    rms = vec_normalize.obs_rms
    clip = vec_normalize.clip_obs
    track = it.track_obs or (training and vec_normalize.training)
    mean = np.array(rms.mean)
    scale = np.sqrt(rms.var + vec_normalize.epsilon)

    def normalized(obs):
        return np.clip((obs - mean) / scale, -clip, clip).astype(np.float32)

    return it._replace(obs_filter=normalized, track_obs=track)


def _update_vec_normalize(vec_normalize: Any, visited: Sequence[RunningMeanStd | None]) -> None:
    """Merge the raw observations of an iteration into VecNormalize's statistics, exactly
    and in candidate order (sb3-contrib updates them during the rollouts, and merges
    workers with inflated counts)."""
    if vec_normalize is not None and vec_normalize.norm_obs and vec_normalize.training:
        shape = np.shape(vec_normalize.obs_rms.mean)
        for rms in visited:
            if rms is not None and rms.count:
                vec_normalize.obs_rms.update_from_moments(
                    rms.mean.reshape(shape), rms.var.reshape(shape), rms.count
                )


def observations_seen_by(model: Any) -> Any:
    """The VecNormalize whose observations ``model`` (an ARS or a policy) learned on: the
    env's, or the frozen one its file recorded (None for raw observations). An evaluation on
    a raw env passes its observations through it, as SB3's would."""
    return getattr(policy_of(model), "vec_normalize", None)


def _check_vec_normalize(model: Any) -> None:
    if model.normalize_obs and getattr(model.get_vec_normalize_env(), "norm_obs", False):
        raise ValueError(
            "the env is an SB3 VecNormalize, which already normalises observations: "
            "use normalize_obs=False (V1 on its observations, as sb3-contrib), or "
            "drop VecNormalize"
        )


# == Evaluators: where the rollouts run ===========================================================
WARM_UP = 2  # the streams of the plumbing's episodes, after the core's ENV_SEEDS and DIRECTIONS:
EVALUATION = 3  # the statistics' warm-up, and evaluations
# An evaluator turns ``(Iteration, jobs)`` into one Result per job, in job order, each by the
# core's run_job: ``evaluate(it, jobs, on_step=None)``. Training, the statistics warm-up,
# evaluations and lit_sb3's ``send_jobs`` all go through it. The iteration goes to
# each worker once, then jobs of a few integers each: workers rebuild each candidate from
# its direction's stream, so a result never depends on who ran it. ``on_step`` hears of
# every env step when the rollouts run in this process.

DEFAULT_JOB_TIMEOUT = 600.0  # seconds without a finished job: a stuck env, not a long episode
DEFAULT_START_TIMEOUT = 120.0  # seconds for a worker to start and build its env
MAX_SECONDS = 10**7  # a timeout past 115 days is none: refused, as timers overflow past 2**31
RESULT_INTERVAL = 0.25  # seconds: a worker sends its finished jobs at least this often
WARM_UP_BATCH = 8  # normalization_samples episodes per round: fixed, not from the workers


def batch_sizes(n_jobs: int, n_workers: int) -> list[int]:
    """Guided self-scheduling: each batch is the jobs left over twice the workers. Large
    batches first keep the messages few; ever smaller ones at the end keep every worker busy
    until the last job (for 460 jobs on 2 workers: 115, 87, 65, ..., 1)."""
    sizes = []
    left = n_jobs
    while left:
        sizes.append(min(left, max(1, -(-left // (2 * n_workers)))))
        left -= sizes[-1]
    return sizes


def evaluation_seeds(seed: int, n_episodes: int) -> np.ndarray:
    """The env seeds of evaluation episodes: the EVALUATION stream of ``seed``, never training's."""
    seed = check_integer("seed", seed, 0)  # given: None is drawn only where a model is made
    return env_seeds(seed, EVALUATION, n=check_setting("n_eval_episodes", n_episodes))


def evaluate_episodes(
    policy: Any,
    evaluator: Any,
    seeds: Sequence[int],
    max_episode_steps: int | None = None,
    vec_normalize: Any = None,
    on_step: Callable | None = None,
) -> list[Result]:
    """One deterministic episode per env seed, run by ``evaluator``: every evaluation's path."""
    theta = policy.parameters_to_vector()
    episodes = [[s] for s in seeds]
    it, jobs = fixed_jobs(policy.network(), policy.obs_rms, theta, episodes, max_episode_steps)
    return evaluator.evaluate(_observed_through(vec_normalize, it, training=False), jobs, on_step)


def warm_up_statistics(policy: Any, evaluator: Any, hp: dict[str, Any]) -> int:
    """``normalization_samples``: V2's first statistics, merged into ``policy.obs_rms``, from
    whole episodes of the initial policy, at least that many steps of them, on the WARM_UP
    stream's env seeds, WARM_UP_BATCH episodes a round; returns the steps they took."""
    seed = hp["seed"]
    samples = hp["normalization_samples"]
    max_episode_steps = hp["max_episode_steps"]
    frozen = (policy.network(), policy.obs_rms, policy.parameters_to_vector())
    visited = []
    episode = 0
    steps = 0
    while steps < samples:
        seeds = [[s] for s in env_seeds(seed, WARM_UP, n=WARM_UP_BATCH, first=episode)]
        it, jobs = fixed_jobs(*frozen, seeds, max_episode_steps, seed=seed, track_obs=True)
        for result in evaluator.evaluate(it, jobs):
            visited.append(result.visited)
            steps += int(result.lengths.sum())
        episode += WARM_UP_BATCH
    policy.obs_rms = merge_statistics(policy.obs_rms, visited)
    return steps


def fixed_jobs(
    network: Network, obs_rms: Any, weights: np.ndarray, seeds: Any, max_steps: Any = None, **kw
) -> tuple[Iteration, list[Job]]:
    """An Iteration without directions (nu = 0; ``kw`` sets other fields), and Job c for
    ``weights`` (one vector, else its row c) on the episodes of env seeds ``seeds[c]``:
    evaluations, the statistics warm-up and lit_sb3's ``send_jobs``."""
    one = weights.ndim == 1
    kw = {"seed": 0, "index": 0, "max_episode_steps": max_steps, **kw}
    it = Iteration(network, weights if one else weights[0], obs_rms, 0.0, **kw)
    rows = [np.asarray(s, np.uint64) for s in seeds]
    return it, [Job(c, 0, 0, s, None if one else weights[c]) for c, s in enumerate(rows)]


def run_side_by_side(
    envs: VecEnvs, it: Iteration, jobs: Sequence[Job], options: Any = None, on_step: Any = None
) -> list[Result]:
    """:func:`run_job`'s Results for ``jobs``, the same bits, from a vector env's envs side by
    side: env ``s`` runs a job's episodes, told to the job's Recorder as run_job tells them,
    then the next job waiting. A step sends one batch of actions from one forward pass of the
    candidates' networks (np.matmul on the stacked layers gives np.dot's bits, row by row)."""
    return SideBySide(envs, it, jobs, options).run(on_step)


class SideBySide:
    """The state of :func:`run_side_by_side`: per env, its job, Recorder, seeds left and
    current observation; the candidates' layers stacked, a row per env."""

    def __init__(self, envs: VecEnvs, it: Iteration, jobs: Sequence[Job], options: Any):
        net = it.network
        n_envs = envs.num_envs
        self.envs = envs
        self.it = it
        self.options = options
        self.queue = list(enumerate(jobs))
        self.plain = net.flatten is None and it.obs_filter is None
        self.layers = [
            (w.copy(), b if b is None else b.copy())  # a row per env, set per job
            for w, b in net.layers(np.zeros((n_envs, net.n_params)), it.obs_rms)
        ]
        self.own = [limit for _, limit in envs.inner] if envs.inner else [envs.limit] * n_envs
        self.x = [None] * n_envs  # each env's current observation, as the policy's input
        self.records = [None] * n_envs  # each env's job's Recorder; None: idle
        self.seeds = [[] for _ in range(n_envs)]  # each env's env seeds still to run
        self.taken = [0] * n_envs  # each env's job
        self.results = [None] * len(jobs)

    def policy_input(self, obs: Any) -> Any:
        """An observation as the Network takes it: through VecNormalize's filter, flattened."""
        if self.plain:
            return obs
        obs_filter = self.it.obs_filter
        obs = obs if obs_filter is None else obs_filter(obs)
        return obs if self.it.network.flatten is None else self.it.network.flatten(obs)

    def take_job(self, s: int) -> None:
        """Env ``s`` takes the next job waiting: its candidate's rows of the layers."""
        index, job = self.queue.pop(0)
        rows = self.it.network.layers(candidate_parameters(self.it, job), self.it.obs_rms)
        for stacked, layer in zip(self.layers, rows):
            for rows_of_k, row in zip(stacked, layer):
                if row is not None:
                    rows_of_k[s] = row
        limits = [self.own[s], self.it.max_episode_steps]
        self.records[s] = Recorder(self.envs, len(job.seeds), limits, self.it.track_obs)
        self.seeds[s] = [int(seed) for seed in job.seeds]
        self.taken[s] = index

    def start(self, s: int) -> bool:
        """Env ``s``'s next episode, of its job or of the next one; False: it is idle."""
        if self.records[s] is not None and not self.seeds[s]:
            self.results[self.taken[s]] = self.records[s].result()
            self.records[s] = None
        if self.records[s] is None and self.queue:
            self.take_job(s)
        if self.records[s] is not None:
            seed = self.seeds[s].pop(0)
            obs = self.envs.reset(s, seed, self.options)
            self.x[s] = self.policy_input(self.records[s].start(obs, seed))
        if self.x[s] is None:  # an idle env's row: one of the same dtype
            self.x[s] = self.x[0]
        return self.records[s] is not None

    def inputs(self) -> np.ndarray:
        """The envs' current inputs as one array, a row each; an observation of another shape
        is named, as run_job names it."""
        try:
            rows = flat_rows(self.x, self.x[0].dtype)
            return rows.reshape(len(self.x), self.it.network.obs_dim)
        except ValueError:
            for s, record in enumerate(self.records):
                if record is not None and self.plain:  # its row is the env's observation
                    check_observation(self.x[s], self.envs, record.seed, f"step {record.steps}")
            raise

    def run(self, on_step: Any) -> list[Result]:
        """Step the active envs together until every job has its Result."""
        net = self.it.network
        activation = ACTIVATIONS[net.activation_fn]
        to_action = net.to_action()
        n_envs = self.envs.num_envs
        active = [s for s in range(n_envs) if self.start(s)]
        while active:
            x = self.inputs()
            actions = list(to_action(forward_layers(self.layers, activation, x)))
            for s, (obs, reward, terminated, truncated, info) in self.envs.step(actions, active):
                record = self.records[s]
                ended = record.step(obs, reward, terminated, truncated)
                if on_step is not None:
                    limited = truncated or record.steps == record.limit
                    on_step(actions[s], (obs, reward, terminated, limited, info))
                if not ended:
                    self.x[s] = self.policy_input(obs)
                elif not self.start(s):
                    active = [a for a in active if a != s]
        return self.results


def evaluator_for(async_eval: Any, gym_env: Any) -> Any:
    """``async_eval`` where it evaluates (AsyncEval, ExecutorEval); else the rollouts run in
    this process: none given, or sb3-contrib's AsyncEval, whose workers cannot seed each
    episode as ars's weights need (the README's compatibility table)."""
    return async_eval if hasattr(async_eval, "evaluate") else InProcessEval(gym_env)


def candidate_returns(model: Any, candidate_weights: Any, evaluator: Any, callbacks: Any) -> Any:
    """:meth:`ARS.evaluate_candidates`: each row's shifted return, on the env seeds of the
    model's current iteration's first candidates; the steps counted as sb3-contrib counts."""
    policy = model.policy
    weights = _as_array(candidate_weights)
    if weights.ndim != 2 or weights.shape[1] != policy.n_params:
        raise ValueError(
            f"candidate_weights must have shape (n, {policy.n_params}); got {weights.shape}"
        )
    seeds = [
        env_seeds(model.seed, ENV_SEEDS, model.n_updates, c, n=model.n_eval_episodes)
        for c in range(len(weights))
    ]
    network = policy.network()
    it, jobs = fixed_jobs(network, policy.obs_rms, weights, seeds, model.max_episode_steps)
    start = model.num_timesteps  # per-step callbacks count steps as they come: set once here
    results = rollouts(model, evaluator, callbacks)(it, jobs)
    model.num_timesteps = start + sum(int(r.lengths.sum()) for r in results)
    returns = np.array([shifted_return(r, model.alive_bonus_offset) for r in results])
    return _same_kind_as(candidate_weights, returns)


def rollouts(model: Any, evaluator: Any, callbacks: Any) -> Callable:
    """The core's ``evaluate`` for ``model``'s training: ``evaluator``'s rollouts, through the
    VecNormalize the model learns through, with the callbacks' hooks around them."""

    def evaluate(it: Iteration, jobs: Sequence[Job]) -> list[Result]:
        callbacks.hook("on_rollout_start")
        here = isinstance(evaluator, InProcessEval)  # else workers' steps, told afterwards
        reporter = callbacks.on_step if callbacks.per_step and here else None  # None: fast
        it = _observed_through(observations_seen_by(model), it)  # what the policy learns on
        results = evaluator.evaluate(it, jobs, reporter)
        if callbacks.per_step and not here:
            callbacks.after_rollouts(results)
        callbacks.hook("on_rollout_end")
        return results

    return evaluate


def run_jobs(
    env: Any, it: Iteration, jobs: Sequence[Job], options: Any = None, on_step: Any = None
) -> list[Result]:
    """Each job's Result, in order: by :func:`run_job`, or :func:`run_side_by_side`."""
    if isinstance(env, VecEnvs):
        return run_side_by_side(env, it, jobs, options, on_step)
    return [run_job(env, it, job, options, on_step) for job in jobs]


class Evaluator:
    """Where rollouts run: the interface of InProcessEval, AsyncEval and the companions in
    ``examples/`` (ExecutorEval, Dask, Ray), and lit_sb3's API built on it (``send_jobs``,
    ``get_results``, ``get_obs_rms``, ``sync_obs_rms``, ``seed``, ``set_options``).

    A subclass sets ``n_workers``, calls ``super().__init__(train_policy, n_eval_episodes)`` and
    implements ``evaluate(it, jobs, on_step=None, record=False)``: one Result per Job, in job
    order, each as :func:`run_jobs` gives it (with ``options[worker]`` for every reset) under
    ``with self.exclusive():``; with ``record``, each result also goes to
    ``record_visited(worker, result)``. ``on_step`` is for evaluators in this process: others
    refuse it. ``close()`` frees what it holds."""

    n_workers = 1
    closed = False

    def __init__(self, train_policy: Any = None, n_eval_episodes: int = 1):
        self.set_policy(train_policy)
        self.n_eval_episodes = check_setting("n_eval_episodes", n_eval_episodes)
        self._seed = 0
        self._n_sends = 0
        self._pending = None
        self._lock = threading.Lock()
        self.options = [None] * self.n_workers

    @contextlib.contextmanager
    def exclusive(self) -> Any:
        """One caller at a time: a second thread gets a clear error, not corrupted messages."""
        if self.closed:
            raise RuntimeError(f"this {type(self).__name__} is closed")
        if not self._lock.acquire(blocking=False):
            raise RuntimeError(
                f"this {type(self).__name__} is in use by another thread; give "
                "each thread its own evaluator"
            )
        try:
            yield
        finally:
            self._lock.release()

    def record_visited(self, worker: int, result: Result) -> None:
        """Add the states of a result that ``worker`` ran to those :meth:`get_obs_rms` reports."""
        if result.visited is not None:  # an empty RunningMeanStd takes the shape of the first
            self._visited[worker].combine(result.visited)

    def set_policy(self, policy: Any) -> None:
        """Later ``send_jobs`` use ``policy``'s structure and a copy of its statistics."""
        policy = policy_of(policy)
        self._network = None if policy is None else policy.network()
        self.sync_obs_rms(getattr(policy, "obs_rms", None))

    def send_jobs(
        self, candidate_weights: Any, pop_size: int | None = None, episode_seeds: Any = None
    ) -> None:
        """Queue the evaluation of the first ``pop_size`` (default: all) rows of
        ``candidate_weights`` (``(n, n_params)``, NumPy or torch), on ``episode_seeds``
        (``(pop_size, n_eval_episodes)``; by default :meth:`seed`'s evaluation stream)."""
        name = type(self).__name__
        if self.closed:
            raise RuntimeError(f"this {name} is closed")
        if self._pending is not None:
            raise RuntimeError("send_jobs was called twice: get_results() collects the first jobs")
        if self._network is None:
            raise ValueError(f"this {name} has no policy: pass train_policy, or set_policy()")
        weights = _as_array(candidate_weights)
        n_params = self._network.n_params
        n = len(weights) if pop_size is None else int(pop_size)
        if weights.ndim != 2 or weights.shape[1] != n_params or not 0 < n <= len(weights):
            raise ValueError(
                f"candidate_weights must have shape (>= pop_size, {n_params}) with "
                f"pop_size >= 1; got {weights.shape} and pop_size={pop_size}"
            )
        if episode_seeds is None:
            episode_seeds = [
                env_seeds(self._seed, EVALUATION, self._n_sends, c, n=self.n_eval_episodes)
                for c in range(n)
            ]
        seeds = np.asarray(episode_seeds, dtype=np.uint64)
        if seeds.ndim != 2 or len(seeds) != n or not seeds.size:  # a job runs an episode or more
            raise ValueError(f"episode_seeds must be {n} rows of seeds; got shape {seeds.shape}")
        self._n_sends += 1
        self._pending = fixed_jobs(self._network, self._obs_rms, weights, seeds, track_obs=True)

    def get_results(self) -> list[tuple[int, tuple[np.ndarray, np.ndarray]]]:
        """``[(candidate_index, (episode_rewards, episode_lengths)), ...]`` for the jobs sent."""
        if self._pending is None:
            raise RuntimeError("get_results() without send_jobs(): there is nothing to collect")
        it, jobs = self._pending
        self._pending = None
        results = self.evaluate(it, jobs, record=True)
        return [(job.candidate, (r.returns, r.lengths)) for job, r in zip(jobs, results)]

    def get_obs_rms(self) -> list[RunningMeanStd]:
        """Per worker, the statistics of the states visited since the last sync."""
        return [rms.copy() for rms in self._visited]

    def sync_obs_rms(self, obs_rms: RunningMeanStd | None) -> None:
        """Normalise with a copy of ``obs_rms`` from now on (V2); resets the visited states'."""
        moments = [np.array(getattr(obs_rms, k, 0), float).reshape(-1) for k in ("mean", "var")]
        self._obs_rms = obs_rms and RunningMeanStd.from_moments(*moments, obs_rms.count)
        dim = 0 if self._network is None else self._network.obs_dim  # 0: sized by the first
        self._visited = [RunningMeanStd((dim,)) for _ in range(self.n_workers)]

    def seed(self, seed: int | None = None) -> list:
        """Seed the env seeds of later ``send_jobs``; as sb3-contrib, ``None`` does nothing."""
        if seed is None:
            return []
        self._seed = check_integer("seed", seed, 0)
        self._n_sends = 0
        return [[int(seed) + i] for i in range(self.n_workers)]

    def set_options(self, options: list[dict] | dict | None = None) -> list[None]:
        """Options for every ``env.reset``: one dict for all workers, or one per worker."""
        if isinstance(options, list) and len(options) != self.n_workers:
            raise ValueError(f"got {len(options)} options for {self.n_workers} workers")
        self.options = list(options) if isinstance(options, list) else [options] * self.n_workers
        return [None] * self.n_workers

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def close(self) -> None:
        """Free what the evaluator holds. Idempotent."""


class InProcessEval(Evaluator):
    """Evaluate candidates one after the other in this process (``learn``'s default), on
    ``env`` (an id, an env, a VecEnv of one, or a function); ``train_policy`` and
    ``n_eval_episodes`` are for lit_sb3's ``send_jobs``. With ``job_timeout``, a job that
    runs longer raises EvaluationTimeout (SIGALRM: in the main thread, on POSIX)."""

    def __init__(
        self,
        env: Any,
        train_policy: Any = None,
        n_eval_episodes: int = 1,
        job_timeout: float | None = None,
    ):
        if env is None:
            raise ValueError("no env to evaluate on: pass an env (or, to ARS, an async_eval)")
        self.env = make_env(env)
        self.job_timeout = job_timeout and check_seconds("job_timeout", job_timeout)
        super().__init__(train_policy, n_eval_episodes)

    def evaluate(
        self, it: Iteration, jobs: Sequence[Job], on_step: Any = None, record: bool = False
    ) -> list[Result]:
        """One Result per job, in order; ``record``: the visited states go to get_obs_rms."""
        _check_same_spaces(_spaces_of(self.env), _spaces_of(it.network), "the env", "the policy")
        side_by_side = isinstance(self.env, VecEnvs)  # its jobs run together
        batches = [list(jobs)] if side_by_side or not self.job_timeout else [[j] for j in jobs]
        results = []
        with self.exclusive():
            for batch in batches:
                with _time_limit(self.job_timeout, batch):
                    results += run_jobs(self.env, it, batch, self.options[0], on_step)
        for result in results if record else ():
            self.record_visited(0, result)
        return results


@contextlib.contextmanager
def _time_limit(seconds: float | None, jobs: Sequence[Job]) -> Any:
    """Raise EvaluationTimeout if the block (``jobs``) runs past ``seconds`` a job: SIGALRM,
    so only in the main thread, on POSIX; elsewhere, or with None, it runs unbounded."""
    main = threading.current_thread() is threading.main_thread()
    if not (seconds and main and hasattr(signal, "setitimer")):
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        raise EvaluationTimeout(
            f"this process has not finished candidate {jobs[0].candidate} (env seeds "
            f"{[int(s) for j in jobs for s in j.seeds]}) in {seconds * len(jobs):g} s: is the "
            "env stuck? Pass a larger job_timeout for longer episodes."
        )

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds * len(jobs))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def check_seconds(name: str, value: Any) -> float:
    """A timeout: a positive number of seconds, at most MAX_SECONDS (past it, timers overflow)."""
    seconds = check_number(name, value, positive=True)
    if seconds > MAX_SECONDS:
        raise ValueError(f"{name} must be at most {MAX_SECONDS:,} seconds; got {value!r:.60}")
    return seconds


class EvaluationTimeout(RuntimeError):
    """A job took longer than the evaluator's ``job_timeout``."""


def _worker(remote: Any, parent_ends: list, env_fn_bytes: bytes) -> None:
    """An AsyncEval worker: builds its env once, then evaluates the batches it receives,
    strictly in turn (a batch goes out when the last one's results are all in): neither side
    can block on a full pipe while the other does. An error goes to the main process as one
    line and its traceback; the worker ends quietly only when the main process is gone."""
    import cloudpickle

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C is the main process's to handle
    if hasattr(signal, "pthread_sigmask"):  # blocked since it started: one pending is dropped
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    warnings.simplefilter("ignore")  # the main process made the same env and showed its own
    for end in parent_ends:  # forked: the main process's ends, so a dead worker is seen
        end.close()
    try:
        env = make_env(cloudpickle.loads(env_fn_bytes))
        check_spaces(*_spaces_of(env))
    except BaseException as error:
        _report(remote, None, error)
        return
    it = None
    with contextlib.suppress(EOFError, OSError):  # the main process is gone: nobody to tell
        remote.send(("ready", _spaces_of(env)))
        message = remote.recv()
        while message[0] != "close":
            run = message[1]  # an Iteration's bytes (None: the last one's), resets' options, jobs
            it = _run_batch(remote, env, run["it"] or it, run["options"], run["jobs"])
            message = remote.recv()
    env.close()
    remote.close()


def _run_batch(remote: Any, env: Any, it: Any, options: Any, batch: list[Job]) -> Any:
    """A worker's batch, a job per env at a time side by side: its results in few messages, yet
    sent at least every RESULT_INTERVAL seconds; an error ends the batch. ``it``: the
    Iteration, or its bytes with a call's first batch; returns the Iteration."""
    import cloudpickle

    n_envs = getattr(env, "num_envs", 1)
    units = [batch[i : i + n_envs] for i in range(0, len(batch), n_envs)]
    done = []
    sent_at = time.monotonic()
    for position, unit in enumerate(units, 1):
        try:
            it = cloudpickle.loads(it) if isinstance(it, bytes) else it
            done += zip([job.candidate for job in unit], run_jobs(env, it, unit, options))
        except BaseException as error:
            remote.send(("results", done))
            _report(remote, unit[0].candidate, error)
            return it
        if position == len(units) or time.monotonic() - sent_at > RESULT_INTERVAL:
            remote.send(("results", done))
            done = []
            sent_at = time.monotonic()
    return it


def _report(remote: Any, candidate: int | None, error: BaseException) -> None:
    report = dict(candidate=candidate, line=_one_line(error), trace=traceback.format_exc())
    with contextlib.suppress(OSError):  # the main process is gone: nobody to tell
        remote.send(("error", report))


def _shutdown(processes: list[Any], remotes: list[Any]) -> None:
    """Stop the workers: ask, then terminate, then kill. Safe to call more than once."""
    for remote in remotes:
        with contextlib.suppress(OSError, ValueError):
            remote.send(("close", None))
    deadline = time.monotonic() + 1.0  # idle workers exit at once; busy ones are terminated
    for process in processes:
        process.join(max(deadline - time.monotonic(), 0.0))
    for process in processes:
        for stop in (process.terminate, process.kill):
            if process.is_alive():
                stop()
                process.join(1.0)
    for remote in remotes:
        remote.close()


def check_main_guard(start_method: str | None) -> None:
    """Refuse to start worker processes that would run the main script again: with
    "forkserver" or "spawn" (None: the default) each worker imports the script, and so runs
    whatever its top level runs outside ``if __name__ == "__main__":``, starting workers too."""
    method = start_method or multiprocessing.get_start_method(allow_none=True) or "forkserver"
    frame = sys._getframe(1)
    while frame is not None and not (
        frame.f_code.co_name == "<module>" and frame.f_globals.get("__name__") == "__main__"
    ):
        frame = frame.f_back  # the main script's top level, where it runs this
    path = frame.f_code.co_filename if frame is not None else ""
    spec = getattr(frame, "f_globals", {}).get("__spec__")  # python -m pkg: never run again
    again = not str(getattr(spec, "name", "")).endswith("__main__")  # as multiprocessing does
    if method != "fork" and again and path == "<stdin>":  # python - < script.py
        raise RuntimeError(
            "a script read from standard input cannot start worker processes (each imports "
            'the main script, which has no file): save it to a file, or use start_method="fork"'
        )
    if method == "fork" or not again or not os.path.isfile(path):  # interactive, or python -c
        return
    with contextlib.suppress(OSError, SyntaxError, ValueError):
        tree = compile(Path(path).read_bytes(), path, "exec", ast.PyCF_ONLY_AST)
        guards = [  # at the top level, or inside a top-level block (for, with, try)
            range(node.lineno, node.end_lineno + 1)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)
        ]
        if not any(frame.f_lineno in lines for lines in guards):
            raise RuntimeError(
                f"{path} starts worker processes outside 'if __name__ == \"__main__\":', so "
                "each would run it again: put the code that trains under that guard (AsyncEval: "
                'or start_method="fork")'
            )


class AsyncEval(Evaluator):
    """Evaluate candidates in worker processes, over ``multiprocessing`` Pipes.

    Work is dealt in batches sized from the jobs left and the workers (see
    :func:`batch_sizes`), to whichever worker is free. ``learn(async_eval=...)`` gives the
    weights of one process for any number of workers, and leaves the evaluator open for the
    next ``learn``: close it with :meth:`close` or a ``with`` block (or let it be collected).

    Parameters
    ----------
    envs_fn : list of callables
        One function per worker returning an env id, a gymnasium env or a vector env (whose
        envs run the worker's jobs side by side); sent with cloudpickle.
    train_policy, n_eval_episodes : ARSPolicy or ARS, int
        The policy and episodes per candidate for lit_sb3's ``send_jobs`` (``learn`` sends
        its own).
    start_method : str, optional
        ``"forkserver"`` (default where available), ``"spawn"`` or ``"fork"``. With the first
        two, guard your script with ``if __name__ == "__main__":``.
    job_timeout, start_timeout : float
        Seconds a worker may take for a job, and to start and build its env. Past them, the
        error names the worker (and the candidate and its env seeds), and the workers stop.

    >>> with AsyncEval([lambda: make_env("HalfCheetah-v4")] * 2) as async_eval:
    ...     ARS("LinearPolicy", "HalfCheetah-v4").learn(100_000, async_eval=async_eval)
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
        cloudpickle = require("cloudpickle", "pip install cloudpickle")
        if not envs_fn:
            raise ValueError("envs_fn must hold at least one env function (one per worker)")
        check_seconds("job_timeout", job_timeout)
        check_seconds("start_timeout", start_timeout)
        methods = multiprocessing.get_all_start_methods()  # another: get_context says so
        start_method = start_method or ("forkserver" if "forkserver" in methods else "spawn")
        check_main_guard(start_method)
        self.n_workers = len(envs_fn)
        self.job_timeout = float(job_timeout)
        super().__init__(train_policy, n_eval_episodes)
        self.remotes = []
        self.processes = []
        self._closer = weakref.finalize(self, _shutdown, self.processes, self.remotes)
        self._batches: list[collections.deque] = [collections.deque() for _ in envs_fn]
        self._deadlines = [math.inf] * self.n_workers  # a busy worker's next result is due by then
        ctx = multiprocessing.get_context(start_method)
        # Ctrl+C to the process group is the main process's, even while a worker imports: each
        # starts with SIGINT blocked (the mask of the thread that starts it), and _worker
        # ignores it before unblocking. Here one pressed meanwhile still reaches the handler.
        mask = getattr(signal, "pthread_sigmask", lambda how, signals: set())
        with contextlib.suppress(ImportError):  # started first: starting, it unblocks SIGINT
            importlib.import_module("multiprocessing.resource_tracker").ensure_running()
        blocked = mask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            for env_fn in envs_fn:
                remote, work_remote = ctx.Pipe()
                inherited = [remote, *self.remotes] if start_method == "fork" else []
                args = (work_remote, inherited, cloudpickle.dumps(env_fn))
                process = ctx.Process(target=_worker, args=args, daemon=True)
                process.start()
                work_remote.close()
                self.processes.append(process)
                self.remotes.append(remote)
        finally:
            mask(signal.SIG_SETMASK, blocked)
        deadline = time.monotonic() + float(start_timeout)
        # every env must build before any job is sent; its spaces are checked at each job
        self.spaces = [self._receive(i, "starting its env", deadline) for i in range(len(envs_fn))]

    def _fail(self, message: str, kind: type = RuntimeError) -> RuntimeError:
        self.close()
        return kind(message + "; the AsyncEval is closed: create a new one to go on")

    def _receive(self, i: int, doing: str, deadline: float) -> Any:
        """Worker ``i``'s next message by ``deadline``; death or silence raise, never hang."""
        remote = self.remotes[i]
        process = self.processes[i]
        name = f"AsyncEval worker {i} (pid {process.pid})"
        try:
            while not remote.poll(min(0.2, max(deadline - time.monotonic(), 0.0))):
                if not process.is_alive() and not remote.poll():
                    raise self._fail(f"{name} died (exit code {process.exitcode}) while {doing}")
                if time.monotonic() >= deadline:
                    raise self._fail(f"{name} did not answer in time while {doing}")
            kind, payload = remote.recv()
        except (EOFError, OSError):  # its end of the pipe closed: the death is the news
            process.join(1.0)
            raise self._fail(f"{name} died (exit code {process.exitcode}) while {doing}") from None
        if kind == "error":  # one line; the worker's traceback is kept on the error
            candidate = payload["candidate"]
            what = doing if candidate is None else f"evaluating candidate {candidate}"
            error = self._fail(f"AsyncEval worker {i} failed while {what}: {payload['line']}")
            error.worker_traceback = payload["trace"]
            raise error
        return payload

    def _deal(self, i: int, queue: collections.deque, it_bytes: bytes | None) -> None:
        batch = [queue.popleft() for _ in range(batch_sizes(len(queue), self.n_workers)[0])]
        self._batches[i].extend(batch)
        self._deadlines[i] = time.monotonic() + self.job_timeout
        try:
            self.remotes[i].send(("run", dict(it=it_bytes, options=self.options[i], jobs=batch)))
        except (OSError, ValueError) as error:  # a killed worker: _receive says how it ended
            self._receive(i, "evaluating", time.monotonic() + 1.0)
            raise self._fail(f"AsyncEval worker {i} cannot be reached ({error!r})") from error

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return not self._closer.alive

    def evaluate(
        self, it: Iteration, jobs: Sequence[Job], on_step: Any = None, record: bool = False
    ) -> list[Result]:
        """One Result per job, in job order, whoever ran it. Workers cannot call ``on_step``."""
        import cloudpickle

        if on_step is not None:
            raise ValueError("AsyncEval's workers cannot call on_step: use InProcessEval for it")
        for i, found in enumerate(self.spaces):  # the worker's error would be a shape's
            _check_same_spaces(found, _spaces_of(it.network), f"AsyncEval worker {i}'s env")
        with self.exclusive():
            self._finish_interrupted()
            queue = collections.deque(jobs)
            results = {}
            it_bytes = cloudpickle.dumps(it)
            for i in range(self.n_workers):  # the iteration goes with each worker's first batch
                if queue:
                    self._deal(i, queue, it_bytes)
            while len(results) < len(jobs):
                i = self._next_ready()
                for candidate, result in self._receive(i, "evaluating", time.monotonic() + 1.0):
                    self._batches[i].popleft()
                    results[candidate] = result
                    if record:
                        self.record_visited(i, result)
                self._deadlines[i] = time.monotonic() + self.job_timeout
                if not self._batches[i] and queue:  # a busy worker got its first batch above
                    self._deal(i, queue, None)
        return [results[job.candidate] for job in jobs]

    def _finish_interrupted(self) -> None:
        """Receive, and drop, what an interrupted call left the workers running."""
        for i, batch in enumerate(self._batches):
            while batch:
                deadline = time.monotonic() + self.job_timeout
                for _ in self._receive(i, "finishing an interrupted batch", deadline):
                    batch.popleft()

    def _next_ready(self) -> int:
        """The index of a worker with a message; a worker late with its job raises."""
        busy = [i for i, batch in enumerate(self._batches) if batch]
        late = min(busy, key=lambda i: self._deadlines[i])
        waits = [self.remotes[i] for i in busy] + [self.processes[i].sentinel for i in busy]
        timeout = max(self._deadlines[late] - time.monotonic(), 0.0)
        ready = multiprocessing.connection.wait(waits, timeout)  # nothing only past the timeout
        for i in busy:
            if self.remotes[i] in ready or self.processes[i].sentinel in ready:
                return i
        job = self._batches[late][0]
        pid = self.processes[late].pid
        raise self._fail(
            f"AsyncEval worker {late} (pid {pid}) has not finished candidate {job.candidate} "
            f"(env seeds {[int(s) for s in job.seeds]}) in {self.job_timeout:g} s: is the env "
            "stuck? Pass a larger job_timeout for longer episodes.",
            EvaluationTimeout,
        )

    def close(self) -> None:
        """Stop the workers and free their resources. Idempotent."""
        self._closer()


# == Logging and callbacks, in the shapes Stable-Baselines3 users know ============================


class StopTraining(Exception):
    """Raised inside a rollout when a per-step callback returns False."""


LOG_KEYS = tuple(  # the columns of progress.csv known up front: no wider header needed later
    "rollout/ep_rew_mean rollout/ep_len_mean rollout/return_std train/iterations "
    "train/delta_std train/learning_rate train/step_size eval/mean_reward eval/std_reward "
    "eval/mean_ep_length eval/best_mean_reward time/fps time/time_elapsed "
    "time/total_timesteps".split()
)


def log_folder(root_dir: Any, tensorboard_log: Any, tb_log_name: str, reset: bool) -> Any:
    """``root_dir`` as it is, else ``tensorboard_log/<tb_log_name>_<n>`` as SB3 numbers runs
    (the last run's again when continuing it), else None."""
    if root_dir is not None:
        return Path(root_dir)
    if tensorboard_log is None:
        return None
    root = Path(tensorboard_log)
    taken = [p.name.rsplit("_", 1)[1] for p in root.glob(f"{tb_log_name}_*")]
    last = max((int(n) for n in taken if n.isdigit()), default=0)
    return root / f"{tb_log_name}_{last if (last and not reset) else last + 1}"


class Logger:
    """Key/value logger in SB3's shape: ``record`` values, then ``dump`` writes one row.

    A row goes to the screen as a table (``verbose >= 1``), to ``folder/progress.csv`` (one
    write per row, so a killed run never leaves half a row), and, with ``tensorboard``, to
    TensorBoard event files when a writer is installed (torch's or tensorboardX)."""

    def __init__(self, verbose: int = 0, folder: Any = None, tensorboard: bool = False):
        self.verbose = verbose
        self.values: dict[str, Any] = {}
        self.columns: list[str] = []
        self._writer = None
        self._means: dict[str, tuple[float, int]] = {}  # record_mean's: mean and count
        self.excluded: dict[str, tuple] = {}  # per key, the outputs that skip it (SB3's)
        self.dir = None if folder is None else Path(folder)
        if self.dir is not None:
            self.dir.mkdir(parents=True, exist_ok=True)
            if (self.dir / "progress.csv").exists():  # a resumed run goes on with its file
                with (self.dir / "progress.csv").open(newline="") as f:
                    self.columns = next(csv.reader(f), [])
            self._writer = _tensorboard_writer(self.dir) if tensorboard else None

    def record(self, key: str, value: Any, exclude: Any = None) -> None:
        """Set ``key`` for the next :meth:`dump`; ``exclude`` names the outputs that skip it
        (``"stdout"``, ``"csv"``, ``"tensorboard"``, or a tuple of them), as in SB3."""
        self.values[key] = value
        self.excluded[key] = (exclude,) if isinstance(exclude, str) else tuple(exclude or ())

    def record_mean(self, key: str, value: Any, exclude: Any = None) -> None:
        """Set ``key`` to the mean of the values given until the next :meth:`dump` (SB3's)."""
        mean, n = self._means.get(key, (0.0, 0))
        self._means[key] = (mean + (value - mean) / (n + 1), n + 1)
        self.record(key, self._means[key][0], exclude)

    def _values_for(self, output: str) -> dict[str, Any]:
        """The recorded values that ``output`` shows."""
        names = ("stdout", "log") if output == "stdout" else (output,)  # SB3's two for the screen
        return {
            key: value
            for key, value in self.values.items()
            if not set(names) & set(self.excluded.get(key, ()))
        }

    def get_dir(self) -> str | None:
        """The log folder as a string, or None (SB3's logger's name)."""
        return None if self.dir is None else str(self.dir)

    def dump(self, step: int = 0) -> None:
        """Write the recorded values as one row, then clear them."""
        if not self.values:
            return
        shown = self._values_for("stdout")
        if self.verbose >= 1 and shown:
            print(_table(shown), flush=True)
        values = self._values_for("csv")
        if self.dir is not None and values:
            path = self.dir / "progress.csv"
            new = [k for k in values if k not in self.columns]
            if new:  # a new column: the file is rewritten whole, atomically, never in place
                text = path.read_bytes().decode() if self.columns else ""  # newlines kept
                rows = list(csv.DictReader(io.StringIO(text)))
                self.columns = list(dict.fromkeys([*self.columns, *LOG_KEYS, *sorted(new)]))
                _write_csv_atomic(path, self.columns, rows)
            line = io.StringIO()
            csv.DictWriter(line, self.columns).writerow(values)
            with path.open("a", newline="") as f:  # one write: a row is all there or not at all
                f.write(line.getvalue())
        if self._writer is not None:
            for key, value in self._values_for("tensorboard").items():
                if isinstance(value, (int, float, np.number)):
                    self._writer.add_scalar(key, value, step)
            self._writer.flush()
        self.values = {}
        self._means = {}
        self.excluded = {}

    def close(self) -> None:
        """Close the TensorBoard writer, if one was opened."""
        if self._writer is not None:
            self._writer.close()


def _table(values: dict[str, Any]) -> str:
    """SB3's log table: keys grouped by what comes before their "/"."""
    rows: list[tuple[str, str]] = []
    for group in sorted({k.split("/")[0] for k in values}, key=lambda g: (g in values, g)):
        keys = sorted(k for k in values if k.split("/")[0] == group)
        rows += [] if keys == [group] else [(f"{group}/", "")]
        for key in keys:
            text = f"{values[key]:<.4g}" if isinstance(values[key], float) else str(values[key])
            rows.append((key if "/" not in key else "    " + key.split("/", 1)[1], text))
    width_k = max(len(k) for k, _ in rows)
    width_v = max(len(v) for _, v in rows)
    line = "-" * (width_k + width_v + 7)
    return "\n".join([line, *(f"| {k:<{width_k}} | {v:<{width_v}} |" for k, v in rows), line])


def _write_csv_atomic(path: Path, columns: list[str], rows: list[dict[str, str]]) -> None:
    with atomic_file(path, "w") as f:
        writer = csv.DictWriter(f, columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def _tensorboard_writer(folder: Path) -> Any:
    for module in ("torch.utils.tensorboard", "tensorboardX"):
        with contextlib.suppress(ImportError):
            return importlib.import_module(module).SummaryWriter(str(folder))
    warn(
        "tensorboard_log: no TensorBoard writer is installed, so only progress.csv is written "
        "(pip install tensorboard)"
    )
    return None


def _is_sb3_callback(callback: Any) -> bool:
    """An SB3-style callback object: ``on_step`` runs after every env step, as in SB3."""
    return hasattr(callback, "on_step") and hasattr(callback, "init_callback")


class _Callbacks:
    """What ``learn`` calls: SB3 callbacks per env step, functions and ars's per iteration."""

    def __init__(self, callback: Any, model: Any, progress_bar: bool = False):
        items = callback if isinstance(callback, (list, tuple)) else [callback]
        items = [cb for cb in items if cb is not None] + ([_ProgressBar()] if progress_bar else [])
        for cb in items:
            if not (_is_sb3_callback(cb) or hasattr(cb, "on_iteration") or callable(cb)):
                kinds = "a function f(locals, globals), an SB3 callback or ars's EvalCallback"
                raise TypeError(f"callback must be {kinds}; got {cb!r:.100}")
        self.model = model
        self.items = items
        self.per_step = [cb for cb in items if _is_sb3_callback(cb)]
        self.stateful = [c for c in items if hasattr(c, "state_dict") and c not in self.per_step]
        self.hook("init_callback", model)

    def hook(self, name: str, *args: Any) -> None:
        for cb in self.items:
            if hasattr(cb, name):
                getattr(cb, name)(*args)

    def on_iteration(self, locals_: dict) -> bool:
        keep_going = True
        for cb in self.items:
            if hasattr(cb, "on_iteration"):
                keep_going &= cb.on_iteration() is not False
            elif cb not in self.per_step:
                keep_going &= cb(locals_, globals()) is not False
        return keep_going

    def state_dict(self) -> dict[str, Any]:
        """The state of the callbacks that have one (saved in checkpoints), each under its own
        key: its class's name, then ``#2``, ``#3`` for later ones of the class."""
        return {key: cb.state_dict() for key, cb in zip(self.keys(), self.stateful)}

    def load_state_dict(self, states: dict[str, Any]) -> None:
        """Give each callback the state saved under its key."""
        for key, cb in zip(self.keys(), self.stateful):
            if key in states:
                cb.load_state_dict(states[key])

    def keys(self) -> list[str]:
        """The callbacks' keys in the saved state, in the callbacks' order."""
        names = [type(cb).__name__ for cb in self.stateful]
        counts = [names[: i + 1].count(name) for i, name in enumerate(names)]
        return [name if n == 1 else f"{name}#{n}" for name, n in zip(names, counts)]

    def on_step(self, action: Any, transition: tuple) -> None:
        """SB3 callbacks' ``on_step`` as SB3 calls it: after each env step in this process,
        ``num_timesteps`` counted up to it."""
        obs, reward, terminated, truncated, info = transition
        self.model.num_timesteps += 1
        done = np.array([terminated or truncated])
        rewards = np.array([reward])
        given = dict(actions=np.asarray(action)[None], new_obs=np.asarray(obs)[None])
        self._sb3_step(dict(given, rewards=rewards, dones=done, infos=[info]))

    def after_rollouts(self, results: Sequence[Result]) -> None:
        """After workers' rollouts: ``dones`` per step of the model's ``n_envs`` envs, so that
        a callback counting ``num_envs`` per call (SB3's progress bar) counts every step."""
        dones = [np.arange(1, n + 1) == n for r in results for n in r.lengths.tolist()]
        dones = np.concatenate(dones) if dones else np.zeros(0, bool)
        for start in range(0, len(dones), self.model.n_envs):
            batch = dones[start : start + self.model.n_envs]
            self.model.num_timesteps += len(batch)
            self._sb3_step(dict(dones=batch, infos=[{} for _ in batch]))

    def _sb3_step(self, extra: dict[str, Any]) -> None:
        for cb in self.per_step:
            if hasattr(cb, "update_locals"):
                cb.update_locals({"self": self.model, **extra})
            if cb.on_step() is False:
                raise StopTraining


class _ProgressBar:
    """``learn(progress_bar=True)``: a tqdm bar over the timesteps."""

    def init_callback(self, model: Any) -> None:
        self.model = model
        self.tqdm = require("tqdm", "pip install tqdm (ars's 'progress' extra)")

    def on_training_start(self, locals_: dict, globals_: dict) -> None:
        self.start = self.model.num_timesteps
        self.bar = self.tqdm.tqdm(total=locals_["total_timesteps"] - self.start, unit="steps")

    def on_iteration(self) -> None:  # only a False return stops training
        self.bar.update(self.model.num_timesteps - self.start - self.bar.n)

    def on_training_end(self) -> None:
        self.bar.total = max(self.bar.total, self.bar.n)  # the last iteration may overshoot
        self.bar.close()


class EvalCallback:
    """Evaluate the policy every ``eval_freq`` timesteps on a separate env; keep the best model.

    SB3's parameters, with ARS's protocol: evaluations happen between iterations (the first
    when training starts), are deterministic, use the env's own rewards (no
    ``alive_bonus_offset``) and episode seeds of their own: the EVALUATION stream of
    ``seed`` (default: the model's). Results go to the log (``eval/...``), to
    ``evaluations`` as ``(timesteps, train_seconds, mean, std)`` (the training time, without
    the evaluations'), to ``best_model_save_path`` and, with ``log_path``, to
    ``evaluations.npz``. ``eval_concurrency`` runs the episodes in that many worker
    processes (the eval env is then an id or a function); ``job_timeout`` bounds each
    episode's seconds. ``deterministic`` and ``warn`` are accepted for SB3 compatibility."""

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
        seed: int | None = None,
        best_model_name: str = "best_model.zip",
        job_timeout: float | None = None,
    ):
        self.eval_env = eval_env
        self.callback_on_new_best = callback_on_new_best
        self.callback_after_eval = callback_after_eval
        self.n_eval_episodes = n_eval_episodes
        self.eval_freq = eval_freq
        self.deterministic = deterministic  # SB3's; ARS's policies are deterministic anyway
        self.render = render
        self.verbose = verbose
        self.warn = warn
        self.eval_concurrency = eval_concurrency
        self.seed = seed
        self.best_model_name = best_model_name
        self.job_timeout = job_timeout
        check_setting("n_eval_episodes", n_eval_episodes)
        check_setting("verbose", verbose, table=MODEL_SETTINGS)
        check_integer("eval_freq", eval_freq, 1)
        check_integer("eval_concurrency", eval_concurrency, 1)
        if eval_concurrency > 1 and (isinstance(eval_env, gym.Env) or render):
            raise ValueError(
                "eval_concurrency > 1 needs the eval env as an id or a function, to "
                "build it in each worker, and cannot render"
            )
        self.log_path = None if log_path is None else Path(log_path)
        self.best_model_save_path = None
        if best_model_save_path is not None:
            self.best_model_save_path = Path(best_model_save_path)
        self.evaluations: list = []
        self.evaluations_results: list = []
        self.evaluations_length: list = []
        self.best_mean_reward = -np.inf
        self.last_mean_reward = -np.inf
        self._next = 0
        self._train_seconds = 0.0
        self._mark = time.perf_counter()  # training time is counted from here, or from learn()
        self._evaluator = None

    def init_callback(self, model: Any) -> None:
        """SB3's: remember the model, and build the evaluation envs once."""
        self.model = model
        if self._evaluator is None:  # with workers, an id is built in each
            n = self.eval_concurrency
            env = self.eval_env
            if isinstance(env, str):  # the model's own env id: with its kwargs
                kwargs = env_kwargs_for(env, None, model.env_id, model.env_kwargs)
                env = functools.partial(make_env, env, kwargs)
            timeout = self.job_timeout
            if n > 1:
                self._evaluator = AsyncEval([env] * n, job_timeout=timeout or DEFAULT_JOB_TIMEOUT)
            else:
                self._evaluator = InProcessEval(env, job_timeout=timeout)
        for child in (self.callback_on_new_best, self.callback_after_eval):
            if child is not None:
                child.parent = self
                child.init_callback(model)

    def on_training_start(self, locals_: dict, globals_: dict) -> None:
        """Evaluate at the start when the schedule is due (a resumed run's)."""
        self._mark = time.perf_counter()
        if self.model.num_timesteps >= self._next:  # a resumed run evaluates on its schedule
            self.evaluate()

    @property
    def evaluations_timesteps(self) -> list[int]:
        """SB3's: the timesteps of each evaluation (``evaluations_results``'s rows)."""
        return [e[0] for e in self.evaluations]

    def follow_schedule(self) -> None:
        """Evaluate next at the first multiple of ``eval_freq`` past the last evaluation (after
        ``eval_freq`` changed, as on a resume with another budget)."""
        last = self.evaluations[-1][0] if self.evaluations else None
        self._next = 0 if last is None else (last // self.eval_freq + 1) * self.eval_freq

    def on_iteration(self) -> bool:
        """Evaluate when the next evaluation is due; False (from a child) stops training."""
        if self.model.num_timesteps < self._next:
            return True
        return self.evaluate()

    def evaluate(self) -> bool:
        """Evaluate now, log it and write its files; False when a child callback asks to stop
        training."""
        self._train_seconds += time.perf_counter() - self._mark
        model = self.model
        env = getattr(self._evaluator, "env", None)
        seed = model.seed if self.seed is None else self.seed
        seeds = evaluation_seeds(seed, self.n_eval_episodes)
        render = (lambda *_: env.render()) if self.render else None
        seen = observations_seen_by(model)
        max_steps = model.max_episode_steps
        results = evaluate_episodes(model.policy, self._evaluator, seeds, max_steps, seen, render)
        returns = np.array([r.returns[0] for r in results])
        lengths = [int(r.lengths[0]) for r in results]
        if not np.isfinite(returns).all():  # as in training: a record of it could not be kept
            seed = int(seeds[np.flatnonzero(~np.isfinite(returns))[0]])
            raise FloatingPointError(
                f"an evaluation at {model.num_timesteps:,} steps gave a non-finite return (nan "
                f"or inf rewards) in the episode of env seed {seed}"
            )
        mean = float(returns.mean())
        std = float(returns.std())
        self.last_mean_reward = mean
        self.evaluations.append((model.num_timesteps, self._train_seconds, mean, std))
        self.evaluations_results.append(returns.tolist())
        self.evaluations_length.append(lengths)
        steps = model.num_timesteps  # the schedule: 0, f, 2f, ... reached
        freq = self.eval_freq
        self._next += max(0, (steps - self._next) // freq + 1) * freq  # a step, never a loop
        new_best = mean > self.best_mean_reward
        self.best_mean_reward = max(mean, self.best_mean_reward)
        self._write(new_best)
        records = dict(mean_reward=mean, std_reward=std, mean_ep_length=float(np.mean(lengths)))
        for key, value in dict(records, best_mean_reward=self.best_mean_reward).items():
            model.logger.record(f"eval/{key}", value)
        if self.verbose >= 1:
            rewards = f"episode_reward={mean:.2f} +/- {std:.2f}, best {self.best_mean_reward:.2f}"
            print(f"Eval num_timesteps={model.num_timesteps}, {rewards}", flush=True)
        children = [self.callback_after_eval]
        if new_best:
            children.insert(0, self.callback_on_new_best)
        keep_going = all([child.on_step() is not False for child in children if child is not None])
        self._mark = time.perf_counter()
        return keep_going

    def _write(self, new_best: bool) -> None:
        """The evaluations to ``evaluations.npz``, and a new best model to its file."""
        if self.log_path is not None:
            arrays = dict(results=self.evaluations_results, ep_lengths=self.evaluations_length)
            with atomic_file(self.log_path / "evaluations.npz", "wb") as f:
                np.savez(f, timesteps=[e[0] for e in self.evaluations], **arrays)
        if new_best and self.best_model_save_path is not None:
            self.model.save(self.best_model_save_path / self.best_model_name)

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

        def numbers(rows):
            return isinstance(rows, list) and all(
                isinstance(row, list) and all(map(_is_number, row)) for row in rows
            )

        best = state.get("best_mean_reward") if isinstance(state, dict) else None
        if not (
            isinstance(state, dict)
            and is_int(state.get("next"))
            and _is_number(state.get("train_seconds"))
            and (_is_number(best) or best == -math.inf)
            and all(numbers(state.get(key)) for key in ("evaluations", "results", "lengths"))
        ):
            raise ValueError(
                "the EvalCallback state must hold next, train_seconds, best_mean_reward and "
                f"lists of numbers evaluations, results, lengths; got {state!r:.200}"
            )
        self._next = int(state["next"])
        self._train_seconds = float(state["train_seconds"])
        self.best_mean_reward = float(state["best_mean_reward"])
        self.evaluations = [tuple(e) for e in state["evaluations"]]
        self.evaluations_results = [list(r) for r in state["results"]]
        self.evaluations_length = [list(n) for n in state["lengths"]]

    def on_training_end(self) -> None:
        """Close the evaluation workers this callback started."""
        if isinstance(self._evaluator, AsyncEval):
            self._evaluator.close()
            self._evaluator = None


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
    job_timeout: float | None = None,
) -> tuple[float, float] | tuple[list[float], list[int]]:
    """Mean and std of the return of ``model`` (an ARS or a policy) over ``n_eval_episodes``.

    SB3's signature. Rewards are the env's own (no ``alive_bonus_offset``); the episodes'
    env seeds come from the EVALUATION stream of ``seed`` (default: the model's seed, else
    0). With ``return_episode_rewards``, returns the lists of episode returns and lengths.
    ``callback(locals, globals)`` runs after every step; ``render`` renders every step;
    ``reward_threshold`` raises below it; ``job_timeout`` (ars's) bounds each episode's
    seconds."""
    if isinstance(env, str):  # the model's own env id: with its kwargs
        recorded = getattr(model, "env_kwargs", None)  # a policy alone has none
        env = make_env(env, env_kwargs_for(env, None, getattr(model, "env_id", None), recorded))
    parts = resolve_env(env)  # the env's VecNormalize, else the one trained on
    gym_env = parts.gym_env
    given = parts.vec_normalize
    seen = given if getattr(given, "norm_obs", False) else observations_seen_by(model)
    seeds = evaluation_seeds(getattr(model, "seed", 0) if seed is None else seed, n_eval_episodes)

    def on_step(action: Any, transition: tuple) -> None:
        if render:
            gym_env.render()
        if callback is not None:
            callback({"actions": action, "transition": transition, "model": model}, globals())

    hook = on_step if (render or callback is not None) else None
    policy = policy_of(model)
    max_steps = getattr(model, "max_episode_steps", None)
    if max_steps is not None:  # a policy's attribute (a model's was checked when set)
        max_steps = check_setting("max_episode_steps", max_steps)
    evaluator = InProcessEval(gym_env, job_timeout=job_timeout)
    results = evaluate_episodes(policy, evaluator, seeds, max_steps, seen, hook)
    returns = [float(r.returns[0]) for r in results]
    mean = float(np.mean(returns))
    if reward_threshold is not None and mean < reward_threshold:
        raise AssertionError(f"mean reward below threshold: {mean:.2f} < {reward_threshold:.2f}")
    if return_episode_rewards:
        return returns, [int(r.lengths[0]) for r in results]
    return mean, float(np.std(returns))


# == Files: models as plain arrays and JSON in an .npz (a zip), never pickle ======================
# Reading checks what is cheap first: the member names, the metadata's size, and every size
# the metadata implies (spaces, parameters, arrays) against the caps, before anything is
# decompressed, built or allocated. The model is then built by the constructors that build
# any model, so a file's settings, policy options and weights pass the checks that the
# arguments of ARS() pass. Settings that name paths (tensorboard_log) are never read.

FORMAT = "ars-numpy"
FORMAT_VERSION = 2
MAX_METADATA_BYTES = 4 << 20
SAVED = tuple(k for k in HPARAMS if k not in ("policy_kwargs", "tensorboard_log", "device"))
METADATA_FIELDS = set(
    "format format_version kind ars_version policy policy_kwargs observation_space action_space "
    "system_info hparams env_id env_kwargs num_timesteps n_updates schedules ep_info_buffer "
    "callbacks "
    "included vec_normalize rng_state".split()
)  # rng_state: format 1's generator state; the streams need none, so it is read past


def _write_npz(target: Any, arrays: dict[str, np.ndarray]) -> Path | None:
    """``np.savez`` to a file object, or atomically to a path (SB3's: no suffix, ``.zip``)."""
    if hasattr(target, "write"):
        np.savez(target, **arrays)
        return None
    path = Path(target) if Path(target).suffix else Path(target).with_suffix(".zip")
    with atomic_file(path, "wb") as f:
        np.savez(f, **arrays)
    return path


def _space_to_json(space: spaces.Space) -> dict[str, Any]:
    if isinstance(space, spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, spaces.MultiDiscrete):
        return {"type": "MultiDiscrete", "nvec": space.nvec.tolist(), "start": space.start.tolist()}
    if isinstance(space, spaces.MultiBinary):
        return {"type": "MultiBinary", "n": np.asarray(space.n).tolist()}

    def bound(v):
        return v.flat[0].item() if v.size and (v == v.flat[0]).all() else v.tolist()

    low = bound(space.low)  # one number when all agree
    high = bound(space.high)
    return dict(type="Box", low=low, high=high, shape=list(space.shape), dtype=str(space.dtype))


def _space_size(data: Any, where: str) -> int:
    """The flat size of a space's JSON (``spaces.flatdim``), checked, before it is built."""
    kinds = {"Box": "shape", "Discrete": "n", "MultiDiscrete": "nvec", "MultiBinary": "n"}
    if not isinstance(data, dict) or data.get("type") not in kinds:
        raise ValueError(
            f"{where} must be a Box, Discrete, MultiDiscrete or MultiBinary space; "
            f"got {data!r:.200}"
        )
    sizes = data.get(kinds[data["type"]])
    sizes = np.asarray(sizes if isinstance(sizes, list) else [sizes], dtype=object).reshape(-1)
    if not (len(sizes) <= 10**6 and all(_is_count(n, MAX_PARAMETERS) for n in sizes)):
        raise ValueError(f"{where} is not a valid space (sizes must be integers); got {data!r:.99}")
    size = int(sum(sizes)) if data["type"] == "MultiDiscrete" else math.prod(int(n) for n in sizes)
    if size > MAX_PARAMETERS:
        raise ValueError(f"{where} has {size:,} elements; ars takes at most {MAX_PARAMETERS:,}")
    return size


def _space_from_json(data: dict[str, Any], where: str) -> spaces.Space:
    """A space from its JSON, whose size :func:`_space_size` has checked."""
    try:
        if data["type"] == "Discrete":
            return spaces.Discrete(data["n"], start=data.get("start", 0))
        if data["type"] == "MultiBinary":
            return spaces.MultiBinary(data["n"])
        if data["type"] == "MultiDiscrete":
            nvec, start = (np.array(data[k], np.int64) for k in ("nvec", "start"))
            return spaces.MultiDiscrete(nvec, start=start)
        shape = tuple(data["shape"])
        dtype = np.dtype(data["dtype"])
        if dtype.kind not in "fiu" or len(shape) > 32:
            raise ValueError(f"dtype {dtype} and shape {shape}: a number type, at most 32 axes")

        def bound(v):
            return np.array(v, dtype).reshape(shape) if isinstance(v, list) else v

        return spaces.Box(bound(data["low"]), bound(data["high"]), shape=shape, dtype=dtype)
    except (KeyError, TypeError, ValueError, OverflowError, AssertionError) as error:
        raise ValueError(f"{where} is not a valid space ({_one_line(error)})") from error


# The public attributes every ARS model has beyond its class's and its settings: a file's
# "included" extras may never be one of them.
MODEL_STATE = (
    "hparams hparams_initial policy_class policy num_timesteps n_updates ep_info_buffer gym_env "
    "env_id env_kwargs observation_space action_space".split()
)


def _reserved(name: str) -> bool:
    """Whether ``name`` is part of every ARS model (so never a file's extra)."""
    return name in MODEL_STATE or name in HPARAMS or hasattr(ARS, name)


def _model_contents(
    model: Any, scheduled: dict, exclude: Any, include: Any, callbacks: Any
) -> dict[str, np.ndarray]:
    """What a model's file holds (:meth:`ARS.save`'s arguments; ``scheduled``: each setting's
    value now): ``exclude`` drops settings or the episode window, ``include`` adds the
    model's public attributes that hold JSON, a checkpoint adds the ``callbacks``' state."""
    meta = _metadata(model, "model", scheduled)
    for name in set(exclude or ()) - set(include or ()):  # as in SB3: include wins
        (meta if name == "ep_info_buffer" else meta["hparams"]).pop(name, None)
    included = {}
    for name in include or ():
        if name in HPARAMS or name in meta:  # saved anyway
            continue
        if _reserved(name):
            raise ValueError(f"include={name!r}: it is part of every ARS model, not an extra")
        included[name] = getattr(model, name)
        try:
            json.dumps(included[name])
        except TypeError:
            what = type(included[name]).__name__
            raise ValueError(f"include={name!r}: {what} is not JSON") from None
    if included:
        meta["included"] = included
    if callbacks is not None:
        meta["callbacks"] = callbacks.state_dict()
    return _arrays(model.policy, meta)


def _metadata(model: Any, kind: str = "model", scheduled: dict | None = None) -> dict[str, Any]:
    """The plain-data description of a model (or, with ``kind="policy"``, of its policy);
    ``scheduled``: the value now of each setting that is a schedule."""
    policy = model.policy if kind == "model" else model
    header = dict(format=FORMAT, format_version=FORMAT_VERSION, kind=kind, ars_version=__version__)
    meta = dict(header, policy=policy.policy_name, policy_kwargs=policy.config())
    meta.update({k: _space_to_json(getattr(policy, k)) for k in SPACE_KEYS})
    meta["system_info"] = _system_info()
    if kind == "model":
        hp = model.hparams  # a schedule that is one number (SB3's ConstantSchedule) is saved

        def changing(k):
            return callable(hp[k]) and len({hp[k](p) for p in (1.0, 0.5, 0.0)}) > 1

        schedules = [k for k in SCHEDULED if changing(k)]  # as that number, and not named here
        now = {**hp, **(scheduled or {})}
        meta["hparams"] = {k: now[k] for k in SAVED}
        remade = model.env_kwargs is not None  # else kwargs no file holds: no env named
        kwargs = check_env_kwargs(model.env_kwargs) if remade else {}  # as loading checks them
        meta.update(env_id=model.env_id if remade else None, env_kwargs=kwargs)
        meta["num_timesteps"] = model.num_timesteps
        meta["n_updates"] = model.n_updates
        episodes = [[e["r"], e["l"]] for e in model.ep_info_buffer]
        meta.update(schedules=schedules, ep_info_buffer=episodes)
    seen = observations_seen_by(model)
    if seen is not None:  # what an evaluation on a raw env needs to see what it saw
        moments = {k: np.ravel(getattr(seen.obs_rms, k)).tolist() for k in ("mean", "var")}
        scalars = dict(clip_obs=float(seen.clip_obs), epsilon=float(seen.epsilon))
        meta["vec_normalize"] = {**moments, **scalars}
    return meta


def _system_info() -> dict[str, str]:
    import platform

    versions = __version__, platform.python_version(), np.__version__, gym.__version__
    return dict(zip("ars python numpy gymnasium".split(), versions), os=platform.platform())


def _arrays(policy: Any, meta: dict[str, Any]) -> dict[str, np.ndarray]:
    """What a file holds: the parameters, V2's statistics, and the metadata as JSON; checked
    as loading checks them, so that ars never writes a file it would refuse to read."""
    rms = policy.obs_rms
    arrays = {"parameters": policy.parameters_to_vector()}
    if rms is not None:
        arrays.update(obs_rms_mean=rms.mean, obs_rms_var=rms.var, obs_rms_count=np.array(rms.count))
    try:
        check_state(policy.state_dict(), policy.shapes())  # the check of loading
    except ValueError as error:
        raise ValueError(f"cannot save: {error}") from None
    return {**arrays, "metadata": np.array(json.dumps(meta))}


def _member(archive: zipfile.ZipFile, name: str, limit: int, where: str) -> Any:
    """A member opened for reading, if its header says at most ``limit`` bytes and it is
    stored or deflated (Python inflates LZMA and bzip2 without a bound), not encrypted."""
    info = archive.getinfo(name)
    if info.flag_bits & 0x1:
        raise ValueError(f"{where}: member {name} is encrypted; a model's members are not")
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise ValueError(
            f"{where}: member {name} is compressed with method "
            f"{info.compress_type}; ars reads stored or deflated members"
        )
    if info.file_size > limit:
        raise ValueError(f"{where}: member {name} is larger than a model's could be")
    return archive.open(name)


def _read_member(archive: zipfile.ZipFile, name: str, limit: int, where: str) -> bytes:
    """A member's bytes, at most ``limit`` of them, whatever its header says."""
    with _member(archive, name, limit, where) as f:
        content = f.read(limit + 1)
    if len(content) > limit:
        raise ValueError(f"{where}: member {name} holds more than its header says")
    return content


def _npy(archive: zipfile.ZipFile, name: str, shape: tuple, kinds: str, where: str) -> np.ndarray:
    """The array ``name.npy``: its header is checked, then it is read straight into an array
    of the expected shape (no second copy of a large file in memory)."""
    limit = MAX_METADATA_BYTES if name == "metadata" else 8 * math.prod(shape) + 4096
    with _member(archive, f"{name}.npy", limit, where) as f:
        try:
            version = np.lib.format.read_magic(f)
            if version not in ((1, 0), (2, 0)):
                raise ValueError(f"npy format {version}")
            header = getattr(np.lib.format, f"read_array_header_{version[0]}_0")(f)
            found = header[0]  # (shape, fortran_order, dtype)
            dtype = header[2]
        except (ValueError, TypeError, SyntaxError, EOFError) as error:
            raise ValueError(f"{where}: {name} is not a valid array ({error})") from error
        shorter = name == "parameters" and len(found) == 1 and found[0] <= shape[0]
        if dtype.hasobject or dtype.kind not in kinds or not (found == shape or shorter):
            raise ValueError(  # 0-d or 1-d arrays: any order is the same bytes
                f"{where}: {name} holds {found} of {dtype}; expected {shape} of kind "
                f"{kinds!r} (object arrays are never loaded)"
            )
        array = np.empty(found, dtype)
        buffer = memoryview(array.reshape(-1)).cast("B")  # filled 256 KB at a time: no copy
        done = 0
        while done < len(buffer):
            n = f.readinto(buffer[done : done + (1 << 18)])
            if not n:  # the file ended early
                break
            done += n
        if done < len(buffer) or f.read(1):
            raise ValueError(f"{where}: {name} is truncated, or holds more than its header says")
    return array


def read_model_file(source: Any, env: Any = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The checked metadata (spaces built) and state dict of a file of :meth:`ARS.save`,
    :meth:`ARSPolicy.save` or sb3-contrib's ``ARS.save`` (with torch; ``env`` for the spaces
    SB3 abbreviated). No code in a file ever runs, and nothing is allocated before its size
    is checked."""
    mode = stat.S_IFREG  # a file in memory (BytesIO) ends
    if hasattr(source, "read"):
        where = getattr(source, "name", "the given file object")
        with contextlib.suppress(AttributeError, OSError, ValueError):
            mode = os.fstat(source.fileno()).st_mode
    else:
        path = Path(source)  # SB3's rule: a name without a suffix may mean .zip
        names = [path] + [path.with_suffix(s) for s in (".zip", ".npz") if not path.suffix]
        path = next((p for p in names if p.exists()), path)
        where = str(path)
        with contextlib.suppress(OSError):  # none: open's FileNotFoundError names it
            mode = path.stat().st_mode
    if not stat.S_ISREG(mode):  # checked before open: a device is endless, a FIFO blocks
        raise ValueError(f"{where} is not a regular file: a model is a file ARS.save wrote")
    f = source if hasattr(source, "read") else path.open("rb")
    try:
        archive, names = _open_zip(f, where, 64)
        with archive:
            if SB3_CONTRIB_MEMBERS <= names:
                return _read_sb3_contrib(archive, where, env)
            if "metadata.npy" not in names:  # the other members: as the metadata implies
                raise ValueError(
                    f"{where} is a zip archive but not a model written by ars "
                    f"(members: {sorted(names)[:8]})"
                )
            meta = _json(str(_npy(archive, "metadata", (), "U", where)), f"{where}: the metadata")
            meta = _check_metadata(meta, where)
            return meta, _read_arrays(archive, names, meta, where)
    except (zipfile.BadZipFile, OSError, EOFError, zlib.error, UnicodeDecodeError) as error:
        how = f"({_one_line(error)}); is it truncated, or written by another program?"
        raise ValueError(f"{where} is not a readable ars model file {how}") from error
    finally:
        if not hasattr(source, "read"):
            f.close()


# What ARS.load's custom_objects may replace beyond the settings, and the check of each.
def _is_space(value: Any) -> bool:
    return isinstance(value, Space)


def _is_env_id(value: Any) -> bool:
    return value is None or isinstance(value, str)


def _is_env_kwargs(value: Any) -> bool:
    try:
        check_env_kwargs(value)
    except ValueError:
        return False
    return True


FILE_FIELDS: dict[str, Callable[[Any], bool]] = dict(
    num_timesteps=_is_count,
    n_updates=_is_count,
    env_id=_is_env_id,
    env_kwargs=_is_env_kwargs,
    observation_space=_is_space,
    action_space=_is_space,
)


def _custom_objects(meta: dict, custom_objects: dict) -> dict[str, Any]:
    """SB3's ``custom_objects`` applied to a file's metadata: those of FILE_FIELDS replace the
    file's, each checked; the settings the file holds are returned, to override its own; the
    rest are ignored, as SB3 ignores them."""
    fields = {k: v for k, v in custom_objects.items() if k in FILE_FIELDS}
    for key, value in fields.items():
        if not FILE_FIELDS[key](value):
            raise ValueError(f"custom_objects[{key!r}] cannot be {value!r:.60}")
    meta.update(fields)
    held = {*meta.get("hparams", {}), "policy_kwargs"}
    return {k: v for k, v in custom_objects.items() if k in held}


def policy_parameters(params: Any, env: Any = None) -> dict[str, Any]:
    """``set_parameters``' input as a policy's ``state_dict``: from a model file (of ``env``'s
    spaces), or from a :meth:`ARS.get_parameters` dict."""
    if isinstance(params, (str, os.PathLike)) or hasattr(params, "read"):
        built = _build_policy(*read_model_file(params, env), str(params))
        return built.state_dict()
    groups = params if isinstance(params, dict) else {}
    if set(groups) != {"policy"} or not isinstance(groups["policy"], dict):
        raise ValueError(
            f"expected a path, or {{'policy': {{name: array}}}} as get_parameters()"
            f" returns (an ARS model has only 'policy'); got {params!r:.60}"
        )
    return params["policy"]


def model_from_file(meta: dict, state: dict, where: str, env: Any = None, **overrides: Any) -> ARS:
    """:meth:`ARS.load`'s model from what :func:`read_model_file` read (the CLI reads once):
    built by ``ARS()``'s own check, with the file's policy and counters."""
    if meta["kind"] != "model":
        raise ValueError(f"{where} holds a policy alone: load it with ARSPolicy.load")
    given_kwargs = overrides.pop("env_kwargs", None)  # else the file's, for its own env
    for name in set(overrides) & set(HPARAMS):  # the caller's values: messages without the file
        check_setting(name, overrides[name], table=MODEL_SETTINGS)
    schedules = meta.get("schedules", [])
    for name in [n for n in schedules if n not in overrides]:
        value = meta["hparams"].get(name, DEFAULTS[name])
        warn(f"{where}: {name} was a schedule, saved as {value}; pass {name}= to ARS.load")
    try:
        given = overrides.get("policy_kwargs")
        saved = policy_options(meta["policy"], meta["policy_kwargs"])
        if given is not None and policy_options(meta["policy"], given) != saved:
            raise ValueError(
                f"policy_kwargs shape a policy when it is built, and the file's is built with "
                f"{meta['policy_kwargs']}: load it without policy_kwargs"
            )
        recorded = check_env_kwargs(meta.get("env_kwargs"))  # older files: none
        settings = {**meta["hparams"], "policy_kwargs": meta["policy_kwargs"], **overrides}
        model = ARS(meta["policy"], _init_setup_model=False, **settings)
        if model.normalize_obs != ("obs_rms.mean" in state):  # V2 needs the file's statistics
            what = "lacks" if model.normalize_obs else "holds"
            raise ValueError(f"normalize_obs is {model.normalize_obs}; the file {what} V2's")
    except ValueError as error:  # not TypeError: ARS() names an override it does not take
        raise ValueError(f"{where}: {error}") from None
    if any(map(_reserved, meta.get("included", {}))):  # a file adds, never replaces
        raise ValueError(
            f"{where}: 'included' must be a dict of public attributes the model lacks "
            f"(never its own); got {meta['included']!r:.200}"
        )
    meta["policy_kwargs"] = model.policy_kwargs or {}  # the file's, or those given
    model.policy = _build_policy(meta, state, where)  # and the VecNormalize it learned through
    model.observation_space = model.policy.observation_space
    model.action_space = model.policy.action_space
    model.env_id = meta.get("env_id")
    model.env_kwargs = recorded
    model.num_timesteps = meta["num_timesteps"]
    model.n_updates = meta["n_updates"]
    model.ep_info_buffer.extend({"r": float(r), "l": int(n)} for r, n in meta["ep_info_buffer"])
    for name, value in meta.get("included", {}).items():
        setattr(model, name, value)
    if env is not None or given_kwargs is not None:  # an id: the file's kwargs, and those given
        model.set_env(model.env_id if env is None else env, env_kwargs=given_kwargs)
    return model


def _build_policy(meta: dict, state: dict | None, where: str) -> ARSPolicy:
    """The policy the metadata describes, built (so checked and capped) as any policy is, with
    the weights and statistics of ``state``, which ``load_state_dict`` checks as any."""
    try:
        cls = POLICY_CLASSES[meta["policy"]]
        policy = cls(meta["observation_space"], meta["action_space"], **meta["policy_kwargs"])
        if state is not None:
            theta = state.get("parameters")
            state = dict(state)
            if theta is not None:  # a file's flat vector: its layers, by sb3-contrib's names
                if theta.shape != (policy.n_params,):
                    raise ValueError(f"parameters: {theta.shape}; expected ({policy.n_params},)")
                state.update(policy._named(state.pop("parameters")))
            has = "obs_rms.mean" in state  # V2's statistics
            policy.obs_rms = RunningMeanStd((policy.obs_dim,)) if has else None
            policy.load_state_dict(state)
            policy.vec_normalize = meta.get("vec_normalize")  # evaluations see what it learned on
        return policy
    except (ValueError, TypeError, NotImplementedError, RuntimeError) as error:
        raise ValueError(f"{where}: {error}") from None


def _open_zip(f: Any, where: str, most: int) -> tuple[zipfile.ZipFile, set[str]]:
    """A zip of at most ``most`` members, counted before Python builds its directory, and its
    member names; a name listed twice is refused (readers differ on which member is the one)."""
    end = zipfile._EndRecData(f)  # None: not a zip, which ZipFile says
    n = end[zipfile._ECD_ENTRIES_TOTAL] if end else 0
    if n > most:
        raise ValueError(f"{where} lists {n:,} members; a model file has a few")
    archive = zipfile.ZipFile(f)
    listed = archive.namelist()
    twice = sorted({n for n in listed if listed.count(n) > 1})
    if twice:
        raise ValueError(f"{where} holds two members named {twice[0]!r}: a file names each once")
    return archive, set(listed)


def _json(text: str | bytes, where: str) -> Any:
    """Parsed JSON, or a ValueError naming the file (also if too deep, too long or too many)."""
    if sum(map((text if isinstance(text, bytes) else text.encode()).count, (b"{", b"["))) > 10**4:
        raise ValueError(f"{where} is not model metadata: it holds over 10,000 lists or objects")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as error:
        raise ValueError(f"{where} is not valid JSON ({error})") from None


def _check_metadata(meta: Any, where: str) -> dict[str, Any]:
    """The metadata: its fields of the right types, the policy's options (the core's check),
    its sizes within the caps, its spaces built. The settings are checked as ARS() checks them."""
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ValueError(f"{where} is an .npz file but not one written by ars (ARS.save)")
    version = meta.get("format_version")
    _need(meta, "format_version", is_int(version) and version >= 1, "a positive integer", where)
    if version > FORMAT_VERSION:
        raise ValueError(f"{where} was written by a newer ars (format {version}); upgrade ars")
    unknown = sorted(set(meta) - METADATA_FIELDS)
    if unknown:
        raise ValueError(f"{where}: the metadata holds fields ars does not know: {unknown}")
    kind = meta.setdefault("kind", "model")
    _need(meta, "kind", kind in ("model", "policy"), '"model" or "policy"', where)
    _check_policy_fields(meta, where)
    if kind == "model":
        _check_model_fields(meta, where)
    return meta


def _need(meta: dict, field: str, ok: bool, what: str, where: str) -> None:
    if not ok:
        raise ValueError(f"{where}: {field!r} must be {what}; got {meta.get(field)!r:.200}")


def _check_policy_fields(meta: dict, where: str) -> None:
    """The policy's name and options (the core's check), its size, its spaces built."""
    try:
        sizes = policy_options(meta.get("policy"), meta.get("policy_kwargs"))["net_arch"]
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None
    meta["policy_kwargs"] = meta.get("policy_kwargs") or {}
    # The weights the spaces' JSON implies (biases aside), before the spaces are built: a small
    # file must not make ars build large ones. The policy then counts its parameters exactly.
    dims = [_space_size(meta.get(key), f"{where}: {key}") for key in SPACE_KEYS]
    n_weights = sum(out * inp for out, inp in layer_shapes(dims[0], sizes, dims[1]))
    if n_weights > MAX_PARAMETERS:
        raise ValueError(f"{where}: {n_weights:,} weights: ars takes up to {MAX_PARAMETERS:,}")
    for key in SPACE_KEYS:
        meta[key] = _space_from_json(meta[key], f"{where}: {key}")
    if "vec_normalize" in meta:  # a frozen stand-in for the VecNormalize it learned through
        shape = meta["observation_space"].shape
        meta["vec_normalize"] = _normalization_from_file(meta["vec_normalize"], shape, where)


def _check_model_fields(meta: dict, where: str) -> None:
    """A model's fields beyond its policy's: settings, counters, episodes, env id, extras."""
    _need(meta, "hparams", isinstance(meta.get("hparams"), dict), "a dict", where)
    for name in set(meta["hparams"]) - set(SAVED):  # a path (tensorboard_log): never from a file
        raise ValueError(f"{where}: hparams holds {name!r}, which a model file may not set")
    for field in ("num_timesteps", "n_updates"):
        _need(meta, field, _is_count(meta.get(field)), "an integer >= 0", where)
    episodes = meta.setdefault("ep_info_buffer", [])  # excluded: an empty window
    pairs = isinstance(episodes, list) and all(map(_episode_pair, episodes))
    _need(meta, "ep_info_buffer", pairs, "a list of [return, length] pairs", where)
    env_id = meta.get("env_id")
    pattern = r"([A-Za-z_][\w.]{0,99}:)?[\w./-]{1,200}"  # gymnasium's [module:]id, checked
    plain = env_id is None or isinstance(env_id, str) and re.fullmatch(pattern, env_id)
    _need(meta, "env_id", plain, "an env id ('Hopper-v4', 'module:Env-v0') or null", where)
    names = meta.get("schedules", [])  # the settings saved as their last value
    ok = isinstance(names, list) and all(n in SCHEDULED for n in names)
    _need(meta, "schedules", ok, "a list of learning_rate, delta_std", where)
    _need(meta, "callbacks", isinstance(meta.get("callbacks", {}), dict), "a dict", where)
    extra = meta.get("included", {})  # JSON's keys are strings
    public = isinstance(extra, dict) and all(k.isidentifier() and k[0] != "_" for k in extra)
    what = "a dict of public attributes the model lacks (never its own)"
    _need(meta, "included", public, what, where)


def _episode_pair(episode: Any) -> bool:
    """A file's episode: ``[return, length]``."""
    return (
        isinstance(episode, list)
        and len(episode) == 2
        and _is_number(episode[0])
        and _is_count(episode[1])
    )


def _read_arrays(archive: zipfile.ZipFile, names: set[str], meta: dict, where: str) -> dict:
    """The arrays, each checked against what the metadata implies before it is read: the flat
    parameters (at most the weights and biases its layer sizes allow: the policy built from
    the file then checks their number, and names them), V2's statistics (one per input)."""
    obs_dim, n_outputs = (spaces.flatdim(meta[key]) for key in SPACE_KEYS)  # built, and capped
    sizes = policy_options(meta["policy"], meta["policy_kwargs"])["net_arch"]  # checked
    most = sum(out * inp + out for out, inp in layer_shapes(obs_dim, sizes, n_outputs))
    expected = {"parameters": ((most,), "f")}
    if "obs_rms_mean.npy" in names:
        rms = {"obs_rms_mean": ((obs_dim,), "f"), "obs_rms_var": ((obs_dim,), "f")}
        expected.update(rms, obs_rms_count=((), "iu"))
    if {f"{k}.npy" for k in expected} != names - {"metadata.npy"}:
        found = sorted(n[:-4] for n in names - {"metadata.npy"})
        raise ValueError(f"{where}: expected the arrays {sorted(expected)}; the file holds {found}")
    arrays = {name: _npy(archive, name, *expected[name], where) for name in expected}
    return {k.replace("obs_rms_", "obs_rms."): v for k, v in arrays.items()}


def _normalization_from_file(data: Any, shape: tuple, where: str) -> Any:
    ok = isinstance(data, dict) and set(data) == {"mean", "var", "clip_obs", "epsilon"}
    lists = [data[k] if ok and isinstance(data[k], list) else [] for k in ("mean", "var")]
    mean, var = (np.array(values, float).reshape(-1) for values in lists)
    scalars = [data[k] for k in ("clip_obs", "epsilon")] if ok else [-1]
    moments = mean.shape == var.shape == (math.prod(shape),) and np.isfinite(np.r_[mean, var]).all()
    if not (moments and (var >= 0).all() and all(_is_number(x) and x >= 0 for x in scalars)):
        raise ValueError(
            f"{where}: metadata field 'vec_normalize' must hold {math.prod(shape)} "
            "finite means and variances >= 0, clip_obs and epsilon >= 0"
        )
    rms = RunningMeanStd.from_moments(mean.reshape(shape), var.reshape(shape), 0)
    frozen = dict(epsilon=data["epsilon"], clip_obs=data["clip_obs"], norm_obs=True, training=False)
    return types.SimpleNamespace(obs_rms=rms, **frozen)


# == Torch interop: a policy as a torch.nn.Module, made only when asked for =======================

TORCH_ACTIVATIONS = dict(relu="ReLU", tanh="Tanh", sigmoid="Sigmoid", identity="Identity")


@functools.cache
def _torch_policy_class() -> type:
    """``ars.TorchPolicy``: made on first use, so that torch is imported only when asked for."""
    torch = require("torch", 'pip install "ars-numpy[torch]" (pinned to the CPU build)')

    class TorchPolicy(torch.nn.Module):
        """An ARS policy (or a model's) as a ``torch.nn.Module`` with its actions: its layers in
        float64 (V2 folded into the first), then the argmax of Discrete actions, or Box ones
        tanh-rescaled to the bounds or clipped. Box observations, one or a batch."""

        def __init__(self, policy: Any):
            super().__init__()
            policy = policy_of(policy)
            nn = torch.nn
            if not isinstance(policy.observation_space, spaces.Box):
                raise NotImplementedError(
                    f"TorchPolicy takes Box observations, not {policy.observation_space}"
                )
            modules = []
            for weight, bias in policy.layers(policy.parameters_to_vector(), policy.obs_rms):
                linear = nn.Linear(*weight.shape[::-1], bias=bias is not None, dtype=torch.float64)
                with torch.no_grad():  # bias may be None: zip stops at the weight
                    for parameter, value in zip(linear.parameters(), (weight, bias)):
                        parameter.copy_(torch.from_numpy(value))
                modules += [linear, getattr(nn, TORCH_ACTIVATIONS[policy.activation_fn])()]
            self.net = nn.Sequential(*modules[:-1])  # no activation after the last layer
            self.obs_shape = policy.observation_space.shape
            self.obs_dim = policy.obs_dim
            self.action_space = policy.action_space
            self.squash_output = policy.squash_output
            if isinstance(self.action_space, spaces.Box):
                self.register_buffer("low", torch.from_numpy(policy.bounds[0]))
                self.register_buffer("high", torch.from_numpy(policy.bounds[1]))

        def forward(self, obs: Any) -> Any:
            """Actions for one observation or a batch, as ``ARSPolicy.predict`` gives them."""
            obs = torch.as_tensor(obs, dtype=torch.float64)
            out = self.net(obs.reshape(*obs.shape[: obs.dim() - len(self.obs_shape)], self.obs_dim))
            if isinstance(self.action_space, spaces.Discrete):
                return out.argmax(dim=-1) + int(self.action_space.start)
            if self.squash_output:
                out = (self.high + self.low) / 2 + (self.high - self.low) / 2 * torch.tanh(out)
            else:
                out = torch.clamp(out, self.low, self.high)
            return out.reshape(*out.shape[:-1], *self.action_space.shape)

    TorchPolicy.__module__ = __name__  # pickled by name
    TorchPolicy.__qualname__ = "TorchPolicy"
    return TorchPolicy


# sb3-contrib's ARS.save: a zip of ``data`` (JSON, whose readable fields ars reads, never its
# pickles) and ``policy.pth`` (torch.save's zip, read by torch.load(weights_only=True), which
# builds tensors and nothing else), each size checked against what the spaces imply first.
SB3_CONTRIB_MEMBERS = {"data", "policy.pth"}
SB3_MAX_DATA_BYTES = 1 << 27  # the JSON holds base64 pickles: about 6 bytes a parameter
SB3_SETTINGS = ("n_delta", "n_top", "n_eval_episodes", "zero_policy", "alive_bonus_offset", "seed")
SB3_SCHEDULES = {"learning_rate": "lr_schedule", "delta_std": "delta_std_schedule"}


def _read_sb3_contrib(archive: zipfile.ZipFile, where: str, env: Any) -> tuple[dict, dict]:
    """A file of sb3-contrib's ARS.save as :func:`read_model_file`'s metadata and state; ``env``
    gives the spaces whose bounds SB3 abbreviated (more than 1,000 numbers). Whatever is wrong
    with it is one ValueError that names the file."""
    torch = require("torch", "pip install \"ars-numpy[torch]\" (sb3-contrib's weights are torch's)")
    try:
        return _sb3_contents(archive, where, env, torch)
    except (ValueError, TypeError, KeyError, NotImplementedError) as error:
        message = " ".join(str(error).split())[:300]
        raise ValueError(message if message.startswith(where) else f"{where}: {message}") from None


def _sb3_contents(archive: zipfile.ZipFile, where: str, env: Any, torch: Any) -> tuple[dict, dict]:
    data = _json(_read_member(archive, "data", SB3_MAX_DATA_BYTES, where), f"{where}: data")
    if not isinstance(data, dict):
        raise ValueError(f"{where}: its data is not a JSON object")
    if "n_delta" not in data:  # every sb3-contrib ARS saves its N
        policy = data.get("policy_class")
        module = policy.get("__module__") if isinstance(policy, dict) else None
        raise ValueError(
            f"{where}: not an ARS model (a Stable-Baselines3 file of another algorithm, its "
            f"policy from {module!r:.80}); ars loads its own files and sb3-contrib's ARS"
        )
    meta = dict(kind="model", env_id=None, ep_info_buffer=[], hparams=_sb3_settings(data, where))
    for key in SPACE_KEYS:
        meta[key] = _sb3_space(data.get(key), env, key, f"{where}: its {key}")
    meta.update(_sb3_policy(data))
    built = Network(
        meta["observation_space"], meta["action_space"], meta["policy"], meta["policy_kwargs"]
    )
    budget = 8 * built.n_params + (1 << 20)  # the weights, and the pickle's own text
    weights = _read_member(archive, "policy.pth", budget, where)
    state = _sb3_weights(torch, weights, budget, built.n_params, f"{where}: its policy.pth")
    counters = [data.get("num_timesteps", 0), data.get("_n_updates", 0)]
    if not all(_is_count(n) for n in counters):
        raise ValueError(f"{where}: its counters must be integers >= 0; got {counters}")
    meta["num_timesteps"] = counters[0]
    meta["n_updates"] = counters[1]
    return meta, state


def _sb3_space(data: Any, env: Any, key: str, where: str) -> spaces.Space:
    """A Box or Discrete space from SB3's readable fields, else ``env``'s (made only then, and
    checked against the shape and dtype the file names)."""
    kind = str(data.get(":type:", "")) if isinstance(data, dict) else ""
    if kind.endswith(".Discrete'>"):
        n = _sb3_integer(data.get("n"))  # SB3 writes them as text: "2"
        start = _sb3_integer(data.get("start", 0))
        if not (_is_count(n, MAX_PARAMETERS) and n > 0 and is_int(start)):
            raise ValueError(f"{where} must have a count n >= 1 and an integer start: {data!r:.99}")
        return spaces.Discrete(int(n), start=int(start))
    if not kind.endswith(".Box'>"):
        raise ValueError(f"{where} is {kind or data!r:.80}; ars takes a Box or Discrete")
    shape = data.get("_shape")
    size = math.prod(shape) if isinstance(shape, list) and all(map(_is_count, shape)) else -1
    if not 0 <= size <= MAX_PARAMETERS or not re.fullmatch(
        r"(float|int|uint)\d{1,2}|bool", str(data.get("dtype"))
    ):
        raise ValueError(
            f"{where} must have a _shape of up to {MAX_PARAMETERS:,} numbers and a "
            f"numeric dtype; got {data.get('_shape')!r:.60}, {data.get('dtype')!r:.30}"
        )
    shape = tuple(shape)
    dtype = np.dtype(data["dtype"])
    if "..." not in str(data.get("low")) + str(data.get("high")):  # SB3 abbreviates > 1,000
        texts = [str(data.get(k)) for k in ("low", "high")]
        if max(map(len, texts)) > 32 * size + 64:  # a number's text at most: parsed after
            raise ValueError(f"{where} has bounds longer than its {size:,} numbers")
        bounds = [re.findall(r"[^][\s]+", text) for text in texts]
        low, high = (np.array(b, float).astype(dtype).reshape(shape) for b in bounds)
        return spaces.Box(low, high, shape, dtype)
    if env is None:
        raise ValueError(f"{where} has abbreviated bounds: pass env= to take the env's")
    env_space = getattr(make_env(env), key)
    if (env_space.shape, env_space.dtype) != (shape, dtype):
        raise ValueError(f"{where} is {dtype} of shape {shape}; the env's is {env_space}")
    return env_space


def _sb3_integer(value: Any) -> int | None:
    """An integer of SB3's JSON, written as a number or as text of at most 18 digits."""
    if isinstance(value, str) and re.fullmatch(r"-?\d{1,18}", value):
        return int(value)
    return value if is_int(value) else None


def _sb3_policy(data: dict) -> dict[str, Any]:
    """The policy's name and options from sb3-contrib's readable fields (an activation's
    pickled class by the name in its text), with sb3-contrib's defaults."""
    linear = "Linear policy" in str(data.get("policy_class"))  # its readable __doc__
    given = data.get("policy_kwargs") if isinstance(data.get("policy_kwargs"), dict) else {}
    keys = ["with_bias", "squash_output"] + ([] if linear else ["net_arch", "activation_fn"])
    options = {k: given[k] for k in keys if k in given}
    if "activation_fn" in options:
        found = re.search(r"\.(\w+)'>", str(options["activation_fn"]))
        options["activation_fn"] = found.group(1).lower() if found else "?"
    options.setdefault("with_bias", not linear)  # sb3-contrib's default
    return dict(policy="LinearPolicy" if linear else "MlpPolicy", policy_kwargs=options)


def _sb3_settings(data: dict, where: str) -> dict[str, Any]:
    """ARS's settings from sb3-contrib's fields; a schedule's constant, else the default (a
    schedule of another kind is a pickle, never read), with a warning."""
    settings = {k: data[k] for k in SB3_SETTINGS if k in data}
    for name, key in SB3_SCHEDULES.items():
        schedule = data.get(key) if isinstance(data.get(key), dict) else {}
        value = re.search(r"val=([^,)\s]{1,40})", str(schedule.get("value_schedule", "")))
        if value is None:
            warn(f"{where}: {name} is a schedule ars does not read; using the default")
        else:
            settings[name] = float(value.group(1))  # a constant's (nan: refused by ARS())
    return settings


def _sb3_weights(
    torch: Any, weights: bytes, budget: int, n_params: int, where: str
) -> dict[str, np.ndarray]:
    """Float tensors of torch.save's zip, its members' sizes checked before anything inflates."""
    try:
        with zipfile.ZipFile(io.BytesIO(weights)) as inner:
            inflated = sum(info.file_size for info in inner.infolist())
    except (zipfile.BadZipFile, ValueError) as error:
        raise ValueError(f"{where} is not a readable weights file ({_one_line(error)})") from None
    if inflated > budget:
        raise ValueError(f"{where} holds more than {n_params:,} weights")
    with tempfile.TemporaryDirectory() as folder:  # mmap needs a file: tensors stay on disk
        path = Path(folder) / "policy.pth"
        path.write_bytes(weights)
        try:
            state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        except Exception as error:  # a damaged pickle raises anything: one line
            raise ValueError(
                f"{where} is not a readable weights file ({_one_line(error)})"
            ) from None
        return _sb3_tensors(torch, state, n_params, where)


def _sb3_tensors(torch: Any, state: Any, n_params: int, where: str) -> dict[str, np.ndarray]:
    """The float tensors of a loaded (memory-mapped) state, counted before they are read."""

    def floats(v):
        return torch.is_tensor(v) and v.is_floating_point()  # not complex, not int

    if not (isinstance(state, dict) and all(floats(v) for v in state.values())):
        raise ValueError(f"{where} holds something other than float tensors")
    if sum(v.numel() for v in state.values()) > n_params:
        raise ValueError(f"{where} holds more than {n_params:,} weights")
    for key, v in state.items():  # a view repeating a few numbers: crafted, never saved so
        if v.untyped_storage().nbytes() < v.numel() * v.element_size():
            raise ValueError(f"{where}: its {key} has more numbers than its storage holds")
    return {str(k): v.detach().to(torch.float64, copy=True).numpy() for k, v in state.items()}


# == The command line =============================================================================


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit status 2
        self.exit(2, f"error: {message} ({self.prog} --help)\n")


def _flag_number(kind: type, low: float | None = None) -> Callable[[str], Any]:
    def number(text: str) -> Any:  # a ValueError: argparse says "invalid number value"
        value = float(text)
        if not math.isfinite(value) or (kind is int and value != int(value)):
            what = "finite and whole" if kind is int else "finite"
            raise argparse.ArgumentTypeError(f"{text!r} must be {what}")
        if low is not None and value < low:
            raise argparse.ArgumentTypeError(f"{text!r} must be at least {low:g}")
        return kind(value)

    return number


def _setting(text: str) -> Any:
    """A setting as written: an int (``8``), a float (``2.0``, ``1e3``) or the text itself;
    ``check_settings`` then judges it, with the message any other door gives."""
    for kind in (int, float):
        with contextlib.suppress(ValueError):
            return kind(text)
    return text


def parse_env_kwargs(pairs: Sequence[str] | None) -> dict[str, Any] | None:
    """``--env-kwargs``' ``name:value`` pairs (rl-baselines3-zoo's form) as a dict, each value
    a Python literal (``True``, ``2.5``, ``[1, 2]``, ``'ram'``), JSON's ``true``, ``false`` or
    ``null``, or else the text itself (``obs_type:ram``); never evaluated as code. A word that
    only looks like a value (``none``, ``nan``, ``inf``) is refused. None stays None."""
    if pairs is None:
        return None
    env_kwargs = {}
    for pair in pairs:
        name, colon, text = pair.partition(":")
        if not (colon and name.isidentifier()) or name in env_kwargs:
            raise ValueError(f"--env-kwargs takes name:value pairs, each name once; got {pair!r}")
        env_kwargs[name] = _literal(text, pair)
    return check_env_kwargs(env_kwargs, "--env-kwargs")


def _literal(text: str, pair: str) -> Any:
    """An ``--env-kwargs`` value: a Python literal, JSON's three words, else the text."""
    with contextlib.suppress(ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return ast.literal_eval(text)
    if text in ("true", "false", "null"):
        return json.loads(text)
    if text.strip().lower().lstrip("+-") in ("none", "nan", "inf", "infinity", "true", "false"):
        raise ValueError(
            f"--env-kwargs {pair!r}: write None, True or False as Python does, a finite number, "
            f"or quote text ({pair.partition(':')[0]}:\"'{text}'\")"
        )
    return text


def _net_arch(text: str) -> list[Any]:
    """Layer sizes as written (``64,64``; empty: none), checked as policy_kwargs are."""
    return [_setting(n) for n in text.split(",")] if text.strip() else []


POSITIVE = {"type": _flag_number(int, 1)}
REAL = {"type": _flag_number(float)}
AS_WRITTEN = {"type": _setting}  # judged by the setting's rule, as at every door
SWITCH = {"action": argparse.BooleanOptionalAction}
FLAG = {"action": "store_true"}
# The settings a run takes from the command line, a flag each, made from the table: all but
# policy_kwargs (--net-arch), the log folder (--run-dir's) and the device (ars's is the CPU).
# A setting not given takes the env's preset (--preset), or the table's default.
RUN_SETTINGS = [
    name for name in MODEL_SETTINGS if name not in ("policy_kwargs", "tensorboard_log", "device")
]


def _setting_flag(name: str) -> tuple[str, dict[str, Any], str]:
    """A setting's flag: its name and help from MODEL_SETTINGS, a switch's --no- form."""
    setting = MODEL_SETTINGS[name]
    keywords = SWITCH if setting.rule == ("switch",) else AS_WRITTEN
    if name == "policy":
        keywords = {"choices": list(POLICIES)}
    return f"--{name.replace('_', '-')}", keywords, setting.help


FLAGS = [  # flag, argparse keywords, help
    (
        "--env",
        {},
        "gymnasium env id (default CartPole-v1; with --eval, the model's); module:Id imports the "
        "module that registers it first (your envs.py, or a package: ale_py:ALE/Pong-v5)",
    ),
    (
        "--preset",
        {"choices": PRESETS},
        f"the env's settings: tuned (the default) where a study beat the paper's "
        f"({', '.join(TUNED_SETTINGS)}), else the paper's; paper: the paper's (or "
        "rl-baselines3-zoo's) everywhere",
    ),
    (
        "--env-kwargs",
        {"nargs": "+", "metavar": "NAME:VALUE"},
        "keyword arguments of the env, as gym.make(id, **kwargs) takes them (rl-baselines3-zoo's "
        "form): --env-kwargs obs_type:ram frameskip:4",
    ),
    ("--net-arch", {"type": _net_arch}, "MlpPolicy hidden sizes, e.g. 64,64 (selects MlpPolicy)"),
    *(_setting_flag(name) for name in RUN_SETTINGS),
    ("--eval-freq", POSITIVE, "timesteps between evaluations (default: total / 20)"),
    ("--eval-episodes", {**POSITIVE, "default": 10}, "episodes per evaluation (default 10)"),
    ("--checkpoint-interval", {**POSITIVE, "default": 10}, "iterations between checkpoints"),
    (
        "--workers",
        {"type": _flag_number(int)},
        "rollout processes (default: cores for MuJoCo, else 0)",
    ),
    (
        "--job-timeout",
        REAL,
        f"seconds per job (default {DEFAULT_JOB_TIMEOUT:g}; --resume: the run's)",
    ),
    (
        "--start-timeout",
        REAL,
        f"worker start (default {DEFAULT_START_TIMEOUT:g} s; --resume: the run's)",
    ),
    ("--run-dir", {}, "output folder (default runs/<env>-<date>-<time>-seed<seed>)"),
    ("--overwrite", FLAG, "start a new run in a --run-dir that holds one"),
    ("--resume", {"metavar": "RUN_DIR"}, "continue an interrupted run from its checkpoint"),
    ("--eval", {"metavar": "MODEL"}, "evaluate a saved model instead of training"),
]
# The flags whose value defines a run (on --resume, refused unless unchanged): its settings
# but the budget and the verbosity, and the env, preset, layers and evaluation episodes.
RUN_FLAGS = set(RUN_SETTINGS) - {"total_timesteps", "verbose"} | {
    "env",
    "env_kwargs",
    "preset",
    "net_arch",
    "eval_episodes",
    "checkpoint_interval",
}
MAX_WORKERS = 1024  # more processes than this on one machine is a typo
# What the command line reports as one line, exit status 2: mistakes in what it was given and
# failures of the env (NotImplementedError is a RuntimeError; a Warning under python -W error).
ONE_LINE_ERRORS = (
    ImportError,
    ValueError,
    TypeError,
    OSError,
    RuntimeError,
    gym.error.Error,
    Warning,
)
# What a run may change on --resume, with its default and its rule (the same for the flag given
# and for config.json's value): the budget is a setting's, checked by the table.
RUN_LIMITS = dict(
    workers=Setting(0, ("int", 0, MAX_WORKERS), ""),  # a new run's: cores for MuJoCo, else 0
    job_timeout=Setting(DEFAULT_JOB_TIMEOUT, check_seconds, ""),
    start_timeout=Setting(DEFAULT_START_TIMEOUT, check_seconds, ""),
)


def _parser() -> argparse.ArgumentParser:
    called = Path(sys.argv[0]).name  # ars (the installed script), or ars.py
    p = _Parser(
        prog=f"python {called}" if called.endswith(".py") else called,
        description="Train a policy with Augmented Random Search. Unset flags take the env's "
        f"preset (--preset): tuned settings where a study beat the paper's "
        f"({', '.join(TUNED_SETTINGS)}), else the paper's (or rl-baselines3-zoo's) value "
        f"({', '.join(PAPER_SETTINGS)}; any -v4/-v5 id), else a generic default.",
        epilog="examples:\n  python ars.py                        CartPole-v1 to 500 in seconds\n"
        "  python ars.py --env Hopper-v4        the paper's Hopper run\n"
        "  python ars.py --eval runs/Hopper-v4-20261129-101500-seed7/model.npz\n"
        "  python ars.py --resume runs/Hopper-v4-20261129-101500-seed7",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    for flag, keywords, text in FLAGS:
        p.add_argument(flag, help=text, **keywords)
    p.add_argument("--version", action="version", version=f"ars {__version__}")
    return p


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = _parser()
    args = p.parse_args(argv)
    env = args.env
    try:
        args.env_kwargs = parse_env_kwargs(args.env_kwargs)
    except ValueError as error:
        p.error(str(error))
    for name in RUN_LIMITS:  # given: checked by the rule config.json's value meets on --resume
        if getattr(args, name) is not None:
            try:
                check_setting(name, getattr(args, name), f"--{name.replace('_', '-')}", RUN_LIMITS)
            except ValueError as error:
                p.error(str(error))
    given = {flag for flag in ("resume", "run_dir", "overwrite") if getattr(args, flag)}
    trained_with = [  # settings an evaluation has no use for (its episodes' limit it has)
        f"--{name.replace('_', '-')}"
        for name in [*RUN_SETTINGS, "net_arch"]
        if name not in ("max_episode_steps", "verbose") and getattr(args, name) is not None
    ]
    trained_with = ", ".join(trained_with)
    for wrong, message in [  # the first conflict found, in one line
        (env is not None and not env.strip(), "--env needs an env id, e.g. CartPole-v1"),
        (args.resume and given != {"resume"}, "--resume goes without --run-dir and --overwrite"),
        (args.eval and given, "--eval goes without --resume, --run-dir and --overwrite"),
        (args.eval and args.preset, "--eval takes the model's settings: it goes without --preset"),
        (args.eval and trained_with, f"--eval takes the model's settings: without {trained_with}"),
        (args.overwrite and not args.run_dir, "--overwrite needs the --run-dir it replaces"),
    ]:
        if wrong:
            p.error(message)
    args.explicit = {f for f in RUN_FLAGS if getattr(args, f) != p.get_default(f)}
    return args


class _Interrupts:
    """The command line's SIGINT and SIGTERM, from its first line to its last (then the
    handlers it found come back). Before training: stop at once. While training: Ctrl+C once
    finishes the iteration, again (or SIGTERM) stops now, keeping no iteration cut short.
    While the final files are written: noted, acted on after. The exit status is the shell's,
    128 + the signal."""

    def __init__(self) -> None:
        self.requested = False
        self.discarded = False
        self.phase = "setup"  # then "training", then "saving"
        self.signals = []
        self.previous = {s: signal.signal(s, self._handle) for s in (signal.SIGINT, signal.SIGTERM)}

    def _handle(self, signum: int, frame: Any) -> None:
        self.signals.append(signum)
        if self.phase == "saving":
            self.requested = True
        elif self.phase == "training" and signum == signal.SIGINT and not self.requested:
            self.requested = True
            print("\nstopping after this iteration (Ctrl+C again: now)", flush=True)
        else:
            self.discarded = True
            raise KeyboardInterrupt

    def status(self) -> int:
        """130 after SIGINT, 143 after SIGTERM, as the shell reports a process they ended."""
        return 128 + (self.signals or [signal.SIGINT])[-1]

    def restore(self) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)


class _RunLock:
    """An exclusive lock on a run folder while the process lives (the kernel frees it after).
    The lock is on the folder itself, which outlives every holder: a lock on a file that a
    holder removes could be taken twice. ``.lock`` names the holder, for the message."""

    def __init__(self, run_dir: Path):
        self.path = run_dir / ".lock"
        self.fd = None
        with contextlib.suppress(ImportError):  # no fcntl (Windows): the folder is not locked
            fcntl = importlib.import_module("fcntl")
            self.fd = os.open(run_dir, os.O_RDONLY)
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(self.fd)
                holder = "another process"
                with contextlib.suppress(OSError):  # unless it has just let go
                    holder = self.path.read_text().strip() or holder
                message = f"{run_dir} is in use by {holder}; wait for it, or pick another --run-dir"
                raise ValueError(message) from None
        self.path.write_text(f"pid {os.getpid()}")

    def release(self) -> None:
        self.path.unlink(missing_ok=True)
        if self.fd is not None:
            os.close(self.fd)


def _print_progress(
    model: ARS, total: int, evaluation: EvalCallback, interrupts: _Interrupts
) -> Callable:
    """A per-iteration callback: a progress line every two seconds; stops on request."""
    last = [0.0]
    start = time.perf_counter()
    start_steps = model.num_timesteps

    def callback(locals_: dict[str, Any], globals_: dict[str, Any]) -> bool:
        now = time.perf_counter()
        if now - last[0] >= 2.0 or model.num_timesteps >= total or interrupts.requested:
            last[0] = now
            episodes = model.ep_info_buffer
            evaluations = evaluation.evaluations
            fps = (model.num_timesteps - start_steps) / max(now - start, 1e-9)
            reward = np.mean([e["r"] for e in episodes]) if episodes else float("nan")
            latest = evaluations[-1][2] if evaluations else float("nan")
            eta = max(total - model.num_timesteps, 0) / max(fps, 1e-9) / 60
            print(
                f"{model.num_timesteps:>12,} / {total:,} steps | iter {model.n_updates:>6} | "
                f"train return {reward:10.2f} | eval {latest:10.2f} (best "
                f"{evaluation.best_mean_reward:10.2f}) | {fps:9,.0f} steps/s | eta "
                f"{eta:6.1f} min",
                flush=True,
            )
        return not interrupts.requested

    return callback


RUN_CONFIG = set("env total_timesteps workers eval_freq eval_episodes checkpoint_interval".split())
RUN_FILES = "config.json progress.csv checkpoint.npz model.npz best_model.npz evaluations.npz"


Run = collections.namedtuple("Run", "model config folder")  # a run's model, config.json, folder


def _new_run(args: argparse.Namespace) -> Run:
    env_id = args.env or "CartPole-v1"
    args.policy = args.policy or ("MlpPolicy" if args.net_arch is not None else None)  # an MLP
    args.preset = args.preset or "tuned"
    config = settings_for(env_id, args.preset)  # the preset's settings, then the flags given
    config.update({k: v for k, v in vars(args).items() if k in config and v is not None})
    unpreset = [k for k in RUN_SETTINGS if k not in config]  # seed, verbose, ...
    given = {k: getattr(args, k) for k in unpreset if getattr(args, k) is not None}
    model = paper_model(env_id, **config, **given, env_kwargs=args.env_kwargs)
    names = "eval_episodes checkpoint_interval".split()
    mujoco = "mujoco" in str(getattr(model.gym_env.spec, "entry_point", ""))
    workers = args.workers
    if workers is None:  # MuJoCo's envs: a worker per core; others' steps are too cheap
        workers = (os.cpu_count() or 1) if mujoco else 0
    eval_freq = args.eval_freq or max(int(config["total_timesteps"]) // 20, 1)
    config.update({k: getattr(args, k) for k in names}, env=env_id, eval_freq=eval_freq)
    config["env_kwargs"] = model.env_kwargs
    config.update({k: model.hparams[k] for k in RUN_FLAGS if k in HPARAMS})  # as checked
    config.update(workers=workers, seed=model.seed, preset=args.preset, ars_version=__version__)
    for name in ("job_timeout", "start_timeout"):
        given = getattr(args, name)
        config[name] = RUN_LIMITS[name].default if given is None else given
    if args.run_dir is None:  # a folder of its own: mkdir is atomic, so runs never share one
        name = re.sub(r"[^\w.-]", "_", env_id)  # module:ns/Id: no : or / in a folder's name
        stem = f"runs/{name}-{time.strftime('%Y%m%d-%H%M%S')}-seed{model.seed}"
        Path("runs").mkdir(exist_ok=True)
        for n in range(1, 10**6):
            run_dir = Path(stem if n == 1 else f"{stem}-{n}")
            with contextlib.suppress(FileExistsError):
                run_dir.mkdir()
                return Run(model, config, run_dir)
    run_dir = Path(args.run_dir)
    if run_dir.is_dir():
        _check_run_dir(run_dir)
    trained = [name for name in ("checkpoint.npz", "model.npz") if (run_dir / name).exists()]
    if trained and not args.overwrite:
        raise ValueError(
            f"{run_dir} holds a run ({', '.join(trained)}): --resume {run_dir} to "
            f"continue it, or pick another --run-dir"
        )
    run_dir.mkdir(parents=True, exist_ok=True)
    return Run(model, config, run_dir)


def _run_config(run_dir: Path) -> dict[str, Any] | None:
    """The run's config.json, or None where there is none or it is not ars's."""
    with contextlib.suppress(OSError, ValueError):
        config = json.loads((run_dir / "config.json").read_text())
        return config if isinstance(config, dict) and RUN_CONFIG <= set(config) else None
    return None


def _check_run_dir(run_dir: Path) -> None:
    """A run is written only where nothing but an ars run's files are: no file of the user's
    is replaced (by --overwrite, or by a run that never reached its first checkpoint)."""
    files = RUN_FILES.split() + ["progress.png"]  # progress.png: examples/plot_progress.py's
    ours = {".lock", *(files if _run_config(run_dir) is not None else ())}
    half = tuple(f".{name}." for name in RUN_FILES.split())  # a kill's half-writes, .NAME.*.tmp

    def stale(name):
        return name.startswith(half) and name.endswith(".tmp")

    others = sorted(p.name for p in run_dir.iterdir() if p.name not in ours and not stale(p.name))
    if others:
        raise ValueError(
            f"{run_dir} holds files that are not an ars run's ({', '.join(others[:5])}"
            f"{', ...' if len(others) > 5 else ''}): pick an empty or a new --run-dir"
        )


def _resume(args: argparse.Namespace) -> Run:
    run_dir = Path(args.resume)
    if not (run_dir / "config.json").exists() or not (run_dir / "checkpoint.npz").exists():
        missing = [n for n in ("config.json", "checkpoint.npz") if not (run_dir / n).exists()]
        hint = "; run the command that started it again" if missing == ["checkpoint.npz"] else ""
        raise ValueError(f"{run_dir} has no {' and no '.join(missing)} to resume from{hint}")
    config = _json((run_dir / "config.json").read_text(), f"{run_dir / 'config.json'}")
    if not isinstance(config, dict) or set(RUN_CONFIG) - set(config):
        raise ValueError(f"{run_dir / 'config.json'} lacks {sorted(RUN_CONFIG)}: it is not ars's")
    config.setdefault("preset", "paper")  # a config without a preset ran the paper's settings
    run = {k: config[k] for k in HPARAMS if k in config and k != "policy_kwargs"}
    for flag in sorted(args.explicit):
        value = getattr(args, flag)
        if flag in HPARAMS:  # taken as a new run takes it: by its rule, b at most N
            value = check_settings({**run, flag: value}, MODEL_SETTINGS)[flag]
        if config.get(flag) != value:
            raise ValueError(
                f"--{flag.replace('_', '-')} cannot change on --resume (the run has "
                f"{config.get(flag)!r}); start a new run for other settings"
            )
    checkpoint = run_dir / "checkpoint.npz"  # read once: the model and the callbacks' state
    meta, state = read_model_file(checkpoint)
    verbose = {} if args.verbose is None else {"verbose": args.verbose}  # else the run's
    model = model_from_file(meta, state, str(checkpoint), config["env"], **verbose)
    config["env_kwargs"] = _checkpoints_env_kwargs(config, model, run_dir)
    config["callbacks"] = meta.get("callbacks", {})  # for this process only: never written
    total = args.total_timesteps
    if total is not None and total < model.num_timesteps and total != config["total_timesteps"]:
        raise ValueError(
            f"--total-timesteps {total:,} is below the {model.num_timesteps:,} steps "
            "this run has trained"
        )
    derived = config["eval_freq"] == max(int(config["total_timesteps"]) // 20, 1)
    if args.total_timesteps is not None:  # the budget may change, and these
        config["total_timesteps"] = args.total_timesteps
    if args.eval_freq is not None or derived:  # the schedule a new run of this budget has
        config["eval_freq"] = args.eval_freq or max(int(config["total_timesteps"]) // 20, 1)
    for name, limit in RUN_LIMITS.items():
        value = getattr(args, name)
        value = config.get(name, limit.default) if value is None else value
        config[name] = check_setting(name, value, f"{name} (config.json)", RUN_LIMITS)
    return Run(model, config, run_dir)


def _checkpoints_env_kwargs(config: dict, model: ARS, run_dir: Path) -> dict[str, Any]:
    """The env's kwargs, which config.json and the checkpoint hold alike: never mixed."""
    kwargs = check_env_kwargs(config.get("env_kwargs"), "env_kwargs (config.json)")
    if kwargs != model.env_kwargs:
        raise ValueError(
            f"{run_dir / 'config.json'} has env_kwargs {kwargs} where {run_dir / 'checkpoint.npz'}"
            f" has {model.env_kwargs}: they are one run's; restore config.json"
        )
    return kwargs


def _evaluate_saved(args: argparse.Namespace) -> int:
    meta, state = read_model_file(args.eval, args.env)  # once: a model, or a policy alone
    build = model_from_file if meta["kind"] == "model" else _build_policy  # spaces: checked at use
    model = build(meta, state, str(args.eval))
    recorded_id = getattr(model, "env_id", None)  # a model's; a policy alone has none
    env_id = args.env or recorded_id
    if env_id is None:
        raise ValueError(f"{args.eval} does not record its env; pass --env")
    if args.max_episode_steps is not None:  # a policy alone too: checked as the setting
        model.max_episode_steps = check_setting("max_episode_steps", args.max_episode_steps)
    kwargs = env_kwargs_for(env_id, args.env_kwargs, recorded_id, getattr(model, "env_kwargs", {}))
    env = make_env(env_id, kwargs)
    _check_same_spaces(_spaces_of(env), _spaces_of(policy_of(model)), env_id, "the model")
    episodes = args.eval_episodes
    timeout = args.job_timeout or DEFAULT_JOB_TIMEOUT  # a stuck env is stopped here too
    mean, std = evaluate_policy(model, env, episodes, job_timeout=timeout)  # the model's seeds
    made = f"{env_id} {json.dumps(kwargs)}" if kwargs else env_id  # the kwargs it was made with
    print(f"{made}: mean return {mean:.2f} +/- {std:.2f} over {episodes} episodes ({args.eval})")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: train, resume or ``--eval``, and report; returns the exit status.
    Signals and warnings are the command line's until it returns, whichever way it does."""
    if os.getcwd() not in sys.path and "" not in sys.path:  # --env module:Id, as python -m ars
        sys.path.append(os.getcwd())
    try:
        args = _parse_args(argv)
    except SystemExit as done:  # --help, or a mistake argparse reported: its status
        return int(done.code or 0)
    interrupts = _Interrupts()
    try:
        with warnings.catch_warnings():  # showwarning comes back on every way out
            warnings.showwarning = _warning_printer()
            # the paper's tasks are v4 ids, which gymnasium calls out of date: not news here
            warnings.filterwarnings("ignore", message=".*is out of date.*")
            return _command(args, interrupts)
    except KeyboardInterrupt:
        print("interrupted: nothing was written", file=sys.stderr)
        return interrupts.status()
    finally:
        interrupts.restore()


def _warning_printer() -> Callable[..., None]:
    """``showwarning`` for the command line: ``warning: text`` on one line, as errors are,
    without the colours gymnasium adds, and each text once (Python's registry forgets what
    it showed whenever a filter changes, and each env made warns again)."""
    shown = set()

    def show(message: Any, *args: Any, **kwargs: Any) -> None:
        text = " ".join(re.sub(r"\x1b\[[0-9;]*m", "", str(message)).split())
        if text not in shown:
            shown.add(text)
            print(f"warning: {text.removeprefix('WARN: ')}", file=sys.stderr)

    return show


def _env_hint(error: BaseException, args: argparse.Namespace) -> str:
    """``error``'s text; where a saved run's or model's env cannot be made, what to do."""
    unknown = (gym.error.NamespaceNotFound, gym.error.NameNotFound)
    if isinstance(error, unknown) and args.env and ":" not in args.env:
        return (
            f"{error}; if a package or module registers it, --env module:{args.env} imports "
            "it first (as ale_py:ALE/Pong-v5)"
        )
    if not isinstance(error, (gym.error.Error, ModuleNotFoundError)) or args.env:
        return str(error)
    text = str(error).split(". Environment registration")[0]  # gymnasium's second sentence
    if args.eval:
        return f"{text} (the model's env: run where it imports, or --env ID for another)"
    if args.resume:
        return f"{text} (the run's env: run from the folder where it imports, or set PYTHONPATH)"
    return str(error)


def _command(args: argparse.Namespace, interrupts: _Interrupts) -> int:
    """``main`` once its signals are its own: the run, or ``--eval``; errors as one line."""
    lock = None
    try:
        if args.eval:
            return _evaluate_saved(args)
        if (args.workers or 0) > 0:
            check_main_guard(None)  # before the folder: a worker would run the script again
        if args.total_timesteps is not None:  # by its rule, before anything runs; whole, as
            total = check_setting("total_timesteps", args.total_timesteps)  # learn() rounds it
            args.total_timesteps = math.ceil(total)
        run = _resume(args) if args.resume else _new_run(args)
        model = run.model
        config = run.config
        run_dir = run.folder
        if config["workers"] > (os.cpu_count() or 1):
            warn(
                f"--workers {config['workers']} on {os.cpu_count()} cores: more processes than "
                f"cores add memory and messages, not speed; --workers {os.cpu_count()} is as fast"
            )
        lock = _RunLock(run_dir)  # before anything in the folder changes
        make = functools.partial(make_env, config["env"], config["env_kwargs"])  # in each process
        evaluation = EvalCallback(
            make,
            n_eval_episodes=config["eval_episodes"],
            eval_freq=config["eval_freq"],
            best_model_save_path=run_dir,
            best_model_name="best_model.npz",
            verbose=0,
            job_timeout=config["job_timeout"],
        )
        if args.resume:
            _continue_run(model, config, run_dir, evaluation)
        else:
            _start_run(model, config, run_dir, evaluation)
    except ONE_LINE_ERRORS as error:
        print(f"error: {_env_hint(error, args)}", file=sys.stderr)
        if lock is not None:
            lock.release()
        return 2
    except BaseException:
        if lock is not None:
            lock.release()
        raise
    return _train(model, config, run_dir, evaluation, lock, interrupts)


def _continue_run(model: ARS, config: dict, run_dir: Path, evaluation: EvalCallback) -> None:
    """A resumed run: the evaluations where its checkpoint left them, progress.csv to match."""
    try:  # the evaluation schedule and best score where the checkpoint left them
        evaluation.load_state_dict(config.pop("callbacks").get("EvalCallback"))
    except ValueError as error:
        checkpoint = run_dir / "checkpoint.npz"
        raise ValueError(f"{checkpoint} is not a checkpoint of ars.py ({error})") from None
    evaluation.follow_schedule()  # the run's eval_freq, which a resume may change
    _remove_half_writes(run_dir)  # a refused resume changes nothing in the folder
    _write_config(run_dir, config)  # a new total, workers or timeouts: the next resume's
    _trim_progress(run_dir / "progress.csv", model.n_updates)
    print(f"resuming {run_dir} at {model.num_timesteps:,} steps, iteration {model.n_updates}")


def _start_run(model: ARS, config: dict, run_dir: Path, evaluation: EvalCallback) -> None:
    """A new run: config.json, then at once the first checkpoint, so that from here a kill at
    any moment leaves a run that --resume continues."""
    _remove_half_writes(run_dir)
    for name in RUN_FILES.split():  # --overwrite, or a run never checkpointed: they go
        (run_dir / name).unlink(missing_ok=True)
    _write_config(run_dir, config)
    model.save(run_dir / "checkpoint.npz", callbacks=_Callbacks([evaluation], model))
    shown = {k: v for k, v in config.items() if k not in ("env", "ars_version")}
    print(f"ARS on {config['env']}: {json.dumps(shown)}")


def _write_config(run_dir: Path, config: dict[str, Any]) -> None:
    with atomic_file(run_dir / "config.json", "w") as f:
        f.write(json.dumps(config, indent=2) + "\n")


def _remove_half_writes(run_dir: Path) -> None:
    """Remove the temporary files a kill in the middle of a write left (see atomic_file)."""
    for name in RUN_FILES.split():
        for stale in run_dir.glob(f".{name}.*.tmp"):
            stale.unlink(missing_ok=True)


def _whole_row_before(row: dict[str, Any], n_updates: int) -> bool:
    """A row written whole (no field missing, none extra) by an iteration before ``n_updates``."""
    iteration = row.get("train/iterations") or ""
    whole = None not in row.values() and None not in row
    return whole and iteration.isdigit() and int(iteration) < n_updates


def _trim_progress(path: Path, n_updates: int) -> None:
    """Drop the rows a resumed run writes again (and a row cut short by a kill)."""
    if path.exists():
        with path.open(newline="") as f:
            reader = csv.DictReader(f)
            rows = [row for row in reader if _whole_row_before(row, n_updates)]
        _write_csv_atomic(path, reader.fieldnames or [], rows)


def _train(
    model: ARS, config: dict, run_dir: Path, evaluation: EvalCallback, lock: Any, interrupts: Any
) -> int:
    """Train to the run's total, write the final files, evaluate; the exit status says how."""
    env_id = config["env"]
    total = config["total_timesteps"]
    workers = config["workers"]
    status = 0
    async_eval = None
    interrupts.phase = "training"
    try:
        try:
            if total > model.num_timesteps:
                where = f"in {workers} worker processes" if workers else "in this process"
                print(f"writing to {run_dir}/; rollouts {where}")
                timeouts = {k: config[k] for k in ("job_timeout", "start_timeout")}
                if workers > 0:
                    make = functools.partial(make_env, env_id, config["env_kwargs"])
                    async_eval = AsyncEval([make] * workers, **timeouts)  # each makes its env
                else:  # here too, a stuck env is stopped
                    async_eval = InProcessEval(model.gym_env, job_timeout=config["job_timeout"])
                model.learn(
                    total - model.num_timesteps,
                    async_eval=async_eval,
                    reset_num_timesteps=False,
                    default_root_dir=run_dir,
                    callback=[evaluation, _print_progress(model, total, evaluation, interrupts)],
                    checkpoint_interval=config["checkpoint_interval"],
                )
            else:
                print(f"the run has trained its {total:,} steps; --total-timesteps N for more")
        except KeyboardInterrupt:
            status = interrupts.status()
        except (RuntimeError, FloatingPointError, OSError, ValueError) as error:
            print(f"error: {_as_flags(error)}", file=sys.stderr)
            return 1
        except Exception as error:  # the env's own, raised in its reset or step
            made = (
                f" (made with --env-kwargs {config['env_kwargs']})" if config["env_kwargs"] else ""
            )
            print(f"error: {env_id}{made} raised {_one_line(error)}", file=sys.stderr)
            return 1
        finally:
            interrupts.phase = "saving"  # from here a signal waits until the files are written
            if async_eval is not None:
                async_eval.close()
        model.save(run_dir / "checkpoint.npz", callbacks=_Callbacks([evaluation], model))
        path = model.save(run_dir / "model.npz")
        interrupts.phase = "setup"  # the final evaluation stops at once
        if status or interrupts.requested:
            how = (
                "stopped at once, an iteration cut short not kept"
                if interrupts.discarded
                else "finished the current iteration"
            )
            print(
                f"interrupted: {how}; {path} and the checkpoint hold iteration "
                f"{model.n_updates} ({model.num_timesteps:,} steps). Continue with: python "
                f"ars.py --resume {run_dir}"
            )
            return interrupts.status()
        print(f"saved {path}")
        try:
            final = _final_evaluation(evaluation, model)
        except KeyboardInterrupt:
            print("final evaluation interrupted; the run's files are complete")
            return interrupts.status()
        except EvaluationTimeout as error:
            print(f"error: final evaluation: {_as_flags(error)}", file=sys.stderr)
            return 1
        interrupts.phase = "saving"
        model.save(run_dir / "checkpoint.npz", callbacks=_Callbacks([evaluation], model))
        episodes = config["eval_episodes"]
        print(f"evaluation: mean return {final[2]:.2f} +/- {final[3]:.2f} over {episodes} episodes")
        best = f"{evaluation.best_mean_reward:.2f}"
        print(
            f"best evaluation of the run (mean return {best}) kept in {run_dir / 'best_model.npz'}"
        )
        return 0
    finally:
        lock.release()


def _as_flags(error: BaseException) -> str:
    """An error's text with the keywords it names written as the command line's flags."""
    text = str(error).replace("max_episode_steps=", "--max-episode-steps")
    return text.replace("a larger job_timeout", "a larger --job-timeout")


def _final_evaluation(evaluation: EvalCallback, model: ARS) -> tuple:
    """The final model's evaluation ``(timesteps, seconds, mean, std)``: the callback's last if
    it evaluated the final model, else a new one by it, so that the best model is the best of
    every evaluation the run made, the final one included."""
    if not evaluation.evaluations or evaluation.evaluations[-1][0] != model.num_timesteps:
        evaluation.evaluate()
    return evaluation.evaluations[-1]


if __name__ == "__main__":
    # Run as the module named after this file: workers then get its names, not copies.
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(importlib.import_module(Path(__file__).stem).main())
