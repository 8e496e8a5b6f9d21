"""Tune ARS's settings for an env with Optuna: resumable, shared through a database.

    python examples/tune.py --env Hopper-v4 --trials 100 --timesteps 1000000 --seeds 5 \\
        --storage sqlite:///hopper.db --study hopper --threshold 3120 --plots plots/

Each trial trains ``--seeds`` seeds (the tuning seeds 100, 101, ...: never the seeds the
benchmarks measure on) for at most ``--timesteps`` steps each, evaluating every
``--eval-freq`` steps. The objective, minimised: with ``--threshold``, the mean over seeds of
the training episodes to the first evaluation at the threshold, a seed that never reaches it
counted at twice the episodes it ran; without one, minus the mean evaluation return over the
run (the area under the curve). Optuna's TPE sampler proposes; its median pruner hears
every evaluation and stops a trial doing worse than the median of earlier trials there.

The same command continues an interrupted study (Ctrl+C ends the trial that runs), and
several processes or machines given one database URL work on one study. It ends by printing
the best settings as an ``ARS(...)`` line, as ``python ars.py`` flags and as JSON, and
writes Optuna's plots (history, parameter importances) to ``--plots``.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # ars.py of this checkout
import ars  # noqa: E402

INSTALL = 'pip install "ars-numpy[tune]"'
TUNING_SEEDS = 100  # the first tuning seed; the benchmarks use 237, 759, 959 and 1 to 20
PENALTY = 2  # a seed that never reaches the threshold counts twice the episodes it ran


def top_of(top_share: float, n_delta: int) -> int:
    """b from its share of N: at least one direction."""
    return max(1, round(top_share * n_delta))


def suggest(trial: Any) -> dict[str, Any]:
    """The settings of a trial: what the paper tuned (step size, noise, N, b as a share of N)
    and the switches that matter (V2's normalisation, the alive-bonus shift)."""
    n_delta = trial.suggest_int("n_delta", 1, 64, log=True)
    top_share = trial.suggest_float("top_share", 0.1, 1.0)
    return dict(
        learning_rate=trial.suggest_float("learning_rate", 1e-3, 0.1, log=True),
        delta_std=trial.suggest_float("delta_std", 5e-3, 0.5, log=True),
        n_delta=n_delta,
        n_top=top_of(top_share, n_delta),
        normalize_obs=trial.suggest_categorical("normalize_obs", [True, False]),
        alive_bonus_offset=trial.suggest_categorical("alive_bonus_offset", [0.0, -1.0]),
    )


def objective_value(
    episodes_to_threshold: list[int | None], episodes_run: list[int], returns: list[float]
) -> float:
    """The value a trial minimises, from each seed's episodes to the threshold (None: never
    reached, counted as ``PENALTY`` times its episodes run), or, with no threshold (all None
    and no episodes_run), minus the mean evaluation return over the run."""
    if not episodes_run:
        return -float(sum(returns) / len(returns))
    counted = [
        PENALTY * run if reached is None else reached
        for reached, run in zip(episodes_to_threshold, episodes_run)
    ]
    return float(sum(counted) / len(counted))


def train_seed(env_id: str, settings: dict, seed: int, args: argparse.Namespace, hooks: Any):
    """One seed's run: ``(episodes to the threshold or None, episodes run, evaluations)``;
    ``hooks.evaluated(first, episodes, returns)`` hears of each evaluation as it comes."""
    model = ars.ARS("LinearPolicy", env_id, seed=seed, **settings)
    evaluation = ars.EvalCallback(
        env_id, n_eval_episodes=args.eval_episodes, eval_freq=args.eval_freq, verbose=0
    )
    episodes = lambda: 2 * model.n_delta * model.n_eval_episodes * model.n_updates  # noqa: E731
    reached: list[int] = []
    heard = [0]  # evaluations passed on so far

    def after_iteration(locals_: dict, globals_: dict) -> bool:
        if hooks.stop.signum is not None:  # Ctrl+C or SIGTERM: this iteration is discarded
            raise Interrupted
        done = args.threshold is not None and evaluation.last_mean_reward >= args.threshold
        if done and not reached:
            reached.append(episodes())
        if len(evaluation.evaluations) > heard[0]:
            heard[0] = len(evaluation.evaluations)
            returns = [mean for _, _, mean, _ in evaluation.evaluations]
            hooks.evaluated(reached[0] if reached else None, episodes(), returns)
        return not done

    model.learn(args.timesteps, callback=[evaluation, after_iteration], async_eval=hooks.evaluator)
    returns = [mean for _, _, mean, _ in evaluation.evaluations]
    return (reached[0] if reached else None), episodes(), returns


class Trial:
    """A trial's seeds so far, reported to Optuna's pruner after every evaluation: the
    objective of the seeds done and, for the seed that runs, its episodes so far (or to the
    threshold) and its evaluations so far."""

    def __init__(self, trial: Any, args: argparse.Namespace, evaluator: Any, stop: Any):
        self.trial = trial
        self.args = args
        self.evaluator = evaluator
        self.stop = stop  # the signals heard: the trial ends at its next iteration
        self.reached: list[int | None] = []  # per seed done: episodes to the threshold
        self.run: list[int] = []  # per seed done: episodes run
        self.returns: list[float] = []  # every evaluation of the seeds done
        self.step = 0  # evaluations reported

    def value(self, reached: list, run: list, returns: list) -> float:
        """The objective of seeds with these records."""
        return objective_value(reached, run if self.args.threshold is not None else [], returns)

    def evaluated(self, first: int | None, episodes: int, returns: list[float]) -> None:
        """Report the running seed's evaluation; prune when the median pruner says so."""
        so_far = first if first is not None else episodes  # not reached yet: a lower bound
        value = self.value([*self.reached, so_far], [*self.run, episodes], self.returns + returns)
        self.trial.report(value, self.step)
        self.step += 1
        if self.trial.should_prune():
            raise ars.require("optuna", INSTALL).TrialPruned()

    def done(self, first: int | None, episodes: int, returns: list[float]) -> float:
        """Keep a finished seed's records; the objective of the seeds done."""
        self.reached.append(first)
        self.run.append(episodes)
        self.returns.extend(returns)
        return self.value(self.reached, self.run, self.returns)


def run_trial(trial: Any, args: argparse.Namespace, evaluator: Any, stop: Any) -> float:
    """Train the tuning seeds one after the other; the pruner hears every evaluation."""
    settings = suggest(trial)
    hooks = Trial(trial, args, evaluator, stop)
    for index in range(args.seeds):
        value = hooks.done(*train_seed(args.env, settings, TUNING_SEEDS + index, args, hooks))
    return value


def best_settings(study: Any) -> dict[str, Any]:
    """The best trial's settings, as ``ARS()`` takes them."""
    params = dict(study.best_trial.params)
    params["n_top"] = top_of(params.pop("top_share"), params["n_delta"])
    return params


def report(study: Any, env_id: str, plots: Path | None) -> None:
    """Print the best settings three ways; write the plots."""
    settings = best_settings(study)
    arguments = ", ".join(f"{k}={v!r}" for k, v in settings.items())
    flags = " ".join(
        f"--{k.replace('_', '-')} {v}"
        if not isinstance(v, bool)
        else f"--{'' if v else 'no-'}{k.replace('_', '-')}"
        for k, v in settings.items()
    )
    print(f"best value {study.best_value:.4g} (trial {study.best_trial.number}) of {env_id}:")
    print(f'ARS("LinearPolicy", "{env_id}", {arguments})')
    print(f"python ars.py --env {env_id} {flags}")
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

    def __call__(self, signum: int, frame: Any) -> None:
        again = self.signum is not None
        self.signum = self.signum or signum
        if self.training and again:  # asked twice: now, wherever the trial is
            raise Interrupted
        if self.optimizing:
            self.study.stop()

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
                raise
            except Exception as error:
                if type(error).__name__ == "TrialPruned":
                    print(f"trial {trial.number} pruned", flush=True)
                raise
            finally:
                self.training = False
            print(f"trial {trial.number}: {value:.4g}", flush=True)
            return value

        return objective

    @property
    def status(self) -> int:
        return 128 + (self.signum or signal.SIGINT)


def main(argv: list[str] | None = None) -> int:
    """The command line; returns the exit status."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--env", required=True, help="gymnasium env id")
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
    args = p.parse_args(argv)
    if min(args.trials, args.timesteps, args.seeds, args.eval_episodes) < 1 or args.workers < 0:
        p.error("--trials, --timesteps, --seeds and --eval-episodes must be >= 1, --workers >= 0")
    args.eval_freq = args.eval_freq or max(args.timesteps // 20, 1)
    optuna = ars.require("optuna", INSTALL)
    optuna.logging.set_verbosity(optuna.logging.ERROR)  # a failed trial: tune.py says so
    study = optuna.create_study(
        storage=args.storage,
        study_name=args.study or args.env,
        load_if_exists=True,
        direction="minimize",
        sampler=optuna.samplers.TPESampler(),
        pruner=optuna.pruners.MedianPruner(n_startup_trials=5),
    )
    objective = "threshold" if args.threshold is not None else "area under the curve"
    kept = study.user_attrs.get("objective", objective)
    if kept != objective or study.user_attrs.get("threshold", args.threshold) != args.threshold:
        p.error(f"the study {study.study_name} tunes for {kept}: give it the same --threshold")
    study.set_user_attr("objective", objective)
    study.set_user_attr("threshold", args.threshold)
    evaluator = ars.AsyncEval([args.env] * args.workers) if args.workers else None
    stop = Stop(study)
    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:  # the signals are the study's until main returns: a second one is heard, not fatal
        return _study(study, stop, args, evaluator)
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _study(study: Any, stop: Stop, args: argparse.Namespace, evaluator: Any) -> int:
    """Run the trials the study lacks, then report; the exit status."""
    finished = ("COMPLETE", "PRUNED")
    done = sum(t.state.name in finished for t in study.trials)
    objective = stop.objective(lambda trial: run_trial(trial, args, evaluator, stop))
    try:  # a trial whose rewards overflow fails alone; the same command runs it again
        stop.optimizing = True
        study.optimize(objective, n_trials=max(args.trials - done, 0), catch=FloatingPointError)
    except KeyboardInterrupt:
        stop.signum = stop.signum or signal.SIGINT
    except RuntimeError:  # a signal to the process group ended AsyncEval's workers too
        if stop.signum is None:
            raise
    finally:
        stop.optimizing = False
        if evaluator is not None:
            evaluator.close()
    if stop.signum is not None:
        done = sum(t.state.name in finished for t in study.trials)
        print(f"interrupted: {done} trials kept in {args.storage}; the same command goes on")
        return stop.status
    if not any(t.state.name == "COMPLETE" for t in study.trials):
        print("no trial completed: nothing to report")
        return 1
    report(study, args.env, args.plots)
    return 0


if __name__ == "__main__":
    sys.exit(main())
