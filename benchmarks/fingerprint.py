"""Same seed, same weights: hashes of the final weights of three fixed runs.

    python benchmarks/fingerprint.py            # compare with benchmarks/results/fingerprint.json
    python benchmarks/fingerprint.py CartPole-v1 Pendulum-v1   # only these
    python benchmarks/fingerprint.py --record   # write the current hashes there

A change that only moves or renames code must leave every hash as it was. A change to
the random stream (directions, env seeds, statistics) changes them, and says so.

NumPy's OpenBLAS picks its kernels by CPU, and an AVX-512 kernel rounds a matrix product
differently from an AVX2 one: on x86-64 this script pins OpenBLAS to its Haswell (AVX2)
kernels, so the hashes are the same on every x86-64 machine with AVX2, not only on the one
that wrote them (with the same NumPy and OpenBLAS). This takes effect only where NumPy is not
yet imported: run it as a script.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import sys
from pathlib import Path

if platform.machine().lower() in ("x86_64", "amd64"):
    os.environ["OPENBLAS_CORETYPE"] = "Haswell"
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import ars  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "fingerprint.json"
RUNS = {  # env id: (timesteps, overrides of the paper's settings)
    "CartPole-v1": (20_000, {}),
    "Pendulum-v1": (20_000, {}),
    "Hopper-v4": (100_000, {}),
}


def fingerprint(env_id: str, steps: int, overrides: dict) -> str:
    """sha256 of the parameters and observation statistics after ``steps`` timesteps, seed 0."""
    model = ars.paper_model(env_id, seed=0, **overrides).learn(steps)
    digest = hashlib.sha256(model.policy.parameters_to_vector().tobytes())
    if model.policy.obs_rms is not None:
        digest.update(model.policy.obs_rms.mean.tobytes() + model.policy.obs_rms.var.tobytes())
    return digest.hexdigest()


def main() -> int:
    """Train the fingerprint cases and compare or record their weights."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("env_ids", nargs="*", help=f"some of {', '.join(RUNS)} (default: all)")
    parser.add_argument("--record", action="store_true", help="store the current hashes")
    args = parser.parse_args()
    if set(args.env_ids) - set(RUNS):
        parser.error(f"unknown env ids {sorted(set(args.env_ids) - set(RUNS))}: use {list(RUNS)}")
    if args.record and args.env_ids:
        parser.error("--record writes all three hashes: give no env ids")
    runs = {env_id: RUNS[env_id] for env_id in args.env_ids or RUNS}
    hashes = {env_id: fingerprint(env_id, steps, kw) for env_id, (steps, kw) in runs.items()}
    if args.record:
        RESULTS.write_text(json.dumps(hashes, indent=1) + "\n")
        print(json.dumps(hashes, indent=1))
        return 0
    stored = json.loads(RESULTS.read_text())
    for env_id, digest in hashes.items():
        print(
            f"{env_id:<12} {digest[:16]}  {'same' if stored.get(env_id) == digest else 'CHANGED'}"
        )
    return 0 if all(stored.get(env_id) == digest for env_id, digest in hashes.items()) else 1


if __name__ == "__main__":
    sys.exit(main())
