"""Both simulator backends (MJWarpSim on Warp CPU, MuJoCoSim on MuJoCo C) against the SimBackend contract."""

import mujoco
import numpy as np
import pytest
import torch

from simppo.robot import load_mj_model
from simppo.sim import MJWarpSim, MuJoCoSim, SimBackend, SimCfg, make_sim
from tests.helpers import run_fresh_python

DEVICE = "cpu"
N = 4
BACKENDS = {"mjwarp": MJWarpSim, "mujoco": MuJoCoSim}


def _stiff_model():
    """Test-only stiff hold: position-servo gains ×10."""
    m = load_mj_model("g1")
    m.actuator_gainprm[:, 0] *= 10
    m.actuator_biasprm[:, 1:3] *= 10
    return m


def _random_qpos(m, n, rng):
    q = np.zeros((n, m.nq))
    q[:, :3] = rng.uniform(-1, 1, (n, 3)) + [0, 0, 1]
    quat = rng.normal(size=(n, 4))
    q[:, 3:7] = quat / np.linalg.norm(quat, axis=1, keepdims=True)
    q[:, 7:] = rng.uniform(m.jnt_range[1:, 0], m.jnt_range[1:, 1], (n, m.nu))
    return q.astype(np.float32)


def _time(s: SimBackend) -> np.ndarray:
    return s.data.time.numpy().copy() if isinstance(s, MJWarpSim) else s.state64[:, 0].copy()


def _penalized_mask(m, robot) -> np.ndarray:
    """As the imitation env: colliding robot geoms of bodies other than the end effectors."""
    allowed = set(int(b) for b in robot.end_effector_ids)
    robot_geom = (m.geom_bodyid > 0) & ((m.geom_contype != 0) | (m.geom_conaffinity != 0))
    return np.array([int(robot_geom[g] and int(m.geom_bodyid[g]) not in allowed) for g in range(m.ngeom)])


@pytest.fixture(scope="module", params=list(BACKENDS))
def sim(request):
    return make_sim("g1", SimCfg(name=request.param), num_envs=N, device=DEVICE)


@pytest.fixture(params=list(BACKENDS))
def backend(request):
    return BACKENDS[request.param]


def test_make_sim_picks_backend():
    assert isinstance(make_sim("g1", SimCfg(name="auto"), num_envs=1, device="cpu"), MuJoCoSim)
    with pytest.raises(ValueError, match="unknown backend"):
        make_sim("g1", SimCfg(name="physx"), num_envs=1, device="cpu")


def test_a_process_on_mujoco_c_never_imports_mujoco_warp():
    """The CPU default's start-up skips mujoco_warp (seconds of kernel definitions); MJWarp still loads on demand."""
    code = """
import sys
import simppo.cli.train
from simppo.sim import SimCfg, make_sim
make_sim("g1", SimCfg(name="auto"), num_envs=1, device="cpu")
assert "mujoco_warp" not in sys.modules, "imported by the MuJoCo C path"
from simppo.sim import MJWarpSim
assert "mujoco_warp" in sys.modules and MJWarpSim.__name__ == "MJWarpSim"
assert type(make_sim("g1", SimCfg(name="mjwarp"), num_envs=1, device="cpu")) is MJWarpSim
"""
    run_fresh_python(code)


def test_mujoco_backend_needs_cpu():
    with pytest.raises(ValueError, match="sim=mujoco runs on the CPU"):
        MuJoCoSim("g1", SimCfg(), num_envs=1, device="cuda:0")


def test_views_shapes_and_zero_copy(sim):
    m = sim.mj_model
    assert sim.decimation == 4
    assert sim.physics_dt == pytest.approx(0.005) and sim.control_dt == pytest.approx(0.02)
    assert sim.qpos.shape == (N, m.nq) and sim.qvel.shape == (N, m.nv) and sim.ctrl.shape == (N, m.nu)
    assert sim.xpos.shape == (N, m.nbody, 3) and sim.xquat.shape == (N, m.nbody, 4)
    assert sim.body_lin_vel_w.shape == (N, m.nbody, 3) and sim.body_ang_vel_w.shape == (N, m.nbody, 3)
    assert sim.unstable.shape == (N,) and sim.num_unstable.shape == (1,)
    assert sim.penalized_contacts.shape == (N,)
    assert sim.foot_contact.shape == (N, 2) and sim.foot_contact_force.shape == (N, 2)
    s = sim.state
    for name in ("qpos", "qvel", "ctrl", "xpos", "xquat", "body_lin_vel_w", "body_ang_vel_w", "unstable",
                 "penalized_contacts"):
        assert getattr(sim, name).data_ptr() == getattr(s, name).ptr, name
    if isinstance(sim, MJWarpSim):
        assert sim.qpos.data_ptr() == sim.data.qpos.ptr and sim.ctrl.data_ptr() == sim.data.ctrl.ptr
        assert sim.xquat.data_ptr() == sim.data.xquat.ptr
    # starts from the home keyframe; ctrl view writes reach the warp array
    np.testing.assert_allclose(sim.qpos[0].numpy(), m.key("home").qpos, atol=1e-6)
    sim.ctrl[1, 0] = 0.123
    assert s.ctrl.numpy()[1, 0] == pytest.approx(0.123)
    sim.ctrl.copy_(sim.home_ctrl_t.expand(N, -1))


