"""The ablations: each arm's episodes to the paper's threshold.

    python benchmarks/ablation.py            # results/ablation_halfcheetah*.json -> its .md
    python benchmarks/ablation.py Swimmer    # results/ablation_swimmer.json -> its .md
    python benchmarks/ablation.py sb3        # results/ablation_sb3.json -> its .md
    python benchmarks/ablation.py orthogonal # results/orthogonal.json -> its .md, .png
    python benchmarks/ablation.py tuned      # results/tuned.json -> its .md, .png

The runs come from benchmarks/learning.py (same protocol: evaluations every 50k steps,
stop at a confirmed threshold, the task's budget), one key per arm. HalfCheetah's and
Swimmer's episodes always last 1,000 steps, so episodes = timesteps / 1,000, warm-up
episodes included. A seed that never reached the threshold counts as infinitely many
episodes; the medians and quartiles treat it so, and so does the one-sided Mann-Whitney U
test of each arm against today's default (``ars:<task>-v4``): "fewer episodes than the
default". The default's and sb3-contrib's runs are those of the ten-seed table.
"""

from __future__ import annotations

import json
import math
import sys

import numpy as np
from learning import NOTES, RESULTS, THRESHOLDS, locked_folder, write_table, write_text

LENGTH, TEN_SEEDS = 1000, RESULTS / "learning10.json"
# HalfCheetah's arms added later ran beside the first; a later file's arm replaces an earlier
# one's whole (the per-step arms of benchmarks/arms.py replace those of a lost branch).
MORE = {"HalfCheetah": ("more", "per_step", "vecnormalize", "clip"), "Swimmer": ()}
CLIMB = {"HalfCheetah": (1000, 2000, 3000), "Swimmer": (100, 200, 300)}


def episodes_to_threshold(run: dict, level: float) -> float:
    """Episodes (timesteps / 1,000) at the first evaluation at ``level``, else inf."""
    hit = next((e for e in run["evaluations"] if e[2] >= level), None)
    return hit[0] / LENGTH if hit else math.inf


def falls(run: dict) -> float:
    """The share of evaluations, from the first at 2000 on, whose 10 episodes spread by more
    than 500 (std): a running gait that fell in some episodes (a fallen cheetah scores about
    -200 where a running one scores 3,500 or more)."""
    late: list = []
    for e in run["evaluations"]:
        if late or e[2] >= 2000:
            late.append(e[3] > 500)
    return float(np.mean(late)) if late else math.nan


def show(episodes: float) -> str:
    """Episodes as the tables print them; 1e18 stands for never (a quartile of infs)."""
    return "not reached" if episodes >= 1e17 else f"{episodes:,.0f}"


def climbs(runs: object, task: str) -> str:
    """The median episodes to each level of CLIMB[task], over ``runs``."""
    levels = CLIMB[task]
    return " / ".join(
        show(np.median([min(episodes_to_threshold(r, x), 1e18) for r in runs])) for x in levels
    )


def table(results: dict, task: str) -> str:
    """The Markdown table: one row per arm, the default first."""
    from scipy.stats import mannwhitneyu

    base_key, threshold, cheetah = f"ars:{task}-v4", THRESHOLDS[task], task == "HalfCheetah"
    base = {s: episodes_to_threshold(r, threshold) for s, r in results[base_key].items()}
    rows = [
        "| arm | seeds reaching | median episodes | quartiles | p (fewer than default) "
        f"| median episodes to {', '.join(map(str, CLIMB[task]))} "
        + ("| evaluations with a fall |" if cheetah else "|"),
        "|---" * (7 if cheetah else 6) + "|",
    ]
    for key, runs in sorted(results.items(), key=lambda kv: kv[0] != base_key):
        episodes = {s: episodes_to_threshold(r, threshold) for s, r in runs.items()}
        values = np.array(sorted(episodes.values()))
        big = np.where(np.isinf(values), 1e18, values)  # inf * 0 would be nan; a quartile
        q1, median, q3 = (np.percentile(big, q) for q in (25, 50, 75))  # this big: not reached
        shared = sorted(set(episodes) & set(base))  # the same seeds in both arms
        arm, base_arm = [episodes[s] for s in shared], [base[s] for s in shared]
        p = "" if key == base_key else mannwhitneyu(arm, base_arm, alternative="less").pvalue
        name = key.removeprefix(base_key + ":") if key.startswith("ars") else key.split(":")[0]
        fell = np.nanmedian([falls(r) for r in runs.values()]) if cheetah else None
        rows.append(
            f"| {'default (the paper)' if key == base_key else name} "
            f"| {np.isfinite(values).sum()}/{len(values)} | {show(median)} "
            f"| {show(q1)} to {show(q3)} | {p if p == '' else f'{p:.3f}'} "
            f"| {climbs(runs.values(), task)} |" + (f" {fell:.0%} |" if cheetah else "")
        )
    return "\n".join(rows)


