"""Rules that change ars's V2 statistics, for the HalfCheetah ablation of issue 19.

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
``clip-10``
    The paper's statistics, but the normalised observations are clipped to +-10, as
    VecNormalize's ``clip_obs`` does, in training and in evaluations.

``learning.py --arm vecnormalize`` trains ars on SB3's VecNormalize observations instead.
Evaluations (jobs that carry their own weights, as ``AsyncEval.send_jobs`` sends, or that
are theta itself) of the per-step arms keep the frozen statistics, as sb3-contrib's do.
Results: ``benchmarks/results/ablation_halfcheetah.md``. An arm is installed in each process
that runs rollouts: :func:`make_env` installs it in the worker that builds its env.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import ars

ARMS = ("per-step-statistics", "per-step-statistics-first-iteration", "clip-10")
_FROZEN_RULE = ars.run_job  # the paper's


def per_step_actor(network: ars.Network, theta: Any, frozen: ars.RunningMeanStd) -> Any:
    """``obs -> action`` that folds each ``obs`` into a private copy of ``frozen``, then acts
    on it normalised with the statistics so far (V2 folded into the first layer, as ars does)."""
    statistics = frozen.copy()

    def act(obs: Any) -> Any:
        statistics.update(obs)
        return network.actor(theta, statistics)(obs)

    return act


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
    actor = per_step_actor if per_step else clipped_actor
    act = actor(it.network, ars.candidate_parameters(it, job), it.obs_rms)
    returns, lengths, visited = ars.run_episodes(
        env, act, job.seeds, options, it.track_obs, it.max_episode_steps, on_step
    )
    flagged = not np.isfinite(visited.mean).all()  # as ars.run_job: NaN statistics flag a state
    return ars.Result(returns, lengths, visited if it.track_obs or flagged else None)


def install(arm: str) -> None:
    """Make ``arm`` the rule of this process's rollouts."""
    if arm not in ARMS:
        raise ValueError(f"unknown arm {arm!r}: use one of {ARMS}")
    ars.run_job = lambda *args, **kwargs: run_job(*args, **kwargs, arm=arm)


def make_env(arm: str, env_id: str) -> Any:
    """``ars.make_env(env_id)`` in a worker, with ``arm`` installed there first."""
    install(arm)
    return ars.make_env(env_id)
