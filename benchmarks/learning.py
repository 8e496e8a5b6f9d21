"""Learning benchmark: the paper's hyper-parameters and protocol on MuJoCo, the paper's seeds.

    python benchmarks/learning.py --envs Walker2d-v4 Ant-v4       # train (resumes, skips done runs)
    python benchmarks/learning.py --envs Humanoid-v4 --seeds 237  # N = b = 230, the paper's
    python benchmarks/learning.py --envs Humanoid-v4 --n-delta 256  # rl-baselines3-zoo's N = b
    python benchmarks/learning.py --envs Hopper-v4 --peer sb3-contrib
    python benchmarks/learning.py --report                        # table and plots only
    python benchmarks/learning.py --envs HalfCheetah-v4 --set normalization_samples=1000 \
        --results benchmarks/results/ablation_halfcheetah.json    # an arm of an ablation
    python benchmarks/learning.py --envs HalfCheetah-v4 --arm per-step-statistics \
        --results benchmarks/results/ablation_halfcheetah.json    # a rule of benchmarks/arms.py

Protocol. Every --eval-freq timesteps (checked after each iteration) the current policy is
evaluated: deterministic, 10 episodes, the env's own rewards (no alive bonus), on seeds of
its own. Each evaluation records (timesteps, training seconds without the evaluations,
mean, std, episodes). A run stops at its budget or, with --stop-at-threshold (the
default), once an evaluation has reached the paper's threshold and the next one confirms.

Long runs. Each ars run keeps a checkpoint in benchmarks/runs/ (every evaluation, and at
least every --checkpoint-seconds): model and protocol state are written together, so an
interrupted run (SIGKILL, a closed terminal, a reboot) resumes exactly where its last
checkpoint was, and loses only the work since. A finished run is stored in
benchmarks/results/learning.json with its final model in benchmarks/results/models/,
and is never repeated; a larger budget continues a run that ended at its own. sb3-contrib
runs cannot resume (its learn() restarts from zero weights after a load), so an
interrupted peer run starts again. Each record names the commit of the ars.py it ran
(``code``), and sb3-contrib is evaluated at the same point of an iteration as ars: after
the update, before the next rollouts.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

import ars

THRESHOLDS = {
    "Swimmer": 325,
    "Hopper": 3120,
    "HalfCheetah": 3430,
    "Walker2d": 4390,
    "Ant": 3580,
    "Humanoid": 6000,
}
BUDGETS = {
    "Swimmer": 2_000_000,
    "Hopper": 7_000_000,
    "HalfCheetah": 12_500_000,
    "Walker2d": 30_000_000,
    "Ant": 30_000_000,
    "Humanoid": 40_000_000,
}
EVAL_FREQ = {"Walker2d": 200_000, "Ant": 200_000, "Humanoid": 250_000}  # others: 50,000
ZOO = {  # rl-baselines3-zoo's published sb3-contrib ARS results (older env versions)
    "Swimmer": "355 at 2M",
    "Hopper": "3344 at 7M",
    "HalfCheetah": "4815 at 12M",
    "Walker2d": "2994 at 75M",
    "Ant": "2334 at 75M",
    "Humanoid": "not published",
}
PAPER_SEEDS = [237, 759, 959]
# Humanoid's minutes depend on the machine: each record keeps the bare single-core env.step
# rate measured just before its run, and the table scales minutes to this rate (the rate
# when the seed-237 record was made, which is also what a record without one is taken at).
REFERENCE_RATE = {"Humanoid": 4150}
NOTES = "<!-- notes: kept when the table above is rebuilt -->"
HERE = Path(__file__).resolve().parent
RESULTS, RUNS = HERE / "results", HERE / "runs"


def task(env_id: str) -> str:
    """The task of an env id: ``Hopper-v4`` is ``Hopper``."""
    return env_id.rsplit("-v", 1)[0]


def eval_seeds(seed: int) -> np.ndarray:
    """The evaluation episodes' env seeds: fixed per run, never used in training."""
    return np.random.SeedSequence([seed + 1, 1]).generate_state(10)