def sb3_table(results: dict, task: str) -> str:
    """The sb3-contrib emulation's table: each arm of the emulation beside sb3-contrib, the
    emulation and the default, with two-sided Mann-Whitney U tests on the seeds both arms ran."""
    from scipy.stats import mannwhitneyu

    threshold, keys = THRESHOLDS[task], [k for k in results if f":{task}-v4" in k]
    refs = {"sb3-contrib": f"sb3-contrib:{task}-v4", "emulation": f"ars:{task}-v4:sb3-emulation"}
    refs["default"] = f"ars:{task}-v4"
    hits = {
        k: {s: episodes_to_threshold(r, threshold) for s, r in results[k].items()} for k in keys
    }
    order = [refs["sb3-contrib"], refs["default"], refs["emulation"]]
    rows = [
        f"| {task} arm | seeds reaching | median episodes | quartiles | p against sb3-contrib "
        "| p against the emulation | p against the default "
        f"| median episodes to {', '.join(map(str, CLIMB[task]))} |",
        "|---" * 8 + "|",
    ]
    for key in sorted(keys, key=lambda k: (order.index(k) if k in order else 3, k)):
        values = np.array(sorted(hits[key].values()))
        big = np.where(np.isinf(values), 1e18, values)
        q1, median, q3 = (np.percentile(big, q) for q in (25, 50, 75))
        ps = []
        for ref in refs.values():
            shared = sorted(set(hits[key]) & set(hits.get(ref, {})))
            if ref == key or ref not in hits or len(shared) < 2:
                ps.append("")
                continue
            a, b = [hits[key][s] for s in shared], [hits[ref][s] for s in shared]
            ps.append(f"{mannwhitneyu(a, b, alternative='two-sided').pvalue:.3f}")
        name = key.split(":", 2)[2] if key.count(":") == 2 else key.split(":")[0] + " (paper)"
        rerun = " rerun (today's learning.py)" if key.endswith(":rerun") else ""
        name = "sb3-contrib" + rerun if key.startswith("sb3-contrib") else name
        rows.append(
            f"| {name} | {np.isfinite(values).sum()}/{len(values)} | {show(median)} "
            f"| {show(q1)} to {show(q3)} | {' | '.join(ps)} "
            f"| {climbs(results[key].values(), task)} |"
        )
    return "\n".join(rows)


def diagnostics(results: dict, key: str, at: tuple = (0, 1, 2, 5, 10, 20)) -> str:
    """The emulation's per-iteration logs, medians over seeds: the share of clipped entries,
    and the merged over the exact sigma of the observations (median over the inputs)."""
    logs = [r["diagnostics"] for r in results.get(key, {}).values() if r.get("diagnostics")]
    rows = [f"| {key.split(':', 1)[1]}: after iteration | " + " | ".join(map(str, at)) + " |"]
    rows.append("|---" * (len(at) + 1) + "|")
    for column, name, form in (
        (1, "clipped entries", "{:.3%}"),
        (2, "merged / exact sigma", "{:.2f}"),
    ):
        cells = [np.median([log[i][column] for log in logs if len(log) > i]) for i in at]
        rows.append(f"| {name} | " + " | ".join(form.format(c) for c in cells) + " |")
    return "\n".join(rows)


