"""How fast the driver deals candidates: seeds instead of weights, to any executor.

    python benchmarks/scaling.py                    # every executor installed, 5 iterations each
    python benchmarks/scaling.py --executors dask --iterations 10

A Humanoid-shaped problem (376 inputs, 17 outputs, N = b = 230: 460 candidates per
iteration) on an env that ends after one step, so that what is left is the driver's
own cost: drawing directions, dealing jobs, collecting results, merging statistics,
updating. Two protocols run side by side on each executor, with 2 workers:

- "weights": what ars did before: every job carries its candidate's full parameter
  vector, one candidate per task (the seed's ``send_jobs`` path, ``jobs_per_task=1``);
- "seeds": what ``learn`` does now: the iteration once per task or worker, then jobs
  of a few integers, in batches sized from the workers (``batch_sizes``).

It prints candidates per second through the driver and the bytes the driver sends
per iteration, and writes benchmarks/results/scaling.json and scaling.md.
"""

from __future__ import annotations

import argparse
import functools
import json
import multiprocessing.connection
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import cloudpickle
import gymnasium as gym
import numpy as np
from gymnasium import spaces

import ars

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from executor_eval import ExecutorEval  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
POLICIES = {
    "linear": dict(policy="LinearPolicy", policy_kwargs=dict(with_bias=True)),
    "mlp [64, 64]": dict(policy="MlpPolicy", policy_kwargs=dict(net_arch=[64, 64])),
}


class OneStep(gym.Env):
    """Humanoid's shapes; every episode ends after one step."""

    observation_space = spaces.Box(-np.inf, np.inf, (376,), np.float64)
    action_space = spaces.Box(-0.4, 0.4, (17,), np.float32)

    def reset(self, *, seed=None, options=None):
        """A random first observation."""
        super().reset(seed=seed)
        return self.np_random.normal(size=376), {}

    def step(self, action):
        """A random observation; every episode is one step long."""
        return self.np_random.normal(size=376), float(np.sum(action)), True, False, {}


class Counted:
    """An executor whose ``submit`` counts the bytes of its arguments (as sent to a worker)."""

    def __init__(self, executor):
        self.executor, self.bytes = executor, 0

    def submit(self, fn, *args):
        """Submit, counting the bytes the arguments pickle to."""
        self.bytes += len(cloudpickle.dumps(args))
        return self.executor.submit(fn, *args)


class WeightsMode:
    """The old protocol: candidates materialised by the driver and sent as weight vectors."""

    def __init__(self, evaluator):
        self.evaluator, self.n_workers = evaluator, evaluator.n_workers

    def evaluate(self, it, jobs, on_step=None):
        """Evaluate with each job's weights sent whole (the "weights" protocol)."""
        jobs = [job._replace(weights=ars.candidate_parameters(it, job)) for job in jobs]
        return self.evaluator.evaluate(
            it._replace(theta=np.zeros(0)), jobs, on_step
        )  # weights only


def _count_pipe_bytes():
    """Count what AsyncEval sends through its pipes."""
    sent = [0]
    original = multiprocessing.connection.Connection.send

    def send(self, obj):
        sent[0] += len(multiprocessing.reduction.ForkingPickler.dumps(obj))
        return original(self, obj)

    multiprocessing.connection.Connection.send = send
    return sent


def measure(make_evaluator, settings, iterations, weights_mode) -> tuple[float, float]:
    """Candidates per second through the driver, and driver-sent bytes per iteration."""
    config = dict(settings)
    model = ars.ARS(
        config.pop("policy"),
        env=OneStep(),
        n_delta=230,
        n_top=230,
        normalize_obs=True,
        seed=0,
        **config,
    )
    evaluator, counter = make_evaluator()
    if weights_mode:
        evaluator = WeightsMode(evaluator)
    model.learn(460, async_eval=evaluator)  # warm up: workers built, envs cached
    before, start = counter(), time.perf_counter()
    model.learn(460 * iterations, async_eval=evaluator, reset_num_timesteps=False)
    seconds = time.perf_counter() - start
    return 460 * iterations / seconds, (counter() - before) / iterations


def executor_for(name: str, workers: int) -> tuple[object, list]:
    """An executor with ``workers`` worker processes, and what closes it (None: not installed)."""
    if name == "process-pool":
        executor = ProcessPoolExecutor(workers)
        return executor, [executor.shutdown]
    if name == "dask":
        try:
            import distributed
        except ImportError:
            return None, []
        cluster = distributed.LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
        )
        client = distributed.Client(cluster)
        return client.get_executor(pure=False), [client.close, cluster.close]
    try:
        import ray
    except ImportError:
        return None, []
    ray.init(num_cpus=workers, include_dashboard=False, runtime_env={"py_modules": [ars]})
    return RayExecutor(), [ray.shutdown]


class RayExecutor:
    """``submit(fn, *args)`` as a Ray task (as in examples/ray_cluster.py)."""

    def __init__(self):
        self.remote = {}

    def submit(self, fn, *args):
        """Submit ``fn`` as a Ray task."""
        import ray

        self.remote.setdefault(fn, ray.remote(fn))
        return self.remote[fn].remote(*args).future()


