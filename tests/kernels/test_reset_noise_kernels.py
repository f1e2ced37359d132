"""The reset perturbation kernel (``simppo.kernels.imitation.resets.perturb_reset_state``) against a float64
reference, given the kernel's own unit draws; and the draws themselves (range, spread, one stream per env)."""

import numpy as np
import torch
import warp as wp

from simppo.envs.imitation.rng import RNG_RESET_NOISE, rng_states
from simppo.kernels.imitation.resets import (
    RESET_NOISE_ROOT_DRAWS,
    ResetNoise,
    advance_reset_noise,
    perturb_reset_state,
)
from simppo.utils.device import init_warp, warp_view
from tests.envs.imitation_reference import f64, q_mul, q_normalize, q_rotate, q_rotate_inv

A = 5  # joints
NQ, NV = 7 + A, 6 + A
ROOT_POS, ROOT_RPY = (0.05, 0.04, 0.01), (0.1, 0.2, 0.3)
ROOT_LIN_VEL, ROOT_ANG_VEL, JOINT_POS = (0.5, 0.4, 0.2), (0.52, 0.3, 0.78), 0.1
SOFT_LO, SOFT_HI = np.array([-1.0, -1.0, -0.5, 0.0, -2.0]), np.array([1.0, 1.0, 0.5, 0.05, 2.0])


