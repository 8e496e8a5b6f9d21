"""The HalfCheetah ablation of issue 19: each arm's episodes to the paper's threshold.

    python benchmarks/ablation.py   # reads results/ablation_halfcheetah*.json, writes the .md

The runs come from benchmarks/learning.py (same protocol: evaluations every 50k steps,
stop at a confirmed 3430, a 12.5M-step budget), one key per arm. HalfCheetah's episodes
always last 1,000 steps, so episodes = timesteps / 1,000, warm-up episodes included. A seed
that never reached the threshold counts as infinitely many episodes; the medians and
quartiles treat it so, and so does the one-sided Mann-Whitney U test of each arm against
today's default (``ars:HalfCheetah-v4``): "fewer episodes than the default".
"""

from __future__ import annotations

import json
import math

import numpy as np
from learning import NOTES, RESULTS, THRESHOLDS

PATH, BASE, LENGTH = RESULTS / "ablation_halfcheetah.json", "ars:HalfCheetah-v4", 1000
# Arms added later, run beside the first; a later file's arm replaces an earlier one's whole
# (the per-step arms of benchmarks/arms.py replace those of a lost branch). The default's and
# sb3-contrib's seeds 4 to 7 come from the ten-seed table's runs.
MORE = [
    RESULTS / f"ablation_halfcheetah_{name}.json"
    for name in ("more", "per_step", "vecnormalize", "clip")
]
TEN_SEEDS = RESULTS / "learning10.json"


def episodes_to_threshold(run: dict, level: float = THRESHOLDS["HalfCheetah"]) -> float:
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


def table(results: dict) -> str:
    from scipy.stats import mannwhitneyu

    base = {s: episodes_to_threshold(r) for s, r in results[BASE].items()}
    rows = [
        "| arm | seeds reaching | median episodes | quartiles | p (fewer than default) "
        "| median episodes to 1000, 2000, 3000 | evaluations with a fall |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, runs in sorted(results.items(), key=lambda kv: kv[0] != BASE):
        episodes = {s: episodes_to_threshold(r) for s, r in runs.items()}
        values = np.array(sorted(episodes.values()))
        big = np.where(np.isinf(values), 1e18, values)  # inf * 0 would be nan; a quartile
        q1, median, q3 = (np.percentile(big, q) for q in (25, 50, 75))  # this big: not reached
        shared = sorted(set(episodes) & set(base))  # the same seeds in both arms
        arm, base_arm = [episodes[s] for s in shared], [base[s] for s in shared]
        p = "" if key == BASE else mannwhitneyu(arm, base_arm, alternative="less").pvalue
        show = lambda x: "not reached" if x >= 1e17 else f"{x:,.0f}"
        climbs = [
            np.median([min(episodes_to_threshold(r, level), 1e18) for r in runs.values()])
            for level in (1000, 2000, 3000)
        ]
        name = key.removeprefix(BASE + ":") if key.startswith("ars") else key.split(":")[0]
        rows.append(
            f"| {'default (the paper)' if key == BASE else name} "
            f"| {np.isfinite(values).sum()}/{len(values)} | {show(median)} "
            f"| {show(q1)} to {show(q3)} | {p if p == '' else f'{p:.3f}'} "
            f"| {' / '.join(show(x) for x in climbs)} "
            f"| {np.nanmedian([falls(r) for r in runs.values()]):.0%} |"
        )
    return "\n".join(rows)


def main() -> None:
    results = {
        k: v for p in (PATH, *MORE) if p.exists() for k, v in json.loads(p.read_text()).items()
    }
    ten = json.loads(TEN_SEEDS.read_text()) if TEN_SEEDS.exists() else {}
    for key in (BASE, "sb3-contrib:HalfCheetah-v4"):
        results.setdefault(key, {}).update(ten.get(key, {}))  # the same protocol and seeds
    text, md = table(results), PATH.with_suffix(".md")
    notes = md.read_text().partition(NOTES)[2] if md.exists() else ""
    md.write_text(text + "\n" + (f"\n{NOTES}{notes}" if notes else ""))
    print(text)


if __name__ == "__main__":
    main()
