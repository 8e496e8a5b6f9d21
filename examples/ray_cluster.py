"""Evaluate ARS rollouts on a Ray cluster through a ten-line concurrent.futures adapter.

    python examples/ray_cluster.py                        # a local Ray instance
    python examples/ray_cluster.py --address auto         # an existing cluster

Needs `pip install ray`. Ray has no Executor of its own, but each remote call's
ObjectRef gives a concurrent.futures.Future, which is all ExecutorEval needs.
"""

import argparse
import concurrent.futures
import functools
import sys
from pathlib import Path

sys.path.insert(
    0, str(Path(__file__).resolve().parents[1])
)  # run from a checkout without installing
from executor_eval import ExecutorEval  # noqa: E402  (beside this file)

import ars  # noqa: E402
from ars import evaluate_policy, make_env, paper_model  # noqa: E402


class RayExecutor(concurrent.futures.Executor):
    """Run ``fn(*args)`` as a Ray task; the returned Future comes from ``ObjectRef.future()``."""

    def __init__(self) -> None:
        self._remote_fns = {}

    def submit(self, fn, /, *args, **kwargs):
        """Run ``fn`` as a Ray task; a Future of its result."""
        import ray

        if fn not in self._remote_fns:
            self._remote_fns[fn] = ray.remote(fn)
        return self._remote_fns[fn].remote(*args, **kwargs).future()


def main() -> None:
    """Train on a Ray cluster, as the flags say."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--env", default="Pendulum-v1")
    parser.add_argument("--address", help="Ray cluster address (default: start Ray locally)")
    parser.add_argument("--num-cpus", type=int, default=2, help="CPUs of a local Ray instance")
    parser.add_argument("--total-timesteps", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    import ray

    # py_modules ships ars.py to every worker, so they can `import ars`.
    ray.init(
        address=args.address,
        num_cpus=None if args.address else args.num_cpus,
        runtime_env={"py_modules": [ars]},
        include_dashboard=False,
    )
    # The paper's hyper-parameters for this task (see ars.PAPER_SETTINGS)
    model = paper_model(args.env, seed=args.seed, verbose=1)
    evaluator = ExecutorEval(
        RayExecutor(),
        functools.partial(make_env, args.env),
        model.policy,
        n_workers=int(ray.cluster_resources()["CPU"]),  # Ray's executor cannot say
    )
    model.learn(args.total_timesteps, async_eval=evaluator, log_interval=10)
    ray.shutdown()
    mean, std = evaluate_policy(model, args.env, n_eval_episodes=10, seed=args.seed + 1)
    print(f"{args.env}: mean return {mean:.1f} +/- {std:.1f} over 10 episodes")


if __name__ == "__main__":
    main()
