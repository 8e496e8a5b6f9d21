"""Tune ARS's settings for an env with Optuna: resumable, shared through a database.

    python examples/tune.py --env Hopper-v4 --trials 100 --timesteps 1000000 --seeds 5 \\
        --storage sqlite:///hopper.db --study hopper --threshold 3120 --plots plots/

Each trial trains ``--seeds`` seeds (the tuning seeds 100, 101, ...: never the seeds the
benchmarks measure on) for at most ``--timesteps`` steps each, evaluating every
``--eval-freq`` steps. The objective, minimised: with ``--threshold``, the mean over seeds of
the training episodes to the first evaluation at the threshold, a seed that never reaches it
counted as twice the episodes the step budget holds at the env's time limit, times one plus
its shortfall, ``(threshold - best evaluation) / |threshold|``; without one, minus the mean
evaluation return over the run (the area under the curve). The study's first trial is the
env's default settings (``ars.settings_for``), which every trial keeps for what it does not
search; then Optuna's TPE sampler proposes, and its median pruner hears every evaluation
and, from a quarter of the first seed's steps on, stops a trial doing worse than the median
of earlier trials at the same point.

The same command continues an interrupted study (Ctrl+C ends the trial that runs), and
several processes or machines given one database URL work on one study, stopping together
at ``--trials``; the study keeps what it tunes and refuses a run with other values.
``--env module:Id`` imports the module first (from the current folder, as ``python ars.py``
does). It ends by printing the best settings, every one of them, as an ``ARS(...)`` line,
as ``python ars.py`` flags and as JSON, and writes Optuna's plots to ``--plots``.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import shlex
import signal
import sys
import time
import warnings
from pathlib import Path
from typing import Any


def interrupted(signum: int, frame: Any) -> None:
    """Ctrl+C before the study hears signals: one line, the shell's status, and an exit at
    once (nothing is written yet; an exception raised in an import may be caught there)."""
    print("interrupted before the first trial", flush=True)
    os._exit(128 + signum)


if __name__ == "__main__":  # from here, while NumPy, gymnasium and ars load
    signal.signal(signal.SIGINT, interrupted)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # ars.py of this checkout
import ars  # noqa: E402

INSTALL = 'pip install "ars-numpy[tune]"'
TUNING_SEEDS = 100  # the first tuning seed; the benchmarks use 237, 759, 959 and 1 to 20
PENALTY = 2  # a seed never reaching the threshold: twice the budget's episodes, and more
# The search space: what the paper tuned, and the switches that matter.
RANGES = dict(n_delta=(1, 64), top_share=(0.1, 1.0), learning_rate=(1e-3, 0.1))
RANGES.update(delta_std=(5e-3, 0.5))
CHOICES = dict(normalize_obs=[True, False], alive_bonus_offset=[0.0, -1.0])


def top_of(top_share: float, n_delta: int) -> int:
    """b from its share of N: at least one direction."""
    return max(1, round(top_share * n_delta))


def suggest(trial: Any) -> dict[str, Any]:
    """The settings of a trial: step size, noise, N and b as a share of N (N and the two
    scales log-uniform), V2's normalisation and the alive-bonus shift."""
    params = {name: trial.suggest_categorical(name, choices) for name, choices in CHOICES.items()}
    for name, (low, high) in RANGES.items():
        if name == "n_delta":
            params[name] = trial.suggest_int(name, low, high, log=True)
        else:
            params[name] = trial.suggest_float(name, low, high, log=name != "top_share")
    params["n_top"] = top_of(params.pop("top_share"), params["n_delta"])
    return params


def starting_point(env_id: str) -> dict[str, Any] | None:
    """The env's default settings (``ars.settings_for``: a tuned preset's, the paper's, else
    generic ones) as a trial's parameters, or None where they lie outside the search space
    (Humanoid's N = 230)."""
    preset = ars.settings_for(env_id)
    n_top = preset["n_top"] or preset["n_delta"]
    params = {name: preset[name] for name in (*CHOICES, *RANGES) if name != "top_share"}
    params["alive_bonus_offset"] = float(params["alive_bonus_offset"])
    params["top_share"] = n_top / preset["n_delta"]
    inside = all(low <= params[name] <= high for name, (low, high) in RANGES.items())
    if not inside or top_of(params["top_share"], preset["n_delta"]) != n_top:
        return None
    return params


