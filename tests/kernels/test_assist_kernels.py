"""The root assist's kernels against a float64 NumPy reference."""

import numpy as np
import pytest
import torch
import warp as wp

from simppo.kernels.imitation.assist import RootAssist, assist_root, fade_assist
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


def _bind(t, alpha, motion_ids, terminated, decrement=0.05, tau=0.1, vertical=False, rotation=False,
          per_motion=False, hi=1.0, ema=0.1, max_rate=0.1, truncated=None, per_episode=False):
    """A :class:`RootAssist` over tensors kept in ``t`` (``alpha``, ``motion_ids``, ``terminated``, ``truncated``,
    ``counts``, ``rate_ema``)."""
    t["alpha"] = torch.tensor(alpha, dtype=torch.float32).reshape(-1)
    t["motion_ids"] = torch.tensor(motion_ids, dtype=torch.int32)
    t["terminated"] = torch.tensor(terminated, dtype=torch.bool)
    t["truncated"] = torch.zeros_like(t["terminated"]) if truncated is None else torch.tensor(truncated)
    shares = t["alpha"].shape[0] if per_motion else 0
    t.setdefault("counts", torch.zeros(shares, 3))
    t.setdefault("rate_ema", torch.zeros(shares))
    a = RootAssist()
    a.alpha, a.motion_ids = warp_view(t["alpha"]), warp_view(t["motion_ids"], wp.int32)
    a.terminated, a.counts = warp_view(t["terminated"], wp.bool), warp_view(t["counts"])
    a.truncated = warp_view(t["truncated"], wp.bool)
    a.rate_ema, a.per_motion, a.hi, a.ema = warp_view(t["rate_ema"]), int(per_motion), hi, ema
    a.per_episode, a.max_rate = int(per_episode), max_rate
    a.decrement, a.inv_tau = decrement, 1.0 / tau
    a.vertical, a.rotation = int(vertical), int(rotation)
    return a


def _launch(qpos, qvel, ref, alpha, decrement, tau, vertical, rotation, motion_ids=None):
    """One control step of the assist (the nudge, then the fade) on the case; ``alpha`` a float (one share) or a
    list (one per motion, indexed by ``motion_ids``)."""
    init_warp()
    n = qpos.shape[0]
    t = {"qpos": torch.tensor(qpos, dtype=torch.float32), "qvel": torch.tensor(qvel, dtype=torch.float32)}
    sim = SimState()
    sim.qpos, sim.qvel = warp_view(t["qpos"]), warp_view(t["qvel"])
    r = MotionStateWp()
    for k, v in ref.items():  # slot 0 of [N, F, ...] reference fields (F = 2: a future frame the kernel ignores)
        both = torch.tensor(np.stack([v, v + 5.0], 1), dtype=torch.float32).contiguous()
        t[k] = both
        setattr(r, k, warp_view(both, wp.vec4 if k == "root_quat" else wp.vec3))
    per_motion = isinstance(alpha, list)
    ids = np.zeros(n, dtype=np.int32) if motion_ids is None else motion_ids
    a = _bind(t, alpha, ids, np.zeros(n, dtype=bool), decrement, tau, vertical, rotation, per_motion)
    assist_root(r, a, sim)
    fade_assist(a)
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


def test_each_env_is_nudged_by_its_motions_share():
    """Per motion: an env moves by the share of its own motion (a motion at 0 leaves its envs untouched)."""
    qpos, qvel, ref = _case(n=12, seed=3)
    ids = np.array([0, 1, 2, 2, 1, 0, 0, 1, 2, 1, 0, 2], dtype=np.int32)
    shares = [1.0, 0.35, 0.0]
    t = _launch(qpos, qvel, ref, shares, 0.0, 0.1, False, False, motion_ids=ids)
    qpos64, qvel64 = qpos.astype(np.float32).astype(np.float64), qvel.astype(np.float32).astype(np.float64)
    ref64 = {k: v.astype(np.float32).astype(np.float64) for k, v in ref.items()}
    for m, share in enumerate(shares):
        rows = ids == m
        want = _reference(qpos64[rows], qvel64[rows], {k: v[rows] for k, v in ref64.items()}, share, 0.1, False,
                          False)
        np.testing.assert_allclose(t["qvel"][rows].double().numpy(), want, rtol=2e-5, atol=2e-5)
    assert torch.equal(t["qvel"][ids == 2], torch.tensor(qvel[ids == 2], dtype=torch.float32))


