"""Steps per second, side by side: the bare env loop, ars, ars with AsyncEval, and sb3-contrib.

    python benchmarks/speed.py                                  # every case below, 3 repeats
    python benchmarks/speed.py --envs Humanoid-v4 --impls bare bare-2 ars-async
    python benchmarks/speed.py --vector        # k = 1, 4, 16 envs side by side, in one process
    python benchmarks/speed.py --clip benchmarks/results/models/Hopper-v4-237.npz  # video.py

Every measurement runs in this process tree, interleaved (A B C A B C ...) so that drift
of the machine cancels. Learning is frozen (learning_rate=0 from the zero policy), so each
implementation rolls out the same kind of policies. MuJoCo steps cost more with real
actions than with zeros, so "bare" replays actions recorded from those frozen policies
on one core, and "bare-2" runs that loop in one process per core at once: the ceiling
for rollouts in worker processes. "closed" is the minimal closed loop a user would write
(``env.step(clip(M (obs - mean) / std))`` with a frozen candidate's matrix): what ars's
rollouts would cost without ars. Ratios are medians of the per-repeat ratios. ars's own
cost, the time per step spent outside env.step and env.reset, is measured apart. Results go to
benchmarks/results/speed.json and speed.md; sb3-contrib rows need
``pip install -e ".[bench]"``.

``--vector`` measures ars on a vector env of k envs in this process (gymnasium's
SyncVectorEnv: ars steps its envs one by one and runs k rollouts side by side, one batched
forward pass per step), beside the bare loop and one plain env, and writes
speed_vector.json and speed_vector.md.
"""

from __future__ import annotations

import argparse
import functools
import json
import multiprocessing
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

import ars

CASES = [  # (env id, policy, net_arch)
    ("Swimmer-v4", "LinearPolicy", None),
    ("Hopper-v4", "LinearPolicy", None),
    ("HalfCheetah-v4", "LinearPolicy", None),
    ("HalfCheetah-v4", "MlpPolicy", [64, 64]),
    ("Humanoid-v4", "LinearPolicy", None),
    ("Pendulum-v1", "LinearPolicy", None),
]
RATIOS = [
    ("ars", "bare"),
    ("ars", "closed"),
    ("ars", "sb3"),
    ("ars-async", "ars"),
    ("ars-async", "bare-2"),
    ("ars-async", "sb3-async"),
]
VECTOR_CASES = [  # (env id, policy, net_arch, n_delta), each with k envs side by side
    ("Pendulum-v1", "LinearPolicy", None, 8),  # 16 candidates an iteration: 16 envs busy
    ("HalfCheetah-v4", "LinearPolicy", None, None),  # the paper's N = 32
    ("HalfCheetah-v4", "MlpPolicy", [64, 64], None),
]
WIDTHS = (1, 4, 16)
SUBPROCESS_KINDS = ("async", "SubprocVecEnv")


def _hp(env_id: str, n_delta: int | None) -> dict:
    hp = ars.settings_for(env_id, "paper")
    n = n_delta or hp["n_delta"]
    return dict(
        n_delta=n,
        n_top=min(hp["n_top"] or n, n),
        delta_std=hp["delta_std"],
        normalize_obs=hp["normalize_obs"],
    )


def _model(
    env_id: str, policy: str, net_arch: list | None, n_delta: int | None, env: object = None
) -> ars.ARS:
    """ars with the paper's settings and learning frozen (on ``env``, else on ``env_id``)."""
    kwargs = {"net_arch": net_arch} if net_arch else None
    return ars.ARS(
        policy,
        env or env_id,
        learning_rate=0.0,
        policy_kwargs=kwargs,
        seed=0,
        **_hp(env_id, n_delta),
    )


class _RecordActions(ars.gym.Wrapper):
    def __init__(self, env: ars.gym.Env):
        super().__init__(env)
        self.actions: list = []

    def step(self, action):  # noqa: ANN001, ANN201
        self.actions.append(action)
        return self.env.step(action)


def policy_actions(
    env_id: str, policy: str, net_arch: list | None, n_delta: int | None, n: int = 4000
) -> list:
    """Actions the frozen ARS candidates take (MuJoCo steps cost more with them than zeros)."""
    recorder = _RecordActions(ars.make_env(env_id))
    _model(env_id, policy, net_arch, n_delta, recorder).learn(n)
    return recorder.actions[:n]


def bare(env_id: str, steps: int, actions: list | None = None, **_: object) -> float:
    """The ceiling on one core: env.step replaying fixed actions (default zeros), with resets."""
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


