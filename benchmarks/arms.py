"""Rules that change ars's V2 statistics, for the HalfCheetah ablation.

    python benchmarks/learning.py --envs HalfCheetah-v4 --seeds 237 --arm per-step-statistics \
        --results benchmarks/results/ablation_halfcheetah_per_step.json

The paper (Algorithm 2, Line 5) freezes mu and Sigma during an iteration's rollouts and merges
every visited state into them afterwards (Line 8). sb3-contrib's VecNormalize instead updates
its statistics at every step, so a rollout's later states are normalised with statistics that
already include its earlier ones, and clips them to +-10. These arms try each difference,
deterministically:

``per-step-statistics``
    Each training candidate's rollouts start from the iteration's frozen statistics and fold
    each state into a private copy before acting on it: ``x_t`` is normalised with the
    statistics of the frozen data plus ``x_0 .. x_t`` (and of the candidate's earlier
    episodes). Line 8 is unchanged (the frozen statistics absorb the rollouts' states
    exactly, in order), so the run's statistics are the paper's; only what the policy sees
    during a rollout differs. Candidates share nothing, so the same seed gives the same
    weights whatever the number of workers.
``per-step-statistics-first-iteration``
    The same, in the first iteration only (the one whose frozen statistics are empty).
``per-step-sb3-first-iteration``
    In the first iteration only, each training candidate acts on its own statistics as
    SB3's VecNormalize keeps them from scratch: count 1e-4, mean 0, var 1, updated with each
    state before it is normalised, ``clip((x - mean) / sqrt(var + 1e-8), +-10)``. The
    emulation's early gain went away when its iteration 0 acted on raw states; this is that
    iteration 0 without lanes, so that candidates share nothing. Line 8 and every later
    iteration are the paper's.
``clip-10``
    The paper's statistics, but the normalised observations are clipped to +-10, as
    VecNormalize's ``clip_obs`` does, in training and in evaluations.

``orthogonal``
    Structured exploration (Choromanski et al., 2018): an iteration's directions are the
    Gaussian rows of ars's streams made orthogonal to each other (Gram-Schmidt, in the order
    k = 0, 1, ...), each then rescaled to its Gaussian row's norm, so that each is still
    distributed as N(0, I). Row k depends only on rows 0 .. k, so any process rebuilds it from
    the same integers; blocks of ``n_params`` rows are made orthogonal within themselves
    (more rows than dimensions cannot all be). Row 0 of a block is its Gaussian row, bit for
    bit: with N = 1 (Swimmer), the arm is the paper's rule exactly.

``learning.py --arm vecnormalize`` trains ars on SB3's VecNormalize observations instead.
Evaluations (jobs that carry their own weights, as ``AsyncEval.send_jobs`` sends, or that
are theta itself) of the per-step arms keep the frozen statistics, as sb3-contrib's do.
Results: ``benchmarks/results/ablation_halfcheetah.md``. An arm is installed in each process
that runs rollouts: :func:`make_env` installs it in the worker that builds its env.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

import numpy as np

import ars

ARMS = (
    "per-step-statistics",
    "per-step-statistics-first-iteration",
    "per-step-sb3-first-iteration",
    "clip-10",
    "orthogonal",
)
_FROZEN_RULE = ars.run_job  # the paper's
_GAUSSIAN_DIRECTION = ars.direction  # the paper's: independent rows


def per_step_actor(network: ars.Network, theta: Any, frozen: ars.RunningMeanStd) -> Any:
    """``obs -> action`` that folds each ``obs`` into a private copy of ``frozen``, then acts
    on it normalised with the statistics so far (V2 folded into the first layer, as ars does)."""
    statistics = frozen.copy()

    def act(obs: Any) -> Any:
        statistics.update(obs)
        return network.actor(theta, statistics)(obs)

    return act


def sb3_actor(network: ars.Network, theta: Any, frozen: ars.RunningMeanStd) -> Any:
    """``obs -> action`` on VecNormalize's observations from fresh statistics (``frozen`` is
    not used: the first iteration's are empty)."""
    if network.flatten is not None:
        raise ValueError("the per-step-sb3 arm needs a flat Box observation space")
    act, statistics = network.actor(theta), SB3Statistics(network.obs_dim)
    zeros = np.zeros(network.obs_dim)

    def normalised(obs: Any) -> Any:
        statistics.combine(obs, zeros, 1)
        z = (obs - statistics.mean) / np.sqrt(statistics.var + EPSILON)
        return act(np.clip(z, -10.0, 10.0))

    return normalised


