"""Acceptance check 1 of ``env=humanoid_imitation``: every reward term, the observation rows and the
termination flags equal a plain-torch float64 reference (``imitation_reference.py``) on random states
(atol 1e-5); plus the reference-state reset, the actions kernel, the undesired-contacts count (against
MuJoCo C contacts) and the adaptive sampler."""

from dataclasses import replace

import mujoco
import numpy as np
import pytest
import torch
import warp as wp

from simppo.envs.imitation import HumanoidImitationEnv, HumanoidImitationEnvCfg
from simppo.envs.imitation.config import DeployRandomizationCfg, ResetNoiseCfg
from simppo.envs.imitation.sampler import AdaptiveSampler, AdaptiveSamplingCfg
from simppo.kernels.imitation.actions import apply_actions
from simppo.kernels.imitation.spec import CAUSE_CODE, END_CAUSES, ERROR_NAMES, TRACKING_NAMES, cause_mask
from simppo.kernels.imitation.spec import REWARD_NAMES as REWARD_TERMS
from simppo.kernels.imitation.terminations import compute_terminations
from simppo.robot.model import servo_gains
from tests.envs import imitation_reference as R

ATOL = 1e-5  # absolute; relative (float32 sums such as action_rate ~ 50) where |value| > 1
N = 12
# env roles of the random state (see ``randomize``)
NOMINAL, ANCHOR_H, ANCHOR_ORI, EE_H, UNSTABLE, CLIP_END, CLIP_EXACT, TIMEOUT, ALMOST_TIMEOUT, FAIL_AND_END = range(10)
WILD = (10, 11)  # fully random robot states


@pytest.fixture(scope="module")
def env(sim_cfg):
    # resets exactly on the reference (the reset noise has its own tests: tests/envs/test_reset_noise.py)
    cfg = replace(HumanoidImitationEnvCfg(), reset_noise=ResetNoiseCfg(enabled=False))
    e = HumanoidImitationEnv(cfg, num_envs=N, device="cpu", seed=0, sim_cfg=sim_cfg)
    e.reset()
    return e


def _const(env, name: str) -> torch.Tensor:
    """A constant of the env's kernel params as a torch tensor (``soft_lo`` → ``soft_joint_lo``)."""
    name = {"soft_lo": "soft_joint_lo", "soft_hi": "soft_joint_hi"}.get(name, name)
    return wp.to_torch(getattr(env.params, name))


def _ids(env):
    r = env.sim.robot
    return [int(b) for b in r.tracked_body_ids], [int(b) for b in r.end_effector_ids]


def _axis_quat(axis, angle):
    axis = torch.as_tensor(axis, dtype=torch.float64)
    axis = axis / axis.norm()
    return torch.cat([torch.cos(torch.tensor([angle / 2], dtype=torch.float64)), axis * np.sin(angle / 2)])


def randomize(env, seed: int) -> None:
    """Random motions/times, robot states near the reference (with noise) or wild, random actions and
    contact counts; env roles NOMINAL.. make each termination / truncation condition fire on its own."""
    g = torch.Generator().manual_seed(seed)
    n, nj = env.num_envs, env.num_actions
    num_motions = env.motion_lengths.shape[0]
    env.motion_ids.copy_(torch.randint(0, num_motions, (n,), generator=g, dtype=torch.int32))
    lengths = env.motion_lengths[env.motion_ids.long()]
    env.times.copy_(torch.rand(n, generator=g) * lengths * 0.9)
    env._query_reference()
    ref = R.ref_state(env)
    qpos, qvel = R.reference_state(ref, env.joint_qpos_start, env.joint_dof_start, env.sim.nq, env.sim.nv)
    # near the reference: small noise on root pose, joints and velocities
    qpos[:, 0:3] += 0.02 * torch.randn(n, 3, generator=g, dtype=torch.float64)
    qpos[:, 3:7] = R.q_normalize(qpos[:, 3:7] + 0.03 * torch.randn(n, 4, generator=g, dtype=torch.float64))
    qpos[:, 7:] += 0.05 * torch.randn(n, nj, generator=g, dtype=torch.float64)
    qvel += 0.5 * torch.randn(n, env.sim.nv, generator=g, dtype=torch.float64)
    # wild: random pose anywhere, joints beyond the soft limits, fast
    lim = torch.as_tensor(env.sim.robot.joint_limits, dtype=torch.float64)
    for i in WILD:
        qpos[i, 0:3] = torch.tensor([4.0, -3.0, 0.8]) * (2 * torch.rand(3, generator=g, dtype=torch.float64) - 1)
        qpos[i, 3:7] = R.q_normalize(torch.randn(4, generator=g, dtype=torch.float64))
        u = torch.rand(nj, generator=g, dtype=torch.float64)
        mid, half = lim.mean(1), 0.5 * (lim[:, 1] - lim[:, 0])
        qpos[i, 7:] = mid + 1.3 * half * (2 * u - 1)
        qvel[i] = 2.0 * torch.randn(env.sim.nv, generator=g, dtype=torch.float64)
    env.sim.qpos.copy_(qpos.float())
    env.sim.qvel.copy_(qvel.float())
    env.sim.kinematics()
    env.sim.unstable.zero_()
    env.sim.unstable[UNSTABLE] = 1

    # termination roles by editing the reference the kernels read (only the relevant quantity changes)
    _, ee = _ids(env)
    a = env.anchor_id - 1
    env.ref.body_pos_w[ANCHOR_H, 0, a, 2] += 0.5
    env.ref.body_pos_w[FAIL_AND_END, 0, a, 2] -= 0.6
    tilt = R.q_mul(R.f64(env.ref.body_quat_w[ANCHOR_ORI, 0, a]), _axis_quat([0.0, 1.0, 0.0], 1.9))
    env.ref.body_quat_w[ANCHOR_ORI, 0, a] = tilt.float()
    env.ref.body_pos_w[EE_H, 0, ee[1] - 1, 2] -= 0.5
    env.times[CLIP_END] = lengths[CLIP_END] + 0.013
    env.times[CLIP_EXACT] = lengths[CLIP_EXACT]
    env.times[FAIL_AND_END] = lengths[FAIL_AND_END] + 0.5
    env.episode_length.copy_(torch.randint(0, env.max_episode_steps - 1, (n,), generator=g, dtype=torch.int32))
    env.episode_length[TIMEOUT] = env.max_episode_steps
    env.episode_length[ALMOST_TIMEOUT] = env.max_episode_steps - 1

    env.actions.copy_(torch.randn(n, nj, generator=g))
    env.prev_actions.copy_(torch.randn(n, nj, generator=g))
    env.undesired_contacts.copy_(torch.randint(0, 5, (n,), generator=g).float())
    env.sim.self_contacts.copy_(torch.randint(0, 3, (n,), generator=g).float())


