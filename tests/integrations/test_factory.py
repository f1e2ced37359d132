"""``simppo.make_env``: any registered env, configured by the same overrides as ``simppo-train``."""

import pytest
import torch

import simppo
from simppo.integrations.factory import as_overrides


def test_overrides_as_strings_dicts_and_keywords_configure_the_env():
    a = simppo.make_env("pendulum", 8, "cpu", overrides=["env.max_episode_steps=7"])
    b = simppo.make_env("pendulum", 8, "cpu", overrides={"env.max_episode_steps": 7})
    c = simppo.make_env("pendulum", 8, "cpu", **{"env.max_episode_steps": 7})
    for env in (a, b, c):
        assert (env.num_envs, env.cfg.max_episode_steps, env.train_cfg.env.max_episode_steps) == (8, 7, 7)
    for env in (a, b):  # the same config and seed: the same episodes
        env.reset()
    for _ in range(8):
        oa, ra, *_ = a.step(torch.full((8, 1), 0.3))
        ob, rb, *_ = b.step(torch.full((8, 1), 0.3))
        assert torch.equal(oa["obs"], ob["obs"]) and torch.equal(ra, rb)
    assert as_overrides({"a.b": [1, 2], "c": True, "d": None}) == ["a.b=[1,2]", "c=true", "d=null"]


def test_humanoid_env_takes_the_train_overrides(tmp_path):
    env = simppo.make_env("humanoid_imitation", 4, "cpu", seed=3, overrides=["env.rewards.anchor_pos=0.25"])
    assert env.cfg.rewards.anchor_pos == 0.25 and env.seed == 3 and env.train_cfg.seed == 3
    obs = env.reset()
    assert obs["obs"].shape == (4, env.obs_dims["obs"]) and obs["critic_obs"].shape == (4, env.obs_dims["critic_obs"])
    env.close()


def test_a_bad_override_or_env_name_is_one_line():
    with pytest.raises(ValueError, match="unknown key 'env.max_episode_step'") as info:
        simppo.make_env("pendulum", 4, "cpu", overrides=["env.max_episode_step=7"])
    assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="env=walker"):
        simppo.make_env("walker", 4, "cpu")
