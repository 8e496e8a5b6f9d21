"""Warm start: fit ARS's linear policy to demonstrations in closed form, then train.

    python examples/warm_start.py                   # CartPole: an expert, its demos, a student
    python examples/warm_start.py --env Pendulum-v1 --demos demos/ --total-timesteps 50000

or, in code (copy this file beside ars.py, or put examples/ on ``sys.path``):

    from warm_start import warm_start
    model = ars.paper_model("Hopper-v4")
    warm_start(model, "demos/")    # an .npz of arrays observations, actions; or a folder of them
    model.learn(1_000_000)

The demonstrations' observations seed V2's statistics; the policy is then the ridge
regression of the actions on the normalised observations (through ``atanh`` for squashed
Box actions, on one-hot targets for Discrete ones). It uses only ars's public pieces.
"""

from __future__ import annotations

import argparse
import os
import sys
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # ars.py of this checkout
import ars  # noqa: E402


def load_demonstrations(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """``(observations, actions)`` from a ``.npz`` trajectory or a folder of them (no pickle)."""
    path = Path(path)
    files = sorted(path.glob("*.npz")) if path.is_dir() else [path]
    if not files or not files[0].exists():
        raise FileNotFoundError(f"no .npz trajectories at {path}")
    pairs = []
    for file in files:
        if not file.is_file():  # a device is endless, a FIFO blocks
            raise ValueError(f"{file} is not a regular file: demonstrations are .npz files")
        try:
            with np.load(file, allow_pickle=False) as data:
                names = sorted(data.files)
                pairs.append((data["observations"], data["actions"]))
        except KeyError:
            message = f"must hold arrays 'observations' and 'actions'; it has {names}"
            raise ValueError(f"{file} {message}") from None
        except (OSError, EOFError, ValueError, zipfile.BadZipFile) as error:  # ValueError: pickles
            raise ValueError(
                f"{file} is not a readable .npz trajectory of plain arrays "
                f"({type(error).__name__}: {error})"
            ) from error
    try:
        return tuple(np.concatenate(arrays) for arrays in zip(*pairs))
    except ValueError as error:
        raise ValueError(f"the trajectories in {path} do not fit together: {error}") from error


def warm_start(model: ars.ARS, demonstrations: Any, ridge: float = 1e-3) -> None:
    """Fit ``model``'s linear policy to ``demonstrations`` in closed form, before training.

    ``demonstrations``: ``(observations, actions)`` arrays, or an ``.npz`` file or a folder
    of them; ``ridge``: the L2 penalty of the regression."""
    policy = model.policy
    if policy is None or policy.net_arch:
        raise ValueError(
            "warm_start fits linear policies (LinearPolicy, or MlpPolicy with net_arch=[])"
        )
    if isinstance(demonstrations, (str, os.PathLike)):
        demonstrations = load_demonstrations(demonstrations)
    ars.check_number("ridge", ridge, low=0.0)
    obs = observations_of(policy, np.asarray(demonstrations[0]))
    actions = np.asarray(demonstrations[1])
    if len(actions) != len(obs):
        raise ValueError(f"got {len(obs)} observations but {len(actions)} actions")
    if not np.isfinite(actions.astype(np.float64)).all():
        raise ValueError("the demonstrations hold non-finite values (nan or inf)")
    targets = targets_of(policy, actions)
    if policy.obs_rms is not None:  # regress on what the first layer sees: normalised inputs
        rms = policy.obs_rms = policy.obs_rms.copy().update(obs)
        obs = (obs - rms.mean) * ars.inverse_std(rms.var)
    inputs = np.hstack([obs, np.ones((len(obs), int(policy.with_bias)))])  # a column for a bias
    gram = inputs.T @ inputs + ridge * np.eye(inputs.shape[1])
    solution = np.linalg.solve(gram, inputs.T @ targets).T
    n = obs.shape[1]
    policy.load_from_vector(np.concatenate([solution[:, :n].ravel(), solution[:, n:].ravel()]))


def observations_of(policy: Any, obs: np.ndarray) -> np.ndarray:
    """The demonstrations' observations as the policy's flat float inputs, checked."""
    shape = policy.observation_space.shape
    if obs.ndim != len(shape) + 1 or obs.shape[1:] != shape or not len(obs):
        raise ValueError(
            f"demonstration observations must have shape (n >= 1, *{shape}); got {obs.shape}"
        )
    obs = ars.flattener(policy.observation_space)(obs).astype(np.float64)
    if not np.isfinite(obs).all():
        raise ValueError("the demonstrations hold non-finite values (nan or inf)")
    return obs


def targets_of(policy: Any, actions: np.ndarray) -> np.ndarray:
    """What the linear map should output for ``actions``: +-1 per Discrete action (one-hot),
    a Box's actions (through ``atanh`` where the policy squashes them), checked."""
    space = policy.action_space
    if isinstance(space, spaces.Discrete):
        index = actions.reshape(-1) - int(space.start)
        if (actions.reshape(-1) % 1 != 0).any() or index.min() < 0 or index.max() >= space.n:
            raise ValueError(
                f"demonstration actions must be integers in {space}; got values from "
                f"{actions.min()} to {actions.max()}"
            )
        return np.where(np.arange(policy.action_dim) == index[:, None], 1.0, -1.0)
    targets = actions.astype(np.float64).reshape(len(actions), -1)
    low = np.ravel(space.low).astype(np.float64)
    high = np.ravel(space.high).astype(np.float64)
    if targets.shape[1:] != low.shape or not ((low <= targets) & (targets <= high)).all():
        raise ValueError(
            f"demonstration actions must lie in {space}; got shape "
            f"{actions.shape} and values from {actions.min()} to {actions.max()}"
        )
    if not policy.squash_output:
        return targets
    scaled = (2 * targets - high - low) / (high - low)  # in [-1, 1]
    return np.arctanh(np.clip(scaled, -0.999, 0.999))


def record_demonstrations(model: Any, env_id: str, episodes: int = 5) -> tuple:
    """``(observations, actions)`` of ``model``'s deterministic episodes on ``env_id``."""
    env, observations, actions = ars.make_env(env_id), [], []
    for seed in range(episodes):
        obs, done = env.reset(seed=1000 + seed)[0], False
        while not done:
            action = model.predict(obs)[0]
            observations.append(obs)
            actions.append(action)
            obs, _, terminated, truncated, _ = env.step(action)
            done = terminated or truncated
    return np.array(observations), np.array(actions)


def main(argv: list[str] | None = None) -> None:
    """Warm-start the paper's settings for ``--env``, with a linear policy, from ``--demos``;
    train, evaluate, save.
    Without ``--demos``: train a CartPole expert, record its episodes, warm-start from them."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--env", default="CartPole-v1")
    p.add_argument("--demos", help="an .npz of arrays observations, actions; or a folder")
    p.add_argument("--total-timesteps", type=int, default=1)
    p.add_argument("--seed", type=int, default=3)
    p.add_argument("--save", help="write the trained model here")
    args = p.parse_args(argv)
    demos = args.demos
    if demos is None:
        expert = ars.ARS("LinearPolicy", args.env, n_delta=2, seed=0).learn(20_000)
        demos = record_demonstrations(expert, args.env)
        print(f"expert: mean return {ars.evaluate_policy(expert, args.env, 10)[0]:.2f}")
    model = ars.paper_model(args.env, seed=args.seed, policy="LinearPolicy", net_arch=None)
    warm_start(model, demos)
    print(f"warm start: mean return {ars.evaluate_policy(model, args.env, 10)[0]:.2f}")
    model.learn(args.total_timesteps)
    print(f"after training: mean return {ars.evaluate_policy(model, args.env, 10)[0]:.2f}")
    if args.save:
        print(f"saved {model.save(args.save)}")


if __name__ == "__main__":
    main()