def clipped_actor(network: ars.Network, theta: Any, frozen: ars.RunningMeanStd) -> Any:
    """``obs -> action`` on ``clip((obs - mean) / sqrt(var), +-10)`` (the 1e-8 rule kept)."""
    if network.flatten is not None:
        raise ValueError("the clip-10 arm needs a flat Box observation space")
    act, mean, scale = network.actor(theta), frozen.mean, ars.inverse_std(frozen.var)
    return lambda obs: act(np.clip((obs - mean) * scale, -10.0, 10.0))


def run_job(
    env: Any,
    it: ars.Iteration,
    job: ars.Job,
    options: dict | None = None,
    on_step: Any = None,
    arm: str = "per-step-statistics",
) -> ars.Result:
    """:func:`ars.run_job` with ``arm``'s rule where it applies (V2), else the paper's."""
    # A training rollout: a direction of the iteration, tracked; not weights sent to evaluate.
    training = it.track_obs and job.weights is None and job.sign != 0
    per_step = arm.startswith("per-step") and training and it.obs_filter is None
    if arm.endswith("first-iteration") and it.index != 0:
        per_step = False
    if arm == "clip-10" and it.obs_filter is not None:
        raise ValueError("the clip-10 arm is V2's: train on raw observations, not VecNormalize's")
    if it.obs_rms is None or not (per_step or arm == "clip-10"):
        return _FROZEN_RULE(env, it, job, options, on_step)
    actor = {"clip-10": clipped_actor, "per-step-sb3-first-iteration": sb3_actor}.get(
        arm, per_step_actor
    )
    network = copy.copy(it.network)  # acting by the arm's rule
    network.actor = lambda theta, obs_rms: actor(it.network, theta, obs_rms)
    return _FROZEN_RULE(env, it._replace(network=network), job, options, on_step)


@functools.lru_cache(maxsize=4)
def _orthogonal_rows(seed: int, iteration: int, n_params: int) -> list:
    """The orthogonal rows of an iteration built so far (unit vectors, and the row kept),
    extended on demand by :func:`orthogonal_direction`: the same bits in every process."""
    return []


def orthogonal_direction(seed: int, iteration: int, k: int, n_params: int) -> np.ndarray:
    """``delta_k`` of the ``orthogonal`` arm: the Gaussian row ``k`` minus its projections on
    the rows before it in its block (modified Gram-Schmidt), rescaled to the Gaussian row's
    norm. Sums are NumPy's pairwise ones (not BLAS), so no thread count changes a bit."""
    rows = _orthogonal_rows(seed, iteration, n_params)
    while len(rows) <= k:
        j = len(rows)
        gaussian = _GAUSSIAN_DIRECTION(seed, iteration, j, n_params)
        norm, u = np.sqrt(np.square(gaussian).sum()), gaussian.copy()
        for unit, _ in rows[j - j % n_params : j]:  # the earlier rows of this block
            u -= (u * unit).sum() * unit
        unit = u / np.sqrt(np.square(u).sum())
        rows.append((unit, gaussian if j % n_params == 0 else unit * norm))
    return rows[k][1]


def install(arm: str) -> None:
    """Make ``arm`` the rule of this process's rollouts (and, for ``orthogonal``, of its
    directions: the driver's update and every worker's candidates use the same rows)."""
    if arm not in ARMS:
        raise ValueError(f"unknown arm {arm!r}: use one of {ARMS}")
    if arm == "orthogonal":
        ars.direction = orthogonal_direction
        return
    ars.run_job = lambda *args, **kwargs: run_job(*args, **kwargs, arm=arm)


def make_env(arm: str, env_id: str) -> Any:
    """``ars.make_env(env_id)`` in a worker, with ``arm`` installed there first."""
    install(arm)
    return ars.make_env(env_id)


# == sb3-emulation: sb3-contrib's ARS with 2 AsyncEval workers, inside ars ==========
# Read from sb3-contrib 2.9.2 (``ars/ars.py``, ``common/vec_env/async_eval.py``) and SB3's
# ``vec_normalize.py``, ``running_mean_std.py``, ``evaluation.py`` and ``dummy_vec_env.py``.
# Each setting below is sb3-contrib's behaviour; the reverse ablation turns one off at a time.
# Given sb3-contrib's directions and worker seeds, the emulation gives its weights (Swimmer, to
# float32's rounding) and its statistics bit for bit (HalfCheetah, zero directions): the test
# test_sb3_emulation_gives_sb3_contribs_weights_and_statistics runs the two side by side.

