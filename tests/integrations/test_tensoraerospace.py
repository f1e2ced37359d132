"""TensorAeroSpace's PPO interface on simppo's core: train, act, save → load → the same actions, the saved layout."""

import re

import gymnasium as gym
import numpy as np
import pytest
import torch

from simppo.integrations.tensoraerospace import FILES, PPO


def small(**kw) -> PPO:
    return PPO(gym.make("Pendulum-v1"), rollout_len=256, num_epochs=2, batch_size=64, eval_freq=0, seed=0,
               actor_hidden_dim=32, critic_hidden_dim=32, **kw)


def test_train_act_save_load_give_the_same_actions(tmp_path):
    agent = small()
    stats = agent.train(max_steps=600)
    assert stats["steps"] >= 600 and stats["episodes"] >= 2 and stats["episode_rewards"]
    states = np.random.default_rng(0).uniform(-1, 1, size=(5, 3)).astype(np.float32)
    action, mean, log_prob = agent.act(states, deterministic=True)
    assert action.shape == (5, 1) and mean.shape == (5, 1) and log_prob.shape == (5,)
    assert np.all(np.abs(action) <= 2.0)  # Pendulum's torque bounds
    one, _, lp = agent.act(states[0])
    assert one.shape == (1,) and np.ndim(lp) == 0
    path = agent.save(tmp_path)
    assert re.fullmatch(r"[A-Z][a-z]{2}\d{2}_\d{2}-\d{2}-\d{2}_PPO", path.name) and path.parent == tmp_path
    assert sorted(p.name for p in path.iterdir()) == sorted(FILES)
    for name in ("actor.pth", "critic.pth", "actor_opt.pth", "critic_opt.pth"):
        torch.load(path / name, weights_only=True)  # tensors and plain types only
    loaded = PPO.load(path)
    again, _, _ = loaded.act(states, deterministic=True)
    np.testing.assert_array_equal(again, action)
    assert PPO.from_pretrained(path).steps == agent.steps
    same_second = [agent.save(tmp_path) for _ in range(2)]  # within one second: a new folder each, nothing replaced
    assert len({path, *same_second}) == 3 and all(sorted(p.name for p in q.iterdir()) == sorted(FILES)
                                                  for q in same_second)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging folder left
    with pytest.raises(FileNotFoundError, match="not a local directory"):
        PPO.from_pretrained("someone/pendulum-ppo")


def test_stretched_log_std_and_the_auxiliary_head():
    agent = small(auxiliary_coef=0.5, actor_log_std_min=-3.0, actor_log_std_max=0.5)
    actor = agent.model.actor
    assert abs(float(actor.effective_log_std()[0]) + 0.5) < 1e-5  # starts at simppo's init_log_std
    with torch.no_grad():
        actor.log_std.fill_(1e3)
    assert float(actor.effective_log_std()[0]) == pytest.approx(0.5)  # never past the stretch's bounds
    with torch.no_grad():
        actor.log_std.fill_(-0.3)
    states, rewards = torch.randn(64, 3), torch.randn(64)
    first = agent.auxiliary_task(states, rewards)
    for _ in range(30):
        last = agent.auxillary_task(states, rewards)
    assert last < first  # the head learns the rewards
    assert agent.train(max_steps=300)["steps"] >= 300  # the head trains beside every update
