"""rl-baselines3-zoo, with ars in sb3-contrib's place for ``--algo ars``.

    python examples/rl_zoo.py train --algo ars --env Hopper-v4
    python examples/rl_zoo.py enjoy --algo ars --env Hopper-v4 --folder logs/ --no-render
    python examples/rl_zoo.py train --algo ars --env CartPole-v1 -optimize --n-trials 20

Everything else is rl-baselines3-zoo's own (its ars.yml settings, callbacks, VecNormalize,
Optuna); ``pip install rl_zoo3 requests pandas`` brings it.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # ars.py of this checkout
import ars  # noqa: E402

INSTALL = "pip install rl_zoo3 requests pandas"

if __name__ == "__main__":  # rl-zoo's workers import this file: they must not run it
    command = sys.argv.pop(1) if len(sys.argv) > 1 else None
    if command not in ("train", "enjoy"):
        sys.exit("usage: python examples/rl_zoo.py train|enjoy [rl-baselines3-zoo's flags]")
    ars.require("rl_zoo3.utils", INSTALL).ALGOS["ars"] = ars.ARS  # every module reads it
    getattr(ars.require(f"rl_zoo3.{command}", INSTALL), command)()
