"""PPO learns the built-in pendulum swing-up on CPU (budget: ~30 iterations, well under 90 s here)."""

import torch

from simppo.agent.ppo import PPO
from simppo.envs.pendulum import PendulumEnv, PendulumEnvCfg
from tests.helpers import cpu_fabric, small_agent_cfg

# Episodes are 100 steps; a random policy scores about -600, a swing-up-and-hold policy about -150.
RETURN_THRESHOLD = -300.0


def test_ppo_raises_pendulum_return_past_threshold():
    torch.manual_seed(0)
    env = PendulumEnv(PendulumEnvCfg(max_episode_steps=100), num_envs=256, seed=0)
    agent = PPO(cpu_fabric(), env, small_agent_cfg(num_steps=50))
    agent.setup()
    returns = []
    for _ in range(30):
        metrics = agent.train_iteration()
        if "episode/reward" in metrics:
            returns.append(metrics["episode/reward"])
    random_level = returns[0]  # first episodes are played by the untrained (near-random) policy
    assert random_level < -450.0
    final = sum(returns[-3:]) / 3
    assert final > RETURN_THRESHOLD, (random_level, returns)
    assert final > random_level + 250.0