def write_text(path: Path, text: str) -> None:
    """Write through a temporary file of its own and a rename (ars's): a kill leaves the old
    file or the new one, never half of one, and two writers never share a temporary file."""
    with ars.atomic_file(path, "w") as f:
        f.write(text)


def write_json(path: Path, data: object) -> None:
    """``data`` as indented JSON, atomically."""
    write_text(path, json.dumps(data, indent=1) + "\n")


@contextlib.contextmanager
def locked_folder(folder: Path):
    """An exclusive lock on ``folder`` (waits for it): runs that share a results file (two
    queues) read, add to and write it and its table one at a time, so none loses or mixes
    another's record. Not re-entrant: never nest it. Without fcntl (Windows): no lock."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # frees the lock


def write_table(md: Path, table: str) -> None:
    """Replace ``md``'s table, keeping the notes written by hand below its NOTES line; call
    it holding ``locked_folder(md.parent)``, with the table of the results as they are."""
    notes = md.read_text().partition(NOTES)[2] if md.exists() else ""
    write_text(md, table + "\n" + (f"\n{NOTES}{notes}" if notes else ""))


def read_results(path: Path) -> dict:
    """The results file, or {} if there is none yet; a damaged one is a one-line error."""
    try:
        return json.loads(path.read_text()) if path.exists() else {}
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        sys.exit(f"error: {path} is not valid JSON ({error}); restore it from git or move it")


def add_record(path: Path, key: str, seed: int, record: dict) -> dict:
    """Add one run's record to the results file as it is now (other runs may be writing it
    too), under the folder's lock; returns the file's results."""
    with locked_folder(path.parent):
        results = read_results(path)
        results.setdefault(key, {})[str(seed)] = record
        write_json(path, results)
    return results


def confirmed(evaluations: list, threshold: float) -> bool:
    """The stopping rule: the last two evaluations both reached the threshold."""
    return len(evaluations) >= 2 and min(e[2] for e in evaluations[-2:]) >= threshold


def record_evaluation(
    state: dict, timesteps: int, returns: np.ndarray, episodes: int, eval_freq: int
) -> None:
    """Add an evaluation to a run's state, schedule the next one, and print it."""
    seconds = state["train_seconds"]
    state["evaluations"].append(
        [timesteps, seconds, float(returns.mean()), float(returns.std()), episodes]
    )
    while state["next_eval"] <= timesteps:
        state["next_eval"] += eval_freq
    print(
        f"  {timesteps:>11,} steps {episodes:>8,} episodes "
        f"{seconds / 60:6.1f} min: {returns.mean():8.1f}",
        flush=True,
    )


def run_dir_of(env_id: str, seed: int, args: argparse.Namespace) -> Path:
    """The folder of a run's checkpoints and state, made if new."""
    n_delta = f"-N{args.n_delta}" if args.n_delta else ""
    run_dir = Path(args.runs_dir) / (f"ars-{env_id}-{seed}{n_delta}" + label_suffix(args, "-"))
    run_dir.mkdir(parents=True, exist_ok=True)
    return run_dir


def start_or_resume(env_id: str, seed: int, run_dir: Path, overrides: dict) -> tuple:
    """The run's model and state: from its last checkpoint, else new (the bare env rate
    measured first, on a quiet machine, for the tasks with a reference rate)."""
    state_path = run_dir / "state.json"
    if state_path.exists():  # the state names the checkpoint written with it
        state = json.loads(state_path.read_text())
        model = ars.ARS.load(run_dir / state["checkpoint"], env=env_id)
        print(
            f"  resuming at {model.num_timesteps:,} steps, iteration {model.n_updates}", flush=True
        )
        return model, state
    model = ars.paper_model(env_id, seed=seed, **overrides)
    state = {"checkpoint": None, "evaluations": [], "train_seconds": 0.0, "next_eval": 0}
    if task(env_id) in REFERENCE_RATE:
        state["bare_steps_per_second"] = bare_rate(env_id, model.n_delta)
        print(f"  bare env.step: {state['bare_steps_per_second']:,.0f} steps/s", flush=True)
    return model, state