def start_from_the_default(study: Any, env_id: str) -> None:
    """Queue the env's default settings as a trial unless one with them is waiting, running
    or done: TPE then starts from the known settings, not from nothing."""
    start = starting_point(env_id)
    for trial in study.trials:
        if trial.state.name != "FAIL" and trial.system_attrs.get("fixed_params") == start:
            return
        if trial.state.name != "FAIL" and trial.params == start:
            return
    if start is not None:
        study.enqueue_trial(start)


def objective_value(seeds: list[dict], threshold: float | None, budget: float) -> float:
    """The value a trial minimises, from its seeds' records (``reached``: training episodes
    to the first evaluation at the threshold, or None; ``best``: the best evaluation;
    ``returns``: every evaluation). With a threshold: the mean over seeds of ``reached``, a
    seed that never reaches counted as ``PENALTY * budget * (1 + shortfall)``, where
    ``budget`` is the episodes the step budget holds at full length and ``shortfall`` is
    ``(threshold - best) / |threshold|``. Without one: minus the mean evaluation return."""
    if threshold is None:
        returns = [mean for seed in seeds for mean in seed["returns"]]
        return -float(sum(returns) / len(returns))
    counted = []
    for seed in seeds:
        shortfall = max(threshold - seed["best"], 0.0) / (abs(threshold) or 1.0)
        penalty = PENALTY * budget * (1 + shortfall)
        counted.append(penalty if seed["reached"] is None else seed["reached"])
    return float(sum(counted) / len(counted))


def trial_settings(env_id: str, params: dict[str, Any], env_kwargs: dict | None = None) -> dict:
    """Every setting of ars's table a trial trains with (the seed aside): the env's default
    settings (``ars.settings_for``, its policy and layers included) under the trial's."""
    settings = {**ars.settings_for(env_id), **params}
    model = ars.paper_model(env_id, **settings, seed=0, env_kwargs=env_kwargs)
    settings = {name: model.hparams[name] for name in ars.DEFAULTS if name in model.hparams}
    del settings["seed"]
    return {"policy": model.policy_class, **settings}


def train_seed(env_id: str, settings: dict, seed: int, args: argparse.Namespace, hooks: Any):
    """One seed's run, as a record (``seed``, ``reached``, ``episodes``, ``best``,
    ``returns``); ``hooks.evaluated(record)`` hears of each evaluation as it comes."""
    model = ars.ARS(env=env_id, seed=seed, env_kwargs=args.env_kwargs, **settings)
    evaluation = ars.EvalCallback(
        make_env(args),
        n_eval_episodes=args.eval_episodes,
        eval_freq=args.eval_freq,
        verbose=0,
        job_timeout=args.job_timeout,
    )
    here = ars.InProcessEval(model.gym_env, job_timeout=args.job_timeout)  # a stuck env: stopped
    record = dict(seed=seed, reached=None, episodes=0, best=-float("inf"), returns=[])

    def after_iteration(locals_: dict, globals_: dict) -> bool:
        if hooks.stop.signum is not None:  # Ctrl+C or SIGTERM: this iteration is discarded
            raise Interrupted
        record["episodes"] = 2 * model.n_delta * model.n_eval_episodes * model.n_updates
        done = args.threshold is not None and evaluation.last_mean_reward >= args.threshold
        if done and record["reached"] is None:
            record["reached"] = record["episodes"]
        if len(evaluation.evaluations) > len(record["returns"]):
            record["returns"] = [mean for _, _, mean, _ in evaluation.evaluations]
            record["best"] = max(record["returns"])
            hooks.evaluated(record)
        return not done

    evaluator = hooks.evaluator or here
    model.learn(args.timesteps, callback=[evaluation, after_iteration], async_eval=evaluator)
    return record


