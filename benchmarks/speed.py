"""Steps per second, side by side: the bare env loop, ars, ars with AsyncEval, and sb3-contrib.

    python benchmarks/speed.py                                   # every env below, 3 repeats
    python benchmarks/speed.py --envs HalfCheetah-v4 --n-delta 32 --impls ars ars-async

Every measurement runs in this process tree, interleaved (A B C A B C ...) so that
machine drift cancels. Learning is frozen (learning_rate=0 from the zero policy), so
every implementation rolls out the same kind of policies. MuJoCo steps cost more with
real actions than with zeros, so "bare" replays actions recorded from those frozen
policies ("bare-zero" sends zeros, for reference). Ratios are medians of the per-repeat
ratios. "ars's own cost" is measured separately: the time per step spent outside env.step. Results go to benchmarks/results/speed.json and speed.md.
sb3-contrib rows appear when it is installed (pip install -e ".[bench]").
"""

from __future__ import annotations

import argparse
import functools
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

CASES = [  # (env id, policy, net_arch)
    ("Swimmer-v4", "LinearPolicy", None),
    ("Hopper-v4", "LinearPolicy", None),
    ("HalfCheetah-v4", "LinearPolicy", None),
    ("HalfCheetah-v4", "MlpPolicy", [64, 64]),
    ("Pendulum-v1", "LinearPolicy", None),
]


class _RecordActions(ars.gym.Wrapper):
    def __init__(self, env: ars.gym.Env):
        super().__init__(env)
        self.actions: list = []

    def step(self, action):  # noqa: ANN001, ANN201
        self.actions.append(action)
        return self.env.step(action)


def policy_actions(env_id: str, policy: str, net_arch: list | None, n_delta: int | None, n: int = 4000) -> list:
    """Actions the frozen ARS candidates take (MuJoCo's step costs more with them than with zeros)."""
    recorder = _RecordActions(ars.make_env(env_id))
    model = ars.ARS(policy, recorder, learning_rate=0.0, policy_kwargs={"net_arch": net_arch} if net_arch else None, seed=0, **_hp(env_id, n_delta))
    model.learn(n)
    return recorder.actions[:n]


def bare(env_id: str, steps: int, actions: list | None = None, **_: object) -> float:
    """The ceiling: env.step on the same env, replaying fixed actions (zeros by default), resets included."""
    env = ars.make_env(env_id)
    actions = actions or [np.zeros(env.action_space.shape, dtype=env.action_space.dtype)]
    n = len(actions)
    env.reset(seed=0)
    start = time.perf_counter()
    for i in range(steps):
        _, _, terminated, truncated, _ = env.step(actions[i % n])
        if terminated or truncated:
            env.reset()
    return steps / (time.perf_counter() - start)


class _TimeSteps(ars.gym.Wrapper):
    seconds = 0.0

    def step(self, action):  # noqa: ANN001, ANN201
        start = time.perf_counter()
        out = self.env.step(action)
        _TimeSteps.seconds += time.perf_counter() - start
        return out


def own_cost(env_id: str, steps: int, policy: str, net_arch: list | None, n_delta: int | None, **_: object) -> tuple[float, float]:
    """ars's own time per step outside env.step, in microseconds, and as a share of the whole."""
    model = ars.ARS(policy, _TimeSteps(ars.make_env(env_id)), learning_rate=0.0, policy_kwargs={"net_arch": net_arch} if net_arch else None, seed=0, **_hp(env_id, n_delta))
    _TimeSteps.seconds = 0.0
    start = time.perf_counter()
    model.learn(steps)
    total = time.perf_counter() - start
    return (total - _TimeSteps.seconds) / model.num_timesteps * 1e6, 1 - _TimeSteps.seconds / total


def _hp(env_id: str, n_delta: int | None) -> dict:
    hp = ars.settings_for(env_id)
    n = n_delta or hp["n_delta"]
    return dict(n_delta=n, n_top=min(hp["n_top"] or n, n), delta_std=hp["delta_std"], normalize_obs=hp["normalize_obs"])


def ars_run(env_id: str, steps: int, policy: str, net_arch: list | None, n_delta: int | None, async_eval: object = None, **_: object) -> float:
    hp = _hp(env_id, n_delta)
    kwargs = {"net_arch": net_arch} if net_arch else None
    model = ars.ARS(policy, env_id, learning_rate=0.0, policy_kwargs=kwargs, seed=0, **hp)
    start = time.perf_counter()
    model.learn(steps, async_eval=async_eval)
    return model.num_timesteps / (time.perf_counter() - start)


def sb3_env(env_id: str, normalize_obs: bool) -> object:
    """sb3-contrib's env: a VecEnv, normalised through VecNormalize as the zoo does."""
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = make_vec_env(env_id, n_envs=1)
    return VecNormalize(env, norm_reward=False) if normalize_obs else env


