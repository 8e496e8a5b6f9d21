"""Videos of a trained policy: one deterministic episode to an MP4 or a GIF, or in a window.

    python examples/video.py MODEL clip.gif               # the env the model was trained on
    python examples/video.py MODEL clip.mp4 --env Hopper-v5 --fps 30 --max-episode-steps 500
    python examples/video.py MODEL --render               # in a window

    from video import record_video                        # examples/ on sys.path, or copy it
    record_video(model, "clip.mp4")                        # an ARS model or a policy

It uses only public names of ars. Needs ``pip install "ars-numpy[video]"`` (imageio-ffmpeg;
pygame for classic-control envs) and, for MuJoCo envs, ``"ars-numpy[mujoco]"``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # ars.py of this checkout
import ars  # noqa: E402

_INTERRUPTED: list[int] = []  # signals received: GL setup can swallow a KeyboardInterrupt


def _require_ffmpeg() -> Any:
    try:
        return importlib.import_module("imageio_ffmpeg")
    except ImportError as error:
        message = 'videos need imageio-ffmpeg: pip install "ars-numpy[video]"'
        raise ModuleNotFoundError(message) from error


GIF_FPS, MP4_FPS = 10, 30  # a clip's frames per second by default: steps are sampled to it


def record_video(
    model: Any,
    path: str | os.PathLike,
    env: Any = None,
    seed: int | None = None,
    max_steps: int | None = None,
    width: int = 200,
    fps: float | None = None,
) -> tuple[float, int]:
    """Record one deterministic episode of ``model`` (an ARS or a policy) to an MP4 or GIF.

    ``env``: an id (default: the model's), or an env (or function) made with
    ``render_mode="rgb_array"``; ``seed``: the episode's env seed (default: the model's first
    evaluation seed); ``max_steps``: the episode's length at most. The clip plays in real time
    at about ``fps`` frames a second (default ``MP4_FPS``, or ``GIF_FPS``): every k-th step is
    filmed, k the env's ``render_fps`` over ``fps``, and the steps between are simulated
    without rendering, which is most of a clip's time. A GIF is ``width`` pixels square
    (MuJoCo), 48 colors with a coarser floor: a few hundred KB for 10 s of a walker. Frames
    stream to ffmpeg (``pip install imageio-ffmpeg``), so memory stays flat; the file is
    written whole or not at all. MuJoCo renders without a display (``MUJOCO_GL=egl`` when
    unset). Returns the return and the number of frames (the first, then one per k steps)."""
    path = Path(path)
    if path.suffix.lower() not in (".mp4", ".gif") or path.is_dir():
        raise ValueError(f"a video must be an .mp4 or .gif file; got {str(path)!r}")
    ffmpeg = _require_ffmpeg()
    gif = path.suffix.lower() == ".gif"
    fps = (GIF_FPS if gif else MP4_FPS) if fps is None else fps
    ars.check_number("fps", fps, low=1.0)  # ffmpeg refuses rates far below a frame a second
    max_steps = None if max_steps is None else ars.check_integer("max_steps", max_steps, 1)
    with ars.atomic_file(path, "wb") as target:  # one that cannot be written fails before rendering
        render_env = rendering_env(model, env, "rgb_array", width if gif else None)
        steps_per_second = float(render_env.metadata.get("render_fps") or MP4_FPS)
        every = max(1, round(steps_per_second / fps))  # the clip keeps every k-th step
        encoder = Encoder(ffmpeg.get_ffmpeg_exe(), target.name, path, steps_per_second / every)
        try:
            total, n_frames = play(model, render_env, seed, max_steps, encoder, every)
        except BaseException:
            encoder.close(failed=True)
            raise
        encoder.close()
    return total, n_frames


def rendering_env(model: Any, env: Any, render_mode: str, size: int | None = None) -> Any:
    """The env to film or show ``model`` in: given (made so), or made from an id, else one line
    saying what to set or install. MuJoCo without a display needs ``MUJOCO_GL=egl`` before its
    first import (GLFW aborts), set here when it can be. With ``size`` (GIFs), MuJoCo renders
    ``size`` pixels square and its floor's checker 8 times coarser: a moving fine checker is
    most of a GIF's bytes."""
    env = env or getattr(model, "env_id", None)
    if env is None:
        raise ValueError("recording needs an env: pass env='Hopper-v4' (or a model saving it)")
    if not isinstance(env, str):
        return _given_env(env, render_mode)
    mujoco = _check_render_mode(env, render_mode)
    if mujoco and render_mode == "rgb_array" and not os.environ.get("MUJOCO_GL"):
        os.environ["MUJOCO_GL"] = "egl"  # off-screen frames need no display (read per renderer)
    recorded = getattr(model, "env_id", None)  # the model's own env: with its env_kwargs
    kwargs = ars.env_kwargs_for(env, None, recorded, getattr(model, "env_kwargs", None))
    try:
        return _made_to_render(env, render_mode, size if mujoco else None, mujoco, kwargs)
    except Exception as error:  # GL and display errors come from several libraries
        if _INTERRUPTED:  # a signal during GL setup, which a library turned into an error
            raise KeyboardInterrupt from error
        hint = "; set MUJOCO_GL=egl or osmesa, with its library installed" if mujoco else ""
        raise RuntimeError(f"cannot render {env}: {type(error).__name__}: {error}{hint}") from error


