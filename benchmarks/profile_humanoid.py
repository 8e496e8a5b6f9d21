"""Where the time of a Humanoid iteration goes: simulation, ars, idle workers, the driver.

    python benchmarks/profile_humanoid.py                  # 2 workers, the paper's N = b = 230
    python benchmarks/profile_humanoid.py --checkpoint benchmarks/runs/.../checkpoint-142.npz \
        --iterations 2 --label "checkpoint at 6.5M steps (iteration 142)"

One iteration is 460 rollouts (short early episodes, unless a trained checkpoint is
given), 376-dimensional observations, 2 worker processes. Inside each worker a wrapper
times env.step and env.reset; around the evaluator, the learner's own work between
rollouts is timed. The report splits the workers' wall time into simulation, ars's own
cost in the workers, and idle time, and gives the driver's serial time per iteration.
Results go to benchmarks/results/profile_humanoid.json.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

import ars

RESULTS = Path(__file__).resolve().parent / "results"


class TimedEnv(gym.Wrapper):
    """Times step and reset into ``folder/<pid>.totals``, a shared memory map: the driver
    reads (step seconds, reset seconds, steps) as they are, with no flush to wait for."""

    def __init__(self, env: gym.Env, folder: str):
        super().__init__(env)
        path = Path(folder) / f"{os.getpid()}.totals"
        self.totals = np.memmap(path, dtype=np.float64, mode="w+", shape=(3,)).view(np.ndarray)

    def step(self, action):  # noqa: ANN001, ANN201
        """Step the env, adding the time to the total."""
        start = time.perf_counter()
        out = self.env.step(action)
        self.totals[0] += time.perf_counter() - start
        self.totals[2] += 1
        return out

    def reset(self, **kwargs):  # noqa: ANN003, ANN201
        """Reset the env, adding the time to the total."""
        start = time.perf_counter()
        out = self.env.reset(**kwargs)
        self.totals[1] += time.perf_counter() - start
        return out


def timed_env(folder: str) -> gym.Env:
    """Humanoid-v4 with its steps and resets timed."""
    return TimedEnv(ars.make_env("Humanoid-v4"), folder)


class TimedEvaluator:
    """The evaluator, with the time spent inside it (rollouts) counted."""

    def __init__(self, evaluator: ars.AsyncEval):
        self.evaluator, self.n_workers, self.seconds = evaluator, evaluator.n_workers, 0.0

    def evaluate(self, it, jobs, on_step=None, record=False):  # noqa: ANN001, ANN201
        """Evaluate through the wrapped evaluator, timed."""
        start = time.perf_counter()
        results = self.evaluator.evaluate(it, jobs, on_step, record)
        self.seconds += time.perf_counter() - start
        return results


def totals(folder: str) -> np.ndarray:
    """The workers' (step seconds, reset seconds, steps), summed."""
    return sum(np.fromfile(p, dtype=np.float64) for p in Path(folder).glob("*.totals"))


def main() -> None:
    """Profile a Humanoid run and write where its time goes."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--iterations", type=int, default=4)
    parser.add_argument(
        "--checkpoint", help="profile this trained model's iterations instead of the zero policy"
    )
    parser.add_argument("--label", default="zero policy (iteration 1)", help="the result's name")
    args = parser.parse_args()
    folder = tempfile.mkdtemp()
    if args.checkpoint:
        model = ars.ARS.load(args.checkpoint, env="Humanoid-v4")
    else:
        model = ars.paper_model("Humanoid-v4", seed=237)
    per_iteration = 2 * model.n_delta
    with ars.AsyncEval([functools.partial(timed_env, folder)] * args.workers) as async_eval:
        timed = TimedEvaluator(async_eval)

        def iterations(n: int) -> None:
            target = model.n_updates + n
            model.learn(
                10**9,
                async_eval=timed,
                reset_num_timesteps=False,
                callback=lambda locals_, globals_: model.n_updates < target,
            )

        iterations(1)  # warm up: workers and envs built
        step0, reset0, n0 = totals(folder)
        timed.seconds, steps0, start = 0.0, model.num_timesteps, time.perf_counter()
        iterations(args.iterations)
        wall = time.perf_counter() - start
        step1, reset1, n1 = totals(folder)
    steps, worker_wall = model.num_timesteps - steps0, args.workers * timed.seconds
    simulation = (step1 - step0) + (reset1 - reset0)
    report = {
        "iterations": args.iterations,
        "workers": args.workers,
        "timesteps": steps,
        "mean_episode_length": steps / (per_iteration * args.iterations),
        "wall_seconds": wall,
        "steps_per_second": steps / wall,
        "worker_share_env_step": (step1 - step0) / (args.workers * wall),
        "worker_share_env_reset": (reset1 - reset0) / (args.workers * wall),
        "worker_share_ars_and_idle_during_rollouts": (worker_wall - simulation)
        / (args.workers * wall),
        "worker_share_idle_while_the_driver_works": (wall - timed.seconds) / wall,
        "driver_seconds_per_iteration": (wall - timed.seconds) / args.iterations,
        "env_step_us": (step1 - step0) / max(n1 - n0, 1) * 1e6,
    }
    for key, value in report.items():
        print(f"{key:45} {value:,.4g}" if isinstance(value, float) else f"{key:45} {value}")
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / "profile_humanoid.json"
    results = json.loads(path.read_text()) if path.exists() else {}
    results[args.label] = {**report, "command": shlex.join(["python", *sys.argv])}
    results.pop("commands", None)  # older files listed the commands apart
    path.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