def early(runs: dict, updates: int = 6, at: tuple = (4, 6), level: float = 1000.0) -> str:
    """The emulation's early test: each arm's HalfCheetah evaluations after 1 to ``updates``
    updates over every run it made (the short runs of ``early_sb3.json`` and the first
    evaluations of the full ones): medians, the share at ``level`` or more, and two-sided
    Mann-Whitney U tests against sb3-contrib and the emulation after the updates ``at``."""
    from scipy.stats import mannwhitneyu

    after = {
        name: np.array([[r["evaluations"][k][2] for k in range(1, updates + 1)] for r in rs])
        for name, rs in runs.items()
        if rs
    }
    when = " / ".join(map(str, at))
    rows = [
        "| HalfCheetah arm | runs | median after update "
        + ", ".join(map(str, range(1, updates + 1)))
        + f" | at {level:,.0f} after {when} | p against sb3-contrib after {when} "
        f"| p against the emulation after {when} |",
        "|---" * 6 + "|",
    ]
    for name, x in after.items():
        ps = [
            " / ".join(f"{mannwhitneyu(x[:, k - 1], after[ref][:, k - 1]).pvalue:.3f}" for k in at)
            if ref in after and ref != name
            else ""
            for ref in ("sb3-contrib", "sb3-emulation")
        ]
        rows.append(
            f"| {name} | {len(x)} | "
            + ", ".join(f"{v:,.0f}" for v in np.median(x, axis=0))
            + " | "
            + " / ".join(f"{np.mean(x[:, k - 1] >= level):.0%}" for k in at)
            + f" | {ps[0]} | {ps[1]} |"
        )
    return "\n".join(rows)


def early_runs() -> dict:
    """Every HalfCheetah run of sb3-contrib, the default and each arm, by arm:
    early_sb3.json's, the ten-seed table's and ablation_sb3.json's (all evaluate every
    64,000 steps)."""
    files = [RESULTS / n for n in ("early_sb3.json", "learning10.json", "ablation_sb3.json")]
    runs: dict = {"sb3-contrib": [], "ars (paper)": [], "sb3-emulation": []}
    for path in files:
        for key, records in json.loads(path.read_text()).items() if path.exists() else ():
            env, _, arm = key.partition(":HalfCheetah-v4")
            if env not in ("ars", "sb3-contrib") or not key.startswith(env + ":HalfCheetah"):
                continue
            name = arm[1:] or ("ars (paper)" if env == "ars" else env)
            runs.setdefault(name, [])
            runs[name] += [r for r in records.values() if len(r["evaluations"]) > 6]
    return runs


def episodes_to(run: dict, level: float) -> float:
    """The episodes run (the evaluation's own count) at the first evaluation at ``level``, else
    inf: Hopper's episodes vary in length, so timesteps are not episodes there."""
    hit = next((e for e in run["evaluations"] if e[2] >= level), None)
    return math.inf if hit is None else hit[4] if len(hit) > 4 else hit[0] / LENGTH


def reference_runs() -> dict:
    """The default's and sb3-contrib's runs under the learning10 protocol: the ten-seed table,
    and the further seeds (HalfCheetah 8 to 20, Swimmer 8 to 33)."""
    runs = json.loads(TEN_SEEDS.read_text())
    more = json.loads((RESULTS / "ablation_sb3.json").read_text())
    for impl in ("ars", "sb3-contrib"):
        for task in ("Swimmer", "Hopper", "HalfCheetah"):
            key = f"{impl}:{task}-v4"
            extra = {s: r for s, r in more.get(key, {}).items() if s not in runs.get(key, {})}
            runs.setdefault(key, {}).update(extra)
    return runs


