"""Kernels of the simulator backends (simppo.kernels.sim) against NumPy / MuJoCo C references."""

import mujoco
import numpy as np
import pytest
import warp as wp

from simppo.kernels.sim.body_vel import BodyVelBuffers, body_velocities
from simppo.kernels.sim.contact import ContactBuffers, contacts
from simppo.kernels.sim.guard import GuardBuffers, guard
from simppo.kernels.sim.reset import ResetBuffers, reset
from simppo.robot import load_mj_model
from simppo.utils.device import init_warp


@pytest.fixture(scope="module")
def mjm():
    init_warp()
    return load_mj_model("g1")


def _arr(a, dtype=None):
    return wp.array(a, dtype=dtype, device="cpu") if dtype is not None else wp.array(a, device="cpu")


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
    b = BodyVelBuffers()
    b.xpos = _arr(np.stack([d.xpos for d in ds]).astype(np.float32), wp.vec3)
    b.subtree_com = _arr(np.stack([d.subtree_com for d in ds]).astype(np.float32), wp.vec3)
    b.cvel = _arr(np.stack([d.cvel for d in ds]).astype(np.float32), wp.spatial_vector)
    b.body_rootid = _arr(mjm.body_rootid.astype(np.int32), wp.int32)
    b.lin_vel_w_out = wp.zeros((3, mjm.nbody), dtype=wp.vec3, device="cpu")
    b.ang_vel_w_out = wp.zeros((3, mjm.nbody), dtype=wp.vec3, device="cpu")
    body_velocities(b)
    lin, ang = b.lin_vel_w_out.numpy(), b.ang_vel_w_out.numpy()
    v = np.zeros(6)
    for w, d in enumerate(ds):
        for i in range(mjm.nbody):
            # XBODY = body frame origin (BODY would be the inertial frame); flg_local=0 → world frame
            mujoco.mj_objectVelocity(mjm, d, mujoco.mjtObj.mjOBJ_XBODY, i, v, 0)
            np.testing.assert_allclose(ang[w, i], v[:3], atol=1e-4)
            np.testing.assert_allclose(lin[w, i], v[3:], atol=1e-4)
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
    mask = np.array([1, 0, 0, 1, 0], dtype=bool)
    b = ResetBuffers()
    b.mask, b.qpos_target, b.qvel_target = _arr(mask), _arr(tq), _arr(tv)
    b.qpos_out, b.qvel_out, b.qacc_warmstart_out, b.act_out, b.time_out = (
        _arr(a) for a in (qpos0, qvel0, warm0, act0, time0))
    reset(b)
    qpos, qvel, warm, act, tm = (a.numpy() for a in (b.qpos_out, b.qvel_out, b.qacc_warmstart_out, b.act_out,
                                                      b.time_out))
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
    b = GuardBuffers()
    b.qpos, b.qvel = _arr(qpos), _arr(qvel)
    b.root_height_adr, b.max_qvel, b.min_height, b.max_height = 2, 200.0, -0.5, 5.0
    b.unstable_out = wp.zeros(n, dtype=wp.int32, device="cpu")
    b.count_out = _arr(np.array([7], dtype=np.int32))
    guard(b)
    assert b.unstable_out.numpy().tolist() == [0, 1, 1, 1, 1, 0]
    assert b.count_out.numpy()[0] == 4


def _contact_reference(nacon, geom, worldid, dim, efc_address, efc_force, geom_foot, geom_pen, elliptic, n, nfeet):
    flags = np.zeros((n, nfeet), np.int32)
    force = np.zeros((n, nfeet), np.float64)
    pen = np.zeros(n, np.float64)
    for c in range(nacon):
        if efc_address[c, 0] < 0:
            continue
        w, (g0, g1) = worldid[c], geom[c]
        pen[w] += float(geom_pen[g0] != 0 or geom_pen[g1] != 0)
        foot = geom_foot[g0] if geom_foot[g0] >= 0 else geom_foot[g1]
        if foot < 0:
            continue
        nrow = 2 * (dim[c] - 1) if (dim[c] > 1 and not elliptic) else 1
        flags[w, foot] = 1
        force[w, foot] += sum(efc_force[w, efc_address[c, k]] for k in range(nrow) if efc_address[c, k] >= 0)
    return flags, force, pen


@pytest.mark.parametrize("elliptic", [1, 0])
def test_contact_kernel_matches_numpy(elliptic):
    """Foot flags / normal forces and penalised-contact counts; slots past ``nacon`` and inactive
    contacts (``efc_address[c, 0] < 0``) are ignored."""
    init_warp()
    rng = np.random.default_rng(5 + elliptic)
    n, slots, ngeom, nfeet, nefc, ncol = 3, 40, 9, 2, 30, 4
    nacon = 33
    geom = rng.integers(0, ngeom, (slots, 2)).astype(np.int32)
    worldid = rng.integers(0, n, slots).astype(np.int32)
    dim = rng.choice([1, 3], slots).astype(np.int32)
    efc_address = rng.integers(0, nefc, (slots, ncol)).astype(np.int32)
    efc_address[rng.random(slots) < 0.2, 0] = -1
    efc_force = rng.uniform(0, 10, (n, nefc)).astype(np.float32)
    geom_foot = np.array([-1, 0, 0, 1, -1, -1, 1, -1, -1], np.int32)
    geom_pen = np.array([0, 0, 0, 0, 1, 1, 0, 1, 0], np.int32)
    b = ContactBuffers()
    b.nacon, b.geom = _arr(np.array([nacon], np.int32)), _arr(geom, wp.vec2i)
    b.worldid, b.dim = _arr(worldid), _arr(dim)
    b.efc_address, b.efc_force, b.geom_foot, b.geom_penalized = (_arr(a) for a in (efc_address, efc_force, geom_foot,
                                                                                   geom_pen))
    b.elliptic = elliptic
    b.foot_contact_out = _arr(np.full((n, nfeet), 9, np.int32))  # stale values are cleared
    b.foot_force_out = _arr(np.full((n, nfeet), 9.0, np.float32))
    b.penalized_out = _arr(np.full(n, 9.0, np.float32))
    geom_robot = np.array([0, 1, 1, 1, 1, 1, 1, 1, 0], np.int32)  # geoms 0 and 8: the floor / the world
    b.geom_robot, b.self_out = _arr(geom_robot), _arr(np.full(n, 9.0, np.float32))
    contacts(b)
    flags, force, pen = _contact_reference(nacon, geom, worldid, dim, efc_address, efc_force, geom_foot, geom_pen,
                                           elliptic, n, nfeet)
    assert flags.any() and pen.any()
    np.testing.assert_array_equal(b.foot_contact_out.numpy(), flags)
    np.testing.assert_allclose(b.foot_force_out.numpy(), force, rtol=1e-5)
    np.testing.assert_array_equal(b.penalized_out.numpy(), pen)
    active = [c for c in range(nacon) if efc_address[c, 0] >= 0]
    self_count = np.zeros(n)
    for c in active:
        self_count[worldid[c]] += float(geom_robot[geom[c, 0]] and geom_robot[geom[c, 1]])
    assert self_count.any()
    np.testing.assert_array_equal(b.self_out.numpy(), self_count)
