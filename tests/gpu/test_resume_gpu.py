"""Saving and resuming on CUDA: the RNG states come back as CPU byte tensors (``torch.set_rng_state`` and
``torch.cuda.set_rng_state_all`` reject anything else), weights and optimizer state land on the GPU."""

import torch

from simppo.agent.ppo import PPO
from simppo.envs.pendulum import PendulumEnv, PendulumEnvCfg
from simppo.utils.device import fabric_for
from tests.gpu import GPU_ONLY
from tests.helpers import small_agent_cfg

pytestmark = GPU_ONLY


def _agent(device: str, root) -> PPO:
    agent = PPO(fabric_for(device), PendulumEnv(PendulumEnvCfg(), num_envs=64, seed=0, device=device),
                small_agent_cfg(num_steps=8), root_dir=root)
    agent.setup()
    return agent


def test_resume_on_cuda_restores_rng_weights_and_counters(cuda_device, tmp_path):
    torch.manual_seed(0)
    a = _agent(cuda_device, tmp_path)
    a.train_iteration()
    a.loop(tmp_path).save("last.ckpt")
    cpu_rng, cuda_rng = torch.get_rng_state(), torch.cuda.get_rng_state_all()
    expected = torch.rand(3, device=cuda_device)
    torch.manual_seed(123)
    b = _agent(cuda_device, tmp_path)
    b.loop(tmp_path).resume()
    assert torch.equal(torch.get_rng_state(), cpu_rng)
    assert all(torch.equal(x, y) for x, y in zip(torch.cuda.get_rng_state_all(), cuda_rng, strict=True))
    assert torch.equal(torch.rand(3, device=cuda_device), expected)
    assert b.epoch == 1
    for (k, x), y in zip(a.model.state_dict().items(), b.model.state_dict().values(), strict=True):
        assert y.device.type == "cuda" and torch.equal(x, y), k
    b.train_iteration()  # the restored optimizer state steps on the GPU
