"""Toy envs, fixtures and helpers shared by test_ars.py: small envs whose numbers are known
in closed form, and the helpers that run ars on them."""

from __future__ import annotations

import csv
import functools
import io
import json
import multiprocessing
import os
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import ars
from ars import ARS

sys.path.insert(0, str(Path(__file__).resolve().parent / "examples"))
import video as video_example  # noqa: E402  (examples/ is not a package)

HERE = Path(__file__).resolve().parent


def _actor(policy, theta=None):
    """``obs -> action`` for a policy's own parameters and statistics, or for ``theta``."""
    theta = policy.parameters_to_vector() if theta is None else theta
    return policy.actor(theta, policy.obs_rms)


def _episodes(env, policy, seeds, theta=None, track_obs=True):
    """ars.run_job for a policy's own parameters (or ``theta``) on episodes of ``seeds``."""
    theta = policy.parameters_to_vector() if theta is None else theta
    network, rms = policy.network(), policy.obs_rms
    it, jobs = ars.fixed_jobs(network, rms, theta, [list(seeds)], track_obs=track_obs)
    return ars.run_job(env, it, jobs[0])


class _Acting:
    """A Network whose actor is made already: what run_job does per step, measured alone."""

    def __init__(self, network, act):
        self.network, self.act, self.n_params = network, act, network.n_params

    def actor(self, theta, obs_rms):
        return self.act


def _seed(seed, iteration, candidate, episode):
    """The env seed of a training rollout."""
    return int(ars.env_seeds(seed, ars.ENV_SEEDS, iteration, candidate, n=1, first=episode)[0])


class QuadraticBandit(gym.Env):
    """One step: observation ``x`` (fixed), reward ``-||a - target||^2``."""

    x = np.array([1.0, 0.5, -1.0])
    target = np.array([0.3, -0.7])
    observation_space = spaces.Box(-np.inf, np.inf, (3,), np.float64)
    action_space = spaces.Box(-np.inf, np.inf, (2,), np.float64)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.x.copy(), {}

    def step(self, action):
        return self.x.copy(), -float(np.sum((action - self.target) ** 2)), True, False, {}


class NoisyWalk(gym.Env):
    """Random observations from the env's seeded generator; 5 steps; the action sets the reward."""

    observation_space = spaces.Box(-np.inf, np.inf, (4,), np.float64)
    action_space = spaces.Box(-1.0, 1.0, (2,), np.float64)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.obs = self.np_random.normal(3.0, 2.0, 4)
        return self.obs.copy(), {}

    def step(self, action):
        self.t += 1
        reward = float(action[0] * self.obs[0] - action[1] ** 2)
        self.obs = self.np_random.normal(3.0, 2.0, 4)
        return self.obs.copy(), reward, False, self.t >= 5, {}


class StepRecorder(gym.Wrapper):
    """Records reset seeds, the observations the policy acted on, and the policy's statistics."""

    def __init__(self, env, model=None):
        super().__init__(env)
        self.model, self.seeds, self.acted_on, self.stats_seen = model, [], [], []
        self._last = None

    def reset(self, *, seed=None, options=None):
        self.seeds.append(seed)
        obs, info = self.env.reset(seed=seed, options=options)
        self._last = obs
        return obs, info

    def step(self, action):
        self.acted_on.append(np.asarray(self._last, dtype=np.float64).ravel())
        if self.model is not None and self.model.policy.obs_rms is not None:
            rms = self.model.policy.obs_rms
            self.stats_seen.append((rms.count, rms.mean.copy()))
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._last = obs
        return obs, reward, terminated, truncated, info


class BadEnv(NoisyWalk):
    """Gives a non-finite reward or observation on a chosen reset seed's first step."""

    def __init__(self, what="reward"):
        self.what, self.poison_seed = what, None

    def reset(self, *, seed=None, options=None):
        self.poisoned = seed == self.poison_seed
        return super().reset(seed=seed)

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        if self.poisoned and self.what == "reward":
            reward = float("nan")
        if self.poisoned and self.what == "observation":
            obs[1] = np.inf
        return obs, reward, terminated, truncated, info


def _train(seed, steps=3000, **kwargs):
    model = ARS(
        "LinearPolicy", "Pendulum-v1", n_delta=4, n_top=2, normalize_obs=True, seed=seed, **kwargs
    )
    return model.learn(steps)