def test_random_kinematics_match_mujoco_c(sim):
    """Body world positions / wxyz quaternions equal MuJoCo C mj_kinematics to 1e-5."""
    m = sim.mj_model
    rng = np.random.default_rng(3)
    q = _random_qpos(m, N, rng)
    qv = rng.normal(size=(N, m.nv)).astype(np.float32)
    ptrs = [getattr(sim.state, k).ptr for k in ("qpos", "xpos", "unstable")]
    sim.reset_worlds(torch.ones(N, dtype=torch.bool), torch.from_numpy(q), torch.from_numpy(qv))
    assert ptrs == [getattr(sim.state, k).ptr for k in ("qpos", "xpos", "unstable")]  # views bound once
    d = mujoco.MjData(m)
    v = np.zeros(6)
    for w in range(N):
        d.qpos[:] = q[w]
        d.qvel[:] = qv[w]
        mujoco.mj_kinematics(m, d)
        mujoco.mj_comPos(m, d)
        mujoco.mj_comVel(m, d)
        np.testing.assert_allclose(sim.xpos[w].numpy(), d.xpos, atol=1e-5)
        np.testing.assert_allclose(sim.xquat[w].numpy(), d.xquat, atol=1e-5)  # both wxyz
        for b in range(1, m.nbody):
            mujoco.mj_objectVelocity(m, d, mujoco.mjtObj.mjOBJ_XBODY, b, v, 0)
            np.testing.assert_allclose(sim.body_ang_vel_w[w, b].numpy(), v[:3], atol=1e-4)
            np.testing.assert_allclose(sim.body_lin_vel_w[w, b].numpy(), v[3:], atol=1e-4)
    sim.reset_all_home()


def test_contacts_match_mujoco_c(sim):
    """Lying poses: ``forward()`` gives the foot flags / normal forces and the penalised-contact
    count of MuJoCo C's contacts (float32 poses: forces within 2 %)."""
    m = sim.mj_model
    mask = _penalized_mask(m, sim.robot)
    sim.set_penalized_geoms(mask)
    q = np.tile(sim.home_qpos, (N, 1)).astype(np.float32)
    q[:, 2] = [0.70, 0.74, 0.02, 0.08]  # feet pressed into the floor; lying on the back / the front
    q[2, 3:7] = [np.cos(np.pi / 4), 0, -np.sin(np.pi / 4), 0]
    q[3, 3:7] = [np.cos(np.pi / 4), 0, np.sin(np.pi / 4), 0]
    sim.reset_worlds(torch.ones(N, dtype=torch.bool), torch.from_numpy(q), torch.zeros(N, m.nv))
    sim.forward()
    d = mujoco.MjData(m)
    geom_foot = {int(g): k for k, b in enumerate(sim.robot.feet_body_ids) for g in np.nonzero(m.geom_bodyid == b)[0]}
    f = np.zeros(6)
    for w in range(N):
        mujoco.mj_resetData(m, d)
        d.qpos[:], d.ctrl[:] = q[w], sim.ctrl[w].numpy()
        mujoco.mj_forward(m, d)
        pen, flags, force = 0, np.zeros(2, np.int32), np.zeros(2)
        for i in range(d.ncon):
            c = d.contact[i]
            if c.efc_address < 0:
                continue
            pen += int(mask[c.geom[0]] or mask[c.geom[1]])
            foot = geom_foot.get(int(c.geom[0]), geom_foot.get(int(c.geom[1]), -1))
            if foot >= 0:
                mujoco.mj_contactForce(m, d, i, f)
                flags[foot], force[foot] = 1, force[foot] + f[0]
        assert sim.penalized_contacts[w].item() == pen, w
        assert sim.foot_contact[w].tolist() == flags.tolist(), w
        np.testing.assert_allclose(sim.foot_contact_force[w].numpy(), force, rtol=0.02, atol=1.0)
    assert sim.penalized_contacts[2:].min() > 0 and sim.foot_contact[:2].all()
    sim.set_penalized_geoms(np.zeros(m.ngeom))
    sim.forward()
    assert (sim.penalized_contacts == 0).all()
    sim.reset_all_home()


