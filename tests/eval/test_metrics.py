"""The metric functions against plain NumPy references on hand-made trajectories (no simulator)."""

import math

import numpy as np
import pytest
import torch

from simppo.eval.metrics import (
    FAILURE_CAUSES,
    TrackingAccumulator,
    body_position_errors,
    cause_names,
    clip_steps,
    joint_angle_error,
    summarize,
)
from simppo.kernels.imitation.spec import CAUSE_BIT

DT = 0.02


def test_body_and_joint_errors_match_numpy():
    rng = np.random.default_rng(0)
    pos, ref = rng.normal(size=(5, 7, 3)), rng.normal(size=(5, 7, 3))
    glob, local = body_position_errors(torch.tensor(pos), torch.tensor(ref))
    np.testing.assert_allclose(glob.numpy(), np.linalg.norm(pos - ref, axis=-1).mean(-1), rtol=1e-12)
    rel = (pos - pos[:, :1]) - (ref - ref[:, :1])
    np.testing.assert_allclose(local.numpy(), np.linalg.norm(rel, axis=-1).mean(-1), rtol=1e-12)
    q, rq = rng.normal(size=(5, 29)), rng.normal(size=(5, 29))
    np.testing.assert_allclose(joint_angle_error(torch.tensor(q), torch.tensor(rq)).numpy(), np.abs(q - rq).mean(-1))


def reference_trajectory(steps: int, bodies: int = 6, seed: int = 0) -> np.ndarray:
    """Smooth body positions ``[steps + 1, bodies, 3]`` (t = 0 first)."""
    rng = np.random.default_rng(seed)
    t = np.arange(steps + 1)[:, None, None] * DT
    base = rng.normal(size=(1, bodies, 3))
    return base + 0.3 * np.sin(2.0 * t + rng.normal(size=(1, bodies, 3))) + np.array([0.5, 0.0, 0.0]) * t


def run_accumulator(robot: np.ndarray, ref: np.ndarray, num_steps: list[int], q=None, ref_q=None,
                    fail_bits=None, **options) -> dict:
    """``robot`` / ``ref [T + 1, N, B, 3]`` and the env's ``fail_bits [T + 1, N]`` → the accumulator's ``finish()``."""
    steps, n = robot.shape[0] - 1, robot.shape[1]
    acc = TrackingAccumulator(n, "cpu", DT, **options)
    acc.start(torch.tensor(robot[0]), torch.tensor(ref[0]), torch.tensor(num_steps))
    q = np.zeros((steps + 1, n, 3)) if q is None else q
    ref_q = np.zeros_like(q) if ref_q is None else ref_q
    for k in range(1, steps + 1):
        bits = torch.zeros(n, dtype=torch.int32) if fail_bits is None else torch.tensor(fail_bits[k])
        acc.update(torch.tensor(robot[k]), torch.tensor(ref[k]), torch.tensor(q[k]), torch.tensor(ref_q[k]), bits)
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


def test_without_the_body_error_rule_a_drift_fails_only_on_a_termination():
    """``max_body_error_m=inf``: the same drifting play as above succeeds until the env flags a termination, and its
    errors are averaged over every step played."""
    steps = 60
    ref = reference_trajectory(steps, seed=3)[:, None]
    t = np.arange(steps + 1)[:, None, None, None] * DT
    robot = ref + np.array([1.0, 0.0, 0.0]) * t ** 2 * 3.0
    glob = np.linalg.norm(robot - ref, axis=-1).mean(-1)[:, 0]
    assert glob.max() > 0.5
    out = run_accumulator(robot, ref, [steps], max_body_error_m=math.inf)
    assert out["success"] == [True] and out["survival_steps"] == [steps]
    np.testing.assert_allclose(out["mpjpe_global_m"][0], glob[1:].mean(), rtol=1e-6)
    bits = np.zeros((steps + 1, 1), np.int32)
    bits[50, 0] = CAUSE_BIT["anchor_height"]
    out = run_accumulator(robot, ref, [steps], fail_bits=bits, max_body_error_m=math.inf)
    assert out["success"] == [False] and out["fail_step"] == [50]
    assert cause_names(out["fail_mask"][0]) == "anchor_height"