def _given_env(env: Any, render_mode: str) -> Any:
    """An env given, or a vector env's first, which must run in this process."""
    made = ars.resolve_env(env).gym_env
    made = (made.envs or [None])[0] if isinstance(made, ars.VecEnvs) else made
    if made is None:
        raise ValueError("a video needs an env in this process: an id, an env or a DummyVecEnv")
    if getattr(made, "render_mode", None) != render_mode:
        raise ValueError(f"the env must be made with render_mode={render_mode!r}")
    return made


def _check_render_mode(env_id: str, render_mode: str) -> bool:
    """Whether ``env_id`` (``[module:]Id``) can render ``render_mode`` here, before making it;
    True for a MuJoCo env."""
    module, _, name = env_id.rpartition(":")  # "module:Id": gym.make imports it, gym.spec not
    if module:
        importlib.import_module(module)
    entry = gym.spec(name).entry_point
    creator = entry
    with contextlib.suppress(Exception):  # the class's render modes, before making it
        creator = gym.envs.registration.load_env_creator(entry) if isinstance(entry, str) else entry
    modes = getattr(creator, "metadata", {}).get("render_modes", [render_mode])
    if render_mode not in modes:
        raise RuntimeError(f"{env_id} cannot render {render_mode!r} frames (its modes: {modes})")
    display = os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    if render_mode == "human" and not display:
        raise RuntimeError(f"cannot render {env_id} in a window: there is no display; film it")
    return "mujoco" in str(entry)


def _made_to_render(
    env_id: str, render_mode: str, size: int | None, mujoco: bool, env_kwargs: dict
) -> Any:
    """``env_id`` made to render with ``env_kwargs``, one frame rendered; MuJoCo's camera
    tracking the agent."""
    sized = {"width": size, "height": size} if size else {}
    env = gym.make(env_id, render_mode=render_mode, **{**env_kwargs, **sized})
    if sized:
        env.unwrapped.model.mat_texrepeat[:] /= 8
    env.reset(seed=0)
    env.render()
    if mujoco:  # the camera tracks the agent, as gymnasium's locomotion envs ask
        renderer = env.unwrapped.mujoco_renderer
        renderer.camera_id = None  # keep the camera we set: a camera id would reset its type
        camera = renderer._get_viewer(render_mode).cam
        camera.type = importlib.import_module("mujoco").mjtCamera.mjCAMERA_TRACKING
        camera.trackbodyid = int((renderer.default_cam_config or {}).get("trackbodyid", 1) or 1)
    return env


