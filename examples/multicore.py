"""Train on all cores of one machine with AsyncEval (one worker process per core).

    python examples/multicore.py                      # HalfCheetah-v4, the paper's settings
    python examples/multicore.py --env Hopper-v4 --workers 2 --total-timesteps 1000000

The weights are bit-identical to a single-process run with the same seed,
whatever the number of workers.
"""

import argparse
import functools
import os
import sys
from pathlib import Path

sys.path.insert(
    0, str(Path(__file__).resolve().parents[1])
)  # run from a checkout without installing
from ars import AsyncEval, evaluate_policy, make_env, paper_model  # noqa: E402


def main() -> None:
    """Train with AsyncEval's worker processes, as the flags say."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--env", default="HalfCheetah-v4")
    parser.add_argument("--workers", type=int, default=os.cpu_count())
    parser.add_argument("--total-timesteps", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    # The paper's hyper-parameters for this task (see ars.PAPER_SETTINGS)
    model = paper_model(args.env, seed=args.seed, verbose=1)
    # One env function per worker. functools.partial pickles cleanly for every start method.
    envs_fn = [functools.partial(make_env, args.env)] * args.workers
    with AsyncEval(envs_fn, model.policy) as async_eval:
        model.learn(args.total_timesteps, async_eval=async_eval, log_interval=5)
        # The same AsyncEval can serve further learn() calls; it closes at the end of the block.
    mean, std = evaluate_policy(model, args.env, n_eval_episodes=10, seed=args.seed + 1)
    print(f"{args.env}: mean return {mean:.1f} +/- {std:.1f} over 10 episodes")


if __name__ == "__main__":  # required: workers start with 'forkserver' or 'spawn'
    main()
