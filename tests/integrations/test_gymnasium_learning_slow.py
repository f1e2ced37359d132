"""simppo's PPO learns gymnasium's ``Pendulum-v1`` through ``WrappedGymEnv`` (run by hand)::

    pytest -m slow tests/integrations/test_gymnasium_learning_slow.py -s

Budget: 245,760 samples (120 iterations of 32 envs × 64 steps), seed 0. A random policy scores about −1,200 per
200-step episode; the check asks for a mean return better than −400 over the last episodes.
"""

import pytest
import torch

from simppo.agent.ppo import PPO
from simppo.integrations.gymnasium import WrappedGymEnv
from tests.helpers import cpu_fabric, small_agent_cfg


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_ppo_learns_gymnasium_pendulum():
    torch.manual_seed(0)
    env = WrappedGymEnv("Pendulum-v1", num_envs=32, seed=0)
    agent = PPO(cpu_fabric(), env, small_agent_cfg(num_steps=64, gamma=0.95))
    agent.setup()
    returns = []
    for _ in range(120):
        metrics = agent.train_iteration()
        if "episode/reward" in metrics:
            returns.append(metrics["episode/reward"])
    print(f"\nPendulum-v1 episode returns (every ~3 iterations): {[round(r) for r in returns]}")
    assert returns[0] < -900.0, returns
    assert sum(returns[-5:]) / 5 > -400.0, returns


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_tensoraerospace_ppo_learns_gymnasium_pendulum():
    """TensorAeroSpace's interface (its defaults but 10 epochs per update) on simppo's core: 150,000 transitions."""
    import gymnasium as gym

    from simppo.integrations.tensoraerospace import PPO as TasPPO

    agent = TasPPO(gym.make_vec("Pendulum-v1", num_envs=8, vectorization_mode="sync",
                                vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}),
                   num_epochs=10, eval_freq=0, seed=0)
    stats = agent.train(max_steps=150_000)
    returns = stats["episode_rewards"]
    print(f"\nTensorAeroSpace PPO on Pendulum-v1, episode returns per update: {[round(r) for r in returns]}")
    assert returns[0] < -900.0, returns
    assert sum(returns[-5:]) / 5 > -400.0, returns


def torchrl_modules() -> dict:
    """A TorchRL actor (Gaussian over loc / scale) and critic of simppo's small sizes (64, 64)."""
    from tensordict.nn import NormalParamExtractor, TensorDictModule
    from torchrl.modules import ProbabilisticActor, ValueOperator

    def mlp(out: int) -> torch.nn.Sequential:
        return torch.nn.Sequential(torch.nn.Linear(3, 64), torch.nn.ELU(), torch.nn.Linear(64, 64), torch.nn.ELU(),
                                   torch.nn.Linear(64, out))

    actor = ProbabilisticActor(TensorDictModule(torch.nn.Sequential(mlp(2), NormalParamExtractor()),
                                                in_keys=["observation"], out_keys=["loc", "scale"]),
                               in_keys=["loc", "scale"], distribution_class=torch.distributions.Normal)
    return {"actor": actor, "critic": ValueOperator(mlp(1), in_keys=["observation"])}


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("modules", ["simppo", "torchrl"])
def test_ppo_trainer_learns_gymnasium_pendulum(modules):
    """TorchRL's trainer interface on simppo's core, from a gymnasium vector env: 245,760 frames; the actor and
    critic are simppo's or TorchRL modules."""
    import gymnasium as gym

    from simppo.integrations.trainer import PPOTrainer

    torch.manual_seed(0)
    env = gym.make_vec("Pendulum-v1", num_envs=32, vectorization_mode="sync",
                       vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP})
    given = torchrl_modules() if modules == "torchrl" else {}
    trainer = PPOTrainer.from_env(env, total_frames=245_760, frames_per_batch=2048, minibatch_size=512,
                                  learning_rate=3e-3, config=small_agent_cfg(gamma=0.95), progress_bar=False, **given)
    returns = []
    original = trainer.runner.train_iteration

    def iteration():
        metrics = original()
        if "episode/reward" in metrics:
            returns.append(metrics["episode/reward"])
        return metrics

    trainer.runner.train_iteration = iteration
    trainer.train()
    print(f"\nPPOTrainer on Pendulum-v1, episode returns: {[round(r) for r in returns]}")
    assert returns[0] < -900.0, returns
    assert sum(returns[-5:]) / 5 > -400.0, returns
