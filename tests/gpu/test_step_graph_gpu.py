"""``env.graph_step`` on CUDA: the whole env step captured as one CUDA graph (physics, reference query, rewards,
terminations, observations, sampler, resets) against the eager step, with no allocation and no host read per
replay, and the time of each."""

import time

import torch

from simppo.envs.imitation import HumanoidImitationEnv, HumanoidImitationEnvCfg
from simppo.sim import SimCfg
from tests.gpu import GPU_ONLY
from tests.helpers import SyncCounter
from tests.sim.warp_allocs import WarpAllocCounter

pytestmark = GPU_ONLY
N = 1024


def _env(device: str, graph: bool) -> HumanoidImitationEnv:
    env = HumanoidImitationEnv(HumanoidImitationEnvCfg(graph_step=graph), num_envs=N, device=device,
                               sim_cfg=SimCfg(name="mjwarp"), seed=1)
    env.reset()
    return env


def test_graph_step_matches_the_eager_step(cuda_device, gpu_report):
    """Five steps from the same state: MJWarp's atomics let even two eager runs differ in the last float32
    bits, so observations are compared with a tolerance far below what a stale pointer or a skipped stage
    would change; resets and the sampler's draws are exact."""
    eager, graph = _env(cuda_device, False), _env(cuda_device, True)
    g = torch.Generator(device=cuda_device).manual_seed(0)
    for _ in range(5):
        a = 0.3 * torch.randn(N, eager.num_actions, device=cuda_device, generator=g)
        eager.step(a)
        graph.step(a)
    assert graph._step_graph is not None, "the env step was not captured"
    diff = float((eager.obs_full - graph.obs_full).abs().max())
    gpu_report("gpu/step_graph_max_obs_diff", f"{diff:.3g}")
    assert diff < 1e-2
    assert torch.equal(eager.motion_ids, graph.motion_ids) and torch.equal(eager.episode_length,
                                                                           graph.episode_length)


def test_graph_step_replays_allocate_and_read_back_nothing(cuda_device, gpu_report, monkeypatch):
    env = _env(cuda_device, True)
    a = torch.zeros(N, env.num_actions, device=cuda_device)
    for _ in range(3):
        env.step(a)
    assert env._step_graph is not None
    allocs, syncs = WarpAllocCounter(monkeypatch), SyncCounter(monkeypatch)
    with allocs, syncs:
        for _ in range(20):
            env.step(a)
    assert sum(allocs.counts.values()) == 0, allocs.counts
    assert syncs.total == 0, syncs.counts
    times = {}
    for graph in (False, True):
        e = _env(cuda_device, graph)
        for _ in range(3):
            e.step(a)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(50):
            e.step(a)
        torch.cuda.synchronize()
        times[graph] = (time.perf_counter() - t0) / 50
    gpu_report("gpu/env_step_eager_ms", f"{1e3 * times[False]:.3f}")
    gpu_report("gpu/env_step_graph_ms", f"{1e3 * times[True]:.3f}")
    gpu_report("gpu/env_step_eager_over_graph", f"{times[False] / times[True]:.2f}")