class Trial:
    """A trial's seeds, reported to Optuna's pruner after every evaluation: the objective as
    if the running seed ended there, at the step of the trial's nominal timesteps (seeds
    done times ``--timesteps`` and one more evaluation, which the last iteration may pass,
    plus the running seed's evaluations times ``--eval-freq``), so that every trial is
    compared with the others at the same point."""

    def __init__(self, trial: Any, args: argparse.Namespace, evaluator: Any, stop: Any):
        self.trial = trial
        self.args = args
        self.evaluator = evaluator
        self.stop = stop  # the signals heard: the trial ends at its next iteration
        self.budget = args.timesteps / args.time_limit
        self.seeds: list[dict] = []  # the records of the seeds done

    def value(self, seeds: list[dict]) -> float:
        """The objective of seeds with these records."""
        return objective_value(seeds, self.args.threshold, self.budget)

    def evaluated(self, record: dict) -> None:
        """Report the running seed's evaluation; prune when the median pruner says so."""
        per_seed = self.args.timesteps + self.args.eval_freq  # the last iteration overshoots
        steps = len(self.seeds) * per_seed + len(record["returns"]) * self.args.eval_freq
        self.trial.report(self.value([*self.seeds, record]), steps)
        if self.trial.should_prune():
            raise ars.require("optuna", INSTALL).TrialPruned()

    def done(self, record: dict) -> float:
        """Keep a finished seed's record (also in the trial's attributes); the objective of
        the seeds done."""
        self.seeds.append(record)
        self.trial.set_user_attr("seeds", self.seeds)
        return self.value(self.seeds)


def make_env(args: argparse.Namespace) -> Any:
    """A function that makes the env tuned (``--env`` with ``--env-kwargs``), in any process."""
    return functools.partial(ars.make_env, args.env, args.env_kwargs)


def time_limit(env_id: str, env_kwargs: dict | None = None) -> int:
    """The env's time limit (``module:Id`` imports its module first), or ars's limit for an
    env without one."""
    env = ars.make_env(env_id, env_kwargs)
    env.close()
    return env.spec.max_episode_steps or ars.NO_LIMIT_STEPS


class Surplus(Exception):
    """A trial asked for while another process took the study's last one: it never runs."""


def run_trial(trial: Any, args: argparse.Namespace, evaluator: Any, stop: Any) -> float:
    """Train the tuning seeds one after the other; the pruner hears every evaluation. Where
    processes asked for trials at once, those numbered past ``--trials`` do not run."""
    before = trial.study.get_trials(deepcopy=False)[: trial.number]
    if sum(t.state.name in (*FINISHED, "RUNNING") for t in before) >= args.trials:
        raise Surplus(f"trial {trial.number}: the study has its {args.trials} trials")
    settings = trial_settings(args.env, suggest(trial), args.env_kwargs)
    hooks = Trial(trial, args, evaluator, stop)
    for index in range(args.seeds):
        value = hooks.done(train_seed(args.env, settings, TUNING_SEEDS + index, args, hooks))
    return value


def best_settings(study: Any, args: argparse.Namespace) -> dict[str, Any]:
    """The best trial's settings, every one of them, as ``ARS()`` takes them."""
    params = dict(study.best_trial.params)
    params["n_top"] = top_of(params.pop("top_share"), params["n_delta"])
    return trial_settings(args.env, params, args.env_kwargs)


def flag(name: str, value: Any) -> str:
    """A setting as ``python ars.py`` takes it."""
    if name == "policy_kwargs":  # the layers, as --net-arch writes them (MlpPolicy's)
        return "--net-arch " + (",".join(map(str, value["net_arch"])) or '""')
    if isinstance(value, bool):
        return f"--{'' if value else 'no-'}{name.replace('_', '-')}"
    return f"--{name.replace('_', '-')} {value}"


def report(study: Any, args: argparse.Namespace) -> None:
    """Print the best settings three ways, each training what the trial trained; the plots."""
    env_id = args.env
    plots = args.plots
    settings = best_settings(study, args)
    arguments = ", ".join(f"{k}={v!r}" for k, v in settings.items())
    given = {k: v for k, v in settings.items() if v is not None}
    if settings["policy"] == "LinearPolicy":
        given.pop("policy_kwargs", None)  # the linear policy's options are never flags
    flags = " ".join(flag(k, v) for k, v in given.items())
    env = f"--env {shlex.quote(env_id)}"
    made = f'env="{env_id}"'
    if args.env_kwargs:  # each a literal that --env-kwargs reads back as it is
        pairs = [shlex.quote(f"{k}:{v!r}") for k, v in args.env_kwargs.items()]
        env += " --env-kwargs " + " ".join(pairs)
        made += f", env_kwargs={args.env_kwargs!r}"
    print(f"best value {study.best_value:.4g} (trial {study.best_trial.number}) of {env_id}:")
    print(f"ARS({made}, {arguments})")
    print(f"python ars.py {env} {flags}")
    print(json.dumps(settings))
    if plots is not None:
        visualization = ars.require("optuna.visualization.matplotlib", INSTALL)
        plots.mkdir(parents=True, exist_ok=True)
        drawings = [("history", visualization.plot_optimization_history)]
        finished = [t for t in study.trials if t.state.name == "COMPLETE"]
        if len(finished) >= 2:  # importances need trials to compare
            drawings.append(("importances", visualization.plot_param_importances))
        experimental = ars.require("optuna.exceptions", INSTALL).ExperimentalWarning
        for name, draw in drawings:
            with warnings.catch_warnings():  # Optuna calls its matplotlib plots experimental
                warnings.simplefilter("ignore", experimental)
                figure = draw(study).figure
            figure.savefig(plots / f"{name}.png", dpi=100, bbox_inches="tight")
            print(f"wrote {plots / name}.png")


