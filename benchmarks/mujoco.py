"""Learning benchmark: the paper's hyper-parameters on MuJoCo, the paper's seeds, all cores.

    python benchmarks/mujoco.py --envs Swimmer-v4 Hopper-v4 HalfCheetah-v4
    python benchmarks/mujoco.py --envs Hopper-v4 --peer sb3-contrib      # the same protocol for sb3-contrib
    python benchmarks/mujoco.py --report                                 # table and plots from saved runs

Every --eval-freq timesteps the current policy is evaluated: deterministic, 10 episodes,
no alive bonus, seeds of its own. Each evaluation records (timesteps, training seconds
without the evaluations, mean return). The report gives, per task, the median over seeds
of the timesteps and seconds to first reach the paper's threshold, and the final reward.
Runs are appended to benchmarks/results/mujoco.json as they finish; a run already there
is not repeated. Plots (matplotlib: pip install -e ".[plot]") go to benchmarks/results/.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

# Python puts this folder first on sys.path, where mujoco.py would shadow the real mujoco package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import ars  # noqa: E402

THRESHOLDS = {"Swimmer": 325, "Hopper": 3120, "HalfCheetah": 3430, "Walker2d": 4390, "Ant": 3580, "Humanoid": 6000}
BUDGETS = {"Swimmer": 2_000_000, "Hopper": 3_000_000, "HalfCheetah": 3_000_000, "Walker2d": 10_000_000, "Ant": 10_000_000}
PAPER_SEEDS = [237, 759, 959]
RESULTS = Path(__file__).resolve().parent / "results"


def task(env_id: str) -> str:
    return env_id.rsplit("-v", 1)[0]


def run_ars(env_id: str, seed: int, budget: int, eval_freq: int, workers: int) -> list[tuple]:
    """Train with the paper's settings; returns the evaluations (timesteps, seconds, mean, std)."""
    model = ars.paper_model(env_id, seed=seed)
    evaluation = ars.EvalCallback(env_id, eval_freq=eval_freq, n_eval_episodes=10, eval_concurrency=workers, seed=seed + 1)
    with ars.AsyncEval([functools.partial(ars.make_env, env_id)] * workers, model.policy) as async_eval:
        model.learn(budget, callback=evaluation, async_eval=async_eval)
    return evaluation.evaluations


def run_sb3(env_id: str, seed: int, budget: int, eval_freq: int, workers: int) -> list[tuple]:
    """The same protocol with sb3-contrib's ARS (observations normalised by VecNormalize, as the zoo does)."""
    from sb3_contrib import ARS as SB3ARS
    from sb3_contrib.common.vec_env import AsyncEval as SB3AsyncEval
    from stable_baselines3.common.callbacks import BaseCallback

    spec = importlib.util.spec_from_file_location("speed", Path(__file__).resolve().parent / "speed.py")
    speed = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(speed)
    sb3_env = speed.sb3_env

    hp = ars.settings_for(env_id)
    env = sb3_env(env_id, hp["normalize_obs"])
    model = SB3ARS(
        "LinearPolicy", env, n_delta=hp["n_delta"], n_top=hp["n_top"], learning_rate=hp["learning_rate"],
        delta_std=hp["delta_std"], alive_bonus_offset=hp["alive_bonus_offset"], seed=seed,
    )  # fmt: skip
    eval_env, seeds = ars.make_env(env_id), np.random.SeedSequence([seed + 1, 1]).generate_state(10)

    def evaluate() -> float:
        returns = []
        for episode_seed in seeds:
            obs, _ = eval_env.reset(seed=int(episode_seed))
            total, done = 0.0, False
            while not done:
                if hasattr(env, "normalize_obs"):
                    obs = env.normalize_obs(obs)
                obs, reward, terminated, truncated, _ = eval_env.step(model.predict(obs, deterministic=True)[0])
                total += reward
                done = terminated or truncated
            returns.append(total)
        return float(np.mean(returns)), float(np.std(returns))

    class Evaluate(BaseCallback):
        def _on_training_start(self) -> None:
            self.records, self.next, self.eval_seconds, self.start = [], 0, 0.0, time.perf_counter()

        def _on_step(self) -> bool:
            if self.num_timesteps >= self.next:
                self.next = self.num_timesteps + eval_freq
                began = time.perf_counter()
                mean, std = evaluate()
                self.eval_seconds += time.perf_counter() - began
                self.records.append((self.num_timesteps, time.perf_counter() - self.start - self.eval_seconds, mean, std))
            return True

    callback = Evaluate()
    async_eval = SB3AsyncEval([functools.partial(sb3_env, env_id, hp["normalize_obs"])] * workers, model.policy) if workers > 1 else None
    model.learn(budget, callback=callback, async_eval=async_eval)
    return callback.records