def sb3_run(env_id: str, steps: int, policy: str, net_arch: list | None, n_delta: int | None, sb3_workers: int = 0, **_: object) -> float:
    from sb3_contrib import ARS as SB3ARS
    from sb3_contrib.common.vec_env import AsyncEval as SB3AsyncEval

    hp = _hp(env_id, n_delta)
    kwargs = {"net_arch": net_arch} if net_arch else None
    normalize_obs = hp.pop("normalize_obs")
    model = SB3ARS(policy, sb3_env(env_id, normalize_obs), learning_rate=0.0, policy_kwargs=kwargs, seed=0, **hp)
    # sb3-contrib's learn() closes its AsyncEval, so each measurement starts one (untimed).
    sb3_async = SB3AsyncEval([functools.partial(sb3_env, env_id, normalize_obs)] * sb3_workers, model.policy) if sb3_workers else None
    start = time.perf_counter()
    model.learn(steps, async_eval=sb3_async)
    return model.num_timesteps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="*", help="restrict to these env ids")
    parser.add_argument("--policies", nargs="*", default=["LinearPolicy", "MlpPolicy"])
    parser.add_argument("--impls", nargs="*", default=["bare-zero", "bare", "ars", "ars-async", "sb3", "sb3-async"])
    parser.add_argument("--n-delta", type=int, help="directions per iteration (default: the paper's for the env)")
    parser.add_argument("--steps", type=int, default=100_000, help="env steps per measurement")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=os.cpu_count())
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    args = parser.parse_args()
    warnings.filterwarnings("ignore")

    try:
        import sb3_contrib  # noqa: F401
    except ImportError:
        args.impls = [i for i in args.impls if not i.startswith("sb3")]
        print("sb3-contrib is not installed: its rows are left out (pip install -e '.[bench]')")

    rows = []
    for env_id, policy, net_arch in CASES:
        if (args.envs and env_id not in args.envs) or policy not in args.policies:
            continue
        label = f"{env_id} {policy}{net_arch or ''}"
        print(f"\n== {label} (n_delta={_hp(env_id, args.n_delta)['n_delta']}, {args.steps:,} steps, {args.repeats} repeats)")
        common = dict(env_id=env_id, steps=args.steps, policy=policy, net_arch=net_arch, n_delta=args.n_delta)
        async_eval = None
        if "ars-async" in args.impls:  # ours stays open across learn() calls: started once, untimed
            model = ars.ARS(policy, env_id, policy_kwargs={"net_arch": net_arch} if net_arch else None)
            async_eval = ars.AsyncEval([functools.partial(ars.make_env, env_id)] * args.workers, model.policy)
        actions = policy_actions(env_id, policy, net_arch, args.n_delta)
        runners = {
            "bare-zero": functools.partial(bare, **common),
            "bare": functools.partial(bare, **common, actions=actions),
            "ars": functools.partial(ars_run, **common),
            "ars-async": functools.partial(ars_run, **common, async_eval=async_eval),
            "sb3": functools.partial(sb3_run, **common),
            "sb3-async": functools.partial(sb3_run, **common, sb3_workers=args.workers),
        }
        impls = [i for i in args.impls if i in runners]
        samples: dict[str, list[float]] = {i: [] for i in impls}
        for repeat in range(args.repeats):
            for impl in impls:
                samples[impl].append(runners[impl]())
            print(f"  repeat {repeat + 1}: " + "  ".join(f"{i} {samples[i][-1]:,.0f}" for i in impls), flush=True)
        if async_eval is not None:
            async_eval.close()
        cost_us, cost_share = own_cost(**common)
        print(f"  ars's own cost: {cost_us:.2f} us per step, {cost_share:.1%} of the time")
        row = {"case": label, "env": env_id, "policy": policy, "net_arch": net_arch, "workers": args.workers, "steps": args.steps}
        row["ars own us/step"], row["ars own share"] = cost_us, cost_share
        for impl, values in samples.items():
            row[impl] = {"min": min(values), "median": statistics.median(values), "max": max(values)}
        for num, den in [("ars", "bare"), ("ars", "bare-zero"), ("ars", "sb3"), ("ars-async", "ars"), ("ars-async", "sb3-async"), ("sb3-async", "sb3")]:
            if num in samples and den in samples:
                row[f"{num}/{den}"] = statistics.median(a / b for a, b in zip(samples[num], samples[den]))
        rows.append(row)
        for key, value in row.items():
            if "/" in key:
                print(f"  {key}: {value:.2f}")

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "speed.json").write_text(json.dumps({"cpus": os.cpu_count(), "numpy": np.__version__, "rows": rows}, indent=2) + "\n")
    impls = [i for i in args.impls if any(i in r for r in rows)]
    ratios = [k for k in ("ars/bare", "ars/bare-zero", "ars/sb3", "ars-async/ars", "ars-async/sb3-async", "sb3-async/sb3") if any(k in r for r in rows)]
    lines = [
        "| case | " + " | ".join(f"{i} steps/s (min / median / max)" for i in impls) + " | " + " | ".join(ratios) + " | ars's own cost per step |",
        "|---" * (2 + len(impls) + len(ratios)) + "|",
    ]
    for r in rows:
        cells = [f"{r[i]['min']:,.0f} / **{r[i]['median']:,.0f}** / {r[i]['max']:,.0f}" if i in r else "" for i in impls]
        cost = f"{r['ars own us/step']:.1f} us ({r['ars own share']:.1%})"
        lines.append(f"| {r['case']} | " + " | ".join(cells) + " | " + " | ".join(f"{r[k]:.2f}" if k in r else "" for k in ratios) + f" | {cost} |")
    (out / "speed.md").write_text("\n".join(lines) + "\n")
    print("\n" + "\n".join(lines))
    print(f"\nwrote {out / 'speed.json'} and {out / 'speed.md'}")


if __name__ == "__main__":
    main()