def _assert_close(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    got = R.f64(got)
    err = (got - want).abs()
    bad = err > ATOL * want.abs().clamp(min=1.0)  # absolute 1e-5, relative for magnitudes above 1
    if bad.any():
        idx = bad.nonzero()[:10].tolist()
        detail = [(tuple(i), float(want[tuple(i)]), float(got[tuple(i)])) for i in idx]
        pytest.fail(f"{what}: {int(bad.sum())} mismatches, max err {float(err.max()):.3g}; (index, want, got): "
                    f"{detail}")


def _check_observations(env) -> None:
    env._compute_observations()
    tracked, _ = _ids(env)
    parts = R.tracking_obs(R.robot_state(env), R.ref_state(env), env.actions, env.default_joint_pos,
                           tracked, env.root_id, env.anchor_id, env.joint_qpos_start, env.joint_dof_start,
                           env.cfg.privileged_critic)
    want = R.assemble_obs(parts, env.cfg.future_steps, env.cfg.privileged_critic, env.cfg.observations)
    want[env.sim.unstable.cpu() != 0] = 0.0  # an unstable world's row is zero (its state may be NaN; issue 13)
    assert want.shape == env.obs_full.shape == (N, env.full_dim)
    slices = env.obs_slices
    for name, sl in slices.items():
        _assert_close(env.obs_full[:, sl], want[:, sl], f"obs[{name}]")
    _assert_close(env.obs_full, want, "obs")
    assert torch.isfinite(env.obs_full).all()


@pytest.mark.parametrize("seed", [0, 1])
def test_observations_match_reference(env, seed):
    randomize(env, seed)
    _check_observations(env)


@pytest.fixture(scope="module")
def deploy_env(sim_cfg):
    """The deploy observation set with noise on the actor's view, per-env calibration offsets and CoM shifts."""
    cfg = replace(HumanoidImitationEnvCfg(), observations="deploy", obs_noise=True,
                  randomization=DeployRandomizationCfg(joint_pos_offset=[-0.2, 0.2]))
    e = HumanoidImitationEnv(cfg, num_envs=N, device="cpu", seed=0, sim_cfg=sim_cfg)
    e.reset()
    return e


def test_deploy_observations_and_noise_match_reference(deploy_env):
    """The deploy rows equal the oracle's (with each env's offset default pose); the actor's noisy view stays
    within clean ± the spec's scale per column, exact where the scale is 0, zero for an unstable world; the
    critic's row (``critic_obs``) is the clean one."""
    env = deploy_env
    assert (env.default_joint_pos - _const(env, "default_joint_pos")).abs().max() > 0.05  # offsets drawn
    randomize(env, 4)
    _check_observations(env)
    actor, critic = env._obs["obs"], env._obs["critic_obs"]
    assert critic.data_ptr() == env.obs_full.data_ptr() and actor.data_ptr() != env.obs_full.data_ptr()
    scales = _const(env, "obs_noise")
    lo, hi = R.observation_noise_bounds(env.obs_full[:, :env.actor_dim], scales, env.sim.unstable)
    got = R.f64(actor)
    assert ((got >= lo - 1e-6) & (got <= hi + 1e-6)).all()
    noisy = scales > 0
    stable = env.sim.unstable.cpu() == 0
    assert torch.equal(actor[stable][:, ~noisy], env.obs_full[stable][:, :env.actor_dim][:, ~noisy])
    diff = (got - R.f64(env.obs_full[:, :env.actor_dim]))[stable][:, noisy]
    assert (diff.abs() > 0).float().mean() > 0.99  # every noisy column moved
    # uniform: the noise fills its range (|noise| / scale spread over [0, 1))
    ratio = (diff.abs() / R.f64(scales[noisy])).flatten()
    assert ratio.max() < 1.0 + 1e-5 and ratio.max() > 0.95 and 0.4 < ratio.mean() < 0.6


def test_obs_slices_cover_the_row(env):
    slices = list(env.obs_slices.items())
    col = 0
    for _, sl in slices:
        assert sl.start == col and sl.stop > sl.start
        col = sl.stop
    assert col == env.full_dim
    assert sum(sl.stop - sl.start for _, sl in slices) == env.full_dim
    last_actor = [sl for name, sl in slices if name.startswith(f"future{env.cfg.future_steps[-1]}_")][-1]
    assert last_actor.stop == env.actor_dim
    assert env.get_observations()["obs"].shape == (N, env.actor_dim)


@pytest.mark.parametrize("seed", [0, 1])
def test_rewards_and_dones_match_reference(env, seed, monkeypatch):
    randomize(env, seed)
    # the random contact counts stay: the sim counts contacts when it steps (checked separately below)
    sums_before = env.episode_sums.clone()
    env._compute_rewards_and_dones()
    tracked, ee = _ids(env)
    rs, ref = R.robot_state(env), R.ref_state(env)
    sigmas = {k: float(getattr(env.cfg.sigmas, k)) for k in TRACKING_NAMES}
    weights = {k: float(getattr(env.cfg.rewards, k)) for k in REWARD_TERMS}
    by_name, total = R.tracking_rewards(rs, ref, env.actions, env.prev_actions, env.undesired_contacts,
                                        env.sim.self_contacts, tracked, env.sim.robot.feet_body_ids.tolist(),
                                        env.anchor_id, env.joint_qpos_start,
                                        _const(env, "soft_lo"),
                                        _const(env, "soft_hi"), sigmas, weights)
    terms = torch.stack([by_name[k] for k in REWARD_TERMS], dim=1)  # spec order
    unstable = env.sim.unstable.cpu() != 0  # zero terms and reward, sums unchanged (NaN-safe; issue 13)
    terms[unstable], total[unstable] = 0.0, 0.0
    assert env.reward_terms.shape == (N, len(REWARD_TERMS))
    for i, name in enumerate(REWARD_TERMS):
        _assert_close(env.reward_terms[:, i], terms[:, i], f"reward term {name}")
    _assert_close(env.reward, total, "reward total")
    weighted = torch.cat([terms * R.f64(_const(env, "weights")), total[:, None]], dim=1)
    _assert_close(env.episode_sums - sums_before, weighted, "episode_sums increment")
    # the logged tracking errors (m / rad); the unstable world's are zero (its state may be non-finite)
    errors = R.tracking_errors(rs, ref, tracked, env.anchor_id, env.joint_qpos_start)
    for i, name in enumerate(ERROR_NAMES):
        want = errors[name].clone()
        want[UNSTABLE] = 0.0
        _assert_close(env.errors[:, i], want, f"error {name}")
    # the random states exercise every term (not all saturated at 0 / 1)
    for i in range(len(REWARD_TERMS)):
        assert terms[:, i].std() > 1e-3, REWARD_TERMS[i]

    tcfg = env.cfg.terminations
    errs = R.termination_errors(rs, ref, ee, env.anchor_id)
    # no quantity sits within float32 noise of its threshold (the flags are then well defined)
    for key, thr in (("anchor_height", tcfg.anchor_height), ("anchor_ori", tcfg.anchor_ori),
                     ("ee_height", tcfg.ee_height)):
        assert ((errs[key] - thr).abs() > 1e-4).all(), key
    terminated, truncated = R.terminations(errs, env.sim.unstable, env.motion_ids, env.times, env.motion_lengths,
                                           env.episode_length, tcfg, env.max_episode_steps)
    assert torch.equal(env.terminated.cpu(), terminated), (env.terminated, terminated)
    assert torch.equal(env.truncated.cpu(), truncated), (env.truncated, truncated)

    # the end cause is the first condition that fired
    clip_end = env.times.cpu() >= env.motion_lengths.cpu()[env.motion_ids.cpu().long()]
    timeout = env.episode_length.cpu() >= env.max_episode_steps
    causes = R.end_causes(errs, env.sim.unstable, clip_end, timeout, tcfg)
    want_codes = [0 if c is None else CAUSE_CODE[c] for c in causes]
    assert env.term_cause.cpu().tolist() == want_codes, (env.term_cause, causes)
    # every cause that holds is flagged, whether or not it ends the episode
    want_bits = R.fail_bits(errs, env.sim.unstable, clip_end, timeout, tcfg)
    assert env.fail_bits.cpu().tolist() == want_bits
    assert len({b for b in want_bits if b & (b - 1)}) > 0  # some envs hold several causes at once

    # each role triggers what it was built for, and only that
    only = {
        ANCHOR_H: errs["anchor_height"] > tcfg.anchor_height,
        ANCHOR_ORI: errs["anchor_ori"] > tcfg.anchor_ori,
        EE_H: (errs["ee_height"] > tcfg.ee_height).any(-1),
    }
    for role, fired in only.items():
        assert fired[role], role
        assert sum(bool(f[role]) for f in only.values()) == 1, role
    expect_term = {NOMINAL: False, ANCHOR_H: True, ANCHOR_ORI: True, EE_H: True, UNSTABLE: True, CLIP_END: False,
                   CLIP_EXACT: False, TIMEOUT: False, ALMOST_TIMEOUT: False, FAIL_AND_END: True}
    expect_trunc = {NOMINAL: False, CLIP_END: True, CLIP_EXACT: True, TIMEOUT: True, ALMOST_TIMEOUT: False,
                    FAIL_AND_END: False, UNSTABLE: False}
    for i, v in expect_term.items():
        assert bool(env.terminated[i]) == v, i
    for i, v in expect_trunc.items():
        assert bool(env.truncated[i]) == v, i
    # only the causes in terminations.end_causes end an episode (the evaluation env's setting); the flags stay
    ending = ("unstable", "timeout")
    monkeypatch.setattr(env.params, "ending_causes", cause_mask(ending))
    compute_terminations(env.sim.state, env.ref_wp, env.params, env.buf)
    assert env.fail_bits.cpu().tolist() == want_bits
    causes = R.end_causes(errs, env.sim.unstable, clip_end, timeout, tcfg, ending)
    assert env.term_cause.cpu().tolist() == [0 if c is None else CAUSE_CODE[c] for c in causes]
    assert env.terminated.cpu().tolist() == [c == "unstable" for c in causes]
    assert env.truncated.cpu().tolist() == [c == "timeout" for c in causes]
    assert "unstable" in causes and None in causes

    # the global drift (off by default) ends an episode where the mean distance of all bodies exceeds its threshold
    sorted_drift = errs["body_pos"].sort().values
    drift_cfg = replace(tcfg, body_pos=float(sorted_drift[N // 2 - 1:N // 2 + 1].mean()))  # between two envs
    assert ((errs["body_pos"] - drift_cfg.body_pos).abs() > 1e-4).all()
    monkeypatch.setattr(env.params, "body_pos", drift_cfg.body_pos)
    monkeypatch.setattr(env.params, "ending_causes", cause_mask(END_CAUSES))
    compute_terminations(env.sim.state, env.ref_wp, env.params, env.buf)
    drift = errs["body_pos"] > drift_cfg.body_pos
    assert 0 < int(drift.sum()) < N
    assert env.fail_bits.cpu().tolist() == R.fail_bits(errs, env.sim.unstable, clip_end, timeout, drift_cfg)
    causes = R.end_causes(errs, env.sim.unstable, clip_end, timeout, drift_cfg)
    assert env.term_cause.cpu().tolist() == [0 if c is None else CAUSE_CODE[c] for c in causes]
    assert "body_pos" in causes

    # the termination curriculum's factor widens the three distance thresholds, not the orientation's
    scale = next(k for k in (1.5, 1.45, 1.55, 1.4) if all(
        ((errs[key] - k * getattr(drift_cfg, key)).abs() > 1e-4).all()
        for key in ("anchor_height", "ee_height", "body_pos")))
    wide_cfg = replace(drift_cfg, anchor_height=scale * drift_cfg.anchor_height,
                       ee_height=scale * drift_cfg.ee_height, body_pos=scale * drift_cfg.body_pos)
    env.termination_scale.fill_(scale)
    try:
        compute_terminations(env.sim.state, env.ref_wp, env.params, env.buf)
    finally:
        env.termination_scale.fill_(1.0)
    wide_bits = R.fail_bits(errs, env.sim.unstable, clip_end, timeout, wide_cfg)
    assert env.fail_bits.cpu().tolist() == wide_bits
    assert wide_bits != R.fail_bits(errs, env.sim.unstable, clip_end, timeout, drift_cfg)  # some flags cleared
    assert bool(env.terminated[ANCHOR_ORI])  # a fall is not widened


def test_joint_limit_penalty_band_takes_in_the_reference(env):
    """``env.joint_limit_reference``: a reference past the soft joint limits widens the penalty's band to its own
    angle (following it costs nothing, going past it still does); off, the band is the soft limits alone."""
    randomize(env, 0)
    soft_lo, soft_hi = R.f64(_const(env, "soft_lo")), R.f64(_const(env, "soft_hi"))
    wild = WILD[0]
    q = R.f64(env.sim.qpos[wild, env.joint_qpos_start:env.joint_qpos_start + env.num_actions])
    # the reference half-way from the soft limit to the robot's angle where the robot is past it, at the robot's
    # angle on one joint, and inside the limits elsewhere
    past_hi, past_lo = q > soft_hi, q < soft_lo
    ref_q = 0.5 * (soft_lo + soft_hi)
    ref_q = torch.where(past_hi, 0.5 * (soft_hi + q), torch.where(past_lo, 0.5 * (soft_lo + q), ref_q))
    assert past_hi.any() and past_lo.any()
    first = int(torch.nonzero(past_hi)[0])
    ref_q[first] = q[first]
    env.ref.dof_pos[wild, 0] = ref_q.float()
    tracked, _ = _ids(env)
    sigmas = {k: float(getattr(env.cfg.sigmas, k)) for k in TRACKING_NAMES}
    weights = {k: float(getattr(env.cfg.rewards, k)) for k in REWARD_TERMS}
    column = list(REWARD_TERMS).index("joint_limit")
    penalties = {}
    try:
        for flag in (False, True):
            env.params.joint_limit_ref = int(flag)
            env._compute_rewards_and_dones()
            by_name, _ = R.tracking_rewards(R.robot_state(env), R.ref_state(env), env.actions, env.prev_actions,
                                            env.undesired_contacts, env.sim.self_contacts, tracked,
                                            env.sim.robot.feet_body_ids.tolist(), env.anchor_id,
                                            env.joint_qpos_start, soft_lo, soft_hi, sigmas, weights,
                                            joint_limit_reference=flag)
            _assert_close(env.reward_terms[:, column], by_name["joint_limit"], f"joint_limit, reference {flag}")
            penalties[flag] = env.reward_terms[wild, column].double()
    finally:
        env.params.joint_limit_ref = int(env.cfg.joint_limit_reference)
    beyond = ((q - soft_hi).clamp(min=0) + (soft_lo - q).clamp(min=0))
    beyond[first] = 0.0
    torch.testing.assert_close(penalties[True], 0.5 * beyond.sum(), rtol=1e-5, atol=1e-5)
    assert penalties[True] < penalties[False]


def test_reference_state_reset_partial_mask(env):
    randomize(env, 3)
    env._query_reference()  # undo the termination roles' edits of the reference bodies
    env.ref.root_quat[2, 0] *= 1.7  # not unit: the kernel normalises
    env.ref.root_quat[5, 0] *= 0.4
    mask = torch.tensor([i % 3 != 1 for i in range(N)])
    before = {k: getattr(env.sim, k).clone() for k in ("qpos", "qvel")}
    acts, prev = env.actions.clone(), env.prev_actions.clone()
    qpos_t, qvel_t = R.reference_state(R.ref_state(env), env.joint_qpos_start, env.joint_dof_start, env.sim.nq,
                                       env.sim.nv)
    env.reset_mask.copy_(mask)
    env._write_reference_into_sim()
    _assert_close(env.sim.qpos[mask], qpos_t[mask], "reset qpos")
    _assert_close(env.sim.qvel[mask], qvel_t[mask], "reset qvel")
    assert torch.equal(env.sim.qpos[~mask], before["qpos"][~mask])
    assert torch.equal(env.sim.qvel[~mask], before["qvel"][~mask])
    assert (env.actions[mask] == 0).all() and (env.prev_actions[mask] == 0).all()
    assert torch.equal(env.actions[~mask], acts[~mask]) and torch.equal(env.prev_actions[~mask], prev[~mask])
    # the robot now stands where the motion says (bodies from MJWarp kinematics vs the motion's bodies)
    tracked, _ = _ids(env)
    pos_err = (env.sim.xpos[mask][:, tracked] - env.ref.body_pos_w[mask][:, 0, [t - 1 for t in tracked]]).norm(dim=-1)
    assert pos_err.max() < 1e-3, pos_err.max()


def _servo_gains(env) -> tuple[torch.Tensor, torch.Tensor]:
    """(kp, kd) ``[A]`` float64 of the MuJoCo model's position actuators."""
    return tuple(torch.from_numpy(g) for g in servo_gains(env.sim.mj_model, env.sim.robot.actuator_ids))


# None: the shipped default (the reference one control step ahead fed forward, no velocity); lead:
# env.action_reference_lead; vel_weight: env.action_reference_velocity
@pytest.mark.parametrize("ref_weight, lead, vel_weight", [(None, None, None), (0.0, None, 0.0), (0.5, None, 0.0),
                                                          (1.0, 4, 0.0), (1.0, None, 1.0), (0.5, 4, 0.5)])
def test_apply_actions(env, ref_weight, lead, vel_weight):
    g = torch.Generator().manual_seed(5)
    clip = env.cfg.action_clip
    shipped = env.params.action_ref_weight, env.params.action_ref_frame, env.params.action_ref_vel_weight
    w = shipped[0] if ref_weight is None else ref_weight
    wv = shipped[2] if vel_weight is None else vel_weight
    assert ref_weight is not None or (w == 1.0 and env.cfg.action_reference_lead == 1 and wv == 0.0)
    first = 8.0 * torch.randn(N, env.num_actions, generator=g)  # plenty beyond +-clip
    second = 8.0 * torch.randn(N, env.num_actions, generator=g)
    assert (first.abs() > clip).any() and (first.abs() < clip).any()
    # shipped: the target is for the end of the step, the reference frame one control step ahead (future_steps[0])
    frame = 1 + list(env.cfg.future_steps).index(lead or 1)
    ref_q, ref_v = env.ref.dof_pos[:, frame], env.ref.dof_vel[:, frame]
    assert not torch.allclose(ref_q, env.ref.dof_pos[:, 0]) and ref_v.abs().max() > 0.1
    kp, kd = _servo_gains(env)
    try:
        env.params.action_ref_weight, env.params.action_ref_frame, env.params.action_ref_vel_weight = w, frame, wv
        for raw, prev_clipped in ((first, None), (second, first.clamp(-clip, clip))):
            old_actions = env.actions.clone()
            env.policy_actions.copy_(raw)
            apply_actions(env.params, env.ref_wp, env.buf, env.sim.state)
            ctrl, clipped = R.apply_actions(raw, env.default_joint_pos, _const(env, "action_scale"), clip,
                                            ref_q, w, _const(env, "default_joint_pos"), ref_v, wv, kp, kd)
            _assert_close(env.sim.ctrl, ctrl, "ctrl")
            assert torch.equal(env.actions, clipped.float())
            assert torch.equal(env.prev_actions, old_actions)
            if prev_clipped is not None:
                assert torch.equal(env.prev_actions, prev_clipped)
    finally:
        env.params.action_ref_weight, env.params.action_ref_frame, env.params.action_ref_vel_weight = shipped


def test_reference_velocity_makes_the_servo_damp_towards_it(env):
    """With ``action_reference_velocity=1`` MuJoCo's own position servo, driven by the kernel's target, exerts
    kp (q_ref + scale a - q) + kd (v_ref - qdot): a PD whose velocity target is the reference's joint velocity
    (what a deployment sends as the servo's ``dq``), where without it the servo damps towards rest."""
    m, ids = env.sim.mj_model, env.sim.robot.actuator_ids
    kp, kd = _servo_gains(env)
    g = torch.Generator().manual_seed(9)
    actions = 0.3 * torch.randn(N, env.num_actions, generator=g)
    frame = 1 + list(env.cfg.future_steps).index(env.cfg.action_reference_lead)
    ref_q, ref_v = env.ref.dof_pos[:, frame].double(), env.ref.dof_vel[:, frame].double()
    shipped = env.params.action_ref_vel_weight
    try:
        env.params.action_ref_vel_weight = 1.0
        env.policy_actions.copy_(actions)
        apply_actions(env.params, env.ref_wp, env.buf, env.sim.state)
    finally:
        env.params.action_ref_vel_weight = shipped
    d = mujoco.MjData(m)
    dof = np.asarray(m.jnt_dofadr[m.actuator_trnid[ids, 0]])
    qadr = np.asarray(m.jnt_qposadr[m.actuator_trnid[ids, 0]])
    scale, nominal = _const(env, "action_scale").double(), _const(env, "default_joint_pos").double()
    target = env.default_joint_pos.double() + ref_q - nominal + scale * actions.double()  # without the velocity
    for i in range(N):
        d.qpos[:] = m.qpos0
        d.qpos[qadr] = ref_q[i].numpy() + 0.05 * torch.randn(env.num_actions, generator=g, dtype=torch.float64).numpy()
        d.qvel[:] = 0.0
        d.qvel[dof] = ref_v[i].numpy() + 0.5 * torch.randn(env.num_actions, generator=g, dtype=torch.float64).numpy()
        d.ctrl[:] = env.sim.ctrl[i].double().numpy()
        mujoco.mj_forward(m, d)
        q, qd = torch.from_numpy(d.qpos[qadr].copy()), torch.from_numpy(d.qvel[dof].copy())
        want = kp * (target[i] - q) + kd * (ref_v[i] - qd)
        lim = torch.from_numpy(np.abs(m.actuator_forcerange[ids, 1]).copy())
        want = torch.maximum(torch.minimum(want, lim), -lim)
        got = torch.from_numpy(d.actuator_force[ids].copy())
        torch.testing.assert_close(got, want, atol=1e-3, rtol=1e-5)  # N m; the target is float32


def _geom_bottoms(m: mujoco.MjModel, d: mujoco.MjData, geoms: np.ndarray) -> np.ndarray:
    """Lowest z of each sphere / each end sphere of each capsule (what plane contacts are made of)."""
    out = []
    for gid in geoms:
        r = m.geom_size[gid, 0]
        if m.geom_type[gid] == mujoco.mjtGeom.mjGEOM_SPHERE:
            out.append(d.geom_xpos[gid, 2] - r)
        else:
            assert m.geom_type[gid] == mujoco.mjtGeom.mjGEOM_CAPSULE
            ax = d.geom_xmat[gid].reshape(3, 3)[:, 2] * m.geom_size[gid, 1]
            out += [d.geom_xpos[gid, 2] + ax[2] - r, d.geom_xpos[gid, 2] - ax[2] - r]
    return np.array(out)


def test_undesired_contacts_match_mujoco(env):
    """Robot lying on the floor in several poses (penalised bodies penetrate), standing slightly sunk
    (feet only: not penalised), and in the air; count vs MuJoCo C contacts on the same float32 state."""
    m = env.sim.mj_model
    d = mujoco.MjData(m)
    robot_geoms = np.nonzero((m.geom_bodyid > 0) & ((m.geom_contype != 0) | (m.geom_conaffinity != 0)))[0]
    penalized = env._penalized_geoms()
    home = env.sim.home_qpos.copy()
    poses = [  # (root rotation axis, angle, sink depth below the lowest geom or None = in the air)
        ([0, 1, 0], np.pi / 2, 0.03), ([0, 1, 0], -np.pi / 2, 0.03), ([1, 0, 0], np.pi / 2, 0.025),
        ([1, 1, 0], 2.2, 0.04), ([0, 0, 1], 0.0, 0.02), ([0, 0, 1], 0.0, None),
    ]
    qpos_all = np.tile(home, (N, 1))
    for i in range(N):
        axis, angle, sink = poses[i % len(poses)]
        q = home.copy()
        q[3:7] = _axis_quat(axis, angle).numpy()
        q[7:] += 0.2 * np.sin(np.arange(len(q) - 7) + i)  # a different posture per world
        q[2] = 2.0
        d.qpos[:] = q
        mujoco.mj_kinematics(m, d)
        bottoms = _geom_bottoms(m, d, robot_geoms)
        if sink is not None:
            # sink the lowest geom a little deeper until nothing lies within 3 mm of the floor (so the
            # contact sets are the same in float32 and float64)
            sink = next(s for s in sink + 0.004 * np.arange(20) if (np.abs(bottoms - bottoms.min() - s) > 3e-3).all())
            q[2] -= bottoms.min() + sink
        d.qpos[:] = q
        mujoco.mj_kinematics(m, d)
        assert (np.abs(_geom_bottoms(m, d, robot_geoms)) > 3e-3).all(), i
        qpos_all[i] = q
    env.sim.qpos.copy_(torch.tensor(qpos_all, dtype=torch.float32))
    env.sim.qvel.zero_()
    env.sim.forward()
    env._compute_rewards_and_dones()
    got = env.undesired_contacts.cpu().numpy()

    want = np.zeros(N)
    num_contacts = np.zeros(N, dtype=int)
    for i in range(N):
        mujoco.mj_resetData(m, d)
        d.qpos[:] = env.sim.qpos[i].double().cpu().numpy()
        mujoco.mj_forward(m, d)
        for k in range(d.ncon):
            con = d.contact[k]
            if con.efc_address < 0:
                continue
            num_contacts[i] += 1
            want[i] += float(penalized[con.geom[0]] or penalized[con.geom[1]])
    assert (want > 0).sum() >= 4 and (num_contacts[want == 0] > 0).any()  # both kinds of worlds present
    np.testing.assert_array_equal(got, want)


# ------------------------------------------------------------------ adaptive sampler
def _sampler(**kw) -> AdaptiveSampler:
    cfg = AdaptiveSamplingCfg(bin_size_s=1.0, ema_alpha=0.25, uniform_ratio=0.2, smoothing_kernel_size=2,
                              smoothing_lambda=0.5, motion_floor=0.0)  # BeyondMimic's rule alone
    init = kw.pop("init_start_prob", 0.0)
    for k, v in kw.items():
        setattr(cfg, k, v)
    return AdaptiveSampler([2.5, 1.0, 3.0], torch.tensor([1.0, 2.0, 1.0]), cfg, init, "cpu")


def test_sampler_bins_and_ema():
    s = _sampler()
    assert s.num_bins == 3 + 1 + 3
    ids = torch.tensor([0, 0, 0, 0, 1, 1, 2, 2, 2], dtype=torch.int32)
    times = torch.tensor([0.0, 0.99, 1.0, 2.5, 0.0, 1.0, -0.1, 2.2, 3.0])
    assert s.bins_of(ids, times).tolist() == [0, 0, 1, 2, 3, 3, 4, 6, 6]
    # uniform: motion weight spread over its bins, normalised (weights 1, 2, 1 -> 1/3 per bin, 2, 1/3 per bin)
    uni = torch.tensor([1 / 3, 1 / 3, 1 / 3, 2.0, 1 / 3, 1 / 3, 1 / 3]) / 4.0
    torch.testing.assert_close(s.uniform_probs, uni)
    torch.testing.assert_close(s.probabilities(), uni)  # no failures yet: uniform only
    # two steps of terminations, EMA by hand (alpha 0.25)
    s.update(torch.tensor([0, 0, 2], dtype=torch.int32), torch.tensor([1.5, 1.2, 2.9]),
             torch.tensor([True, True, False]))
    ema = torch.zeros(7)
    ema[1] = 0.25 * 2
    torch.testing.assert_close(s.ema(), ema)
    s.update(torch.tensor([2, 1], dtype=torch.int32), torch.tensor([0.5, 0.3]), torch.tensor([True, True]))
    ema = 0.75 * ema
    ema[4] += 0.25
    ema[3] += 0.25
    torch.testing.assert_close(s.ema(), ema)
    # smoothing (kernel 2, lambda 0.5 -> weights 2/3, 1/3): a bin gets 1/3 of the next bin's failures of the
    # same motion; a motion's last bin repeats itself (bins 2, 3 and 6), never the next motion's first bin
    # ema = [0, .375, 0, .25, .25, 0, 0]
    smoothed = torch.tensor([0.375 / 3, 0.375 * 2 / 3, 0.0, 0.25, 0.25 * 2 / 3, 0.0, 0.0])
    want = smoothed + 0.2 * uni  # absolute uniform floor
    torch.testing.assert_close(s.probabilities(), want / want.sum())
    assert abs(float(s.probabilities().sum()) - 1.0) < 1e-6
    m = s.metrics()
    p = want / want.sum()
    torch.testing.assert_close(m["sampler/top_bin_prob"], p.max())
    torch.testing.assert_close(m["sampler/entropy"], -(p * p.log()).sum() / np.log(7))
    # disabled: no EMA, uniform
    d = _sampler(enabled=False)
    d.update(ids, times, torch.ones(9, dtype=torch.bool))
    assert float(d.failure_ema.abs().sum()) == 0.0
    torch.testing.assert_close(d.probabilities(), uni)


def test_sampler_follows_how_rare_failures_are():
    """Rare failures barely move the distribution off uniform; frequent ones dominate it."""
    s = _sampler(smoothing_kernel_size=1)
    uni = s.uniform_probs
    s.failure_ema[5] = 1e-4
    assert (s.probabilities() - uni).abs().max() < 1e-3
    s.failure_ema[5] = 10.0
    assert float(s.probabilities()[5]) > 0.95
    assert float(s.metrics()["sampler/entropy"]) < 0.2


def test_sampler_sample_mask_and_init_start():
    torch.manual_seed(0)
    s = _sampler()
    n = 4000
    mask = torch.arange(n) % 2 == 0
    ids = torch.full((n,), 7, dtype=torch.int32)
    times = torch.full((n,), -1.0)
    s.sample(mask, ids, times)
    assert (ids[~mask] == 7).all() and (times[~mask] == -1.0).all()
    lengths = torch.tensor([2.5, 1.0, 3.0])
    mi = ids[mask].long()
    assert ((mi >= 0) & (mi < 3)).all()
    t = times[mask]
    assert (t >= 0).all() and (t < lengths[mi]).all()  # strictly inside the clip: no one-step episodes
    # frequencies follow the uniform bin distribution: motion 1 (weight 2, one bin) gets half
    frac = torch.bincount(mi, minlength=3).float() / mi.numel()
    torch.testing.assert_close(frac, torch.tensor([0.25, 0.5, 0.25]), atol=0.04, rtol=0)
    # failures concentrated in one bin: most samples land there (and 1/3 of them credit the bin before)
    s.failure_ema[5] = 1.0  # motion 2, bin [1, 2) s
    s.refresh()
    s.sample(torch.ones(n, dtype=torch.bool), ids, times)
    b = s.bins_of(ids, times)
    p = s.probabilities()
    for k in (4, 5):
        assert abs(float((b == k).float().mean()) - float(p[k])) < 0.04
    # the last, partial bin of motion 0 ([2, 2.5) s) draws inside [2, 2.5)
    s.failure_ema.zero_()
    s.failure_ema[2] = 100.0
    s.refresh()
    s.sample(torch.ones(n, dtype=torch.bool), ids, times)
    in_bin2 = s.bins_of(ids, times) == 2
    assert abs(float(in_bin2.float().mean()) - 0.75) < 0.04  # 1/4 is credited to bin 1 by the smoothing
    assert (times[in_bin2] >= 2.0).all() and (times[in_bin2] < 2.5).all()
    # init_start_prob = 1: every masked env starts at t = 0
    s1 = _sampler(init_start_prob=1.0)
    times.fill_(-1.0)
    s1.sample(mask, ids, times)
    assert (times[mask] == 0.0).all() and (times[~mask] == -1.0).all()


def test_large_sets_keep_the_same_ema_lazily_and_draw_from_the_refreshed_distribution():
    exact, lazy = _sampler(ema_alpha=0.5), _sampler(ema_alpha=0.5, large_bins=0, refresh_every=4)
    assert lazy.amortized and not exact.amortized
    gen = torch.Generator().manual_seed(1)
    ref = torch.zeros(7, dtype=torch.float64)
    for _ in range(150):  # (1 - 0.5)^t passes 1e-20 at t = 67: the scale is folded in on the way
        ids = torch.randint(0, 3, (9,), generator=gen, dtype=torch.int32)
        times = torch.rand(9, generator=gen) * 3.0
        term = torch.rand(9, generator=gen) < 0.3
        for s in (exact, lazy):
            s.update(ids, times, term)
        f = torch.zeros(7, dtype=torch.float64).index_add_(0, exact.bins_of(ids, times), term.double())
        ref = 0.5 * ref + 0.5 * f
    torch.testing.assert_close(lazy.ema().double(), ref, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(lazy.state_dict()["failure_ema"], exact.state_dict()["failure_ema"], rtol=1e-5,
                               atol=1e-7)
    torch.testing.assert_close(lazy.probabilities(), exact.probabilities(), rtol=1e-5, atol=1e-7)
    none = torch.zeros(1, dtype=torch.bool)
    for _ in range(2):  # updates 151, 152: the lazy sampler refreshes at every 4th
        for s in (exact, lazy):
            s.update(torch.zeros(1, dtype=torch.int32), torch.zeros(1), none)

    def drawn(s):  # the distribution the draws use: the last refreshed CDF
        return torch.diff(s.cdf, prepend=torch.zeros(1, dtype=torch.float64)) / s.cdf[-1]

    torch.testing.assert_close(drawn(lazy), lazy.probabilities().double(), rtol=1e-5, atol=1e-7)
    n = 20000
    ids, times = torch.zeros(n, dtype=torch.int32), torch.zeros(n)
    lazy.sample(torch.ones(n, dtype=torch.bool), ids, times)
    freq = torch.bincount(lazy.bins_of(ids, times), minlength=7).double() / n
    torch.testing.assert_close(freq, lazy.probabilities().double(), atol=0.015, rtol=0)
    # the distribution is refreshed every refresh_every updates, not at every step
    stale = drawn(lazy).clone()
    one = (torch.tensor([1], dtype=torch.int32), torch.tensor([0.5]), torch.tensor([True]))
    for k in range(4):
        lazy.update(*one)
        exact.update(*one)
        if k < 3:
            torch.testing.assert_close(drawn(lazy), stale)
            torch.testing.assert_close(drawn(exact), exact.probabilities().double(), rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(drawn(lazy), lazy.probabilities().double(), rtol=1e-5, atol=1e-7)
    assert not torch.allclose(drawn(lazy), stale)
