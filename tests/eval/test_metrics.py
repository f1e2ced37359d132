"""The metric functions against plain NumPy references on hand-made trajectories (no simulator)."""

import numpy as np
import pytest
import torch

from simppo.envs.imitation.config import TerminationCfg
from simppo.eval.metrics import (
    FAILURE_CAUSES,
    TrackingAccumulator,
    body_position_errors,
    cause_names,
    clip_steps,
    gravity_z,
    joint_angle_error,
    summarize,
    termination_flags,
)

DT = 0.02


def np_quat_rotate_inv(q, v):
    w, x, y, z = q
    r = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                  [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                  [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])
    return r.T @ v


def random_quats(rng, n):
    q = rng.normal(size=(n, 4))
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def test_body_and_joint_errors_match_numpy():
    rng = np.random.default_rng(0)
    pos, ref = rng.normal(size=(5, 7, 3)), rng.normal(size=(5, 7, 3))
    glob, local = body_position_errors(torch.tensor(pos), torch.tensor(ref))
    np.testing.assert_allclose(glob.numpy(), np.linalg.norm(pos - ref, axis=-1).mean(-1), rtol=1e-12)
    rel = (pos - pos[:, :1]) - (ref - ref[:, :1])
    np.testing.assert_allclose(local.numpy(), np.linalg.norm(rel, axis=-1).mean(-1), rtol=1e-12)
    q, rq = rng.normal(size=(5, 29)), rng.normal(size=(5, 29))
    np.testing.assert_allclose(joint_angle_error(torch.tensor(q), torch.tensor(rq)).numpy(), np.abs(q - rq).mean(-1))


def test_termination_flags_match_the_kernel_formulas():
    rng = np.random.default_rng(1)
    n, e = 64, 4
    th = TerminationCfg(anchor_height=0.25, anchor_ori=0.8, ee_height=0.25)
    a_pos, r_pos = rng.normal(size=(n, 3)) * 0.3, rng.normal(size=(n, 3)) * 0.3
    a_q, r_q = random_quats(rng, n), random_quats(rng, n)
    ee, r_ee = rng.normal(size=(n, e, 3)) * 0.2, rng.normal(size=(n, e, 3)) * 0.2
    g = np.array([0.0, 0.0, -1.0])
    expect = np.zeros((n, 3), bool)
    for i in range(n):
        expect[i, 0] = abs(r_pos[i, 2] - a_pos[i, 2]) > th.anchor_height
        expect[i, 1] = abs(np_quat_rotate_inv(r_q[i], g)[2] - np_quat_rotate_inv(a_q[i], g)[2]) > th.anchor_ori
        expect[i, 2] = any(abs(r_ee[i, k, 2] - ee[i, k, 2]) > th.ee_height for k in range(e))
    got = termination_flags(*(torch.tensor(x) for x in (a_pos, r_pos, a_q, r_q, ee, r_ee)), th).numpy()
    np.testing.assert_array_equal(got, expect)
    assert expect.any(0).all() and (~expect).any(0).all()  # both outcomes of every test occur
    np.testing.assert_allclose(gravity_z(torch.tensor(a_q)).numpy(),
                               [np_quat_rotate_inv(q, g)[2] for q in a_q], atol=1e-12)


def reference_trajectory(steps: int, bodies: int = 6, seed: int = 0) -> np.ndarray:
    """Smooth body positions ``[steps + 1, bodies, 3]`` (t = 0 first)."""
    rng = np.random.default_rng(seed)
    t = np.arange(steps + 1)[:, None, None] * DT
    base = rng.normal(size=(1, bodies, 3))
    return base + 0.3 * np.sin(2.0 * t + rng.normal(size=(1, bodies, 3))) + np.array([0.5, 0.0, 0.0]) * t


def run_accumulator(robot: np.ndarray, ref: np.ndarray, num_steps: list[int], q=None, ref_q=None,
                    flags=None, unstable=None) -> dict:
    """``robot`` / ``ref [T + 1, N, B, 3]`` → ``TrackingAccumulator.finish()``."""
    steps, n = robot.shape[0] - 1, robot.shape[1]
    acc = TrackingAccumulator(n, "cpu", DT)
    acc.start(torch.tensor(robot[0]), torch.tensor(ref[0]), torch.tensor(num_steps))
    q = np.zeros((steps + 1, n, 3)) if q is None else q
    ref_q = np.zeros_like(q) if ref_q is None else ref_q
    for k in range(1, steps + 1):
        f = torch.zeros(n, 3, dtype=torch.bool) if flags is None else torch.tensor(flags[k])
        u = torch.zeros(n, dtype=torch.bool) if unstable is None else torch.tensor(unstable[k])
        acc.update(torch.tensor(robot[k]), torch.tensor(ref[k]), torch.tensor(q[k]), torch.tensor(ref_q[k]), f, u)
    return acc.finish()


