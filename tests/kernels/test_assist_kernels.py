"""The root assist's kernels against a float64 NumPy reference."""

import numpy as np
import pytest
import torch
import warp as wp

from simppo.kernels.imitation.assist import RootAssist, assist_root
from simppo.kernels.motion_interp import MotionStateWp
from simppo.kernels.types import SimState
from simppo.motion.kinematics import quat_to_axis_angle
from simppo.utils.device import init_warp, warp_view
from tests.envs.imitation_reference import f64, q_conj, q_mul, q_normalize, q_rotate, q_rotate_inv


def _reference(qpos, qvel, ref, alpha, tau, vertical, rotation):
    """Float64: the free joint's velocity (world linear, body angular) a share ``alpha`` of the way to the one
    that follows the reference root and closes the pose error in ``tau``, on the assisted axes."""
    qpos, qvel, ref = f64(torch.as_tensor(qpos)), f64(torch.as_tensor(qvel)), {k: f64(torch.as_tensor(v))
                                                                               for k, v in ref.items()}
    out = qvel.clone()
    p, q = qpos[:, :3], q_normalize(qpos[:, 3:7])
    v_des = ref["root_lin_vel_w"] + (ref["root_pos"] - p) / tau
    axes = 3 if vertical else 2
    out[:, :axes] = qvel[:, :axes] + alpha * (v_des[:, :axes] - qvel[:, :axes])
    if rotation:
        w = q_rotate(q, qvel[:, 3:6])
        error = q_mul(q_normalize(ref["root_quat"]), q_conj(q))  # the reference root's rotation from the robot's
        w_des = ref["root_ang_vel_w"] + torch.as_tensor(quat_to_axis_angle(error.numpy())) / tau
        out[:, 3:6] = q_rotate_inv(q, w + alpha * (w_des - w))
    return out.numpy()


def _case(n=9, nq=12, seed=0):
    rng = np.random.default_rng(seed)
    qpos = rng.normal(size=(n, nq))
    qpos[:, 3:7] /= np.linalg.norm(qpos[:, 3:7], axis=1, keepdims=True)
    qvel = rng.normal(size=(n, nq - 1))
    quat = rng.normal(size=(n, 4))
    ref = {"root_pos": qpos[:, :3] + 0.2 * rng.normal(size=(n, 3)),
           "root_quat": quat / np.linalg.norm(quat, axis=1, keepdims=True),
           "root_lin_vel_w": rng.normal(size=(n, 3)), "root_ang_vel_w": rng.normal(size=(n, 3))}
    return qpos, qvel, ref


def _launch(qpos, qvel, ref, alpha, decrement, tau, vertical, rotation):
    init_warp()
    t = {"qpos": torch.tensor(qpos, dtype=torch.float32), "qvel": torch.tensor(qvel, dtype=torch.float32),
         "alpha": torch.tensor([alpha], dtype=torch.float32)}
    sim = SimState()
    sim.qpos, sim.qvel = warp_view(t["qpos"]), warp_view(t["qvel"])
    r = MotionStateWp()
    for k, v in ref.items():  # slot 0 of [N, F, ...] reference fields (F = 2: a future frame the kernel ignores)
        both = torch.tensor(np.stack([v, v + 5.0], 1), dtype=torch.float32).contiguous()
        t[k] = both
        setattr(r, k, warp_view(both, wp.vec4 if k == "root_quat" else wp.vec3))
    a = RootAssist()
    a.alpha, a.decrement, a.inv_tau = warp_view(t["alpha"]), decrement, 1.0 / tau
    a.vertical, a.rotation = int(vertical), int(rotation)
    assist_root(r, a, sim)
    wp.synchronize()
    return t


@pytest.mark.parametrize("vertical, rotation", [(False, False), (True, False), (True, True)],
                         ids=["horizontal", "position", "pose"])
@pytest.mark.parametrize("alpha", [1.0, 0.35])
def test_assist_root_matches_the_reference(alpha, vertical, rotation):
    qpos, qvel, ref = _case()
    t = _launch(qpos, qvel, ref, alpha, 0.05, 0.1, vertical, rotation)
    want = _reference(qpos.astype(np.float32).astype(np.float64), qvel.astype(np.float32).astype(np.float64),
                      {k: v.astype(np.float32).astype(np.float64) for k, v in ref.items()}, alpha, 0.1, vertical,
                      rotation)
    np.testing.assert_allclose(t["qvel"].double().numpy(), want, rtol=2e-5, atol=2e-5)
    # only the free joint's six velocities move, and qpos is only read
    assert torch.equal(t["qvel"][:, 6:], torch.tensor(qvel[:, 6:], dtype=torch.float32))
    assert torch.equal(t["qpos"], torch.tensor(qpos, dtype=torch.float32))
    if not rotation:
        assert torch.equal(t["qvel"][:, 3:6], torch.tensor(qvel[:, 3:6], dtype=torch.float32))
    if not vertical:
        assert torch.equal(t["qvel"][:, 2], torch.tensor(qvel[:, 2], dtype=torch.float32))
    assert float(t["alpha"][0]) == pytest.approx(alpha - 0.05)


def test_full_assist_makes_the_root_follow_the_reference():
    """``alpha = 1`` on a root already on the reference: the velocities become the reference's (angular in the
    body frame, as MuJoCo's free joint stores it)."""
    qpos, qvel, ref = _case(seed=1)
    ref["root_pos"], ref["root_quat"] = qpos[:, :3].copy(), qpos[:, 3:7].copy()
    t = _launch(qpos, qvel, ref, 1.0, 0.0, 0.1, True, True)
    np.testing.assert_allclose(t["qvel"][:, :3].numpy(), ref["root_lin_vel_w"], atol=1e-5)
    want = q_rotate_inv(f64(torch.as_tensor(qpos[:, 3:7])), f64(torch.as_tensor(ref["root_ang_vel_w"])))
    np.testing.assert_allclose(t["qvel"][:, 3:6].numpy(), want.numpy(), atol=1e-5)


def test_no_assist_once_faded_out():
    qpos, qvel, ref = _case(seed=2)
    t = _launch(qpos, qvel, ref, 0.03, 0.05, 0.1, True, True)  # this step assists at 0.03 and fades to 0 (not below)
    assert float(t["alpha"][0]) == 0.0
    t = _launch(qpos, qvel, ref, 0.0, 0.05, 0.1, True, True)
    assert torch.equal(t["qvel"], torch.tensor(qvel, dtype=torch.float32))
    assert float(t["alpha"][0]) == 0.0