def arm_table(results: dict, arm: str) -> str:
    """An arm's table (``ars:<task>-v4:<arm>`` keys): beside the default (the paper's
    settings) and sb3-contrib, on the seeds it ran; two-sided Mann-Whitney U on the seeds both
    ran, a seed never reaching counted as infinitely many episodes."""
    from scipy.stats import mannwhitneyu

    rows = [
        "| task | implementation | seeds | seeds reaching | median episodes | quartiles "
        "| p against the default | p against sb3-contrib | median episodes to |",
        "|---" * 9 + "|",
    ]
    for task in ("Swimmer", "Hopper", "HalfCheetah"):
        ours = results.get(f"ars:{task}-v4:{arm}", {})
        if not ours:
            continue
        keys = {arm: ours}
        for name, key in (
            ("default (paper)", f"ars:{task}-v4"),
            ("sb3-contrib", f"sb3-contrib:{task}-v4"),
        ):
            keys[name] = {s: r for s, r in REFERENCE[key].items() if s in ours}
        hits = {
            n: {s: episodes_to(r, THRESHOLDS[task]) for s, r in runs.items()}
            for n, runs in keys.items()
        }
        for name, runs in keys.items():
            values = np.array([hits[name][s] for s in sorted(runs)])
            big = np.where(np.isinf(values), 1e18, values)
            q1, median, q3 = (
                (np.percentile(big, q) for q in (25, 50, 75)) if len(big) else [1e18] * 3
            )
            ps = []
            for ref in ("default (paper)", "sb3-contrib"):
                shared = sorted(set(hits[name]) & set(hits[ref]))
                if name == ref or len(shared) < 2:
                    ps.append("")
                    continue
                a, b = [hits[name][s] for s in shared], [hits[ref][s] for s in shared]
                ps.append(f"{mannwhitneyu(a, b, alternative='two-sided').pvalue:.3f}")
            levels = CLIMB.get(task, ())[:2]
            climb = " / ".join(
                show(np.median([min(episodes_to(r, x), 1e18) for r in runs.values()]))
                for x in levels
            )
            rows.append(
                f"| {task}-v4 | {name} | {len(values)} | {np.isfinite(values).sum()}/{len(values)} "
                f"| {show(median)} | {show(q1)} to {show(q3)} | {' | '.join(ps)} "
                f"| {climb + ' (' + ', '.join(map(str, levels)) + ')' if levels else ''} |"
            )
    return "\n".join(rows)


def arm_plot(results: dict, arm: str, path: object) -> None:
    """The median evaluation return over the seeds the arm ran, against episodes, per task."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = [t for t in ("Swimmer", "Hopper", "HalfCheetah") if f"ars:{t}-v4:{arm}" in results]
    fig, axes = plt.subplots(1, len(tasks), figsize=(5 * len(tasks), 4), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        ours = results[f"ars:{task}-v4:{arm}"]
        for name, key in (
            (arm, None),
            ("default (paper)", f"ars:{task}-v4"),
            ("sb3-contrib", f"sb3-contrib:{task}-v4"),
        ):
            runs = ours if key is None else {s: r for s, r in REFERENCE[key].items() if s in ours}
            if not runs:
                continue
            grid = np.linspace(0, max(r["evaluations"][-1][4] for r in runs.values()), 200)
            curves = []
            for r in runs.values():  # a finished run keeps its last return (it stopped there)
                x = [e[4] for e in r["evaluations"]]
                curves.append(np.interp(grid, x, [e[2] for e in r["evaluations"]]))
            ax.plot(grid, np.median(curves, axis=0), label=f"{name} ({len(runs)} seeds)")
        ax.axhline(THRESHOLDS[task], color="grey", linestyle=":", linewidth=1)
        ax.set(title=f"{task}-v4", xlabel="episodes", ylabel="median evaluation return")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


REFERENCE: dict = {}
ORTHOGONAL = """Runs: `python benchmarks/learning.py --envs HalfCheetah-v4 --arm orthogonal --seeds
237 759 959 1 2 3 4 5 6 7 --results benchmarks/results/orthogonal.json` (then Hopper-v4 on the same
seeds, HalfCheetah-v4 on 8 to 20, Swimmer-v4 on the ten), the learning10 protocol, two workers;
each seed's record is committed when it ends. The default's and sb3-contrib's runs are those
of `learning10.json` and, for HalfCheetah's seeds 8 to 20, of `ablation_sb3.json`, on the
same seeds. Rebuild this section: `python benchmarks/ablation.py orthogonal`. With N = 1
(Swimmer) the arm is the paper's rule bit for bit (row 0 of a block is its Gaussian row)."""


