"""MuJoCoSim specifics: exact MuJoCo C physics, thread-count independence, non-finite worlds."""

import os

import mujoco
import numpy as np
import torch

from simppo.sim import MuJoCoSim, SimCfg

N = 5


def _perturbed_ctrl(s, seed=0):
    g = torch.Generator().manual_seed(seed)
    return s.home_ctrl_t + 0.3 * torch.randn(s.num_envs, s.nu, generator=g)


def test_equals_plain_mujoco_c_and_is_independent_of_threads():
    """Per-thread MjData with state in/out steps exactly like one persistent MjData per world, on 1 or 3 threads."""
    sims = [MuJoCoSim("g1", SimCfg(threads=t), num_envs=N) for t in (1, 3)]
    assert [s.threads for s in sims] == [1, 3]
    assert MuJoCoSim("g1", SimCfg(), num_envs=64).threads == min(os.cpu_count(), 64)  # default: every core
    ctrl = _perturbed_ctrl(sims[0])
    m = sims[0].mj_model
    ds = [mujoco.MjData(m) for _ in range(N)]
    for w, d in enumerate(ds):
        mujoco.mj_resetDataKeyframe(m, d, m.key("home").id)
        d.ctrl[:] = ctrl[w].numpy()
    for s in sims:
        s.ctrl.copy_(ctrl)
    for _ in range(6):
        for s in sims:
            s.step()
        for d in ds:
            mujoco.mj_step(m, d, 4)
    assert np.array_equal(sims[0].state64, sims[1].state64)
    for w, d in enumerate(ds):
        np.testing.assert_array_equal(sims[0].state64[w, sims[0].state_cols["qpos"]], d.qpos)
        np.testing.assert_array_equal(sims[0].state64[w, sims[0].state_cols["qacc_warmstart"]], d.qacc_warmstart)
        mujoco.mj_kinematics(m, d)
        np.testing.assert_array_equal(sims[0].xpos[w].numpy(), d.xpos.astype(np.float32))
    assert torch.equal(sims[0].qpos, torch.from_numpy(sims[0].state64[:, sims[0].state_cols["qpos"]]).float())


def test_view_writes_reach_the_float64_state():
    s = MuJoCoSim("g1", SimCfg(threads=2), num_envs=N)
    before = s.state64.copy()
    s.qpos[3, 2] = 1.5  # lift world 3
    s.kinematics()
    assert s.state64[3, s.state_cols["qpos"]][2] == 1.5
    ctrl = s.state_cols["ctrl"]
    changed = np.argwhere(s.state64[:, :ctrl.start] != before[:, :ctrl.start])
    assert changed.tolist() == [[3, s.state_cols["qpos"].start + 2]]  # nothing else, full precision kept
    assert np.array_equal(s.state64[:, ctrl], s.ctrl.numpy())  # ctrl always comes from its float32 view
    assert s.xpos[3, 1, 2].item() == 1.5


def test_non_finite_world_is_skipped_and_flagged():
    """A NaN world never reaches MuJoCo C: it is not stepped, reports no contacts, stays flagged until reset."""
    s = MuJoCoSim("g1", SimCfg(threads=2), num_envs=N)
    s.step()
    t0 = s.state64[:, 0].copy()
    s.qpos[2, 10] = float("nan")
    for _ in range(2):
        s.step()
    assert s.unstable.tolist() == [0, 0, 1, 0, 0] and int(s.num_unstable[0]) == 1
    assert s.state64[2, 0] == t0[2] and (s.state64[[0, 1, 3, 4], 0] > t0[[0, 1, 3, 4]]).all()
    assert s.foot_contact[2].tolist() == [0, 0] and s.foot_contact[[0, 1, 3, 4]].all()
    assert torch.isfinite(s.qpos[[0, 1, 3, 4]]).all()
    mask = torch.zeros(N, dtype=torch.bool)
    mask[2] = True
    s.reset_worlds(mask, s.home_qpos_t.expand(N, -1), torch.zeros(N, s.nv))
    assert int(s.num_unstable[0]) == 0
    s.step()
    assert int(s.num_unstable[0]) == 0 and s.foot_contact.all()


def test_pyramidal_cone_foot_forces_match_mujoco_c():
    """The contact copy also serves pyramidal cones (rows per contact > 1): foot normal forces = MuJoCo C's."""
    from simppo.robot import load_mj_model

    m = load_mj_model("g1")
    m.opt.cone = mujoco.mjtCone.mjCONE_PYRAMIDAL
    s = MuJoCoSim("g1", SimCfg(threads=2), num_envs=2, mj_model=m)
    s.forward()
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, m.key("home").id)
    d.ctrl[:] = s.ctrl[0].numpy()
    mujoco.mj_forward(m, d)
    force, f = np.zeros(2), np.zeros(6)
    for i in range(d.ncon):
        for k, b in enumerate(s.robot.feet_body_ids):
            if b in m.geom_bodyid[d.contact[i].geom]:
                mujoco.mj_contactForce(m, d, i, f)
                force[k] += f[0]
    assert (force > 50).all()
    for w in range(2):
        np.testing.assert_allclose(s.foot_contact_force[w].numpy(), force, rtol=1e-5)