def worker_env_fns(env_id: str, args: argparse.Namespace) -> list:
    """The workers' env functions: a rule of arms.py is installed in each, else plain envs."""
    if args.arm and args.arm != "vecnormalize":  # a rule of arms.py, here and in each worker
        import arms

        arms.install(args.arm)
        return [ars.functools.partial(arms.make_env, args.arm, env_id)] * args.workers
    return [ars.functools.partial(ars.make_env, env_id)] * args.workers


def save_checkpoint(model: ars.ARS, run_dir: Path, state: dict) -> None:
    """The model, then the state that names it (the older checkpoint removed after)."""
    old, new = state["checkpoint"], f"checkpoint-{model.n_updates}.npz"
    model.save(run_dir / new)
    state["checkpoint"] = new
    write_json(run_dir / "state.json", state)
    if old and old != new:
        (run_dir / old).unlink(missing_ok=True)


def evaluation_returns(model: ars.ARS, async_eval: ars.AsyncEval, seeds: np.ndarray) -> list:
    """The policy's returns on the evaluation seeds, an episode a job over the workers."""
    async_eval.set_policy(model.policy)
    theta = np.tile(model.policy.parameters_to_vector(), (len(seeds), 1))
    async_eval.send_jobs(theta, len(seeds), episode_seeds=seeds[:, None])
    return [r[0] for _, (r, _) in async_eval.get_results()]


def vecnormalize_arm(env_id: str, arm: str | None, overrides: dict, state_path: Path) -> object:
    """The vecnormalize arm's SB3 VecNormalize, whose observations ars learns on (its run
    starts again: a file does not keep the VecNormalize's count), else None."""
    if arm != "vecnormalize":
        return None
    import speed

    vec_normalize = speed.sb3_env(env_id, True)
    overrides.update(env=vec_normalize, normalize_obs=False)
    state_path.unlink(missing_ok=True)
    return vec_normalize


def run_ars(env_id: str, seed: int, budget: int, eval_freq: int, args: argparse.Namespace) -> dict:
    """Train (or resume) one run; returns its record for learning.json."""
    n_delta, workers, stop = args.n_delta, args.workers, args.stop_at_threshold
    overrides = {} if n_delta is None else {"n_delta": n_delta, "n_top": n_delta}
    overrides.update(args.set)
    run_dir = run_dir_of(env_id, seed, args)
    name = run_dir.name
    state_path, threshold = run_dir / "state.json", THRESHOLDS[task(env_id)]
    vec_normalize = vecnormalize_arm(env_id, args.arm, overrides, state_path)
    model, state = start_or_resume(env_id, seed, run_dir, overrides)
    seeds, per_iteration = eval_seeds(seed), 2 * model.n_delta * model.n_eval_episodes

    def checkpoint() -> None:
        save_checkpoint(model, run_dir, state)

    make_env = ars.functools.partial(ars.make_env, env_id)
    with ars.AsyncEval(worker_env_fns(env_id, args), model.policy) as async_eval:

        def evaluate() -> None:
            """Evaluate now, the 10 episodes spread over the workers; schedule the next one."""
            if vec_normalize is not None:  # the observations it learned on, frozen
                returns = episode_returns(model, vec_normalize.normalize_obs, make_env(), seeds)
            else:
                returns = evaluation_returns(model, async_eval, seeds)
            returns = np.array(returns)
            episodes = model.n_updates * per_iteration
            record_evaluation(state, model.num_timesteps, returns, episodes, eval_freq)

        if not state["evaluations"]:
            evaluate()
            checkpoint()
        marks = {"iteration": time.perf_counter(), "checkpoint": time.perf_counter()}

        def after_iteration(locals_: dict, globals_: dict) -> bool:
            now = time.perf_counter()
            state["train_seconds"] += now - marks["iteration"]
            keep_going, evaluated = True, model.num_timesteps >= state["next_eval"]
            if evaluated:
                evaluate()
                keep_going = not (stop and confirmed(state["evaluations"], threshold))
                state["stopped"] = None if keep_going else "threshold reached and confirmed"
            if evaluated or now - marks["checkpoint"] >= args.checkpoint_seconds:
                checkpoint()
                marks["checkpoint"] = time.perf_counter()
            marks["iteration"] = time.perf_counter()
            return keep_going

        if not state.get("stopped") and model.num_timesteps < budget:
            model.learn(
                budget - model.num_timesteps,
                callback=after_iteration,
                async_eval=async_eval,
                reset_num_timesteps=False,
            )
        if state["evaluations"][-1][0] != model.num_timesteps:
            evaluate()  # the final policy
            checkpoint()
    models = Path(args.results).parent / "models"
    models.mkdir(parents=True, exist_ok=True)
    model.save(models / f"{name.removeprefix('ars-')}.npz")
    return {
        "budget": budget,
        "workers": workers,
        "n_delta": model.n_delta,
        "n_top": model.n_top,
        "stopped": state.get("stopped") or "budget",
        "evaluations": state["evaluations"],
        **{k: state[k] for k in ("bare_steps_per_second",) if k in state},
    }


