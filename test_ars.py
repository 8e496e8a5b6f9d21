"""Tests for ars.py: real environments, real processes, numbers checked against the paper."""

from __future__ import annotations

import contextlib
import copy
import csv
import functools
import gc
import importlib
import importlib.util
import io
import json
import math
import multiprocessing
import os
import pickle
import platform
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import warnings
import zipfile
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import ars
from ars import ARS, ARSLinearPolicy, ARSPolicy, AsyncEval, RunningMeanStd

sys.path.insert(0, str(Path(__file__).resolve().parent / "examples"))
import video as video_example  # noqa: E402  (likewise)
from executor_eval import ExecutorEval  # noqa: E402
from warm_start import record_demonstrations, warm_start  # noqa: E402  (likewise)

from conftest import (
    CARTPOLE,
    COMMON,
    GIF_PROBE,
    HERE,
    PENDULUM,
    STRIPES,
    BadEnv,
    CodedWalk,
    CountingEnv,
    CrashEnv,
    EndlessEnv,
    ImageEnv,
    NoisyWalk,
    OptionsEnv,
    QuadraticBandit,
    Scaled,
    SeedRecorder,
    SlowEnv,
    StepRecorder,
    StuckEnv,
    StuckOnCue,
    WideEnv,
    _Acting,
    _actor,
    _alive,
    _arms,
    _assert_all_dead,
    _assert_same_weights,
    _blocker,
    _children,
    _cli,
    _clip,
    _crafted,
    _episodes,
    _failing_env,
    _frozen_jobs,
    _peak_rss_of,
    _pendulum_model,
    _pth,
    _Recording,
    _rows,
    _run,
    _same_files,
    _sb3_callbacks,
    _sb3_contrib_beside_the_emulation,
    _sb3_file,
    _seed,
    _sleep_then,
    _spaces,
    _train,
    _vector_envs,
    _weights,
)

