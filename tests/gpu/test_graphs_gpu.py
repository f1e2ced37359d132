"""CUDA graphs of the MJWarp backend: capture prerequisites, graph vs eager launches, no allocation per step,
and torch/Warp ordering when the env runs on a torch side stream."""

import pytest
import torch
import warp as wp

from simppo.envs.imitation import HumanoidImitationEnv, HumanoidImitationEnvCfg
from simppo.sim import MJWarpSim, SimCfg
from tests.gpu import GPU_ONLY
from tests.sim.warp_allocs import WarpAllocCounter

pytestmark = GPU_ONLY
N = 64


def _drive(s: MJWarpSim, steps: int = 10) -> None:
    g = torch.Generator(device=s.device).manual_seed(0)
    s.qpos[:, 2] += 0.05
    s.kinematics()
    for _ in range(steps):
        s.ctrl.copy_(s.home_ctrl_t + 0.2 * torch.randn(s.num_envs, s.nu, device=s.device, generator=g))
        s.step()
    mask = torch.arange(s.num_envs, device=s.device) % 3 == 0
    qpos = s.qpos.clone()
    qpos[:, 0] += 0.3
    s.reset_worlds(mask, qpos, 0.1 * torch.randn(s.num_envs, s.nv, device=s.device, generator=g))
    s.step()
    s.forward()


def test_capture_prerequisites_and_solver_loop_settings(cuda_device, gpu_report):
    assert wp.is_mempool_enabled(cuda_device), "Warp's memory pool is off: graphs cannot be captured"
    graphed = MJWarpSim("g1", SimCfg(), num_envs=N, device=cuda_device)
    eager = MJWarpSim("g1", SimCfg(use_cuda_graph=False), num_envs=N, device=cuda_device)
    assert graphed.use_graph and graphed.model.opt.graph_conditional
    assert not eager.use_graph and not eager.model.opt.graph_conditional  # no host read-back per iteration
    before = graphed.qpos.clone()
    graphed.warm_up()
    assert sorted(graphed._graphs) == ["forward", "kinematics", "reset", "step"]
    assert torch.equal(graphed.qpos, before)  # capture records, it does not run
    gpu_report("gpu/driver", wp.get_device(cuda_device).name)


def test_graphs_match_eager_launches(cuda_device):
    graphed = MJWarpSim("g1", SimCfg(), num_envs=N, device=cuda_device)
    eager = MJWarpSim("g1", SimCfg(use_cuda_graph=False), num_envs=N, device=cuda_device)
    _drive(graphed)
    _drive(eager)
    for name in ("qpos", "qvel", "xpos", "body_lin_vel_w", "foot_contact_force"):
        torch.testing.assert_close(getattr(graphed, name), getattr(eager, name), atol=1e-4, rtol=0, msg=name)
    assert torch.equal(graphed.unstable, eager.unstable)


def _env(device: str, num_envs: int = N) -> HumanoidImitationEnv:
    torch.manual_seed(0)
    env = HumanoidImitationEnv(HumanoidImitationEnvCfg(), num_envs=num_envs, device=device,
                               sim_cfg=SimCfg(name="mjwarp"))
    env.sim.warm_up()
    env.reset()
    return env


def _rollout(env: HumanoidImitationEnv, steps: int) -> list[torch.Tensor]:
    g = torch.Generator(device=env.device).manual_seed(1)
    out = []
    for _ in range(steps):
        obs, reward, _, _, _ = env.step(0.3 * torch.randn(env.num_envs, env.num_actions, device=env.device,
                                                          generator=g))
        out.append(torch.cat([obs["critic_obs"], reward[:, None]], 1).clone())
    return out


def test_env_on_a_side_stream_matches_the_default_stream(cuda_device):
    """Warp launches follow torch's current stream: on a non-blocking side stream nothing races (a race
    would read last step's actions or a half-written reference; the tolerance covers MJWarp's atomics)."""
    reference = _rollout(_env(cuda_device), 10)
    env = _env(cuda_device)  # same seed, same resets
    side = torch.cuda.Stream(cuda_device)
    side.wait_stream(torch.cuda.current_stream(cuda_device))
    with torch.cuda.stream(side):
        got = _rollout(env, 10)
    torch.cuda.current_stream(cuda_device).wait_stream(side)
    for t, (a, b) in enumerate(zip(reference, got, strict=True)):
        torch.testing.assert_close(a, b, atol=1e-3, rtol=0, msg=f"step {t}")


def test_env_steps_allocate_nothing_after_warm_up(cuda_device, monkeypatch, gpu_report):
    env = _env(cuda_device, 256)
    actions = torch.zeros(env.num_envs, env.num_actions, device=cuda_device)
    for _ in range(3):
        env.step(actions)
    counter = WarpAllocCounter(monkeypatch)
    with counter:
        for _ in range(100):
            env.step(actions)
    torch.cuda.synchronize()
    gpu_report("gpu/warp_allocations_per_100_env_steps", dict(counter.counts) or 0)
    assert sum(counter.counts.values()) == 0, (dict(counter.counts), dict(counter.sites))


@pytest.mark.parametrize("device_name", ["cuda", "cuda:0"])
def test_motion_lib_accepts_cuda_and_cuda_0(device_name):
    from simppo.motion import DEFAULT_MOTIONS, MotionLib

    lib = MotionLib([str(DEFAULT_MOTIONS)], device=device_name)
    assert lib.device == torch.device("cuda:0")
    ids = lib.sample_motions(16)
    state = lib.get_motion_state(ids, lib.sample_times(ids), torch.tensor([0.02, 0.1], device="cuda:0"))
    assert state.root_pos.device == torch.device("cuda:0") and torch.isfinite(state.body_pos_w).all()