SB3_EMULATION: dict[str, Any] = {
    # candidates are ordered all + then all -, candidate i runs in lane i % lanes, in order
    "lanes": 2,
    # merge each lane's statistics (the main ones plus its states), then count -= old count
    "count_correction": True,
    # iteration 0: each lane's fresh statistics (count 1e-4) update at every step
    "first_iteration_normalised": True,
    # a lane's statistics carry across its candidates (else each starts from the synced ones)
    "carry_over": True,
    # + and - of a direction start from one env seed (else each lane's env continues its stream)
    "common_random_numbers": False,
    "clip_obs": 10.0,  # 0: no clip
    "float32": True,  # observations normalised, policy run and weights updated in float32
    "sb3_sigma": True,  # sigma_R with ddof 1 and step alpha / (b sigma_R + 1e-6)
}
EPSILON = 1e-8  # VecNormalize's: z = (x - mean) / sqrt(var + 1e-8)


class SB3Statistics:
    """SB3's RunningMeanStd: count starts at 1e-4 with mean 0 and var 1; merges by moments."""

    def __init__(self, dim: int):
        self.mean, self.var, self.count = np.zeros(dim), np.ones(dim), 1e-4

    def combine(self, mean: np.ndarray, var: np.ndarray, count: float) -> SB3Statistics:
        """SB3's ``update_from_moments``."""
        delta, total = mean - self.mean, self.count + count
        m_2 = self.var * self.count + var * count + np.square(delta) * self.count * count / total
        self.mean, self.var, self.count = self.mean + delta * count / total, m_2 / total, total
        return self

    def copy(self) -> SB3Statistics:
        """An independent copy."""
        other = SB3Statistics(len(self.mean))
        other.mean, other.var, other.count = self.mean.copy(), self.var.copy(), self.count
        return other

    def to_json(self) -> list:
        """The statistics as JSON lists, for a run's record."""
        return [self.mean.tolist(), self.var.tolist(), self.count]

    @staticmethod
    def from_json(data: list) -> SB3Statistics:
        """Statistics from :meth:`to_json`'s lists."""
        rms = SB3Statistics(len(data[0]))
        rms.mean, rms.var, rms.count = np.array(data[0]), np.array(data[1]), float(data[2])
        return rms