class Interrupted(KeyboardInterrupt):
    """Ctrl+C or SIGTERM, raised in a trial's training: Optuna marks the trial failed."""


class Stop:
    """Ctrl+C and SIGTERM: a trial in training ends at its next iteration (Optuna marks it
    failed), raised there, in plain code; in Optuna's own bookkeeping, the study stops once
    the trial is recorded, so that no trial is ever left running. A second signal during
    training ends it at once. ``status``: 128 + the first signal."""

    def __init__(self, study: Any):
        self.study = study
        self.signum = None
        self.training = False
        self.optimizing = False
        self.failed_in_row = 0
        self.last_failure = ""

    def __call__(self, signum: int, frame: Any) -> None:
        """Note the signal: the trial ends cleanly; a second one stops it now."""
        again = self.signum is not None
        self.signum = self.signum or signum
        if self.training and again:  # asked twice: now, wherever the trial is
            raise Interrupted
        if self.optimizing:
            self.study.stop()
        else:  # before the trials or after them, in plain code: at once
            raise KeyboardInterrupt

    def objective(self, run: Any) -> Any:
        """``run(trial)``, as Optuna calls it, heard by the signals."""

        def objective(trial: Any) -> float:
            self.training = True
            try:
                if self.signum is not None:  # came between Optuna's ask and this trial
                    raise Interrupted
                value = run(trial)
            except FloatingPointError as error:  # this trial fails alone (optimize's catch)
                print(f"trial {trial.number} failed: {error}", flush=True)
                self.failed_in_row += 1
                self.last_failure = f"trial {trial.number}: {error}"
                raise
            except Exception as error:
                if type(error).__name__ == "TrialPruned":
                    print(f"trial {trial.number} pruned", flush=True)
                raise
            finally:
                self.training = False
            print(f"trial {trial.number}: {value:.4g}", flush=True)
            self.failed_in_row = 0
            return value

        return objective

    @property
    def status(self) -> int:
        """The exit status of a stop by the signal received."""
        return 128 + (self.signum or signal.SIGINT)


def one_line(error: BaseException) -> str:
    """An error as one line: its type and its message."""
    return f"{type(error).__name__}: {' '.join(str(error).split())[:300]}"


class OneLineParser(argparse.ArgumentParser):
    """argparse's, with each mistake on one line (and exit status 2)."""

    def error(self, message: str) -> None:
        """Exit with one line naming the mistake."""
        self.exit(2, f"error: {message} (tune.py --help)\n")


def parse(argv: list[str] | None) -> argparse.Namespace:
    """The flags, checked: every mistake is one line and exit status 2 (argparse's error)."""
    p = OneLineParser(description=__doc__.split("\n")[0])
    p.add_argument("--env", required=True, help="env id, or module:Id (the module imported first)")
    p.add_argument(
        "--env-kwargs", nargs="+", metavar="NAME:VALUE", help="the env's kwargs, as ars.py's"
    )
    p.add_argument("--trials", type=int, required=True, help="finished trials the study needs")
    p.add_argument("--timesteps", type=int, required=True, help="steps per seed at most")
    p.add_argument("--seeds", type=int, default=3, help="tuning seeds per trial (100, 101...)")
    p.add_argument("--storage", default="sqlite:///study.db", help="Optuna database URL")
    p.add_argument("--study", help="study name (default: the env id)")
    p.add_argument("--threshold", type=float, help="a return to reach (else: area under curve)")
    p.add_argument("--workers", type=int, default=0, help="rollout processes (AsyncEval)")
    p.add_argument("--eval-freq", type=int, help="steps between evaluations (timesteps / 20)")
    p.add_argument("--eval-episodes", type=int, default=5, help="episodes per evaluation")
    p.add_argument("--plots", type=Path, help="a folder for Optuna's plots (PNG)")
    p.add_argument(
        "--job-timeout",
        type=float,
        default=ars.DEFAULT_JOB_TIMEOUT,
        help=f"seconds a rollout may take (default {ars.DEFAULT_JOB_TIMEOUT:g}): a stuck env",
    )
    args = p.parse_args(argv)
    try:
        check(args)
    except ValueError as error:
        p.error(str(error))
    return args


