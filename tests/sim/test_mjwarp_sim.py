"""MJWarpSim (MuJoCo Warp backend) on the current device (CPU here): acceptance checks of issue 3."""

import mujoco
import numpy as np
import pytest
import torch
import warp as wp

from simppo.robot import load_mj_model
from simppo.sim import MJWarpSim, MJWarpSimCfg, load_sim_cfg

DEVICE = "cpu"
N = 4


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


@pytest.fixture(scope="module")
def sim():
    return MJWarpSim("g1", load_sim_cfg("mjwarp"), num_envs=N, device=DEVICE)


def test_views_shapes_and_zero_copy(sim):
    m = sim.mj_model
    assert sim.decimation == 4
    assert sim.physics_dt == pytest.approx(0.005) and sim.control_dt == pytest.approx(0.02)
    assert sim.qpos.shape == (N, m.nq) and sim.qvel.shape == (N, m.nv) and sim.ctrl.shape == (N, m.nu)
    assert sim.xpos.shape == (N, m.nbody, 3) and sim.xquat.shape == (N, m.nbody, 4)
    assert sim.body_lin_vel_w.shape == (N, m.nbody, 3) and sim.body_ang_vel_w.shape == (N, m.nbody, 3)
    assert sim.unstable.shape == (N,) and sim.num_unstable.shape == (1,)
    assert sim.foot_contact.shape == (N, 2) and sim.foot_contact_force.shape == (N, 2)
    assert sim.qpos.data_ptr() == sim.data.qpos.ptr and sim.ctrl.data_ptr() == sim.data.ctrl.ptr
    assert sim.xquat.data_ptr() == sim.data.xquat.ptr
    # starts from the home keyframe; ctrl view writes reach the warp array
    np.testing.assert_allclose(sim.qpos[0].numpy(), m.key("home").qpos, atol=1e-6)
    sim.ctrl[1, 0] = 0.123
    assert sim.data.ctrl.numpy()[1, 0] == pytest.approx(0.123)
    sim.ctrl.copy_(sim.home_ctrl_t.expand(N, -1))


def test_random_kinematics_match_mujoco_c(sim):
    """Acceptance 3: body world positions / wxyz quaternions equal MuJoCo C mj_kinematics to 1e-5."""
    m = sim.mj_model
    rng = np.random.default_rng(3)
    q = _random_qpos(m, N, rng)
    qv = rng.normal(size=(N, m.nv)).astype(np.float32)
    sim.reset_worlds(torch.ones(N, dtype=torch.bool), torch.from_numpy(q), torch.from_numpy(qv))
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


def test_stiff_home_hold_and_agreement_with_c():
    """Acceptance 2: ×10 gains hold the home pose for 4 s in MJWarp (CPU); MJWarp ≈ C after 100 steps."""
    m = _stiff_model()
    s = MJWarpSim("g1", MJWarpSimCfg(decimation=1), num_envs=2, device=DEVICE, mj_model=m)
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


def _twin_sims():
    a = MJWarpSim("g1", MJWarpSimCfg(), num_envs=N, device=DEVICE)
    b = MJWarpSim("g1", MJWarpSimCfg(), num_envs=N, device=DEVICE)
    g = torch.Generator().manual_seed(0)
    ctrl = a.home_ctrl_t + 0.3 * torch.randn(N, a.nu, generator=g)
    for s in (a, b):
        s.ctrl.copy_(ctrl)
        for _ in range(3):
            s.step()
    assert torch.equal(a.qpos, b.qpos) and torch.equal(a.qvel, b.qvel)  # deterministic on CPU
    return a, b


def test_reset_subset_leaves_others_bit_identical():
    """Acceptance 4."""
    a, b = _twin_sims()
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


def test_guard_flags_blown_up_world_and_others_continue():
    """Acceptance 5."""
    s = MJWarpSim("g1", MJWarpSimCfg(), num_envs=N, device=DEVICE)
    s.step()
    assert int(s.num_unstable[0]) == 0
    s.qvel[1, 6:] = 1.0e6  # inject a huge joint velocity into world 1
    t0 = s.data.time.numpy().copy()
    s.step()
    assert s.unstable.tolist() == [0, 1, 0, 0]
    assert int(s.num_unstable[0]) == 1
    for _ in range(3):
        s.step()
    good = torch.tensor([True, False, True, True])
    assert torch.isfinite(s.qpos[good]).all() and torch.isfinite(s.qvel[good]).all()
    assert (s.unstable[good] == 0).all()
    assert (s.data.time.numpy()[good.numpy()] > t0[good.numpy()]).all()
    # the env resets flagged worlds; the world is healthy again afterwards
    n = s.num_envs
    s.reset_worlds(s.unstable.clone(), s.home_qpos_t.expand(n, -1), torch.zeros(n, s.nv))
    s.step()
    assert int(s.num_unstable[0]) == 0
    assert torch.isfinite(s.qpos).all()


@pytest.mark.skipif(not wp.is_cuda_available(), reason="CUDA graph capture needs a GPU")
def test_cuda_graph_matches_plain_launches():
    a = MJWarpSim("g1", MJWarpSimCfg(use_cuda_graph=True), num_envs=N, device="cuda:0")
    b = MJWarpSim("g1", MJWarpSimCfg(use_cuda_graph=False), num_envs=N, device="cuda:0")
    assert a.use_graph and not b.use_graph
    for _ in range(10):
        a.step()
        b.step()
    torch.testing.assert_close(a.qpos, b.qpos, atol=1e-4, rtol=0)
