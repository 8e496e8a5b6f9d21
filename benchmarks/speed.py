"""Steps per second, side by side: the bare env loop, ars, ars with AsyncEval, and sb3-contrib.

    python benchmarks/speed.py                                   # every env below, 3 repeats
    python benchmarks/speed.py --envs HalfCheetah-v4 --n-delta 32 --impls ars ars-async

Every measurement runs in this process tree, interleaved (A B C A B C ...) so that
machine drift cancels. Learning is frozen (learning_rate=0 from the zero policy), so
every implementation rolls out the same kind of policies. Ratios are medians of the
per-repeat ratios. Results go to benchmarks/results/speed.json and speed.md.
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import ars  # noqa: E402

CASES = [  # (env id, policy, net_arch)
    ("Swimmer-v4", "LinearPolicy", None),
    ("Hopper-v4", "LinearPolicy", None),
    ("HalfCheetah-v4", "LinearPolicy", None),
    ("HalfCheetah-v4", "MlpPolicy", [64, 64]),
    ("Pendulum-v1", "LinearPolicy", None),
]


def bare(env_id: str, steps: int, **_: object) -> float:
    """The ceiling: env.step with a fixed zero action, resets included."""
    env = ars.make_env(env_id)
    action = np.zeros(env.action_space.shape, dtype=env.action_space.dtype)
    env.reset(seed=0)
    start = time.perf_counter()
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            env.reset()
    return steps / (time.perf_counter() - start)


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


def sb3_run(env_id: str, steps: int, policy: str, net_arch: list | None, n_delta: int | None, sb3_async: object = None, **_: object) -> float:
    from sb3_contrib import ARS as SB3ARS

    hp = _hp(env_id, n_delta)
    kwargs = {"net_arch": net_arch} if net_arch else None
    if hp.pop("normalize_obs"):  # sb3-contrib normalises through VecNormalize, as the zoo does
        from stable_baselines3.common.env_util import make_vec_env
        from stable_baselines3.common.vec_env import VecNormalize

        env = VecNormalize(make_vec_env(env_id, n_envs=1), norm_reward=False)
    else:
        env = env_id
    model = SB3ARS(policy, env, learning_rate=0.0, policy_kwargs=kwargs, seed=0, **hp)
    start = time.perf_counter()
    model.learn(steps, async_eval=sb3_async)
    return model.num_timesteps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="*", help="restrict to these env ids")
    parser.add_argument("--policies", nargs="*", default=["LinearPolicy", "MlpPolicy"])
    parser.add_argument("--impls", nargs="*", default=["bare", "ars", "ars-async", "sb3", "sb3-async"])
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
        async_eval = sb3_async = None
        if "ars-async" in args.impls:
            model = ars.ARS(policy, env_id, policy_kwargs={"net_arch": net_arch} if net_arch else None)
            async_eval = ars.AsyncEval([functools.partial(ars.make_env, env_id)] * args.workers, model.policy)
        if "sb3-async" in args.impls:
            from sb3_contrib import ARS as SB3ARS
            from sb3_contrib.common.vec_env import AsyncEval as SB3AsyncEval
            from stable_baselines3.common.env_util import make_vec_env

            sb3_model = SB3ARS(policy, env_id, policy_kwargs={"net_arch": net_arch} if net_arch else None)
            sb3_async = SB3AsyncEval([functools.partial(make_vec_env, env_id, n_envs=1)] * args.workers, sb3_model.policy)
        runners = {
            "bare": functools.partial(bare, **common),
            "ars": functools.partial(ars_run, **common),
            "ars-async": functools.partial(ars_run, **common, async_eval=async_eval),
            "sb3": functools.partial(sb3_run, **common),
            "sb3-async": functools.partial(sb3_run, **common, sb3_async=sb3_async),
        }
        impls = [i for i in args.impls if i in runners]
        samples: dict[str, list[float]] = {i: [] for i in impls}
        for repeat in range(args.repeats):
            for impl in impls:
                samples[impl].append(runners[impl]())
            print(f"  repeat {repeat + 1}: " + "  ".join(f"{i} {samples[i][-1]:,.0f}" for i in impls), flush=True)
        if async_eval is not None:
            async_eval.close()
        if sb3_async is not None:
            sb3_async.close()
        row = {"case": label, "env": env_id, "policy": policy, "net_arch": net_arch, "workers": args.workers, "steps": args.steps}
        for impl, values in samples.items():
            row[impl] = {"min": min(values), "median": statistics.median(values), "max": max(values)}
        for num, den in [("ars", "bare"), ("ars", "sb3"), ("ars-async", "ars"), ("ars-async", "sb3-async"), ("sb3-async", "sb3")]:
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
    ratios = sorted({k for r in rows for k in r if "/" in k})
    lines = [
        "| case | " + " | ".join(f"{i} steps/s (min / median / max)" for i in impls) + " | " + " | ".join(ratios) + " |",
        "|---" * (1 + len(impls) + len(ratios)) + "|",
    ]
    for r in rows:
        cells = [f"{r[i]['min']:,.0f} / **{r[i]['median']:,.0f}** / {r[i]['max']:,.0f}" if i in r else "" for i in impls]
        lines.append(f"| {r['case']} | " + " | ".join(cells) + " | " + " | ".join(f"{r[k]:.2f}" if k in r else "" for k in ratios) + " |")
    (out / "speed.md").write_text("\n".join(lines) + "\n")
    print("\n" + "\n".join(lines))
    print(f"\nwrote {out / 'speed.json'} and {out / 'speed.md'}")


if __name__ == "__main__":
    main()