def test_kinematic_replay_policy_scores_zero_error_and_full_success():
    steps = 50
    ref = np.stack([reference_trajectory(steps, seed=s) for s in range(3)], axis=1)  # [T+1, 3, B, 3]
    out = run_accumulator(ref.copy(), ref, [steps, 40, 30])
    assert out["success"] == [True, True, True]
    assert out["survival_steps"] == [steps, 40, 30]
    assert out["fail_mask"] == [0, 0, 0]
    for key in ("mpjpe_global_m", "mpjpe_local_m", "joint_rad", "vel_mps", "acc_mps2", "max_error_m"):
        assert max(abs(v) for v in out[key]) < 1e-9, key


def test_errors_velocities_and_failure_match_numpy():
    steps = 60
    ref = reference_trajectory(steps, seed=3)[:, None]  # one env
    t = np.arange(steps + 1)[:, None, None, None] * DT
    drift = np.array([1.0, 0.0, 0.0]) * t ** 2 * 3.0  # accelerating away from the reference
    wobble = 0.01 * np.sin(9.0 * t) * np.array([0.0, 1.0, 0.0])
    robot = ref + drift + wobble
    glob = np.linalg.norm(robot - ref, axis=-1).mean(-1)[:, 0]  # [T+1]
    fail = int(np.argmax(glob > 0.5))
    assert 0 < fail < steps
    out = run_accumulator(robot, ref, [steps])
    assert out["success"] == [False]
    assert out["fail_step"] == [fail] and out["survival_steps"] == [fail]
    assert cause_names(out["fail_mask"][0]) == "body_error"
    played = slice(1, fail + 1)  # steps 1..fail, the failing step included
    np.testing.assert_allclose(out["mpjpe_global_m"][0], glob[played].mean(), rtol=1e-6)
    rel = (robot - robot[:, :, :1]) - (ref - ref[:, :, :1])
    np.testing.assert_allclose(out["mpjpe_local_m"][0], np.linalg.norm(rel, axis=-1).mean(-1)[played, 0].mean(),
                               rtol=1e-6, atol=1e-12)
    vel, ref_vel = np.diff(robot, axis=0) / DT, np.diff(ref, axis=0) / DT  # vel[k - 1] is step k
    verr = np.linalg.norm(vel - ref_vel, axis=-1).mean(-1)[:, 0]
    np.testing.assert_allclose(out["vel_mps"][0], verr[:fail].mean(), rtol=1e-6)
    acc, ref_acc = np.diff(vel, axis=0) / DT, np.diff(ref_vel, axis=0) / DT  # acc[k - 2] is step k >= 2
    aerr = np.linalg.norm(acc - ref_acc, axis=-1).mean(-1)[:, 0]
    np.testing.assert_allclose(out["acc_mps2"][0], aerr[:fail - 1].mean(), rtol=1e-5)
    np.testing.assert_allclose(out["max_error_m"][0], glob[played].max(), rtol=1e-6)


def test_termination_and_unstable_causes_are_reported_in_order():
    steps, n = 20, 3
    ref = np.stack([reference_trajectory(steps, seed=s) for s in range(n)], axis=1)
    flags = np.zeros((steps + 1, n, 3), bool)
    unstable = np.zeros((steps + 1, n), bool)
    flags[7, 0, 0] = flags[7, 0, 2] = True  # env 0: anchor height + end effector at step 7
    flags[12, 0, 1] = True  # after the failure: ignored
    unstable[4, 1] = True  # env 2 stays fine; env 1 blows up at step 4
    out = run_accumulator(ref.copy(), ref, [steps] * n, flags=flags, unstable=unstable)
    assert out["success"] == [False, False, True]
    assert out["fail_step"][:2] == [7, 4]
    assert cause_names(out["fail_mask"][0]) == "anchor_height+ee_height"
    assert cause_names(out["fail_mask"][1]) == "unstable"
    assert FAILURE_CAUSES[0] == "unstable"


def test_steps_after_the_clip_end_do_not_count():
    steps = 30
    ref = reference_trajectory(steps)[:, None]
    robot = ref.copy()
    robot[21:] += 2.0  # far off, but only after this env's clip (20 steps) ended
    out = run_accumulator(robot, ref, [20])
    assert out["success"] == [True] and out["survival_steps"] == [20]
    assert out["mpjpe_global_m"][0] < 1e-9


def test_summary_and_clip_steps():
    from simppo.eval.metrics import MotionResult

    def result(name, ok, err, surv=2.0):
        return MotionResult(name, 0, ok, surv, 2.0, err, err / 2, 0.1, 0.2, 0.3, err / 1000,
                            None if ok else {"time_s": surv, "cause": "anchor_height+ee_height"})

    s = summarize([result("a", True, 10.0), result("b", False, 30.0, 1.0), result("c", True, 20.0)])
    assert s["success_rate"] == pytest.approx(2 / 3)
    assert s["mpjpe_global_mm"] == pytest.approx(20.0) and s["mpjpe_global_mm_median"] == pytest.approx(20.0)
    assert s["failure_causes"] == {"anchor_height": 1}
    assert s["survival_fraction"] == pytest.approx(5.0 / 6.0)
    assert clip_steps(4.0, 0.02) == 200 and clip_steps(4.01, 0.02) == 201 and clip_steps(0.0, 0.02) == 1