def check(args: argparse.Namespace) -> None:
    """The flags' values, checked in turn: a ValueError says what is wrong with the first."""
    if min(args.trials, args.timesteps, args.seeds, args.eval_episodes) < 1 or args.workers < 0:
        raise ValueError(
            "--trials, --timesteps, --seeds and --eval-episodes must be >= 1, --workers >= 0"
        )
    args.eval_freq = args.eval_freq or max(args.timesteps // 20, 1)
    if not 1 <= args.eval_freq <= args.timesteps:
        raise ValueError("--eval-freq must be from 1 to --timesteps: each seed needs an evaluation")
    if args.threshold is not None and not math.isfinite(args.threshold):
        raise ValueError(f"--threshold must be a finite number; got {args.threshold}")
    for folder in [args.plots, *args.plots.parents] if args.plots is not None else []:
        if folder.exists() and not folder.is_dir():
            raise ValueError(f"--plots {args.plots}: {folder} is a file: name a folder")
    ars.check_seconds("--job-timeout", args.job_timeout)
    ars.check_setting("n_eval_episodes", args.eval_episodes, "--eval-episodes")
    if args.storage.split("?")[0] in ("sqlite://", "sqlite:///", "sqlite:///:memory:"):
        raise ValueError(
            f"--storage {args.storage} keeps the study in memory, where it cannot go on: "
            "name a file, as sqlite:///study.db"
        )
    args.env_kwargs = ars.parse_env_kwargs(args.env_kwargs) or {}
    if os.getcwd() not in sys.path:  # --env module:Id from this folder, as python ars.py
        sys.path.append(os.getcwd())
    try:
        args.time_limit = time_limit(args.env, args.env_kwargs)  # a bad id fails here
    except Exception as error:  # gymnasium's errors, and the module's own
        raise ValueError(f"--env {args.env}: {one_line(error)}") from None


def what_it_tunes(args: argparse.Namespace) -> dict[str, Any]:
    """What a study tunes, kept as its attributes: a run with other values is refused."""
    objective = f"episodes to the threshold, else {PENALTY} x budget x (1 + shortfall)"
    return dict(
        objective=objective if args.threshold is not None else "area under the curve",
        threshold=args.threshold,
        env=args.env,
        env_kwargs=args.env_kwargs,
        timesteps=args.timesteps,
        seeds=args.seeds,
        eval_freq=args.eval_freq,
        eval_episodes=args.eval_episodes,
        search_space=dict(ranges=RANGES, choices=CHOICES),
    )


def rdb_storage(optuna: Any, url: str) -> Any:
    """Optuna's database at ``url``, with heartbeats; two processes that make a new database
    at once race to write its tables, and the one that loses reads them at its second try."""
    for attempt in range(3):
        try:
            return optuna.storages.RDBStorage(url, heartbeat_interval=60)
        except Exception as error:
            racing = ("already exists", "UNIQUE constraint", "database is locked")
            if not any(text in str(error) for text in racing) or attempt == 2:
                raise ValueError(f"--storage {url}: {error}") from None
            time.sleep(1 + attempt)


def open_study(args: argparse.Namespace) -> Any:
    """The study of ``--storage`` and ``--study``, made or continued, holding what it tunes;
    heartbeats mark the trials of a killed process failed, so that the count goes on."""
    optuna = ars.require("optuna", INSTALL)
    optuna.logging.set_verbosity(optuna.logging.ERROR)  # a failed trial: tune.py says so
    with warnings.catch_warnings():  # Optuna calls heartbeats experimental
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        storage = rdb_storage(optuna, args.storage)
    study = optuna.create_study(
        storage=storage,
        study_name=args.study or args.env,
        load_if_exists=True,
        direction="minimize",
        sampler=optuna.samplers.TPESampler(),
        # no pruning in a trial's first quarter seed: early returns are all near nothing
        pruner=optuna.pruners.MedianPruner(n_startup_trials=5, n_warmup_steps=args.timesteps // 4),
    )
    wanted = json.loads(json.dumps(what_it_tunes(args)))  # as the storage gives them back
    for key, value in wanted.items():
        older = key == "env_kwargs" and study.user_attrs  # a study from before: made without
        kept = study.user_attrs.get(key, {} if older else value)
        if kept != value:
            raise ValueError(
                f"the study {study.study_name} tunes {key} {kept!r:.100}, not {value!r:.100}: "
                "give it the same, or a new --study"
            )
    for key, value in wanted.items():
        study.set_user_attr(key, value)
    return study


def main(argv: list[str] | None = None) -> int:
    """The command line; returns the exit status."""
    args = parse(argv)
    try:
        study = open_study(args)
    except Exception as error:  # a storage that cannot be opened, or another study's values
        text = " ".join(str(error).split("(Background on")[0].split())  # SQLAlchemy's link
        print(f"error: {text}", file=sys.stderr)
        return 2
    evaluator = None  # else each seed's in this process
    if args.workers:
        evaluator = ars.AsyncEval([make_env(args)] * args.workers, job_timeout=args.job_timeout)
    stop = Stop(study)
    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:  # the signals are the study's until main returns: a second one is heard, not fatal
        return _study(study, stop, args, evaluator)
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


FINISHED = ("COMPLETE", "PRUNED")
MOST_FAILED = 5  # trials failing in a row, each alone: the env's or the settings' fault


def taken(study: Any) -> int:
    """Trials finished or running, in every process that shares the study."""
    return sum(t.state.name in (*FINISHED, "RUNNING") for t in study.get_trials(deepcopy=False))


def _study(study: Any, stop: Stop, args: argparse.Namespace, evaluator: Any) -> int:
    """Run trials until the study has ``--trials`` finished or running (the processes that
    share it stop together), then report; the exit status."""
    objective = stop.objective(lambda trial: run_trial(trial, args, evaluator, stop))
    if taken(study) < args.trials:
        start_from_the_default(study, args.env)
    try:
        error = optimize(study, objective, stop, args)
    finally:
        stop.optimizing = False
        if evaluator is not None:
            evaluator.close()
    if stop.signum is None and error is not None:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if stop.signum is None and not any(t.state.name == "COMPLETE" for t in study.trials):
        print("no trial completed: nothing to report")
        return 1
    try:
        if stop.signum is None:
            report(study, args)
            return 0
    except KeyboardInterrupt:  # while reporting: the study is whole
        stop.signum = stop.signum or signal.SIGINT
    done = sum(t.state.name in FINISHED for t in study.trials)
    print(f"interrupted: {done} trials kept in {args.storage}; the same command goes on")
    return stop.status


def optimize(study: Any, objective: Any, stop: Stop, args: argparse.Namespace) -> str | None:
    """Trials until the study has ``--trials`` or a signal comes: a trial whose rewards
    overflow fails alone (the same command runs another), until MOST_FAILED in a row do.
    Returns the line of an error that ends them, else None."""
    stop.optimizing = True
    try:
        while taken(study) < args.trials and stop.signum is None:
            study.optimize(objective, n_trials=1, catch=(FloatingPointError, Surplus))
            if stop.failed_in_row >= MOST_FAILED:
                return f"{MOST_FAILED} trials in a row failed; the last: {stop.last_failure}"
    except KeyboardInterrupt:
        stop.signum = stop.signum or signal.SIGINT
    except Exception as error:  # else a signal to the process group ended the workers too
        if stop.signum is None:
            made = f" --env-kwargs {args.env_kwargs}" if args.env_kwargs else ""
            text = one_line(error).replace("a larger job_timeout", "a larger --job-timeout")
            return f"--env {args.env}{made}: {text}"
    return None


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)  # in main: KeyboardInterrupt
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # before the study hears signals (Optuna's import, the env)
        interrupted(signal.SIGINT, None)