# === The core: statistics, the policy, streams, rollouts, one iteration, train() =================


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_running_mean_std_merge_is_exact_for_any_split(seed):
    rng = np.random.default_rng(seed)
    data = rng.normal(5.0, 3.0, (257, 6)) * rng.uniform(0.01, 100, 6)
    cuts = np.sort(
        np.concatenate([rng.integers(0, len(data), 12), [0, 0, 1, 5, 5, 6, len(data) - 1]])
    )
    chunks = np.split(data, cuts)  # includes empty and single-row chunks
    assert any(len(c) == 0 for c in chunks) and any(len(c) == 1 for c in chunks)
    parts = [RunningMeanStd((6,)).update(c) for c in chunks]
    sequential = RunningMeanStd((6,))
    for p in parts:
        sequential.combine(p)
    while len(parts) > 1:  # a tree of merges, as parallel workers would do
        parts = [
            parts[i].copy().combine(parts[i + 1]) if i + 1 < len(parts) else parts[i]
            for i in range(0, len(parts), 2)
        ]
    for rms in (sequential, parts[0]):
        assert rms.count == len(data)
        np.testing.assert_allclose(rms.mean, data.mean(axis=0), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(rms.var, data.var(axis=0), rtol=1e-12, atol=1e-12)


def test_running_mean_std_empty_and_copy():
    rms = RunningMeanStd((3,))
    assert rms.count == 0 and (rms.mean == 0).all() and (rms.var == 1).all()
    rms.update(np.empty((0, 3)))
    assert rms.count == 0
    copy = rms.copy().update(np.ones((2, 3)))
    assert rms.count == 0 and copy.count == 2 and (copy.var == 0).all()
    single = RunningMeanStd((3,)).update(np.array([[1.0, 2.0, 3.0]]))
    np.testing.assert_array_equal(single.mean, [1, 2, 3])


def test_linear_policy_is_the_papers_formula():
    obs_space = spaces.Box(-10, 10, (5,), np.float32)
    act_space = spaces.Box(-1.0, 2.0, (3,), np.float32)
    policy = ARSLinearPolicy(obs_space, act_space)
    assert policy.n_params == 15 and not policy.with_bias and not policy.squash_output
    rng = np.random.default_rng(0)
    M = rng.normal(size=(3, 5))
    policy.load_from_vector(M.ravel())
    x = rng.normal(size=5)
    np.testing.assert_allclose(policy.predict(x)[0], np.clip(M @ x, -1.0, 2.0), atol=1e-12)
    # V2: a = M diag(Sigma)^(-1/2) (x - mu); inputs with variance below 1e-8 are zeroed.
    data = rng.normal(2.0, 3.0, (50, 5))
    data[:, 2] = 7.0
    policy.obs_rms = RunningMeanStd((5,)).update(data)
    std = data.std(axis=0)
    scaled = np.where(std**2 < 1e-8, 0.0, (x - data.mean(axis=0)) / np.where(std > 0, std, 1))
    np.testing.assert_allclose(policy.predict(x)[0], np.clip(M @ scaled, -1.0, 2.0), atol=1e-10)


def test_mlp_population_forward_matches_single_and_actor():
    obs_space = spaces.Box(-1, 1, (2, 3), np.float32)  # any shape is flattened
    act_space = spaces.Box(np.array([-2.0, 0.0]), np.array([2.0, 1.0]), dtype=np.float64)
    policy = ARSPolicy(obs_space, act_space, net_arch=[8, 4], activation_fn="tanh")
    policy.obs_rms = RunningMeanStd((6,)).update(np.random.default_rng(1).normal(size=(20, 6)))
    rng = np.random.default_rng(2)
    population = rng.normal(size=(5, policy.n_params))
    obs = rng.normal(size=(5, 7, 2, 3))
    batch = policy.forward(obs, population)
    assert batch.shape == (5, 7, 2)
    for p in range(5):
        np.testing.assert_allclose(policy.forward(obs[p], population[p]), batch[p], atol=1e-12)
        act = policy.actor(population[p], policy.obs_rms)
        for b in range(7):
            np.testing.assert_allclose(act(obs[p, b]), batch[p, b], atol=1e-12)
    assert policy.forward(obs[:, 0], population).shape == (5, 2)
    assert ((batch >= act_space.low) & (batch <= act_space.high)).all()


def test_squash_and_clip_and_discrete_actions():
    obs_space = spaces.Box(-1, 1, (2,), np.float32)
    box = spaces.Box(np.array([-2.0, 0.0]), np.array([2.0, 1.0]), dtype=np.float64)
    squash = ARSPolicy(obs_space, box, net_arch=[], with_bias=True, squash_output=True)
    squash.load_from_vector(np.concatenate([np.zeros(4), [0.0, 100.0]]))
    np.testing.assert_allclose(
        squash.predict(np.zeros(2))[0], [0.0, 1.0]
    )  # tanh(0) -> centre, tanh(100) -> high
    clip = ARSPolicy(obs_space, box, net_arch=[], with_bias=True, squash_output=False)
    clip.load_from_vector(np.concatenate([np.zeros(4), [-5.0, 0.5]]))
    np.testing.assert_allclose(clip.predict(np.zeros(2))[0], [-2.0, 0.5])
    disc = ARSPolicy(obs_space, spaces.Discrete(3, start=1), net_arch=[])
    disc.load_from_vector(np.concatenate([np.zeros(6), [0.0, 2.0, 1.0]]))
    action, state = disc.predict(np.zeros(2))
    assert action == 2 and state is None
    assert disc.predict(np.zeros((4, 2)))[0].tolist() == [2, 2, 2, 2]


@pytest.mark.parametrize("n_delta,n_top", [(6, 6), (6, 2)])  # V1 and V1-t
def test_update_is_algorithm_2(n_delta, n_top):
    """One iteration against the paper's update, computed here from the returns in closed form."""
    alpha, nu, seed, offset = 0.05, 0.1, 11, 0.25
    model = ARS(
        "LinearPolicy",
        QuadraticBandit(),
        n_delta=n_delta,
        n_top=n_top,
        learning_rate=alpha,
        delta_std=nu,
        seed=seed,
        alive_bonus_offset=offset,
    )
    theta0 = np.random.default_rng(3).normal(size=6)
    model.policy.load_from_vector(theta0)
    model.learn(1)
    deltas = [ars.direction(seed, 0, k, 6) for k in range(n_delta)]  # iteration 0's directions

    def ret(theta):  # one step, reward -||Mx - target||^2, plus the per-step offset
        return (
            -np.sum((theta.reshape(2, 3) @ QuadraticBandit.x - QuadraticBandit.target) ** 2)
            + offset
        )

    r_plus = [ret(theta0 + nu * d) for d in deltas]
    r_minus = [ret(theta0 - nu * d) for d in deltas]
    order = sorted(range(n_delta), key=lambda k: -max(r_plus[k], r_minus[k]))[:n_top]
    sigma_r = np.std([r_plus[k] for k in order] + [r_minus[k] for k in order])
    expected = theta0 + alpha / (n_top * sigma_r) * sum(
        (r_plus[k] - r_minus[k]) * deltas[k] for k in order
    )
    np.testing.assert_allclose(
        model.policy.parameters_to_vector(), expected, rtol=1e-12, atol=1e-12
    )
    assert model.num_timesteps == 2 * n_delta


class DtypeEnv(gym.Env):
    """Uniform observations in a Box of the given bounds and dtype."""

    def __init__(self, low=-1.0, high=1.0, dtype=np.float64):
        self.observation_space = spaces.Box(low, high, (2,), dtype)
        self.action_space = spaces.Box(-1.0, 1.0, (1,))

    def _obs(self):
        space = self.observation_space
        fraction = self.np_random.uniform(0, 1, 2)
        return np.asarray(space.low + fraction * (space.high - space.low), space.dtype)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self._obs(), {}

    def step(self, action):
        return self._obs(), float(action[0]), False, True, {}


@pytest.mark.parametrize(
    "low,high,dtype",
    [(np.iinfo(np.int64).min, np.iinfo(np.int64).max, np.int64), (-1, 1, np.float16)],
)
def test_box_observations_numpy_can_hold_train_and_save(low, high, dtype, tmp_path):
    for v2 in (False, True):
        model = ARS("LinearPolicy", DtypeEnv(low, high, dtype), n_delta=2, normalize_obs=v2)
        model.learn(40)
        loaded = ARS.load(model.save(tmp_path / "m"))
        assert loaded.observation_space == model.observation_space
        assert np.array_equal(
            loaded.policy.parameters_to_vector(), model.policy.parameters_to_vector()
        )


@pytest.mark.skipif(not hasattr(np, "float128"), reason="no float128 on this platform")
def test_float128_spaces_are_refused_at_construction_in_one_line():
    with pytest.raises(
        NotImplementedError, match=r"^ARS computes in float64; got Box\(.*float128\)"
    ):
        ARS("LinearPolicy", DtypeEnv(dtype=np.float128))


@pytest.mark.parametrize("scale", [1e-200, 1.0, 1e200])
def test_the_step_is_right_for_returns_of_any_size(scale):
    """sigma_R and the step from returns of 1e-200 and 1e200 (squares under- and overflow)."""
    network = ars.Network(spaces.Box(-1, 1, (3,)), spaces.Box(-1, 1, (2,)), "LinearPolicy", {})
    n, b, alpha, seed = 4, 2, 0.1, 3
    r = np.array([3.0, -1.0, 2.5, 0.5, 1.0, 2.0, -0.5, 4.0])  # r+ of k = 0..3, then r-

    def evaluate(it, jobs):
        return [ars.Result(np.array([r[j.candidate] * scale]), np.array([1]), None) for j in jobs]

    hp = dict(ars.DEFAULTS, n_delta=n, n_top=b, learning_rate=alpha, delta_std=0.05, seed=seed)
    update = ars.iteration(np.zeros(6), None, evaluate, network, 0, hp)
    top = [3, 0]  # max(r+, r-) = 3, 2, 2.5, 4: the best two
    sigma = np.std([r[k] for k in top] + [r[n + k] for k in top])  # of the unscaled returns
    step = sum((r[k] - r[n + k]) * ars.direction(seed, 0, k, 6) for k in top)
    np.testing.assert_allclose(update.theta, alpha / (b * sigma) * step, rtol=1e-12)  # any scale
    assert update.sigma_r == pytest.approx(sigma * scale, rel=1e-12)


class IntegerStates(gym.Env):
    """A float64 Box whose states come as int64 arrays: 3 + t and 5, for 5 steps."""

    observation_space = spaces.Box(-10, 10, (2,), np.float64)
    action_space = spaces.Box(-1, 1, (1,))

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([3, 5], dtype=np.int64), {}

    def step(self, action):
        self.t += 1
        return np.array([3 + self.t, 5], dtype=np.int64), 1.0, self.t >= 5, False, {}


@pytest.mark.parametrize("n_envs", [1, 2])
def test_integer_states_of_a_float_box_are_counted_by_their_values(n_envs):
    """V2's statistics of int64 states in a float64 Box: their values (3 to 7, and 5), never
    their bytes read as float64; one env or two side by side."""
    env = IntegerStates() if n_envs == 1 else gym.vector.SyncVectorEnv([IntegerStates] * n_envs)
    model = ARS("LinearPolicy", env, n_delta=1, normalize_obs=True, seed=0, max_episode_steps=5)
    model.learn(100)
    np.testing.assert_array_equal(model.policy.obs_rms.mean, [5.0, 5.0])
    np.testing.assert_array_equal(model.policy.obs_rms.var, [2.0, 0.0])


def test_observation_statistics_frozen_then_merged_exactly():
    model = ARS("LinearPolicy", NoisyWalk(), n_delta=3, normalize_obs=True, seed=5)
    recorder = StepRecorder(NoisyWalk(), model)
    model.set_env(recorder)
    model.learn(1)  # one iteration: 6 rollouts of 5 steps
    assert len(recorder.acted_on) == 30
    assert all(count == 0 for count, _ in recorder.stats_seen)  # frozen during the iteration
    first = np.array(recorder.acted_on)
    rms = model.policy.obs_rms
    assert rms.count == 30
    np.testing.assert_allclose(rms.mean, first.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(rms.var, first.var(axis=0), rtol=1e-12)
    model.learn(
        1, reset_num_timesteps=False
    )  # the second iteration sees the first's statistics only
    assert all(count == 30 for count, _ in recorder.stats_seen[30:])
    everything = np.array(recorder.acted_on)
    assert model.policy.obs_rms.count == 60
    np.testing.assert_allclose(model.policy.obs_rms.mean, everything.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(model.policy.obs_rms.var, everything.var(axis=0), rtol=1e-12)


def test_one_seed_gives_bit_identical_weights():
    a, b, c = _train(7), _train(7), _train(8)
    assert np.array_equal(a.policy.parameters_to_vector(), b.policy.parameters_to_vector())
    assert np.array_equal(a.policy.obs_rms.mean, b.policy.obs_rms.mean) and np.array_equal(
        a.policy.obs_rms.var, b.policy.obs_rms.var
    )
    assert not np.array_equal(a.policy.parameters_to_vector(), c.policy.parameters_to_vector())


def test_env_seeds_follow_seed_iteration_direction_episode():
    model = ARS("LinearPolicy", NoisyWalk(), n_delta=3, n_eval_episodes=2, seed=4)
    recorder = StepRecorder(NoisyWalk())
    model.set_env(recorder)
    model.learn(1)
    # candidates run as +delta_0, -delta_0, +delta_1, ...; with common random numbers the
    # two candidates of a direction share their env seeds
    expected = [_seed(4, 0, k, e) for k in range(3) for _ in "+-" for e in range(2)]
    assert recorder.seeds == expected
    assert len(set(recorder.seeds)) == 6
    model = ARS("LinearPolicy", NoisyWalk(), n_delta=3, seed=4, common_random_numbers=False)
    recorder = StepRecorder(NoisyWalk())
    model.set_env(recorder)
    model.learn(1)
    assert len(set(recorder.seeds)) == 6


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_rollouts_match_stepping_through_every_wrapper(env_id):
    """run_job steps past gymnasium's pass-through wrappers: the episodes must not change."""
    model = ARS("LinearPolicy", env_id, n_delta=2, seed=0).learn(
        20_000 if env_id == "CartPole-v1" else 2000
    )
    act, seeds = _actor(model.policy), [11, 12, 13]
    returns, lengths, visited = _episodes(ars.make_env(env_id), model.policy, seeds)
    env, expected, observations = ars.make_env(env_id), [], []
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        total, steps, done = 0.0, 0, False
        while not done:
            observations.append(obs)
            obs, reward, terminated, truncated, _ = env.step(act(obs))
            total, steps, done = total + reward, steps + 1, terminated or truncated
        expected.append((total, steps))
    assert [(float(r), int(n)) for r, n in zip(returns, lengths)] == expected
    assert env_id != "CartPole-v1" or 500 in lengths  # the time limit, enforced without TimeLimit
    np.testing.assert_allclose(
        visited.mean, np.mean(observations, axis=0, dtype=np.float64), rtol=1e-12
    )
    np.testing.assert_allclose(
        visited.var, np.var(observations, axis=0, dtype=np.float64), rtol=1e-12
    )
    assert visited.count == len(observations)


@pytest.mark.parametrize("what,v2", [("reward", True), ("observation", True), ("observation", 0)])
def test_non_finite_values_raise_and_leave_the_weights(what, v2):
    env = BadEnv(what)
    model = ARS("LinearPolicy", env, n_delta=3, normalize_obs=bool(v2), seed=2)
    model.learn(30)
    before = model.get_parameters()["policy"]
    env.poison_seed = _seed(2, model.n_updates, 1, 0)  # candidate 1 (and 4, its mirror)
    with pytest.raises(
        FloatingPointError, match=rf"iteration {model.n_updates}, candidate 1 .*non-finite {what}"
    ):
        model.learn(30, reset_num_timesteps=False)
    after = model.get_parameters()["policy"]
    for key in before:
        assert np.array_equal(before[key], after[key])


def test_a_nan_observation_stops_v1_with_discrete_actions_too():
    class NanAtStep5(gym.Wrapper):
        def reset(self, **kwargs):
            self.t = 0
            return self.env.reset(**kwargs)

        def step(self, action):
            self.t += 1
            obs, reward, terminated, truncated, info = self.env.step(action)
            return (obs * np.nan if self.t == 5 else obs), reward, terminated, truncated, info

    model = ARS("LinearPolicy", NanAtStep5(gym.make("CartPole-v1")), n_delta=2, seed=0)
    with pytest.raises(FloatingPointError, match=r"iteration 0, candidate 0 .*non-finite observ"):
        model.learn(100)  # argmax of NaN is 0: without the check, training would go on
    assert not model.policy.parameters_to_vector().any()

    def all_finite(rows, dtype):
        return np.isfinite(ars.flat_rows(rows, dtype)).all()

    rows = [np.ones(3, np.float32)] * 4 + [np.ones(3)]  # mixed dtypes take the slow path
    f32 = np.dtype(np.float32)
    assert all_finite(rows, f32) and not all_finite([*rows, np.array([1.0, np.inf, 0])], f32)
    assert all_finite([[1, 2], [3, 4]], f32) and not all_finite([[1.0, np.nan]], f32)
    ints = [np.zeros(3, np.int64), np.array([1.0, np.nan, 2.0])]  # an int first row: still read
    assert not all_finite(ints, np.dtype(np.float64))  # as the space's floats
    rows = [np.array([0.1, 2.5, -3.0], np.float32), np.array([7.0, 8.0, 9.0], np.float32)]
    np.testing.assert_array_equal(ars.flat_rows(rows, f32), np.concatenate(rows))  # the fast way
    assert (
        ars.flat_rows([np.zeros(3), *rows], f32).tolist()
        == [0.0] * 3 + np.concatenate(rows).tolist()
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cartpole_reaches_500_within_the_zoo_budget(seed):
    model = ARS(
        "LinearPolicy",
        "CartPole-v1",
        n_delta=2,
        n_top=2,
        learning_rate=0.02,
        delta_std=0.05,
        seed=seed,
    )
    model.learn(50_000)
    mean, std = ars.evaluate_policy(model, "CartPole-v1", n_eval_episodes=10, seed=100 + seed)
    assert mean == 500.0, f"seed {seed}: mean return {mean} +/- {std}"


@pytest.mark.slow
@pytest.mark.parametrize("env_id", ["Hopper-v4", "Hopper-v5"])
def test_mujoco_smoke(env_id, tmp_path):
    pytest.importorskip("mujoco")
    model = ARS(
        "LinearPolicy",
        env_id,
        n_delta=2,
        n_top=1,
        learning_rate=0.01,
        delta_std=0.025,
        alive_bonus_offset=-1,
        normalize_obs=True,
        seed=0,
    )
    model.learn(1500)
    assert model.policy.obs_rms.count == model.num_timesteps
    loaded = ARS.load(model.save(tmp_path / "hopper"))
    obs = model.gym_env.reset(seed=0)[0]
    np.testing.assert_array_equal(loaded.predict(obs)[0], model.predict(obs)[0])


@pytest.mark.skipif(
    platform.machine().lower() not in ("x86_64", "amd64")
    or "avx2" not in (Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""),
    reason="the hashes are those of OpenBLAS's x86-64 Haswell (AVX2) kernels",
)
def test_weights_are_those_of_the_fingerprints():
    """Same seed, same weights as when benchmarks/results/fingerprint.json was recorded: a
    change that moves code keeps them; one that changes the random stream must say so there.
    A new process, as the script pins OpenBLAS's kernels before NumPy is imported."""
    script = Path(__file__).parent / "benchmarks" / "fingerprint.py"  # Hopper's: run it alone
    done = subprocess.run(
        [sys.executable, str(script), "CartPole-v1", "Pendulum-v1"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_the_core_alone_trains_with_the_same_weights_as_ars(tmp_path):
    """Cut ars.py at "end of the core": what is left imports with NumPy and gymnasium alone
    and trains CartPole (V1) and Pendulum (V2, b < N), bit for bit as ARS(...).learn does."""
    lines = (HERE / "ars.py").read_text().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if "end of the core" in line) + 1
    assert lines[cut - 1].startswith("#")
    (tmp_path / "ars_core.py").write_text("".join(lines[:cut]))
    code = (
        "import sys, numpy as np, ars_core\n"
        "hp = dict(n_delta=4, n_top=2, delta_std=0.1, normalize_obs=True, seed=5)\n"
        "for env, kw in (('CartPole-v1', dict(n_delta=2, seed=3)), ('Pendulum-v1', hp)):\n"
        "    theta, rms, network = ars_core.train(env, 3000, **kw)\n"
        "    network.actor(theta, rms)(np.zeros(network.obs_dim))\n"
        "    stats = [] if rms is None else [rms.mean.tolist(), rms.var.tolist()]\n"
        "    print(repr([theta.tolist(), stats]))\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('cloudpickle', 'ars')))\n"
        "for settings, _ in BAD_SETTINGS:\n"
        "    try:\n"
        "        ars_core.train('CartPole-v1', 100, **settings)\n"
        "    except ValueError as error:\n"
        "        print(error)\n"
    )
    bad = f"import math\nBAD_SETTINGS = {BAD_SETTINGS!r}\n".replace("inf", "math.inf")
    bad = bad.replace("nan", "math.nan")
    blocked = _blocker(tmp_path, ["cloudpickle", "torch", "ars"])
    result = _run(["-c", bad + code], tmp_path, env=blocked)
    assert result.returncode == 0, result.stderr
    *core, modules = result.stdout.strip().splitlines()[: -len(BAD_SETTINGS)]
    assert modules == "[]"
    refusals = result.stdout.strip().splitlines()[-len(BAD_SETTINGS) :]
    for (settings, message), line in zip(BAD_SETTINGS, refusals):  # the core's own messages
        with pytest.raises(ValueError) as full:
            ars.train("CartPole-v1", 100, **settings)
        assert line == str(full.value) and line.startswith(message)
    for line, (env, kw) in zip(
        core,
        (
            ("CartPole-v1", dict(n_delta=2, seed=3)),
            (
                "Pendulum-v1",
                {"n_delta": 4, "n_top": 2, "delta_std": 0.1, "normalize_obs": True, "seed": 5},
            ),
        ),
    ):
        model = ARS("LinearPolicy", env, **kw).learn(3000)
        rms = model.policy.obs_rms
        stats = [] if rms is None else [rms.mean.tolist(), rms.var.tolist()]
        assert line == repr([model.policy.parameters_to_vector().tolist(), stats]), env


# Issue 43: a setting meets the same fate at every door. The eight cases of the issue, then
# the rest of check_settings' rules: (settings, the flags that give them, the one-line message).
BAD_SETTINGS = [
    ({"learning_rate": -0.1}, "learning_rate must be a number >= 0; got -0.1"),
    ({"delta_std": 0}, "delta_std must be a positive number; got 0"),
    ({"n_top": 0}, "n_top must be an integer from 1 to 1,000,000; got 0"),
    ({"n_delta": 0}, "n_delta must be an integer from 1 to 1,000,000; got 0"),
    ({"n_delta": 2.5}, "n_delta must be an integer from 1 to 1,000,000; got 2.5"),
    ({"n_eval_episodes": 0}, "n_eval_episodes must be an integer from 1 to 1,000,000; got 0"),
    ({"alive_bonus_offset": math.inf}, "alive_bonus_offset must be a finite number; got inf"),
    ({"learning_rate": math.nan}, "learning_rate must be a number >= 0; got nan"),
    ({"delta_std": -1}, "delta_std must be a positive number; got -1"),
    ({"n_top": 1.5}, "n_top must be an integer from 1 to 1,000,000; got 1.5"),
    ({"n_delta": 10**7}, "n_delta must be an integer from 1 to 1,000,000; got 10000000"),
    ({"seed": -1}, "seed must be an integer from 0 to 9,223,372,036,854,775,807; got -1"),
    ({"max_episode_steps": 0}, "max_episode_steps must be an integer from 1 to"),
    ({"normalize_obs": 1}, "normalize_obs must be True or False; got 1"),
    ({"n_delta": 2.0}, "n_delta must be an integer from 1 to 1,000,000; got 2.0"),
    ({"alive_bonus_offset": 10**400}, "alive_bonus_offset must be a finite number; got 1000"),
]


def _flags(settings):
    """The command line's flags for ``settings`` (numbers as Python writes them)."""
    return [x for k, v in settings.items() for x in (f"--{k.replace('_', '-')}", repr(v))]


def _file_with(path, settings):
    """A model file saved by ars, its settings then edited by hand."""
    ARS("LinearPolicy", "CartPole-v1", n_delta=2, seed=0).save(path)
    with np.load(path) as data:
        arrays = {k: data[k] for k in data.files}
    meta = json.loads(str(arrays["metadata"]))
    meta["hparams"].update(settings)
    arrays["metadata"] = np.array(json.dumps(meta))
    np.savez(path, **arrays)
    return path


@pytest.mark.parametrize("settings,message", BAD_SETTINGS, ids=lambda x: str(x)[:40])
def test_a_bad_setting_meets_the_same_fate_at_every_door(settings, message, tmp_path, capsys):
    """train(), ARS() and an assignment to a model, a saved file and the command line: each
    refuses with the one message of check_settings (a file's names the file first)."""
    with pytest.raises(ValueError) as train_door:
        ars.train("CartPole-v1", 100, **settings)
    assert str(train_door.value).startswith(message)
    with pytest.raises(ValueError) as model_door:
        ARS("LinearPolicy", "CartPole-v1", **settings)
    assert str(model_door.value) == str(train_door.value)
    model = ARS("LinearPolicy", "CartPole-v1")
    for name, value in settings.items():
        with pytest.raises(ValueError) as assignment:
            setattr(model, name, value)
        assert str(assignment.value) == str(train_door.value)
    path = _file_with(tmp_path / "model.npz", settings)
    with pytest.raises(ValueError) as file_door:
        ARS.load(path)
    assert str(file_door.value) == f"{path}: {train_door.value}"
    if settings != {"normalize_obs": 1}:  # a switch's flag takes no value: argparse's own
        run_dir = tmp_path / "run"
        flags = ["--env", "CartPole-v1", "--total-timesteps", "100", "--run-dir", str(run_dir)]
        assert ars.main(flags + _flags(settings)) == 2
        assert capsys.readouterr().err == f"error: {train_door.value}\n"
        assert not run_dir.exists() or not any(run_dir.iterdir())


BAD_POLICY_OPTIONS = [  # policy, policy_kwargs, the core's message
    ("LinearPolicy", {"net_arch": [8]}, "policy_kwargs ['net_arch']: LinearPolicy's are"),
    ("MlpPolicy", {"net_arch": [0]}, "net_arch must be a list of layer sizes >= 1; got [0]"),
    ("MlpPolicy", {"net_arch": [8.0]}, "net_arch must be a list of layer sizes >= 1; got [8.0]"),
    ("MlpPolicy", {"activation_fn": "gelu"}, "activation_fn must be one of ['relu', 'tanh'"),
    ("MlpPolicy", {"with_bias": 1}, "with_bias must be True or False; got 1"),
    ("MlpPolicy", {"net_arch": [4000, 4000]}, "parameters: ars takes up to 10,000,000"),
    ("MlpPolicy", [64], "policy_kwargs must be a dict or None; got [64]"),
]


@pytest.mark.parametrize("policy,options,message", BAD_POLICY_OPTIONS)
def test_bad_policy_options_meet_the_same_fate_at_every_door(policy, options, message, tmp_path):
    """train(), ARS() (by name or class), a policy's constructor, a file and the command line
    refuse a policy's bad options with the core's one message."""
    doors = [
        lambda: ars.train("CartPole-v1", 100, policy=policy, policy_kwargs=options),
        lambda: ARS(policy, "CartPole-v1", policy_kwargs=options),
        lambda: ARS(ars.POLICY_CLASSES[policy], "CartPole-v1", policy_kwargs=options),
    ]
    if isinstance(options, dict) and set(options) <= set(ars.POLICIES[policy]):  # keywords
        env = gym.make("CartPole-v1")
        policy_class = ars.POLICY_CLASSES[policy]
        doors.append(lambda: policy_class(env.observation_space, env.action_space, **options))
    for door in doors:
        with pytest.raises(ValueError) as refusal:
            door()
        assert message in str(refusal.value) and "\n" not in str(refusal.value)
    path = tmp_path / "model.npz"
    ARS("MlpPolicy", "CartPole-v1", policy_kwargs={"net_arch": [2]}, seed=0).save(path)
    with np.load(path) as data:
        arrays = {k: data[k] for k in data.files}
    meta = json.loads(str(arrays["metadata"]))
    meta.update(policy=policy, policy_kwargs=options)
    np.savez(path, **{**arrays, "metadata": np.array(json.dumps(meta))})
    with pytest.raises(ValueError, match=re.escape(f"{path}: ")) as refusal:
        ARS.load(path)
    big = "parameters" in message  # a file's cap counts weights, before anything is built
    assert (message if not big else "weights: ars takes up to") in str(refusal.value)
    if isinstance(options, dict) and set(options) == {"net_arch"}:
        sizes = ",".join(map(str, options["net_arch"]))
        flags = ["--policy", policy, "--net-arch", sizes, "--total-timesteps", "100"]
        result = _run(["ars.py", *flags, "--run-dir", str(tmp_path / "run")], HERE)
        assert result.returncode == 2 and message in result.stderr, result.stderr


def test_policy_settings_after_the_policy_is_built_are_refused_and_none_seed_is_kept():
    model = ARS("LinearPolicy", "CartPole-v1", seed=3)
    for name, value in (("policy_kwargs", {"with_bias": True}), ("zero_policy", False)):
        with pytest.raises(ValueError, match=f"{name} shapes a policy when it is built"):
            setattr(model, name, value)
    model.set_random_seed(None)  # SB3's: None changes nothing
    assert model.seed == 3
    model.set_random_seed(5)
    assert model.seed == 5 == model.hparams["seed"]


def test_the_command_line_reads_settings_as_written(tmp_path, capsys):
    """--n-delta 2.0 is refused as n_delta=2.0 is; a seed of 20 digits keeps every digit."""
    flags = ["--env", "CartPole-v1", "--total-timesteps", "100", "--run-dir"]
    assert ars.main([*flags, str(tmp_path / "a"), "--n-delta", "abc"]) == 2
    assert "n_delta must be an integer from 1 to 1,000,000; got 'abc'" in capsys.readouterr().err
    seed = 2**63 - 2
    assert ars.main([*flags, str(tmp_path / "b"), "--seed", str(seed), "--eval-freq", "100"]) == 0
    assert json.loads((tmp_path / "b" / "config.json").read_text())["seed"] == seed


def test_n_top_above_n_delta_is_clamped_with_one_warning_at_every_door(
    tmp_path, capsys, monkeypatch
):
    """The paper's b is at most N; sb3-contrib clamps with a warning, so ars does the same at
    every door: the same warning, and b = N in effect (the same weights as n_top=2). Python's
    default filters here, whatever the environment running the tests sets."""
    monkeypatch.delenv("PYTHONWARNINGS", raising=False)
    monkeypatch.setattr(warnings, "filters", [])
    warnings.simplefilter("default")
    warning = "n_top=99 is larger than n_delta=2; using n_delta"
    clamped = dict(n_delta=2, n_top=2, seed=1)
    with pytest.warns(UserWarning, match=warning):
        theta = ars.train("CartPole-v1", 500, **{**clamped, "n_top": 99})[0]
    assert np.array_equal(theta, ars.train("CartPole-v1", 500, **clamped)[0])
    with pytest.warns(UserWarning, match=warning):
        assert ARS("LinearPolicy", "CartPole-v1", n_delta=2, n_top=99).n_top == 2
    model = ARS("LinearPolicy", "CartPole-v1", n_delta=8, n_top=8)
    with pytest.warns(UserWarning, match="n_top=8 is larger than n_delta=2; using n_delta"):
        model.n_delta = 2
    assert model.n_top == 2 and model.hparams["n_top"] == 2
    path = _file_with(tmp_path / "model.npz", {"n_delta": 2, "n_top": 99})
    with pytest.warns(UserWarning, match=warning):
        assert ARS.load(path).n_top == 2
    run_dir = tmp_path / "run"
    flags = ["--env", "CartPole-v1", "--total-timesteps", "100", "--run-dir", str(run_dir)]
    capsys.readouterr()
    assert ars.main(flags + ["--n-delta", "2", "--n-top", "99", "--eval-episodes", "1"]) == 0
    assert f"warning: {warning}\n" in capsys.readouterr().err  # the command line's one line
    assert json.loads((run_dir / "config.json").read_text())["n_top"] == 2
    assert ARS.load(run_dir / "model.npz").n_top == 2
    flags[-1] = str(tmp_path / "script")  # run as a script: one line, as an error is
    result = _run([str(HERE / "ars.py"), *flags, "--n-delta", "2", "--n-top", "99"], tmp_path)
    assert result.returncode == 0 and result.stderr == f"warning: {warning}\n"


def test_ars_py_alone_with_only_core_packages(tmp_path):
    shutil.copy(HERE / "ars.py", tmp_path / "ars.py")
    code = (
        "import ars, sys; ars.ARS('LinearPolicy', 'CartPole-v1', n_delta=2, seed=0).learn(2000); "
        "print(sorted(k for k in ('torch', 'tqdm', 'mujoco') if k in sys.modules))"
    )
    result = _run(
        ["-c", code], tmp_path, env=_blocker(tmp_path, ["torch", "tqdm", "mujoco", "pytest"])
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_an_endless_env_is_an_error_unless_episodes_are_capped():
    with pytest.raises(RuntimeError, match=r"ran 100,000 steps without ending.*max_episode_steps="):
        ARS("LinearPolicy", EndlessEnv(), n_delta=1, seed=0).learn(1000)
    model = ARS("LinearPolicy", EndlessEnv(), n_delta=1, seed=0, max_episode_steps=50).learn(1000)
    assert {e["l"] for e in model.ep_info_buffer} == {50}


def test_memory_stays_bounded_however_long_the_episode():
    import tracemalloc

    class LongImageEnv(ImageEnv):
        def step(self, action):
            obs, reward, terminated, _, info = super().step(action)
            return (
                obs,
                reward,
                terminated,
                self.t >= 1000,
                info,
            )  # 1000 x 21 kB observations: 170 MB as float64

    env, policy = LongImageEnv(), ARSLinearPolicy(ImageEnv.observation_space, ImageEnv.action_space)
    tracemalloc.start()
    for track in (True, False):
        it, jobs = ars.fixed_jobs(policy.network(), None, np.zeros(policy.n_params), [[1]])
        it = it._replace(track_obs=track, network=_Acting(it.network, _actor(policy)))
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        _, lengths, visited = ars.run_job(env, it, jobs[0])
        peak = tracemalloc.get_traced_memory()[1] - before
        assert lengths[0] == 1000 and (visited.count if track else visited) == (
            1000 if track else None
        )
        assert peak < (24 << 20 if track else 1 << 20), (
            peak
        )  # one 8 MB chunk and its temporaries; V1: nothing
    tracemalloc.stop()


def test_chunked_statistics_equal_those_of_all_observations():
    env, policy = ImageEnv(), ARSLinearPolicy(ImageEnv.observation_space, ImageEnv.action_space)
    recorder = StepRecorder(env)
    _, lengths, visited = _episodes(recorder, policy, range(40))  # 160 rows, chunks of 49
    everything = np.array(recorder.acted_on)
    assert visited.count == len(everything) == lengths.sum()
    np.testing.assert_allclose(visited.mean, everything.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(visited.var, everything.var(axis=0), rtol=1e-10)


def test_workers_regenerate_the_learners_directions_bit_for_bit():
    model = ARS("LinearPolicy", QuadraticBandit(), n_delta=3, delta_std=0.1, seed=11)
    theta = np.random.default_rng(3).normal(size=6)
    model.policy.load_from_vector(theta)
    recording = _Recording(QuadraticBandit())
    model.learn(6, async_eval=recording)
    for k in range(3):
        delta = np.random.default_rng(
            np.random.SeedSequence(11, spawn_key=(ars.DIRECTIONS, 0, k))
        ).standard_normal(6)
        assert np.array_equal(recording.seen[(0, k)], theta + 0.1 * delta)
        assert np.array_equal(recording.seen[(0, 3 + k)], theta - 0.1 * delta)


STRICT_ENVS = '''
import gymnasium as gym
import numpy as np
from gymnasium import spaces


class Strict(gym.Env):
    """Asserts that every action is in its space, as many custom envs do."""

    def __init__(self, action_space, obs_dtype="float32"):
        self.action_space = action_space
        self.observation_space = spaces.Box(-10, 10, (3,), np.dtype(obs_dtype))

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation_space.sample().clip(-1, 1), {}

    def step(self, action):
        assert self.action_space.contains(action), (action, getattr(action, "dtype", None))
        obs = self.np_random.uniform(-1, 1, 3).astype(self.observation_space.dtype)
        return obs, float(np.sum(action)), False, False, {}


ACTIONS = {
    "Float16": spaces.Box(-1, 1, (2,), np.float16),
    "Float32": spaces.Box(-1, 1, (2,), np.float32),
    "Float64": spaces.Box(-1, 1, (2,), np.float64),
    "Unbounded32": spaces.Box(-np.inf, np.inf, (2,), np.float32),
    "Unbounded16": spaces.Box(-np.inf, np.inf, (2,), np.float16),
    "Grid32": spaces.Box(-1, 1, (2, 2), np.float32),
    "Discrete": spaces.Discrete(3, start=-1),
}
for name, space in ACTIONS.items():
    for obs in ("float32", "float64"):
        gym.register(
            f"Strict{name}-{obs}-v0",
            lambda space=space, obs=obs: Strict(space, obs),
            max_episode_steps=8,
        )
'''


@pytest.fixture
def strict_envs(tmp_path, monkeypatch):
    """A module of envs that assert ``action_space.contains(action)`` at every step, in the
    current folder, as a user's own; returns their ids."""
    (tmp_path / "strictenvs.py").write_text(STRICT_ENVS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    module = importlib.import_module("strictenvs")
    return [f"Strict{name}-{obs}-v0" for name in module.ACTIONS for obs in ("float32", "float64")]


@pytest.mark.slow
def test_every_door_hands_envs_actions_of_their_action_space(strict_envs, tmp_path):
    """Box actions of float16, float32 and float64 (bounded or not, of two axes) and Discrete
    with a start, through ARS, train(), AsyncEval and the command line: the env's own
    ``contains`` holds at every step."""
    for env_id in strict_envs:
        squash = "Unbounded" not in env_id and "Discrete" not in env_id
        for policy, options in [("LinearPolicy", None), ("MlpPolicy", {"net_arch": [4]})]:
            options = options if squash or policy == "LinearPolicy" else {"squash_output": False}
            ARS(policy, f"strictenvs:{env_id}", n_delta=2, policy_kwargs=options, seed=0).learn(64)
        ars.train(f"strictenvs:{env_id}", 64, n_delta=2, normalize_obs=True, seed=1)
        env = gym.make(f"strictenvs:{env_id}")
        action = ARS("LinearPolicy", env, seed=0).predict(env.reset(seed=0)[0])[0]
        assert env.action_space.contains(action)
    with AsyncEval([lambda: gym.make("strictenvs:StrictFloat16-float64-v0")] * 2) as workers:
        env_id = "strictenvs:StrictFloat16-float64-v0"
        ARS("LinearPolicy", env_id, n_delta=3, seed=0).learn(100, async_eval=workers)
    for workers in ("0", "2"):
        args = ["--env", "strictenvs:StrictFloat32-float32-v0", "--n-delta", "2", "--workers"]
        done = _cli(tmp_path, *args, workers, "--total-timesteps", "64", "--run-dir", workers)
        assert done.returncode == 0, done.stderr


def test_actions_keep_float64_where_the_space_is_float64_and_round_in_bounds():
    """float64 spaces get the very arrays of before (the fingerprints hold); a float32 or
    float16 space gets its dtype, the clip or tanh's bounds exact in it."""
    for dtype in (np.float16, np.float32, np.float64):
        space = spaces.Box(-0.3, 0.7, (2,), dtype)
        for squash in (False, True):
            network = ars.Network(spaces.Box(-1, 1, (1,)), space, "LinearPolicy", None)
            network.squash_output = squash
            actions = network.to_action()(np.array([[1e9, -1e9], [0.1, -0.2]]))
            assert actions.dtype == dtype and actions.shape == (2, 2)
            assert space.contains(actions[0]) and space.contains(actions[1])
            np.testing.assert_array_equal(actions[0], [space.high[0], space.low[1]])
    network = ars.Network(spaces.Box(-1, 1, (1,)), spaces.Discrete(3, start=-1), "MlpPolicy", None)
    assert network.to_action()(np.array([0.0, 0.0, 5.0])) == 1


def test_train_refuses_dict_and_tuple_observations_as_every_door_does():
    box = spaces.Box(-1, 1, (2,), np.float32)
    for space in (spaces.Dict({"a": box}), spaces.Tuple([box])):
        env = gym.make("CartPole-v1")
        env.observation_space = space
        messages = []
        for door in (
            functools.partial(ars.train, env, 10),
            functools.partial(ARS, "LinearPolicy", env),
        ):
            with pytest.raises(NotImplementedError) as error:
                door()
            messages.append(str(error.value))
        assert messages[0] == messages[1] and "FlattenObservation flattens it" in messages[0]

    class Mission(spaces.Space):  # a space of an env's own, as minigrid's MissionSpace
        pass

    env = gym.make("CartPole-v1")
    env.observation_space = spaces.Dict({"image": box, "mission": Mission()})
    with pytest.raises(NotImplementedError, match="FlattenObservation cannot flatten all of it"):
        ARS("LinearPolicy", env)


# === The API: ARSPolicy and ARS, settings, lit_sb3's and SB3's habits ===========================


def test_unsupported_spaces_are_clear_errors():
    box = spaces.Box(-1, 1, (2,), np.float32)
    with pytest.raises(
        NotImplementedError, match="Box, Discrete, MultiDiscrete and MultiBinary observation.*Dict"
    ):
        ARSPolicy(spaces.Dict({"a": box}), box)
    with pytest.raises(NotImplementedError, match="Box and Discrete actions.*MultiDiscrete"):
        ARSPolicy(box, spaces.MultiDiscrete([2, 3]))
    with pytest.raises(ValueError, match="unbounded"):
        ARSPolicy(box, spaces.Box(-np.inf, np.inf, (2,)), squash_output=True)
    with pytest.raises(ValueError, match="activation_fn"):
        ARSPolicy(box, box, activation_fn="swish")
    policy = ARSLinearPolicy(box, box)
    with pytest.raises(ValueError, match="shape"):
        policy.predict(np.zeros(3))
    with pytest.raises(ValueError, match="shape"):
        policy.load_from_vector(np.zeros(5))
    with pytest.raises(NotImplementedError, match="observation spaces.*Tuple"):
        ARS("LinearPolicy", "Blackjack-v1")


def test_policy_aliases_and_kwargs():
    model = ARS(
        "MlpPolicy",
        "Pendulum-v1",
        policy_kwargs=dict(net_arch=[16], activation_fn="tanh", with_bias=False),
    )
    assert (
        type(model.policy) is ARSPolicy
        and model.policy.net_arch == [16]
        and not model.policy.with_bias
    )
    assert model.policy.n_params == 3 * 16 + 16 * 1
    model = ARS("LinearPolicy", "Pendulum-v1", policy_kwargs=dict(with_bias=True))
    assert type(model.policy) is ARSLinearPolicy and model.policy.n_params == 3 + 1
    assert ARS(ARSLinearPolicy, "CartPole-v1").policy.n_params == 8
    with pytest.raises(ValueError, match="LinearPolicy"):
        ARS("CnnPolicy", "CartPole-v1")


def test_the_docs_checkpoint_recipe_runs_as_written(tmp_path):
    """docs/files.md: ``ARS.load(checkpoint)`` then ``learn(total - model.num_timesteps,
    reset_num_timesteps=False)``, no env given, continues bit for bit."""
    total = 1200
    whole = ARS("LinearPolicy", "Pendulum-v1", n_delta=2, normalize_obs=True, seed=4)
    whole.learn(total)
    part = ARS("LinearPolicy", "Pendulum-v1", n_delta=2, normalize_obs=True, seed=4)
    part.learn(600, checkpoint_interval=1, default_root_dir=tmp_path)
    model = ARS.load(tmp_path / "checkpoint.npz")
    model.learn(total - model.num_timesteps, reset_num_timesteps=False)
    _assert_same_weights(model, whole)
    assert model.num_timesteps == whole.num_timesteps


class VectorReward(gym.Wrapper):
    """A multi-objective env's rewards: a vector a step."""

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, np.array([reward, -reward]), terminated, truncated, info


class WrongShape(gym.ObservationWrapper):
    """Observations one element short of what the space says."""

    def observation(self, obs):
        return obs[:-1]


class WrongLater(gym.Wrapper):
    """Steps' observations one element short of what the space says (or of ``shape``);
    resets' right."""

    def __init__(self, env, shape=None):
        super().__init__(env)
        self.shape = shape

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        obs = obs[:-1] if self.shape is None else np.zeros(self.shape)
        return obs, reward, terminated, truncated, info


def test_a_vector_reward_or_a_wrong_observation_is_named_in_one_line():
    """A vector reward names its shape and a scalarising wrapper; an observation of another
    shape than its space's names both, whichever runs the episodes."""
    with pytest.raises(ValueError, match=r"rewards have shape \(2,\).*LinearReward"):
        ARS("LinearPolicy", VectorReward(gym.make("Pendulum-v1")), n_delta=1).learn(10)
    with pytest.raises(
        ValueError, match=r"Pendulum-v1's observation has shape \(2,\) where .*\(3,\)"
    ):
        ARS("LinearPolicy", WrongShape(gym.make("Pendulum-v1")), n_delta=1).learn(10)
    later = r"Pendulum-v1's observation has shape \(2,\) where .* has \(3,\) \(step 1 of the"
    side_by_side = gym.vector.SyncVectorEnv([lambda: WrongLater(gym.make("Pendulum-v1"))] * 2)
    for env in (WrongLater(gym.make("Pendulum-v1")), side_by_side):
        with pytest.raises(ValueError, match=later):
            ARS("LinearPolicy", env, n_delta=1).learn(10)
    for shape in [(3, 1), ()]:  # shapes a policy's product would take, or fail on, unnamed
        env = WrongLater(gym.make("Pendulum-v1"), shape)
        with pytest.raises(ValueError, match=rf"has shape {re.escape(str(shape))} where .*step"):
            ARS("LinearPolicy", env, n_delta=1).learn(10)
    empty = gym.make("Pendulum-v1")
    empty.observation_space = spaces.Box(-1.0, 1.0, (0,))
    with pytest.raises(ValueError, match=r"observation space Box.* has no elements to act on"):
        ARS("LinearPolicy", empty)
    empty.observation_space = spaces.Dict({})
    with pytest.raises(NotImplementedError, match=r"got Dict\(\) \(it has no elements to act on"):
        ARS("LinearPolicy", empty)


def test_a_file_of_another_sb3_algorithm_is_said_not_to_be_an_ars_model(tmp_path):
    """A PPO file is refused as what it is, without a word about its settings or weights."""
    from stable_baselines3 import PPO

    PPO("MlpPolicy", "CartPole-v1", n_steps=64, batch_size=64).save(tmp_path / "ppo")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning about the settings it does not have
        with pytest.raises(ValueError, match=r"ppo.zip: not an ARS model \(a Stable-Baselines3"):
            ARS.load(tmp_path / "ppo.zip")


def test_nan_actions_from_huge_noise_blame_the_settings_not_the_env():
    """nu = 1e300 on an MLP makes NaN actions, then NaN rewards: the error names the
    candidate's parameters and the settings, not the env."""
    model = ARS("MlpPolicy", "Pendulum-v1", n_delta=1, delta_std=1e300, seed=0)
    with np.errstate(all="ignore"), pytest.raises(FloatingPointError) as error:
        model.learn(400)
    assert "its parameters reach" in str(error.value) and "delta_std 1e+300" in str(error.value)
    assert "the env is not at fault" in str(error.value) and model.n_updates == 0


def test_hyper_parameter_checks():
    with pytest.warns(UserWarning, match="n_top=9 is larger than n_delta=4"):
        model = ARS("LinearPolicy", "CartPole-v1", n_delta=4, n_top=9)
    assert model.n_top == 4
    assert ARS("LinearPolicy", "CartPole-v1", device="auto").policy is not None
    with pytest.raises(ValueError, match="seed"):
        ARS("LinearPolicy", "CartPole-v1", seed=-1)
    with pytest.raises(ValueError, match="no env to train on"):
        ARS("LinearPolicy").learn(10)
    with pytest.raises(TypeError, match="gymnasium.Env"):
        ARS("LinearPolicy", env=42)
    assert (
        ARS("LinearPolicy", "CartPole-v1", n_delta=3, learning_rate=0.1).hparams["learning_rate"]
        == 0.1
    )


@pytest.mark.slow
def test_sb3_contrib_documented_example_with_only_the_import_changed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    from ars import ARS as ImportedARS  # was: from sb3_contrib import ARS

    model = ImportedARS("LinearPolicy", "Pendulum-v1", verbose=1)
    model.learn(total_timesteps=10000, log_interval=4)
    model.save("ars_pendulum")
    del model
    model = ImportedARS.load("ars_pendulum")
    action, _states = model.predict(np.zeros(3), deterministic=True)
    assert (
        action.shape == (1,)
        and action.dtype == np.float32
        and (tmp_path / "ars_pendulum.zip").exists()
    )


def test_schedules_get_progress_remaining_and_continue_across_learn_calls():
    seen = []

    def lr(progress):
        seen.append(progress)
        return 0.02 * progress

    model = ARS(
        "LinearPolicy",
        QuadraticBandit(),
        n_delta=2,
        learning_rate=lr,
        delta_std=lambda p: 0.05,
        seed=0,
    )
    model.learn(40)  # 4 steps per iteration: progress 1, 0.9, ..., 0.1
    np.testing.assert_allclose(seen, np.linspace(1, 0.1, 10))
    seen.clear()
    model.learn(40, reset_num_timesteps=False)  # total becomes 80: progress 0.5 .. 0.05
    assert model.num_timesteps == 80
    np.testing.assert_allclose(seen, np.linspace(0.5, 0.05, 10))
    model.learn(8)  # reset: counting starts over
    assert model.num_timesteps == 8


def test_evaluate_candidates_returns_one_return_per_candidate():
    model = ARS("LinearPolicy", QuadraticBandit(), n_delta=2, seed=0, alive_bonus_offset=-1)
    weights = np.zeros((3, 6))
    weights[1, 0] = 0.3
    returns = model.evaluate_candidates(weights, None, None)
    expected = [
        -np.sum((w.reshape(2, 3) @ QuadraticBandit.x - QuadraticBandit.target) ** 2) - 1
        for w in weights
    ]
    np.testing.assert_allclose(returns, expected)
    with pytest.raises(ValueError, match="shape"):
        model.evaluate_candidates(np.zeros((3, 5)), None, None)
    assert model.num_timesteps == 3  # its steps are counted, as sb3-contrib counts them


def test_evaluate_candidates_runs_here_beside_sb3_contribs_async_eval():
    """sb3-contrib's AsyncEval (send_jobs, get_results, seed) runs nothing, as in learn()."""

    class Sb3ContribAsyncEval:
        def send_jobs(self, *args):
            raise AssertionError("ars seeds each episode: its rollouts run in this process")

        get_results = seed = send_jobs

    model = ARS("LinearPolicy", QuadraticBandit(), n_delta=2, seed=0)
    weights = np.ones((2, 6))
    here = model.evaluate_candidates(weights, async_eval=Sb3ContribAsyncEval())
    np.testing.assert_array_equal(here, model.evaluate_candidates(weights))


def test_paper_model_takes_an_mlp_of_no_hidden_layer_and_the_users_policy_over_the_presets():
    assert ars.paper_model("Pendulum-v1", net_arch=[]).policy.net_arch == []
    assert ars.paper_model("Pendulum-v1").policy.net_arch == [16]  # the preset's
    mine = ars.paper_model("Pendulum-v1", policy_kwargs={"net_arch": [8]})
    assert mine.policy.net_arch == [8]  # the user's options, over the preset's layers
    linear = ars.paper_model("Pendulum-v1", policy="LinearPolicy")  # the MLP's layers not forced
    assert linear.policy.policy_name == "LinearPolicy"


def test_a_fractional_budget_is_rounded_up_by_train_as_by_learn():
    """train(400.5) runs learn(400.5)'s iterations and schedules: both round the budget up."""
    hp = dict(n_delta=2, seed=0, learning_rate=lambda progress: 0.05 * progress)
    theta = ars.train("CartPole-v1", 400.5, **hp)[0]
    model = ARS("LinearPolicy", "CartPole-v1", **hp).learn(400.5)
    np.testing.assert_array_equal(theta, model.policy.parameters_to_vector())


def test_a_policy_instance_brings_its_normalisation_and_a_mismatch_is_refused(tmp_path):
    v2 = ARS("LinearPolicy", "Pendulum-v1", n_delta=1, normalize_obs=True, seed=0).learn(400)
    with pytest.raises(ValueError, match="normalize_obs is False, but the policy normalises"):
        ARS(v2.policy, "Pendulum-v1", n_delta=1, zero_policy=False, seed=1)  # read, not inferred
    model = ARS(v2.policy, "Pendulum-v1", n_delta=1, zero_policy=False, normalize_obs=True, seed=1)
    assert model.learn(400).policy.obs_rms.count == 800
    ARS.load(model.save(tmp_path / "m"))  # saved as V2, so it loads
    with pytest.raises(ValueError, match="normalize_obs is False, but the policy normalises"):
        model.normalize_obs = False
    v1 = ARS("LinearPolicy", "Pendulum-v1", n_delta=1, seed=0)
    v1.normalize_obs = True  # set after the policy exists: it gets statistics
    assert v1.learn(400).policy.obs_rms.count == 400


def test_predict_one_or_a_batch():
    model = ARS("LinearPolicy", "Pendulum-v1", n_delta=2, seed=0).learn(1000)
    obs = np.stack([model.env.observation_space.sample() for _ in range(5)])
    batch, state = model.predict(obs, deterministic=True)
    assert batch.shape == (5, 1) and state is None
    for o, a in zip(obs, batch):
        np.testing.assert_allclose(model.predict(o)[0], a)


def test_normalization_samples_start_v2_from_the_initial_policy(tmp_path):
    model = ARS(
        "LinearPolicy", NoisyWalk(), n_delta=2, normalize_obs=True, normalization_samples=23, seed=1
    )
    recorder = StepRecorder(NoisyWalk(), model)
    model.set_env(recorder)
    model.learn(50)  # the warm-up's 40 steps count: one iteration follows
    warm = np.array(recorder.acted_on[:40])  # one round of 8 episodes of 5 steps: >= 23 steps
    assert recorder.stats_seen[40][0] == 40  # the first iteration already normalises with them
    np.testing.assert_allclose(np.array(recorder.stats_seen[40][1]), warm.mean(axis=0), rtol=1e-12)
    assert model.num_timesteps == 40 + 4 * 5


@pytest.mark.slow
def test_normalization_samples_do_not_depend_on_the_workers():
    kwargs = dict(normalize_obs=True, normalization_samples=500, seed=0)
    single = ARS("LinearPolicy", "Pendulum-v1", **kwargs).learn(1600)
    parallel = ARS("LinearPolicy", "Pendulum-v1", **kwargs)
    with AsyncEval([functools.partial(ars.make_env, "Pendulum-v1")] * 2) as async_eval:
        parallel.learn(1600, async_eval=async_eval)
    _assert_same_weights(parallel, single)
    assert parallel.policy.obs_rms.count == single.policy.obs_rms.count


def test_seed_api_builds_the_policy_at_the_first_learn():
    model = ARS("LinearPolicy", n_delta=8)  # the first line of every lit_sb3 script
    assert model.env is None and model.policy is None and model.get_env() is None
    model.learn(1000, env="CartPole-v1")
    assert model.policy.n_params == 8 and model.get_env().num_envs == 1
    env = gym.make("Pendulum-v1")
    policy = ARSLinearPolicy(env.observation_space, env.action_space)
    assert ARS(policy).policy is policy  # an instance brings its spaces: built at once
    with pytest.raises(ValueError, match="observation space"):
        ARS(policy).learn(100, env="CartPole-v1")


def test_the_policy_classes_defaults_are_the_tables():
    """POLICIES holds each policy's options and defaults; the classes' signatures say them
    too (SB3's habit), and this keeps them equal."""
    import inspect

    for name, cls in ars.POLICY_CLASSES.items():
        parameters = inspect.signature(cls).parameters
        options = [p for p in parameters if p not in ("observation_space", "action_space")]
        assert options == list(ars.POLICIES[name]), name
        for option in options:
            default = parameters[option].default
            expected = ars.POLICIES[name][option]
            assert default == expected or (option == "net_arch" and default is None), option


def test_bad_settings_met_late_still_get_one_line_naming_them():
    """An option added to policy_kwargs in place is refused by the policy's check when the
    policy is built; hparams given anew must be a dict; settings_for needs an env id."""
    model = ARS("MlpPolicy", policy_kwargs={"net_arch": [4]})
    model.policy_kwargs["bogus"] = 1
    with pytest.raises(ValueError, match=r"policy_kwargs \['bogus'\]: MlpPolicy's are"):
        model.learn(100, env="CartPole-v1")
    with pytest.raises(TypeError, match="hparams must be a dict of settings; got None"):
        model.hparams = None
    with pytest.raises(TypeError, match="env_id must be an env id such as 'Hopper-v4'; got 5"):
        ars.settings_for(5)


def test_a_loaded_model_says_what_it_lacks_and_what_cannot_change(tmp_path):
    """A model loaded without an env trains on the env its file names; one whose file names
    none (its env was an instance) asks for one, as a model never given one does; the
    options that shaped a saved policy cannot be given anew to ARS.load."""
    ARS("LinearPolicy", "Pendulum-v1", n_delta=2, seed=0).save(tmp_path / "m")
    pendulum = ARS.load(tmp_path / "m.zip")
    assert pendulum.learn(400).gym_env.spec.id == "Pendulum-v1"
    ARS("LinearPolicy", QuadraticBandit(), n_delta=2, seed=0).save(tmp_path / "bandit")
    loaded = ARS.load(tmp_path / "bandit.zip")
    with pytest.raises(ValueError, match=r"^no env to train on: pass env= to ARS\(...\) or to"):
        loaded.learn(400)
    with pytest.raises(ValueError, match=r"m.zip: policy_kwargs shape a policy when it is built"):
        ARS.load(tmp_path / "m.zip", policy_kwargs={"with_bias": True})
    same = ARS.load(tmp_path / "m.zip", policy_kwargs={"with_bias": False})  # the file's own
    assert same.policy.n_params == pendulum.policy.n_params


def test_one_honest_signature_and_positional_mistakes_name_the_keyword():
    import inspect

    parameters = inspect.signature(ARS).parameters
    assert list(parameters)[:2] == ["policy", "env"] and "args" not in parameters
    assert all(p.kind == p.KEYWORD_ONLY for p in list(parameters.values())[2:])
    settings = set(parameters) - {"policy", "env", "env_kwargs", "_init_setup_model"}
    assert settings == set(ars.HPARAMS)  # the table's names and defaults are ARS's
    for name in ars.HPARAMS:
        assert parameters[name].default == ars.MODEL_SETTINGS[name].default, name
    learn = inspect.signature(ARS.learn).parameters
    # sb3-contrib's positional order; the seed's names by keyword
    order = "total_timesteps callback log_interval tb_log_name reset_num_timesteps async_eval"
    assert list(learn)[1:7] == order.split()
    assert learn["env"].kind == learn["log_every_n_steps"].kind == inspect.Parameter.KEYWORD_ONLY
    seed_style = ARS("LinearPolicy", n_delta=4, n_top=2, learning_rate=0.1)  # lit_sb3, by keyword
    assert (seed_style.n_delta, seed_style.n_top, seed_style.env) == (4, 2, None)
    calls = []
    sb3_style = ARS("LinearPolicy", "CartPole-v1", n_delta=4)  # sb3-contrib: env positional
    sb3_style.learn(300, lambda locals_, globals_: calls.append(1), 1)  # (total, callback, ...)
    seed_style.learn(300, env="CartPole-v1", callback=lambda locals_, globals_: calls.append(2))
    assert calls[:1] == [1] and 2 in calls and seed_style.gym_env.spec.id == "CartPole-v1"
    with pytest.raises(TypeError, match=r"got 4 \(ARS takes its settings by keyword: n_delta=4"):
        ARS("LinearPolicy", 4)  # the seed's positional n_delta
    with pytest.raises(TypeError, match=r"by keyword: learning_rate=0.02\)"):
        ARS("LinearPolicy", 0.02)
    with pytest.raises(TypeError, match="takes from 2 to 3 positional arguments"):
        ARS("LinearPolicy", "CartPole-v1", 4)  # sb3-contrib's positional n_delta
    before = seed_style.num_timesteps
    with pytest.raises(TypeError, match=r"got the env 'CartPole-v1' \(learn takes it by keyword"):
        seed_style.learn(300, "CartPole-v1")  # the seed's positional env
    with pytest.raises(TypeError, match=r"log_interval got a function: pass it second"):
        seed_style.learn(300, None, lambda locals_, globals_: None)  # the seed's (total, env, cb)
    for bad in (
        dict(log_interval="a"),
        dict(checkpoint_interval=-1),
        dict(progress_bar="yes"),
        dict(total_timesteps=float("nan")),
        dict(async_eval="CartPole-v1"),
    ):
        with pytest.raises((TypeError, ValueError), match=next(iter(bad))):
            seed_style.learn(**{"total_timesteps": 300, **bad})
    assert seed_style.num_timesteps == before  # refused before anything ran


def test_hparams_are_a_dict_checked_when_set_with_a_read_only_initial_copy(tmp_path):
    """lit_sb3's open dict and SB3's attributes are one setting, checked when it is set (a
    refused value leaves it as it was); settings are never removed; saved as in use."""
    model = ARS("LinearPolicy", "CartPole-v1", n_delta=8, seed=0)
    assert model.n_delta == 8 == model.hparams["n_delta"] and isinstance(model.hparams, dict)
    model.n_delta = 16  # the attribute and the dict are one setting
    model.hparams["learning_rate"] = 0.5
    assert model.hparams["n_delta"] == 16 and model.learning_rate == 0.5
    assert model.hparams_initial["n_delta"] == 8 and model.hparams_initial["learning_rate"] == 0.02
    with pytest.raises(TypeError, match="does not support item assignment"):
        model.hparams_initial["n_delta"] = 3
    for change in (
        lambda: model.hparams.__setitem__("n_delta", 0),
        lambda: model.hparams.update(n_delta=0),
        lambda: model.hparams.update({"n_delta": 0}),
        lambda: model.hparams.__ior__({"n_delta": 0}),
        lambda: setattr(model, "n_delta", 0),
    ):
        with pytest.raises(ValueError, match="n_delta must be an integer from 1"):
            change()
        assert model.n_delta == 16  # as it was
    with pytest.raises(TypeError, match=r"unknown settings \['n_deltas'\]"):
        model.hparams["n_deltas"] = 4
    for remove in (lambda: model.hparams.pop("n_delta"), lambda: model.hparams.clear()):
        with pytest.raises(TypeError, match="never removed"):
            remove()
    with pytest.raises(TypeError, match="never removed"):
        del model.hparams["n_delta"]
    for copied in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        with pytest.raises(ValueError, match="n_delta must be an integer from 1"):
            copied.hparams["n_delta"] = 0  # still checked, for the copy
        copied.n_delta = 4
        assert (copied.n_delta, model.n_delta) == (4, 16)
    assert type(pickle.loads(pickle.dumps(model.hparams))) is dict
    seed = model.seed
    model.hparams = {"learning_rate": 0.25}  # a dict given anew: the settings it names change
    assert (model.learning_rate, model.n_delta, model.seed) == (0.25, 16, seed)
    options = {"net_arch": [8]}
    mlp = ARS("MlpPolicy", "CartPole-v1", policy_kwargs=options, seed=0, _init_setup_model=False)
    options["net_arch"].append(0)  # the user's dict, changed later, is not the model's
    assert mlp.policy_kwargs == {"net_arch": [8]}
    loaded = ARS.load(model.save(tmp_path / "m"))
    assert (loaded.n_delta, loaded.learning_rate) == (16, 0.25)  # in use, not the initial ones


def test_any_device_is_accepted_and_a_gpu_falls_back_to_the_cpu_with_a_warning_at_the_call():
    """The warning names the user's line, whichever door (the constructor, load, ``.to``), and
    Python's default filter shows it once per line however often that line runs."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("default")
        for _ in range(3):
            model = ARS("LinearPolicy", "CartPole-v1", device="cuda")
        model.learn(100)  # the settings checked again here: no warning again
        model.save(io.BytesIO())
        model.policy.to("cuda:1")
    assert [str(w.message) for w in record] == [
        "device='cuda': ars computes with NumPy: it uses the CPU",
        "device='cuda:1': ars computes with NumPy: it uses the CPU",
    ]
    assert {w.filename for w in record} == {__file__}
    assert str(model.device) == "cpu" == str(model.policy.device)


def test_torch_in_gives_torch_out_numpy_in_gives_numpy_out():
    torch = pytest.importorskip("torch")
    model = ARS("LinearPolicy", "Pendulum-v1", n_delta=2, seed=0, zero_policy=False)
    action = model.predict(torch.ones(3))[0]
    assert isinstance(action, torch.Tensor) and action.dtype == torch.float32
    assert isinstance(model.policy.forward(torch.ones(5, 3)), torch.Tensor)
    returns = model.evaluate_candidates(torch.zeros(3, 3))
    assert isinstance(returns, torch.Tensor) and returns.shape == (3,)
    assert isinstance(model.evaluate_candidates(np.zeros((3, 3))), np.ndarray)
    np.testing.assert_allclose(model.predict(np.ones(3))[0], action.numpy())


@pytest.mark.parametrize("env_id", ["FrozenLake-v1", "MultiDiscreteWalk", "MultiBinaryWalk"])
def test_discrete_observation_spaces_are_one_hot_and_train(env_id):
    env = gym.make(env_id) if env_id == "FrozenLake-v1" else CodedWalk(env_id)
    space = env.observation_space
    sample = np.stack([space.sample() for _ in range(5)])
    np.testing.assert_array_equal(
        ars.flattener(space)(sample), np.stack([spaces.flatten(space, x) for x in sample])
    )
    model = ARS("LinearPolicy", env, n_delta=4, seed=0)
    before = ars.evaluate_policy(model, env, 100, seed=0)[0]
    model.learn(20_000)
    after = ars.evaluate_policy(model, env, 100, seed=0)[0]
    assert after >= before + 0.1 and (env_id == "FrozenLake-v1" or after == 1.0), (before, after)
    single, _ = model.predict(sample[0])
    assert single.shape == () and single.dtype == env.action_space.dtype  # SB3's 0-d array
    assert model.predict(sample)[0].shape == (5,)
    assert model.policy.n_params == spaces.flatdim(space) * env.action_space.n


def test_predict_returns_the_action_space_dtype_and_sb3_shapes():
    model = ARS("LinearPolicy", "Pendulum-v1", seed=0)
    assert model.predict(np.zeros(3))[0].dtype == np.float32 and model.predict(np.zeros(3))[
        0
    ].shape == (1,)
    assert model.predict(np.zeros((4, 3)))[0].shape == (4, 1)
    discrete = ARS("LinearPolicy", "CartPole-v1", seed=0)
    action = discrete.predict(np.zeros(4))[0]
    assert action.shape == () and action.dtype == np.int64


def test_policy_names_set_random_seed_and_a_default_seed_from_numpy():
    from ars import LinearPolicy, MlpPolicy

    assert LinearPolicy is ARSLinearPolicy and MlpPolicy is ARSPolicy
    np.random.seed(0)  # what SB3's set_random_seed(0) does to NumPy
    first = ARS("LinearPolicy", "CartPole-v1").seed
    np.random.seed(0)
    assert ARS("LinearPolicy", "CartPole-v1").seed == first
    model = ARS("LinearPolicy", "CartPole-v1")
    model.set_random_seed(7)
    assert model.seed == 7


@pytest.mark.parametrize(
    "kwargs,name",
    [
        (dict(learning_rate=float("nan")), "learning_rate"),
        (dict(learning_rate=float("inf")), "learning_rate"),
        (dict(learning_rate=-0.1), "learning_rate"),
        (dict(delta_std=0.0), "delta_std"),
        (dict(delta_std=float("nan")), "delta_std"),
        (dict(delta_std=float("inf")), "delta_std"),
        (dict(alive_bonus_offset=float("nan")), "alive_bonus_offset"),
        (dict(n_delta=0), "n_delta"),
        (dict(verbose="1"), "verbose"),
        (dict(tensorboard_log=123), "tensorboard_log"),
        (dict(device=5), "device"),
    ],
)
def test_bad_settings_are_refused_before_training(kwargs, name):
    with pytest.raises(ValueError, match=name):
        ARS("LinearPolicy", "CartPole-v1", **kwargs)
    model = ARS("LinearPolicy", "CartPole-v1")
    with pytest.raises(ValueError, match=name):  # an assignment: the same check, at once
        setattr(model, name, next(iter(kwargs.values())))
    assert model.hparams == ARS("LinearPolicy", "CartPole-v1", seed=model.seed).hparams


def test_a_schedule_returning_nan_is_refused_naming_it_and_the_model_is_as_before():
    """The iteration whose schedule gives nan raises, naming the setting, and leaves the model
    as the last iteration left it: its weights, statistics and counters."""
    model = ARS(
        "LinearPolicy",
        "CartPole-v1",
        n_delta=2,
        normalize_obs=True,
        seed=0,
        delta_std=lambda progress: float("nan") if progress < 0.5 else 0.05,
    )
    after = []

    def keep(locals_, globals_):
        policy = model.policy
        rms = policy.obs_rms
        state = (model.num_timesteps, model.n_updates, rms.count, rms.mean.copy())
        after.append((policy.parameters_to_vector(), state))
        return True

    with pytest.raises(ValueError, match=r"delta_std \(its schedule at progress 0\.4"):
        model.learn(20_000, callback=keep)
    theta, state = after[-1]
    assert model.n_updates == state[1] > 0 and model.num_timesteps == state[0] > 10_000
    np.testing.assert_array_equal(model.policy.parameters_to_vector(), theta)
    assert model.policy.obs_rms.count == state[2]
    np.testing.assert_array_equal(model.policy.obs_rms.mean, state[3])


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_copies_and_pickles_predict_and_learn_as_the_original(env_id):
    """copy.deepcopy, pickle and cloudpickle, before and after learn: the copy predicts the
    same and goes on to the same weights; hparams_initial stays read-only."""
    import cloudpickle

    model = ARS("LinearPolicy", env_id, n_delta=2, normalize_obs=True, seed=3)
    copies = {
        "deepcopy": copy.deepcopy,
        "pickle": lambda m: pickle.loads(pickle.dumps(m)),
        "cloudpickle": lambda m: cloudpickle.loads(cloudpickle.dumps(m)),
    }
    for steps in (0, 400):
        model.learn(steps)
        obs = gym.make(env_id).reset(seed=1)[0]
        for name, make_copy in copies.items():
            twin, again = make_copy(model), copy.deepcopy(model)
            with pytest.raises(TypeError):
                twin.hparams_initial["n_delta"] = 4
            assert twin.hparams_initial == model.hparams_initial, name
            np.testing.assert_array_equal(twin.predict(obs)[0], model.predict(obs)[0])
            _assert_same_weights(_weights(twin.learn(400)), _weights(again.learn(400)))


@pytest.mark.parametrize("kind", ["/dev/zero", "fifo", "folder"])
def test_loading_refuses_devices_fifos_and_folders_at_once(kind, tmp_path):
    path = Path(kind) if kind.startswith("/") else tmp_path / kind
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    started = time.monotonic()
    for load in (ARS.load, ARSPolicy.load):
        with pytest.raises(ValueError, match="is not a regular file"):
            load(path)
    if kind == "/dev/zero":  # a file object of it too
        with open(path, "rb") as f, pytest.raises(ValueError, match="is not a regular file"):
            ARS.load(f)
    assert time.monotonic() - started < 5  # a FIFO's open blocks for ever, /dev/zero fills memory
    done = _cli(tmp_path, "--eval", str(path), timeout=20)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr


def test_weights_are_checked_where_they_enter_so_every_saved_model_loads(tmp_path):
    model = ARS("LinearPolicy", "Pendulum-v1", seed=0)
    for bad in ([np.nan, 1, 2], [np.inf, 0, 0]):
        with pytest.raises(ValueError, match="no nan or inf"):
            model.policy.load_from_vector(bad)
        state = {"policy": {"action_net.0.weight": np.array([bad])}}
        with pytest.raises(ValueError, match="no nan or inf"):
            model.set_parameters(state)
    model.policy.load_from_vector([1.0, 2.0, 3.0])
    loaded = ARS.load(model.save(tmp_path / "m"))
    assert loaded.policy.parameters_to_vector().tolist() == [1.0, 2.0, 3.0]


def test_settings_that_v1_cannot_honour_and_bad_evaluation_seeds_are_refused(tmp_path, capsys):
    with pytest.raises(ValueError, match="normalization_samples needs normalize_obs=True"):
        ARS("LinearPolicy", "CartPole-v1", normalization_samples=100)
    model = ARS("LinearPolicy", "CartPole-v1", n_delta=2, seed=0)
    for seed in (-1, 1.5, "7"):
        with pytest.raises(ValueError, match="seed must be an integer from 0 to"):
            ars.evaluate_policy(model, "CartPole-v1", 1, seed=seed)
    model.policy.save(tmp_path / "policy.npz")  # a policy alone: the limit is checked too
    flags = ["--eval", str(tmp_path / "policy.npz"), "--env", "CartPole-v1"]
    assert ars.main([*flags, "--max-episode-steps", "0"]) == 2
    assert "max_episode_steps must be an integer from 1 to" in capsys.readouterr().err


def test_what_shapes_a_built_policy_and_the_settings_themselves_stay(tmp_path):
    """normalize_obs set on a built V1 policy gives it statistics at once (so it saves as V2),
    and back to False is refused while the policy normalises; settings are never deleted; a
    device assigned warns at the user's line; ARS.load's own overrides are judged alone."""
    model = ARS("LinearPolicy", "CartPole-v1", n_delta=2, seed=0)
    model.normalize_obs = True
    assert ARS.load(model.save(tmp_path / "v2")).policy.obs_rms is not None
    with pytest.raises(ValueError, match="normalize_obs is False, but the policy normalises"):
        model.normalize_obs = False
    assert model.normalize_obs
    for name in ("hparams", "n_delta"):
        with pytest.raises(TypeError, match="never removed"):
            delattr(model, name)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        model.device = "cuda"
    assert [Path(w.filename).name for w in record] == ["test_ars.py"], record
    path = model.save(tmp_path / "m")
    with pytest.raises(ValueError) as override:
        ARS.load(path, n_delta=0)
    assert str(override.value).startswith("n_delta must be an integer from 1")


def test_a_refused_learn_changes_nothing():
    model = ARS("LinearPolicy", "CartPole-v1", n_delta=2, seed=0).learn(600)
    before = (model.num_timesteps, model.n_updates, list(model.ep_info_buffer), model.logger)
    with pytest.raises(ValueError, match="checkpoint_interval needs default_root_dir"):
        model.learn(300, checkpoint_interval=5)
    after = (model.num_timesteps, model.n_updates, list(model.ep_info_buffer), model.logger)
    assert after == before


def test_edited_hparams_are_checked_as_they_are_set():
    model = ARS("MlpPolicy", "CartPole-v1", seed=1, _init_setup_model=False)
    with pytest.raises(ValueError, match=r"policy_kwargs \['ortho_init'\]: MlpPolicy's are"):
        model.hparams["policy_kwargs"] = {"ortho_init": False}  # an SB3 option ars lacks
    model = ARS("MlpPolicy", "CartPole-v1", policy_kwargs={"net_arch": [8]}, seed=1)
    with pytest.raises(ValueError, match="policy_kwargs shapes a policy when it is built"):
        model.hparams["policy_kwargs"] = {"net_arch": [4]}  # the policy is built: not ignored
    model = ARS("LinearPolicy", "CartPole-v1", n_delta=2, seed=1)
    with pytest.raises(ValueError, match="max_episode_steps must be an integer from 1"):
        model.hparams["max_episode_steps"] = 0
    with pytest.raises(ValueError, match="normalization_samples needs normalize_obs=True"):
        model.normalization_samples = 100
    model.stats_window_size = 3  # the window follows the setting, newest episodes kept
    model.learn(300)
    assert model.ep_info_buffer.maxlen == 3 == len(model.ep_info_buffer)


def test_a_policy_constructor_takes_none_only_where_sb3_does():
    env = gym.make("CartPole-v1")
    spaces_ = env.observation_space, env.action_space
    assert ARSPolicy(*spaces_, net_arch=None).net_arch == [64, 64]  # SB3's default
    for options, message in (
        ({"activation_fn": None}, "activation_fn must be one of"),
        ({"with_bias": None}, "with_bias must be True or False; got None"),
        ({"activation_fn": lambda x: 2 * x}, "activation_fn must be one of"),
    ):
        with pytest.raises(ValueError, match=message):
            ARSPolicy(*spaces_, **options)

    def relu(x):  # a function of the same name is not ars's ReLU
        return 2 * x

    with pytest.raises(ValueError, match="activation_fn must be one of"):
        ars.train("CartPole-v1", 100, policy="MlpPolicy", policy_kwargs={"activation_fn": relu})


def test_an_int_past_floats_range_is_refused_as_inf_is():
    """Never an OverflowError: the setting's own message, at every door."""
    huge = 10**400
    for door in (lambda: ars.train("CartPole-v1", huge), lambda: ARS("LinearPolicy", huge)):
        with pytest.raises((ValueError, TypeError), match="must be a number|expected an env") as no:
            door()
        assert "OverflowError" not in repr(no.value)


def test_a_fraction_of_a_timestep_runs_one_iteration_as_train_does():
    model = ARS("LinearPolicy", "CartPole-v1", n_delta=2, seed=0).learn(0.5)
    theta = ars.train("CartPole-v1", 0.5, n_delta=2, seed=0)[0]
    assert model.n_updates == 1 and np.array_equal(model.policy.parameters_to_vector(), theta)


# === Envs: ids, functions, vector envs, SB3's VecEnvs and VecNormalize ============================


def test_env_as_id_instance_or_function_or_given_to_learn_trains_the_same():
    """An id, an env or a function returning one, given to ARS() or to learn(): the same
    weights."""
    trained = []
    for env in ("CartPole-v1", gym.make("CartPole-v1"), lambda: gym.make("CartPole-v1")):
        model = ARS("LinearPolicy", env, n_delta=2, seed=0).learn(200)
        assert model.num_timesteps >= 200 and isinstance(model.gym_env, gym.Env)
        assert model.get_env().num_envs == 1
        trained.append(model.policy.parameters_to_vector())
    late = ARS("LinearPolicy", n_delta=2, seed=0).learn(200, env="CartPole-v1")
    assert late.env_id == "CartPole-v1"
    trained.append(late.policy.parameters_to_vector())
    assert all(np.array_equal(theta, trained[0]) for theta in trained) and trained[0].any()


@pytest.mark.slow
def test_vec_envs_with_one_env_are_accepted_everywhere(tmp_path):
    vec_env = pytest.importorskip("stable_baselines3.common.vec_env")
    from stable_baselines3.common.env_util import make_vec_env

    dummy = vec_env.DummyVecEnv([lambda: gym.make("CartPole-v1")])
    model = ARS("LinearPolicy", dummy, n_delta=2, seed=0).learn(500)
    assert model.get_env() is dummy and model.env is dummy
    model.set_env(make_vec_env("CartPole-v1", n_envs=1))
    model.learn(500, env=make_vec_env("CartPole-v1", n_envs=1))
    ARS.load(model.save(tmp_path / "m"), env=make_vec_env("CartPole-v1", n_envs=1)).learn(200)
    with AsyncEval(
        [lambda: make_vec_env("CartPole-v1", n_envs=1)] * 2, start_method="fork"
    ) as async_eval:
        model.learn(500, async_eval=async_eval)  # sb3-contrib's AsyncEval example: VecEnv factories
    assert ARS("LinearPolicy", make_vec_env("CartPole-v1", n_envs=2)).n_envs == 2
    with pytest.raises(ValueError, match="cannot see through VecFrameStack"):
        ARS("LinearPolicy", vec_env.VecFrameStack(dummy, 2))


@pytest.mark.slow
def test_sb3_contrib_multi_env_test_and_sb3_eval_callback_example_run(tmp_path):
    # sb3-contrib's tests/test_run.py::test_ars_multi_env, with only its import changed
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    env = make_vec_env("Pendulum-v1", n_envs=2)
    model = ARS("MlpPolicy", env, n_delta=1)
    model.learn(total_timesteps=250)
    env = VecNormalize(make_vec_env("Pendulum-v1", n_envs=1))
    model = ARS("MlpPolicy", env, n_delta=2, seed=0)
    async_eval = AsyncEval(
        [lambda: VecNormalize(make_vec_env("Pendulum-v1", n_envs=1)) for _ in range(2)],
        model.policy,
    )
    async_eval.seed(0)
    async_eval.set_options()
    model.learn(500, async_eval=async_eval)
    async_eval.close()
    # SB3's documented EvalCallback example: a 5-env eval env, SB3's callback and ars's
    from stable_baselines3.common.callbacks import EvalCallback as SB3EvalCallback

    train_env = make_vec_env("Pendulum-v1", n_envs=1, seed=0)
    eval_env = make_vec_env("Pendulum-v1", n_envs=5, seed=0)
    for callback_class in (SB3EvalCallback, ars.EvalCallback):
        callback = callback_class(
            eval_env,
            best_model_save_path=tmp_path,
            log_path=tmp_path,
            eval_freq=500,
            n_eval_episodes=5,
            deterministic=True,
            render=False,
        )
        ARS("MlpPolicy", train_env, n_delta=2).learn(1000, callback=callback)
        assert len(callback.evaluations_results) >= 1 and len(callback.evaluations_results[0]) == 5


@pytest.mark.slow
def test_vec_normalize_statistics_are_exact_and_sb3_loop_runs_on_its_observations():
    vec_env = pytest.importorskip("stable_baselines3.common.vec_env")
    from stable_baselines3.common.env_util import make_vec_env

    normalized = vec_env.VecNormalize(make_vec_env("Pendulum-v1", n_envs=1), norm_reward=False)
    model = ARS("LinearPolicy", normalized, n_delta=2, seed=0)
    recorder = StepRecorder(normalized.venv.envs[0])
    normalized.venv.envs[0] = recorder
    model.set_env(normalized)
    model.learn(1600)
    acted = np.array(
        recorder.acted_on
    )  # raw observations: VecNormalize's statistics are theirs, exactly
    assert model.get_vec_normalize_env() is normalized
    np.testing.assert_allclose(normalized.obs_rms.mean, acted.mean(axis=0), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(normalized.obs_rms.var, acted.var(axis=0), rtol=1e-5)
    obs = normalized.reset()  # SB3's loop: the policy sees VecNormalize's observations
    action, _ = model.predict(obs)
    obs, rewards, dones, infos = normalized.step(action)
    assert obs.shape == (1, 3) and np.abs(obs).max() <= normalized.clip_obs
    evaluator = ars.InProcessEval(ars.make_env("Pendulum-v1"))  # a video films what was trained
    seen = ars.evaluate_episodes(model.policy, evaluator, [5], None, normalized)[0].returns[0]
    filmed, frames = video_example.play(
        model, ars.make_env("Pendulum-v1"), 5, None, lambda frame: None
    )
    assert filmed == seen and frames == 201
    with pytest.raises(ValueError, match="already normalises"):
        ARS("LinearPolicy", normalized, normalize_obs=True)


def test_a_model_trained_in_vec_normalize_is_evaluated_as_it_saw_observations(tmp_path):
    vec_env = pytest.importorskip("stable_baselines3.common.vec_env")
    from stable_baselines3.common.env_util import make_vec_env

    normalized = vec_env.VecNormalize(make_vec_env("Pendulum-v1", n_envs=1), norm_reward=False)
    model = ARS("LinearPolicy", normalized, n_delta=2, seed=0).learn(2000)
    normalized.training = False
    live = ars.evaluate_policy(model, normalized, 5)
    path = model.save(tmp_path / "m.zip")
    loaded = ARS.load(path)  # its file records the frozen normalisation
    assert ars.evaluate_policy(loaded, "Pendulum-v1", 5) == live
    filmed = video_example.play(
        loaded, ars.make_env("Pendulum-v1"), None, None, lambda frame: None
    )[0]
    assert (
        video_example.play(model, ars.make_env("Pendulum-v1"), None, None, lambda f: None)[0]
        == filmed
    )
    result = _run([str(HERE / "ars.py"), "--eval", str(path), "--eval-episodes", "5"], tmp_path)
    assert f"mean return {live[0]:.2f} +/- {live[1]:.2f}" in result.stdout, result.stdout
    weights = model.policy.parameters_to_vector()[None]
    again = ARS.load(path, env="Pendulum-v1")  # trained on: its rollouts see what it learned on
    assert again.evaluate_candidates(weights) == model.evaluate_candidates(weights)
    model.policy.save(tmp_path / "policy.npz")  # a policy alone records it too (seed 0 as well)
    for file in (path, tmp_path / "policy.npz"):
        assert ars.evaluate_policy(ars.ARSPolicy.load(file), "Pendulum-v1", 5) == live
    raw = ARS("LinearPolicy", "Pendulum-v1", seed=0)
    raw.policy.load_from_vector(model.policy.parameters_to_vector())
    assert ars.evaluate_policy(raw, "Pendulum-v1", 5) != live  # without it: another policy
    reward_only = vec_env.VecNormalize(make_vec_env("CartPole-v1", n_envs=1), norm_obs=False)
    ARS("LinearPolicy", reward_only, n_delta=2, seed=0).learn(500)  # reward-only trains
    with pytest.raises(ValueError, match="a VecNormalize inside a VecNormalize"):
        ARS("LinearPolicy", vec_env.VecNormalize(normalized))


def test_get_env_is_a_vec_env_view_for_the_documented_sb3_loop():
    model = ARS("LinearPolicy", "CartPole-v1", n_delta=2, seed=0).learn(2000)
    vec_env = model.get_env()
    obs = vec_env.reset()
    episodes = 0
    for _ in range(700):
        action, _ = model.predict(obs)
        obs, rewards, dones, infos = vec_env.step(action)
        assert obs.shape == (1, 4) and rewards.shape == (1,) and dones.shape == (1,)
        if dones[0]:
            episodes += 1
            assert "terminal_observation" in infos[0]
    assert episodes >= 1 and isinstance(model.gym_env, gym.Env)


# === Evaluators: in-process, AsyncEval, ExecutorEval, vector envs side by side ===================


@pytest.mark.slow
@pytest.mark.parametrize("workers,start_method", [(1, "forkserver"), (2, "spawn"), (3, "fork")])
def test_async_eval_is_bit_identical_to_one_process(workers, start_method, reference_run):
    with AsyncEval(
        [PENDULUM] * workers, _pendulum_model().policy, start_method=start_method
    ) as async_eval:
        model = _pendulum_model().learn(4000, async_eval=async_eval)
        processes = list(async_eval.processes)
    _assert_same_weights(model, reference_run)
    _assert_all_dead(processes)


@pytest.mark.slow
def test_async_eval_api_and_exact_statistics():
    model = _pendulum_model()
    model.policy.obs_rms.update(np.random.default_rng(0).normal(size=(10, 3)))
    weights = np.random.default_rng(1).normal(0, 0.3, (6, model.policy.n_params))
    seeds = np.arange(12).reshape(6, 2) + 1000
    env = PENDULUM()
    expected = [_episodes(env, model.policy, s, w) for w, s in zip(weights, seeds)]
    with AsyncEval([PENDULUM] * 2, model.policy, n_eval_episodes=2) as async_eval:
        assert async_eval.seed(5) == [[5], [6]] and async_eval.seed(None) == []  # as sb3-contrib
        async_eval.sync_obs_rms(model.policy.obs_rms)
        async_eval.send_jobs(weights, 6, episode_seeds=seeds)
        results = async_eval.get_results()
        assert [i for i, _ in results] == list(range(6))
        for (_, (rewards, lengths)), (returns, n, _) in zip(results, expected):
            assert np.array_equal(rewards, returns) and np.array_equal(lengths, n)
        merged = RunningMeanStd((3,))
        for rms in async_eval.get_obs_rms():
            merged.combine(rms)
        everything = RunningMeanStd((3,))
        for _, _, visited in expected:
            everything.combine(visited)
        assert merged.count == everything.count == 6 * 2 * 200
        np.testing.assert_allclose(merged.mean, everything.mean, rtol=1e-10)
        np.testing.assert_allclose(merged.var, everything.var, rtol=1e-10)
        async_eval.sync_obs_rms(model.policy.obs_rms)  # a sync starts the statistics over
        assert all(rms.count == 0 for rms in async_eval.get_obs_rms())
        async_eval.seed(5)  # without episode_seeds, env seeds come from seed() and a job counter
        async_eval.send_jobs(weights[:2], 2)
        first = async_eval.get_results()
        async_eval.seed(5)
        async_eval.send_jobs(weights[:2], 2)
        assert all(
            np.array_equal(a[1][0], b[1][0]) for a, b in zip(first, async_eval.get_results())
        )
        with pytest.raises(ValueError, match="shape"):
            async_eval.send_jobs(weights[:, :2], 6)


@pytest.mark.slow
def test_async_eval_set_options():
    policy = ARSLinearPolicy(OptionsEnv.observation_space, OptionsEnv.action_space)
    with AsyncEval([OptionsEnv] * 2, policy, start_method="fork") as async_eval:
        async_eval.send_jobs(np.zeros((4, policy.n_params)), 4)
        assert [r[0] for _, (r, _) in async_eval.get_results()] == [5.0] * 4
        async_eval.set_options({"scale": 2.0})
        async_eval.send_jobs(np.zeros((4, policy.n_params)), 4)
        assert [r[0] for _, (r, _) in async_eval.get_results()] == [10.0] * 4
        async_eval.set_options([{"scale": 3.0}, {"scale": 3.0}])
        async_eval.send_jobs(np.zeros((2, policy.n_params)), 2)
        assert [r[0] for _, (r, _) in async_eval.get_results()] == [15.0] * 2
        with pytest.raises(ValueError, match="3 options for 2 workers"):
            async_eval.set_options([{}, {}, {}])


@pytest.mark.slow
def test_learn_does_not_close_the_async_eval_it_was_given():
    with AsyncEval([PENDULUM] * 2, _pendulum_model().policy, start_method="fork") as async_eval:
        first = _pendulum_model(seed=1)
        first.learn(1000, async_eval=async_eval)
        first.learn(1000, async_eval=async_eval, reset_num_timesteps=False)
        assert all(p.is_alive() for p in async_eval.processes)
        other = ARS("MlpPolicy", "Pendulum-v1", n_delta=2, policy_kwargs=dict(net_arch=[8]), seed=9)
        other.learn(1000, async_eval=async_eval)  # another model with the same spaces
        alone = ARS(
            "MlpPolicy", "Pendulum-v1", n_delta=2, policy_kwargs=dict(net_arch=[8]), seed=9
        ).learn(1000)
        assert np.array_equal(
            other.policy.parameters_to_vector(), alone.policy.parameters_to_vector()
        )
    single = _pendulum_model(seed=1).learn(1000)
    single.learn(1000, reset_num_timesteps=False)
    assert np.array_equal(first.policy.parameters_to_vector(), single.policy.parameters_to_vector())


@pytest.mark.slow
def test_async_eval_worker_exception_is_one_line_and_keeps_its_traceback():
    policy = ARSLinearPolicy(CrashEnv.observation_space, CrashEnv.action_space)
    async_eval = AsyncEval([CrashEnv] * 2, policy)
    processes = list(async_eval.processes)
    async_eval.set_options([{}, {"crash": True}])
    async_eval.send_jobs(np.zeros((4, policy.n_params)), 4)
    line = r"^AsyncEval worker 1 failed while evaluating candidate \d: RuntimeError: the robot fell"
    with pytest.raises(RuntimeError, match=line) as error:
        async_eval.get_results()
    assert "\n" not in str(error.value) and "Traceback" in error.value.worker_traceback
    async_eval.close()
    async_eval.close()
    _assert_all_dead(processes)
    with pytest.raises(RuntimeError, match="closed"):
        async_eval.send_jobs(np.zeros((1, policy.n_params)), 1)


@pytest.mark.slow
def test_async_eval_killed_worker_raises_within_seconds():
    policy = ARSLinearPolicy(SlowEnv.observation_space, SlowEnv.action_space)
    async_eval = AsyncEval([SlowEnv] * 2, policy, start_method="fork")
    processes = list(async_eval.processes)
    async_eval.send_jobs(np.zeros((8, policy.n_params)), 8)  # 3 s of work per candidate
    threading.Timer(0.5, os.kill, (processes[0].pid, signal.SIGKILL)).start()
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"worker 0 \(pid \d+\) died \(exit code -9\)"):
        async_eval.get_results()
    assert time.monotonic() - start < 5.0
    async_eval.close()
    _assert_all_dead(processes)


@pytest.mark.slow
def test_a_worker_whose_main_process_is_killed_exits_quietly(tmp_path):
    # The main process dies mid-batch: the worker's next send finds no reader, and it must
    # exit without a BrokenPipeError's traceback on the terminal they share.
    script = (
        "import os, signal, threading, numpy as np, ars\n"
        "from conftest import SlowEnv\n"
        "policy = ars.ARSLinearPolicy(SlowEnv.observation_space, SlowEnv.action_space)\n"
        "ae = ars.AsyncEval([SlowEnv], policy, start_method='fork')\n"
        "print(ae.processes[0].pid, flush=True)\n"
        "ae.send_jobs(np.zeros((1, policy.n_params)), 1)  # 3 s of work\n"
        "threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGKILL)).start()\n"
        "ae.get_results()\n"
    )
    (tmp_path / "killed.py").write_text(script)
    # The worker inherits stderr, so communicate() returns once the worker has exited too.
    result = _run([str(tmp_path / "killed.py")], tmp_path, timeout=60)
    assert result.returncode == -signal.SIGKILL and result.stdout.strip().isdigit()
    assert "Traceback" not in result.stderr, result.stderr
    deadline = time.monotonic() + 10  # its stderr closes just before it is gone: on a busy
    while _alive(int(result.stdout)) and time.monotonic() < deadline:  # machine, not at once
        time.sleep(0.05)
    assert not _alive(int(result.stdout))


@pytest.mark.slow
def test_async_eval_env_that_fails_at_start_up():
    policy = ARSLinearPolicy(NoisyWalk.observation_space, NoisyWalk.action_space)
    before = {p.pid for p in multiprocessing.active_children()}
    line = "worker 1 failed while starting its env: ValueError: no such robot: Hopper-v99;"
    with pytest.raises(RuntimeError, match=line) as error:
        AsyncEval([NoisyWalk, _failing_env], policy)
    assert "\n" not in str(error.value)
    gc.collect()
    assert {p.pid for p in multiprocessing.active_children()} <= before


class NanFinalEnv(gym.Env):
    """Episodes of 3 steps whose final observation (terminated=True) is NaN."""

    observation_space = spaces.Box(-np.inf, np.inf, (2,), np.float64)
    action_space = spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2), {}

    def step(self, action):
        self.t += 1
        done = self.t >= 3
        return np.full(2, np.nan if done else 1.0), 1.0, done, False, {}


@pytest.mark.slow
def test_a_non_finite_final_observation_is_detected_everywhere():
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    envs = {
        "one env": NanFinalEnv,
        "DummyVecEnv of 2": lambda: DummyVecEnv([NanFinalEnv] * 2),
        "SubprocVecEnv of 2": lambda: SubprocVecEnv([NanFinalEnv] * 2),
        "AsyncVectorEnv, same-step autoreset": lambda: gym.vector.AsyncVectorEnv(
            [NanFinalEnv] * 2, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP
        ),
    }
    for name, make in envs.items():
        for v2 in (False, True):
            env = make()
            model = ARS("LinearPolicy", env, n_delta=2, normalize_obs=v2, seed=0)
            with pytest.raises(FloatingPointError, match="non-finite observation"):
                model.learn(100)
            assert not model.policy.parameters_to_vector().any(), (name, v2)
            env.close()


class StepFailEnv(NoisyWalk):
    """Raises at its 30th step, in whichever process it runs."""

    def step(self, action):
        self.n = getattr(self, "n", 0) + 1
        if self.n == 30:
            raise RuntimeError("the robot fell off the table")
        return super().step(action)


@pytest.mark.slow
def test_a_sub_env_that_raises_or_is_killed_ends_learn_in_one_line_naming_it(capfd):
    from stable_baselines3.common.vec_env import SubprocVecEnv

    kinds = {"SubprocVecEnv": SubprocVecEnv, "AsyncVectorEnv": gym.vector.AsyncVectorEnv}
    for name, make in kinds.items():
        capfd.readouterr()  # SB3's own child prints its traceback: ars cannot stop that one
        env = make([StepFailEnv] * 2)
        with pytest.raises(RuntimeError, match=rf"^sub-env \d of the {name} failed: ") as error:
            ARS("LinearPolicy", env, n_delta=2, seed=0).learn(10_000)
        assert "\n" not in str(error.value)
        if name == "AsyncVectorEnv":  # its worker sends the error: type and message
            assert "RuntimeError: the robot fell off the table" in str(error.value)
            assert "Traceback" not in capfd.readouterr().err  # gymnasium's log of it: dropped
        env = make([SlowEnv] * 2)
        threading.Timer(1.0, os.kill, (env.processes[1].pid, signal.SIGKILL)).start()
        message = rf"^sub-env 1 of the {name} failed: its process ended \(exit code -9\)$"
        with pytest.raises(RuntimeError, match=message):
            ARS("LinearPolicy", env, n_delta=2, seed=0).learn(10**6)


class TickingWalk(NoisyWalk):
    """NoisyWalk at 2 ms a step: an iteration lasts long enough to kill a process in it."""

    def step(self, action):
        time.sleep(0.002)
        return super().step(action)


@pytest.mark.slow
@pytest.mark.parametrize("killed", ["AsyncEval worker", "SubprocVecEnv child"])
def test_a_run_whose_worker_is_killed_resumes_from_its_checkpoint_to_the_same_weights(
    tmp_path, killed
):
    from stable_baselines3.common.vec_env import SubprocVecEnv

    def run(total, folder, kill_after=None, resume=False):
        env = SubprocVecEnv([TickingWalk] * 2) if "Subproc" in killed else TickingWalk()
        async_eval = AsyncEval([TickingWalk] * 2) if "AsyncEval" in killed else None
        if resume:
            model = ARS.load(folder / "checkpoint.npz", env=env)
            total -= model.num_timesteps
        else:
            model = ARS("LinearPolicy", env, n_delta=4, normalize_obs=True, seed=7)
        processes = async_eval.processes if async_eval else env.processes
        if kill_after:
            threading.Timer(kill_after, os.kill, (processes[1].pid, signal.SIGKILL)).start()
        try:
            return model.learn(
                total,
                async_eval=async_eval,
                reset_num_timesteps=not resume,
                default_root_dir=folder,
                checkpoint_interval=2,
            )
        finally:
            for closable in (async_eval, env if "Subproc" in killed else None):
                if closable is not None:
                    closable.close()

    whole = run(2400, tmp_path / "whole").policy.parameters_to_vector()
    with pytest.raises(RuntimeError, match=r"(worker|sub-env) 1 .*(died|ended) \(exit code -9\)"):
        run(2400, tmp_path / "cut", kill_after=1.0)
    resumed = run(2400, tmp_path / "cut", resume=True)
    assert 0 < ARS.load(tmp_path / "cut" / "checkpoint.npz").num_timesteps
    assert np.array_equal(resumed.policy.parameters_to_vector(), whole)


class Unloadable:
    """An observation filter that pickles, but cannot be rebuilt in a worker."""

    def __call__(self, obs):
        return obs

    def __reduce__(self):
        return (_refuse_to_load, ())


def _refuse_to_load():
    raise ValueError("this filter cannot be rebuilt")


@pytest.mark.slow
def test_a_job_that_cannot_be_unpickled_is_reported_not_a_silent_exit():
    policy = ARSLinearPolicy(NoisyWalk.observation_space, NoisyWalk.action_space)
    it, jobs = ars.fixed_jobs(policy.network(), None, np.zeros(policy.n_params), [[1], [2]])
    with AsyncEval([NoisyWalk], policy) as async_eval:
        message = "worker 0 failed while evaluating candidate 0: ValueError: this filter cannot"
        with pytest.raises(RuntimeError, match=message):
            async_eval.evaluate(it._replace(obs_filter=Unloadable()), jobs)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="reads /proc")
def test_forked_workers_hold_no_other_workers_pipe_ends():
    policy = ARSLinearPolicy(NoisyWalk.observation_space, NoisyWalk.action_space)
    with AsyncEval([NoisyWalk] * 3, policy, start_method="fork") as async_eval:
        ends = {os.fstat(remote.fileno()).st_ino for remote in async_eval.remotes}
        for process in async_eval.processes:
            folder = Path(f"/proc/{process.pid}/fd")
            held = set()
            for fd in folder.iterdir():
                with contextlib.suppress(OSError):
                    held.add(os.stat(fd).st_ino)
            assert not held & ends, f"worker {process.pid} holds the main process's pipe ends"


@pytest.mark.slow
def test_async_eval_closes_when_collected_and_at_exit(tmp_path):
    async_eval = AsyncEval([PENDULUM], _pendulum_model().policy, start_method="fork")
    processes = list(async_eval.processes)
    del async_eval
    gc.collect()
    for p in processes:
        p.join(5)
    _assert_all_dead(processes)
    script = (
        "import functools, gymnasium as gym, ars\n"
        "if __name__ == '__main__':\n"
        "    model = ars.ARS('LinearPolicy', 'Pendulum-v1', n_delta=2, seed=0)\n"
        "    ae = ars.AsyncEval([functools.partial(gym.make, 'Pendulum-v1')] * 2, model.policy)\n"
        "    model.learn(800, async_eval=ae)\n"
        "    print(' '.join(str(p.pid) for p in ae.processes))\n"
    )
    (tmp_path / "leave_open.py").write_text(script)
    result = _run(
        [str(tmp_path / "leave_open.py")],
        tmp_path,
        env=dict(os.environ, PYTHONPATH=str(HERE)),
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    time.sleep(0.5)
    for pid in map(int, result.stdout.split()):
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


@pytest.mark.slow
def test_process_pool_executor_gives_the_same_weights(reference_run):
    ctx = multiprocessing.get_context("forkserver")
    with ProcessPoolExecutor(max_workers=2, mp_context=ctx) as executor:
        evaluator = ExecutorEval(executor, PENDULUM, _pendulum_model().policy)
        model = _pendulum_model().learn(4000, async_eval=evaluator)
        bad = ExecutorEval(
            executor, CrashEnv, ARSLinearPolicy(CrashEnv.observation_space, CrashEnv.action_space)
        )
        bad.set_options({"crash": True})
        bad.send_jobs(np.zeros((2, 8)), 2)
        with pytest.raises(
            RuntimeError, match="executor task failed.*the robot fell off the table"
        ):
            bad.get_results()
    _assert_same_weights(model, reference_run)


@pytest.mark.slow
def test_dask_local_cluster_gives_the_same_weights(reference_run):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
    ) as cluster:
        with distributed.Client(cluster) as client:
            evaluator = ExecutorEval(
                client.get_executor(pure=False), PENDULUM, _pendulum_model().policy
            )
            model = _pendulum_model().learn(4000, async_eval=evaluator)
    _assert_same_weights(model, reference_run)


@pytest.mark.slow
def test_async_eval_spreads_few_jobs_over_all_workers():
    policy = ARSLinearPolicy(NoisyWalk.observation_space, NoisyWalk.action_space)
    policy.obs_rms = RunningMeanStd((4,))  # V2: the workers keep statistics of what they visit
    with AsyncEval([NoisyWalk] * 2, policy, start_method="fork") as async_eval:
        async_eval.send_jobs(np.zeros((2, policy.n_params)), 2)  # e.g. Swimmer's n_delta=1
        async_eval.get_results()
        assert [rms.count for rms in async_eval.get_obs_rms()] == [5, 5]
        torch = pytest.importorskip("torch")
        async_eval.send_jobs(torch.zeros((2, policy.n_params), dtype=torch.float64), 2)
        assert len(async_eval.get_results()) == 2


@pytest.mark.slow
def test_async_eval_pop_size_seed_and_send_jobs_twice():
    model = _pendulum_model()
    with AsyncEval([PENDULUM] * 2, model.policy, start_method="fork") as async_eval:
        async_eval.send_jobs(np.zeros((5, model.policy.n_params)), 3)  # pop_size < rows: 3 jobs
        assert [i for i, _ in async_eval.get_results()] == [0, 1, 2]
        async_eval.send_jobs(np.zeros((2, model.policy.n_params)), 2)
        with pytest.raises(RuntimeError, match="send_jobs was called twice"):
            async_eval.send_jobs(np.zeros((2, model.policy.n_params)), 2)
        assert len(async_eval.get_results()) == 2
        assert async_eval.seed(None) == []


@pytest.mark.slow
def test_vector_envs_of_any_width_give_the_weights_and_evaluations_of_one_env():
    pytest.importorskip("stable_baselines3")
    settings = dict(n_delta=3, n_eval_episodes=2, normalize_obs=True, seed=5)
    settings["policy_kwargs"] = {"net_arch": [8]}
    one = ARS("MlpPolicy", "Pendulum-v1", **settings).learn(3000)
    expected = ars.evaluate_policy(one, "Pendulum-v1", 3, return_episode_rewards=True)
    for k in (1, 2, 5):
        for name, make in _vector_envs(k).items():
            env = make()
            model = ARS("MlpPolicy", env, **settings).learn(3000)
            assert model.n_envs == k, name
            np.testing.assert_array_equal(
                model.policy.parameters_to_vector(), one.policy.parameters_to_vector(), name
            )
            assert ars.evaluate_policy(one, env, 3, return_episode_rewards=True) == expected, name
            env.close()
    with pytest.raises(ValueError, match="CartPoleVectorEnv cannot reset each env"):
        ARS("LinearPolicy", gym.make_vec("CartPole-v1", 2))  # gymnasium's own vectorised CartPole
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    with AsyncEval([lambda: make_vec_env("Pendulum-v1", n_envs=3)] * 2, start_method="fork") as ae:
        model = ARS("MlpPolicy", "Pendulum-v1", **settings).learn(3000, async_eval=ae)
    np.testing.assert_array_equal(
        model.policy.parameters_to_vector(), one.policy.parameters_to_vector()
    )  # AsyncEval's env functions may return vector envs
    trained = []
    for k in (1, 3):  # VecNormalize around k envs: frozen per iteration, merged exactly
        env = VecNormalize(make_vec_env("Pendulum-v1", n_envs=k), norm_reward=False)
        weights = ARS("LinearPolicy", env, n_delta=2, seed=1).learn(2000).policy
        trained.append((weights.parameters_to_vector(), env.obs_rms.mean, env.obs_rms.var))
    for first, second in zip(*trained):
        np.testing.assert_array_equal(first, second)


def test_side_by_side_rollouts_match_the_core_bit_for_bit_in_closed_cases():
    from stable_baselines3.common.vec_env import DummyVecEnv

    # V1 with Discrete actions, uneven episode lengths and more jobs than envs: every job's
    # returns, lengths and visited statistics are run_job's.
    env = ars.VecEnvs(DummyVecEnv([lambda: gym.make("CartPole-v1")] * 3))
    policy = ARSLinearPolicy(env.observation_space, env.action_space)
    for track_obs, obs_rms in ((False, None), (True, RunningMeanStd((4,)).update(np.ones((2, 4))))):
        it = ars.Iteration(policy.network(), np.zeros(8), obs_rms, 0.5, 3, 0, track_obs, 60)
        jobs = [
            ars.Job(c, c % 4, (-1) ** c, np.arange(c, c + 1 + c % 3, dtype=np.uint64))
            for c in range(7)
        ]
        single = gym.make("CartPole-v1")
        for job, got in zip(jobs, ars.run_side_by_side(env, it, jobs)):
            want = ars.run_job(single, it, job)
            np.testing.assert_array_equal(got.returns, want.returns)
            np.testing.assert_array_equal(got.lengths, want.lengths)
            assert (got.visited is None) == (want.visited is None) == (not track_obs)
            if track_obs:
                assert got.visited.count == want.visited.count == want.lengths.sum()
                np.testing.assert_array_equal(got.visited.var, want.visited.var)


def test_an_automatic_reset_never_starts_an_episode():
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    for vec_cls, kwargs in ((DummyVecEnv, {}), (SubprocVecEnv, {"start_method": "fork"})):
        venv = vec_cls([SeedRecorder] * 2, **kwargs)
        ARS("LinearPolicy", venv, n_delta=2, n_eval_episodes=2, seed=1).learn(1000)
        logs = venv.get_attr("log")
        for log in logs:  # every episode's steps follow a reset given an env seed
            assert all(log[i - 1] is not None for i, x in enumerate(log) if x == "stepped"), log
        seeds = sorted(x for log in logs for x in log if x not in (None, "stepped"))
        expected = sorted(
            int(s) for c in range(4) for s in ars.env_seeds(1, ars.ENV_SEEDS, 0, c % 2, n=2)
        )
        assert seeds == expected  # each episode's named seed, once
        venv.close()
    cartpole = functools.partial(gym.make, "CartPole-v1")
    nan = gym.wrappers.TransformObservation(
        cartpole(), lambda o: o * np.nan, cartpole().observation_space
    )
    with pytest.raises(FloatingPointError, match="non-finite observation"):  # V1's NaN check
        ARS("LinearPolicy", DummyVecEnv([lambda: nan, cartpole]), n_delta=1).learn(200)


@pytest.mark.slow
@pytest.mark.parametrize("evaluator", ["async", "executor"])
def test_large_observations_never_deadlock(evaluator):
    model = ARS("LinearPolicy", ImageEnv(), n_delta=4, normalize_obs=True, seed=0)
    single = ARS("LinearPolicy", ImageEnv(), n_delta=4, normalize_obs=True, seed=0).learn(48)
    if evaluator == "async":
        with AsyncEval([ImageEnv] * 2, start_method="fork", job_timeout=60) as async_eval:
            model.learn(48, async_eval=async_eval)
    else:
        with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork")) as pool:
            model.learn(48, async_eval=ExecutorEval(pool, ImageEnv, job_timeout=60))
    _assert_same_weights(model, single)


@pytest.mark.slow
def test_a_stuck_env_times_out_naming_worker_candidate_and_seeds():
    policy = ARSLinearPolicy(StuckEnv.observation_space, StuckEnv.action_space)
    async_eval = AsyncEval([StuckEnv] * 2, policy, start_method="fork", job_timeout=1.5)
    processes = list(async_eval.processes)
    async_eval.send_jobs(np.zeros((4, policy.n_params)), 4, episode_seeds=[[11], [12], [13], [14]])
    with pytest.raises(
        RuntimeError,
        match=r"worker \d \(pid \d+\) has not finished candidate \d \(env seeds \[1[1-4]\]\)",
    ):
        async_eval.get_results()
    _assert_all_dead(processes)
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork")) as pool:
        pids = []
        pool.submit(os.getpid).result()
        pids = list(pool._processes)
        executor_eval = ExecutorEval(pool, StuckEnv, policy, job_timeout=1.5)
        executor_eval.send_jobs(np.zeros((2, policy.n_params)), 2, episode_seeds=[[21], [22]])
        with pytest.raises(
            RuntimeError,
            match=r"no executor task finished.*candidates (\d)-\1 \(env seeds from \[2[12]\]\)",
        ):
            executor_eval.get_results()
        assert executor_eval.closed
        assert not any(_alive(pid) for pid in pids)  # ended and reaped at once


def test_executor_timeouts_adapt_to_measured_tasks():
    make = functools.partial(StuckOnCue, gym.make("CartPole-v1"))
    policy = ARSLinearPolicy(*_spaces(make()))
    with ThreadPoolExecutor(1) as pool:
        first = ExecutorEval(pool, make, policy, job_timeout=0.5, jobs_per_task=4)
        first.set_options(None)
        StuckOnCue.stuck.set()
        with pytest.raises(ars.EvaluationTimeout, match=r"finished in 2 s"):  # 0.5 s per job
            first.evaluate(*_frozen_jobs(policy, 4))
        StuckOnCue.stuck.clear()
    with ThreadPoolExecutor(1) as pool:
        measured = ExecutorEval(pool, make, policy, job_timeout=0.5, jobs_per_task=4)
        measured.evaluate(*_frozen_jobs(policy, 4))  # fast: measured at a few ms per job
        StuckOnCue.stuck.set()
        with pytest.raises(ars.EvaluationTimeout) as error:
            measured.evaluate(*_frozen_jobs(policy, 4))
        StuckOnCue.stuck.clear()
    waited = float(str(error.value).split("finished in ")[1].split(" s")[0])
    assert 0.5 < waited < 2  # job_timeout + 20 x the measured time per job x 4 jobs, not 2 s


@pytest.mark.slow
def test_a_worker_that_cannot_start_in_time_is_an_error():
    slow_start = functools.partial(_sleep_then, 30, NoisyWalk)
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="did not answer in time while starting its env"):
        AsyncEval([slow_start], start_method="fork", start_timeout=1.0)
    assert time.monotonic() - start < 20  # not the 30 s the env takes


@pytest.mark.slow
def test_dask_client_closed_mid_learn_is_an_error_not_a_hang():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
    ) as cluster:
        client = distributed.Client(cluster)
        model = ARS("LinearPolicy", SlowEnv(), n_delta=2, seed=0)
        executor_eval = ExecutorEval(client.get_executor(pure=False), SlowEnv, job_timeout=60)
        threading.Timer(1.0, client.close).start()
        with pytest.raises(RuntimeError, match="executor task failed|no executor task finished"):
            model.learn(100_000, async_eval=executor_eval)
        with pytest.raises(RuntimeError, match="the Dask client of this executor is closed"):
            model.learn(100, async_eval=ExecutorEval(client.get_executor(pure=False), SlowEnv))


def test_one_evaluator_used_from_two_threads_is_a_clear_error():
    policy = ARSLinearPolicy(SlowEnv.observation_space, SlowEnv.action_space)
    evaluator = ars.InProcessEval(SlowEnv(), policy)
    it = ars.Iteration(policy.network(), policy.parameters_to_vector(), None, 0.0, 0, 0)
    jobs = [ars.Job(0, 0, 1, np.array([1], np.uint64), policy.parameters_to_vector())]
    busy = threading.Thread(target=evaluator.evaluate, args=(it, jobs))
    busy.start()
    time.sleep(0.2)
    with pytest.raises(RuntimeError, match="in use by another thread"):
        evaluator.evaluate(it, jobs)
    busy.join()


@pytest.mark.slow
def test_seeds_mode_and_weights_mode_train_identically():
    runs = []
    for weights_mode in (False, True):
        model = _pendulum_model()
        model.learn(4000, async_eval=_Recording(PENDULUM(), weights_mode))
        runs.append(_weights(model))
    _assert_same_weights(*runs)


@pytest.mark.slow
def test_batches_are_sized_from_the_workers_and_the_jobs():
    for n_jobs, workers in ((460, 2), (460, 48), (460, 256), (3, 8), (1, 1)):
        sizes = ars.batch_sizes(n_jobs, workers)
        assert sum(sizes) == n_jobs and sizes == sorted(sizes, reverse=True) and sizes[-1] == 1
        assert sizes[0] == -(-n_jobs // (2 * workers))
    assert ars.batch_sizes(460, 2)[:3] == [115, 87, 65] and len(ars.batch_sizes(460, 2)) < 30
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork")) as pool:
        submitted = []

        class Spy:
            def submit(self, fn, *args):
                submitted.append(len(args[2]))
                return pool.submit(fn, *args)

        model = _pendulum_model()  # 2N = 8 candidates, one iteration
        model.learn(800, async_eval=ExecutorEval(Spy(), PENDULUM, n_workers=2))
        assert submitted == ars.batch_sizes(8, 2) == [2, 2, 1, 1, 1, 1]
        submitted.clear()
        model.learn(800, async_eval=ExecutorEval(Spy(), PENDULUM, n_workers=2, jobs_per_task=3))
        assert submitted == [3, 3, 2]


def test_evaluation_counts_have_the_settings_rule_wherever_they_are_given():
    message = "n_eval_episodes must be an integer from 1 to 1,000,000; got 10000000"
    for door in (
        lambda: ars.EvalCallback("CartPole-v1", n_eval_episodes=10**7),
        lambda: ars.evaluate_policy(ARS("LinearPolicy", "CartPole-v1"), "CartPole-v1", 10**7),
        lambda: ars.Evaluator(n_eval_episodes=10**7),
    ):
        with pytest.raises(ValueError, match=message):
            door()
    with pytest.raises(ValueError, match="verbose must be an integer from 0 to 2; got 'x'"):
        ars.EvalCallback("CartPole-v1", verbose="x")
    evaluator = ars.InProcessEval("Pendulum-v1", ARS("LinearPolicy", "Pendulum-v1").policy)
    with pytest.raises(
        ValueError, match=r"episode_seeds must be 2 rows of seeds; got shape \(2, 0\)"
    ):
        evaluator.send_jobs(np.zeros((2, 3)), episode_seeds=np.zeros((2, 0)))


@pytest.mark.slow
def test_async_eval_gives_each_workers_statistics_without_a_sync():
    env = PENDULUM()
    policy = ARSLinearPolicy(env.observation_space, env.action_space)
    with AsyncEval([PENDULUM] * 2, policy, start_method="fork") as async_eval:
        async_eval.send_jobs(np.zeros((4, policy.n_params)), 4)
        async_eval.get_results()
        statistics = async_eval.get_obs_rms()
    assert [s.mean.shape for s in statistics] == [(3,), (3,)]
    assert sum(s.count for s in statistics) == 800


# === Logging and callbacks =======================================================================


@pytest.mark.parametrize("log_interval", [1, 2])
def test_a_discarded_iteration_records_nothing_of_its_own(tmp_path, log_interval):
    """An iteration a per-step callback stops is never committed: none of ars's records of it
    reaches SB3's logger (set_logger takes it), and no row is written for it; the callback's
    own records stay in the logger, as SB3 leaves them."""
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.logger import configure

    class RecordThenStop(BaseCallback):
        def _on_step(self) -> bool:
            self.logger.record("custom/step", self.n_calls)
            self.logger.record_mean("custom/mean", float(self.n_calls))
            return self.num_timesteps < 6  # in the 2nd iteration: 4 one-step rollouts each

    logger = configure(str(tmp_path), ["csv"])
    model = ARS("LinearPolicy", QuadraticBandit(), n_delta=2, seed=0)
    model.set_logger(logger)
    model.learn(1000, callback=RecordThenStop(), log_interval=log_interval)
    assert model.n_updates == 1 and model.num_timesteps == 4  # the 2nd iteration discarded
    held = dict(logger.name_to_value)
    assert held["custom/step"] == 6  # the callback's own
    if log_interval == 1:  # the 1st iteration's row written; nothing of the 2nd recorded
        assert not any(key.startswith(("train/", "rollout/")) for key in held)
        assert held["custom/mean"] == 5.5 and logger.name_to_count["custom/mean"] == 2
    else:  # the 1st iteration's records, held for the row it never wrote
        assert held["train/iterations"] == 0
        assert held["custom/mean"] == 3.5 and logger.name_to_count["custom/mean"] == 6
    rows = (tmp_path / "progress.csv").read_text().splitlines()
    assert len(rows) == (2 if log_interval == 1 else 0)  # a header and the 1st iteration's row


def test_callbacks_function_and_sb3_object_can_stop_training():
    calls = []

    def stop_after_two(locals_, globals_):
        calls.append(locals_["self"].num_timesteps)
        return len(calls) < 2

    model = ARS("LinearPolicy", QuadraticBandit(), n_delta=2, seed=0).learn(
        1000, callback=stop_after_two
    )
    assert calls == [4, 8] and model.num_timesteps == 8

    class SB3Style:
        def __init__(self):
            self.events = []

        def init_callback(self, model):
            self.model = model
            self.events.append("init")

        def on_training_start(self, locals_, globals_):
            self.events.append("start")

        def on_rollout_start(self):
            self.events.append("rollout_start")

        def on_rollout_end(self):
            self.events.append("rollout_end")

        def update_locals(self, locals_):
            self.locals = locals_

        def on_step(self):
            self.events.append("step")
            return self.model.num_timesteps < 12

        def on_training_end(self):
            self.events.append("end")

    cb = SB3Style()  # an SB3-style object: on_step after every env step, as in SB3
    model = ARS("LinearPolicy", QuadraticBandit(), n_delta=2, seed=0).learn(1000, callback=[cb])
    # False at step 12, in the third iteration (4 one-step episodes each): it is discarded
    assert model.num_timesteps == 8 and model.n_updates == 2
    iteration = ["rollout_start"] + ["step"] * 4 + ["rollout_end"]
    assert cb.events == ["init", "start"] + iteration * 2 + ["rollout_start"] + ["step"] * 4 + [
        "end"
    ]
    assert cb.locals["self"] is model and cb.locals["dones"].tolist() == [True]


def test_verbose_table_and_progress_csv(tmp_path, capsys):
    model = ARS("LinearPolicy", "CartPole-v1", n_delta=2, seed=0, verbose=1)
    model.learn(3000, log_every_n_steps=2, default_root_dir=tmp_path)
    out = capsys.readouterr().out
    keys = [
        "rollout/ep_rew_mean",
        "rollout/ep_len_mean",
        "rollout/return_std",
        "train/step_size",
        "train/delta_std",
        "train/learning_rate",
        "train/iterations",
        "time/fps",
        "time/total_timesteps",
    ]
    for key in keys:
        assert key.split("/")[1] in out
    rows = _rows(tmp_path / "progress.csv")
    assert len(rows) == model.n_updates // 2 and set(keys) <= set(rows[0])
    assert int(rows[-1]["time/total_timesteps"]) <= model.num_timesteps
    # sb3-contrib logs the iteration's index before counting it: 1, 3, ... for rows after 2, 4, ...
    assert [int(r["train/iterations"]) for r in rows] == list(range(1, model.n_updates, 2))
    model.logger.record(
        "eval/mean_reward", 1.0
    )  # a key an SB3 EvalCallback would add: the header widens
    model.logger.dump()
    rows = _rows(tmp_path / "progress.csv")
    assert rows[-1]["eval/mean_reward"] == "1.0" and rows[0]["eval/mean_reward"] == ""


def test_tensorboard_log_folder_gets_csv(tmp_path):
    model = ARS("LinearPolicy", "CartPole-v1", n_delta=2, seed=0, tensorboard_log=str(tmp_path))
    model.learn(100, tb_log_name="run")
    model.learn(100, tb_log_name="run")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run_1", "run_2"]
    assert (tmp_path / "run_2" / "progress.csv").exists()


def test_progress_bar(capsys, monkeypatch):
    ARS("LinearPolicy", "CartPole-v1", n_delta=2, seed=0).learn(300, progress_bar=True)
    assert "steps" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "tqdm", None)  # as if tqdm were not installed
    with pytest.raises(ModuleNotFoundError, match=r"pip install tqdm"):
        ARS("LinearPolicy", "CartPole-v1", n_delta=2, seed=0).learn(300, progress_bar=True)


def test_eval_callback_logs_and_keeps_the_best_model(tmp_path):
    evaluation = ars.EvalCallback(
        "CartPole-v1",
        eval_freq=2000,
        n_eval_episodes=4,
        best_model_save_path=tmp_path,
        seed=3,
        verbose=0,
    )
    model = ARS("LinearPolicy", "CartPole-v1", n_delta=2, seed=0, alive_bonus_offset=-1)
    model.learn(6000, callback=evaluation, default_root_dir=tmp_path)
    steps = [e[0] for e in evaluation.evaluations]
    assert steps[0] == 0 and all(
        b // 2000 > a // 2000 for a, b in zip(steps, steps[1:])
    )  # 0, f, 2f, ... as reached
    best = max(e[2] for e in evaluation.evaluations)
    assert evaluation.best_mean_reward == best
    kept = ARS.load(tmp_path / "best_model")  # SB3's name: best_model.zip
    mean, _ = ars.evaluate_policy(kept, "CartPole-v1", 4)
    seeds = ars.evaluation_seeds(3, 4)  # the EVALUATION stream of the callback's seed
    returns = _episodes(ars.make_env("CartPole-v1"), kept.policy, seeds)[0]
    assert (
        returns.mean() == best
    )  # the saved best model is the one that scored best, without the alive bonus
    rows = _rows(tmp_path / "progress.csv")
    logged = [float(r["eval/mean_reward"]) for r in rows if r["eval/mean_reward"]]
    assert logged == [e[2] for e in evaluation.evaluations[: len(logged)]] and len(logged) >= 2
    parallel = ars.EvalCallback(
        "CartPole-v1", eval_freq=2000, n_eval_episodes=4, eval_concurrency=2, seed=3, verbose=0
    )
    ARS("LinearPolicy", "CartPole-v1", n_delta=2, seed=0, alive_bonus_offset=-1).learn(
        6000, callback=parallel
    )
    assert parallel.evaluations[-1][2:] == evaluation.evaluations[-1][2:]


def test_episode_ends_reach_callbacks_alike_and_unseedable_vector_envs_are_refused():
    from stable_baselines3.common.callbacks import StopTrainingOnMaxEpisodes
    from stable_baselines3.common.vec_env import DummyVecEnv

    envs = {
        "env": lambda: "Pendulum-v1",
        "SyncVectorEnv": lambda: gym.make_vec("Pendulum-v1", 2, vectorization_mode="sync"),
        "AsyncVectorEnv": lambda: gym.make_vec(
            "Pendulum-v1", 2, vectorization_mode="async", vector_kwargs={"context": "fork"}
        ),
    }
    counts = {}
    for name, make in envs.items():  # a time limit ends an episode: dones=True, everywhere
        env = make()  # SB3's callback counts max_episodes per env: 6 episodes in all
        stop = StopTrainingOnMaxEpisodes(max_episodes=6 if name == "env" else 3)
        model = ARS("LinearPolicy", env, n_delta=2, seed=0).learn(5000, callback=stop)
        counts[name] = (model.num_timesteps, model.n_updates, stop.n_episodes)
        getattr(env, "close", lambda: None)()
    assert set(counts.values()) == {(800, 1, 6)}, counts  # the second iteration: discarded
    model = ARS("LinearPolicy", "Pendulum-v1", n_delta=2, seed=0, max_episode_steps=50)
    stop = StopTrainingOnMaxEpisodes(max_episodes=3)
    assert model.learn(5000, callback=stop).num_timesteps < 5000  # ars's own limit too
    unseedable = gym.vector.AsyncVectorEnv([PENDULUM] * 2, shared_memory=False, context="fork")
    wrapped = gym.wrappers.vector.RecordEpisodeStatistics(gym.vector.SyncVectorEnv([PENDULUM] * 2))
    for env in (unseedable, wrapped):
        with pytest.raises(ValueError, match="cannot reset each env with its own seed"):
            ARS("LinearPolicy", env)
    unseedable.close(terminate=True)
    mixed = DummyVecEnv([PENDULUM, lambda: gym.make("MountainCarContinuous-v0")])
    with pytest.raises(ValueError, match="an env of it has observation space"):
        ARS("LinearPolicy", mixed)


@pytest.mark.slow
def test_sb3_step_callbacks_fire_as_with_sb3_contrib_with_or_without_workers(tmp_path):
    """The same script on both libraries: Pendulum's episodes last 200 steps; the counts agree.
    With workers, ars keeps SB3's contract (num_envs steps per on_step call, here 1), where
    sb3-contrib calls once per n_workers steps; so the counts are those of one process."""
    sb3_contrib = pytest.importorskip("sb3_contrib")
    results = {}
    for name, cls, async_cls, workers in (
        ("ars", ARS, AsyncEval, 0),
        ("ars-2", ARS, AsyncEval, 2),
        ("sb3", sb3_contrib.ARS, None, 0),
    ):
        model = cls("LinearPolicy", "Pendulum-v1", n_delta=2, seed=0)
        callbacks, check = _sb3_callbacks(tmp_path, name)
        async_eval = async_cls([PENDULUM] * workers, model.policy) if workers else None
        model.learn(4000, callback=callbacks, async_eval=async_eval)
        if async_eval is not None:
            async_eval.close()
        evaluations = np.load(tmp_path / name / "eval" / "evaluations.npz")
        results[name] = (
            sorted(p.name for p in (tmp_path / name / "ckpt").iterdir()),
            check.fired,
            evaluations["timesteps"].tolist(),
            len(list((tmp_path / name / "n").iterdir())),
            model.num_timesteps,
        )
    assert results["ars"] == results["sb3"] == results["ars-2"]
    assert "rl_model_4000_steps.zip" in results["ars"][0]
    assert results["ars"][2] == ([1000, 2000, 3000, 4000] if workers == 0 else [2000, 4000])
    ARS.load(tmp_path / "ars" / "ckpt" / "rl_model_4000_steps")  # an SB3 checkpoint name loads


@pytest.mark.slow
def test_sb3_stop_callbacks_and_progress_bar(tmp_path, capsys):
    callbacks = pytest.importorskip("stable_baselines3.common.callbacks")
    pytest.importorskip("rich")
    model = ARS("LinearPolicy", "CartPole-v1", n_delta=2, seed=0)
    stop = callbacks.StopTrainingOnRewardThreshold(reward_threshold=400, verbose=0)
    evaluation = callbacks.EvalCallback(
        gym.make("CartPole-v1"),
        callback_on_new_best=stop,
        eval_freq=500,
        n_eval_episodes=2,
        best_model_save_path=str(tmp_path),
        verbose=0,
        warn=False,
    )
    model.learn(100_000, callback=[evaluation, callbacks.ProgressBarCallback()])
    assert (
        model.num_timesteps < 20_000 and evaluation.best_mean_reward >= 400
    )  # a False stops training
    assert (tmp_path / "best_model.zip").exists()
    patience = callbacks.StopTrainingOnNoModelImprovement(max_no_improvement_evals=2, min_evals=1)
    evaluation = callbacks.EvalCallback(
        gym.make("CartPole-v1"),
        callback_after_eval=patience,
        eval_freq=500,
        n_eval_episodes=2,
        verbose=0,
        warn=False,
    )
    ARS("LinearPolicy", "CartPole-v1", n_delta=2, seed=0, learning_rate=0.0).learn(
        100_000, callback=evaluation
    )
    assert evaluation.n_calls <= 5000


@pytest.mark.slow
def test_sb3_logger_and_tensorboard_event_files(tmp_path):
    logger_module = pytest.importorskip("stable_baselines3.common.logger")
    model = ARS("LinearPolicy", "CartPole-v1", n_delta=2, seed=0)
    model.set_logger(logger_module.configure(str(tmp_path / "sb3"), ["csv"]))
    model.learn(2000)
    rows = _rows(tmp_path / "sb3" / "progress.csv")
    assert {"train/iterations", "train/step_size", "rollout/return_std", "time/fps"} <= set(rows[0])
    pytest.importorskip("tensorboard")
    ARS(
        "LinearPolicy", "CartPole-v1", n_delta=2, seed=0, tensorboard_log=str(tmp_path / "tb")
    ).learn(2000)
    events = list((tmp_path / "tb" / "ARS_1").glob("events.out.tfevents.*"))
    assert events and (tmp_path / "tb" / "ARS_1" / "progress.csv").exists()
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(events[0]))
    accumulator.Reload()
    assert "train/step_size" in accumulator.Tags()["scalars"]


@pytest.mark.slow
def test_tensorboard_log_without_a_writer_says_so_once_at_the_learn_line(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)
    monkeypatch.setitem(sys.modules, "tensorboardX", None)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("default")
        for _ in range(2):
            model = ARS("LinearPolicy", "CartPole-v1", n_delta=2, tensorboard_log=str(tmp_path))
            model.learn(300)
    assert len(record) == 1 and "only progress.csv" in str(record[0].message)
    assert record[0].filename == __file__


def test_eval_callback_logs_each_evaluations_own_episode_length(tmp_path):
    # With log_path, evaluations.npz holds every evaluation: the log row holds only this one's.
    model = ARS("LinearPolicy", "CartPole-v1", n_delta=2, seed=0)
    logged, logger = [], ars.Logger()
    logger.record = lambda key, value, exclude=None: (
        logged.append(value) if key == "eval/mean_ep_length" else None
    )
    model.set_logger(logger)
    callback = ars.EvalCallback("CartPole-v1", n_eval_episodes=3, eval_freq=400, log_path=tmp_path)
    model.learn(1200, callback=callback)
    assert len(logged) >= 3 and len({round(x, 6) for x in logged}) > 1, logged
    assert logged == [float(np.mean(lengths)) for lengths in callback.evaluations_length]


def test_own_eval_callback_and_evaluate_policy_take_sb3_parameters(tmp_path):
    rendered = []
    stop_at_best = ars.EvalCallback(
        "CartPole-v1",
        callback_on_new_best=None,
        n_eval_episodes=2,
        eval_freq=1000,
        log_path=tmp_path,
        deterministic=True,
        render=False,
        verbose=0,
        warn=False,
    )
    ARS("LinearPolicy", "CartPole-v1", n_delta=2, seed=0).learn(3000, callback=stop_at_best)
    saved = np.load(tmp_path / "evaluations.npz")
    assert saved["results"].shape == (len(saved["timesteps"]), 2) and saved["timesteps"][0] == 0
    model = ARS("LinearPolicy", "CartPole-v1", n_delta=2, seed=0)
    rewards, lengths = ars.evaluate_policy(
        model,
        "CartPole-v1",
        3,
        return_episode_rewards=True,
        seed=0,
        callback=lambda locals_, globals_: rendered.append(1),
    )
    assert isinstance(rewards, list) and isinstance(lengths, list) and len(rewards) == 3
    assert len(rendered) == sum(lengths)
    with pytest.raises(AssertionError, match="below threshold"):
        ars.evaluate_policy(model, "CartPole-v1", 2, reward_threshold=1000)


@pytest.mark.slow
def test_sb3_callbacks_see_the_absolute_target_and_each_worker_steps_dones(capsys):
    callbacks = pytest.importorskip("stable_baselines3.common.callbacks")
    pytest.importorskip("tqdm")
    seen = []

    class Target(callbacks.BaseCallback):
        def _on_training_start(self):
            seen.append(self.locals["total_timesteps"])

        def _on_step(self):
            return True

    model = ARS("LinearPolicy", "CartPole-v1", n_delta=2, seed=0).learn(1000, Target())
    first = model.num_timesteps
    model.learn(1000, Target(), reset_num_timesteps=False)
    assert seen == [1000, first + 1000]  # SB3's: the absolute target, never the increment
    with AsyncEval([CARTPOLE] * 2, model.policy) as async_eval:
        stop = callbacks.StopTrainingOnMaxEpisodes(max_episodes=5)
        model.learn(100_000, stop, async_eval=async_eval)  # needs each worker-step's dones
        assert stop.n_episodes >= 5 and model.num_timesteps < first + 20_000
        capsys.readouterr()
        model.learn(3000, async_eval=async_eval, progress_bar=True)
    assert "100%" in capsys.readouterr().err.splitlines()[-1]


@pytest.mark.parametrize("n_workers", [1, 2])
def test_sb3_progress_bar_reaches_the_end_with_async_eval(n_workers):
    callbacks = pytest.importorskip("stable_baselines3.common.callbacks")
    pytest.importorskip("tqdm")
    pytest.importorskip("rich")
    model, bar = ARS("LinearPolicy", "CartPole-v1", n_delta=2, seed=0), None
    with AsyncEval([CARTPOLE] * n_workers, model.policy) as async_eval:
        bar = callbacks.ProgressBarCallback()  # SB3's: num_envs per on_step call
        model.learn(3000, bar, async_eval=async_eval)
    assert bar.pbar.n == model.num_timesteps >= bar.pbar.total == 3000  # was 56% with 2


def test_progress_csv_gains_a_column_without_losing_rows(tmp_path):
    logger = ars.Logger(folder=tmp_path)
    for i in range(3):
        logger.record("train/iterations", i)
        logger.dump()
    logger.record("train/iterations", 3)
    logger.record(
        "custom/thing", 1.5
    )  # a key nobody announced: the file is rewritten whole, atomically
    logger.dump()
    rows = _rows(tmp_path / "progress.csv")
    assert [r["train/iterations"] for r in rows] == ["0", "1", "2", "3"] and rows[-1][
        "custom/thing"
    ] == "1.5"
    assert not list(tmp_path.glob(".*tmp"))


def test_an_evaluation_of_nan_rewards_stops_as_training_does(tmp_path):
    """A non-finite evaluation return is a FloatingPointError naming its env seed, before the
    callback keeps a record that no checkpoint could hold."""
    env = BadEnv("reward")
    model = ARS("LinearPolicy", NoisyWalk(), n_delta=2, seed=0)
    env.poison_seed = int(ars.evaluation_seeds(model.seed, 2)[1])
    callback = ars.EvalCallback(env, eval_freq=1, n_eval_episodes=2)
    message = f"non-finite return .* env seed {env.poison_seed}"
    with pytest.raises(FloatingPointError, match=message):
        model.learn(10, callback=callback)
    assert callback.evaluations == []


def test_recorded_values_skip_the_outputs_they_exclude(tmp_path, capsys):
    """SB3's ``exclude``: a value is left out of the outputs it names, kept in the others."""
    logger = ars.Logger(verbose=1, folder=tmp_path)
    logger.record("a/shown", 1.0)
    logger.record("a/not_printed", 2.0, exclude="stdout")
    logger.record("a/not_logged", 2.0, exclude="log")  # SB3's other name for the screen
    logger.record("a/not_in_csv", 3.0, exclude=("csv", "tensorboard"))
    logger.dump(0)
    printed = capsys.readouterr().out
    assert "shown" in printed and "not_printed" not in printed and "not_in_csv" in printed
    assert "not_logged" not in printed
    header = (tmp_path / "progress.csv").read_text().splitlines()[0]
    assert "a/not_printed" in header and "a/not_in_csv" not in header


def test_eval_callbacks_lists_and_files_agree_when_a_later_callback_fails(tmp_path):
    """An iteration is committed before its callbacks run: a callback failing after one
    EvalCallback evaluated and before another did leaves each with evaluations, results and
    lengths of one length, its evaluations.npz and best model agreeing, and training goes on
    from there."""
    model = ARS("LinearPolicy", "CartPole-v1", n_delta=2, seed=0)
    first, second = (
        ars.EvalCallback(
            "CartPole-v1",
            eval_freq=1,
            n_eval_episodes=2,
            log_path=tmp_path / name,
            verbose=0,
            best_model_save_path=tmp_path / name,
        )
        for name in ("first", "second")
    )
    calls = []

    def second_call_fails(locals_, globals_):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("a callback's failure")

    callbacks = [first, second_call_fails, second]
    with pytest.raises(RuntimeError, match="a callback's failure"):
        model.learn(5_000, callback=callbacks)
    assert model.n_updates == 2  # committed before its callbacks ran
    assert [len(first.evaluations), len(second.evaluations)] == [3, 2]  # at 0, 1st, 2nd
    assert first.evaluations_timesteps == [e[0] for e in first.evaluations]  # SB3's name too
    for name, evaluation in (("first", first), ("second", second)):
        lists = [evaluation.evaluations, evaluation.evaluations_results]
        assert {len(x) for x in [*lists, evaluation.evaluations_length]} == {len(lists[0])}
        written = np.load(tmp_path / name / "evaluations.npz")
        assert written["timesteps"].tolist() == [e[0] for e in evaluation.evaluations]
        assert written["results"].tolist() == evaluation.evaluations_results
        assert ARS.load(tmp_path / name / "best_model.zip").n_updates <= model.n_updates
    model.learn(model.num_timesteps, callback=[first, second], reset_num_timesteps=False)
    for name, evaluation in (("first", first), ("second", second)):
        written = np.load(tmp_path / name / "evaluations.npz")["timesteps"].tolist()
        assert written == [e[0] for e in evaluation.evaluations] and len(written) > 3


def test_two_eval_callbacks_keep_their_own_state_in_a_checkpoint(tmp_path):
    """Each EvalCallback's state is saved under its own key (the class's name, then #2), so a
    checkpoint gives each its own schedule and best score back."""
    model = ARS("LinearPolicy", "CartPole-v1", n_delta=2, seed=0)
    short, long = (
        ars.EvalCallback("CartPole-v1", eval_freq=freq, n_eval_episodes=n, verbose=0, seed=seed)
        for freq, n, seed in ((1, 1, 1), (10**6, 3, 2))
    )
    model.learn(600, callback=[short, long], checkpoint_interval=1, default_root_dir=tmp_path)
    meta, _ = ars.read_model_file(tmp_path / "checkpoint.npz")
    assert meta["callbacks"] == {
        "EvalCallback": short.state_dict(),
        "EvalCallback#2": long.state_dict(),
    }
    assert len(short.evaluations) > 1 == len(long.evaluations)
    again = ars.EvalCallback("CartPole-v1", eval_freq=10**6, n_eval_episodes=3, verbose=0)
    again.load_state_dict(meta["callbacks"]["EvalCallback#2"])
    assert again.state_dict() == long.state_dict() != short.state_dict()


def test_a_callback_that_sets_the_window_then_stops_keeps_it():
    """A callback that sets stats_window_size, then stops training: its iteration is kept,
    with the episode window at the size now set."""
    model = ARS("LinearPolicy", "CartPole-v1", n_delta=2, seed=0).learn(600)
    done = model.n_updates

    def shrink_then_stop(locals_, globals_):
        model.stats_window_size = 3
        raise ars.StopTraining

    model.learn(600, callback=shrink_then_stop, reset_num_timesteps=False)
    assert model.n_updates == done + 1
    assert model.ep_info_buffer.maxlen == 3 == len(model.ep_info_buffer)


def test_record_mean_averages_until_the_row_is_written(tmp_path):
    logger = ars.Logger(folder=tmp_path)
    for value in (1.0, 2.0, 6.0):
        logger.record_mean("custom/x", value)
    logger.dump(1)
    logger.record_mean("custom/x", 10.0)  # a new row: a new mean
    logger.dump(2)
    rows = list(csv.DictReader((tmp_path / "progress.csv").open()))
    assert [float(r["custom/x"]) for r in rows] == [3.0, 10.0]


def test_an_eval_callback_state_is_checked_and_a_far_schedule_catches_up_at_once():
    callback = ars.EvalCallback("CartPole-v1")
    state = dict(callback.state_dict(), best_mean_reward=10**400)
    with pytest.raises(ValueError, match="the EvalCallback state must hold"):
        callback.load_state_dict(state)
    callback.load_state_dict(dict(state, best_mean_reward=-math.inf))  # its value before any
    callback.load_state_dict(dict(state, best_mean_reward=1e308))  # finite: a float's own
    far = ars.EvalCallback("CartPole-v1", eval_freq=1, n_eval_episodes=1)  # next: no loop to it
    far.load_state_dict(dict(far.state_dict(), next=-(10**15)))
    ARS("LinearPolicy", "CartPole-v1", n_delta=1, seed=0).learn(10, callback=far)
    assert len(far.evaluations) > 1 and far._next == far.evaluations[-1][0] + 1


# === Files: models, checkpoints, hostile files, demonstrations, sb3-contrib's files ===============


def test_save_load_predicts_identically_and_learn_continues(tmp_path):
    model = ARS(
        "LinearPolicy", "Pendulum-v1", n_delta=4, n_top=2, normalize_obs=True, seed=3
    ).learn(2000)
    path = model.save(tmp_path / "pendulum")
    assert path.name == "pendulum.zip"  # SB3's rule for a path without a suffix
    loaded = ARS.load(tmp_path / "pendulum")  # no env needed
    obs = np.stack([model.observation_space.sample() for _ in range(20)])
    np.testing.assert_array_equal(loaded.predict(obs)[0], model.predict(obs)[0])
    assert (
        loaded.policy.obs_rms.count == model.policy.obs_rms.count
        and loaded.num_timesteps == model.num_timesteps
    )
    # learn() continues from the saved weights, statistics and generator: same as never stopping.
    loaded.set_env("Pendulum-v1")
    model.learn(1000, reset_num_timesteps=False)
    loaded.learn(1000, reset_num_timesteps=False)
    assert np.array_equal(loaded.policy.parameters_to_vector(), model.policy.parameters_to_vector())
    assert np.array_equal(loaded.policy.obs_rms.var, model.policy.obs_rms.var)


def test_saved_file_is_plain_data(tmp_path):
    model = ARS(
        "MlpPolicy",
        "CartPole-v1",
        n_delta=2,
        seed=0,
        policy_kwargs=dict(net_arch=[4], activation_fn="tanh"),
    )
    path = model.save(tmp_path / "m.npz")
    with np.load(path, allow_pickle=False) as data:
        meta = json.loads(str(data["metadata"]))
        assert set(data.files) == {"parameters", "metadata"}  # V1: no statistics
    assert (
        meta["format"] == "ars-numpy"
        and meta["policy"] == "MlpPolicy"
        and meta["policy_kwargs"]["net_arch"] == [4]
    )
    assert meta["env_id"] == "CartPole-v1" and meta["observation_space"]["type"] == "Box"
    loaded = ARS.load(path)
    assert (
        loaded.policy.activation_fn == "tanh"
        and loaded.policy.net_arch == [4]
        and loaded.hparams["n_delta"] == 2
    )
    assert not list(tmp_path.glob(".*tmp"))  # the atomic write left no temporary file


def test_linear_policy_options_survive_save(tmp_path):
    model = ARS(
        "LinearPolicy",
        "Pendulum-v1",
        policy_kwargs=dict(with_bias=True, squash_output=True),
        zero_policy=False,
        seed=1,
    )
    loaded = ARS.load(model.save(tmp_path / "lin"))
    assert (
        type(loaded.policy) is ARSLinearPolicy
        and loaded.policy.with_bias
        and loaded.policy.squash_output
    )
    assert np.array_equal(loaded.policy.parameters_to_vector(), model.policy.parameters_to_vector())


def test_schedule_is_saved_as_its_value_with_a_warning(tmp_path):
    model = ARS("LinearPolicy", "CartPole-v1", learning_rate=lambda p: 0.1 * p, seed=0)
    path = model.save(tmp_path / "s")
    with pytest.warns(UserWarning, match="learning_rate was a schedule"):
        assert ARS.load(path).learning_rate == 0.1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ARS.load(path, learning_rate=0.5).learning_rate == 0.5


def test_set_parameters_checks_keys_and_shapes(tmp_path):
    model = ARS("LinearPolicy", "Pendulum-v1", normalize_obs=True, seed=0).learn(400)
    other = ARS("LinearPolicy", "Pendulum-v1", normalize_obs=True, seed=1)
    other.set_parameters(model.get_parameters())
    np.testing.assert_array_equal(other.predict(np.ones(3))[0], model.predict(np.ones(3))[0])
    other.set_parameters(model.save(tmp_path / "p"))
    params = model.get_parameters()
    assert sorted(params["policy"]) == [
        "action_net.0.weight",
        "obs_rms.count",
        "obs_rms.mean",
        "obs_rms.var",
    ]
    del params["policy"]["obs_rms.var"]
    with pytest.raises(RuntimeError, match=r"missing \['obs_rms.var'\]"):
        other.set_parameters(params)
    other.set_parameters({"policy": {"action_net.0.weight": np.ones((1, 3))}}, exact_match=False)
    assert (other.policy.parameters_to_vector() == 1).all()
    with pytest.raises(
        ValueError, match=r"'action_net.0.weight' has shape \(1, 4\); expected \(1, 3\)"
    ):
        other.set_parameters(
            {"policy": {"action_net.0.weight": np.ones((1, 4))}}, exact_match=False
        )
    with pytest.raises(RuntimeError, match="unknown"):
        other.set_parameters({"policy": {"action_net.9.weight": np.ones(1)}}, exact_match=False)
    with pytest.raises(ValueError, match="get_parameters"):
        other.set_parameters({"weights": 1})


def test_corrupt_or_foreign_files_give_clear_errors(tmp_path):
    model = ARS("LinearPolicy", "CartPole-v1", seed=0)
    good = model.save(tmp_path / "good.npz").read_bytes()
    (tmp_path / "truncated.npz").write_bytes(good[: len(good) // 2])
    (tmp_path / "garbage.npz").write_bytes(b"not a model at all" * 10)
    np.savez(tmp_path / "foreign.npz", weights=np.ones(3))
    np.savez(tmp_path / "pickled.npz", metadata=np.array([{"format": "ars-numpy"}], dtype=object))
    for name in ("truncated", "garbage", "pickled"):
        with pytest.raises(
            ValueError, match="not a readable ars model file|object arrays are never loaded"
        ):
            ARS.load(tmp_path / f"{name}.npz")
    with pytest.raises(
        ValueError, match="not a readable ars model file|not a model written by ars"
    ):
        ARS.load(tmp_path / "foreign.npz")
    with pytest.raises(FileNotFoundError):
        ARS.load(tmp_path / "missing.npz")


def test_loading_into_an_env_with_other_spaces_names_both(tmp_path):
    path = ARS("LinearPolicy", "CartPole-v1", seed=0).save(tmp_path / "cartpole")
    with pytest.raises(
        ValueError, match=r"the env has observation space Box.*\(3,\).*built for Box.*\(4,\)"
    ):
        ARS.load(path, env="Pendulum-v1")


@pytest.mark.slow
def test_checkpoint_resume_is_exact_in_one_process_and_with_async_eval(tmp_path):
    def model():
        return ARS("LinearPolicy", "Pendulum-v1", n_delta=4, n_top=2, normalize_obs=True, seed=21)

    straight = model().learn(6400)  # 4 iterations of 1600 steps
    first = model().learn(3200, default_root_dir=tmp_path / "a", checkpoint_interval=1)
    assert first.n_updates == 2 and (tmp_path / "a" / "checkpoint.npz").exists()
    resumed = ARS.load(tmp_path / "a" / "checkpoint.npz", env="Pendulum-v1")
    resumed.learn(6400 - resumed.num_timesteps, reset_num_timesteps=False)
    with AsyncEval([PENDULUM] * 2, resumed.policy, start_method="fork") as async_eval:
        parallel = ARS.load(tmp_path / "a" / "checkpoint.npz", env="Pendulum-v1")
        parallel.learn(
            6400 - parallel.num_timesteps, reset_num_timesteps=False, async_eval=async_eval
        )
    for other in (resumed, parallel):
        assert other.n_updates == straight.n_updates == 4
        _assert_same_weights(other, straight)
    rows = _rows(tmp_path / "a" / "progress.csv")
    assert [int(r["train/iterations"]) for r in rows] == [0, 1]
    with pytest.raises(ValueError, match="checkpoint_interval needs default_root_dir"):
        model().learn(100, checkpoint_interval=1)


@pytest.mark.slow
@pytest.mark.parametrize(
    "env_id,kwargs,budget",
    [
        ("CartPole-v1", dict(n_delta=2), 20_000),
        (
            "InvertedPendulum-v4",
            dict(
                n_delta=4,
                normalize_obs=True,
                policy_kwargs=dict(squash_output=True, with_bias=True),
            ),
            20_000,
        ),
    ],
)
def test_warm_start_from_demonstrations(env_id, kwargs, budget, tmp_path):
    if "Inverted" in env_id:
        pytest.importorskip("mujoco")
    expert = ARS("LinearPolicy", env_id, seed=0, **kwargs).learn(budget)
    expert_return, _ = ars.evaluate_policy(expert, env_id, 10, seed=7)
    observations, actions = record_demonstrations(expert, env_id)
    student = ARS("LinearPolicy", env_id, seed=1, **kwargs)
    assert ars.evaluate_policy(student, env_id, 10, seed=7)[0] < 0.5 * expert_return
    np.savez(tmp_path / "a.npz", observations=observations[:300], actions=actions[:300])
    np.savez(tmp_path / "b.npz", observations=observations[300:], actions=actions[300:])
    warm_start(student, tmp_path)  # a folder of trajectories
    student_return, _ = ars.evaluate_policy(student, env_id, 10, seed=7)
    assert student_return >= 0.8 * expert_return, (student_return, expert_return)
    if student.policy.obs_rms is not None:
        assert student.policy.obs_rms.count == len(observations)
    with pytest.raises(ValueError, match="linear policies"):
        warm_start(ARS("MlpPolicy", env_id), (observations, actions))
    np.savez(tmp_path / "bad.npz", obs=observations)
    with pytest.raises(ValueError, match="'observations' and 'actions'"):
        warm_start(student, tmp_path / "bad.npz")


def test_save_and_load_with_or_without_zip_and_file_objects(tmp_path):
    model = ARS("LinearPolicy", "Pendulum-v1", n_delta=2, normalize_obs=True, seed=0).learn(800)
    for saved, loaded in (("a", "a"), ("b", "b.zip"), ("c.zip", "c"), ("d.zip", "d.zip")):
        model.save(tmp_path / saved)
        other = ARS.load(
            tmp_path / loaded,
            custom_objects={"learning_rate": 0.5},
            print_system_info=False,
            force_reset=True,
            device="auto",
        )
        assert np.array_equal(
            other.policy.parameters_to_vector(), model.policy.parameters_to_vector()
        )
        assert other.learning_rate == 0.5
    buffer = io.BytesIO()
    model.save(buffer, exclude=["ep_info_buffer"])
    buffer.seek(0)
    other = ARS.load(buffer)
    assert (
        np.array_equal(other.policy.obs_rms.var, model.policy.obs_rms.var)
        and not other.ep_info_buffer
    )
    model.note = "tuned by hand"
    assert ARS.load(model.save(tmp_path / "e", include=["note"])).note == "tuned by hand"


def test_parameters_use_sb3_contrib_names_and_accept_torch_tensors(tmp_path):
    model = ARS(
        "MlpPolicy", "Pendulum-v1", policy_kwargs=dict(net_arch=[8]), zero_policy=False, seed=0
    )
    state = model.policy.state_dict()
    assert list(state) == [
        "action_net.0.weight",
        "action_net.0.bias",
        "action_net.2.weight",
        "action_net.2.bias",
    ]
    assert (
        state["action_net.0.weight"].shape == (8, 3)
        and model.get_parameters()["policy"].keys() == state.keys()
    )
    other = ARS("MlpPolicy", "Pendulum-v1", policy_kwargs=dict(net_arch=[8]), seed=1)
    torch = pytest.importorskip("torch")
    other.policy.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
    assert np.array_equal(other.policy.parameters_to_vector(), model.policy.parameters_to_vector())
    before = other.policy.parameters_to_vector()
    with pytest.raises(ValueError, match="shape"):  # all or nothing: a bad entry changes nothing
        other.set_parameters(
            {"policy": {"action_net.0.bias": np.zeros(8), "action_net.2.weight": np.zeros(3)}},
            exact_match=False,
        )
    assert np.array_equal(other.policy.parameters_to_vector(), before)
    model.policy.save(tmp_path / "policy")  # SB3's "advanced saving" example
    policy = ARSPolicy.load(tmp_path / "policy")
    np.testing.assert_array_equal(policy.predict(np.ones(3))[0], model.predict(np.ones(3))[0])
    linear = ARS(
        "LinearPolicy",
        "Pendulum-v1",
        policy_kwargs=dict(with_bias=True, squash_output=True),
        zero_policy=False,
    )
    linear.policy.save(tmp_path / "linear")
    again = ars.LinearPolicy.load(tmp_path / "linear")
    assert type(again) is ARSLinearPolicy and again.with_bias and again.squash_output


@pytest.mark.slow
def test_hostile_files_are_rejected_before_any_large_allocation(tmp_path):
    good = ARS("LinearPolicy", "CartPole-v1", seed=0)
    meta = ars._metadata(good)
    for space in ("observation_space", "action_space"):
        meta[space] = ars._space_to_json(getattr(good, space))
    huge = dict(meta, policy="MlpPolicy", policy_kwargs={"net_arch": [15000, 15000]})
    params = io.BytesIO()
    np.lib.format.write_array(params, np.zeros(8))
    _crafted(tmp_path / "huge.npz", huge, {"parameters.npy": params.getvalue()})
    bomb = b"\0" * (512 << 20)  # compresses to about 0.5 MB
    _crafted(
        tmp_path / "bomb.npz",
        meta,
        {"parameters.npy": params.getvalue(), "extra.npy": bomb},
        compress=True,
    )
    _crafted(tmp_path / "bomb2.npz", meta, {"parameters.npy": bomb}, compress=True)
    wide = {"type": "Box", "low": -1, "high": 1, "shape": [10**7], "dtype": "float64"}
    spaces_10m = dict(meta, observation_space=wide, action_space=wide)  # 160 MB each if built
    _crafted(tmp_path / "spaces.npz", spaces_10m, {"parameters.npy": params.getvalue()})
    assert (tmp_path / "huge.npz").stat().st_size < 10_000
    for name in ("huge", "bomb", "bomb2", "spaces"):
        out = _peak_rss_of(f"ars.ARS.load({str(tmp_path / (name + '.npz'))!r})", tmp_path)
        assert "REJECTED" in out and int(out.split("GROWTH_KB")[1]) < 100_000, (name, out)


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("hparams", {"tensorboard_log": "/etc"}, "may not set"),
        ("hparams", {"n_delta": "8"}, "n_delta must be an integer from 1"),
        ("hparams", {"n_delta": 10**15}, "n_delta must be an integer from 1"),
        ("hparams", {"normalize_obs": True}, "normalize_obs is True; the file lacks"),
        ("num_timesteps", -5, "'num_timesteps' must be an integer >= 0"),
        ("policy_kwargs", {"net_arch": "64"}, "net_arch"),
        (
            "observation_space",
            {"type": "Box", "low": 0, "high": 1, "shape": [10**6, 10**6], "dtype": "float32"},
            "has 1,000,000,000,000 elements",
        ),
        (
            "observation_space",
            {"type": "Discrete", "n": 10**7},
            "20,000,000 weights: ars takes up to",
        ),
        ("action_space", {"type": "Discrete", "n": 10**12}, "sizes must be integers"),
        ("policy", "CnnPolicy", "policy must be one of"),
        ("format_version", 0, "'format_version' must be a positive integer"),
        ("run_this", "os.system", r"fields ars does not know: \['run_this'\]"),
        ("included", {"learn": 1}, "'included' must be a dict of public attributes the model"),
        ("env_id", "os:system:CartPole-v1", r"an env id \('Hopper-v4', 'module:Env-v0'\)"),
        ("num_timesteps", 10**30, "'num_timesteps' must be an integer >= 0"),
        ("ep_info_buffer", [[1.0, 10**400]], "'ep_info_buffer' must be a list of"),
        ("included", {"policy": None}, "the model lacks .*; got {'policy': None}"),
        ("schedules", ["n_delta"], "'schedules' must be a list of learning_rate, delta_std"),
        ("schedules", [[1]], "'schedules' must be a list of learning_rate, delta_std"),
        ("policy_kwargs", {"with_bias": "x"}, "with_bias must be True or False"),
        # n_top above n_delta: clamped at every door (test_n_top_above_n_delta_is_clamped...)
    ],
)
def test_metadata_fields_of_the_wrong_type_name_the_file_and_field(tmp_path, field, value, message):
    good = ARS("LinearPolicy", "CartPole-v1", seed=0)
    path = good.save(tmp_path / "good.npz")
    with np.load(path, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    meta = json.loads(str(arrays["metadata"]))
    meta[field] = {**meta[field], **value} if field == "hparams" else value
    arrays["metadata"] = np.array(json.dumps(meta))
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(ValueError, match=f"bad.npz.*{message}"):
        ARS.load(tmp_path / "bad.npz")


def test_a_truncated_array_names_the_file(tmp_path):
    path = ARS("LinearPolicy", "CartPole-v1", seed=0).save(tmp_path / "good.npz")
    with zipfile.ZipFile(path) as archive:
        members = {n: archive.read(n) for n in archive.namelist()}
    members["parameters.npy"] = members["parameters.npy"][:-8]  # the header promises 8 more
    with zipfile.ZipFile(tmp_path / "short.npz", "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    with pytest.raises(ValueError, match="short.npz: parameters is truncated"):
        ARS.load(tmp_path / "short.npz")


def test_a_zip_naming_a_member_twice_is_refused(tmp_path):
    path = ARS("LinearPolicy", "CartPole-v1", seed=0).save(tmp_path / "good.npz")
    with zipfile.ZipFile(path) as archive:
        members = {n: archive.read(n) for n in archive.namelist()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns of the duplicate, and writes it
        with zipfile.ZipFile(tmp_path / "twice.npz", "w") as archive:
            for name, data in [*members.items(), ("parameters.npy", members["parameters.npy"])]:
                archive.writestr(name, data)
    with pytest.raises(ValueError, match="twice.npz holds two members named 'parameters.npy'"):
        ARS.load(tmp_path / "twice.npz")


def test_unparsable_metadata_and_nan_parameters_name_the_file(tmp_path):
    good = ARS("LinearPolicy", "CartPole-v1", seed=0)
    path = good.save(tmp_path / "good.npz")
    with np.load(path, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    for name, text in (("deep", "[" * 5_000), ("digits", '{"format": ' + "9" * 5000 + "}")):
        np.savez(tmp_path / f"{name}.npz", **dict(arrays, metadata=np.array(text)))
        with pytest.raises(ValueError, match=f"{name}.npz: the metadata is not valid JSON"):
            ARS.load(tmp_path / f"{name}.npz")
    np.savez(
        tmp_path / "nan.npz", **dict(arrays, parameters=np.full_like(arrays["parameters"], np.nan))
    )
    with pytest.raises(
        ValueError, match="nan.npz: 'action_net.0.weight' must be real numbers, no nan or inf"
    ):
        ARS.load(tmp_path / "nan.npz")
    good.note = [1, 2]
    good.save(tmp_path / "extra.npz", include=["note"])
    assert ARS.load(tmp_path / "extra.npz").note == [1, 2]
    with pytest.raises(ValueError, match="include='predict'.*part of every ARS model"):
        good.save(tmp_path / "bad.npz", include=["predict"])


def test_set_parameters_is_all_or_nothing_and_checks_statistics():
    model = ARS("LinearPolicy", "Pendulum-v1", normalize_obs=True, seed=0).learn(400)
    before = [a.copy() for a in _weights(model)]
    for bad in (
        {"obs_rms.var": -np.ones(3)},
        {"obs_rms.count": np.array(-1)},
        {"obs_rms.mean": np.full(3, np.nan)},
    ):
        params = model.get_parameters()
        params["policy"]["action_net.0.weight"] = np.ones((1, 3))
        params["policy"].update(bad)
        with pytest.raises(ValueError):
            model.set_parameters(params)
        _assert_same_weights(model, before)


def test_a_full_disk_is_a_clear_error_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    model = ARS("LinearPolicy", "CartPole-v1", seed=0)

    def no_space(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savez", no_space)
    with pytest.raises(OSError, match="could not write .*m.zip: No space left on device"):
        model.save(tmp_path / "m")
    assert list(tmp_path.iterdir()) == []


def test_names_up_to_the_file_systems_limit_save_and_overflows_are_named(tmp_path):
    model = ARS("LinearPolicy", "CartPole-v1", seed=0)
    name = "é" * 100 + "m" * 51 + ".npz"  # 255 bytes in UTF-8
    assert len(name.encode()) == 255 and ARS.load(model.save(tmp_path / name))
    huge = ARS("LinearPolicy", Scaled("Pendulum-v1", obs=1e160), normalize_obs=True, n_delta=1)
    with pytest.raises(FloatingPointError, match="non-finite variance of the observations: scale"):
        huge.learn(400)
    rich = ARS("LinearPolicy", Scaled("Pendulum-v1", reward=1e200), n_delta=2, delta_std=0.5)
    assert np.isfinite(rich.learn(2000).policy.parameters_to_vector()).all()  # scaled first
    shifted = ARS("LinearPolicy", "Pendulum-v1", n_delta=2, alive_bonus_offset=1e307)
    with pytest.raises(FloatingPointError, match="sigma_R overflows: scale down the rewards"):
        shifted.learn(2000)  # finite rewards, but each return with its shift is past float64
    assert not shifted.policy.parameters_to_vector().any()


def test_saved_files_get_the_permissions_the_umask_allows(tmp_path):
    old = os.umask(0o022)
    try:
        path = ARS("LinearPolicy", "CartPole-v1", seed=0).save(tmp_path / "m")
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o644


def test_bad_demonstrations_are_refused():
    model = ARS("LinearPolicy", "CartPole-v1", seed=0)
    observations, actions = np.zeros((3, 4)), np.array([0, 1, 0])
    with pytest.raises(ValueError, match="non-finite"):
        warm_start(model, (np.full((3, 4), np.nan), actions))
    with pytest.raises(ValueError, match="actions must be integers in Discrete"):
        warm_start(model, (observations, np.array([0, -1, 1])))
    with pytest.raises(ValueError, match="actions must lie in Box"):
        warm_start(ARS("LinearPolicy", "Pendulum-v1"), (np.zeros((2, 3)), np.array([[0.0], [5.0]])))


def test_a_models_public_state_is_the_one_a_files_extras_may_never_replace(tmp_path):
    """MODEL_STATE lists the public attributes every model has; include= of one, or a file's
    extra of one, is refused, and an extra of the user's goes and comes back."""
    model = ARS("LinearPolicy", "CartPole-v1", n_delta=2, seed=0).learn(100)
    assert {k for k in vars(model) if not k.startswith("_")} == set(ars.MODEL_STATE)
    for name in ("gym_env", "policy_class", "hparams_initial", "learn"):
        with pytest.raises(ValueError, match="part of every ARS model"):
            model.save(tmp_path / "m", include=[name])
    model.save(tmp_path / "m", include=["n_delta", "env_id"])  # saved anyway: no extra
    model.tag = {"run": 7}
    assert ARS.load(model.save(tmp_path / "m", include=["tag"])).tag == {"run": 7}


def test_review_fixes_include_exclude_and_small_sb3_habits(tmp_path):
    model = ARS("LinearPolicy", "Pendulum-v1", n_delta=2, seed=0, learning_rate=0.5)
    loaded = ARS.load(model.save(tmp_path / "f", include=["n_delta"], exclude=["learning_rate"]))
    assert loaded.n_delta == 2 and loaded.learning_rate == 0.02  # excluded: loads as its default
    with pytest.raises(ValueError, match="no policy yet"):
        ARS("LinearPolicy", n_delta=8).get_parameters()
    np.testing.assert_array_equal(model.policy(np.ones(3)), model.policy.forward(np.ones(3)))
    torch = pytest.importorskip("torch")
    action, _ = ARS("LinearPolicy", "CartPole-v1").predict(torch.zeros(4))
    assert isinstance(action, torch.Tensor) and action.shape == ()


def test_include_wins_over_exclude_strict_mismatch_is_runtime_error_and_policy_to(tmp_path):
    model = ARS("LinearPolicy", "Pendulum-v1", seed=0, verbose=1, learning_rate=0.5)
    path = model.save(tmp_path / "m", exclude=["verbose", "learning_rate"], include=["verbose"])
    loaded = ARS.load(path)
    assert loaded.verbose == 1 and loaded.learning_rate == 0.02  # as in SB3: include wins
    params = model.get_parameters()
    params["policy"]["action_net.7.weight"] = np.zeros(1)
    with pytest.raises(RuntimeError, match=r"unknown \['action_net.7.weight'\]"):
        loaded.set_parameters(params)  # torch's load_state_dict raises RuntimeError, as SB3's
    del params["policy"]["action_net.7.weight"], params["policy"]["action_net.0.weight"]
    with pytest.raises(RuntimeError, match=r"missing \['action_net.0.weight'\]"):
        loaded.set_parameters(params, exact_match=True)
    policy = ARSPolicy.load(path)
    assert policy.to("cpu") is policy and policy.to("auto") is policy
    torch = pytest.importorskip("torch")
    assert ARSPolicy.load(path).to(torch.device("cpu")).predict(np.ones(3))[0].shape == (1,)
    with pytest.raises(ValueError, match="device must be"):
        policy.to(3)


def test_load_takes_custom_objects_as_sb3_does_and_del_env_works(tmp_path):
    """rl-baselines3-zoo's enjoy passes custom_objects for every algorithm (lr_schedule,
    clip_range: ignored, as the file holds none; learning_rate: replaced, and checked), and
    its optimizer runs ``del model.env``; a constant schedule is saved as its number without
    a warning at every load."""
    utils = pytest.importorskip("stable_baselines3.common.utils")
    model = ARS("LinearPolicy", "CartPole-v1", n_delta=2, seed=0)
    model.learning_rate = utils.ConstantSchedule(0.03)
    path = model.learn(200).save(tmp_path / "m")
    zoo = {"learning_rate": 0.0, "lr_schedule": lambda _: 0.0, "clip_range": lambda _: 0.0}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "was a schedule" warning for a constant one
        loaded = ARS.load(path, custom_objects=zoo)
        assert ARS.load(path).learning_rate == 0.03
    assert loaded.learning_rate == 0.0 and not hasattr(loaded, "lr_schedule")
    with pytest.raises(ValueError, match="learning_rate must be a number >= 0"):
        ARS.load(path, custom_objects={"learning_rate": -1.0})
    wider = spaces.Box(-10, 10, (4,), np.float32)  # the file's other fields too, as SB3's
    loaded = ARS.load(path, custom_objects={"num_timesteps": 7, "observation_space": wider})
    assert loaded.num_timesteps == 7 and loaded.observation_space == wider
    with pytest.raises(ValueError, match="custom_objects\\['n_updates'\\] cannot be -1"):
        ARS.load(path, custom_objects={"n_updates": -1})
    assert ARS.load(path, custom_objects={"n_delta": 4}, n_delta=6).n_delta == 6  # SB3's order
    del model.env
    assert model.env is None and model.gym_env is None


@pytest.mark.slow
def test_sb3_contribs_async_eval_is_accepted_and_gives_ars_weights():
    """rl-baselines3-zoo hands sb3-contrib's AsyncEval to learn for n_envs > 1: accepted, and
    the weights are those of ars alone (its workers cannot seed each episode)."""
    async_eval = pytest.importorskip("sb3_contrib.common.vec_env.async_eval")
    vec_env = pytest.importorskip("stable_baselines3.common.vec_env")
    make = lambda: vec_env.DummyVecEnv([lambda: gym.make("Pendulum-v1")])  # noqa: E731
    alone = ARS("LinearPolicy", "Pendulum-v1", n_delta=2, normalize_obs=True, seed=4)
    model = ARS("LinearPolicy", "Pendulum-v1", n_delta=2, normalize_obs=True, seed=4)
    theirs = async_eval.AsyncEval([make, make], model.policy, start_method="fork")
    try:
        model.learn(1600, async_eval=theirs)
    finally:
        theirs.close()
    _assert_same_weights(_weights(model), _weights(alone.learn(1600)))
    with pytest.raises(TypeError, match="async_eval must be an AsyncEval or ExecutorEval"):
        model.learn(100, async_eval=object())


@pytest.mark.slow
def test_rl_zoo_trains_continues_enjoys_and_optimizes_with_ars(tmp_path):
    """examples/rl_zoo.py: the docs' rl-baselines3-zoo lines (train, enjoy, a two-trial
    -optimize) run as written, one after the other, on CartPole and small budgets, to the end
    and quietly; train's weights are ARS(...).learn's with the same settings and seed, and
    -i continues a trained model with n_envs 2."""
    pytest.importorskip("rl_zoo3")
    docs = (HERE / "docs" / "python-api.md").read_text().split("### rl-baselines3-zoo")[1]
    lines = docs.split("```bash\n")[1].split("```")[0].splitlines()  # train, enjoy, -optimize
    first = ["-n", "2000", "--seed", "0", "--eval-freq", "500", "--save-freq", "1000"]
    optimize = ["-n", "1000", "--n-evaluations", "2", "--eval-episodes", "2"]
    for line in lines:
        words = line.replace("Hopper-v4", "CartPole-v1").replace("50", "2").split()[1:]
        words[0] = str(HERE / words[0])  # examples/rl_zoo.py of this checkout
        extra = {"train": first, "enjoy": ["-n", "300"]}[words[1]]
        done = _run([*words, *(optimize if "-optimize" in words else extra)], tmp_path)
        assert done.returncode == 0 and "warning" not in done.stderr.lower(), done.stderr[-500:]
        if "-optimize" in words:
            assert "Number of finished trials:  2" in done.stdout, done.stdout[-500:]
        elif words[1] == "train":  # then the trained model, continued with n_envs 2
            run = tmp_path / "logs" / "ars" / "CartPole-v1_1"
            plain = ARS("LinearPolicy", "CartPole-v1", n_delta=2, seed=0).learn(2000)
            trained = ARS.load(run / "CartPole-v1.zip").policy.parameters_to_vector()
            np.testing.assert_array_equal(trained, plain.policy.parameters_to_vector())
            more = [*words, "-n", "1000", "-params", "n_envs:2", "-i", str(run / "CartPole-v1.zip")]
            assert _run(more, tmp_path).returncode == 0


@pytest.mark.slow
@pytest.mark.parametrize(
    "policy,kwargs,env_id",
    [
        ("LinearPolicy", dict(with_bias=True), "Pendulum-v1"),
        ("MlpPolicy", dict(net_arch=[8]), "CartPole-v1"),
        ("MlpPolicy", dict(net_arch=[8, 8]), "Pendulum-v1"),
    ],
)
def test_a_model_saved_by_sb3_contrib_loads_and_predicts_the_same_actions(
    tmp_path, policy, kwargs, env_id
):
    sb3_contrib = pytest.importorskip("sb3_contrib")
    theirs = sb3_contrib.ARS(
        policy, env_id, n_delta=2, delta_std=0.07, seed=3, policy_kwargs=kwargs, zero_policy=False
    )
    theirs.learn(600)
    theirs.save(tmp_path / "theirs")
    ours = ARS.load(tmp_path / "theirs")  # SB3's rule: .zip added
    assert (ours.n_delta, ours.delta_std, ours.num_timesteps) == (2, 0.07, theirs.num_timesteps)
    env = gym.make(env_id)
    obs = np.stack([env.observation_space.sample() for _ in range(50)])
    np.testing.assert_allclose(
        ours.predict(obs)[0], theirs.predict(obs, deterministic=True)[0], atol=1e-5
    )
    ours.set_env(env_id)
    ours.learn(400)  # and training goes on from their weights


def test_sb3_contrib_files_need_torch_and_say_so_in_one_line(tmp_path, monkeypatch):
    """sb3-contrib's weights are torch's: without torch, one line names the install; every
    other door of a file (set_parameters, ARSPolicy.load, --eval) reads them as ARS.load."""
    sb3_contrib = pytest.importorskip("sb3_contrib")
    theirs = sb3_contrib.ARS("LinearPolicy", "Pendulum-v1", seed=1, zero_policy=False)
    theirs.save(tmp_path / "theirs")
    obs = np.ones((2, 3), np.float32)
    expected = theirs.predict(obs, deterministic=True)[0]
    np.testing.assert_allclose(ARSPolicy.load(tmp_path / "theirs.zip").predict(obs)[0], expected)
    model = ARS("LinearPolicy", "Pendulum-v1", seed=0)
    model.set_parameters(tmp_path / "theirs.zip")
    np.testing.assert_allclose(model.predict(obs)[0], expected)
    done = _cli(tmp_path, "--eval", "theirs.zip", "--env", "Pendulum-v1", "--eval-episodes", "1")
    assert done.returncode == 0 and "mean return" in done.stdout, done.stderr
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(ModuleNotFoundError, match=r'pip install "ars-numpy\[torch\]"'):
        ARS.load(tmp_path / "theirs")


def test_sb3_contrib_files_load_whatever_the_size_of_their_pickled_weights(tmp_path):
    sb3_contrib = pytest.importorskip("sb3_contrib")
    kwargs = dict(net_arch=[1024, 1024])  # 1M parameters: data pickles 5.6 MB of weights
    theirs = sb3_contrib.ARS("MlpPolicy", "Pendulum-v1", policy_kwargs=kwargs, zero_policy=False)
    theirs.save(tmp_path / "big")
    obs = np.stack([theirs.observation_space.sample() for _ in range(8)])
    expected = theirs.predict(obs, deterministic=True)[0]
    ours = ARS.load(tmp_path / "big.zip")
    np.testing.assert_allclose(ours.predict(obs)[0], expected, atol=1e-5)


def test_hostile_sb3_contrib_files_are_refused_in_one_line(tmp_path):
    sb3_contrib = pytest.importorskip("sb3_contrib")
    torch = pytest.importorskip("torch")
    source = tmp_path / "theirs.zip"
    sb3_contrib.ARS("LinearPolicy", "Pendulum-v1", zero_policy=False, seed=0).save(source)
    weight = torch.zeros((1, 3))
    cases = {  # name: (data changes, policy.pth, the error)
        "bomb": ({}, _pth({"action_net.weight": torch.zeros(30_000_000)}, True), "more than 3 w"),
        "nan": ({}, _pth({"action_net.weight": torch.full((1, 3), float("nan"))}), "no nan or inf"),
        "complex": ({}, _pth({"action_net.weight": weight.to(torch.complex64)}), "float tensors"),
        "shape": ({}, _pth({"action_net.weight": torch.zeros((3, 1))}), "has shape"),
        "int": ({}, _pth({"action_net.weight": weight.long()}), "float tensors"),
        "updates": ({"_n_updates": -5}, None, "counters must be integers >= 0"),
        "n_delta": ({"n_delta": 10**9}, None, "n_delta must be an integer from 1"),
        "n_top": ({"n_top": 0}, None, "n_top must be an integer from 1"),
        "seed": ({"seed": -1}, None, "seed must be an integer from 0"),
        "code": ({}, b"not a zip", "policy.pth is not a readable weights file"),
        "schedule": ({"lr_schedule": {"value_schedule": "Constant(val=nan)"}}, None, "learning_r"),
        "space": ({"observation_space": {":type:": "<class 'gym.Dict'>"}}, None, "Box or Discrete"),
        "env": ({"observation_space": {"low": "[...]", "_shape": [7]}}, None, "pass env="),
        "subarray": ({"observation_space": {"dtype": "(100000000,)f8"}}, None, "numeric dtype"),
        "void": ({"observation_space": {"dtype": "V1000000000"}}, None, "numeric dtype"),
        "wide": ({"observation_space": {"_shape": [10**8]}}, None, "up to 10,000,000 numbers"),
        "long": ({"observation_space": {"low": "0 " * 10**6}}, None, "bounds longer than its 3"),
        "n": (
            {
                "action_space": {
                    ":type:": "<class 'gymnasium.spaces.discrete.Discrete'>",
                    "n": "1e30",
                }
            },
            None,
            "count n >= 1",
        ),
        "stride": ({}, _pth({"action_net.weight": torch.zeros(1).expand(10**8)}), "more than 3 w"),
        "param": ({}, _pth({"action_net.weight": torch.nn.Parameter(weight)}), None),
    }
    for name, (data, pth, message) in cases.items():
        _sb3_file(tmp_path / f"{name}.zip", source, data, pth)
        if message is None:  # a Parameter's weights load as any tensor's
            assert ARS.load(tmp_path / f"{name}.zip").policy.n_params == 3
            continue
        with pytest.raises(ValueError) as error:
            ARS.load(tmp_path / f"{name}.zip")
        assert message in str(error.value) and "\n" not in str(error.value), (name, error.value)
        assert str(error.value).startswith(str(tmp_path / f"{name}.zip")), name


def test_an_sb3_contrib_file_at_the_parameter_cap_is_refused_before_its_tensors_inflate(
    tmp_path,
):
    """A small crafted file whose one tensor is a view of a single number repeated to the
    network's millions of parameters: refused with under 100 MB of memory beyond the env's."""
    sb3_contrib = pytest.importorskip("sb3_contrib")
    torch = pytest.importorskip("torch")
    source = tmp_path / "theirs.zip"
    sb3_contrib.ARS("LinearPolicy", "Pendulum-v1", zero_policy=False, seed=0).save(source)
    wide = {"_shape": [9_999_999], "low": "[...]", "high": "[...]", "low_repr": "-1.0"}
    wide.update(high_repr="1.0", bounded_below="[...]", bounded_above="[...]")
    view = _pth({"action_net.weight": torch.zeros(1).expand(9_999_999)})  # the count: N
    _sb3_file(tmp_path / "cap.zip", source, {"observation_space": wide}, view)
    assert (tmp_path / "cap.zip").stat().st_size < 100_000
    env = "gymnasium.spaces.Box(-1.0, 1.0, (9_999_999,)), gymnasium.spaces.Box(-1.0, 1.0, (3,))"
    code = (
        "import gymnasium, torch; env = gymnasium.make('Pendulum-v1'); "  # torch's own apart
        f"env.observation_space, env.action_space = {env}; "
        f"ars.ARS.load({str(tmp_path / 'cap.zip')!r}, env=env)"
    )
    env_alone = int(_peak_rss_of(code.rsplit(";", 1)[0], tmp_path).split("GROWTH_KB")[1])
    out = _peak_rss_of(code, tmp_path)
    assert "REJECTED" in out and "more numbers than its storage holds" in out, out
    assert int(out.split("GROWTH_KB")[1]) - env_alone < 100_000, (out, env_alone)


def test_sb3_contrib_members_are_read_within_their_bound_whatever_their_header_says(tmp_path):
    """bzip2, LZMA and encrypted members are refused (Python inflates the first two without a
    bound); a deflated member larger than its header says is read no further than the header
    (zipfile's own bound), and refused in one line."""
    sb3_contrib = pytest.importorskip("sb3_contrib")
    source = tmp_path / "theirs.zip"
    sb3_contrib.ARS("LinearPolicy", "Pendulum-v1", zero_policy=False, seed=0).save(source)
    _sb3_file(tmp_path / "bz.zip", source, compress=zipfile.ZIP_BZIP2)
    with pytest.raises(ValueError, match=r"bz.zip: member \w+ is compressed with method 12"):
        ARS.load(tmp_path / "bz.zip")
    with zipfile.ZipFile(source) as archive:
        members = {n: archive.read(n) for n in archive.namelist()}
    members["data"] = members["data"][:-1] + b" " * (200 << 20) + b"}"  # 200 MB of blanks
    with zipfile.ZipFile(tmp_path / "lie.zip", "w", zipfile.ZIP_DEFLATED) as z:
        for name, content in members.items():
            z.writestr(name, content)
    raw = bytearray((tmp_path / "lie.zip").read_bytes())  # the headers' size of data: 7,000
    for header in (b"PK\x03\x04", b"PK\x01\x02"):  # the local and the central headers
        at = raw.find(header)
        while at >= 0:
            offset = 22 if header == b"PK\x03\x04" else 24
            name_at = 30 if header == b"PK\x03\x04" else 46
            if raw[at + name_at : at + name_at + 4] == b"data":
                raw[at + offset : at + offset + 4] = (7000).to_bytes(4, "little")
            at = raw.find(header, at + 4)
    (tmp_path / "lie.zip").write_bytes(bytes(raw))
    with pytest.raises(ValueError, match=r"lie.zip is not a readable .*Bad CRC-32 for file 'data'"):
        ARS.load(tmp_path / "lie.zip")
    raw = bytearray(source.read_bytes())
    at = raw.find(b"PK\x01\x02")
    while (
        raw[at + 46 : at + 50] != b"data" or int.from_bytes(raw[at + 28 : at + 30], "little") != 4
    ):
        at = raw.find(b"PK\x01\x02", at + 4)  # data's central entry (policy.pth holds a zip too)
    raw[at + 8] |= 0x1  # flagged encrypted
    (tmp_path / "locked.zip").write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="locked.zip: member .* is encrypted"):
        ARS.load(tmp_path / "locked.zip")


def test_a_pickle_that_names_anything_else_is_refused_without_running_it(tmp_path):
    class Boom:
        def __reduce__(self):
            return (os.system, ("touch " + str(tmp_path / "ran"),))

    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as z:
        z.writestr("archive/data.pkl", pickle.dumps({"action_net.weight": Boom()}, protocol=2))
    sb3_contrib = pytest.importorskip("sb3_contrib")
    sb3_contrib.ARS("LinearPolicy", "Pendulum-v1").save(tmp_path / "theirs.zip")
    _sb3_file(tmp_path / "evil.zip", tmp_path / "theirs.zip", pth=inner.getvalue())
    with pytest.raises(ValueError, match=r"evil.zip: its policy.pth is not a readable weights"):
        ARS.load(tmp_path / "evil.zip")
    assert not (tmp_path / "ran").exists()


def test_sb3_contrib_boxes_of_abbreviated_bounds_load_with_env(tmp_path):
    sb3_contrib = pytest.importorskip("sb3_contrib")
    big = gym.wrappers.TimeLimit(WideEnv(1500), 5)
    theirs = sb3_contrib.ARS("LinearPolicy", big, zero_policy=False, seed=0)
    theirs.save(tmp_path / "wide.zip")
    data = json.loads(zipfile.ZipFile(tmp_path / "wide.zip").read("data"))
    assert "..." in data["observation_space"]["low"]
    with pytest.raises(ValueError, match=r"wide.zip: its observation_space has abbreviated .*env="):
        ARS.load(tmp_path / "wide.zip")
    ours = ARS.load(tmp_path / "wide.zip", env=big)
    big.observation_space.seed(0)
    obs = big.observation_space.sample()  # 1,500 inputs: torch's float32 sum drifts by ~1e-5
    np.testing.assert_allclose(
        ours.predict(obs)[0], theirs.predict(obs, deterministic=True)[0], atol=1e-4
    )
    ours.save(tmp_path / "ours.npz")  # converted: ars's own file, for --eval and ARS.load
    (tmp_path / "wide_env.py").write_text(
        "import gymnasium as gym, conftest\n"
        "gym.register('Wide-v0', lambda: gym.wrappers.TimeLimit(conftest.WideEnv(1500), 5))\n"
    )
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{HERE}")
    for model in ("ours.npz", "wide.zip"):  # sb3-contrib's own too: --env gives the bounds
        args = [str(HERE / "ars.py"), "--eval", model, "--env", "wide_env:Wide-v0"]
        result = _run([*args, "--eval-episodes", "1"], tmp_path, env=env)
        assert result.returncode == 0 and "mean return" in result.stdout, result.stderr


def test_an_sb3_contrib_files_schedule_warns_and_loads_as_the_default(tmp_path):
    sb3_contrib = pytest.importorskip("sb3_contrib")
    sb3_contrib.ARS("LinearPolicy", "Pendulum-v1", learning_rate=lambda p: 0.05 * p).save(
        tmp_path / "s"
    )
    with pytest.warns(UserWarning, match="learning_rate is a schedule ars does not read"):
        assert ARS.load(tmp_path / "s.zip").learning_rate == 0.02


# === Torch interop ================================================================================


@pytest.mark.parametrize(
    "env_id,policy,kwargs",
    [
        ("Pendulum-v1", "LinearPolicy", {}),
        ("Pendulum-v1", "MlpPolicy", dict(net_arch=[8], activation_fn="tanh")),
        ("CartPole-v1", "MlpPolicy", dict(net_arch=[8])),
    ],
)
def test_torch_interop(env_id, policy, kwargs):
    torch = pytest.importorskip("torch")
    model = ARS(
        policy,
        env_id,
        n_delta=2,
        normalize_obs=True,
        zero_policy=False,
        policy_kwargs=kwargs,
        seed=0,
    ).learn(600)
    obs = np.stack([model.observation_space.sample() for _ in range(32)])
    module = model.policy.to_torch()  # back in ars.py (issue 43)
    assert isinstance(module, torch.nn.Module) and isinstance(module, ars.TorchPolicy)
    expected = model.predict(obs)[0]
    np.testing.assert_allclose(module(torch.as_tensor(obs)).detach().numpy(), expected, atol=1e-6)
    copy = pickle.loads(pickle.dumps(module))  # by the name ars.TorchPolicy
    np.testing.assert_allclose(copy(torch.as_tensor(obs)).detach().numpy(), expected, atol=1e-6)
    np.testing.assert_allclose(model.predict(torch.as_tensor(obs))[0], expected)
    theta = torch.as_tensor(model.policy.parameters_to_vector())
    model.policy.load_from_vector(theta)
    returns = model.evaluate_candidates(torch.stack([theta, theta]), None, None)
    assert returns.shape == (2,)
    if policy == "LinearPolicy":
        assert isinstance(
            ARS("LinearPolicy", env_id, device=torch.device("cpu")).policy, ARSLinearPolicy
        )
        assert (
            ARSPolicy(
                model.observation_space, model.action_space, activation_fn=torch.nn.ReLU
            ).activation_fn
            == "relu"
        )


# === The command line: runs, interrupts, resume ==================================================


@pytest.mark.slow
def test_cli_trains_cartpole_saves_and_evaluates(tmp_path):
    result = _run([str(HERE / "ars.py"), "--seed", "0"], tmp_path)
    assert result.returncode == 0, result.stderr
    run_dir = next((tmp_path / "runs").iterdir())
    assert run_dir.name.startswith("CartPole-v1-")
    assert {p.name for p in run_dir.iterdir()} == {
        "model.npz",
        "best_model.npz",
        "checkpoint.npz",
        "progress.csv",
        "config.json",
    }
    config = json.loads((run_dir / "config.json").read_text())
    assert config["n_delta"] == 2 and config["seed"] == 0 and config["total_timesteps"] == 50_000
    assert "evaluation: mean return 500.00" in result.stdout
    result = _run([str(HERE / "ars.py"), "--eval", str(run_dir / "model.npz")], tmp_path)
    assert result.returncode == 0 and "CartPole-v1: mean return 500.00" in result.stdout, (
        result.stderr
    )


def test_the_tuned_preset_is_the_command_lines_default_where_it_beat_the_papers(tmp_path, capsys):
    """Swimmer's tuned settings (benchmarks/results/tuned.md) by default; the paper's one flag
    away, and everywhere no tuned preset exists; the preset is part of the run's config."""
    tuned = ars.settings_for("Swimmer-v4", "tuned")
    assert {k: tuned[k] for k in ars.TUNED_SETTINGS["Swimmer"]} == ars.TUNED_SETTINGS["Swimmer"]
    assert ars.settings_for("Swimmer-v4") == tuned  # every door's default
    assert ars.settings_for("Swimmer-v4", "paper") == {
        **ars.GENERIC_SETTINGS,
        **ars.PAPER_SETTINGS["Swimmer"],
    }
    assert ars.settings_for("Hopper-v4", "tuned") == ars.settings_for("Hopper-v4", "paper")
    with pytest.raises(ValueError, match=r"preset must be one of \['tuned', 'paper'\]"):
        ars.settings_for("Swimmer-v4", "fast")
    for preset, n_delta in (("tuned", 3), ("paper", 1)):
        run = tmp_path / preset
        flags = ["--env", "CartPole-v1", "--total-timesteps", "50", "--eval-episodes", "1"]
        assert ars.main([*flags, "--preset", preset, "--run-dir", str(run)]) == 0
        assert json.loads((run / "config.json").read_text())["preset"] == preset
        args = ars._parse_args(["--env", "Swimmer-v4", "--preset", preset])
        assert ars.settings_for(args.env, args.preset)["n_delta"] == n_delta
    capsys.readouterr()
    for run, other in (("tuned", "paper"), ("paper", "tuned")):  # either way: refused
        assert ars.main(["--resume", str(tmp_path / run), "--preset", other]) == 2
        assert (
            f"--preset cannot change on --resume (the run has '{run}')" in capsys.readouterr().err
        )
    assert ars.main(["--eval", str(tmp_path / "paper" / "model.npz"), "--preset", "paper"]) == 2
    assert "--eval takes the model's settings" in capsys.readouterr().err
    default = tmp_path / "default"
    assert ars.main([*flags, "--run-dir", str(default)]) == 0
    assert json.loads((default / "config.json").read_text())["preset"] == "tuned"


@pytest.mark.slow
def test_cli_mujoco_uses_the_papers_settings_without_warning_noise(tmp_path):
    pytest.importorskip("mujoco")
    result = _run(
        [
            str(HERE / "ars.py"),
            "--env",
            "Hopper-v4",
            "--total-timesteps",
            "2000",
            "--run-dir",
            "out",
            "--eval-episodes",
            "2",
        ],
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert (
        config["learning_rate"],
        config["delta_std"],
        config["n_delta"],
        config["n_top"],
        config["alive_bonus_offset"],
    ) == (0.01, 0.025, 8, 4, -1)
    assert config["normalize_obs"] is True
    assert (
        "out of date" not in result.stdout + result.stderr
        and "DeprecationWarning" not in result.stderr
    )
    assert "evaluation: mean return" in result.stdout
    result = _run(
        [
            str(HERE / "ars.py"),
            "--env",
            "HalfCheetah-v5",
            "--n-delta",
            "2",
            "--total-timesteps",
            "1000",
            "--run-dir",
            "hc",
            "--eval-episodes",
            "1",
        ],
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "hc" / "config.json").read_text())["delta_std"] == 0.03


@pytest.mark.slow
def test_cli_help_documents_every_flag(tmp_path):
    result = _run([str(HERE / "ars.py"), "--help"], tmp_path)
    assert result.returncode == 0
    flags = [f for action in ars._parser()._actions for f in action.option_strings if f[:2] == "--"]
    assert len(flags) > 20
    for flag in flags:
        assert flag in result.stdout, flag


@pytest.mark.slow
def test_cli_without_mujoco_prints_the_install_line(tmp_path):
    result = _run(
        [str(HERE / "ars.py"), "--env", "Hopper-v4"], tmp_path, env=_blocker(tmp_path, ["mujoco"])
    )
    assert result.returncode == 2
    assert 'pip install "gymnasium[mujoco]"' in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow
def test_cli_workers_give_the_same_model(tmp_path):
    for workers in ("0", "2"):
        args = [
            str(HERE / "ars.py"),
            "--env",
            "Pendulum-v1",
            "--workers",
            workers,
            "--total-timesteps",
            "3000",
            "--seed",
            "0",
            "--run-dir",
            f"w{workers}",
            "--eval-episodes",
            "1",
        ]
        result = _run(args, tmp_path)
        assert result.returncode == 0, result.stderr
    assert "2 worker processes" in result.stdout
    a, b = ARS.load(tmp_path / "w0" / "model.npz"), ARS.load(tmp_path / "w2" / "model.npz")
    assert np.array_equal(a.policy.parameters_to_vector(), b.policy.parameters_to_vector())


@pytest.mark.slow
def test_cli_survives_sigkill_at_random_moments(tmp_path):
    """Kill the command line at random moments, resume each time: the uninterrupted model."""
    common = [
        "--env",
        "Pendulum-v1",
        "--n-delta",
        "2",
        "--total-timesteps",
        "400000",
        "--seed",
        "5",
        "--checkpoint-interval",
        "1",
        "--eval-freq",
        "100000",
        "--eval-episodes",
        "2",
        "--workers",
        "0",
    ]
    assert _run([str(HERE / "ars.py"), *common, "--run-dir", "straight"], tmp_path).returncode == 0
    rng = np.random.default_rng(0)
    process = subprocess.Popen(
        [sys.executable, str(HERE / "ars.py"), *common, "--run-dir", "killed"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    kills = 0
    for _ in range(3):
        time.sleep(rng.uniform(1.5, 3.0))
        if process.poll() is not None:
            break
        process.send_signal(signal.SIGKILL)
        process.wait()
        kills += 1
        assert (
            ARS.load(tmp_path / "killed" / "checkpoint.npz").num_timesteps > 0
        )  # the last checkpoint always loads
        process = subprocess.Popen(
            [sys.executable, str(HERE / "ars.py"), "--resume", "killed"],
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
    assert process.wait(timeout=240) == 0, process.stderr.read().decode()
    assert kills >= 2
    straight, killed = (
        ARS.load(tmp_path / "straight" / "model.npz"),
        ARS.load(tmp_path / "killed" / "model.npz"),
    )
    _assert_same_weights(killed, straight)
    rows = _rows(tmp_path / "killed" / "progress.csv")
    assert [int(r["train/iterations"]) for r in rows] == list(
        range(killed.n_updates)
    )  # no row lost or repeated


def test_warm_start_example_trains_from_demos_and_the_cli_flag_names_it(tmp_path, capsys):
    import warm_start as example

    expert = ARS("LinearPolicy", "CartPole-v1", n_delta=2, seed=0).learn(20_000)
    observations, actions = record_demonstrations(expert, "CartPole-v1")
    np.savez(tmp_path / "demos.npz", observations=observations, actions=actions)
    example.main(["--demos", str(tmp_path / "demos.npz"), "--save", str(tmp_path / "m")])
    final = float(capsys.readouterr().out.split("after training: mean return ")[1].split()[0])
    assert final >= 400 and ARS.load(tmp_path / "m.zip").num_timesteps > 0  # one iteration
    (tmp_path / "truncated.npz").write_bytes(b"PK\x03\x04 not a whole file")
    with pytest.raises(ValueError, match="not a readable .npz"):
        example.load_demonstrations(tmp_path / "truncated.npz")
    with contextlib.redirect_stderr(io.StringIO()) as err:
        assert ars.main(["--demos", "demos.npz"]) == 2  # argparse's status, returned
    assert "unrecognized arguments: --demos" in err.getvalue()


@pytest.mark.slow
@pytest.mark.parametrize(
    "args,message",
    [
        (["--total-timesteps", "inf"], "total_timesteps must be a number >= 0; got inf"),
        (["--eval-episodes", "0"], "at least 1"),
        (["--net-arch", "0"], "net_arch must be a list of layer sizes >= 1; got [0]"),
        (["--policy", "LinearPolicy", "--net-arch", "8"], "LinearPolicy's are"),
        (["--n-delta", "-3"], "n_delta must be an integer from 1 to 1,000,000; got -3"),
        (["--resume", "nowhere"], "no config.json"),
        (["--workers", "-1"], "from 0 to 1,024"),
        (["--workers", "5000"], "from 0 to 1,024"),
        (["--net-arch", "4,x"], "layer sizes >= 1; got [4, 'x']"),
        (["--env", ""], "needs an env id"),
        (["--verbose", "-3"], "verbose must be an integer from 0 to 2; got -3"),
        (["--n-delta", "10000000"], "n_delta must be an integer from 1 to 1,000,000"),
        (["--net-arch", "100000,100000"], "ars takes up to"),
        (["--video", "clip.gif"], "unrecognized arguments: --video clip.gif"),
    ],
)
def test_cli_mistakes_give_one_error_line_and_status_2(tmp_path, args, message):
    (tmp_path / "truncated.npz").write_bytes(b"PK\x03\x04 not a whole file")
    result = _run(
        [
            str(HERE / "ars.py"),
            *args,
            "--total-timesteps" if "--total-timesteps" not in args else "--seed",
            "100" if "--total-timesteps" not in args else "0",
        ],
        tmp_path,
    )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], result.stderr


@pytest.mark.slow
def test_cli_net_arch_selects_the_mlp(tmp_path):
    result = _run(
        [str(HERE / "ars.py"), "--net-arch", "8,8", "--total-timesteps", "2000", "--run-dir", "r"],
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "r" / "config.json").read_text())["policy"] == "MlpPolicy"
    assert ARS.load(tmp_path / "r" / "model.npz").policy.net_arch == [8, 8]


@pytest.mark.slow
def test_a_run_folder_is_never_overwritten_or_shared(tmp_path):
    common = ["--total-timesteps", "3000", "--seed", "1", "--run-dir", "r"]
    assert _cli(tmp_path, *common).returncode == 0
    before = (tmp_path / "r" / "model.npz").read_bytes()
    again = _cli(tmp_path, *common)
    assert (
        again.returncode == 2 and "--resume r" in again.stderr and "--overwrite" not in again.stderr
    )
    assert (tmp_path / "r" / "model.npz").read_bytes() == before
    assert _cli(tmp_path, *common, "--overwrite").returncode == 0
    rows = _rows(tmp_path / "r" / "progress.csv")
    assert [int(r["train/iterations"]) for r in rows] == list(
        range(len(rows))
    )  # one run's rows, not two
    slow = subprocess.Popen(
        [
            sys.executable,
            str(HERE / "ars.py"),
            "--env",
            "Pendulum-v1",
            "--total-timesteps",
            "10000000",
            "--run-dir",
            "busy",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        text=True,
    )
    slow.stdout.readline()
    while not (tmp_path / "busy" / "progress.csv").exists():
        time.sleep(0.05)
    second = _cli(tmp_path, "--resume", "busy")
    slow.send_signal(signal.SIGINT)
    slow.wait(timeout=120)
    assert second.returncode == 2 and "in use by pid" in second.stderr


def test_default_run_folders_never_collide(tmp_path):
    """Three runs started at once, two with the same seed: each gets a folder of its own."""
    args = [sys.executable, str(HERE / "ars.py"), "--total-timesteps", "500"]
    runs = [
        subprocess.Popen([*args, "--seed", seed], cwd=tmp_path, stderr=subprocess.PIPE, text=True)
        for seed in ("1", "1", "2")
    ]
    assert [run.wait(timeout=120) for run in runs] == [0, 0, 0], [r.stderr.read() for r in runs]
    folders = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert len(folders) == 3 and all(
        (tmp_path / "runs" / f / "model.npz").exists() for f in folders
    )
    assert sum(f.endswith("-seed1") or "-seed1-" in f for f in folders) == 2


@pytest.mark.slow
def test_interrupts_finish_or_discard_the_iteration_and_resume_is_exact(tmp_path):
    assert _cli(tmp_path, *COMMON, "--run-dir", "straight").returncode == 0
    for sig, said in (
        (signal.SIGINT, "finished the current iteration"),
        (signal.SIGTERM, "stopped at once"),
    ):
        run = f"interrupted{int(sig)}"
        process = subprocess.Popen(
            [sys.executable, str(HERE / "ars.py"), *COMMON, "--run-dir", run],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        progress = tmp_path / run / "progress.csv"
        while not progress.exists() or progress.read_text().count("\n") < 6:
            time.sleep(0.02)
        process.send_signal(sig)
        out, err = process.communicate(timeout=120)
        assert process.returncode == 128 + sig and said in out, err  # 130, 143: the shell's
        model, checkpoint = (
            ARS.load(tmp_path / run / "model.npz"),
            ARS.load(tmp_path / run / "checkpoint.npz"),
        )
        assert (
            model.n_updates == checkpoint.n_updates
            and model.num_timesteps == checkpoint.num_timesteps
        )
        assert _cli(tmp_path, "--resume", run).returncode == 0
        _same_files(tmp_path / "straight", tmp_path / run)


def test_ctrl_c_once_asks_to_stop_twice_stops_now():
    signals = (signal.SIGINT, signal.SIGTERM)
    before = [signal.getsignal(s) for s in signals]  # SIGINT: SIG_IGN if started by a shell's &
    interrupts = ars._Interrupts()
    try:
        with pytest.raises(KeyboardInterrupt):  # before training: at once
            interrupts._handle(signal.SIGINT, None)
        interrupts.phase, interrupts.discarded = "training", False
        interrupts._handle(signal.SIGINT, None)
        assert interrupts.requested and not interrupts.discarded
        with pytest.raises(KeyboardInterrupt):
            interrupts._handle(signal.SIGINT, None)
        interrupts.phase = "saving"  # while the final files are written, a signal is only noted
        interrupts._handle(signal.SIGTERM, None)
        assert interrupts.status() == 143
    finally:
        interrupts.restore()
    assert [signal.getsignal(s) for s in signals] == before


@pytest.mark.slow
def test_sigterm_cleans_up_workers_and_checkpoints(tmp_path):
    process = subprocess.Popen(
        [sys.executable, str(HERE / "ars.py"), *COMMON[:-1], "2", "--run-dir", "t"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    while not (tmp_path / "t" / "progress.csv").exists():
        time.sleep(0.02)
    children = _children(process.pid)
    assert len(children) >= 2  # the workers (and the forkserver)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=60)
    assert (
        process.returncode == 143 and "stopped at once, an iteration cut short not kept" in out
    ), err
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in children)
    assert _cli(tmp_path, "--resume", "t", "--workers", "0").returncode == 0


@pytest.mark.slow
def test_resume_extends_the_run_and_refuses_changed_settings(tmp_path):
    assert _cli(tmp_path, *COMMON[:5], "20000", *COMMON[6:], "--run-dir", "r").returncode == 0
    refused = _cli(tmp_path, "--resume", "r", "--n-delta", "4")
    assert refused.returncode == 2 and "--n-delta cannot change on --resume" in refused.stderr
    for extra in (["--run-dir", "elsewhere"], ["--overwrite"]):
        refused = _cli(tmp_path, "--resume", "r", *extra)
        assert refused.returncode == 2 and "--resume goes without --run-dir" in refused.stderr
        assert refused.stderr.count("\n") == 1 and not (tmp_path / "elsewhere").exists()
    for args, message in (
        (["--eval", "m.npz", "--resume", "r"], "--eval goes without --resume"),
        (["--overwrite"], "--overwrite needs the --run-dir it replaces"),
    ):
        refused = _cli(tmp_path, *args)
        assert refused.returncode == 2 and message in refused.stderr, refused.stderr
    assert _cli(tmp_path, "--resume", "r", "--total-timesteps", "60000").returncode == 0
    assert ARS.load(tmp_path / "r" / "model.npz").num_timesteps >= 60000
    assert _cli(tmp_path, *COMMON, "--run-dir", "straight").returncode == 0
    _same_files(tmp_path / "straight", tmp_path / "r")


@pytest.mark.slow
def test_resume_of_a_finished_run_and_of_a_damaged_checkpoint(tmp_path):
    assert (
        _cli(tmp_path, "--total-timesteps", "3000", "--seed", "1", "--run-dir", "r").returncode == 0
    )
    stale = tmp_path / "r" / ".model.npz.abc123.tmp"  # as a kill in the middle of a write leaves
    stale.write_bytes(b"half")
    again = _cli(tmp_path, "--resume", "r", "--total-timesteps", "3000")
    assert again.returncode == 0 and "has trained its 3,000 steps" in again.stdout, again.stderr
    assert "evaluation: mean return" in again.stdout and not stale.exists()
    model = ARS.load(tmp_path / "r" / "checkpoint.npz")
    model.n_updates = 1
    model.save(tmp_path / "r" / "checkpoint.npz")  # a model file: no EvalCallback state
    stale.write_bytes(b"half")
    progress = (tmp_path / "r" / "progress.csv").read_bytes()
    refused = _cli(tmp_path, "--resume", "r")
    assert refused.returncode == 2 and "not a checkpoint of ars.py" in refused.stderr
    # A refused resume changes nothing in the folder: the rows and the files stay.
    assert (tmp_path / "r" / "progress.csv").read_bytes() == progress and stale.exists()


def test_the_run_lock_is_exclusive_names_its_holder_and_is_released(tmp_path):
    first = ars._RunLock(tmp_path)
    with pytest.raises(ValueError, match=f"in use by pid {os.getpid()}"):
        ars._RunLock(tmp_path)
    first.release()
    second = ars._RunLock(tmp_path)  # released: the folder can be taken again
    assert (tmp_path / ".lock").read_text() == f"pid {os.getpid()}"
    with pytest.raises(ValueError, match="in use"):
        ars._RunLock(tmp_path)
    second.release()


@pytest.mark.slow
def test_sigkill_at_random_moments_then_resume_gives_the_uninterrupted_files(tmp_path):
    """Fault injection: SIGKILL across checkpoints and evaluations, resume each time."""
    assert _cli(tmp_path, *COMMON, "--run-dir", "straight").returncode == 0
    rng, kills = np.random.default_rng(1), 0
    targets = sorted(rng.choice(np.arange(2, 70), size=5, replace=False))  # rows of progress.csv
    args = [*COMMON, "--run-dir", "killed"]
    for target in targets:
        process = subprocess.Popen(
            [sys.executable, str(HERE / "ars.py"), *args],
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        path = tmp_path / "killed" / "progress.csv"
        while process.poll() is None and (
            not path.exists() or path.read_text().count("\n") <= target
        ):
            time.sleep(0.005)
        time.sleep(rng.uniform(0, 0.05))  # anywhere in the next iteration, checkpoint or evaluation
        if process.poll() is None:
            process.kill()
            kills += 1
        process.wait()
        args = ["--resume", "killed"]
    assert _cli(tmp_path, *args).returncode == 0
    assert kills >= 3
    _same_files(tmp_path / "straight", tmp_path / "killed")


@pytest.mark.slow
def test_cli_evaluates_a_policy_file_and_checks_the_env(tmp_path):
    model = ARS("LinearPolicy", "CartPole-v1", seed=3).learn(3000)
    model.policy.save(tmp_path / "policy.npz")
    model.save(tmp_path / "model.npz")
    result = _cli(tmp_path, "--eval", "policy.npz", "--env", "CartPole-v1", "--eval-episodes", "3")
    mean, _ = ars.evaluate_policy(model.policy, "CartPole-v1", 3)  # a policy's seed: 0
    assert result.returncode == 0 and f"mean return {mean:.2f}" in result.stdout, result.stderr
    result = _cli(tmp_path, "--eval", "model.npz", "--env", "Pendulum-v1")
    assert result.returncode == 2 and "but the model was built for" in result.stderr


def test_cli_reads_each_model_file_once(tmp_path, monkeypatch, capsys):
    model = ARS("LinearPolicy", "CartPole-v1", seed=3).learn(500)
    model.policy.save(tmp_path / "policy.npz")
    model.save(tmp_path / "model.npz")
    assert (
        _cli(tmp_path, "--total-timesteps", "300", "--run-dir", "run", "--seed", "0").returncode
        == 0
    )
    reads = []
    real = ars.read_model_file
    monkeypatch.setattr(ars, "read_model_file", lambda *a, **k: reads.append(a) or real(*a, **k))
    monkeypatch.chdir(tmp_path)
    for argv in (["--eval", "policy.npz", "--env", "CartPole-v1"], ["--eval", "model.npz"]):
        assert ars.main([*argv, "--eval-episodes", "1"]) == 0 and len(reads) == 1, (argv, reads)
        reads.clear()
    assert ars.main(["--resume", "run", "--total-timesteps", "600"]) == 0
    assert [Path(a[0]).name for a in reads] == ["checkpoint.npz"], reads  # not again for the
    assert "resuming run at" in capsys.readouterr().out  # callbacks' state


START_UP = ["--env", "Pendulum-v1", "--n-delta", "2", "--seed", "1", "--total-timesteps"]


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_an_interrupt_at_any_moment_leaves_a_run_that_goes_on(sig, tmp_path):
    """SIGINT to the process group (as a terminal's Ctrl+C) or SIGKILL from 0.1 s on, workers
    starting included: one line at most once ars's code runs, no temporary file left, and the
    folder is continued by --resume (it holds a checkpoint) or started by the same command."""
    for delay in (0.1, 0.5, "first checkpoint"):
        run = [*START_UP, "8000", "--workers", "2", "--run-dir", f"r{delay}"]
        process = subprocess.Popen(
            [sys.executable, str(HERE / "ars.py"), *run],
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # a group of its own, as a terminal's foreground job
        )
        if delay == "first checkpoint":  # its workers start now
            while not (tmp_path / f"r{delay}" / "checkpoint.npz").exists():
                time.sleep(0.01)
        else:
            time.sleep(delay)
        os.killpg(process.pid, sig)
        errors = process.communicate(timeout=120)[1].strip().splitlines()
        if sig == signal.SIGINT and process.returncode not in (0, 130):  # Python's imports
            assert process.returncode in (1, -signal.SIGINT) and delay != "first checkpoint", errors
            assert errors[-1] == "KeyboardInterrupt" and "ars.py" not in errors[-2:][0], errors
        elif sig == signal.SIGINT:  # once ars runs: one line at most, never a traceback
            assert len(errors) <= 1, errors
        folder = tmp_path / f"r{delay}"
        files = sorted(p.name for p in folder.iterdir()) if folder.exists() else []
        again = ["--resume", f"r{delay}"] if "checkpoint.npz" in files else run
        done = _cli(tmp_path, *again)
        assert done.returncode == 0, (delay, files, done.stderr)
        assert not list(folder.glob(".*.tmp")) and not (folder / ".lock").exists()
        assert ARS.load(folder / "model.npz").num_timesteps >= 8000


@pytest.mark.slow
def test_sigint_and_sigterm_exit_130_and_143_while_training_and_evaluating(tmp_path):
    assert _cli(tmp_path, *START_UP, "200", "--run-dir", "m").returncode == 0
    for args in ([*START_UP, "10000000", "--run-dir", "t"], ["--eval", "m/model.npz"]):
        for sig, status in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
            shutil.rmtree(tmp_path / "t", ignore_errors=True)
            process = subprocess.Popen(
                [sys.executable, str(HERE / "ars.py"), *args, "--eval-episodes", "100000"],
                cwd=tmp_path,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            while args[0] != "--eval" and "writing to" not in process.stdout.readline():
                pass  # training has begun
            time.sleep(1.0 if args[0] != "--eval" else 4.0)  # --eval: past Python's imports
            process.send_signal(sig)
            time.sleep(0.5)  # two at once would be one: a signal pending is not counted twice
            process.send_signal(sig)  # twice: Ctrl+C once finishes the iteration
            errors = process.communicate(timeout=120)[1]
            assert process.returncode == status, (args, sig, errors)
            assert "Traceback" not in errors


def test_main_restores_the_signal_handlers_and_warning_format_it_found(tmp_path, monkeypatch):
    """Whichever way main returns (--eval, an error, a run), the host program's SIGINT and
    SIGTERM handlers and warnings.formatwarning are its own again."""
    monkeypatch.chdir(tmp_path)
    model = ARS("LinearPolicy", "Pendulum-v1", seed=0)
    model.save(tmp_path / "m.npz")
    mine = lambda signum, frame: None  # noqa: E731
    formatwarning, showwarning = warnings.formatwarning, warnings.showwarning
    for args in (
        ["--eval", "m.npz", "--eval-episodes", "1"],
        ["--eval", "missing.npz"],
        [*START_UP, "400", "--run-dir", "run", "--eval-episodes", "1"],
    ):
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, mine)
        try:
            assert ars.main(args) in (0, 2)
            assert signal.getsignal(signal.SIGINT) is mine
            assert signal.getsignal(signal.SIGTERM) is mine
            assert warnings.formatwarning is formatwarning
            assert warnings.showwarning is showwarning
        finally:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


def test_a_run_folder_holding_other_files_is_refused_by_name(tmp_path):
    """--overwrite removes only what an ars run wrote; a folder with other files (a project's
    own config.json and model.npz) is refused in one line naming them, with or without it."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "config.json").write_text('{"name": "my project"}')
    (project / "model.npz").write_bytes(b"mine")
    for extra in ([], ["--overwrite"]):
        done = _cli(tmp_path, *START_UP, "200", "--run-dir", "project", *extra)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert "config.json, model.npz" in done.stderr and "not an ars run's" in done.stderr
    assert (project / "model.npz").read_bytes() == b"mine"
    assert _cli(tmp_path, *START_UP, "200", "--run-dir", "run").returncode == 0
    refused = _cli(tmp_path, *START_UP, "200", "--run-dir", "run")
    assert refused.returncode == 2 and "--resume run" in refused.stderr
    (tmp_path / "run" / "notes.txt").write_text("mine")
    done = _cli(tmp_path, *START_UP, "200", "--run-dir", "run", "--overwrite")
    assert done.returncode == 2 and "notes.txt" in done.stderr
    (tmp_path / "run" / "notes.txt").unlink()
    assert _cli(tmp_path, *START_UP, "300", "--run-dir", "run", "--overwrite").returncode == 0
    assert ARS.load(tmp_path / "run" / "model.npz").num_timesteps >= 300


def test_a_run_folder_never_checkpointed_starts_again_with_the_same_command(tmp_path):
    """A kill between config.json and the first checkpoint: --resume says to start it again,
    and the same command does (a stray temporary file goes)."""
    assert _cli(tmp_path, *START_UP, "200", "--run-dir", "run").returncode == 0
    for name in ("checkpoint.npz", "model.npz", "best_model.npz", "progress.csv"):
        (tmp_path / "run" / name).unlink(missing_ok=True)
    (tmp_path / "run" / ".checkpoint.npz.abc.tmp").write_bytes(b"half")
    resumed = _cli(tmp_path, "--resume", "run")
    assert resumed.returncode == 2 and "run the command that started it again" in resumed.stderr
    assert _cli(tmp_path, *START_UP, "200", "--run-dir", "run").returncode == 0
    assert not list((tmp_path / "run").glob(".*.tmp"))


MODULE_ENV = """
import gymnasium as gym
gym.register("Chain-v0", "gymnasium.envs.mujoco.swimmer_v4:SwimmerEnv", max_episode_steps=20)
"""


ENDLESS_ENV = """
import gymnasium as gym, numpy as np

class Endless(gym.Env):
    observation_space = gym.spaces.Box(-1.0, 1.0, (1,))
    action_space = gym.spaces.Box(-1.0, 1.0, (1,))

    def reset(self, *, seed=None, options=None):
        return np.zeros(1, np.float32), {}

    def step(self, action):
        return np.zeros(1, np.float32), 0.0, False, False, {}

gym.register("Endless-v0", Endless)
"""


def test_the_command_line_names_itself_its_version_and_how_to_reach_an_env(tmp_path, capsys):
    """--version; --help names module:Id; an id of an unknown namespace or name is told the
    module:Id form that imports its package; an env without a time limit is told the flag,
    --max-episode-steps, not Python's keyword; installed, the program is called ``ars``."""
    assert ars.main(["--version"]) == 0
    assert capsys.readouterr().out == f"ars {ars.__version__}\n"
    assert ars.main(["--help"]) == 0
    assert "module:Id" in capsys.readouterr().out
    for env in ("Nowhere/Thing-v0", "NoSuchEnvAnywhere-v0"):
        assert ars.main(["--env", env, "--run-dir", str(tmp_path / "r")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"--env module:{env} imports it first" in err, err
    (tmp_path / "endless.py").write_text(ENDLESS_ENV)
    endless = _cli(tmp_path, "--env", "endless:Endless-v0", "--n-delta", "1", "--run-dir", "e")
    assert endless.returncode == 1 and "pass --max-episode-steps" in endless.stderr
    assert "max_episode_steps=" not in endless.stderr, endless.stderr
    script = shutil.which("ars")
    if script is not None:  # pip install -e . made it
        called = subprocess.run([script, "--help"], capture_output=True, text=True, cwd=tmp_path)
        assert called.stdout.startswith("usage: ars "), called.stdout[:80]


FAILING_RESET = """
import gymnasium as gym

class FailingReset(gym.Env):
    observation_space = gym.spaces.Box(-1.0, 1.0, (1,))
    action_space = gym.spaces.Box(-1.0, 1.0, (1,))

    def reset(self, *, seed=None, options=None):
        assert False, "the goal is out of reach"

gym.register("FailingReset-v0", FailingReset, max_episode_steps=10)
"""


def test_an_envs_own_exception_is_one_line_from_the_command_line(tmp_path):
    """An env that fails its own assertion in reset: one line with the env, the type and the
    message, exit status 1."""
    (tmp_path / "failing.py").write_text(FAILING_RESET)
    done = _cli(tmp_path, "--env", "failing:FailingReset-v0", "--run-dir", "r")
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
    expected = "error: failing:FailingReset-v0 raised AssertionError: the goal is out of reach"
    assert done.stderr.strip() == expected


HANG_IN_MAIN = """
import multiprocessing, time
import gymnasium as gym, numpy as np

class HangMain(gym.Env):
    observation_space = gym.spaces.Box(-1.0, 1.0, (1,))
    action_space = gym.spaces.Box(-1.0, 1.0, (1,))

    def reset(self, *, seed=None, options=None):
        return np.zeros(1, np.float32), {}

    def step(self, action):
        if multiprocessing.parent_process() is None:  # the main process only
            time.sleep(3600)
        return np.zeros(1, np.float32), 0.0, False, False, {}

gym.register("HangMain-v0", HangMain, max_episode_steps=10)
"""


@pytest.mark.slow
@pytest.mark.parametrize("workers", ["0", "2"])
def test_job_timeout_stops_an_env_that_hangs_in_the_main_process(tmp_path, workers):
    """--job-timeout bounds the rollouts of this process too (training with no workers, and
    evaluations): one line naming the env seeds, in about the timeout."""
    (tmp_path / "hang.py").write_text(HANG_IN_MAIN)
    run = ["--env", "hang:HangMain-v0", "--workers", workers, "--job-timeout", "2"]
    start = time.monotonic()
    done = _cli(tmp_path, *run, "--total-timesteps", "300", "--run-dir", "r", timeout=120)
    assert time.monotonic() - start < 60 and done.returncode == 1, done.stderr
    assert done.stderr.count("\n") == 1 and "this process has not finished candidate" in done.stderr
    assert "env seeds [" in done.stderr and "in 2 s" in done.stderr, done.stderr
    if workers == "0":  # --eval's episodes too
        box = gym.spaces.Box(-1.0, 1.0, (1,))  # HangMain's spaces
        ars.ARSPolicy(box, box).save(tmp_path / "p.npz")
        flags = ["--eval", "p.npz", "--env", "hang:HangMain-v0", "--job-timeout", "2"]
        start = time.monotonic()
        stopped = _cli(tmp_path, *flags, timeout=120)
        assert time.monotonic() - start < 60 and stopped.returncode == 2, stopped.stderr
        assert stopped.stderr.count("\n") == 1 and "in 2 s" in stopped.stderr, stopped.stderr


@pytest.mark.slow
def test_a_module_env_is_kept_and_found_by_eval_video_and_resume(tmp_path):
    (tmp_path / "myenvs.py").write_text(MODULE_ENV)
    run = ["--env", "myenvs:Chain-v0", "--n-delta", "2", "--total-timesteps", "200"]
    assert _cli(tmp_path, *run, "--run-dir", "run").returncode == 0, "python ars.py, cwd's module"
    assert ARS.load(tmp_path / "run" / "model.npz").env_id == "myenvs:Chain-v0"
    evaluated = _cli(tmp_path, "--eval", "run/model.npz", "--eval-episodes", "1")
    assert evaluated.returncode == 0 and "myenvs:Chain-v0" in evaluated.stdout, evaluated.stderr
    done = _cli(tmp_path, "--resume", "run", "--total-timesteps", "400")
    assert done.returncode == 0, done.stderr
    video = _run([str(HERE / "examples" / "video.py"), "run/model.npz", "c.mp4"], tmp_path)
    assert video.returncode == 0, video.stderr
    (tmp_path / "myenvs.py").unlink()
    (tmp_path / "elsewhere").mkdir()
    lost = _cli(tmp_path / "elsewhere", "--eval", "../run/model.npz")
    assert lost.returncode == 2 and lost.stderr.count("\n") == 1, lost.stderr
    assert "myenvs" in lost.stderr and "--env" in lost.stderr


@pytest.mark.slow
def test_env_kwargs_from_the_command_line_make_the_same_env_at_every_door(tmp_path):
    """--env-kwargs (rl-baselines3-zoo's name:value form) trains on gym.make(id, **kwargs) in
    workers and here, is kept in config.json and the model's file, and --resume, --eval,
    the video example and ARS.load make that env again; a resume with others is refused."""
    run = ["--env", "Pendulum-v1", "--env-kwargs", "g:3.0", "--n-delta", "2", "--seed", "5"]
    done = _cli(tmp_path, *run, "--total-timesteps", "800", "--workers", "2", "--run-dir", "r")
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "r" / "config.json").read_text())["env_kwargs"] == {"g": 3.0}
    assert _cli(tmp_path, "--resume", "r", "--total-timesteps", "2400").returncode == 0
    trained = ARS.load(tmp_path / "r" / "model.npz")
    assert trained.env_id == "Pendulum-v1" and trained.env_kwargs == {"g": 3.0}
    straight = ars.paper_model("Pendulum-v1", env_kwargs={"g": 3.0}, n_delta=2, seed=5)
    _assert_same_weights(trained, straight.learn(2400))  # the env of g = 3, every iteration
    plain = ars.paper_model("Pendulum-v1", n_delta=2, seed=5).learn(2400)
    assert not np.array_equal(_weights(plain), _weights(trained))  # the kwargs matter
    mean, std = ars.evaluate_policy(trained, ars.make_env("Pendulum-v1", {"g": 3.0}), 10)
    assert ars.evaluate_policy(trained, "Pendulum-v1", 10) == (mean, std)  # its own env's
    evaluated = _cli(tmp_path, "--eval", "r/model.npz")
    assert f'{{"g": 3.0}}: mean return {mean:.2f} +/- {std:.2f}' in evaluated.stdout
    other = _cli(tmp_path, "--eval", "r/model.npz", "--env-kwargs", "g:9.0")
    assert other.returncode == 0 and f"mean return {mean:.2f}" not in other.stdout
    assert '{"g": 9.0}: mean return' in other.stdout  # the kwargs given replace the model's
    for flags, message in [
        (["--resume", "r", "--env-kwargs", "g:4.0"], "--env-kwargs cannot change on --resume"),
        (["--resume", "r", "--job-timeout", "1e10"], "--job-timeout must be at most 10,000,000"),
        ([*run[:2], "--env-kwargs", "g"], "--env-kwargs takes name:value pairs, each name once"),
        ([*run[:2], "--env-kwargs", "g:1", "g:2"], "each name once; got 'g:2'"),
        ([*run[:2], "--env-kwargs", "g:nan"], "write None, True or False as Python does"),
        ([*run[:2], "--env-kwargs", "g:1e999"], "names to finite numbers"),
    ]:
        refused = _cli(tmp_path, *flags)
        assert refused.returncode == 2 and message in refused.stderr, refused.stderr
        assert refused.stderr.count("\n") == 1, refused.stderr
    loaded = ARS.load(tmp_path / "r" / "model.npz").learn(800, reset_num_timesteps=False)
    assert loaded.gym_env.unwrapped.g == 3.0  # its own env, made from its file
    assert ARS.load(tmp_path / "r" / "model.npz", env_kwargs={"g": 5.0}).gym_env.unwrapped.g == 5
    loaded.set_env("Pendulum-v1")  # its own id: its own kwargs
    assert loaded.gym_env.unwrapped.g == 3.0 and loaded.env_kwargs == {"g": 3.0}
    config = json.loads((tmp_path / "r" / "config.json").read_text())
    (tmp_path / "r" / "config.json").write_text(json.dumps({**config, "env_kwargs": {}}))
    edited = _cli(tmp_path, "--resume", "r", "--total-timesteps", "3200")
    assert edited.returncode == 2 and "config.json has env_kwargs {} where" in edited.stderr
    same = ["--env", "Pendulum-v1", "--env-kwargs", "g:10.0", "render_mode:None"]
    same += ["max_episode_steps:50", "--n-delta", "1", "--seed", "2", "--eval-episodes", "2"]
    assert _cli(tmp_path, *same, "--total-timesteps", "100", "--run-dir", "c").returncode == 0
    assert ARS.load(tmp_path / "c" / "model.npz").env_kwargs == {  # as given, each of them
        "g": 10.0,
        "render_mode": None,
        "max_episode_steps": 50,
    }
    again = _cli(tmp_path, "--resume", "c", *same, "--total-timesteps", "200")
    assert again.returncode == 0, again.stderr  # the starting command's flags, on resume
    rows = _rows(tmp_path / "c" / "progress.csv")
    assert {float(r["rollout/ep_len_mean"]) for r in rows} == {50.0}  # made to the 50 steps
    assert {float(r["eval/mean_ep_length"]) for r in rows if r["eval/mean_ep_length"]} == {50.0}


def test_a_model_keeps_the_kwargs_its_env_was_made_with(tmp_path):
    """An env made with kwargs: the model keeps those beyond the registration (render_mode
    aside), and its file remakes it; kwargs no file can hold leave the file without an env;
    env_kwargs go with an env id only."""
    model = ARS("LinearPolicy", gym.make("Pendulum-v1", g=4.0, render_mode="rgb_array"))
    assert model.env_kwargs == {"g": 4.0}
    limited = ARS("LinearPolicy", gym.make("Pendulum-v1", max_episode_steps=50))
    assert limited.env_kwargs == {"max_episode_steps": 50}  # gym.make's own argument too
    frozen = ARS("LinearPolicy", gym.make("FrozenLake-v1", map_name="4x4"))
    assert frozen.env_kwargs == {}  # as registered
    assert ars.parse_env_kwargs(["a:false", "b:null", "c:ram", "d:'nan'"]) == {
        "a": False,
        "b": None,
        "c": "ram",
        "d": "nan",
    }
    model.save(tmp_path / "m.npz")
    assert ARS.load(tmp_path / "m.npz").learn(200).gym_env.unwrapped.g == 4.0
    replaced = ARS.load(tmp_path / "m.npz", custom_objects={"env_kwargs": {"g": 6.0}})
    assert replaced.env_kwargs == {"g": 6.0}  # a key the file holds: SB3's custom_objects
    model.env_kwargs = [4.0]
    with pytest.raises(ValueError, match=r"env_kwargs must be a dict .* got \[4.0\]"):
        model.save(tmp_path / "list.npz")
    odd = ARS("LinearPolicy", gym.make("Pendulum-v1", g=np.float32(4.0)), n_delta=1)
    assert odd.env_kwargs is None
    odd.save(tmp_path / "odd.npz")
    assert ARS.load(tmp_path / "odd.npz").env_id is None  # not an env it could make again
    with pytest.raises(ValueError, match="env_kwargs go with an env id"):
        ARS("LinearPolicy", gym.make("Pendulum-v1"), env_kwargs={"g": 1.0})
    with pytest.raises(ValueError, match=r"env_kwargs must be a dict .* got \{'g': nan\}"):
        ARS("LinearPolicy", "Pendulum-v1", env_kwargs={"g": float("nan")})
    swimmer = ARS("LinearPolicy", "Swimmer-v4", env_kwargs={"forward_reward_weight": 2.0})
    try:  # the video example films the model's own env
        filmed = video_example.rendering_env(swimmer, None, "rgb_array")
    except RuntimeError as error:
        pytest.skip(f"no rendering here: {error}")
    assert filmed.unwrapped._forward_reward_weight == 2.0


NO_GUARD = """
import sys
import ars
print("the script ran")
{call}
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    "call",
    [
        "ars.AsyncEval(['Pendulum-v1'] * 2, start_method='spawn')",
        "ars.AsyncEval(['Pendulum-v1'] * 2)",
        "sys.exit(ars.main(['--env', 'Pendulum-v1', '--workers', '2', '--run-dir', 'r']))",
    ],
)
def test_a_script_without_the_main_guard_gets_one_line_naming_it(call, tmp_path):
    (tmp_path / "script.py").write_text(NO_GUARD.format(call=call))
    done = _run(["script.py"], tmp_path, timeout=60)
    assert done.returncode != 0 and done.stdout.count("the script ran") == 1
    last = done.stderr.strip().splitlines()[-1]
    assert "__main__" in last and 'start_method="fork"' in last, done.stderr
    assert not (tmp_path / "r").exists()
    fork = NO_GUARD.format(call="ars.AsyncEval(['Pendulum-v1'] * 2, start_method='fork').close()")
    (tmp_path / "forked.py").write_text(fork)
    assert _run(["forked.py"], tmp_path, timeout=60).returncode == 0


def test_an_async_eval_of_other_spaces_is_named_as_such():
    model = ARS("LinearPolicy", "Pendulum-v1", n_delta=2, seed=0)
    with AsyncEval(["MountainCarContinuous-v0"], start_method="fork") as workers:
        with pytest.raises(ValueError, match="AsyncEval worker 0's env has observation space"):
            model.learn(100, async_eval=workers)


@pytest.mark.slow
def test_costly_choices_get_one_warning_line_and_warnings_are_plain(tmp_path):
    many = str((os.cpu_count() or 1) + 1)
    done = _cli(tmp_path, *START_UP, "200", "--workers", many, "--run-dir", "r")
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert len(lines) == 1 and f"--workers {many}" in lines[0], done.stderr
    assert "\x1b[" not in done.stderr and done.stderr.count("\n") == len(lines)
    with pytest.warns(UserWarning, match="other processes, a message each step"):
        venv = gym.make_vec("Pendulum-v1", 2, vectorization_mode="async")
        ARS("LinearPolicy", venv, n_delta=2, seed=0).learn(100)
    venv.close()
    module = (
        "import warnings\nfor _ in range(3):\n    warnings.warn('\\x1b[33mWARN: a\\n  b\\x1b[0m')\n"
    )
    (tmp_path / "warns.py").write_text(module)
    done = _cli(tmp_path, "--env", "warns:CartPole-v1", "--total-timesteps", "100")
    assert done.returncode == 0 and done.stderr == "warning: a b\n", done.stderr


CTRL_C_AT_WORKER_START = """
import os, signal, sys
import multiprocessing.forkserver as forkserver
import ars
start = forkserver.ForkServer.ensure_running
def pressed(self):  # Ctrl+C right after the fork server is up, before a worker's pid is back
    start(self)
    if not getattr(pressed, "done", False):
        pressed.done = True
        os.kill(os.getpid(), signal.SIGINT)
forkserver.ForkServer.ensure_running = pressed
if __name__ == "__main__":
    args = ["--env", "Pendulum-v1", "--total-timesteps", "20000", "--workers", "2"]
    sys.exit(ars.main([*args, "--run-dir", "r", "--n-delta", "2"]))
"""


@pytest.mark.slow
def test_ctrl_c_while_workers_start_is_heard(tmp_path):
    """A Ctrl+C while AsyncEval starts its workers is the main process's: heard once they
    are up (never dropped by a thread that ignores it), it finishes that iteration."""
    (tmp_path / "script.py").write_text(CTRL_C_AT_WORKER_START)
    done = _run(["script.py"], tmp_path)
    assert done.returncode == 130 and "stopping after this iteration" in done.stdout, done.stderr
    assert ARS.load(tmp_path / "r" / "model.npz").num_timesteps < 20000


def test_save_refuses_what_load_would_refuse_and_weights_must_be_real(tmp_path):
    model = ARS("LinearPolicy", "Pendulum-v1", normalize_obs=True, seed=0)
    for bad in ([1j, 0, 0], ["1", "2", "3"], np.array([object(), 1, 2], dtype=object)):
        with pytest.raises(ValueError, match="must be real numbers"):
            model.policy.load_from_vector(bad)
    model.policy.obs_rms.mean[0] = np.nan
    with pytest.raises(ValueError, match="cannot save: 'obs_rms.mean' must be real numbers, no"):
        model.save(tmp_path / "nan")
    model.policy.obs_rms = RunningMeanStd((3,)).update(np.ones((2, 3)))
    model.policy.obs_rms.var[:] = -5
    with pytest.raises(ValueError, match="cannot save: obs_rms.var must be >= 0"):
        model.save(tmp_path / "negative")
    model.policy.obs_rms = RunningMeanStd((5,))
    with pytest.raises(ValueError, match=r"cannot save: 'obs_rms.mean' has shape \(5,\); expe"):
        model.save(tmp_path / "shape")
    assert not list(tmp_path.iterdir())


def test_only_ars_half_writes_are_removed_and_its_plots_belong_to_the_run(tmp_path):
    assert _cli(tmp_path, *START_UP, "200", "--run-dir", "run").returncode == 0
    (tmp_path / "run" / ".notes.tmp").write_text("mine")
    (tmp_path / "run" / ".model.npz.abc.tmp").write_text("half")
    assert _cli(tmp_path, "--resume", "run", "--total-timesteps", "2000").returncode == 0
    assert (tmp_path / "run" / ".notes.tmp").exists()
    assert not (tmp_path / "run" / ".model.npz.abc.tmp").exists()
    (tmp_path / "run" / ".notes.tmp").unlink()
    (tmp_path / "run" / "progress.png").write_bytes(b"examples/plot_progress.py's")
    done = _cli(tmp_path, *START_UP, "200", "--run-dir", "run", "--overwrite")
    assert done.returncode == 0, done.stderr


PARTIAL_GUARD = """
import ars
workers = ars.AsyncEval(['Pendulum-v1'] * 2)  # at the top level, outside the guard
if __name__ == "__main__":
    workers.close()
"""


SLOW_START = """
import multiprocessing, time
import gymnasium as gym

def slow_in_workers():
    if multiprocessing.parent_process() is not None:
        time.sleep(2)  # the main process is killed meanwhile
    return gym.make("Pendulum-v1")

gym.register("SlowStart-v0", slow_in_workers)
"""


@pytest.mark.slow
def test_orphaned_workers_exit_quietly_when_the_main_process_is_killed(tmp_path):
    """SIGKILL to the main process while its workers build their envs: they find nobody to
    report to and exit without a word (their stderr is the run's)."""
    (tmp_path / "slowstart.py").write_text(SLOW_START)
    run = ["--env", "slowstart:SlowStart-v0", "--workers", "2", "--run-dir", "r"]
    process = subprocess.Popen(
        [sys.executable, str(HERE / "ars.py"), *run, "--total-timesteps", "5000"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while len(_children(process.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    process.kill()
    _, err = process.communicate(timeout=60)  # its end: once the workers have exited too
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


BLOCK_GUARD = """
import ars
for n_workers in (2,):
    if __name__ == "__main__":
        with ars.AsyncEval(['Pendulum-v1'] * n_workers) as workers:
            print(workers.n_workers)
"""


@pytest.mark.slow
def test_the_main_guard_is_read_where_the_workers_start(tmp_path):
    """A guard that does not hold the start is no guard; python -m pkg runs it once."""
    (tmp_path / "partial.py").write_text(PARTIAL_GUARD)
    done = _run(["partial.py"], tmp_path, timeout=60)
    assert "outside 'if __name__ ==" in done.stderr.strip().splitlines()[-1], done.stderr
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "__main__.py").write_text(NO_GUARD.format(call=PARTIAL_GUARD))
    assert _run(["-m", "pkg"], tmp_path, timeout=60).returncode == 0
    (tmp_path / "block.py").write_text(BLOCK_GUARD)  # a guard inside a top-level block
    done = _run(["block.py"], tmp_path, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "2", done.stderr
    stdin = subprocess.run(  # python - < script.py: one line, not the workers' tracebacks
        [sys.executable, "-"],
        input=BLOCK_GUARD,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=str(HERE)),
    )
    assert stdin.returncode == 1 and "read from standard input" in stdin.stderr, stdin.stderr
    assert stdin.stderr.count("Traceback") == 1, stdin.stderr


def test_every_evaluator_names_an_env_of_other_spaces():
    model = ARS("LinearPolicy", "Pendulum-v1", seed=0)
    with pytest.raises(ValueError, match="the env has observation space .* but the policy was"):
        ars.evaluate_policy(model, "MountainCarContinuous-v0", 1)
    callback = ars.EvalCallback("MountainCarContinuous-v0", eval_freq=1, n_eval_episodes=1)
    with pytest.raises(ValueError, match="the env has observation space"):
        model.learn(10, callback=callback)


def test_unbounded_actions_stay_finite_in_their_dtype():
    box = spaces.Box(-np.inf, np.inf, (2,), np.float16)
    network = ars.Network(spaces.Box(-1, 1, (1,)), box, "LinearPolicy", None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow in the cast
        actions = network.to_action()(np.array([1e9, -1e9]))
    assert actions.tolist() == [65504.0, -65504.0] and box.contains(actions)


def test_a_resume_keeps_its_new_total_and_judges_flags_by_their_rules(tmp_path, capsys):
    """--resume with a new --total-timesteps writes it into config.json (the next resume
    goes on to it); a setting's flag on --resume meets its rule's message first; --eval
    refuses training settings it would ignore."""
    run = str(tmp_path / "run")
    flags = ["--env", "CartPole-v1", "--n-delta", "2", "--seed", "0", "--eval-freq", "300"]
    assert ars.main([*flags, "--total-timesteps", "300", "--run-dir", run]) == 0
    assert ars.main(["--resume", run, "--total-timesteps", "600"]) == 0
    assert json.loads((tmp_path / "run" / "config.json").read_text())["total_timesteps"] == 600
    capsys.readouterr()
    assert ars.main(["--resume", run, "--n-delta", "2.0"]) == 2
    assert "n_delta must be an integer from 1" in capsys.readouterr().err
    assert ars.main(["--eval", f"{run}/model.npz", "--n-delta", "0"]) == 2
    assert "--eval takes the model's settings: without --n-delta" in capsys.readouterr().err
    assert ars.main(["--eval", f"{run}/model.npz", "--verbose", "1", "--eval-episodes", "1"]) == 0


def test_every_setting_a_run_can_take_has_a_flag_that_reaches_the_model_and_the_run(
    tmp_path, capsys
):
    """The command line's setting flags are the table's (all but policy_kwargs, the log folder
    and the device); a flag reaches the model and config.json, and cannot change on --resume."""
    flags = {f for action in ars._parser()._actions for f in action.option_strings}
    for name in ars.MODEL_SETTINGS:
        flag = f"--{name.replace('_', '-')}"
        assert (flag in flags) == (name not in ("policy_kwargs", "tensorboard_log", "device"))
    run = tmp_path / "run"
    args = ["--env", "CartPole-v1", "--total-timesteps", "100", "--stats-window-size", "7"]
    assert ars.main([*args, "--n-delta", "2", "--run-dir", str(run)]) == 0
    assert json.loads((run / "config.json").read_text())["stats_window_size"] == 7
    assert ars.ARS.load(run / "model.npz").stats_window_size == 7
    capsys.readouterr()
    assert ars.main(["--resume", str(run), "--stats-window-size", "8"]) == 2
    assert "--stats-window-size cannot change on --resume" in capsys.readouterr().err


def test_a_resume_keeps_the_runs_timeouts_and_takes_flags_as_a_new_run_does(tmp_path, capsys):
    """--resume keeps the run's timeouts unless given again (they have one rule, the flag's
    and config.json's); a flag on --resume is taken as a new run takes it (b at most N)."""
    run = str(tmp_path / "run")
    flags = ["--env", "CartPole-v1", "--seed", "0", "--job-timeout", "30", "--n-top", "100"]
    with warnings.catch_warnings():  # shown whatever the user's filter (PYTHONWARNINGS)
        warnings.simplefilter("default")
        assert ars.main([*flags, "--total-timesteps", "300", "--run-dir", run]) == 0
    assert "n_top=100 is larger than n_delta=2" in capsys.readouterr().err

    def config():
        return json.loads((tmp_path / "run" / "config.json").read_text())

    assert (config()["job_timeout"], config()["start_timeout"], config()["n_top"]) == (30, 120, 2)
    assert ars.main(["--resume", run, "--total-timesteps", "600", "--n-top", "100"]) == 0
    assert (config()["job_timeout"], config()["total_timesteps"]) == (30, 600)
    assert ars.main(["--resume", run, "--total-timesteps", "900", "--job-timeout", "45"]) == 0
    assert config()["job_timeout"] == 45
    capsys.readouterr()
    assert ars.main(["--resume", run, "--start-timeout", "0"]) == 2
    assert "--start-timeout must be a positive number; got 0" in capsys.readouterr().err
    assert ars.main(["--env", "CartPole-v1", "--workers", "2000"]) == 2
    assert "--workers must be an integer from 0 to 1,024; got 2000" in capsys.readouterr().err
    strict = _run(["-W", "error", str(HERE / "ars.py"), "--n-top", "100"], tmp_path)
    assert strict.returncode == 2 and "Traceback" not in strict.stderr  # python -W error
    assert strict.stderr == "error: n_top=100 is larger than n_delta=2; using n_delta\n"


def test_a_resume_evaluates_on_its_new_budgets_schedule_and_the_best_includes_the_final(
    tmp_path, capsys
):
    """--resume --total-timesteps N evaluates every N / 20 steps from there, as a new run of N
    would (or every --eval-freq given on resume); the final model's evaluation is one of the
    run's, so best_model.npz holds the best of them all, and the last line says so."""
    run = tmp_path / "run"
    flags = ["--env", "CartPole-v1", "--seed", "1", "--eval-episodes", "2"]
    assert ars.main([*flags, "--total-timesteps", "400", "--run-dir", str(run)]) == 0

    def evaluations():
        meta, _ = ars.read_model_file(run / "checkpoint.npz")
        return [e[0] for e in meta["callbacks"]["EvalCallback"]["evaluations"]], meta

    first, meta = evaluations()
    assert first[-1] == meta["num_timesteps"]  # the final model's evaluation is kept
    assert ars.main(["--resume", str(run), "--total-timesteps", "20000"]) == 0
    config = json.loads((run / "config.json").read_text())
    assert config["eval_freq"] == 1000
    steps, meta = evaluations()
    later = steps[len(first) :]
    assert len({t // 1000 for t in later}) == len(later) and 10 <= len(later) <= 21
    state = meta["callbacks"]["EvalCallback"]
    means = [e[2] for e in state["evaluations"]]
    assert state["best_mean_reward"] == max(means) and steps[-1] == meta["num_timesteps"]
    best = ARS.load(run / "best_model.npz")
    assert ars.evaluate_policy(best, "CartPole-v1", 2)[0] == max(means)
    out = capsys.readouterr().out
    assert f"best evaluation of the run (mean return {max(means):.2f}) kept in" in out
    assert ars.main(["--resume", str(run), "--total-timesteps", "21000", "--eval-freq", "300"]) == 0
    assert json.loads((run / "config.json").read_text())["eval_freq"] == 300


def test_main_returns_argparses_status_and_names_what_a_resume_needs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert ars.main(["--bogus"]) == 2
    (tmp_path / "myenvs.py").write_text(MODULE_ENV)
    assert _cli(tmp_path, "--env", "myenvs:Chain-v0", "--total-timesteps", "100").returncode == 0
    (folder,) = (tmp_path / "runs").iterdir()
    assert folder.name.startswith("myenvs_Chain-v0-")  # no ':' in a folder's name
    (tmp_path / "myenvs.py").unlink()
    (tmp_path / "elsewhere").mkdir()
    done = _cli(tmp_path / "elsewhere", "--resume", str(folder), "--total-timesteps", "200")
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "No module named 'myenvs'" in done.stderr and "PYTHONPATH" in done.stderr


def test_a_resumed_runs_worker_count_has_the_flags_rule(tmp_path, capsys):
    run = tmp_path / "run"
    assert (
        ars.main(["--env", "CartPole-v1", "--total-timesteps", "100", "--run-dir", str(run)]) == 0
    )
    config = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps(dict(config, workers=-3)))  # edited by hand
    capsys.readouterr()
    assert ars.main(["--resume", str(run)]) == 2
    assert (
        "workers (config.json) must be an integer from 0 to 1,024; got -3"
        in capsys.readouterr().err
    )


# === Examples and benchmarks: videos, the tuner, the examples, the benchmarks =====================


def test_videos_film_the_first_env_of_a_vector_env_in_this_process(tmp_path):
    pytest.importorskip("mujoco")
    pytest.importorskip("imageio_ffmpeg")
    os.environ.setdefault("MUJOCO_GL", "egl")  # made here, not by ars: no display needed
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    model = ARS("LinearPolicy", "InvertedPendulum-v4", seed=0)
    make = functools.partial(gym.make, "InvertedPendulum-v4", render_mode="rgb_array")
    alone = _clip(model, tmp_path / "a.gif", make(), max_steps=5)
    assert _clip(model, tmp_path / "v.gif", DummyVecEnv([make] * 2), max_steps=5) == alone
    subprocesses = SubprocVecEnv([make] * 2, "fork")
    with pytest.raises(ValueError, match="a video needs an env in this process"):
        video_example.record_video(model, tmp_path / "s.gif", subprocesses)
    subprocesses.close()


@pytest.mark.slow
@pytest.mark.parametrize("suffix,fps,every", [(".gif", None, 2), (".mp4", None, 1), (".mp4", 5, 5)])
def test_a_clip_films_every_kth_step_to_play_in_real_time(tmp_path, suffix, fps, every):
    """InvertedPendulum runs 25 steps a second: a GIF (10 fps) films every 2nd step, an MP4 (30)
    every step, and fps=5 every 5th; the steps between are simulated, never rendered."""
    pytest.importorskip("mujoco")
    ffmpeg = pytest.importorskip("imageio_ffmpeg")
    model = ARS("LinearPolicy", "InvertedPendulum-v4", n_delta=2, seed=0, zero_policy=False)
    path, rendered = tmp_path / f"clip{suffix}", []
    env = video_example.rendering_env(model, "InvertedPendulum-v4", "rgb_array", None)
    render = env.render
    env.render = lambda: rendered.append(1) or render()
    total, frames = _clip(model, path, lambda: env, max_steps=50, fps=fps)
    returns, lengths = ars.evaluate_policy(
        model, "InvertedPendulum-v4", 1, return_episode_rewards=True
    )  # the model's own first evaluation episode
    assert lengths[0] < 50 and frames == 1 + lengths[0] // every == len(rendered)
    assert total == returns[0]  # the same deterministic episode as the first evaluation's
    n_frames, seconds = ffmpeg.count_frames_and_secs(str(path))
    assert n_frames == frames and path.stat().st_size > 1000
    steps_per_second = env.metadata["render_fps"]
    assert seconds == pytest.approx(frames * every / steps_per_second, abs=0.1)  # real time


@pytest.mark.slow
def test_a_clip_of_an_env_object_and_its_mistakes(tmp_path):
    pytest.importorskip("mujoco")
    pytest.importorskip("imageio_ffmpeg")
    model = ARS("LinearPolicy", "InvertedPendulum-v4", n_delta=2, seed=0, max_episode_steps=7)
    env = gym.make("InvertedPendulum-v4", render_mode="rgb_array")
    total, frames = _clip(model, tmp_path / "a.mp4", env)
    assert frames == 8  # the model's max_episode_steps caps the clip, as in its evaluation
    with pytest.raises(ValueError, match="render_mode='rgb_array'"):
        video_example.record_video(model, tmp_path / "b.mp4", gym.make("InvertedPendulum-v4"))
    with pytest.raises(ValueError, match="but the policy was built for"):
        video_example.record_video(model, tmp_path / "c.mp4", "Hopper-v4")
    for bad in (dict(max_steps=0), dict(max_steps=-1), dict(max_steps=2.5), dict(fps=1e-6)):
        with pytest.raises(ValueError, match="max_steps must be|fps must be"):  # never a hang
            video_example.record_video(model, tmp_path / "d.mp4", env, **bad)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.mp4"]


@pytest.mark.slow
def test_cli_records_a_clip_and_names_what_is_missing(tmp_path):
    pytest.importorskip("mujoco")
    pytest.importorskip("imageio_ffmpeg")
    model = ARS("LinearPolicy", "InvertedPendulum-v4", n_delta=2, seed=0).learn(2000)
    model.save(tmp_path / "m.npz")

    def clip(*args, **kw):
        return _run([str(HERE / "examples" / "video.py"), "m.npz", *args], tmp_path, **kw)

    result = clip("clip.gif", env=dict(os.environ, MUJOCO_GL="egl"))
    if "cannot render" in result.stderr:
        pytest.skip(result.stderr)
    assert result.returncode == 0 and "recorded in clip.gif" in result.stdout, result.stderr
    blocked = _blocker(tmp_path, ["imageio_ffmpeg"])
    result = clip("clip.mp4", env=blocked)
    assert (
        result.returncode == 2 and 'imageio-ffmpeg: pip install "ars-numpy[video]"' in result.stderr
    )
    for target, message in (("nowhere/sub/x:y.mp4", None), ("/proc/clip.gif", "could not write")):
        result = clip(target, "--max-episode-steps", "5")
        if message is None:  # folders are made, and a ':' is a file name, not a protocol
            assert result.returncode == 0 and (tmp_path / target).stat().st_size > 0, result.stderr
        else:
            assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
            assert message in result.stderr
    assert not list(tmp_path.glob("**/.*.tmp"))  # nothing half-written left behind


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_clip_interrupted_leaves_no_file_and_no_traceback(tmp_path, sig):
    pytest.importorskip("mujoco")
    pytest.importorskip("imageio_ffmpeg")
    ARS("LinearPolicy", "Swimmer-v4", seed=0).save(tmp_path / "m.npz")  # 1,000 steps
    env = dict(os.environ, MUJOCO_GL="egl", PYTHONPATH=str(HERE))
    args = [sys.executable, str(HERE / "examples" / "video.py"), "m.npz", "long.mp4"]
    run = subprocess.Popen(args, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob(".*.tmp")) and run.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    run.send_signal(sig)
    stderr = run.communicate(timeout=60)[1]
    if run.returncode == 0:
        pytest.skip("the episode ended before the signal")
    assert run.returncode == 128 + sig and "Traceback" not in stderr, stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.npz"]


@pytest.mark.slow
def test_a_long_clip_streams_its_frames(tmp_path):
    """A video's frames go to ffmpeg as they come: 301 frames of 480 x 480 (207 MB if kept)
    raise this process's peak by far less."""
    pytest.importorskip("imageio_ffmpeg")
    (tmp_path / "stripes.py").write_text(STRIPES)
    code = "import stripes, video; print(video.record_video(stripes.policy, 'v.mp4', "
    code += "stripes.Stripes(600)))"  # 50 steps a second, filmed at 25 frames
    out = _peak_rss_of(code, tmp_path)
    assert "(0.0, 301)" in out and int(out.split("GROWTH_KB")[1]) < 100_000, out


@pytest.mark.slow
def test_a_long_gif_streams_its_frames_through_ffmpeg(tmp_path):
    """Each GIF frame gets its own palette as it comes: ffmpeg keeps no frames, so its memory
    is the same for a clip ten times longer (one palette for the clip kept them all)."""
    pytest.importorskip("imageio_ffmpeg")
    (tmp_path / "gif_probe.py").write_text(GIF_PROBE)
    (tmp_path / "stripes.py").write_text(STRIPES)
    peaks = []
    for steps in (250, 2500):  # 50 and 500 frames kept at 10 a second: 35 MB and 346 MB
        out = _run([str(tmp_path / "gif_probe.py"), str(HERE), str(steps), "c.gif"], tmp_path)
        assert f"(0.0, {steps // 5 + 1})" in out.stdout, out.stdout + out.stderr  # 1 step in 5
        peaks.append(int(out.stdout.split("PEAK_KB")[1]))
    assert peaks[1] < peaks[0] + 60_000, peaks


def test_short_gifs_and_envs_that_cannot_render_rgb_frames(tmp_path):
    pytest.importorskip("mujoco")
    pytest.importorskip("imageio_ffmpeg")
    model = ARS("LinearPolicy", "InvertedPendulum-v4", seed=0)
    for steps in (1, 3):
        clip = _clip(model, tmp_path / f"s{steps}.gif", None, max_steps=steps)
        assert clip[1] == 1 + steps // 2  # 25 steps a second, 10 frames: every 2nd step

    class HumanOnly(gym.Env):
        metadata = {"render_modes": ["human"]}
        observation_space, action_space = model.observation_space, model.action_space

        def __init__(self, render_mode=None):
            self.render_mode = render_mode

    gym.register("HumanOnly-v0", entry_point=HumanOnly)
    with pytest.raises(RuntimeError, match=r"HumanOnly-v0 cannot render 'rgb_array' frames"):
        video_example.record_video(model, tmp_path / "h.mp4", "HumanOnly-v0")
    env = gym.make("InvertedPendulum-v4", render_mode="rgb_array")
    env.unwrapped.render = lambda: None  # an env whose render() gives nothing
    with pytest.raises(RuntimeError, match=r"render\(\) gave NoneType, not the uint8 RGB"):
        video_example.record_video(model, tmp_path / "n.mp4", env)
    env.unwrapped.render = lambda: np.zeros((8, 8, 4), np.uint8)  # RGBA: a silent bad video
    with pytest.raises(RuntimeError, match=r"gave uint8 of shape \(8, 8, 4\), not the uint8 RGB"):
        video_example.record_video(model, tmp_path / "r.mp4", env)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s1.gif", "s3.gif"]


@pytest.mark.slow
def test_the_tuner_keeps_its_study_in_sqlite_and_goes_on_where_it_stopped(tmp_path):
    """examples/tune.py: a two-trial CartPole study in a SQLite file, its plots and its best
    settings; the same command with --trials 3 adds exactly one trial; the printed ARS(...)
    line builds a model with the printed settings."""
    optuna = pytest.importorskip("optuna")
    pytest.importorskip("matplotlib")
    study = ["--env", "CartPole-v1", "--timesteps", "1500", "--seeds", "2", "--study", "s"]
    study += ["--storage", "sqlite:///study.db", "--threshold", "450", "--eval-episodes", "2"]
    tune = [str(HERE / "examples" / "tune.py"), *study, "--plots", "plots", "--trials"]
    for trials in (2, 3):
        done = _run([*tune, str(trials)], tmp_path)
        assert done.returncode == 0, done.stderr
        stored = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 'study.db'}")
        assert len(stored.trials) == trials  # the second run added exactly one
    assert all((tmp_path / "plots" / f"{n}.png").stat().st_size > 1000 for n in ("history",))
    lines = done.stdout.splitlines()
    settings = json.loads(next(line for line in lines if line.startswith("{")))
    line = next(line for line in lines if line.startswith("ARS("))
    model = eval(line, {"ARS": ARS})
    assert model.policy_class == settings.pop("policy")
    assert {k: model.hparams[k] for k in settings} == settings


TUNER_ENV = """
import gymnasium as gym
gym.register("Short-v0", "gymnasium.envs.classic_control:CartPoleEnv", max_episode_steps=50)
"""


@pytest.mark.slow
def test_the_tuner_tunes_a_module_env_and_its_study_holds_what_it_tunes(tmp_path, monkeypatch):
    """--env module:Id (from the current folder), two trials, then one more; a study run with
    another env, budget or seed count is refused in one line, as are a bad storage, an
    in-memory one, an unknown env and a threshold that is not a number; two processes that
    share a study stop together at --trials; the printed command trains the trial's weights."""
    optuna = pytest.importorskip("optuna")
    (tmp_path / "shortenv.py").write_text(TUNER_ENV)
    study = ["--env", "shortenv:Short-v0", "--timesteps", "400", "--seeds", "1", "--study", "s"]
    study += ["--storage", "sqlite:///study.db", "--eval-episodes", "1"]
    study += ["--env-kwargs", "sutton_barto_reward:True"]
    tune = [str(HERE / "examples" / "tune.py"), *study]
    for trials in (2, 3):
        done = _run([*tune, "--trials", str(trials)], tmp_path)
        assert done.returncode == 0, done.stderr
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    stored = optuna.load_study(study_name="s", storage=storage)
    assert len(stored.trials) == 3 and stored.user_attrs["env"] == "shortenv:Short-v0"
    mistakes = [
        (["--env", "CartPole-v1"], "tunes env 'shortenv:Short-v0', not 'CartPole-v1'"),
        (["--timesteps", "800"], "tunes timesteps 400, not 800"),
        (["--seeds", "2"], "tunes seeds 1, not 2"),
        (["--storage", "sqlite:///no/such/dir/x.db"], "--storage sqlite:///no/such/dir/x.db:"),
        (["--storage", "sqlite:///"], "keeps the study in memory"),
        (["--env", "NoSuchEnv-v0"], "--env NoSuchEnv-v0: NameNotFound"),
        (["--threshold", "nan"], "--threshold must be a finite number"),
        (["--env-kwargs", "sutton_barto_reward:False"], "tunes env_kwargs {'sutton_barto_reward'"),
    ]
    for change, message in mistakes:
        wrong = _run([*tune, "--trials", "4", *change], tmp_path)
        assert wrong.returncode == 2 and message in wrong.stderr, (change, wrong.stderr)
        assert (wrong.stdout + wrong.stderr).count("\n") == 1, wrong.stderr
    shared = [*tune[:-2], "--storage", "sqlite:///shared.db", "--trials", "4"]
    env = dict(os.environ, PYTHONPATH=str(HERE))
    env.pop("PYTHONWARNINGS", None)
    both = [
        subprocess.Popen(
            [sys.executable, *shared],
            cwd=tmp_path,
            env=env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(2)
    ]
    assert [p.wait(timeout=240) for p in both] == [0, 0], [p.stderr.read() for p in both]
    trials = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 'shared.db'}").trials
    assert sum(t.state.name in ("COMPLETE", "PRUNED") for t in trials) == 4
    command = next(line for line in done.stdout.splitlines() if line.startswith("python ars.py"))
    run = command.split()[2:] + ["--seed", "100", "--total-timesteps", "400", "--run-dir", "r"]
    assert _cli(tmp_path, *run).returncode == 0
    monkeypatch.syspath_prepend(str(HERE / "examples"))
    monkeypatch.syspath_prepend(str(tmp_path))  # shortenv, as the tuner imports it
    tune_module = importlib.import_module("tune")
    params = dict(stored.best_trial.params)
    params["n_top"] = tune_module.top_of(params.pop("top_share"), params["n_delta"])
    kwargs = {"sutton_barto_reward": True}
    settings = tune_module.trial_settings("shortenv:Short-v0", params, kwargs)
    model = ARS(env="shortenv:Short-v0", env_kwargs=kwargs, seed=100, **settings).learn(400)
    trained = ARS.load(tmp_path / "r" / "model.npz")
    np.testing.assert_array_equal(
        trained.policy.parameters_to_vector(), model.policy.parameters_to_vector()
    )
    rms = [m.policy.obs_rms for m in (trained, model)]  # V2's statistics, or V1's None
    assert rms[0] is rms[1] is None or np.array_equal(rms[0].var, rms[1].var)


INF_ENV = """
import gymnasium as gym, numpy as np

class Inf(gym.Env):
    observation_space = gym.spaces.Box(-1.0, 1.0, (1,))
    action_space = gym.spaces.Box(-1.0, 1.0, (1,))

    def reset(self, *, seed=None, options=None):
        return np.zeros(1, np.float32), {}

    def step(self, action):
        return np.zeros(1, np.float32), float("inf"), False, False, {}

gym.register("Inf-v0", Inf, max_episode_steps=5)
"""


@pytest.mark.slow
def test_the_tuners_errors_in_its_trials_are_one_line_and_status_2(tmp_path):
    """An error a trial meets (the env's, a stuck env past --job-timeout) ends the study in
    one line, exit status 2; trials that each fail alone (overflowing rewards) end it after
    five in a row, never running on."""
    (tmp_path / "infenv.py").write_text(INF_ENV)
    (tmp_path / "hang.py").write_text(HANG_IN_MAIN)
    tune = [str(HERE / "examples" / "tune.py"), "--trials", "2", "--timesteps", "400"]
    tune += ["--seeds", "1", "--storage", "sqlite:///e.db", "--eval-episodes", "1"]
    for env, message in [
        (["--env", "Pendulum-v1", "--env-kwargs", "g:'abc'"], "{'g': 'abc'}: TypeError: unsupp"),
        (["--env", "hang:HangMain-v0", "--job-timeout", "2"], "Pass a larger --job-timeout"),
        (["--env", "infenv:Inf-v0"], "error: 5 trials in a row failed; the last: trial 4"),
    ]:
        done = _run([*tune, *env, "--study", env[1]], tmp_path, timeout=120)
        assert done.returncode == 2 and message in done.stderr, done.stderr
        assert done.stderr.count("\n") == 1, done.stderr


@pytest.mark.slow
def test_ctrl_c_before_the_study_is_one_line_and_status_130(tmp_path):
    """Ctrl+C from the tuner's first line on (its imports, the env, the study): one line and
    exit status 130; only Python's own start, before the script runs, is left to Python."""
    tune = [sys.executable, str(HERE / "examples" / "tune.py"), "--env", "CartPole-v1"]
    tune += ["--trials", "1", "--timesteps", "100000", "--seeds", "1"]
    for delay in (0.15, 0.3, 0.6, 1.0, 1.5):
        process = subprocess.Popen(
            [*tune, "--storage", "sqlite:///c.db", "--study", f"s{delay}"],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # a shell's & too
        )
        time.sleep(delay)
        process.send_signal(signal.SIGINT)
        lines = process.communicate(timeout=120)[0].strip().splitlines()
        if process.returncode != 130:  # Python's own start, before tune.py's first line
            assert lines[-1] == "KeyboardInterrupt" and "tune.py" not in "".join(lines), lines
        else:
            assert len(lines) == 1 and lines[0].startswith("interrupted"), (delay, lines)
    pytest.importorskip("matplotlib")
    report = [*tune[:-4], "--timesteps", "400", "--seeds", "1", "--plots", "plots"]
    process = subprocess.Popen(  # and while it reports, drawing its plots
        [*report, "--storage", "sqlite:///c.db", "--study", "report"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    lines = [process.stdout.readline()]
    while lines[-1] and not lines[-1].startswith("best value"):  # "": the output ended
        lines.append(process.stdout.readline())
    process.send_signal(signal.SIGINT)
    last = process.communicate(timeout=60)[0].strip().splitlines()[-1]
    assert process.returncode == 130 and last.startswith("interrupted: 1 trials kept"), last


@pytest.mark.slow
def test_the_tuner_hears_sigterm_as_ctrl_c_and_keeps_its_trials(tmp_path):
    """SIGTERM during a trial: exit 143 with one line, the trial marked failed (never left
    running), the finished ones kept; the same command then finishes the study."""
    optuna = pytest.importorskip("optuna")
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    study = ["--env", "CartPole-v1", "--timesteps", "40000", "--seeds", "2", "--study", "s"]
    study += ["--storage", storage, "--threshold", "1e9", "--eval-episodes", "2"]  # never met:
    args = [sys.executable, str(HERE / "examples" / "tune.py"), *study, "--trials", "3"]  # long
    env = dict(os.environ, PYTHONPATH=str(HERE))
    process = subprocess.Popen(args, cwd=tmp_path, env=env, stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # into its second trial
        time.sleep(0.2)
        with contextlib.suppress(Exception):
            trials = optuna.load_study(study_name="s", storage=storage).trials
            if len(trials) == 2:
                break
    process.send_signal(signal.SIGTERM)
    out, _ = process.communicate(timeout=60)
    assert process.returncode == 143 and out.count("interrupted:") == 1, out
    states = [t.state.name for t in optuna.load_study(study_name="s", storage=storage).trials]
    assert "RUNNING" not in states and states[0] in ("COMPLETE", "PRUNED"), states
    assert _run(args[1:], tmp_path).returncode == 0
    states = [t.state.name for t in optuna.load_study(study_name="s", storage=storage).trials]
    assert sum(s in ("COMPLETE", "PRUNED") for s in states) == 3


def test_the_tuners_objective_in_closed_form(monkeypatch):
    """With a threshold: the mean over seeds of the episodes to it, a seed never reaching it
    counted as twice the budget's episodes times one plus its shortfall; without: minus the
    mean evaluation return."""
    monkeypatch.syspath_prepend(str(HERE / "examples"))
    tune = importlib.import_module("tune")
    reached = dict(reached=100, best=3100.0, returns=[3100.0])
    short = dict(reached=None, best=1500.0, returns=[-1.0, 1500.0])
    assert tune.objective_value([reached, short], 3000.0, 1000) == (100 + 2 * 1000 * 1.5) / 2
    below = dict(reached=None, best=-500.0, returns=[])  # a negative threshold: |threshold|
    assert tune.objective_value([below], -200.0, 10) == 2 * 10 * (1 + 300 / 200)
    assert tune.objective_value([reached, short], None, 1000) == -(3100 - 1 + 1500) / 3
    assert tune.time_limit("Hopper-v4") == 1000 and tune.time_limit("CartPole-v1") == 500


def test_the_tuner_starts_from_the_papers_settings_once(monkeypatch):
    """The study's first trial is the paper's settings (as b's share of N), queued once;
    none where the paper's lie outside the search space."""
    optuna = pytest.importorskip("optuna")
    monkeypatch.syspath_prepend(str(HERE / "examples"))
    tune = importlib.import_module("tune")
    paper = dict(n_delta=8, top_share=0.5, learning_rate=0.01, delta_std=0.025)
    paper.update(normalize_obs=True, alive_bonus_offset=-1.0)
    assert tune.starting_point("Hopper-v4") == paper
    assert tune.starting_point("Humanoid-v4") is None  # N = 230: beyond 64
    study = optuna.create_study()
    for _ in range(2):
        tune.start_from_the_default(study, "Hopper-v4")
    assert [t.system_attrs["fixed_params"] for t in study.trials] == [paper]
    trial = study.ask()
    assert tune.suggest(trial) == dict(
        normalize_obs=True,
        alive_bonus_offset=-1.0,
        n_delta=8,
        n_top=4,
        learning_rate=0.01,
        delta_std=0.025,
    )


OWN_TESTS = ("rl_zoo.py", "tune.py")


@pytest.mark.slow
@pytest.mark.parametrize(  # rl_zoo.py and tune.py: their own tests
    "example",
    sorted(p.name for p in (HERE / "examples").glob("*.py") if p.name not in OWN_TESTS),
)
def test_examples_run_with_a_tiny_budget(example, tmp_path):
    needs = {
        "ray_cluster.py": "ray",
        "dask_cluster.py": "distributed",
        "multicore.py": "mujoco",
        "plot_progress.py": "matplotlib",
        "video.py": "imageio_ffmpeg",
    }
    if example in needs:
        pytest.importorskip(needs[example])
    args = ["--total-timesteps", "1500"]
    if example == "plot_progress.py":  # it plots a run: make one
        assert (
            _run(
                [
                    str(HERE / "ars.py"),
                    "--total-timesteps",
                    "3000",
                    "--eval-freq",
                    "1000",
                    "--run-dir",
                    "run",
                ],
                tmp_path,
            ).returncode
            == 0
        )
        args = ["run"]
    if example == "video.py":  # it films a saved model
        pytest.importorskip("mujoco")
        ARS("LinearPolicy", "InvertedPendulum-v4", seed=0).save(tmp_path / "m.npz")
        args = ["m.npz", "clip.gif", "--max-episode-steps", "20"]
    result = _run(
        [str(HERE / "examples" / example), *args],
        tmp_path,
        env=dict(os.environ, PYTHONPATH=str(HERE), MUJOCO_GL=os.environ.get("MUJOCO_GL", "egl")),
    )
    if example == "video.py" and "cannot render" in result.stderr:
        pytest.skip(result.stderr)
    assert result.returncode == 0, result.stdout + result.stderr
    if example == "plot_progress.py":
        assert (tmp_path / "run" / "progress.png").stat().st_size > 10_000
    if example == "quickstart.py":  # what its comment says it writes
        assert ARS.load(tmp_path / "quickstart_model.zip").num_timesteps >= 1500


def test_the_readmes_python_example_shows_learning_as_it_says(tmp_path, monkeypatch, capsys):
    """The README's first Python block, run as written: the returns its comments give."""
    readme = (HERE / "README.md").read_text()
    block = readme.split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    exec(compile(block, "README.md", "exec"), {})
    before, after = [eval(line) for line in capsys.readouterr().out.splitlines()]
    comments = re.findall(r"# \(([-\d.]+), ([-\d.]+)\)", block)
    assert [(round(m, 1), round(s, 2)) for m, s in (before, after)] == [
        (float(m), float(s)) for m, s in comments
    ]
    assert (tmp_path / "cartpole.zip").exists()


@pytest.mark.slow
def test_benchmark_scripts_run(tmp_path):
    pytest.importorskip("mujoco")
    result = _run(
        [
            str(HERE / "benchmarks" / "speed.py"),
            "--envs",
            "Pendulum-v1",
            "--steps",
            "2000",
            "--repeats",
            "1",
            "--impls",
            "bare",
            "bare-zero",
            "ars",
            "ars-async",
            "--out",
            "out",
        ],
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    rows = json.loads((tmp_path / "out" / "speed.json").read_text())["rows"]
    assert (
        rows[0]["ars"]["median"] > 0 and "ars/bare" in rows[0] and 0 < rows[0]["ars own share"] < 1
    )
    args = [
        "--envs",
        "Swimmer-v4",
        "--seeds",
        "1",
        "--budget",
        "4000",
        "--eval-freq",
        "2000",
        "--workers",
        "2",
        "--results",
        "out/m.json",
        "--runs-dir",
        "runs",
    ]
    result = _run([str(HERE / "benchmarks" / "learning.py"), *args], tmp_path)
    assert result.returncode == 0, result.stderr
    runs = json.loads((tmp_path / "out" / "m.json").read_text())["ars:Swimmer-v4"]
    assert [e[0] for e in runs["1"]["evaluations"]] == [0, 2000, 4000]
    assert "| Swimmer-v4 | ars | 1, 1 | 325 |" in (tmp_path / "out" / "m.md").read_text()
    assert (tmp_path / "out" / "models" / "Swimmer-v4-1.npz").exists()
    result = _run(
        [str(HERE / "benchmarks" / "learning.py"), *args, "--peer", "sb3-contrib"], tmp_path
    )
    assert result.returncode == 0, result.stderr  # the peer, on the same protocol
    peer = json.loads((tmp_path / "out" / "m.json").read_text())["sb3-contrib:Swimmer-v4"]
    assert [(e[0], e[4]) for e in peer["1"]["evaluations"]] == [(0, 0), (2000, 2), (4000, 4)]


@pytest.mark.slow
def test_benchmark_models_reach_their_recorded_return():
    """A trained model of each env in benchmarks/results/models scores what learning.json
    recorded."""
    pytest.importorskip("mujoco")
    sys.path.insert(0, str(HERE / "benchmarks"))
    import learning

    results = json.loads((HERE / "benchmarks" / "results" / "learning.json").read_text())
    checked = set()
    for path in sorted((HERE / "benchmarks" / "results" / "models").glob("*.npz")):
        env_id, seed = path.stem.rsplit("-", 1)[0], path.stem.rsplit("-", 1)[1]
        run = results.get(f"ars:{env_id}", {}).get(seed)
        if run is None or env_id in checked:  # one model per env: its evaluation, bit for bit
            continue
        model = ARS.load(path)
        assert model.num_timesteps == run["evaluations"][-1][0]
        seeds = learning.eval_seeds(int(seed))  # the benchmark's evaluation episodes
        # learning.json was recorded when float32 envs got float64 actions: the same network
        # with a float64 action space hands them those actions again
        low, high = (
            bound.astype(np.float64) for bound in (model.action_space.low, model.action_space.high)
        )
        wide = spaces.Box(low, high, dtype=np.float64)
        policy = model.policy
        network = ars.Network(model.observation_space, wide, policy.policy_name, policy.config())
        theta = policy.parameters_to_vector()
        it, jobs = ars.fixed_jobs(network, policy.obs_rms, theta, [list(seeds)])
        mean = ars.run_job(ars.make_env(env_id), it, jobs[0]).returns.mean()
        assert mean == pytest.approx(run["evaluations"][-1][2], rel=1e-9), path.name
        checked.add(env_id)
    assert len(checked) >= 3


def test_per_step_statistics_rule_in_closed_form(monkeypatch):
    """Issue 19's arms. Per step: x_t is normalised with the frozen rows (-1, 1) plus x_0 ..
    x_t; each rollout starts again from the frozen statistics; Line 8 merges every state as
    before. Clip-10: the frozen statistics, the normalised observations clipped to +-10."""
    arms = _arms(monkeypatch)
    env, frozen = CountingEnv(), RunningMeanStd.from_moments(np.zeros(1), np.ones(1), 2)
    network = ars.Network(env.observation_space, env.action_space, "LinearPolicy", None)
    it = ars.Iteration(network, np.ones(1), frozen, 0.0, 0, 1, track_obs=True)  # nu 0: theta
    jobs = [ars.Job(c, 0, (-1) ** c, np.array([c])) for c in range(2)]  # + and - of a direction
    results = [arms.run_job(env, it, job) for job in jobs]
    seen = [
        (1 - 1 / 3) / np.sqrt(8 / 9),
        (2 - 3 / 4) / np.sqrt(19 / 16),
        (3 - 6 / 5) / np.sqrt(44 / 25),
    ]
    np.testing.assert_allclose(env.actions, seen * 2, rtol=1e-12)
    assert frozen.count == 2 and frozen.mean[0] == 0 and frozen.var[0] == 1  # left alone
    merged = ars.merge_statistics(frozen, [r.visited for r in results])
    assert merged.count == 8 and np.allclose([merged.mean[0], merged.var[0]], [1.5, 1.5])
    env.actions = []  # the first-iteration arm in iteration 0 only; evaluations: frozen
    arms.run_job(env, it._replace(index=0), jobs[0], arm="per-step-statistics-first-iteration")
    np.testing.assert_allclose(env.actions, seen, rtol=1e-12)
    env.actions = []
    arms.run_job(env, it, jobs[0], arm="per-step-statistics-first-iteration")
    arms.run_job(env, it._replace(track_obs=False), jobs[0])
    arms.run_job(env, it, jobs[0]._replace(weights=np.ones(1)))  # as AsyncEval.send_jobs sends
    arms.run_job(env, it, jobs[0]._replace(sign=0))  # theta itself
    np.testing.assert_allclose(env.actions, [1, 2, 3] * 4)
    env.actions, narrow = [], it._replace(obs_rms=RunningMeanStd.from_moments([0.0], [0.04], 2))
    for clipped in (narrow, narrow._replace(track_obs=False)):  # clip-10: x / 0.2, at most 10
        arms.run_job(env, clipped, jobs[0], arm="clip-10")
    np.testing.assert_allclose(env.actions, [5, 10, 10] * 2)


@pytest.mark.slow
def test_per_step_statistics_rule_gives_the_same_weights_with_any_worker_count(monkeypatch):
    arms = _arms(monkeypatch)
    monkeypatch.setattr(ars, "run_job", ars.run_job)  # restored after the test
    frozen_rule = _pendulum_model().learn(2400).policy.parameters_to_vector()
    arms.install("per-step-statistics")
    one = _pendulum_model().learn(2400)
    make = functools.partial(arms.make_env, "per-step-statistics", "Pendulum-v1")
    with AsyncEval([make] * 2, _pendulum_model().policy) as async_eval:
        two = _pendulum_model().learn(2400, async_eval=async_eval)
    _assert_same_weights(one, two)
    assert not np.array_equal(one.policy.parameters_to_vector(), frozen_rule)


def test_orthogonal_directions_are_orthogonal_with_their_gaussian_rows_norms(monkeypatch):
    """Issue 45's arm: within a block of n_params rows, the directions are orthogonal and each
    has its Gaussian row's norm; row 0 of each block is the Gaussian row, bit for bit (so with
    N = 1 the arm is the paper's rule); a later call returns the same bits."""
    arms = _arms(monkeypatch)
    n_params, n = 5, 12  # blocks: rows 0-4, 5-9, 10-11
    gaussian = np.stack([ars.direction(7, 2, k, n_params) for k in range(n)])
    rows = np.stack([arms.orthogonal_direction(7, 2, k, n_params) for k in range(n)])
    for block in (rows[:5], rows[5:10], rows[10:]):
        gram = block @ block.T
        np.testing.assert_allclose(gram - np.diag(np.diag(gram)), 0, atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), np.linalg.norm(gaussian, axis=1))
    assert all(np.array_equal(rows[k], gaussian[k]) for k in (0, 5, 10))
    assert not np.allclose(rows[1], gaussian[1])
    # Row 1 by hand: the Gaussian row minus its projection on row 0, at the Gaussian norm.
    u = gaussian[1] - (gaussian[1] @ gaussian[0]) / (gaussian[0] @ gaussian[0]) * gaussian[0]
    np.testing.assert_allclose(rows[1], u / np.linalg.norm(u) * np.linalg.norm(gaussian[1]))
    arms._orthogonal_rows.cache_clear()  # rebuilt from the streams alone: the same bits
    assert np.array_equal(arms.orthogonal_direction(7, 2, 11, n_params), rows[11])


@pytest.mark.slow
def test_orthogonal_directions_give_the_same_weights_with_any_worker_count(monkeypatch):
    arms = _arms(monkeypatch)
    monkeypatch.setattr(ars, "direction", ars.direction)  # restored after the test
    paper_rule = _pendulum_model().learn(2400).policy.parameters_to_vector()
    arms.install("orthogonal")
    one = _pendulum_model().learn(2400)  # N = 4 > n_params = 3: two blocks
    make = functools.partial(arms.make_env, "orthogonal", "Pendulum-v1")
    for workers in (2, 3):
        with AsyncEval([make] * workers, _pendulum_model().policy) as async_eval:
            _assert_same_weights(one, _pendulum_model().learn(2400, async_eval=async_eval))
    assert not np.array_equal(one.policy.parameters_to_vector(), paper_rule)


def test_sb3_emulation_statistics_follow_sb3s_own_running_mean_std(monkeypatch):
    """Issue 33's emulation, on SB3's own RunningMeanStd: each lane starts fresh (count 1e-4)
    in iteration 0 and takes the reset state, each state acted on and the auto-reset one
    (1, 2, 3, then 1: the final 4 never); the main statistics (sb3's learn() reset state
    first) merge each lane's, then ``count -= old_count``; later lanes start from them."""
    arms = _arms(monkeypatch)
    rms_class = pytest.importorskip("stable_baselines3.common.running_mean_std").RunningMeanStd
    gym.register("CountingLine-v0", entry_point=CountingEnv, max_episode_steps=10)
    emulation = arms.Emulation("CountingLine-v0", 0, n_delta=1)  # candidates 0 (+) and 1 (-)
    main, old_count, states = rms_class(shape=(1,)), 0.0, np.array([[1.0], [2.0], [3.0], [1.0]])
    main.update(np.array([[1.0]]))
    for index in range(3):
        emulation.iterate()
        lanes = [rms_class(shape=(1,)) if index == 0 else main.copy() for _ in range(2)]
        for lane in lanes:
            for row in states:  # one by one, as VecNormalize updates
                lane.update(row[None])
            main.combine(lane)
            main.count -= old_count
        old_count = main.count
        assert emulation.main.count == pytest.approx(main.count, rel=1e-15)
        np.testing.assert_allclose(emulation.main.mean, main.mean, rtol=1e-13)
        np.testing.assert_allclose(emulation.main.var, main.var, rtol=1e-13)
    assert emulation.timesteps == 3 * 2 * 3 and emulation.exact.count == 1 + 3 * 2 * 4
    resumed = arms.Emulation.resume("CountingLine-v0", json.loads(json.dumps(emulation.state())))
    emulation.iterate()
    resumed.iterate()
    assert np.array_equal(emulation.theta, resumed.theta) and emulation.theta.dtype == np.float32
    assert emulation.main.to_json() == resumed.main.to_json()
    with pytest.raises(ValueError, match="unknown sb3-emulation settings"):
        arms.Emulation("CountingLine-v0", 0, n_delta=1, lane=3)


def test_learning_benchmark_reads_pythons_booleans(monkeypatch):
    monkeypatch.syspath_prepend(str(HERE / "benchmarks"))
    import learning

    assert learning.parse_setting("common_random_numbers=False") == ("common_random_numbers", False)
    assert learning.parse_setting("zero_policy=True") == ("zero_policy", True)
    assert learning.parse_setting("max_episode_steps=None") == ("max_episode_steps", None)
    assert learning.parse_setting("n_delta=16") == ("n_delta", 16)


def test_learning_runs_sharing_a_results_file_keep_every_record(tmp_path):
    """Two queues of runs share one results file: each adds its record to the file as it is,
    under a lock, so none is lost and the file is never a mix of two writes."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import learning, pathlib\n"
        "for seed in range(8):\n"
        "    learning.add_record(pathlib.Path(sys.argv[2]), sys.argv[3], seed, {'x': [0.5] * 5000})"
    )
    path, folder = tmp_path / "results.json", str(HERE / "benchmarks")
    runs = [
        subprocess.Popen([sys.executable, "-c", code, folder, str(path), f"arm{i}"])
        for i in range(4)
    ]
    assert [run.wait(timeout=120) for run in runs] == [0] * 4
    results = json.loads(path.read_text())
    assert {key: sorted(map(int, seeds)) for key, seeds in results.items()} == {
        f"arm{i}": list(range(8)) for i in range(4)
    }


@pytest.mark.slow
def test_sb3_emulation_gives_sb3_contribs_weights_and_statistics(monkeypatch):
    """Given sb3-contrib's directions and worker seeds, the emulation is sb3-contrib: Swimmer's
    weights agree to float32's rounding; on HalfCheetah with zero directions (so that the
    float32 rounding of two matmul libraries cannot diverge a chaotic run), the statistics
    of two iterations are the same bits."""
    pytest.importorskip("mujoco")
    model, emulation = _sb3_contrib_beside_the_emulation(monkeypatch, "Swimmer-v4", 1, 3)
    assert emulation.index == 3 and np.abs(model.weights.numpy()).max() > 0.05
    np.testing.assert_allclose(model.weights.numpy(), emulation.theta, atol=1e-6)
    model, emulation = _sb3_contrib_beside_the_emulation(monkeypatch, "HalfCheetah-v4", 2, 2, True)
    rms = model.get_vec_normalize_env().obs_rms
    assert emulation.index == 2 and rms.count == emulation.main.count == pytest.approx(8009.0003)
    assert np.array_equal(rms.mean, emulation.main.mean) and np.array_equal(
        rms.var, emulation.main.var
    )