def _run(args, cwd, env=None, timeout=240):
    """A script in a child process that imports this checkout's ars, installed or not."""
    env = dict(os.environ if env is None else env)
    env.pop("PYTHONWARNINGS", None)  # a child's warnings as Python's defaults show them
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env
    )


def _blocker(tmp_path, modules):
    """A sitecustomize that makes ``modules`` unimportable, as on a machine without them."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import sys\n"
        "class Block:\n"
        f"    names = {tuple(modules)!r}\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in self.names:\n"
        "            raise ImportError(f'No module named {name!r} (blocked by the test)')\n"
        "sys.meta_path.insert(0, Block())\n"
    )
    return dict(os.environ, PYTHONPATH=str(site))


PENDULUM = functools.partial(gym.make, "Pendulum-v1")


CARTPOLE = functools.partial(gym.make, "CartPole-v1")


def _pendulum_model(seed=3):
    return ARS(
        "LinearPolicy",
        "Pendulum-v1",
        n_delta=4,
        n_top=2,
        normalize_obs=True,
        n_eval_episodes=2,
        seed=seed,
    )


def _weights(model):
    return model.policy.parameters_to_vector(), model.policy.obs_rms.mean, model.policy.obs_rms.var


def _assert_same_weights(a, b):
    """Bit-identical parameters and statistics (models, or lists from _weights)."""
    a = _weights(a) if isinstance(a, ARS) else a
    b = _weights(b) if isinstance(b, ARS) else b
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert np.array_equal(x, y)


def _rows(path):
    """The rows of a CSV file, as dicts."""
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def reference_run():
    return _weights(_pendulum_model().learn(4000))


def _assert_all_dead(processes):
    assert all(not p.is_alive() for p in processes)
    alive = {p.pid for p in multiprocessing.active_children()}
    assert not alive & {p.pid for p in processes}


class OptionsEnv(NoisyWalk):
    """Reward scaled by the reset option ``scale``."""

    def reset(self, *, seed=None, options=None):
        self.scale = (options or {}).get("scale", 1.0)
        return super().reset(seed=seed)

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, self.scale, terminated, truncated, info


class CrashEnv(NoisyWalk):
    def reset(self, *, seed=None, options=None):
        if (options or {}).get("crash"):
            raise RuntimeError("the robot fell off the table")
        return super().reset(seed=seed)


class SlowEnv(NoisyWalk):
    def step(self, action):
        time.sleep(0.01)
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated, self.t >= 300, info


def _failing_env():
    raise ValueError("no such robot: Hopper-v99")


class CodedWalk(gym.Env):
    """Reach the goal by repeating the action the (MultiDiscrete or MultiBinary) obs codes."""

    def __init__(self, kind):
        self.observation_space = (
            spaces.MultiDiscrete([3, 2]) if kind == "MultiDiscreteWalk" else spaces.MultiBinary(3)
        )
        self.action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.obs = 0, self.observation_space.sample()
        return self.obs, {}

    def step(self, action):
        self.t += 1
        good = int(action) == int(self.obs[0] % 2)
        return self.obs, float(good) / 5, False, self.t >= 5 or not good, {}


class SeedRecorder(gym.Wrapper):
    """Pendulum that records the seed of every reset, and which reset each step follows."""

    def __init__(self, env=None):
        super().__init__(env or gym.make("Pendulum-v1"))
        self.log = []

    def reset(self, *, seed=None, options=None):
        self.log.append(seed)
        return super().reset(seed=seed, options=options)

    def step(self, action):
        if self.log[-1] != "stepped":
            self.log.append("stepped")
        return super().step(action)


def _vector_envs(k):
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import SubprocVecEnv

    return {
        "DummyVecEnv": lambda: make_vec_env("Pendulum-v1", n_envs=k),
        "SubprocVecEnv": lambda: make_vec_env(
            "Pendulum-v1",
            n_envs=k,
            vec_env_cls=SubprocVecEnv,
            vec_env_kwargs={"start_method": "fork"},
        ),
        "SyncVectorEnv": lambda: gym.make_vec("Pendulum-v1", k, vectorization_mode="sync"),
        "AsyncVectorEnv": lambda: gym.make_vec(
            "Pendulum-v1", k, vectorization_mode="async", vector_kwargs={"context": "fork"}
        ),
    }


def _sb3_callbacks(tmp_path, tag):
    callbacks = pytest.importorskip("stable_baselines3.common.callbacks")

    class CheckFreq(callbacks.BaseCallback):  # the custom callback of SB3's documentation
        def __init__(self, check_freq):
            super().__init__()
            self.check_freq, self.fired = check_freq, []

        def _on_step(self):
            if self.n_calls % self.check_freq == 0:
                self.fired.append(self.num_timesteps)
            return True

    check = CheckFreq(300)
    checkpoint = callbacks.CheckpointCallback(save_freq=500, save_path=str(tmp_path / tag / "ckpt"))
    evaluation = callbacks.EvalCallback(
        gym.make("Pendulum-v1"),
        eval_freq=1000,
        n_eval_episodes=2,
        verbose=0,
        log_path=str(tmp_path / tag / "eval"),
        warn=False,
    )
    every = callbacks.EveryNTimesteps(
        n_steps=1000, callback=callbacks.CheckpointCallback(1, str(tmp_path / tag / "n"))
    )
    return [check, checkpoint, evaluation, every], check


class ImageEnv(gym.Env):
    """84x84x3 observations: every message to and from a worker is megabytes."""

    observation_space = spaces.Box(0, 255, (84, 84, 3), np.uint8)
    action_space = spaces.Box(-1.0, 1.0, (2,), np.float64)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.np_random.integers(0, 256, (84, 84, 3), dtype=np.uint8), {}

    def step(self, action):
        self.t += 1
        obs = self.np_random.integers(0, 256, (84, 84, 3), dtype=np.uint8)
        return obs, float(action[0]), False, self.t >= 3, {}


class StuckEnv(NoisyWalk):
    """An env.step that never returns (a deadlocked simulator)."""

    def step(self, action):
        threading.Event().wait()


class EndlessEnv(NoisyWalk):
    """Never terminates and has no time limit."""

    def step(self, action):
        obs, reward, *_ = super().step(action)
        return obs, reward, False, False, {}


def _children(pid):
    """Every descendant process of ``pid`` (from /proc)."""
    found, todo = [], [pid]
    while todo:
        for task in Path(f"/proc/{todo.pop()}/task").glob("*"):
            for child in (task / "children").read_text().split():
                found.append(int(child))
                todo.append(int(child))
    return found


def _alive(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


class StuckOnCue(gym.Wrapper):
    """CartPole, stuck for 3 s a step while ``stuck`` is set (module level: shared by threads)."""

    stuck = threading.Event()

    def step(self, action):
        if self.stuck.is_set():
            time.sleep(3)
        return super().step(action)


def _spaces(env):
    return env.observation_space, env.action_space


def _frozen_jobs(policy, n):
    it = ars.Iteration(policy.network(), np.zeros(policy.n_params), None, 0.0, 0, 0)
    return it, [ars.Job(c, 0, 0, np.array([c], np.uint64)) for c in range(n)]


def _sleep_then(seconds, make):
    time.sleep(seconds)
    return make()


def _crafted(path, meta=None, members=None, compress=False):
    """A model file with the given metadata and extra members, written by hand."""
    meta = meta if meta is not None else {}
    with __import__("zipfile").ZipFile(path, "w", 8 if compress else 0) as archive:
        buffer = io.BytesIO()
        np.lib.format.write_array(buffer, np.array(json.dumps(meta)))
        archive.writestr("metadata.npy", buffer.getvalue())
        for name, data in (members or {}).items():
            archive.writestr(name, data)
    return path


def _peak_rss_of(code, tmp_path):
    """How far ``code`` raises the peak memory of a fresh process that imported ars (KB).

    VmHWM, not ru_maxrss: Linux carries ru_maxrss across exec, so a child of a large pytest
    process would start at the parent's peak and hide anything below it."""
    script = tmp_path / "probe.py"
    script.write_text(
        "import re, sys\nsys.path.insert(0, sys.argv[1])\n"
        "sys.path.insert(1, sys.argv[1] + '/examples')\nimport ars\n"
        "peak = lambda: int(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read())[1])\n"
        "before = peak()\n"
        f"try:\n    {code}\nexcept Exception as error:\n    print('REJECTED', error)\n"
        "print('GROWTH_KB', peak() - before)\n"
    )
    result = _run([str(script), str(HERE)], tmp_path)
    return result.stdout