def main() -> None:
    """Measure candidates per second and bytes sent, per executor and protocol."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--executors", nargs="*", default=["async", "process-pool", "dask", "ray"])
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--report", action="store_true", help="only rebuild scaling.md from scaling.json"
    )
    args = parser.parse_args()
    if args.report:
        write_tables(json.loads((RESULTS / "scaling.json").read_text())["rows"])
        return
    pipe_bytes = _count_pipe_bytes()
    rows = []
    for name in args.executors:
        if name == "async":
            async_eval = ars.AsyncEval([OneStep] * args.workers)
            cleanup = [async_eval.close]

            def make(weights, async_eval=async_eval):
                return async_eval, lambda: pipe_bytes[0]
        else:
            executor, cleanup = executor_for(name, args.workers)
            if executor is None:
                print(f"{name}: not installed, skipped")
                continue
            counted = Counted(executor)

            def make(weights, counted=counted):
                evaluator = ExecutorEval(
                    counted, OneStep, n_workers=args.workers, jobs_per_task=1 if weights else None
                )
                return evaluator, lambda: counted.bytes

        for policy, settings in POLICIES.items():
            protocols = ("weights", "seeds") + (
                () if name == "async" else ("seeds, 1 job per task",)
            )
            for protocol in protocols:
                weights, one_per_task = protocol == "weights", protocol != "seeds"
                rate, sent = measure(
                    functools.partial(make, one_per_task), settings, args.iterations, weights
                )
                rows.append(
                    dict(
                        executor=name,
                        policy=policy,
                        protocol=protocol,
                        candidates_per_s=rate,
                        bytes_per_iteration=sent,
                        workers=args.workers,
                    )
                )
                print(
                    f"{name:13} {policy:13} {protocol:8} {rate:9,.0f} candidates/s "
                    f"{sent / 1e6:9.2f} MB sent per iteration",
                    flush=True,
                )
        for close in cleanup:
            close()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "scaling.json").write_text(
        json.dumps({"cpus": os.cpu_count(), "rows": rows}, indent=1) + "\n"
    )
    write_tables(rows)


WORKLOADS = {  # candidates per iteration, and a worker's seconds per candidate (measured here)
    "Humanoid, early episodes (25 steps)": (460, 25 * 310e-6),
    "Humanoid, late episodes (1000 steps)": (460, 1000 * 310e-6),
    "HalfCheetah (1000 steps, N = 32)": (64, 1000 * 43e-6),
}


def efficiency(candidates: int, seconds: float, workers: int, tasks: int, per_task: float) -> float:
    """Share of the workers' time spent evaluating, for one iteration.

    The workers need ``ceil(candidates / workers)`` candidates' time at least; the driver
    needs ``per_task`` seconds to dispatch and collect each task. The iteration lasts the
    longer of the two.
    """
    work = -(-candidates // workers) * seconds
    return candidates * seconds / workers / max(work, tasks * per_task)


def projections(rows: list[dict]) -> list[str]:
    """Efficiency at 8, 48 and 256 workers from the measured per-task cost on Dask (linear)."""
    rate = {
        r["protocol"]: r["candidates_per_s"]
        for r in rows
        if r["executor"] == "dask" and r["policy"] == "linear"
    }
    if not {"weights", "seeds, 1 job per task"} <= set(rate):
        return []
    per_task = {"weights": 1 / rate["weights"], "seeds": 1 / rate["seeds, 1 job per task"]}
    lines = [
        f"Per-task cost on Dask, measured here: {per_task['weights'] * 1e3:.1f} ms (weights), "
        f"{per_task['seeds'] * 1e3:.1f} ms (seeds).",
        "",
        "| workload | workers | weights, 1 per task | seeds, batches | seeds, at 1 ms per task |",
        "|---" * 5 + "|",
    ]
    for name, (candidates, seconds) in WORKLOADS.items():
        for workers in (8, 48, 256):
            batches = len(ars.batch_sizes(candidates, workers))
            old = efficiency(candidates, seconds, workers, candidates, per_task["weights"])
            new = efficiency(candidates, seconds, workers, batches, per_task["seeds"])
            cluster = efficiency(candidates, seconds, workers, batches, 1e-3)
            lines.append(f"| {name} | {workers} | {old:.0%} | {new:.0%} | {cluster:.0%} |")
    return lines


def write_tables(rows: list[dict]) -> None:
    """scaling.md: the measured table, then the projection to more workers."""
    by = {(r["executor"], r["policy"], r["protocol"]): r for r in rows}
    lines = [
        "| executor | policy | weights: candidates/s | seeds: candidates/s | speed-up "
        "| weights: MB/iteration | seeds: MB/iteration |",
        "|---" * 7 + "|",
    ]
    for (executor, policy, protocol), old in by.items():
        if protocol != "weights":
            continue
        new = by[(executor, policy, "seeds")]
        lines.append(
            f"| {executor} | {policy} | {old['candidates_per_s']:,.0f} "
            f"| {new['candidates_per_s']:,.0f} | "
            f"{new['candidates_per_s'] / old['candidates_per_s']:.1f}x "
            f"| {old['bytes_per_iteration'] / 1e6:.2f} | {new['bytes_per_iteration'] / 1e6:.3f} |"
        )
    text = "\n".join(lines) + "\n\nProjected efficiency:\n\n" + "\n".join(projections(rows)) + "\n"
    (RESULTS / "scaling.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