def run_emulation(
    env_id: str, seed: int, budget: int, eval_freq: int, args: argparse.Namespace
) -> dict:
    """run_ars's protocol for the sb3-emulation arm (benchmarks/arms.py): sb3-contrib's
    rules, run in one process with ``lanes`` virtual workers; resumes from its state."""
    import arms

    stop, threshold = args.stop_at_threshold, THRESHOLDS[task(env_id)]
    run_dir = run_dir_of(env_id, seed, args)  # named as run_ars names its runs
    state_path = run_dir / "state.json"
    if state_path.exists():  # the whole emulation is JSON: it resumes exactly
        state = json.loads(state_path.read_text())
        emulation = arms.Emulation.resume(env_id, state["emulation"])
        print(f"  resuming at {emulation.timesteps:,} steps, iteration {emulation.index}")
    else:
        emulation = arms.Emulation(env_id, seed, args.n_delta, **args.set)
        state = {"evaluations": [], "train_seconds": 0.0, "next_eval": 0}
    eval_env, seeds = ars.make_env(env_id), eval_seeds(seed)

    def evaluate() -> None:
        returns = emulation.evaluate(eval_env, seeds)
        episodes = emulation.index * 2 * emulation.n
        record_evaluation(state, emulation.timesteps, returns, episodes, eval_freq)

    def checkpoint() -> None:
        state["emulation"] = emulation.state()
        write_json(state_path, state)

    if not state["evaluations"]:
        evaluate()
        checkpoint()
    mark = saved = time.perf_counter()
    while not state.get("stopped") and emulation.timesteps < budget:
        emulation.iterate()
        now = time.perf_counter()
        state["train_seconds"] += now - mark
        evaluated = emulation.timesteps >= state["next_eval"]
        if evaluated:
            evaluate()
            if stop and confirmed(state["evaluations"], threshold):
                state["stopped"] = "threshold reached and confirmed"
        if evaluated or now - saved >= args.checkpoint_seconds:
            checkpoint()
            saved = time.perf_counter()
        mark = time.perf_counter()
    if state["evaluations"][-1][0] != emulation.timesteps:
        evaluate()
        checkpoint()
    return {
        "budget": budget,
        "workers": 1,
        "lanes": emulation.settings["lanes"],
        "n_delta": emulation.n,
        "n_top": emulation.b,
        "stopped": state.get("stopped") or "budget",
        "evaluations": state["evaluations"],
        "settings": emulation.settings,
        # per iteration: timesteps before it, share of clipped entries, merged / exact sigma
        # of the observations (median, min and max over the inputs)
        "diagnostics": emulation.diagnostics,
    }


def bare_rate(env_id: str, n_delta: int, steps: int = 20_000) -> float:
    """The bare single-core env.step rate, replaying the actions of the run's first
    candidates, as ``benchmarks/speed.py --impls bare`` measures it: the median of 3."""
    import speed

    actions = speed.policy_actions(env_id, "LinearPolicy", None, n_delta)
    return statistics.median(speed.bare(env_id, steps, actions) for _ in range(3))