def _sb3_file(path, source, data=None, pth=None, compress=False, extra=0):
    """sb3-contrib's file ``source`` with its JSON ``data`` changed and ``policy.pth`` swapped
    (``compress``: True for deflate, or a zipfile method; ``extra``: that many more members)."""
    with zipfile.ZipFile(source) as archive:
        members = {n: archive.read(n) for n in archive.namelist()}
    text = json.loads(members["data"])
    for key, value in (data or {}).items():
        if isinstance(value, dict) and isinstance(text.get(key), dict):
            text[key].update(value)
        else:
            text[key] = value
    members["data"] = json.dumps(text).encode()
    members["policy.pth"] = members["policy.pth"] if pth is None else pth
    members.update({f"extra{i}": b"" for i in range(extra)})
    method = zipfile.ZIP_DEFLATED if compress is True else compress or zipfile.ZIP_STORED
    with zipfile.ZipFile(path, "w", method) as z:
        for name, content in members.items():
            z.writestr(name, content)
    return path


def _pth(tensors, compress=False):
    """``torch.save(tensors)``'s bytes, optionally recompressed member by member."""
    torch = pytest.importorskip("torch")
    buffer = io.BytesIO()
    torch.save(tensors, buffer)
    if not compress:
        return buffer.getvalue()
    out = io.BytesIO()
    with zipfile.ZipFile(buffer) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for name in src.namelist():
            dst.writestr(name, src.read(name))
    return out.getvalue()


