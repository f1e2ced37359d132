"""Speed options of the minibatch update (``agent.update_precision``, ``agent.compile``): the same algorithm.

One full update (5 epochs x 4 minibatches) from the same state and the same rollout, compared with fp32 eager:

* bf16 autocast: the parameter change of the update agrees with fp32's within 5 % (relative L2 norm over
  every actor and critic parameter): bf16 keeps 8 mantissa bits, so activations and gradients carry ~0.4 %
  relative error, and Adam's normalised steps turn that into small step differences;
* torch.compile: the parameters agree within 1e-5 (the same math, reordered by Inductor's fusions).
"""

import shutil

import pytest
import torch

from simppo.agent.config import PPOAgentConfig
from simppo.agent.ppo import PPO
from simppo.envs.pendulum import PendulumEnv, PendulumEnvCfg
from tests.helpers import cpu_fabric, small_agent_cfg


def _update(**cfg) -> tuple[torch.Tensor, torch.Tensor]:
    """(parameters before, parameters after one update), flattened, for the agent config ``cfg``."""
    torch.manual_seed(0)
    agent = PPO(cpu_fabric(), PendulumEnv(PendulumEnvCfg(), num_envs=64, seed=0),
                small_agent_cfg(num_steps=16, lr_schedule="fixed", actor_lr=3e-4, critic_lr=1e-3, **cfg))
    agent.setup()
    agent.collect_rollout()
    flat = lambda: torch.cat([p.detach().reshape(-1).clone() for p in agent.model.parameters()])  # noqa: E731
    before = flat()
    agent.optimize_model()
    return before, flat()


def test_bf16_update_matches_fp32_within_tolerance():
    before, fp32 = _update(update_precision="fp32")
    before_bf16, bf16 = _update(update_precision="bf16")
    assert torch.equal(before, before_bf16)
    step_fp32, step_bf16 = fp32 - before, bf16 - before
    assert step_fp32.norm() > 0
    rel = float((step_bf16 - step_fp32).norm() / step_fp32.norm())
    assert rel < 0.05, rel
    assert torch.isfinite(bf16).all()


@pytest.mark.skipif(shutil.which("c++") is None and shutil.which("g++") is None,
                    reason="torch.compile on CPU needs a C++ compiler")
def test_compiled_update_matches_eager():
    _, eager = _update(update_precision="fp32")
    _, compiled = _update(update_precision="fp32", compile=True)
    torch.testing.assert_close(compiled, eager, rtol=0, atol=1e-5)


def test_unknown_precision_is_refused():
    with pytest.raises(ValueError, match="update_precision"):
        PPOAgentConfig(update_precision="fp16")