def parse_setting(text: str) -> tuple[str, object]:
    """``name=value`` of --set: the value as JSON (numbers, true/false, lists), else a string."""
    name, sep, value = text.partition("=")
    if not sep or not name.isidentifier():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    python = {"True": True, "False": False, "None": None}  # what users type, beside JSON
    if value in python:
        return name, python[value]
    try:
        return name, json.loads(value)
    except json.JSONDecodeError:
        return name, value


def label_suffix(args: argparse.Namespace, sep: str = ":") -> str:
    """What tells this arm's runs apart from the paper's settings: --label, else the --set."""
    setting = ",".join(f"{k}={v}" for k, v in args.set.items())
    label = args.label or ",".join(x for x in (args.arm, setting) if x)
    return sep + label if label else ""


def episode_returns(model: object, normalize: object, eval_env: object, seeds: object) -> list:
    """Deterministic returns of ``model`` (anything with SB3's predict), one episode per env
    seed, the observations passed through ``normalize`` first when it is given."""
    returns = []
    for episode_seed in seeds:
        obs, _ = eval_env.reset(seed=int(episode_seed))
        total, done = 0.0, False
        while not done:
            action = model.predict(obs if normalize is None else normalize(obs), deterministic=True)
            obs, reward, terminated, truncated, _ = eval_env.step(action[0])
            total, done = total + reward, terminated or truncated
        returns.append(total)
    return returns


class StopPeer(Exception):
    """Ends an sb3-contrib run by the stopping rule, which its learn() does not obey."""


def code_version() -> str:
    """The commit of the ars.py this benchmark imports, "+changes" if it or a benchmark differ."""
    folder = Path(ars.__file__).resolve().parent

    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else ""

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    changed = git("status", "--porcelain", "--", "ars.py", "benchmarks/*.py")
    return commit + ("+changes" if changed else "")


def peer_evaluation(
    evaluate: Callable, n_delta: int, eval_freq: int, stop: bool, threshold: float
) -> object:
    """An SB3 callback that runs ``evaluate()`` on sb3-contrib's model every ``eval_freq``
    timesteps, where run_ars evaluates ars, and ends the run by the stopping rule."""
    from stable_baselines3.common.callbacks import BaseCallback

    class Evaluate(BaseCallback):
        """Evaluates where run_ars does: after an update, before the next rollouts.

        sb3-contrib calls on_step after the rollouts but before the update, and in a burst
        (one call per worker-step): evaluating there would count the next iteration's
        steps and time, and could evaluate one policy twice.
        """

        def _on_training_start(self) -> None:
            self.records, self.next, self.eval_seconds = [], 0, 0.0
            self.start, self.stopped = time.perf_counter(), None

        def evaluate_now(self) -> None:  # self.num_timesteps is only updated by on_step
            seconds = time.perf_counter() - self.start - self.eval_seconds
            began = time.perf_counter()
            mean, std = evaluate()
            self.eval_seconds += time.perf_counter() - began
            episodes = self.model._n_updates * 2 * n_delta  # sb3-contrib's count
            self.records.append((self.model.num_timesteps, seconds, mean, std, episodes))
            while self.next <= self.model.num_timesteps:
                self.next += eval_freq

        def _on_rollout_start(self) -> None:
            if self.model.num_timesteps >= self.next:
                self.evaluate_now()
                if stop and confirmed(self.records, threshold):
                    self.stopped = "threshold reached and confirmed"
                    raise StopPeer  # sb3-contrib ignores a callback's False

        def _on_step(self) -> bool:
            return True

    return Evaluate()


