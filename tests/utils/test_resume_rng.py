"""Resuming restores the RNG from CPU byte tensors whatever ``map_location`` the checkpoint is loaded with.

On CUDA, ``torch.load(map_location="cuda:0")`` moved the saved RNG states to the GPU and
``torch.set_rng_state`` raised ``TypeError: RNG state must be a torch.ByteTensor``. The ``meta`` device
reproduces that on a CPU machine: it is not the CPU, and ``set_rng_state`` rejects its tensors the same way.
"""

import pytest
import torch

from simppo.agent.checkpoint import load_checkpoint
from simppo.agent.ppo import PPO
from simppo.envs.pendulum import PendulumEnv, PendulumEnvCfg
from tests.helpers import cpu_fabric, small_agent_cfg


@pytest.fixture()
def saved(tmp_path):
    torch.manual_seed(0)
    agent = PPO(cpu_fabric(), PendulumEnv(PendulumEnvCfg(), num_envs=8, seed=0), small_agent_cfg(num_steps=8),
                root_dir=tmp_path)
    agent.setup()
    agent.train_iteration()
    agent.save("last.ckpt")
    return agent, tmp_path / "last.ckpt"


def test_a_non_cpu_map_location_breaks_set_rng_state(saved):
    """The failure the fix prevents (so the test below would have caught it)."""
    state = torch.load(saved[1], map_location="meta", weights_only=True)
    with pytest.raises(TypeError, match="ByteTensor"):
        torch.set_rng_state(state["rng"]["torch"])


def test_rng_states_stay_cpu_byte_tensors_and_the_rest_moves(saved):
    state = load_checkpoint(saved[1], map_location="meta")
    rng = state["rng"]["torch"]
    assert rng.device.type == "cpu" and rng.dtype == torch.uint8
    assert all(t.device.type == "cpu" and t.dtype == torch.uint8 for t in state["rng"]["cuda"])
    assert all(t.device.type == "meta" for t in state["model"].values())
    assert torch.equal(rng, torch.load(saved[1], weights_only=True)["rng"]["torch"])  # not moved, not changed


def test_runner_load_restores_the_rng(saved):
    agent, path = saved
    expected = torch.rand(4, generator=torch.Generator().set_state(torch.load(path, weights_only=True)["rng"]["torch"]))
    torch.manual_seed(999)
    agent.loop().load(path)
    assert torch.equal(torch.rand(4), expected)