class WideEnv(gym.Env):
    """A Box observation of ``n`` entries with varied bounds: SB3 abbreviates them."""

    def __init__(self, n):
        self.observation_space = spaces.Box(-np.arange(1.0, n + 1), np.arange(1.0, n + 1))
        self.action_space = spaces.Box(-1.0, 1.0, (2,))

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), float(action.sum()), False, False, {}


class Scaled(gym.Wrapper):
    """An env whose observations or rewards are multiplied by huge factors."""

    def __init__(self, env_id, obs=1.0, reward=1.0):
        super().__init__(gym.make(env_id))
        shape = self.env.observation_space.shape
        self.observation_space = spaces.Box(-np.inf, np.inf, shape, np.float64)
        self.obs_scale, self.reward_scale = obs, reward

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        return np.float64(obs) * self.obs_scale, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return (
            np.float64(obs) * self.obs_scale,
            reward * self.reward_scale,
            terminated,
            truncated,
            info,
        )


def _cli(tmp_path, *args, **kwargs):
    return _run([str(HERE / "ars.py"), *args], tmp_path, **kwargs)


def _files_of(run_dir):
    """model.npz, best_model.npz and progress.csv without its wall-clock columns."""
    rows = _rows(run_dir / "progress.csv")
    for row in rows:
        row.pop("time/fps")
        row.pop("time/time_elapsed")
    models = [ARS.load(run_dir / name) for name in ("model.npz", "best_model.npz")]
    return rows, [_weights(m) for m in models], [(m.num_timesteps, m.n_updates) for m in models]


def _same_files(a, b):
    rows_a, weights_a, counts_a = _files_of(a)
    rows_b, weights_b, counts_b = _files_of(b)
    assert rows_a == rows_b and counts_a == counts_b
    for wa, wb in zip(weights_a, weights_b):
        _assert_same_weights(wa, wb)


COMMON = [
    "--env",
    "Pendulum-v1",
    "--n-delta",
    "2",
    "--total-timesteps",
    "60000",
    "--seed",
    "5",
    "--checkpoint-interval",
    "3",
    "--eval-freq",
    "4000",
    "--eval-episodes",
    "2",
    "--workers",
    "0",
]


class _Recording(ars.InProcessEval):
    """Records the parameters of every candidate it evaluates; optionally sends weights instead."""

    def __init__(self, env, weights_mode=False):
        super().__init__(env)
        self.weights_mode, self.seen = weights_mode, {}

    def evaluate(self, it, jobs, on_step=None):
        if self.weights_mode:  # the driver materialises every candidate, as before
            jobs = [job._replace(weights=ars.candidate_parameters(it, job).copy()) for job in jobs]
        for job in jobs:
            self.seen[(it.index, job.candidate)] = ars.candidate_parameters(it, job).copy()
        return super().evaluate(it, jobs, on_step)


def _clip(model, path, env_id, **kwargs):
    try:
        return video_example.record_video(model, path, env_id, **kwargs)
    except RuntimeError as error:
        if "cannot render" in str(error):
            pytest.skip(f"no rendering here: {error}")
        raise