def run_sb3(env_id: str, seed: int, budget: int, eval_freq: int, args: argparse.Namespace) -> dict:
    """The same protocol with sb3-contrib's ARS (VecNormalize normalises, as in the zoo)."""
    import cloudpickle
    import speed
    from sb3_contrib import ARS as SB3ARS
    from sb3_contrib.common.vec_env import AsyncEval as SB3AsyncEval

    cloudpickle.register_pickle_by_value(speed)  # sb3's workers need not find benchmarks/
    sb3_env = speed.sb3_env

    hp = ars.settings_for(env_id, "paper")
    n_delta, workers, stop = args.n_delta or hp["n_delta"], args.workers, args.stop_at_threshold
    env = sb3_env(env_id, hp["normalize_obs"])
    model = SB3ARS(
        "LinearPolicy",
        env,
        n_delta=n_delta,
        n_top=min(hp["n_top"] or n_delta, n_delta),
        learning_rate=hp["learning_rate"],
        delta_std=hp["delta_std"],
        alive_bonus_offset=hp["alive_bonus_offset"],
        seed=seed,
    )
    eval_env, seeds, threshold = ars.make_env(env_id), eval_seeds(seed), THRESHOLDS[task(env_id)]

    def evaluate() -> tuple[float, float]:
        returns = episode_returns(model, getattr(env, "normalize_obs", None), eval_env, seeds)
        return float(np.mean(returns)), float(np.std(returns))

    callback = peer_evaluation(evaluate, n_delta, eval_freq, stop, threshold)
    env_fns = [ars.functools.partial(sb3_env, env_id, hp["normalize_obs"])] * workers
    async_eval = SB3AsyncEval(env_fns, model.policy) if workers > 1 else None
    try:
        model.learn(budget, callback=callback, async_eval=async_eval)
    except StopPeer:  # raised before an iteration's rollouts: no job is in flight
        if async_eval is not None:
            async_eval.close()
    if callback.records[-1][0] != model.num_timesteps:
        callback.evaluate_now()  # the final policy, as run_ars does
    return {
        "budget": budget,
        "workers": workers,
        "n_delta": n_delta,
        "n_top": model.n_top,
        "stopped": callback.stopped or "budget",
        "evaluations": callback.records,
    }


def first_reach(evaluations: list, threshold: float) -> list | None:
    """The first evaluation at or above ``threshold``, or None."""
    return next((e for e in evaluations if e[2] >= threshold), None)


def summary(runs: dict, threshold: float, env: str = "") -> dict:
    """Medians over seeds; a seed that never reached the threshold counts as infinite.
    ``scaled_seconds``: the training times at the task's REFERENCE_RATE, if it has one."""
    reached = [first_reach(r["evaluations"], threshold) for r in runs.values()]
    reference = REFERENCE_RATE.get(task(env))
    scale = [
        r.get("bare_steps_per_second", reference) / reference if reference else 1.0
        for r in runs.values()
    ]

    def median(i: int) -> float:
        return statistics.median([h[i] if h else float("inf") for h in reached])

    finals = [r["evaluations"][-1][2] for r in runs.values()]
    stops = sorted({r.get("stopped", "budget") for r in runs.values()})
    return {
        "hits": sum(h is not None for h in reached),
        "n": len(runs),
        "steps": median(0),
        "seconds": median(1),
        "scaled_seconds": statistics.median(
            [h[1] * x if h else float("inf") for h, x in zip(reached, scale)]
        ),
        "episodes": median(4)
        if all(len(e) > 4 for r in runs.values() for e in r["evaluations"])
        else float("nan"),
        "final": statistics.median(finals),
        "min": min(finals),
        "max": max(finals),
        "stopped": ", ".join(stops),
        "budget": max(r["budget"] for r in runs.values()),
    }


def _fmt(value: float, scale: float, unit: str) -> str:
    if np.isnan(value):
        return "not recorded"
    return f"{value / scale:.2f}{unit}" if np.isfinite(value) else "not reached"


def ended_by(runs: dict) -> str:
    """How many runs stopped at the confirmed threshold and how many at their budget."""
    stops = [r.get("stopped", "budget") for r in runs.values()]
    counts = [(stops.count("budget"), "budget"), (len(stops) - stops.count("budget"), "threshold")]
    return ", ".join(f"{label} {n}" for n, label in sorted(counts, reverse=True) if n)