class Emulation:
    """sb3-contrib's ARS (LinearPolicy, VecNormalize, ``lanes`` AsyncEval workers) run
    deterministically in one process: the lanes are virtual workers, each with its own env.

    ``iterate()`` runs one iteration; ``evaluate(env, seeds)`` the deterministic policy on the
    main statistics, clipped, as ``benchmarks/learning.py`` evaluates sb3-contrib; ``state()``
    and ``Emulation.resume`` checkpoint it exactly (JSON).
    """

    def __init__(self, env_id: str, seed: int, n_delta: int | None = None, **settings: Any):
        unknown = sorted(set(settings) - set(SB3_EMULATION))
        if unknown:
            raise ValueError(f"unknown sb3-emulation settings {unknown}: use {list(SB3_EMULATION)}")
        hp = ars.settings_for(env_id, "paper")
        if hp["policy"] != "LinearPolicy":
            raise ValueError(f"sb3-emulation runs LinearPolicy tasks, not {env_id}")
        self.env_id, self.seed, self.settings = env_id, seed, {**SB3_EMULATION, **settings}
        self.n = n_delta or hp["n_delta"]
        self.b = min(hp["n_top"] or self.n, self.n)  # as learning.py runs sb3-contrib
        self.alpha, self.nu = hp["learning_rate"], hp["delta_std"]
        self.shift, self.v2 = hp["alive_bonus_offset"], hp["normalize_obs"]
        self.dtype = np.float32 if self.settings["float32"] else np.float64
        self.envs = [ars.make_env(env_id) for _ in range(self.settings["lanes"])]
        space = self.envs[0].action_space
        if not isinstance(space, ars.spaces.Box):
            raise ValueError(f"sb3-emulation runs tasks of Box actions; {env_id} has {space}")
        self.low, self.high = space.low.astype(self.dtype), space.high.astype(self.dtype)
        self.obs_dim = self.envs[0].observation_space.shape[0]
        self.act_dim = space.shape[0]
        self.theta = np.zeros(self.act_dim * self.obs_dim, self.dtype)  # zero_policy
        self.index = self.timesteps = 0
        self.old_count, self.diagnostics = 0.0, []
        for lane, env in enumerate(self.envs):  # an unseeded worker env, made repeatable
            env.unwrapped.np_random = np.random.default_rng(
                int(ars.env_seeds(seed, 9, n=1, first=lane)[0])
            )
        self.main = self.exact = None
        if self.v2:  # sb3's learn() resets the main env (seeded): its first state is counted
            obs, _ = ars.make_env(env_id).reset(seed=int(ars.env_seeds(seed, n=1, first=10)[0]))
            self.main = SB3Statistics(self.obs_dim).combine(obs, np.zeros(self.obs_dim), 1)
            self.exact = ars.RunningMeanStd((self.obs_dim,)).update(obs[None])

    def state(self) -> dict:
        """Everything a resume needs, as JSON."""
        return {
            "seed": self.seed,
            "n_delta": self.n,
            "settings": self.settings,
            "theta": self.theta.tolist(),
            "index": self.index,
            "timesteps": self.timesteps,
            "old_count": self.old_count,
            "diagnostics": self.diagnostics,
            "main": None if self.main is None else self.main.to_json(),
            "exact": None
            if self.exact is None
            else [self.exact.mean.tolist(), self.exact.var.tolist(), self.exact.count],
            "rng": [env.unwrapped.np_random.bit_generator.state for env in self.envs],
        }

    @staticmethod
    def resume(env_id: str, state: dict) -> Emulation:
        """The emulation ``state()`` was taken from, exactly."""
        emulation = Emulation(env_id, state["seed"], state["n_delta"], **state["settings"])
        emulation.theta = np.array(state["theta"], emulation.dtype)
        emulation.index, emulation.timesteps = state["index"], state["timesteps"]
        emulation.old_count, emulation.diagnostics = state["old_count"], state["diagnostics"]
        if state["main"] is not None:
            emulation.main = SB3Statistics.from_json(state["main"])
            mean, var, count = state["exact"]
            emulation.exact = ars.RunningMeanStd.from_moments(np.array(mean), np.array(var), count)
        for env, rng in zip(emulation.envs, state["rng"]):
            env.unwrapped.np_random.bit_generator.state = rng
        return emulation

    def normalise(self, obs: np.ndarray, rms: SB3Statistics | None) -> np.ndarray:
        """VecNormalize's ``normalize_obs``: ``clip((x - mean) / sqrt(var + 1e-8), +-10)``."""
        if rms is None:
            return obs.astype(self.dtype)
        z, clip = (obs - rms.mean) / np.sqrt(rms.var + EPSILON), self.settings["clip_obs"]
        return (np.clip(z, -clip, clip) if clip else z).astype(self.dtype)

    def episode(
        self,
        env: Any,
        weights: np.ndarray,
        rms: Any,
        update: bool,
        rows: list,
        reset_seed: int | None,
    ) -> tuple[float, int, int]:
        """One candidate's episode, as SB3's evaluate_policy runs it in a worker: its return,
        length and clipped entries. With ``update``, ``rms`` takes each state before it is
        normalised (VecNormalize's training mode); ``rows`` gets every state it took: the
        reset one, each next one, and DummyVecEnv's auto-reset one (the final one never)."""
        low, high, clip = self.low, self.high, self.settings["clip_obs"]
        zeros, total, length, clipped = np.zeros(self.obs_dim), 0.0, 0, 0
        obs, _ = env.reset(seed=reset_seed)
        while True:
            if rms is not None:
                rows.append(obs)
                if update:
                    rms.combine(obs, zeros, 1)
                z = (obs - rms.mean) / np.sqrt(rms.var + EPSILON)
                if clip:
                    clipped += np.count_nonzero(np.abs(z) > clip)
                    z = np.clip(z, -clip, clip)
                obs = z
            action = np.clip(weights @ obs.astype(self.dtype), low, high)
            obs, reward, terminated, truncated, _ = env.step(action)
            total, length = total + reward, length + 1
            if terminated or truncated:
                break
        obs, _ = env.reset()  # DummyVecEnv's auto-reset: VecNormalize takes its state
        if rms is not None:
            rows.append(obs)
            if update:
                rms.combine(obs, zeros, 1)
        return round(total, 6), length, clipped  # Monitor rounds the return to 6 digits

    def iterate(self) -> None:
        """One iteration of sb3-contrib's ``_do_one_update`` with ``lanes`` workers."""
        n, s = self.n, self.settings
        deltas = np.stack(
            [ars.direction(self.seed, self.index, k, len(self.theta)) for k in range(n)]
        ).astype(self.dtype)
        candidates = np.concatenate([self.theta + self.nu * deltas, self.theta - self.nu * deltas])
        returns, steps, clipped, lanes = np.zeros(2 * n, self.dtype), 0, 0, []
        per_step = self.index > 0 or s["first_iteration_normalised"]
        for lane, env in enumerate(self.envs):
            start = None
            if self.v2:  # sync_obs_rms after each iteration; iteration 0's are fresh
                start = self.main.copy() if self.index > 0 else SB3Statistics(self.obs_dim)
            rms, rows = None if start is None else start.copy(), []
            for i in range(lane, 2 * n, len(self.envs)):
                if start is not None and not s["carry_over"]:
                    rms = start.copy()
                seed = None
                if s["common_random_numbers"]:
                    seed = int(ars.env_seeds(self.seed, ars.ENV_SEEDS, self.index, i % n, n=1)[0])
                weights = candidates[i].reshape(self.act_dim, self.obs_dim)
                r, length, c = self.episode(env, weights, rms, per_step, rows, seed)
                returns[i], steps, clipped = r + self.shift * length, steps + length, clipped + c
            if start is not None:
                new = ars.RunningMeanStd((self.obs_dim,)).update(np.array(rows))
                carried = (
                    rms
                    if per_step and s["carry_over"]
                    else start.combine(new.mean, new.var, new.count)
                )
                lanes.append((carried, new))
        self.merge(lanes, clipped)
        r_plus, r_minus = returns[:n], returns[n:]
        top = np.argsort(-np.maximum(r_plus, r_minus), kind="stable")[: self.b]
        kept = np.concatenate([r_plus[top], r_minus[top]])
        if s["sb3_sigma"]:
            step_size = self.alpha / (self.b * kept.std(ddof=1) + 1e-6)
        else:
            sigma = kept.std()
            step_size = self.alpha / (self.b * sigma) if sigma > 0 else 0.0
        self.theta = self.theta + step_size * ((r_plus[top] - r_minus[top]) @ deltas[top])
        self.index, self.timesteps = self.index + 1, self.timesteps + steps

    def merge(self, lanes: list, clipped: int) -> None:
        """sb3-contrib's merge of the workers' statistics into the main ones, or the exact one,
        and the diagnostics: the share of clipped entries, the merged over the exact sigma."""
        if self.main is None:
            return
        for carried, new in lanes:
            if self.settings["count_correction"]:  # the old data is counted again, then
                self.main.combine(carried.mean, carried.var, carried.count)  # its count not
                self.main.count -= self.old_count
            else:
                self.main.combine(new.mean, new.var, new.count)
            self.exact.combine(new)
        self.old_count = self.main.count
        ratio = np.sqrt(self.main.var / np.where(self.exact.var > 0, self.exact.var, np.nan))
        entries = sum(new.count for _, new in lanes) * self.obs_dim
        self.diagnostics.append(
            [
                self.timesteps,
                float(clipped / entries),
                float(np.nanmedian(ratio)),
                float(np.nanmin(ratio)),
                float(np.nanmax(ratio)),
            ]
        )

    def evaluate(self, env: Any, seeds: Any) -> np.ndarray:
        """Deterministic returns, one episode per env seed, on the main statistics (frozen)."""
        weights, returns = self.theta.reshape(self.act_dim, self.obs_dim), []
        for episode_seed in seeds:
            obs, _ = env.reset(seed=int(episode_seed))
            total, done = 0.0, False
            while not done:
                z = self.normalise(obs, self.main)
                action = np.clip(weights @ z, self.low, self.high)
                obs, reward, terminated, truncated, _ = env.step(action)
                total, done = total + reward, terminated or truncated
            returns.append(total)
        return np.array(returns)
