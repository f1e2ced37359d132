import subprocess
import sys

import torch

from simppo.agent.checkpoint import load_checkpoint
from simppo.agent.ppo import PPO
from simppo.envs.pendulum import PendulumEnv, PendulumEnvCfg
from tests.helpers import assert_same_state as _assert_same
from tests.helpers import cpu_fabric, small_agent_cfg


def _train(seed: int, iterations: int) -> dict:
    torch.manual_seed(seed)
    env = PendulumEnv(PendulumEnvCfg(), num_envs=32, seed=seed)
    agent = PPO(cpu_fabric(), env, small_agent_cfg(num_steps=16))
    agent.setup()
    for _ in range(iterations):
        agent.train_iteration()
    return {k: v.clone() for k, v in agent.model.state_dict().items()}


def test_same_seed_gives_identical_parameters():
    a, b = _train(3, 3), _train(3, 3)
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    c = _train(4, 3)
    assert any(not torch.equal(a[k], c[k]) for k in a)


def _cli(*args):
    cmd = [sys.executable, "-m", "simppo.cli.train", "env=pendulum", "agent=ppo_small", "num_envs=32",
           "agent.num_steps=16", "logger=none", "progress_bar=false", "seed=5", *args]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr


def test_resume_in_new_process_continues_exactly(tmp_path):
    straight, split = tmp_path / "straight", tmp_path / "split"
    _cli("max_epochs=4", f"run_dir={straight}")
    _cli("max_epochs=2", f"run_dir={split}")
    assert load_checkpoint(split / "last.ckpt")["epoch"] == 2
    _cli("max_epochs=4", f"run_dir={split}", "resume=true")
    a, b = load_checkpoint(straight / "last.ckpt"), load_checkpoint(split / "last.ckpt")
    assert a["epoch"] == b["epoch"] == 4
    for key in ("model", "actor_optimizer", "critic_optimizer", "running_reward_norm", "env", "step_count"):
        _assert_same(a[key], b[key], key)