def first_reach(evaluations: list, threshold: float) -> tuple[int, float] | None:
    for timesteps, seconds, mean, _ in evaluations:
        if mean >= threshold:
            return timesteps, seconds
    return None


def report(results: dict) -> str:
    """The Markdown table, and one plot per task."""
    lines = [
        "| task | implementation | threshold | budget | seeds reaching it | median timesteps to threshold | median wall time to threshold | final reward, median (min to max) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for key in sorted(results):
        impl, env_id = key.split(":", 1)
        runs = results[key]
        threshold = THRESHOLDS[task(env_id)]
        reached = [first_reach(r["evaluations"], threshold) for r in runs.values()]
        hits = [r for r in reached if r is not None]
        finals = [r["evaluations"][-1][2] for r in runs.values()]
        # median over all seeds; a seed that never reached the threshold counts as infinite
        steps = statistics.median([h[0] if h else float("inf") for h in reached])
        secs = statistics.median([h[1] if h else float("inf") for h in reached])
        steps_text = f"{steps / 1e6:.2f}M" if np.isfinite(steps) else "not reached"
        secs_text = f"{secs / 60:.1f} min" if np.isfinite(secs) else "not reached"
        budget = max(r["budget"] for r in runs.values())
        lines.append(
            f"| {env_id} | {impl} | {threshold} | {budget / 1e6:g}M | {len(hits)}/{len(runs)} | {steps_text} | {secs_text} | "
            f"{statistics.median(finals):.0f} ({min(finals):.0f} to {max(finals):.0f}) |"
        )
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plots (pip install -e '.[plot]')")
        return "\n".join(lines)
    for env_id in sorted({k.split(":", 1)[1] for k in results}):
        fig, ax = plt.subplots(figsize=(6, 4))
        for impl, color in (("ars", "tab:blue"), ("sb3-contrib", "tab:orange")):
            for i, (_seed, run) in enumerate(sorted(results.get(f"{impl}:{env_id}", {}).items())):
                e = np.array(run["evaluations"])
                ax.plot(e[:, 0] / 1e6, e[:, 2], color=color, alpha=0.8, label=impl if i == 0 else None)
        ax.axhline(THRESHOLDS[task(env_id)], color="gray", linestyle="--", label="paper threshold")
        ax.set(xlabel="timesteps (millions)", ylabel="mean return (10 episodes)", title=f"{env_id}: seeds {', '.join(map(str, PAPER_SEEDS))}")
        ax.legend()
        fig.tight_layout()
        fig.savefig(RESULTS / f"{env_id}.png", dpi=100)
        plt.close(fig)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="*", default=["Swimmer-v4", "Hopper-v4", "HalfCheetah-v4", "Walker2d-v4", "Ant-v4"])
    parser.add_argument("--seeds", nargs="*", type=int, default=PAPER_SEEDS)
    parser.add_argument("--budget", type=float, help="timesteps per run (default: per task, see BUDGETS)")
    parser.add_argument("--eval-freq", type=int, default=50_000)
    parser.add_argument("--workers", type=int, default=os.cpu_count())
    parser.add_argument("--peer", choices=["sb3-contrib"], help="run the peer instead of ars")
    parser.add_argument("--report", action="store_true", help="only rebuild the table and plots")
    parser.add_argument("--results", default=str(RESULTS / "mujoco.json"))
    args = parser.parse_args()
    warnings.filterwarnings("ignore")

    path = Path(args.results)
    path.parent.mkdir(parents=True, exist_ok=True)
    results = json.loads(path.read_text()) if path.exists() else {}
    if not args.report:
        impl, runner = ("sb3-contrib", run_sb3) if args.peer else ("ars", run_ars)
        for env_id in args.envs:
            for seed in args.seeds:
                key = f"{impl}:{env_id}"
                if str(seed) in results.get(key, {}):
                    continue
                budget = int(args.budget or BUDGETS[task(env_id)])
                print(f"{impl} {env_id} seed {seed}: {budget:,} steps on {args.workers} workers", flush=True)
                began = time.perf_counter()
                evaluations = runner(env_id, seed, budget, args.eval_freq, args.workers)
                results.setdefault(key, {})[str(seed)] = {"budget": budget, "workers": args.workers, "evaluations": evaluations}
                path.write_text(json.dumps(results, indent=1) + "\n")  # after every run: an interrupted benchmark keeps its runs
                hit = first_reach(evaluations, THRESHOLDS[task(env_id)])
                print(f"  final {evaluations[-1][2]:.1f}; threshold {'at ' + format(hit[0], ',') + ' steps' if hit else 'not reached'}; "
                      f"{(time.perf_counter() - began) / 60:.1f} min", flush=True)  # fmt: skip
    table = report(results)
    (path.parent / "mujoco.md").write_text(table + "\n")
    print(table)


if __name__ == "__main__":
    main()