def test_stiff_home_hold_and_agreement_with_c(backend):
    """×10 gains hold the home pose for 4 s; the backend ≈ MuJoCo C after 100 steps."""
    m = _stiff_model()
    s = backend("g1", SimCfg(decimation=1), num_envs=2, device=DEVICE, mj_model=m)
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, m.key("home").id)
    mujoco.mj_forward(m, d)
    z0 = float(d.qpos[2])
    for _ in range(100):
        s.step()
        mujoco.mj_step(m, d)
    mujoco.mj_kinematics(m, d)
    # float32 (MJWarp) vs float64 (C) with contacts: 1e-3 m stated tolerance (measured ~2e-7)
    for w in range(2):
        np.testing.assert_allclose(s.xpos[w].numpy(), d.xpos, atol=1e-3)
    s.decimation = 4  # plain launches on CPU, so the decimation can change between steps
    heights = []
    for _ in range(700 // 4 + 1):  # 100 + 704 physics steps > 4 s
        s.step()
        heights.append(s.qpos[:, 2].clone())
        assert bool((s.foot_contact == 1).all()), "both feet must stay in contact"
    h = torch.stack(heights)
    assert float((h - z0).abs().max()) < 0.05
    assert int(s.num_unstable[0]) == 0
    assert bool((s.foot_contact_force > 50.0).all())  # feet carry the robot's weight (~327 N total)
    total = float(s.foot_contact_force[0].sum())
    assert total == pytest.approx(float(m.body_subtreemass[1]) * 9.81, rel=0.2)


def _twin_sims(backend):
    a = backend("g1", SimCfg(), num_envs=N, device=DEVICE)
    b = backend("g1", SimCfg(), num_envs=N, device=DEVICE)
    g = torch.Generator().manual_seed(0)
    ctrl = a.home_ctrl_t + 0.3 * torch.randn(N, a.nu, generator=g)
    for s in (a, b):
        s.ctrl.copy_(ctrl)
        for _ in range(3):
            s.step()
    assert torch.equal(a.qpos, b.qpos) and torch.equal(a.qvel, b.qvel)  # deterministic on CPU
    return a, b


def test_reset_subset_leaves_others_bit_identical(backend):
    a, b = _twin_sims(backend)
    mask = torch.tensor([True, False, True, False])
    keep = ~mask
    rng = np.random.default_rng(4)
    q = torch.from_numpy(_random_qpos(a.mj_model, N, rng))
    qv = torch.randn(N, a.nv) * 0.1
    before = {k: getattr(a, k).clone() for k in ("xpos", "xquat", "body_lin_vel_w", "body_ang_vel_w")}
    a.reset_worlds(mask, q, qv)
    assert torch.equal(a.qpos[mask], q[mask]) and torch.equal(a.qvel[mask], qv[mask])
    assert torch.equal(a.qpos[keep], b.qpos[keep]) and torch.equal(a.qvel[keep], b.qvel[keep])
    for k, v in before.items():
        assert torch.equal(getattr(a, k)[keep], v[keep]), k
        assert not torch.equal(getattr(a, k)[mask], v[mask]), k
    for _ in range(5):
        a.step()
        b.step()
    for k in ("qpos", "qvel", "xpos", "xquat", "body_lin_vel_w"):
        assert torch.equal(getattr(a, k)[keep], getattr(b, k)[keep]), k


def test_state_dict_continues_exactly(backend):
    """Save, step, restore, step again: the same trajectory bit for bit (warm start included)."""
    a, _ = _twin_sims(backend)
    saved = a.state_dict()
    assert set(saved) == {"qpos", "qvel", "ctrl", "qacc_warmstart"}
    assert saved["qacc_warmstart"].abs().sum() > 0
    for _ in range(3):
        a.step()
    first = a.qpos.clone(), a.qvel.clone(), a.xpos.clone()
    a.ctrl.zero_()
    a.load_state_dict(saved)
    assert torch.equal(a.qpos, saved["qpos"].float()) and torch.equal(a.ctrl, saved["ctrl"])
    for _ in range(3):
        a.step()
    for x, y in zip(first, (a.qpos, a.qvel, a.xpos), strict=True):
        assert torch.equal(x, y)


def test_guard_flags_blown_up_world_and_others_continue(backend):
    s = backend("g1", SimCfg(), num_envs=N, device=DEVICE)
    s.step()
    assert int(s.num_unstable[0]) == 0
    s.qvel[1, 6:] = 1.0e6  # inject a huge joint velocity into world 1
    t0 = _time(s)
    s.step()
    assert s.unstable.tolist() == [0, 1, 0, 0]
    assert int(s.num_unstable[0]) == 1
    for _ in range(3):
        s.step()
    good = torch.tensor([True, False, True, True])
    assert torch.isfinite(s.qpos[good]).all() and torch.isfinite(s.qvel[good]).all()
    assert (s.unstable[good] == 0).all()
    assert (_time(s)[good.numpy()] > t0[good.numpy()]).all()
    # the env resets flagged worlds; the world is healthy again afterwards
    n = s.num_envs
    s.reset_worlds(s.unstable.clone(), s.home_qpos_t.expand(n, -1), torch.zeros(n, s.nv))
    s.step()
    assert int(s.num_unstable[0]) == 0
    assert torch.isfinite(s.qpos).all()