def closed_loop(
    env_id: str, steps: int, policy: str, net_arch: list | None, n_delta: int | None, **_: object
) -> float:
    """The minimal closed loop a user would write: ``env.step(clip(M (obs - mean) / std))``
    with a frozen candidate's matrix ``M`` (ars's own parameters, drawn as ars draws them)
    and fixed statistics, with resets. Linear policies on Box actions only."""
    model = _model(env_id, policy, net_arch, n_delta)
    network = model.policy
    M = model.delta_std * ars.direction(0, 0, 0, network.n_params)
    M = M.reshape(network.action_dim, network.obs_dim)
    mean, std = np.zeros(network.obs_dim), np.ones(network.obs_dim)
    low, high = network.action_space.low, network.action_space.high
    env = ars.make_env(env_id)
    obs, _ = env.reset(seed=0)
    start = time.perf_counter()
    for _ in range(steps):
        obs, _, terminated, truncated, _ = env.step(np.clip(M @ ((obs - mean) / std), low, high))
        if terminated or truncated:
            obs, _ = env.reset()
    return steps / (time.perf_counter() - start)


def bare_parallel(env_id: str, steps: int, actions: list, workers: int, **_: object) -> float:
    """The ceiling for worker processes: the bare loop in ``workers`` processes at once, summed."""
    ctx = multiprocessing.get_context("forkserver")
    with ctx.Pool(workers) as pool:
        rates = pool.starmap(bare, [(env_id, steps // workers, actions)] * workers)
    return sum(rates)


def _timed(fn, totals: list[float]):  # noqa: ANN001, ANN202
    def timed(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        start = time.perf_counter()
        out = fn(*args, **kwargs)
        totals[0] += time.perf_counter() - start
        return out

    return timed


def vector_env(env_id: str, k: int, kind: str = "sync") -> object:
    """k envs in this process: gymnasium's SyncVectorEnv (k = 0: one plain env); or, by
    ``kind``, in k processes: gymnasium's AsyncVectorEnv ("async") or SB3's SubprocVecEnv."""
    if k == 0:
        return ars.make_env(env_id)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if kind == "SubprocVecEnv":
            from stable_baselines3.common.env_util import make_vec_env
            from stable_baselines3.common.vec_env import SubprocVecEnv

            return make_vec_env(env_id, k, vec_env_cls=SubprocVecEnv)
        return ars.gym.make_vec(env_id, k, vectorization_mode=kind)


def own_cost(
    env_id: str,
    steps: int,
    policy: str,
    net_arch: list | None,
    n_delta: int | None,
    k: int = 0,
    **_: object,
) -> tuple[float, float]:
    """ars's own time per step outside the env's step and reset, in microseconds, and its share.

    The timer sits on the innermost env (each of a vector env's k), so gymnasium's wrappers
    (which ars steps past) are not counted against either side.
    """
    env, in_env = vector_env(env_id, k), [0.0]
    for inner in getattr(env, "envs", [env]):
        inner.unwrapped.step = _timed(inner.unwrapped.step, in_env)
        inner.unwrapped.reset = _timed(inner.unwrapped.reset, in_env)
    model = _model(env_id, policy, net_arch, n_delta, env)
    start = time.perf_counter()
    model.learn(steps)
    total = time.perf_counter() - start
    return (total - in_env[0]) / model.num_timesteps * 1e6, 1 - in_env[0] / total


def vector_case(
    env_id: str, policy: str, net_arch: list | None, n_delta: int | None, args: argparse.Namespace
) -> dict:
    """Steps per second and ars's own cost per step, for one env and for k = 1, 4, 16."""
    n_delta = args.n_delta or n_delta
    label = f"{env_id} {policy}{net_arch or ''}, N = {_hp(env_id, n_delta)['n_delta']}"
    print(f"\n== {label}, vector envs ({args.steps:,} steps, {args.repeats} repeats)")
    common = dict(
        env_id=env_id, steps=args.steps, policy=policy, net_arch=net_arch, n_delta=n_delta
    )
    actions = policy_actions(env_id, policy, net_arch, n_delta)
    runners = {"bare": functools.partial(bare, **common, actions=actions)}
    for k in (0, *WIDTHS):
        runners["ars" if k == 0 else f"ars k={k}"] = functools.partial(
            ars_run, **common, env_fn=functools.partial(vector_env, env_id, k)
        )
    for kind in SUBPROCESS_KINDS:  # a pipe round trip per step: what in-process k avoids
        runners[f"ars {kind} k=4"] = functools.partial(
            ars_run, **common, env_fn=functools.partial(vector_env, env_id, 4, kind)
        )
    samples: dict[str, list[float]] = {i: [] for i in runners}
    for repeat in range(args.repeats):
        for impl, run in runners.items():
            samples[impl].append(run())
        print(
            f"  repeat {repeat + 1}: " + "  ".join(f"{i} {v[-1]:,.0f}" for i, v in samples.items())
        )
    row = {"case": label, "steps": args.steps}
    for impl, values in samples.items():
        row[impl] = {"min": min(values), "median": statistics.median(values), "max": max(values)}
    costs: dict[int, list] = {k: [] for k in (0, *WIDTHS)}
    for _ in range(args.repeats):  # interleaved too: medians of the repeats
        for k in costs:
            costs[k].append(own_cost(**common, k=k))
    for k, values in costs.items():
        name = "ars" if k == 0 else f"ars k={k}"
        row[f"{name} own us/step"] = statistics.median(v[0] for v in values)
        row[f"{name} own share"] = statistics.median(v[1] for v in values)
        print(f"  {name}: own cost {row[f'{name} own us/step']:.2f} us per step")
    return row


def write_vector_results(rows: list[dict], args: argparse.Namespace) -> None:
    """speed_vector.json and speed_vector.md."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"cpus": os.cpu_count(), "numpy": np.__version__, "steps": args.steps}
    (out / "speed_vector.json").write_text(json.dumps({**meta, "rows": rows}, indent=2) + "\n")
    names = ["ars", *(f"ars k={k}" for k in WIDTHS)]
    lines = [
        "Steps per second (median of the repeats; min to max) and ars's own cost per step "
        "(outside env.step and env.reset), in one process:",
        "",
        "| case | bare loop | "
        + " | ".join(n.replace("ars", "ars, one env", n == "ars") for n in names)
        + " |",
        "|---" * (2 + len(names)) + "|",
    ]
    for r in rows:
        cells = [
            f"{r[n]['median']:,.0f} ({r[n]['min']:,.0f} to {r[n]['max']:,.0f}); own "
            f"{r[n + ' own us/step']:.2f} us"
            for n in names
        ]
        lines.append(f"| {r['case']} | {r['bare']['median']:,.0f} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "k = 4 envs in subprocesses (gymnasium's AsyncVectorEnv, SB3's SubprocVecEnv), steps "
        "per second and as a share of one env in this process:",
        "",
        "| case | " + " | ".join(f"{k} k=4" for k in SUBPROCESS_KINDS) + " |",
        "|---" * (1 + len(SUBPROCESS_KINDS)) + "|",
    ]
    for r in rows:
        cells = [
            f"{r[n]['median']:,.0f} ({r[n]['median'] / r['ars']['median']:.2f} of one env)"
            for n in (f"ars {kind} k=4" for kind in SUBPROCESS_KINDS)
        ]
        lines.append(f"| {r['case']} | " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n"
    (out / "speed_vector.md").write_text(text)
    print("\n" + text + f"\nwrote {out / 'speed_vector.json'} and {out / 'speed_vector.md'}")


def ars_run(
    env_id: str,
    steps: int,
    policy: str,
    net_arch: list | None,
    n_delta: int | None,
    async_eval: object = None,
    env_fn: object = None,
    **_: object,
) -> float:
    """ars's steps per second on ``env_id``."""
    model = _model(env_id, policy, net_arch, n_delta, env_fn() if env_fn else None)
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


def sb3_run(
    env_id: str,
    steps: int,
    policy: str,
    net_arch: list | None,
    n_delta: int | None,
    sb3_workers: int = 0,
    **_: object,
) -> float:
    """sb3-contrib's steps per second on ``env_id``."""
    from sb3_contrib import ARS as SB3ARS
    from sb3_contrib.common.vec_env import AsyncEval as SB3AsyncEval

    hp = _hp(env_id, n_delta)
    normalize_obs = hp.pop("normalize_obs")
    kwargs = {"net_arch": net_arch} if net_arch else None
    model = SB3ARS(
        policy,
        sb3_env(env_id, normalize_obs),
        learning_rate=0.0,
        policy_kwargs=kwargs,
        seed=0,
        **hp,
    )
    # sb3-contrib's learn() closes its AsyncEval, so each measurement starts one (untimed).
    env_fns = [functools.partial(sb3_env, env_id, normalize_obs)] * sb3_workers
    sb3_async = SB3AsyncEval(env_fns, model.policy) if sb3_workers else None
    start = time.perf_counter()
    model.learn(steps, async_eval=sb3_async)
    return model.num_timesteps / (time.perf_counter() - start)


def main() -> None:
    """Run the speed cases the flags name and print the ratios."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--envs", nargs="*", help="restrict to these env ids")
    parser.add_argument("--policies", nargs="*", default=["LinearPolicy", "MlpPolicy"])
    parser.add_argument(
        "--impls",
        nargs="*",
        default=["bare", "closed", "bare-2", "ars", "ars-async", "sb3", "sb3-async"],
    )
    parser.add_argument(
        "--n-delta", type=int, help="directions per iteration (default: the paper's)"
    )
    parser.add_argument("--steps", type=int, default=100_000, help="env steps per measurement")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=os.cpu_count())
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    parser.add_argument("--vector", action="store_true", help="k = 1, 4, 16 envs side by side")
    parser.add_argument(
        "--clip", metavar="MODEL", help="examples/video.py's steps/s beside env.render()'s"
    )
    parser.add_argument("--profile", action="store_true", help="where ars's time goes (cProfile)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    if args.clip:
        clip_speed(args.clip)
        return
    if args.profile:
        for case in CASES:
            if not (args.envs and case[0] not in args.envs) and case[1] in args.policies:
                profile_case(*case, args)
        return
    if args.vector:
        cases = [c for c in VECTOR_CASES if not (args.envs and c[0] not in args.envs)]
        cases = [c for c in cases if c[1] in args.policies]
        write_vector_results([vector_case(*case, args) for case in cases], args)
        return
    try:
        import sb3_contrib  # noqa: F401
    except ImportError:
        args.impls = [i for i in args.impls if not i.startswith("sb3")]
        print("sb3-contrib is not installed: its rows are left out (pip install -e '.[bench]')")
    rows = [
        run_case(*case, args)
        for case in CASES
        if not (args.envs and case[0] not in args.envs) and case[1] in args.policies
    ]
    write_results(rows, args)


def profile_case(env_id: str, policy: str, net_arch: list | None, args: argparse.Namespace) -> None:
    """ars's learn() (learning frozen) under cProfile: the functions that take the most time
    of their own, with their share of the whole."""
    import cProfile
    import pstats

    model = _model(env_id, policy, net_arch, args.n_delta)
    profiler = cProfile.Profile()
    profiler.runcall(model.learn, args.steps)
    stats = pstats.Stats(profiler)
    total = sum(row[2] for row in stats.stats.values())  # tottime: each second counted once
    print(f"\n== {env_id} {policy}{net_arch or ''}: {total:.2f} s profiled, own time per function")
    for (file, line, name), row in sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:12]:
        where = f"{Path(file).name}:{line}" if line else file
        print(f"  {row[2] / total:6.1%}  {row[1]:>9,} calls  {name} ({where})")
    groups: dict[str, float] = {}
    for (file, _, name), row in stats.stats.items():
        group = "ars.py" if file.endswith("ars.py") else "numpy" if "numpy" in file else None
        group = group or ("the env" if "gymnasium" in file or "mujoco" in name else "other")
        groups[group] = groups.get(group, 0.0) + row[2]
    print("  by place: " + ", ".join(f"{g} {t / total:.1%}" for g, t in sorted(groups.items())))


def clip_speed(path: str) -> None:
    """Steps per second of ``python examples/video.py MODEL clip.mp4`` (the whole command:
    load, render, encode) beside the frames per second of the env's own render() loop."""
    import subprocess
    import tempfile

    model = ars.ARS.load(path)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
    import video  # examples/video.py

    env = video.rendering_env(model, model.env_id, "rgb_array")
    env.reset(seed=0)
    began = time.perf_counter()
    for _ in range(100):
        env.step(env.action_space.sample())
        env.render()
    render_fps = 100 / (time.perf_counter() - began)
    with tempfile.TemporaryDirectory() as folder:
        command = [sys.executable, video.__file__, path, f"{folder}/clip.mp4"]
        began = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        seconds = time.perf_counter() - began
    steps = ars.evaluate_policy(model, model.env_id, 1, return_episode_rewards=True)[1][0]
    print(
        f"{model.env_id}: video.py {steps / seconds:.1f} steps/s ({steps} steps in "
        f"{seconds:.1f} s); env.render() {render_fps:.1f} frames/s; ratio "
        f"{steps / seconds / render_fps:.2f}"
    )


def run_case(env_id: str, policy: str, net_arch: list | None, args: argparse.Namespace) -> dict:
    """One speed case, ars and the peer side by side."""
    label = f"{env_id} {policy}{net_arch or ''}"
    print(
        f"\n== {label} (n_delta={_hp(env_id, args.n_delta)['n_delta']}, {args.steps:,} steps, "
        f"{args.repeats} repeats)"
    )
    common = dict(
        env_id=env_id, steps=args.steps, policy=policy, net_arch=net_arch, n_delta=args.n_delta
    )
    async_eval = None
    if "ars-async" in args.impls:  # ours stays open across learn() calls: started once, untimed
        async_eval = ars.AsyncEval(
            [functools.partial(ars.make_env, env_id)] * args.workers,
            _model(env_id, policy, net_arch, args.n_delta).policy,
        )
    actions = policy_actions(env_id, policy, net_arch, args.n_delta)
    runners = {
        "bare": functools.partial(bare, **common, actions=actions),
        "closed": functools.partial(closed_loop, **common),
        "bare-2": functools.partial(bare_parallel, **common, actions=actions, workers=args.workers),
        "ars": functools.partial(ars_run, **common),
        "ars-async": functools.partial(ars_run, **common, async_eval=async_eval),
        "sb3": functools.partial(sb3_run, **common),
        "sb3-async": functools.partial(sb3_run, **common, sb3_workers=args.workers),
    }
    impls = [i for i in args.impls if i in runners]
    if policy != "LinearPolicy":  # the closed loop is the paper's linear policy
        impls = [i for i in impls if i != "closed"]
    samples: dict[str, list[float]] = {i: [] for i in impls}
    for repeat in range(args.repeats):
        for impl in impls:
            samples[impl].append(runners[impl]())
        print(
            f"  repeat {repeat + 1}: " + "  ".join(f"{i} {samples[i][-1]:,.0f}" for i in impls),
            flush=True,
        )
    if async_eval is not None:
        async_eval.close()
    cost_us, cost_share = own_cost(**common)
    print(f"  ars's own cost: {cost_us:.2f} us per step, {cost_share:.1%} of the time")
    row = {
        "case": label,
        "env": env_id,
        "policy": policy,
        "net_arch": net_arch,
        "workers": args.workers,
        "steps": args.steps,
        "ars own us/step": cost_us,
        "ars own share": cost_share,
    }
    for impl, values in samples.items():
        row[impl] = {"min": min(values), "median": statistics.median(values), "max": max(values)}
    for num, den in RATIOS:
        if num in samples and den in samples:
            row[f"{num}/{den}"] = statistics.median(
                a / b for a, b in zip(samples[num], samples[den])
            )
            print(f"  {num}/{den}: {row[f'{num}/{den}']:.2f}")
    return row


def write_results(rows: list[dict], args: argparse.Namespace) -> None:
    """speed.json (everything) and speed.md: the full table, and a short one for the README."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {
        "cpus": os.cpu_count(),
        "numpy": np.__version__,
        "steps": args.steps,
        "repeats": args.repeats,
    }
    (out / "speed.json").write_text(json.dumps({**meta, "rows": rows}, indent=2) + "\n")
    impls = [i for i in args.impls if any(i in r for r in rows)]
    ratios = [f"{a}/{b}" for a, b in RATIOS if any(f"{a}/{b}" in r for r in rows)]
    full = [
        "| case | "
        + " | ".join(f"{i} steps/s (min / median / max)" for i in impls)
        + " | "
        + " | ".join(ratios)
        + " | ars's own cost per step |",
        "|---" * (2 + len(impls) + len(ratios)) + "|",
    ]
    short = [
        "| case | bare | ars | ars, 2 workers | sb3-contrib | ars/sb3 | own cost |",
        "|---" * 7 + "|",
    ]
    for r in rows:
        cells = [
            f"{r[i]['min']:,.0f} / **{r[i]['median']:,.0f}** / {r[i]['max']:,.0f}" if i in r else ""
            for i in impls
        ]
        cost = f"{r['ars own us/step']:.1f} us ({r['ars own share']:.1%})"
        full.append(
            f"| {r['case']} | "
            + " | ".join(cells)
            + " | "
            + " | ".join(f"{r[k]:.2f}" if k in r else "" for k in ratios)
            + f" | {cost} |"
        )
        median = {
            i: f"{r[i]['median']:,.0f}" if i in r else ""
            for i in ("bare", "ars", "ars-async", "sb3")
        }
        short.append(
            f"| {r['case']} | {median['bare']} | {median['ars']} | {median['ars-async']} | "
            f"{median['sb3']} | {r.get('ars/sb3', float('nan')):.1f} | {cost} |"
        )
    text = "\n".join(full) + "\n\nShort form (medians, steps/s):\n\n" + "\n".join(short) + "\n"
    (out / "speed.md").write_text(text)
    print("\n" + text + f"\nwrote {out / 'speed.json'} and {out / 'speed.md'}")


if __name__ == "__main__":
    main()
