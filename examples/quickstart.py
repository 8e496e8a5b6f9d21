"""Quickstart: train ARS on CartPole, save the model, load it back and evaluate it.

python examples/quickstart.py                  # about two seconds
python examples/quickstart.py --env Hopper-v4 --total-timesteps 300000
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(
    0, str(Path(__file__).resolve().parents[1])
)  # run from a checkout without installing
from ars import ARS, evaluate_policy, make_env, paper_model  # noqa: E402

parser = argparse.ArgumentParser(
    description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
)
parser.add_argument("--env", default="CartPole-v1")
parser.add_argument("--total-timesteps", type=int, default=50_000)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

# The paper's hyper-parameters for this task (see ars.PAPER_SETTINGS); any can be overridden.
model = paper_model(args.env, seed=args.seed, verbose=1)
model.learn(total_timesteps=args.total_timesteps, log_interval=10)

path = model.save("quickstart_model")  # -> quickstart_model.zip (SB3's suffix): arrays and JSON
loaded = ARS.load(path)  # no env needed to load and predict

obs, _ = make_env(args.env).reset(seed=0)
action, _ = loaded.predict(obs, deterministic=True)
print(f"first action: {action}")

mean, std = evaluate_policy(loaded, args.env, n_eval_episodes=10)  # the model's own seeds
print(f"{args.env}: mean return {mean:.1f} +/- {std:.1f} over 10 episodes")
