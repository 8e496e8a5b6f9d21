"""ExecutorEval: ARS's rollouts as tasks on any ``concurrent.futures.Executor``.

    import sys; sys.path.insert(0, "examples")   # or copy this file beside ars.py
    from executor_eval import ExecutorEval

A ProcessPoolExecutor, Dask (``client.get_executor(pure=False)``), mpi4py's
MPIPoolExecutor, or Ray through the adapter of ``ray_cluster.py``: the same weights as
``AsyncEval`` or one process. It lives here, beside the cluster examples that use it; it
uses only ars's evaluator API (``ars.Evaluator``, ``ars.run_jobs``). The workers must be
able to import both files (on Dask: ``client.upload_file`` each of them).
"""

from __future__ import annotations

import atexit
import concurrent.futures
import hashlib
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import cloudpickle

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # ars.py of this checkout
import ars  # noqa: E402
from ars import (  # noqa: E402
    DEFAULT_JOB_TIMEOUT,
    EvaluationTimeout,
    Iteration,
    Job,
    Result,
    batch_sizes,
    check_number,
    is_int,
    make_env,
    run_jobs,
)

_TASK_ENVS: dict[int, tuple[str, Any]] = {}  # per worker thread: its env, and of what


def _run_task(env_fn_bytes: bytes, it_bytes: bytes, jobs: list[Job], options: dict | None) -> list:
    """One executor task: ``jobs`` on the env this worker thread keeps for the env function."""
    key, thread = hashlib.sha256(env_fn_bytes).hexdigest(), threading.get_ident()
    if _TASK_ENVS.get(thread, ("",))[0] != key:
        if not _TASK_ENVS:
            atexit.register(lambda: [env.close() for _, env in _TASK_ENVS.values()])
        if thread in _TASK_ENVS:
            _TASK_ENVS.pop(thread)[1].close()
        _TASK_ENVS[thread] = (key, make_env(cloudpickle.loads(env_fn_bytes)))
    env, it = _TASK_ENVS[thread][1], cloudpickle.loads(it_bytes)
    return list(zip([job.candidate for job in jobs], run_jobs(env, it, jobs, options)))


