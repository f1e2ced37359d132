"""``num_envs=8192`` humanoid env on one GPU: memory and step (figures go to the results file)."""

import time

import torch
import warp as wp

from simppo.envs.imitation import HumanoidImitationEnv, HumanoidImitationEnvCfg
from simppo.sim import SimCfg
from tests.gpu import GPU_ONLY

pytestmark = GPU_ONLY
N = 8192


def test_8192_envs_fit_and_step(cuda_device, gpu_report):
    torch.cuda.reset_peak_memory_stats(cuda_device)
    torch.manual_seed(0)
    env = HumanoidImitationEnv(HumanoidImitationEnvCfg(), num_envs=N, device=cuda_device, sim_cfg=SimCfg(name="mjwarp"))
    env.sim.warm_up()
    env.reset()
    actions = torch.zeros(N, env.num_actions, device=cuda_device)
    for _ in range(5):
        env.step(actions)
    torch.cuda.synchronize()
    steps = 50
    t0 = time.perf_counter()
    ended = torch.zeros((), device=cuda_device)
    for _ in range(steps):
        _, reward, terminated, truncated, _ = env.step(0.3 * torch.randn_like(actions))
        ended += (terminated | truncated).sum()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    torch_peak = torch.cuda.max_memory_allocated(cuda_device) / 2**30
    warp_peak = wp.get_mempool_used_mem_high(cuda_device) / 2**30 if wp.is_mempool_enabled(cuda_device) else 0.0
    free, total = torch.cuda.mem_get_info(cuda_device)
    gpu_report("gpu/8192_env_steps_per_s", f"{N * steps / seconds:.0f}")
    gpu_report("gpu/8192_memory_GiB", f"torch peak {torch_peak:.2f}, warp pool peak {warp_peak:.2f}, "
                                      f"device used {(total - free) / 2**30:.2f} of {total / 2**30:.0f}")
    gpu_report("gpu/8192_episodes_ended_in_50_steps", int(ended))
    assert torch.isfinite(env.obs_full).all() and torch.isfinite(env.reward).all()
    assert int(env.sim.num_unstable[0]) < N // 100
    assert (total - free) / 2**30 < 60.0  # headroom for the policy and the rollout buffers
