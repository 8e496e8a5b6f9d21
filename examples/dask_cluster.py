"""Evaluate ARS rollouts on a Dask cluster through its concurrent.futures executor.

    python examples/dask_cluster.py                                   # a local cluster of processes
    python examples/dask_cluster.py --scheduler tcp://10.0.0.5:8786   # an existing cluster

Needs `pip install "dask[distributed]"`. Each Dask worker builds the env once and
reuses it; the weights are the same as with AsyncEval or a single process.
"""

import argparse
import functools
import sys
from pathlib import Path

sys.path.insert(
    0, str(Path(__file__).resolve().parents[1])
)  # run from a checkout without installing
import executor_eval  # noqa: E402  (beside this file)
from executor_eval import ExecutorEval  # noqa: E402

import ars  # noqa: E402
from ars import evaluate_policy, make_env, paper_model  # noqa: E402


def main() -> None:
    """Train on a Dask cluster, as the flags say."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--env", default="Pendulum-v1")
    parser.add_argument(
        "--scheduler", help="address of a running Dask scheduler (default: start a local cluster)"
    )
    parser.add_argument("--workers", type=int, default=2, help="local cluster size")
    parser.add_argument("--total-timesteps", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    from dask.distributed import Client, LocalCluster

    cluster = None
    if args.scheduler is None:
        cluster = LocalCluster(
            n_workers=args.workers,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
        )
    with Client(args.scheduler or cluster) as client:
        for module in (ars, executor_eval):  # the workers must be able to import both
            client.upload_file(module.__file__)
        # The paper's hyper-parameters for this task (see ars.PAPER_SETTINGS)
        model = paper_model(args.env, seed=args.seed, verbose=1)
        evaluator = ExecutorEval(
            client.get_executor(pure=False), functools.partial(make_env, args.env), model.policy
        )
        model.learn(args.total_timesteps, async_eval=evaluator, log_interval=10)
    if cluster is not None:
        cluster.close()
    mean, std = evaluate_policy(model, args.env, n_eval_episodes=10, seed=args.seed + 1)
    print(f"{args.env}: mean return {mean:.1f} +/- {std:.1f} over 10 episodes")


if __name__ == "__main__":
    main()