STRIPES = """
import numpy as np, gymnasium as gym

class Stripes(gym.Env):  # 480 x 480 frames that change every step, cheap to make
    metadata = {"render_modes": ["rgb_array"], "render_fps": 50}
    observation_space = gym.spaces.Box(-1, 1, (2,))
    action_space = gym.spaces.Box(-1, 1, (1,))
    render_mode = "rgb_array"

    def __init__(self, steps):
        self.steps = steps

    def reset(self, seed=None, options=None):
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.zeros(2, np.float32), 0.0, False, self.t >= self.steps, {}

    def render(self):
        frame = np.zeros((480, 480, 3), np.uint8)
        frame[:, :, 0] = (np.arange(480) + self.t) % 256
        frame[self.t % 480, :, 1] = 255
        return frame

policy = __import__("ars").ARSLinearPolicy(Stripes.observation_space, Stripes.action_space)
"""
GIF_PROBE = """
import resource, sys
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[1] + "/examples")
import stripes, video

print(video.record_video(stripes.policy, sys.argv[3], stripes.Stripes(int(sys.argv[2]))))
print("PEAK_KB", resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def _arms(monkeypatch):
    monkeypatch.syspath_prepend(str(HERE / "benchmarks"))
    import arms

    return arms


class CountingEnv(gym.Env):
    """Observations 1, 2, 3 (one episode), and the actions it was sent."""

    observation_space = spaces.Box(-np.inf, np.inf, (1,), np.float64)
    action_space = spaces.Box(-100.0, 100.0, (1,), np.float64)

    def reset(self, *, seed=None, options=None):
        self.t, self.actions = 1, getattr(self, "actions", [])
        return np.array([1.0]), {}

    def step(self, action):
        self.actions.append(float(action[0]))
        self.t += 1
        return np.array([float(self.t)]), 0.0, self.t > 3, False, {}


def _sb3_contrib_beside_the_emulation(monkeypatch, env_id, n_delta, iterations, zero=False):
    """sb3-contrib's ARS with 2 AsyncEval workers, and the emulation, on the same directions
    (ars's streams, or zeros) and worker env seeds (1000 + worker): (sb3's, the emulation)."""
    torch = pytest.importorskip("torch")
    sb3_contrib = pytest.importorskip("sb3_contrib")
    arms = _arms(monkeypatch)
    import cloudpickle
    import speed

    cloudpickle.register_pickle_by_value(speed)
    hp, seed = ars.settings_for(env_id, "paper"), 5
    if zero:
        monkeypatch.setattr(ars, "direction", lambda *key: np.zeros(key[-1]))
    env = speed.sb3_env(env_id, hp["normalize_obs"])
    n_top, alpha, nu = min(hp["n_top"] or n_delta, n_delta), hp["learning_rate"], hp["delta_std"]
    model = sb3_contrib.ARS("LinearPolicy", env, n_delta, n_top, alpha, nu, seed=seed)
    real, calls = torch.normal, [0]

    def normal(*args, size=None, **kwargs):  # sb3-contrib's deltas: ars's directions
        if tuple(size or ()) != (n_delta, model.n_params):
            return real(*args, size=size, **kwargs)
        calls[0] += 1
        keys = [(seed, calls[0] - 1, k, model.n_params) for k in range(n_delta)]
        return torch.as_tensor(np.stack([ars.direction(*key) for key in keys]).astype(np.float32))

    monkeypatch.setattr(torch, "normal", normal)
    make = functools.partial(speed.sb3_env, env_id, hp["normalize_obs"])
    async_eval = sb3_contrib.common.vec_env.AsyncEval([make] * 2, model.policy)
    async_eval.seed(1000)  # worker i resets first with env seed 1000 + i
    model.learn(iterations * 2 * n_delta * 1000, async_eval=async_eval)  # 1,000-step episodes
    async_eval.close()
    emulation = arms.Emulation(env_id, seed, n_delta)
    for lane, lane_env in enumerate(emulation.envs):
        lane_env.unwrapped.np_random = np.random.default_rng(1000 + lane)  # as reset(seed=)
    if emulation.main is not None:  # sb3's main env, reset once with the model's seed
        obs = ars.make_env(env_id).reset(seed=seed)[0]
        emulation.main = arms.SB3Statistics(emulation.obs_dim).combine(obs, 0 * obs, 1)
    while emulation.index < calls[0]:
        emulation.iterate()
    return model, emulation