def report(results: dict, folder: Path = RESULTS, prefix: str = "") -> str:
    """The full Markdown table (learning.md), and one plot per task saved in ``folder``
    (``<prefix><env id>.png``)."""
    lines = [
        "| task | implementation | N, b | threshold | seeds reaching it | median timesteps to it "
        "| median episodes to it | median training wall time to it | final reward, median "
        "(min to max) | runs ended by | budget | rl-zoo sb3-contrib |",
        "|---" * 12 + "|",
    ]
    short = [
        "| task | impl | seeds reaching | timesteps | episodes | training time | final (range) "
        "| runs ended by |",
        "|---" * 8 + "|",
    ]
    for key in sorted(results, key=lambda k: (list(THRESHOLDS).index(task(k.split(":")[1])), k)):
        impl, env_id, *arm = key.split(":", 2)
        impl = " ".join([impl, *arm])
        runs = results[key]
        s = summary(runs, THRESHOLDS[task(env_id)], env_id)
        minutes = _fmt(s["seconds"], 60, " min")
        if task(env_id) in REFERENCE_RATE:
            rate = REFERENCE_RATE[task(env_id)]
            minutes += f" ({_fmt(s['scaled_seconds'], 60, ' min')} at {rate:,} steps/s)"
        first = next(iter(runs.values()))
        n_top = first.get("n_top", ars.settings_for(env_id, "paper")["n_top"])  # older peer records
        lines.append(
            f"| {env_id} | {impl} | {first['n_delta']}, {n_top} "
            f"| {THRESHOLDS[task(env_id)]} | {s['hits']}/{s['n']} | {_fmt(s['steps'], 1e6, 'M')} "
            f"| {_fmt(s['episodes'], 1e3, 'k')} | {minutes} "
            f"| {s['final']:.0f} ({s['min']:.0f} to {s['max']:.0f}) | {s['stopped']} "
            f"| {s['budget'] / 1e6:g}M | {ZOO[task(env_id)]} |"
        )
        short.append(
            f"| {env_id} | {impl} | {s['hits']}/{s['n']} | {_fmt(s['steps'], 1e6, 'M')} "
            f"| {_fmt(s['episodes'], 1e3, 'k')} | {minutes} "
            f"| {s['final']:.0f} ({s['min']:.0f} to {s['max']:.0f}) | {ended_by(runs)} |"
        )
    lines += ["", "Short form (medians over seeds; to the paper's threshold):", "", *short]
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plots (pip install -e '.[plot]')")
        return "\n".join(lines)
    for env_id in sorted({k.split(":")[1] for k in results}):
        fig, ax = plt.subplots(figsize=(6, 4))
        seeds = {seed for k, runs in results.items() if k.split(":")[1] == env_id for seed in runs}
        keys = sorted(k for k in results if k.split(":")[1] == env_id)  # each arm its colour
        for key, color in zip(keys, plt.rcParams["axes.prop_cycle"].by_key()["color"]):
            label = " ".join(key.split(":")[::2])  # "ars", "sb3-contrib", "ars tuned"
            for i, (_seed, run) in enumerate(sorted(results[key].items())):
                e = np.array([row[:4] for row in run["evaluations"]])
                ax.plot(
                    e[:, 0] / 1e6, e[:, 2], color=color, alpha=0.8, label=label if i == 0 else None
                )
        ax.axhline(THRESHOLDS[task(env_id)], color="gray", linestyle="--", label="paper threshold")
        ax.set(
            xlabel="timesteps (millions)",
            ylabel="mean return (10 episodes)",
            title=f"{env_id}: seeds {', '.join(sorted(seeds, key=int))}",
        )
        ax.legend()
        fig.tight_layout()
        fig.savefig(folder / f"{prefix}{env_id}.png", dpi=100)
        plt.close(fig)
    return "\n".join(lines)


