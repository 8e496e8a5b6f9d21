"""Probe: does ars need fewer HalfCheetah episodes with one of sb3-contrib's differences?

    python benchmarks/probe_halfcheetah.py vecnorm 237 759 959  # SB3 VecNormalize obs (clipped)
    python benchmarks/probe_halfcheetah.py nocrn 237 759 959    # no common random numbers

The paper's settings otherwise, 2 workers, evaluation as in learning.py (deterministic,
10 episodes on the run's evaluation seeds) after the update that crosses each 64,000
steps, stopping once two evaluations in a row reach 3430. Each run appends its first
crossing (timesteps, episodes, mean) to benchmarks/results/probe_halfcheetah.jsonl.
"""

from __future__ import annotations

import argparse
import functools
import json
import warnings

import numpy as np
from learning import RESULTS, confirmed, episode_returns, eval_seeds

import ars

ENV_ID, THRESHOLD, BUDGET, EVAL_EVERY = "HalfCheetah-v4", 3430, 8_000_000, 64_000


def probe(mode: str, seed: int) -> dict:
    """One probe run of ``mode`` on ``seed``: its evaluations."""
    vec_normalize = None
    if mode == "vecnorm":
        from stable_baselines3.common.env_util import make_vec_env
        from stable_baselines3.common.vec_env import VecNormalize

        vec_normalize = VecNormalize(make_vec_env(ENV_ID, n_envs=1), norm_reward=False)
        model = ars.paper_model(ENV_ID, env=vec_normalize, seed=seed, normalize_obs=False)
    else:
        model = ars.paper_model(ENV_ID, seed=seed, common_random_numbers=False)
    eval_env, records, next_eval = ars.make_env(ENV_ID), [], [0]

    def evaluate() -> float:
        normalize = None if vec_normalize is None else vec_normalize.normalize_obs
        return float(np.mean(episode_returns(model, normalize, eval_env, eval_seeds(seed))))

    def after_iteration(locals_: dict, globals_: dict) -> bool:
        if model.num_timesteps < next_eval[0]:
            return True
        next_eval[0] = model.num_timesteps + EVAL_EVERY
        records.append((model.num_timesteps, model.n_updates * 2 * model.n_delta, evaluate()))
        return not confirmed(records, THRESHOLD)  # (timesteps, episodes, mean)

    env_fns = [functools.partial(ars.make_env, ENV_ID)] * 2
    with ars.AsyncEval(env_fns, model.policy) as async_eval:
        model.learn(BUDGET, callback=after_iteration, async_eval=async_eval)
    first = next((r for r in records if r[2] >= THRESHOLD), None)
    return {"mode": mode, "seed": seed, "first_at_threshold": first, "last": records[-1]}


def main() -> None:
    """Run the probes the flags describe."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("mode", choices=["vecnorm", "nocrn"])
    parser.add_argument("seeds", nargs="+", type=int)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    for seed in args.seeds:
        result = probe(args.mode, seed)
        print(json.dumps(result), flush=True)
        with (RESULTS / "probe_halfcheetah.jsonl").open("a") as f:
            f.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
