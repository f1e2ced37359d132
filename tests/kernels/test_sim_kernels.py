"""Kernels of the MJWarp backend against NumPy / MuJoCo C references."""

import mujoco
import numpy as np
import pytest
import warp as wp

from simppo.kernels.sim_body_vel import launch_body_vel_w
from simppo.kernels.sim_guard import launch_sim_guard
from simppo.kernels.sim_reset import launch_sim_reset
from simppo.robot import load_mj_model
from simppo.utils.device import init_warp


@pytest.fixture(scope="module")
def mjm():
    init_warp()
    return load_mj_model("g1")


def _random_state(m, rng):
    d = mujoco.MjData(m)
    d.qpos[:3] = rng.uniform(-1, 1, 3) + [0, 0, 1]
    q = rng.normal(size=4)
    d.qpos[3:7] = q / np.linalg.norm(q)
    lo, hi = m.jnt_range[1:, 0], m.jnt_range[1:, 1]
    d.qpos[7:] = rng.uniform(lo, hi)
    d.qvel[:] = rng.normal(scale=2.0, size=m.nv)
    mujoco.mj_kinematics(m, d)
    mujoco.mj_comPos(m, d)
    mujoco.mj_comVel(m, d)
    return d


def test_body_vel_kernel_matches_mj_object_velocity(mjm):
    rng = np.random.default_rng(0)
    ds = [_random_state(mjm, rng) for _ in range(3)]
    xpos = wp.array(np.stack([d.xpos for d in ds]).astype(np.float32), dtype=wp.vec3, device="cpu")
    com = wp.array(np.stack([d.subtree_com for d in ds]).astype(np.float32), dtype=wp.vec3, device="cpu")
    cvel = wp.array(np.stack([d.cvel for d in ds]).astype(np.float32), dtype=wp.spatial_vector, device="cpu")
    rootid = wp.array(mjm.body_rootid.astype(np.int32), dtype=wp.int32, device="cpu")
    lin = wp.zeros((3, mjm.nbody), dtype=wp.vec3, device="cpu")
    ang = wp.zeros((3, mjm.nbody), dtype=wp.vec3, device="cpu")
    launch_body_vel_w(rootid, xpos, com, cvel, lin, ang)
    lin, ang = lin.numpy(), ang.numpy()
    v = np.zeros(6)
    for w, d in enumerate(ds):
        for b in range(mjm.nbody):
            # XBODY = body frame origin (BODY would be the inertial frame); flg_local=0 → world frame
            mujoco.mj_objectVelocity(mjm, d, mujoco.mjtObj.mjOBJ_XBODY, b, v, 0)
            np.testing.assert_allclose(ang[w, b], v[:3], atol=1e-4)
            np.testing.assert_allclose(lin[w, b], v[3:], atol=1e-4)
    # sanity: the free-floating root's linear velocity is qvel[0:3] (world frame)
    np.testing.assert_allclose(lin[0, 1], ds[0].qvel[:3], atol=1e-4)


def test_reset_kernel_masked_write():
    init_warp()
    rng = np.random.default_rng(1)
    n, nq, nv, na = 5, 7, 6, 2
    qpos0 = rng.normal(size=(n, nq)).astype(np.float32)
    qvel0 = rng.normal(size=(n, nv)).astype(np.float32)
    warm0 = rng.normal(size=(n, nv)).astype(np.float32)
    act0 = rng.normal(size=(n, na)).astype(np.float32)
    time0 = rng.uniform(1, 2, size=n).astype(np.float32)
    tq = rng.normal(size=(n, nq)).astype(np.float32)
    tv = rng.normal(size=(n, nv)).astype(np.float32)
    mask = np.array([1, 0, 0, 1, 0], dtype=np.int32)
    arrs = [wp.array(a, device="cpu") for a in (qpos0, qvel0, warm0, act0, time0)]
    mask_wp, tq_wp, tv_wp = (wp.array(a, device="cpu") for a in (mask, tq, tv))
    launch_sim_reset(mask_wp, tq_wp, tv_wp, *arrs)
    qpos, qvel, warm, act, tm = (a.numpy() for a in arrs)
    m = mask.astype(bool)
    np.testing.assert_array_equal(qpos[m], tq[m])
    np.testing.assert_array_equal(qvel[m], tv[m])
    assert (warm[m] == 0).all() and (act[m] == 0).all() and (tm[m] == 0).all()
    for got, ref in ((qpos, qpos0), (qvel, qvel0), (warm, warm0), (act, act0), (tm, time0)):
        np.testing.assert_array_equal(got[~m], ref[~m])


def test_guard_kernel():
    init_warp()
    n, nq, nv = 6, 8, 7
    qpos = np.zeros((n, nq), np.float32)
    qpos[:, 2] = 0.8
    qvel = np.zeros((n, nv), np.float32)
    qpos[1, 5] = np.nan
    qvel[2, 3] = np.inf
    qvel[3, 0] = -250.0  # above max_qvel
    qpos[4, 2] = -2.0  # root below min height
    unstable = wp.zeros(n, dtype=wp.int32, device="cpu")
    count = wp.array([7], dtype=wp.int32, device="cpu")
    launch_sim_guard(wp.array(qpos, device="cpu"), wp.array(qvel, device="cpu"), 2, 200.0, -0.5, 5.0,
                     unstable, count)  # fmt: skip
    assert unstable.numpy().tolist() == [0, 1, 1, 1, 1, 0]
    assert count.numpy()[0] == 4
