"""The humanoid env's hot path on both sim backends: no Warp allocation per step after warm-up (persistent
reset buffers, motion-query scratch bound once), and the post-reset observation pass touches only the rows
of the envs that were reset."""

from dataclasses import replace

import pytest
import torch

from simppo.envs.imitation import HumanoidImitationEnv, HumanoidImitationEnvCfg
from simppo.envs.imitation.config import DeployRandomizationCfg
from simppo.sim import SimCfg
from tests.sim.warp_allocs import WarpAllocCounter

N = 4
CASES = {"mujoco": ("mujoco", False), "mjwarp": ("mjwarp", False), "mjwarp-graph": ("mjwarp", True),
         # the deploy preset: per-world model parameters, pushes, observation noise, the deploy observation set
         "mujoco-deploy": ("mujoco", False, True), "mjwarp-graph-deploy": ("mjwarp", True, True)}
DEPLOY = replace(HumanoidImitationEnvCfg(), observations="deploy", obs_noise=True,
                 randomization=DeployRandomizationCfg(push_interval_s=[0.04, 0.1], link_mass_scale=[0.9, 1.1],
                                                      kp_scale=[0.9, 1.1], kd_scale=[0.9, 1.1],
                                                      action_delay_steps=[0, 1]))


def _env(backend: str, graph: bool, deploy: bool = False) -> HumanoidImitationEnv:
    torch.manual_seed(0)
    cfg = DEPLOY if deploy else HumanoidImitationEnvCfg()
    env = HumanoidImitationEnv(cfg, num_envs=N, device="cpu", sim_cfg=SimCfg(name=backend))
    if graph:
        env.sim.use_graph = True  # CUDA's default; on CPU Warp replays the captured launches in C++
    env.reset()
    return env


@pytest.mark.parametrize("case", list(CASES))
def test_env_steps_allocate_no_warp_memory_after_warm_up(case, monkeypatch):
    env = _env(*CASES[case])
    g = torch.Generator().manual_seed(1)
    actions = [torch.randn(N, env.num_actions, generator=g) for _ in range(100)]
    for a in actions[:3]:  # warm-up: kernel loads, graph captures
        env.step(a)
    counter = WarpAllocCounter(monkeypatch)
    done = torch.zeros(N, dtype=torch.bool)
    with counter:
        for a in actions:
            env.step(a)
            done |= env.done
    assert done.any()  # the resets ran
    assert counter.counts["simppo"] == 0, dict(counter.sites)
    if case.startswith("mjwarp-graph"):
        assert counter.counts["mujoco_warp"] == 0, counter.counts  # mjw.step's scratch lives in the graph


def test_motion_queries_allocate_nothing(monkeypatch):
    env = _env("mujoco", False)
    lib, counter = env.motion_lib, WarpAllocCounter(monkeypatch)
    mask = torch.tensor([True, False, True, False])
    lib.get_motion_state(env.motion_ids, env.times, env.future_offsets, out=env.ref)
    with counter:
        for _ in range(100):
            lib.get_motion_state(env.motion_ids, env.times, env.future_offsets, out=env.ref)
            lib.get_motion_state(env.motion_ids, env.times, env.future_offsets, out=env.ref, mask=mask)
    assert sum(counter.counts.values()) == 0, dict(counter.sites)


@pytest.mark.parametrize("backend", ["mujoco", "mjwarp"])
def test_second_observation_pass_touches_only_reset_rows(backend):
    """Inside a real step: the second ``_compute_observations`` call (after the resets) gets the done mask
    and leaves every other row exactly as the first pass wrote it (poisoned here to make any write show)."""
    env = _env(backend, False)
    env.sim.qpos[0, 2] -= 0.6  # env 0 starts far below its reference: it terminates in this step
    env.sim.kinematics()
    original = env._compute_observations
    calls = []

    def spy(mask_wp=None):
        calls.append(mask_wp)
        if len(calls) == 2:
            env.obs_full[~env.done] = float("nan")
        original(mask_wp)

    env._compute_observations = spy
    env.step(torch.zeros(N, env.num_actions))
    done = env.done.clone()
    assert len(calls) == 2 and calls[1] is env._wp_reset_mask
    assert done[0] and not done.all(), done
    assert torch.isnan(env.obs_full[~done]).all()  # untouched by the second pass
    assert torch.isfinite(env.obs_full[done]).all()  # the reset envs' first observations
