"""Plot a run's progress.csv (training return and evaluations) to a PNG.

    python ars.py --env Hopper-v4   # writes runs/Hopper-v4-<date>-<time>-seed<seed>/progress.csv
    python examples/plot_progress.py runs/Hopper-v4-<date>-<time>-seed<seed>

Needs matplotlib (pip install -e ".[plot]").
"""

import argparse
import csv
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def column(rows: list, key: str) -> tuple:
    """The (timesteps, values) of a column of progress.csv's rows."""
    pairs = [(int(r["time/total_timesteps"]), float(r[key])) for r in rows if r.get(key)]
    return tuple(zip(*pairs)) if pairs else ((), ())


def main() -> None:
    """Plot a run's progress.csv to a PNG."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("run_dir", help="a folder holding progress.csv")
    parser.add_argument("--out", help="the PNG to write (default: RUN_DIR/progress.png)")
    args = parser.parse_args()
    run_dir = Path(args.run_dir)
    with (run_dir / "progress.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    fig, ax = plt.subplots(figsize=(7, 4))
    steps, train = column(rows, "rollout/ep_rew_mean")
    ax.plot(
        [s / 1e6 for s in steps], train, label="training return (with perturbations)", alpha=0.7
    )
    steps, evaluation = column(rows, "eval/mean_reward")
    if steps:
        ax.plot(
            [s / 1e6 for s in steps],
            evaluation,
            "o-",
            label="evaluation (deterministic, no alive bonus)",
        )
    ax.set(xlabel="timesteps (millions)", ylabel="return", title=run_dir.name)
    ax.legend()
    fig.tight_layout()
    out = Path(args.out or run_dir / "progress.png")
    fig.savefig(out, dpi=100)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
