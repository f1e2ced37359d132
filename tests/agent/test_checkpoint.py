import pytest
import torch

from simppo.agent import checkpoint as ckpt_mod
from simppo.agent.checkpoint import CheckpointError, load_checkpoint
from simppo.agent.ppo import PPO
from simppo.envs.pendulum import PendulumEnv, PendulumEnvCfg
from tests.helpers import cpu_fabric, small_agent_cfg


@pytest.fixture()
def agent(tmp_path):
    torch.manual_seed(0)
    env = PendulumEnv(PendulumEnvCfg(), num_envs=8, seed=0)
    a = PPO(cpu_fabric(), env, small_agent_cfg(num_steps=8), root_dir=tmp_path)
    a.setup()
    a.train_iteration()
    return a


def test_checkpoint_loads_with_weights_only(agent, tmp_path):
    agent.save("last.ckpt")
    state = torch.load(tmp_path / "last.ckpt", weights_only=True)
    assert state["epoch"] == 1 and "model" in state and "env" in state


def test_truncated_checkpoint_gives_clear_error(agent, tmp_path):
    agent.save("last.ckpt")
    data = (tmp_path / "last.ckpt").read_bytes()
    bad = tmp_path / "truncated.ckpt"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="truncated.ckpt: corrupt or truncated checkpoint"):
        load_checkpoint(bad)


def test_garbage_and_foreign_checkpoints_give_clear_errors(tmp_path):
    garbage = tmp_path / "garbage.ckpt"
    garbage.write_bytes(b"not a checkpoint at all")
    with pytest.raises(CheckpointError, match="garbage.ckpt"):
        load_checkpoint(garbage)
    foreign = tmp_path / "foreign.ckpt"
    torch.save({"weights": torch.zeros(2)}, foreign)
    with pytest.raises(CheckpointError, match="not a simppo checkpoint"):
        load_checkpoint(foreign)
    with pytest.raises(CheckpointError, match="not found"):
        load_checkpoint(tmp_path / "missing.ckpt")


def test_interrupted_save_keeps_previous_last_ckpt(agent, tmp_path, monkeypatch):
    agent.save("last.ckpt")
    good = (tmp_path / "last.ckpt").read_bytes()
    agent.train_iteration()

    def exploding_save(obj, f, *a, **k):
        f.write(b"partial bytes")
        raise KeyboardInterrupt

    monkeypatch.setattr(ckpt_mod.torch, "save", exploding_save)
    with pytest.raises(KeyboardInterrupt):
        agent.save("last.ckpt")
    assert (tmp_path / "last.ckpt").read_bytes() == good
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.ckpt"]
    assert load_checkpoint(tmp_path / "last.ckpt")["epoch"] == 1
