"""sim=mujoco (MuJoCo C, float64) and sim=mjwarp (MJWarp on Warp CPU, float32) agree step by step.

Same MJCF, same start state, same ctrl, 10 control steps (40 physics steps). Stated tolerances, with the
largest differences measured on this CPU (MuJoCo 4.0.0 / mujoco-warp 4.0.0) in brackets:

* standing G1 (home keyframe; world 0 holds the home ctrl, worlds 1-3 add ctrl noise of 0.05-0.2 rad):
  qpos 1e-4 [4e-6], qvel 2e-3 [1.7e-4], tracked body positions / wxyz quaternions 1e-4 [2e-6],
  body velocities 2e-3 [4e-5], foot normal forces 1 N [0.07 N], identical foot contact flags.
* kinematic-replay start on ``walk`` (4 frames of the clip, PD targets = the frame's joint positions):
  the float32 rounding is amplified when a foot touches down (measured at step 9 in one world: qpos
  3e-4, qvel 1.5e-2; before that step ≤ 4e-6 / 1.1e-4), so: qpos 2e-3, qvel 0.1, body positions
  1e-3, quaternions 2e-3, body velocities 0.1, identical foot contact flags.
"""

import mujoco
import numpy as np
import pytest
import torch

from simppo.motion import DEFAULT_MOTIONS, MotionLib
from simppo.sim import MJWarpSim, MuJoCoSim, SimCfg

N = 4
STANDING = {"qpos": 1e-4, "qvel": 2e-3, "xpos": 1e-4, "xquat": 1e-4, "body_lin_vel_w": 2e-3, "body_ang_vel_w": 2e-3,
            "foot_contact_force": 1.0}
WALK = {"qpos": 2e-3, "qvel": 0.1, "xpos": 1e-3, "xquat": 2e-3, "body_lin_vel_w": 0.1, "body_ang_vel_w": 0.1}


@pytest.fixture(scope="module")
def sims():
    return MJWarpSim("g1", SimCfg(), num_envs=N, device="cpu"), MuJoCoSim("g1", SimCfg(threads=2), num_envs=N)


def _walk_start(n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """qpos / qvel / ctrl of ``n`` frames spread over the ``walk`` clip (free-joint angular velocity in
    the body frame, as MuJoCo's qvel)."""
    lib = MotionLib([str(DEFAULT_MOTIONS)])
    f, i0 = lib.frames, int(lib.motion_start[lib.motion_id("walk")])
    idx = [i0 + 5 + 28 * k for k in range(n)]
    ang_b = np.zeros((n, 3))
    qinv = np.zeros(4)
    for w, i in enumerate(idx):
        mujoco.mju_negQuat(qinv, f["root_quat"][i].double().numpy())
        mujoco.mju_rotVecQuat(ang_b[w], f["root_ang_vel_w"][i].double().numpy(), qinv)
    qpos = torch.cat([f["root_pos"][idx], f["root_quat"][idx], f["dof_pos"][idx]], 1)
    qvel = torch.cat([f["root_lin_vel_w"][idx], torch.from_numpy(ang_b).float(), f["dof_vel"][idx]], 1)
    return qpos, qvel, f["dof_pos"][idx].clone()


def standing_ctrl(sim) -> torch.Tensor:
    """The home ctrl in world 0, plus noise of 0.05 / 0.1 / 0.2 rad in worlds 1-3 (seed 0)."""
    g = torch.Generator().manual_seed(0)
    return sim.home_ctrl_t + torch.tensor([0.0, 0.05, 0.1, 0.2])[:, None] * torch.randn(N, sim.nu, generator=g)


def _run_and_compare(sims, qpos, qvel, ctrl, tol, steps=10, check_step=None):
    """Both backends from the same state and ctrl, compared within ``tol`` after each control step;
    ``check_step(step)``: more checks of the backends' own (e.g. contact counts)."""
    a, b = sims
    for s in (a, b):
        s.reset_worlds(torch.ones(N, dtype=torch.bool), qpos, qvel)
        s.ctrl.copy_(ctrl)
    ids = torch.as_tensor(a.robot.tracked_body_ids)
    for step in range(steps):
        a.step()
        b.step()
        for k, t in tol.items():
            x, y = getattr(a, k), getattr(b, k)
            if x.dim() == 3:
                x, y = x[:, ids], y[:, ids]
            torch.testing.assert_close(x, y, atol=t, rtol=0, msg=lambda m, k=k, s=step: f"{k} at step {s + 1}: {m}")
        assert torch.equal(a.foot_contact, b.foot_contact), step
        assert int(a.num_unstable[0]) == 0 and int(b.num_unstable[0]) == 0
        if check_step is not None:
            check_step(step)


def test_standing_g1_parity(sims):
    a = sims[0]
    _run_and_compare(sims, a.home_qpos_t.expand(N, -1), torch.zeros(N, a.nv), standing_ctrl(a), STANDING)
    assert a.foot_contact.all()


def test_walk_start_parity(sims):
    _run_and_compare(sims, *_walk_start(N), WALK)