class ExecutorEval(ars.Evaluator):
    """Evaluate candidates as tasks on any ``concurrent.futures.Executor``.

    ProcessPoolExecutor, Dask (``client.get_executor(pure=False)``), mpi4py's
    MPIPoolExecutor, or Ray through a small adapter (``examples/ray_cluster.py``). Each
    task carries the iteration once and a batch of jobs; each worker process builds the
    env once and keeps it. The workers must be able to ``import ars``. The executor stays
    the caller's: :meth:`close` does not shut it down.

    Parameters
    ----------
    executor, env_fn : concurrent.futures.Executor, callable or str
        Anything with ``submit(fn, *args) -> Future``; the function returning the env (or a
        vector env, or an env id), sent to the workers with cloudpickle.
    train_policy, n_eval_episodes
        As for :class:`AsyncEval`.
    jobs_per_task, n_workers : int, optional
        Fix the jobs per task; or tasks are sized (:func:`batch_sizes`) from the workers,
        read from the executor at each evaluation where it says (ProcessPoolExecutor, Dask,
        whose cluster may grow), else the CPU count: pass ``n_workers`` for Ray or MPI.
    job_timeout : float
        Seconds per job before an unfinished task is taken for stuck (once tasks have been
        timed, at most ``job_timeout`` plus 20 times a task's measured length): the futures
        are cancelled, this evaluator closes and a ProcessPoolExecutor's processes are ended."""

    def __init__(
        self,
        executor: Any,
        env_fn: Callable[[], Any] | str,
        train_policy: Any = None,
        n_eval_episodes: int = 1,
        jobs_per_task: int | None = None,
        n_workers: int | None = None,
        job_timeout: float = DEFAULT_JOB_TIMEOUT,
    ):
        check_number("job_timeout", job_timeout, positive=True)
        if jobs_per_task is not None and not (is_int(jobs_per_task) and jobs_per_task >= 1):
            raise ValueError(f"jobs_per_task must be an integer >= 1 or None; got {jobs_per_task}")
        self.executor, self.jobs_per_task, self.job_timeout = executor, jobs_per_task, job_timeout
        self._given_workers = n_workers  # else read from the executor at every evaluate
        self.n_workers = int(n_workers or _executor_workers(executor))
        super().__init__(train_policy, n_eval_episodes)
        self._env_fn_bytes, self.closed = cloudpickle.dumps(env_fn), False
        self._job_seconds = None  # the slowest measured seconds per job

    def set_options(self, options: dict | None = None) -> list[None]:
        """Options passed to every ``env.reset`` of later jobs (one dict for all workers)."""
        if isinstance(options, list):
            raise ValueError("ExecutorEval has no fixed workers: pass one options dict for all")
        self.options = [options] * self.n_workers
        return [None]

    def evaluate(
        self, it: Iteration, jobs: Sequence[Job], on_step: Any = None, record: bool = False
    ) -> list[Result]:
        """One Result per job, in job order (see AsyncEval.evaluate)."""
        if on_step is not None:
            raise ValueError("ExecutorEval's tasks cannot call on_step: use ars.InProcessEval")
        with self.exclusive():
            if not self._given_workers:  # a cluster may have grown since the last iteration
                self.n_workers = _executor_workers(self.executor)
            per_task, n = self.jobs_per_task, len(jobs)
            sizes = [per_task] * -(-n // per_task) if per_task else batch_sizes(n, self.n_workers)
            it_bytes, tasks, start = cloudpickle.dumps(it), {}, 0
            try:
                for size in sizes:
                    chunk, start = list(jobs[start : start + size]), start + size
                    args = (_run_task, self._env_fn_bytes, it_bytes, chunk, self.options[0])
                    tasks[self.executor.submit(*args)] = chunk
                results = self._collect(tasks, concurrent.futures, record)
            except BaseException as error:
                stuck = isinstance(error, EvaluationTimeout)
                self.closed |= stuck
                _abandon(self.executor, tasks, stuck)
                raise
        return [results[job.candidate] for job in jobs]

    def _collect(self, tasks: dict, futures: Any, record: bool) -> dict[int, Result]:
        """The tasks' results as they finish; a task late by its timeout raises."""
        pending, results, start = set(tasks), {}, time.monotonic()
        while pending:
            n, measured = max(len(tasks[f]) for f in pending), self._job_seconds
            timeout = self.job_timeout * n  # generous; hours only if tasks were measured so long
            timeout = min(timeout, self.job_timeout + 20 * (measured or math.inf) * n)
            done, pending = futures.wait(pending, timeout=timeout, return_when="FIRST_COMPLETED")
            if not done:
                jobs = tasks[next(iter(pending))]
                raise EvaluationTimeout(
                    f"no executor task finished in {timeout:g} s; still waiting for the task of "
                    f"candidates {jobs[0].candidate}-{jobs[-1].candidate} (env seeds from "
                    f"{[int(s) for s in jobs[0].seeds]}) among others: is an env stuck, or are "
                    "the workers gone? Pass a larger job_timeout for longer episodes."
                )
            per_job = (time.monotonic() - start) / min(len(tasks[f]) for f in done)
            self._job_seconds = max(self._job_seconds or 0.0, per_job)
            for future in done:
                try:
                    out = future.result()
                except BaseException as error:
                    first = tasks[future][0].candidate
                    raise RuntimeError(
                        f"an executor task failed (candidates from {first}): "
                        f"{type(error).__name__}: {error}"
                    ) from error
                results.update(out)
                for _, result in out if record else ():
                    self.record_visited(0, result)
        return results

    def close(self) -> None:
        """Refuse further work; the executor itself is left running. Idempotent."""
        self.closed = True


def _executor_workers(executor: Any) -> int:
    """How many workers an executor has, where it says; else the CPU count."""
    if getattr(executor, "_max_workers", None):
        return int(executor._max_workers)
    client = getattr(executor, "_client", None)
    if client is not None and hasattr(client, "nthreads"):
        if getattr(client, "status", "running") in ("closed", "closing"):
            raise RuntimeError("the Dask client of this executor is closed: make a new client")
        return max(1, sum(client.nthreads().values()))
    return int(getattr(executor, "n_workers", None) or os.cpu_count() or 1)


def _abandon(executor: Any, tasks: dict, stuck: bool) -> None:
    """Cancel unfinished tasks; for stuck ones, a ProcessPoolExecutor's processes are ended."""
    for future in tasks:
        future.cancel()
    if stuck and type(executor).__name__ == "ProcessPoolExecutor":
        processes = list((getattr(executor, "_processes", None) or {}).values())
        for process in processes:
            process.terminate()
        for process in processes:  # reaped: no zombies left behind
            process.join(timeout=5)
        executor.shutdown(wait=False, cancel_futures=True)


if __name__ == "__main__":  # a demo: Pendulum's rollouts on a pool of two processes
    import argparse
    import functools
    from concurrent.futures import ProcessPoolExecutor

    parser = argparse.ArgumentParser(description="ARS on Pendulum-v1 with a ProcessPoolExecutor")
    parser.add_argument("--total-timesteps", type=int, default=50_000)
    args = parser.parse_args()
    model = ars.paper_model("Pendulum-v1", seed=0)
    with ProcessPoolExecutor(2) as pool:
        evaluator = ExecutorEval(pool, functools.partial(make_env, "Pendulum-v1"), model)
        model.learn(args.total_timesteps, async_eval=evaluator)
    print("mean return, std:", ars.evaluate_policy(model, "Pendulum-v1"))