TUNED = """Runs: `python benchmarks/learning.py --envs Swimmer-v4 --seeds 237 759 959 1 2 3 4 5 6
7 --set n_delta=3 --set n_top=1 --set learning_rate=0.058 --set delta_std=0.38 --label tuned
--results benchmarks/results/tuned.json --workers 2`, and `--envs HalfCheetah-v4 --seeds 237
759 959 1 2 ... 20 --set n_delta=21 --set n_top=8 --set learning_rate=0.066 --set
delta_std=0.05`, and `--envs Hopper-v4` on the ten with `--set n_delta=2 --set n_top=2 --set
learning_rate=0.0106 --set delta_std=0.0198`, with the same label, file and workers: the
learning10 protocol, with the best settings of `examples/tune.py`'s studies
(`tune_swimmer.db`, `tune_hopper.db`, `tune_halfcheetah.db`, each study named for its env in
lower case; tuning seeds 100 to 102, never these),
rounded. The default's and sb3-contrib's runs are `learning10.json`'s on the same seeds
(HalfCheetah's seeds 8 to 20: `ablation_sb3.json`'s). The decision rule: a tuned preset
replaces the paper's settings as `python ars.py --env TASK`'s default only where it needs
fewer episodes than they do with p < 0.05 and reaches the threshold on at least as many
seeds. Rebuild this section: `python benchmarks/ablation.py tuned`."""
ARMS = {  # an arm's runs file (benchmarks/results/<arm>.json): its heading, how it was run
    "orthogonal": ("Orthogonal directions beside the default and sb3-contrib", ORTHOGONAL),
    "tuned": ("Tuned settings beside the paper's and sb3-contrib", TUNED),
}


def main() -> None:
    """Print the ablation tables of the task named on the command line."""
    with locked_folder(RESULTS):  # no learning.py run adds a record or a table meanwhile
        tables(sys.argv[1] if len(sys.argv) > 1 else "HalfCheetah")


def tables(task: str) -> None:
    """Rebuild and print the ablation tables of ``task`` (or of the emulation: "sb3")."""
    if task in ARMS:
        path = RESULTS / f"{task}.json"
        results = json.loads(path.read_text())
        REFERENCE.update(reference_runs())
        text = arm_table(results, task)
        arm_plot(results, task, RESULTS / f"{task}.png")
        md = path.with_suffix(".md")  # learning.py's table of the runs stays on top
        top = md.read_text().partition(NOTES)[0].rstrip() if md.exists() else ""
        heading, how = ARMS[task]
        picture = f"![median learning curves]({task}.png)"
        write_text(md, f"{top}\n\n{NOTES}\n\n## {heading}\n\n{text}\n\n{picture}\n\n{how}\n")
        print(text)
        return
    if task == "sb3":
        path = RESULTS / "ablation_sb3.json"
        results, ten = json.loads(path.read_text()), json.loads(TEN_SEEDS.read_text())
        for key, runs in ten.items():  # the ten-seed table's runs, beside any added here;
            again = {s: r for s, r in results.get(key, {}).items() if s in runs}  # rerun seeds
            results[key] = {
                **runs,
                **{s: r for s, r in results.get(key, {}).items() if s not in runs},
            }
            if again:  # a seed run again today is a row of its own, not a replacement
                results[f"{key}:rerun"] = again
        text = "\n\n".join(sb3_table(results, task) for task in ("HalfCheetah", "Swimmer"))
        text += "\n\n" + diagnostics(results, "ars:HalfCheetah-v4:sb3-emulation")
        text += "\n\n" + early(early_runs())
        write_table(path.with_suffix(".md"), text)
        print(text)
        return
    if task not in MORE:
        sys.exit(f"error: no ablation of {task!r}: use one of {', '.join(MORE)}")
    path = RESULTS / f"ablation_{task.lower()}.json"
    files = [path, *(RESULTS / f"ablation_{task.lower()}_{name}.json" for name in MORE[task])]
    results = {k: v for p in files if p.exists() for k, v in json.loads(p.read_text()).items()}
    ten = json.loads(TEN_SEEDS.read_text()) if TEN_SEEDS.exists() else {}
    for key in (f"ars:{task}-v4", f"sb3-contrib:{task}-v4"):
        results.setdefault(key, {}).update(ten.get(key, {}))  # the same protocol and seeds
    text = table(results, task)
    write_table(path.with_suffix(".md"), text)
    print(text)


if __name__ == "__main__":
    main()
