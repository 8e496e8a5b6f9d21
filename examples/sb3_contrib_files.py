"""Models saved by sb3-contrib's ARS, loaded into ars (and saved in ars's format).

    python examples/sb3_contrib_files.py theirs.zip ours.npz [--env Pendulum-v1]

    from sb3_contrib_files import load_sb3_contrib     # examples/ on sys.path, or copy it
    model = load_sb3_contrib("theirs.zip")             # an ars.ARS: predict, learn on, save

The settings and spaces come from the readable fields of sb3-contrib's ``data`` JSON (never
its pickles); where SB3 abbreviated a space's bounds (more than 1,000), ``env`` gives them.
The weights come from ``policy.pth`` through ``torch.load(weights_only=True)``, which builds
tensors and nothing else (torch is sb3-contrib's own dependency), after the member sizes are
checked against what the spaces imply. ars then checks the settings and the weights as it
checks any (types, ranges, shapes, no nan or inf). This was ``ARS.load`` on an sb3-contrib
file, with an unpickler of its own, until issue 43 made room in ars.py for its design card's
torch module; ``ARS.load`` on such a file now names this one. Public names of ars only.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import sys
import warnings
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # ars.py of this checkout
import ars  # noqa: E402

MAX_DATA_BYTES = 1 << 30  # sb3-contrib's JSON holds base64 pickles: about 6 bytes a parameter
SETTINGS = ("n_delta", "n_top", "n_eval_episodes", "zero_policy", "alive_bonus_offset", "seed")


def _space(data: Any, env_space: Any, key: str) -> spaces.Space:
    """A Box or Discrete space from SB3's readable fields, else the env's (checked against
    the shape and dtype the file names)."""
    kind = str(data.get(":type:", "")) if isinstance(data, dict) else ""
    if kind.endswith(".Discrete'>"):
        return spaces.Discrete(int(data["n"]), start=int(data.get("start", 0)))
    if not kind.endswith(".Box'>"):
        raise ValueError(f"its {key} is {kind or data!r:.80}; ars takes a Box or Discrete")
    bounds = str(data.get("low")) + str(data.get("high"))
    if "..." not in bounds:  # SB3 abbreviates more than 1,000 bounds
        shape, dtype = tuple(data["_shape"]), np.dtype(data["dtype"])
        numbers = lambda k: np.array(re.findall(r"[^][\s]+", str(data[k])), float).astype(dtype)
        low, high = numbers("low"), numbers("high")
        return spaces.Box(low.reshape(shape), high.reshape(shape), shape, dtype)
    if env_space is None:
        raise ValueError(f"its {key} bounds are abbreviated: pass env= to take the env's")
    saved = [str(data.get("_shape")), str(data.get("dtype"))]
    if saved != [str(list(env_space.shape)), str(env_space.dtype)]:
        raise ValueError(f"its {key} is {saved[1]} of shape {saved[0]}; the env's is {env_space}")
    return env_space


def load_sb3_contrib(path: str | Path, env: Any = None) -> ars.ARS:
    """The ``ars.ARS`` of a file of sb3-contrib's ``ARS.save``, with its settings, counters and
    weights; ``env`` (an id, env or function) to train on and for abbreviated spaces. A
    ValueError names the file and what is wrong with it."""
    torch = ars.require("torch", 'pip install "ars-numpy[torch]"')
    if Path(path).exists() and not Path(path).is_file():  # a device is endless, a FIFO blocks
        raise ValueError(f"{path} is not a regular file: sb3-contrib's ARS.save writes one")
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
            if not {"data", "policy.pth"} <= names:
                raise ValueError(f"not a file of sb3-contrib's ARS.save: {sorted(names)[:8]}")
            if archive.getinfo("data").file_size > MAX_DATA_BYTES:
                raise ValueError("its data is larger than any model's")
            data = json.loads(archive.read("data"))
            if not isinstance(data, dict):
                raise ValueError("its data is not a JSON object")
            made = None if env is None else ars.make_env(env)
            obs_space, action_space = (
                _space(data.get(k), getattr(made, k, None), k) for k in ars.SPACE_KEYS
            )
            linear = "Linear policy" in str(data.get("policy_class"))  # its readable __doc__
            given = data.get("policy_kwargs") if isinstance(data.get("policy_kwargs"), dict) else {}
            keys = ("with_bias", "squash_output") + ("net_arch", "activation_fn") * (not linear)
            kwargs = {k: given[k] for k in keys if k in given}
            if "activation_fn" in kwargs:  # a pickled class: its name is in the readable text
                found = re.search(r"\.(\w+)'>", str(kwargs["activation_fn"]))
                kwargs["activation_fn"] = found.group(1).lower() if found else "?"
            kwargs.setdefault("with_bias", not linear)  # sb3-contrib's default
            cls = ars.ARSLinearPolicy if linear else ars.ARSPolicy
            policy = cls(obs_space, action_space, **kwargs)  # checked, and capped, as any
            budget = 8 * policy.n_params + (1 << 20)  # the weights, and the pickle's text
            if archive.getinfo("policy.pth").file_size > budget:
                raise ValueError(f"its policy.pth is larger than {policy.n_params:,} weights")
            weights = io.BytesIO(archive.read("policy.pth"))
        try:  # torch.save writes a zip: its members' sizes are checked before anything inflates
            with zipfile.ZipFile(weights) as inner:
                if sum(info.file_size for info in inner.infolist()) > budget:
                    raise ValueError(f"holds more than {policy.n_params:,} weights")
            weights.seek(0)
            state = torch.load(weights, map_location="cpu", weights_only=True)  # tensors alone
        except Exception as error:  # a damaged pickle raises anything: one line
            message = " ".join(str(error).split())[:200]
            raise ValueError(f"policy.pth is not a readable weights file ({message})") from None
        floats = lambda v: torch.is_tensor(v) and v.is_floating_point()  # not complex, not int
        if not (isinstance(state, dict) and all(floats(v) for v in state.values())):
            raise ValueError("its policy.pth holds something other than float tensors")
        settings = {k: data[k] for k in SETTINGS if k in data}
        for name, key in (("learning_rate", "lr_schedule"), ("delta_std", "delta_std_schedule")):
            schedule = data.get(key) if isinstance(data.get(key), dict) else {}
            value = re.search(r"val=([^,)\s]{1,40})", str(schedule.get("value_schedule", "")))
            if value is None:  # a schedule of another kind is a pickle: never read
                message = f"{path}: {name} is a schedule ars does not read; using the default"
                warnings.warn(message, stacklevel=2)
            else:
                settings[name] = float(value.group(1))  # a constant's (nan: refused by ars)
        model = ars.ARS(policy, made, **settings)
        model.set_parameters({"policy": {k: v.double().numpy() for k, v in state.items()}})
        counters = data.get("num_timesteps", 0), data.get("_n_updates", 0)
        if not all(ars.is_int(n) and 0 <= n < 2**63 for n in counters):
            raise ValueError(f"its counters must be integers >= 0; got {counters}")
        model.num_timesteps, model.n_updates = counters
        return model
    except (ValueError, TypeError, KeyError, RuntimeError, OSError, zipfile.BadZipFile) as error:
        message = " ".join(str(error).split())[:300]
        raise ValueError(f"{path}: {message}") from None


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("source", help="a .zip of sb3-contrib's ARS.save")
    parser.add_argument("target", help="where to save it in ars's format (.npz or .zip)")
    parser.add_argument("--env", help="the env id, for abbreviated spaces (and to record it)")
    args = parser.parse_args()
    try:
        saved = load_sb3_contrib(args.source, args.env).save(args.target)
    except (ValueError, ImportError) as error:
        sys.exit(f"error: {error}")
    print(f"saved {saved}")