def test_termination_and_unstable_causes_are_reported_in_order():
    steps, n = 20, 3
    ref = np.stack([reference_trajectory(steps, seed=s) for s in range(n)], axis=1)
    bits = np.zeros((steps + 1, n), np.int32)
    bits[7, 0] = CAUSE_BIT["anchor_height"] | CAUSE_BIT["ee_height"]  # env 0: anchor height + end effector
    bits[12, 0] = CAUSE_BIT["anchor_ori"]  # after the failure: ignored
    bits[4, 1] = CAUSE_BIT["unstable"] | CAUSE_BIT["anchor_ori"]  # env 1 blows up at step 4: its state is not read
    bits[9, 2] = CAUSE_BIT["clip_end"] | CAUSE_BIT["timeout"]  # env 2: time-outs are no failures
    out = run_accumulator(ref.copy(), ref, [steps] * n, fail_bits=bits)
    assert out["success"] == [False, False, True]
    assert out["fail_step"][:2] == [7, 4]
    assert cause_names(out["fail_mask"][0]) == "anchor_height+ee_height"
    assert cause_names(out["fail_mask"][1]) == "unstable"
    assert FAILURE_CAUSES == ("anchor_height", "anchor_ori", "ee_height", "body_pos", "unstable", "body_error")


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
        return MotionResult(name, 0, ok, surv, 2.0, err, err / 2, err / 3000, 0.1, 0.2, 0.3, err / 1000,
                            None if ok else {"time_s": surv, "cause": "anchor_height+ee_height"})

    s = summarize([result("a", True, 10.0), result("b", False, 30.0, 1.0), result("c", True, 20.0)])
    assert s["success_rate"] == pytest.approx(2 / 3)
    assert s["mpjpe_global_mm"] == pytest.approx(20.0) and s["mpjpe_global_mm_median"] == pytest.approx(20.0)
    assert s["failure_causes"] == {"anchor_height": 1}
    assert s["survival_fraction"] == pytest.approx(5.0 / 6.0)
    assert clip_steps(4.0, 0.02) == 200 and clip_steps(4.01, 0.02) == 201 and clip_steps(0.0, 0.02) == 1


def test_summary_counts_plays_and_the_motions_every_play_of_which_succeeds():
    """Two motions played twice each (results motion by motion): success counts plays, ``num_motions`` motions;
    a motion id shared by two motions (two ranks' parts) still counts them apart, by their runs of plays."""
    from simppo.eval.metrics import MotionResult

    def play(name, mid, k, ok):
        return MotionResult(name, mid, ok, 2.0 if ok else 1.0, 2.0, 10.0, 5.0, 0.01, 0.1, 0.2, 0.3, 0.01,
                            None if ok else {"time_s": 1.0, "cause": "ee_height"}, play=k)

    s = summarize([play("a", 0, 0, True), play("a", 0, 1, True), play("b", 1, 0, True), play("b", 1, 1, False)])
    assert (s["num_motions"], s["num_plays"], s["num_success"]) == (2, 4, 3)
    assert s["success_rate"] == pytest.approx(0.75) and s["num_motions_every_play_success"] == 1
    assert s["survival_fraction"] == pytest.approx(7.0 / 8.0) and s["failure_causes"] == {"ee_height": 1}
    ranks = summarize([play("a", 0, 0, True), play("a", 0, 1, True), play("c", 0, 0, False), play("c", 0, 1, True)])
    assert (ranks["num_motions"], ranks["num_motions_every_play_success"]) == (2, 1)


def test_a_result_row_round_trips_and_a_row_without_play_is_play_0():
    from simppo.eval.metrics import MotionResult

    r = MotionResult("a", 3, False, 1.0, 2.0, 10.0, 5.0, 0.01, 0.1, 0.2, 0.3, 0.01,
                     {"time_s": 1.0, "cause": "ee_height"}, play=2)
    assert MotionResult.from_json(r.to_json()) == r
    old = {k: v for k, v in r.to_json().items() if k != "play"}
    assert MotionResult.from_json(old).play == 0
    with pytest.raises(ValueError):
        MotionResult.from_json({**old, "extra": 1})