def main() -> None:
    """Run the learning benchmark the flags describe, resumably."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--envs", nargs="*", default=["Swimmer-v4", "Hopper-v4", "HalfCheetah-v4"])
    parser.add_argument("--seeds", nargs="*", type=int, default=PAPER_SEEDS)
    parser.add_argument(
        "--budget", type=float, help="timesteps per run (default: per task, see BUDGETS)"
    )
    parser.add_argument(
        "--eval-freq", type=int, help="timesteps between evaluations (default: per task)"
    )
    parser.add_argument(
        "--n-delta", type=int, help="N = b for every run (Humanoid: 256 is the zoo's)"
    )
    parser.add_argument("--workers", type=int, default=os.cpu_count())
    parser.add_argument("--stop-at-threshold", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--checkpoint-seconds", type=float, default=60.0)
    parser.add_argument("--peer", choices=["sb3-contrib"], help="run the peer instead of ars")
    parser.add_argument("--report", action="store_true", help="only rebuild the table and plots")
    parser.add_argument("--results", default=str(RESULTS / "learning.json"))
    parser.add_argument("--runs-dir", default=str(RUNS), help="checkpoints of unfinished runs")
    parser.add_argument(
        "--set",
        type=parse_setting,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an ARS setting to change (repeatable); the runs are kept under their own key",
    )
    parser.add_argument("--label", help="the key's suffix for these runs (default: the --set)")
    parser.add_argument(
        "--arm",
        choices=[
            "per-step-statistics",
            "per-step-statistics-first-iteration",
            "per-step-sb3-first-iteration",
            "clip-10",
            "orthogonal",
            "vecnormalize",
            "sb3-emulation",
        ],
        help="a statistics rule of benchmarks/arms.py, or ars on SB3's VecNormalize "
        "observations, or sb3-contrib's rules emulated (--set its SB3_EMULATION settings); "
        "the key's suffix",
    )
    args = parser.parse_args()
    args.set = dict(args.set)
    warnings.filterwarnings("ignore")

    path = Path(args.results)
    path.parent.mkdir(parents=True, exist_ok=True)
    unknown = [e for e in args.envs if task(e) not in THRESHOLDS]
    if unknown:
        parser.error(f"no paper threshold for {', '.join(unknown)}: use {', '.join(THRESHOLDS)}")
    if args.budget is not None and not args.budget > 0:
        parser.error(f"--budget must be a positive number of timesteps, got {args.budget:g}")
    if args.peer and (args.arm or args.set):
        parser.error("--arm and --set change ars's runs: they cannot apply to --peer")
    results = read_results(path)
    if not args.report:
        impl, runner = ("sb3-contrib", run_sb3) if args.peer else ("ars", run_ars)
        runner = run_emulation if args.arm == "sb3-emulation" else runner
        for env_id in args.envs:
            key = f"{impl}:{env_id}" + (f":N{args.n_delta}" if args.n_delta else "")
            key += label_suffix(args)
            for seed in args.seeds:
                budget = int(BUDGETS[task(env_id)] if args.budget is None else args.budget)
                done = results.get(key, {}).get(str(seed))
                if done and not (done["stopped"] == "budget" and done["budget"] < budget):
                    continue  # finished; a larger budget extends a run that ended at its own
                eval_freq = args.eval_freq or EVAL_FREQ.get(task(env_id), 50_000)
                print(
                    f"{impl} {env_id} seed {seed}: up to {budget:,} steps, {args.workers} workers",
                    flush=True,
                )
                began = time.perf_counter()
                record = {**runner(env_id, seed, budget, eval_freq, args), "code": code_version()}
                # Saved after every run, into the file as it is now: an interrupted
                # benchmark keeps its runs, and one running beside it keeps its own.
                results = add_record(path, key, seed, record)
                hit = first_reach(record["evaluations"], THRESHOLDS[task(env_id)])
                print(
                    f"  final {record['evaluations'][-1][2]:.1f}; threshold "
                    f"{'at ' + format(hit[0], ',') + ' steps' if hit else 'not reached'}; "
                    f"{(time.perf_counter() - began) / 60:.1f} min this session",
                    flush=True,
                )
    prefix = "" if path.stem == "learning" else path.stem + "-"
    with locked_folder(path.parent):  # the file as it is now: other queues' runs included
        table = report(read_results(path), path.parent, prefix)
        write_table(path.with_suffix(".md"), table)
    print(table)


if __name__ == "__main__":
    main()
