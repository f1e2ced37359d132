"""No host synchronisation in the humanoid env's step, a PPO rollout step, GAE or a minibatch update on CUDA:
``torch.cuda.set_sync_debug_mode("error")`` raises on any synchronising torch call (``.item()``, ``nonzero``,
boolean-mask indexing, blocking copies, ``__bool__`` / ``__float__`` of a CUDA tensor, ...)."""

import torch

from simppo.agent.ppo import PPO
from simppo.envs.imitation import HumanoidImitationEnv, HumanoidImitationEnvCfg
from simppo.sim import SimCfg
from simppo.utils.device import fabric_for
from tests.gpu import GPU_ONLY
from tests.helpers import small_agent_cfg

pytestmark = GPU_ONLY


def test_humanoid_env_and_ppo_make_no_host_sync(cuda_device):
    torch.manual_seed(0)
    env = HumanoidImitationEnv(HumanoidImitationEnvCfg(), num_envs=512, device=cuda_device,
                               sim_cfg=SimCfg(name="mjwarp"))
    env.sim.warm_up()
    agent = PPO(fabric_for(cuda_device), env, small_agent_cfg(num_steps=4, lambda_l2c2=0.1))
    agent.setup()
    agent.model.eval()
    for step in range(agent.num_steps):  # warm-up: kernel loads, graph captures, allocator
        agent.rollout_step(step)
    agent.compute_advantages()
    data = agent.experience_buffer.flat()
    idx = torch.randperm(agent.num_steps * agent.num_envs, device=cuda_device)[:512]
    batch = {k: v[idx] for k, v in data.items()}
    agent.model.train()
    agent.perform_optimization_step({k: v.clone() for k, v in batch.items()})
    agent.model.eval()
    actions = torch.zeros(env.num_envs, env.num_actions, device=cuda_device)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        env.step(actions)
        agent.rollout_step(0)
        agent.compute_advantages()
        agent.model.train()
        agent.perform_optimization_step(batch)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    torch.cuda.synchronize()