def play(
    model: Any, env: Any, seed: int | None, max_steps: Any, show: Callable, every: int = 1
) -> tuple:
    """One deterministic episode of ``model`` on ``env``; the frame of the reset and of every
    ``every``-th step to ``show`` (only those are rendered). Returns the return and frames."""
    policy, steps = ars.policy_of(model), [0]
    if (env.observation_space, env.action_space) != (policy.observation_space, policy.action_space):
        raise ValueError(
            f"the env has spaces {env.observation_space} and {env.action_space}, but the policy "
            f"was built for {policy.observation_space} and {policy.action_space}"
        )
    seed = int(ars.evaluation_seeds(getattr(model, "seed", 0), 1)[0]) if seed is None else seed
    max_steps = getattr(model, "max_episode_steps", None) if max_steps is None else max_steps

    def frame(*_: Any) -> None:
        if steps[0] % every == 0:
            show(env.render())
        steps[0] += 1

    env.reset(seed=seed)
    frame()
    vec_normalize = ars.observations_seen_by(model)  # as it saw observations in training
    evaluator = ars.InProcessEval(env)
    result = ars.evaluate_episodes(policy, evaluator, [seed], max_steps, vec_normalize, frame)
    env.close()
    return float(result[0].returns[0]), -(-steps[0] // every)  # the frames: steps 0, k, 2k...


class Encoder:
    """ffmpeg, fed one frame at a time, writing ``tmp`` (the file that becomes ``path``)."""

    def __init__(self, ffmpeg: str, tmp: str, path: Path, fps: float):
        self.path, self.process, rate = path, None, str(Fraction(fps).limit_denominator())
        self.shape: tuple | None = None  # the first frame's: every frame must have it
        fmt = path.suffix.lower()[1:]
        if fmt == "mp4":  # H.264 needs even sides
            codec = "-vf pad=ceil(iw/2)*2:ceil(ih/2)*2 -vcodec libx264 -crf 25 -pix_fmt yuv420p"
        else:  # a palette per frame as it comes (one for the clip kept every frame), and only
            # the changed rectangle of each frame; the frames come at the clip's rate
            graph = "split[a][b];[a]palettegen=max_colors=48:"
            graph += "stats_mode=single[p];[b][p]paletteuse=new=1:dither=none:diff_mode=rectangle"
            codec = f"-filter_complex {graph} -vcodec gif -pix_fmt pal8"
        words = f"-y -v error -f rawvideo -pix_fmt rgb24 -r {rate} -i - {codec} -f {fmt}".split()
        self.command = [ffmpeg, *words, f"file:{tmp}"]  # [:8]: before -s W x H

    def __call__(self, frame: Any) -> None:
        """Write one frame; stop if interrupted."""
        if _INTERRUPTED:
            raise KeyboardInterrupt
        array = isinstance(frame, np.ndarray)
        rgb = array and frame.dtype == np.uint8 and frame.ndim == 3 and frame.shape[2] == 3
        if not (rgb and self.shape in (None, frame.shape)):
            what = f"{frame.dtype} of shape {frame.shape}" if array else type(frame).__name__
            raise RuntimeError(
                f"the env's render() gave {what}, not the uint8 RGB image of "
                f"shape {self.shape or '(h, w, 3)'} a video needs (is it made with "
                "render_mode='rgb_array'?)"
            )
        self.shape = frame.shape
        if self.process is None:  # the size is the first frame's
            size = ["-s", f"{frame.shape[1]}x{frame.shape[0]}"]
            command = self.command[:8] + size + self.command[8:]
            self.process = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
            )
        with contextlib.suppress(BrokenPipeError):  # ffmpeg stopped early: its message follows
            self.process.stdin.write(np.ascontiguousarray(frame, dtype=np.uint8).tobytes())

    def close(self, failed: bool = False) -> None:
        """Finish the file, or stop ffmpeg if the episode failed (an OSError if ffmpeg did)."""
        if self.process is None:
            return
        if failed:
            self.process.kill()
        _, errors = self.process.communicate()
        if self.process.returncode != 0 and not failed:
            lines = errors.decode(errors="replace").strip().splitlines()
            raise OSError(f"could not write {self.path}: ffmpeg: {(lines or ['failed'])[-1]}")


def _interrupt(signum: int, frame: Any) -> None:
    _INTERRUPTED.append(signum)
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """The command line: film or show one episode of a saved model; the exit status."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("model", help="a model (or policy) saved by ars")
    p.add_argument("video", nargs="?", help="the clip to write: an .mp4 or .gif file")
    p.add_argument("--env", help="the env id (default: the model's)")
    p.add_argument("--render", action="store_true", help="show the episode in a window instead")
    p.add_argument("--fps", type=float, help="the clip's frames a second (30 MP4, 10 GIF)")
    p.add_argument("--max-episode-steps", type=int, help="the episode's length at most")
    args = p.parse_args(argv)
    if os.getcwd() not in sys.path:  # a module:Id env of the current folder, as ars.py finds
        sys.path.append(os.getcwd())
    if (args.video is None) == (not args.render):
        p.error("give a video file, or --render (not both)")
    previous = {s: signal.signal(s, _interrupt) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        kind = ars.read_model_file(args.model)[0]["kind"]
        model = (ars.ARS if kind == "model" else ars.ARSPolicy).load(args.model)
        env_id = args.env or getattr(model, "env_id", None)
        if env_id is None:
            raise ValueError(f"{args.model} does not record its env; pass --env")
        if args.render:
            render_env = rendering_env(model, env_id, "human")
            total = play(model, render_env, None, args.max_episode_steps, lambda frame: None)[0]
            print(f"{env_id}: return {total:.2f} in one episode")
        else:
            fps, steps = args.fps, args.max_episode_steps
            total, n = record_video(model, args.video, env_id, max_steps=steps, fps=fps)
            print(f"{env_id}: return {total:.2f}; {n} frames recorded in {args.video}")
        return 0
    except KeyboardInterrupt:
        print("interrupted: nothing was written", file=sys.stderr)
        return 128 + (_INTERRUPTED or [signal.SIGINT])[-1]
    except (ImportError, ValueError, TypeError, OSError, RuntimeError, gym.error.Error) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


if __name__ == "__main__":
    sys.exit(main())
