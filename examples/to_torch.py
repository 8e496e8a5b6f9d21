"""An ars policy as a ``torch.nn.Module`` that computes the same actions.

    from to_torch import to_torch     # copy this file beside ars.py, or put examples/ on sys.path
    module = to_torch(ARS.load("model.zip").policy)
    actions = module(torch.as_tensor(observations))

V2's normalisation is folded into the first layer, as ars does; Box actions are squashed or
clipped to their bounds, Discrete ones are the argmax. Box observations only. It was
``ARSPolicy.to_torch`` until ars.py had to fit its line budget (issue 32). Run this file to
check it on a short Pendulum run.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gymnasium import spaces

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # ars.py of this checkout
import ars  # noqa: E402


class TorchARSPolicy(torch.nn.Module):
    """The layers of ``policy`` (an :class:`ars.ARSPolicy`) as float64 torch modules."""

    def __init__(self, policy: ars.ARSPolicy):
        super().__init__()
        if not isinstance(policy.observation_space, spaces.Box):
            raise NotImplementedError("to_torch supports Box observation spaces")
        nn, modules = torch.nn, []
        name = "ReLU" if policy.activation_fn == "relu" else policy.activation_fn.capitalize()
        for weight, bias in policy.layers(policy.parameters_to_vector(), policy.obs_rms):
            linear = nn.Linear(*weight.shape[::-1], bias=bias is not None, dtype=torch.float64)
            with torch.no_grad():  # bias may be None: zip stops at the weight
                for parameter, value in zip(linear.parameters(), (weight, bias)):
                    parameter.copy_(torch.from_numpy(value))
            modules += [linear, getattr(nn, name)()]  # none after the last: [:-1]
        self.net = nn.Sequential(*modules[:-1])
        self.obs_shape, self.obs_dim = policy.observation_space.shape, policy.obs_dim
        self.action_space, self.squash_output = policy.action_space, policy.squash_output
        if isinstance(self.action_space, spaces.Box):
            self.register_buffer("low", torch.from_numpy(policy._low))
            self.register_buffer("high", torch.from_numpy(policy._high))

    def forward(self, obs: Any) -> torch.Tensor:
        """Actions for one observation or a batch, as ``policy.predict`` gives them."""
        obs = torch.as_tensor(obs, dtype=torch.float64)
        n_lead = obs.dim() - len(self.obs_shape)
        out = self.net(obs.reshape(*obs.shape[:n_lead], self.obs_dim))
        if isinstance(self.action_space, spaces.Discrete):
            return out.argmax(dim=-1) + int(self.action_space.start)
        if self.squash_output:
            out = (self.high + self.low) / 2 + (self.high - self.low) / 2 * torch.tanh(out)
        else:
            out = torch.clamp(out, self.low, self.high)
        return out.reshape(*out.shape[:-1], *self.action_space.shape)


def to_torch(policy: ars.ARSPolicy | ars.ARS) -> TorchARSPolicy:
    """A ``torch.nn.Module`` computing the actions of ``policy`` (or a model's policy)."""
    return TorchARSPolicy(ars._policy_of(policy))


if __name__ == "__main__":
    model = ars.ARS("LinearPolicy", "Pendulum-v1", n_delta=2, normalize_obs=True, seed=0)
    model.learn(2_000)
    obs = np.stack([model.observation_space.sample() for _ in range(32)])
    module = to_torch(model)
    gap = np.abs(module(torch.as_tensor(obs)).detach().numpy() - model.predict(obs)[0]).max()
    print(f"{module}\nlargest difference from ars's actions on 32 observations: {gap:.1e}")