def _per_motion_reference(alpha, rate_ema, ids, terminated, truncated, decrement, hi, ema, max_rate, per_episode):
    """Float64: each motion with envs folds its termination rate (per env-step, or with ``per_episode`` per ended
    episode when some ended) into its EMA and moves its share by ``decrement``, down while the EMA is under
    ``max_rate`` (to 0), up otherwise (to ``hi``)."""
    alpha, rate_ema = np.array(alpha, dtype=np.float64), np.array(rate_ema, dtype=np.float64)
    for m in range(alpha.shape[0]):
        rows = ids == m
        if not rows.any():
            continue
        ended = (terminated | truncated)[rows].sum() if per_episode else rows.sum()
        if ended > 0:
            rate_ema[m] += ema * (terminated[rows].sum() / ended - rate_ema[m])
        step = -decrement if rate_ema[m] < max_rate else decrement
        alpha[m] = min(hi, max(0.0, alpha[m] + step))
    return alpha, rate_ema


@pytest.mark.parametrize("per_episode", [False, True], ids=["survival", "success"])
def test_each_motions_share_fades_by_how_it_does(per_episode):
    """Twelve steps of random terminations and clip ends over five motions (one without envs) against the float64
    reference: the EMA of each motion's termination rate (per env-step; or per ended episode, kept on a step where
    none of the motion's episodes ended), its share moved down or up and clamped to [0, hi], the scratch counts
    zeroed after each step."""
    init_warp()
    rng = np.random.default_rng(4)
    n, m = 40, 5
    hi, decrement, ema = 0.8, 0.1, 0.3
    max_rate = 0.3 if per_episode else 1.0 / 6.0
    alpha = np.array([0.8, 0.05, 0.5, 0.3, 0.75])
    rate_ema = np.array([0.0, 0.4, 0.1, 0.2, 0.05])
    t = {"counts": torch.zeros(m, 3), "rate_ema": torch.tensor(rate_ema, dtype=torch.float32)}
    fail_prob = np.array([0.02, 0.6, 0.15, 0.0, 0.3])
    moved_up = moved_down = kept_ema = at_zero = at_hi = False
    for _ in range(12):
        ids = rng.choice([0, 1, 2, 4], size=n).astype(np.int32)  # motion 3 has no env
        terminated = rng.random(n) < fail_prob[ids]
        truncated = ~terminated & (rng.random(n) < 0.05)
        before = t["rate_ema"].double().numpy()
        a = _bind(t, alpha.astype(np.float32).tolist(), ids, terminated, decrement, per_motion=True, hi=hi,
                  ema=ema, max_rate=max_rate, truncated=truncated, per_episode=per_episode)
        fade_assist(a)
        wp.synchronize()
        want_alpha, want_ema = _per_motion_reference(alpha.astype(np.float32), before, ids, terminated, truncated,
                                                     decrement, hi, ema, np.float32(max_rate), per_episode)
        np.testing.assert_allclose(t["alpha"].double().numpy(), want_alpha, atol=1e-6)
        np.testing.assert_allclose(t["rate_ema"].double().numpy(), want_ema, atol=1e-6)
        assert not t["counts"].any()
        moved_up |= bool((want_alpha > alpha + 1e-9).any())
        moved_down |= bool((want_alpha < alpha - 1e-9).any())
        ended = np.bincount(ids[terminated | truncated], minlength=m)
        kept_ema |= bool((np.isin(np.arange(m), ids) & (ended == 0)).any())
        at_zero |= bool((want_alpha == 0.0).any())
        at_hi |= bool((want_alpha == hi).any())
        alpha = t["alpha"].double().numpy()
    assert moved_up and moved_down  # both branches ran
    assert kept_ema  # some motion with envs had no episode end on some step
    assert alpha[3] == pytest.approx(0.3) and float(t["rate_ema"][3]) == pytest.approx(0.2)  # no env: untouched
    assert at_zero and at_hi  # clamped at both ends
