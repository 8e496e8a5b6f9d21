"""How often a HalfCheetah policy falls: it flips onto its back (torso angle past 90 degrees).

    python benchmarks/flips.py 30 benchmarks/results/models/HalfCheetah-v4-237.npz

Runs each saved model deterministically for N episodes (env seeds 5000 onwards, apart from
training's and the benchmark's evaluations) and prints how many episodes it spent mostly
upside down, and the returns of those and of the upright ones.
"""

from __future__ import annotations

import sys
import warnings

import numpy as np

import ars


def main() -> None:
    """Print, per saved model, the episodes spent upside down and the returns."""
    warnings.filterwarnings("ignore")
    n, paths = int(sys.argv[1]), sys.argv[2:]
    for path in paths:
        model, env = ars.ARS.load(path, env="HalfCheetah-v4"), ars.make_env("HalfCheetah-v4")
        returns, flipped = [], []
        for episode in range(n):
            obs, _ = env.reset(seed=5000 + episode)
            total, upside_down, done = 0.0, [], False
            while not done:
                obs, reward, terminated, truncated, _ = env.step(model.predict(obs, True)[0])
                upside_down.append(np.cos(env.unwrapped.data.qpos[2]) < 0)  # the torso's angle
                total, done = total + reward, terminated or truncated
            returns.append(total)
            flipped.append(np.mean(upside_down) > 0.5)
        returns, flipped = np.array(returns), np.array(flipped)
        upright = returns[~flipped].mean() if (~flipped).any() else float("nan")
        fallen = returns[flipped].mean() if flipped.any() else float("nan")
        print(
            f"{path}: {flipped.sum()}/{n} episodes flipped (mean return {fallen:.0f}); "
            f"upright mean {upright:.0f}"
        )


if __name__ == "__main__":
    main()
