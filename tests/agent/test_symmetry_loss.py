"""``agent.symmetry_coef``: the mirror loss makes the policy's mean mirror-symmetric (the mirror image of the
observation gives the mirror image of the action), and needs an env that has a mirror."""

import pytest
import torch

from simppo.agent.ppo import PPO
from simppo.envs.base import Symmetry
from simppo.envs.imitation import HumanoidImitationEnv, HumanoidImitationEnvCfg
from simppo.envs.pendulum import PendulumEnv, PendulumEnvCfg
from simppo.sim.config import SimCfg
from tests.helpers import cpu_fabric, small_agent_cfg


def asymmetry(agent: PPO, obs: torch.Tensor, sym: Symmetry) -> float:
    """Mean squared distance between the policy mean on mirrored observations and the mirrored policy mean."""
    with torch.no_grad():
        mean, _ = agent.model.actor(obs)
        mirrored, _ = agent.model.actor(Symmetry.apply(obs, sym.obs_index, sym.obs_sign))
    return float((mirrored - Symmetry.apply(mean, sym.action_index, sym.action_sign)).square().mean())


@pytest.fixture(scope="module")
def env():
    return HumanoidImitationEnv(HumanoidImitationEnvCfg(), num_envs=16, device="cpu", sim_cfg=SimCfg(name="mujoco"))


def trained(env, coef: float, iterations: int = 3) -> tuple[PPO, dict]:
    torch.manual_seed(0)
    agent = PPO(cpu_fabric(), env, small_agent_cfg(num_steps=8, lr_schedule="fixed", actor_lr=1e-3,
                                                   symmetry_coef=coef))
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
    obs = plain.algorithm.experience_buffer["obs"].reshape(-1, env.actor_dim)  # states training visits
    assert asymmetry(plain, obs, sym) > 0.01  # PPO alone does not make it symmetric
    assert asymmetry(mirrored, obs, sym) < 0.3 * asymmetry(plain, obs, sym)


def test_mirror_loss_needs_an_env_with_a_mirror():
    agent = PPO(cpu_fabric(), PendulumEnv(PendulumEnvCfg(), num_envs=4, seed=0), small_agent_cfg(symmetry_coef=1.0))
    with pytest.raises(ValueError, match="agent.symmetry_coef=1.0 needs the env's left-right mirror"):
        agent.setup()