def _case(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    qpos = np.zeros((n, NQ))
    qpos[:, :3] = rng.normal(size=(n, 3))
    quat = rng.normal(size=(n, 4))
    qpos[:, 3:7] = quat / np.linalg.norm(quat, axis=1, keepdims=True)
    qpos[:, 7:] = rng.uniform(SOFT_LO, SOFT_HI, size=(n, A))
    qpos[0, 7 + 3] = 0.3  # a reference already past its soft limit stays reachable
    qpos[1, 7 + 2] = 0.5  # one on its soft limit
    qvel = rng.normal(size=(n, NV))
    return qpos.astype(np.float32), qvel.astype(np.float32)


def _launch(qpos, qvel, mask, seed=0, scale=1.0, ramp=1.0, times=None, at_clip_start=True):
    """Perturb the case in place on the device (start times ``times``, default mid-clip); returns the tensors
    (qpos, qvel, draws, rng)."""
    init_warp()
    n = qpos.shape[0]
    t = {"qpos": torch.tensor(qpos), "qvel": torch.tensor(qvel), "mask": torch.tensor(mask),
         "rng": rng_states(seed, RNG_RESET_NOISE, n, "cpu"),
         "draws": torch.zeros(n, int(RESET_NOISE_ROOT_DRAWS) + A)}
    noise = ResetNoise()
    noise.root_pos, noise.root_rpy = wp.vec3(*(scale * np.array(ROOT_POS))), wp.vec3(*(scale * np.array(ROOT_RPY)))
    noise.root_lin_vel = wp.vec3(*(scale * np.array(ROOT_LIN_VEL)))
    noise.root_ang_vel = wp.vec3(*(scale * np.array(ROOT_ANG_VEL)))
    noise.joint_pos = scale * JOINT_POS
    t["ramp"] = torch.tensor([ramp])
    noise.scale, noise.scale_step = warp_view(t["ramp"]), 0.0
    t["lo"], t["hi"] = torch.tensor(SOFT_LO, dtype=torch.float32), torch.tensor(SOFT_HI, dtype=torch.float32)
    noise.soft_joint_lo, noise.soft_joint_hi = warp_view(t["lo"]), warp_view(t["hi"])
    noise.joint_qpos_start = 7
    noise.at_clip_start = int(at_clip_start)
    t["times"] = torch.full((n,), 1.5) if times is None else torch.tensor(times, dtype=torch.float32)
    perturb_reset_state(noise, warp_view(t["mask"], wp.bool), warp_view(t["times"]), warp_view(t["rng"], wp.uint32),
                        warp_view(t["qpos"]), warp_view(t["qvel"]), warp_view(t["draws"]))
    wp.synchronize()
    return t


def _axis(axis: int, angle: torch.Tensor) -> torch.Tensor:
    q = torch.zeros(angle.shape[0], 4, dtype=torch.float64)
    q[:, 0], q[:, 1 + axis] = torch.cos(angle / 2), torch.sin(angle / 2)
    return q


def _reference(qpos, qvel, draws):
    """Float64: the perturbed state, as BeyondMimic's reset writes it (world-frame offsets; the rotation
    R_z R_y R_x applied on the left; world angular velocity kept and offset, then back in the root frame)."""
    qpos, qvel, d = f64(torch.as_tensor(qpos)), f64(torch.as_tensor(qvel)), f64(torch.as_tensor(draws))
    out_q, out_v = qpos.clone(), qvel.clone()
    q = q_normalize(qpos[:, 3:7])
    rpy = d[:, 3:6] * torch.tensor(ROOT_RPY, dtype=torch.float64)
    turn = q_mul(_axis(2, rpy[:, 2]), q_mul(_axis(1, rpy[:, 1]), _axis(0, rpy[:, 0])))
    q_new = q_normalize(q_mul(turn, q))
    w_world = q_rotate(q, qvel[:, 3:6]) + d[:, 9:12] * torch.tensor(ROOT_ANG_VEL, dtype=torch.float64)
    out_q[:, :3] = qpos[:, :3] + d[:, :3] * torch.tensor(ROOT_POS, dtype=torch.float64)
    out_q[:, 3:7] = q_new
    out_v[:, :3] = qvel[:, :3] + d[:, 6:9] * torch.tensor(ROOT_LIN_VEL, dtype=torch.float64)
    out_v[:, 3:6] = q_rotate_inv(q_new, w_world)
    joints = qpos[:, 7:]
    lo = torch.minimum(joints, torch.as_tensor(SOFT_LO))
    hi = torch.maximum(joints, torch.as_tensor(SOFT_HI))
    out_q[:, 7:] = torch.minimum(torch.maximum(joints + d[:, 12:] * JOINT_POS, lo), hi)
    return out_q.numpy(), out_v.numpy()


def test_perturbation_matches_the_reference():
    qpos, qvel = _case(16)
    mask = np.array([i % 4 != 2 for i in range(16)])
    t = _launch(qpos, qvel, mask)
    want_q, want_v = _reference(qpos.astype(np.float64), qvel.astype(np.float64), t["draws"].double().numpy())
    np.testing.assert_allclose(t["qpos"][mask].double().numpy(), want_q[mask], atol=2e-6)
    np.testing.assert_allclose(t["qvel"][mask].double().numpy(), want_v[mask], atol=2e-6)
    # the rows outside the mask: untouched, no draws, random state not advanced
    assert torch.equal(t["qpos"][~mask], torch.tensor(qpos[~mask]))
    assert torch.equal(t["qvel"][~mask], torch.tensor(qvel[~mask]))
    assert (t["draws"][~mask] == 0).all()
    assert torch.equal(t["rng"][~mask], rng_states(0, RNG_RESET_NOISE, 16, "cpu")[~mask])
    # joint velocities are not perturbed
    assert torch.equal(t["qvel"][:, 6:], torch.tensor(qvel[:, 6:]))


def test_starts_at_the_clip_start_can_stay_on_the_reference():
    """With ``at_clip_start`` off, a reset at t = 0 keeps the reference's state (zero draws, its stream not
    advanced); every other reset is perturbed exactly as with it on. With it on, t = 0 is perturbed like any time."""
    qpos, qvel = _case(12)
    mask = np.ones(12, dtype=bool)
    times = np.where(np.arange(12) % 3 == 0, 0.0, 0.02 * np.arange(12)).astype(np.float32)
    at_zero = times == 0.0
    on = _launch(qpos, qvel, mask, times=times)
    off = _launch(qpos, qvel, mask, times=times, at_clip_start=False)
    assert torch.equal(off["qpos"][at_zero], torch.tensor(qpos[at_zero]))
    assert torch.equal(off["qvel"][at_zero], torch.tensor(qvel[at_zero]))
    assert (off["draws"][at_zero] == 0).all()
    assert torch.equal(off["rng"][at_zero], rng_states(0, RNG_RESET_NOISE, 12, "cpu")[at_zero])
    for key in ("qpos", "qvel", "draws", "rng"):
        assert torch.equal(off[key][~at_zero], on[key][~at_zero]), key
    assert not torch.allclose(on["qpos"][at_zero], torch.tensor(qpos[at_zero]), atol=1e-3)


def test_joints_stay_inside_the_soft_limits_unless_the_reference_is_outside():
    qpos, qvel = _case(64, seed=1)
    t = _launch(qpos, qvel, np.ones(64, dtype=bool), scale=20.0)  # offsets far wider than the limits
    joints = t["qpos"][:, 7:].numpy()
    lo, hi = np.minimum(qpos[:, 7:], SOFT_LO), np.maximum(qpos[:, 7:], SOFT_HI)
    assert (joints >= lo - 1e-6).all() and (joints <= hi + 1e-6).all()
    assert joints[0, 3] <= 0.3 + 1e-6  # past its soft limit: never pushed further out


def test_draws_cover_the_range_and_each_env_has_its_own_stream():
    n = 2048
    qpos, qvel = _case(n, seed=2)
    t = _launch(qpos, qvel, np.ones(n, dtype=bool))
    d = t["draws"].numpy()
    assert d.min() >= -1.0 and d.max() <= 1.0
    # uniform on [-1, 1]: mean 0, variance 1/3 per column (n = 2048: 5 sigma bounds)
    assert np.abs(d.mean(0)).max() < 5 * np.sqrt(1 / 3 / n)
    assert np.abs(d.var(0) - 1 / 3).max() < 0.05
    assert len({tuple(row) for row in d[:, :3].round(6)}) == n
    # the root offsets stay inside their half-widths
    dpos = t["qpos"][:, :3].numpy() - qpos[:, :3]
    assert (np.abs(dpos) <= np.array(ROOT_POS) + 1e-6).all()
    # the same seed gives the same draws; another seed others
    again = _launch(qpos, qvel, np.ones(n, dtype=bool))
    assert torch.equal(again["draws"], t["draws"])
    other = _launch(qpos, qvel, np.ones(n, dtype=bool), seed=1)
    assert not torch.equal(other["draws"], t["draws"])


def test_the_ramp_scales_every_half_width():
    qpos, qvel = _case(32, seed=4)
    mask = np.ones(32, dtype=bool)
    ramped = _launch(qpos, qvel, mask, ramp=0.4)
    narrow = _launch(qpos, qvel, mask, scale=0.4)  # the same draws with every half-width x 0.4
    assert torch.equal(ramped["draws"], narrow["draws"])
    np.testing.assert_allclose(ramped["qpos"].numpy(), narrow["qpos"].numpy(), atol=1e-6)
    np.testing.assert_allclose(ramped["qvel"].numpy(), narrow["qvel"].numpy(), atol=1e-6)
    assert not np.allclose(ramped["qpos"].numpy(), _launch(qpos, qvel, mask)["qpos"].numpy(), atol=1e-4)
    start = _launch(qpos, qvel, mask, ramp=0.0)  # at the ramp's start every reset is the reference's state
    np.testing.assert_allclose(start["qpos"].numpy(), qpos, atol=1e-6)
    np.testing.assert_allclose(start["qvel"].numpy(), qvel, atol=1e-5)


def test_the_ramp_grows_by_its_step_and_stops_at_one():
    init_warp()
    scale = torch.zeros(1)
    noise = ResetNoise()
    noise.scale, noise.scale_step = warp_view(scale), 0.3
    seen = []
    for _ in range(5):
        advance_reset_noise(noise)
        wp.synchronize()
        seen.append(scale.item())
    np.testing.assert_allclose(seen, [0.3, 0.6, 0.9, 1.0, 1.0], atol=1e-6)
