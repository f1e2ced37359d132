"""Mirror symmetry in the update: the mirror loss (``agent.symmetry_coef``) and the mirrored minibatch
(``agent.symmetry_augment``) make the policy's mean mirror-symmetric (the mirror image of the observation gives the
mirror image of the action); both need an env that has a mirror."""

import pytest
import torch

from simppo.agent import losses as L
from simppo.agent.normalizers import RunningMeanStd
from simppo.agent.ppo import PPO
from simppo.agent.symmetry import mirror_augmented
from simppo.envs.base import Symmetry
from simppo.envs.imitation import HumanoidImitationEnv, HumanoidImitationEnvCfg
from simppo.envs.pendulum import PendulumEnv, PendulumEnvCfg
from simppo.sim.config import SimCfg
from tests.helpers import cpu_fabric, small_agent_cfg


def asymmetry(agent: PPO, raw_obs: torch.Tensor, sym: Symmetry) -> float:
    """Mean squared distance between the policy mean on mirrored observations and the mirrored policy mean (the
    deterministic policy on the env's raw rows, its normaliser included)."""
    mean = agent.model.act_inference(raw_obs)
    mirrored = agent.model.act_inference(Symmetry.apply(raw_obs, sym.obs_index, sym.obs_sign))
    return float((mirrored - Symmetry.apply(mean, sym.action_index, sym.action_sign)).square().mean())


def visited(agent: PPO, env) -> torch.Tensor:
    """The raw observation rows of the agent's last rollout ``[steps x envs, actor_dim]``."""
    rows = agent.algorithm.experience_buffer["obs"].reshape(-1, env.actor_dim)
    return agent.model.obs_norm.denormalize(rows)


@pytest.fixture(scope="module")
def env():
    return HumanoidImitationEnv(HumanoidImitationEnvCfg(), num_envs=16, device="cpu", sim_cfg=SimCfg(name="mujoco"))


def trained(env, coef: float, iterations: int = 3, **cfg) -> tuple[PPO, dict]:
    torch.manual_seed(0)
    agent = PPO(cpu_fabric(), env, small_agent_cfg(num_steps=8, lr_schedule="fixed", actor_lr=1e-3,
                                                   symmetry_coef=coef, **cfg))
    agent.setup()
    logs = {}
    for _ in range(iterations):
        agent.collect_rollout()
        logs = agent.optimize_model()
    return agent, logs


def test_mirror_loss_makes_the_policy_symmetric(env):
    sym = env.symmetry()
    plain, logs = trained(env, 0.0)
    assert "actor/symmetry" not in logs
    mirrored, logs = trained(env, 10.0)
    assert float(logs["actor/symmetry"]) > 0.0
    obs = visited(plain, env)  # states training visits
    assert asymmetry(plain, obs, sym) > 0.01  # PPO alone does not make it symmetric
    assert asymmetry(mirrored, obs, sym) < 0.3 * asymmetry(plain, obs, sym)


def test_mirrored_minibatch_makes_the_policy_more_symmetric(env):
    sym = env.symmetry()
    plain, _ = trained(env, 0.0)
    augmented, logs = trained(env, 0.0, symmetry_augment=True)
    obs = visited(plain, env)
    assert asymmetry(augmented, obs, sym) < 0.7 * asymmetry(plain, obs, sym)


def test_the_mirror_image_of_a_sample_keeps_its_old_log_probability(env):
    sym = env.symmetry()
    gen = torch.Generator().manual_seed(1)
    b, a = 5, env.num_actions
    batch = {"obs": torch.randn(b, env.actor_dim, generator=gen), "critic_obs": torch.randn(b, env.full_dim,
                                                                                            generator=gen),
             "actions": torch.randn(b, a, generator=gen), "mean": torch.randn(b, a, generator=gen),
             "log_std": torch.randn(b, a, generator=gen), "advantages": torch.randn(b, generator=gen)}
    batch["logp"] = L.gaussian_log_prob(batch["actions"], batch["mean"], batch["log_std"])
    out = mirror_augmented(batch, sym)
    assert all(out[k].shape[0] == 2 * b for k in batch)
    torch.testing.assert_close(out["logp"][b:], L.gaussian_log_prob(out["actions"][b:], out["mean"][b:],
                                                                     out["log_std"][b:]))
    torch.testing.assert_close(out["advantages"][b:], batch["advantages"])
    twice = mirror_augmented({k: v[b:] for k, v in out.items()}, sym)
    for k in batch:
        torch.testing.assert_close(twice[k][b:], batch[k])  # the mirror of the mirror image is the sample
    # normalised rows are mirrored in the env's units: the statistics of the two sides differ
    norms = {key: RunningMeanStd((batch[key].shape[1],)) for key in ("obs", "critic_obs")}
    for key, norm in norms.items():
        norm.update(3.0 * torch.randn(64, batch[key].shape[1], generator=gen) + torch.randn(batch[key].shape[1],
                                                                                            generator=gen))
    normed = {**batch, **{key: norm.normalize(batch[key]) for key, norm in norms.items()}}
    out = mirror_augmented(normed, sym, norms["obs"], norms["critic_obs"])
    for key, index, sign in (("obs", sym.obs_index, sym.obs_sign), ("critic_obs", sym.critic_index, sym.critic_sign)):
        raw = norms[key].denormalize(out[key][b:])
        torch.testing.assert_close(raw, Symmetry.apply(batch[key], index, sign), atol=1e-5, rtol=1e-5)
        assert not torch.allclose(out[key][b:], Symmetry.apply(normed[key], index, sign), atol=1e-3)


@pytest.mark.parametrize("cfg", [{"symmetry_coef": 1.0}, {"symmetry_augment": True}], ids=["loss", "augment"])
def test_symmetry_needs_an_env_with_a_mirror(cfg):
    agent = PPO(cpu_fabric(), PendulumEnv(PendulumEnvCfg(), num_envs=4, seed=0), small_agent_cfg(**cfg))
    with pytest.raises(ValueError, match="needs the env's left-right mirror"):
        agent.setup()
