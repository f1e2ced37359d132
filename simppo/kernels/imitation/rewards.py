"""Tracking reward of the humanoid-imitation env (BeyondMimic-style exp(-err/σ²) terms + penalties).

A reward term is one Warp function here, ``term(sim, ref, p, buf, env) -> float`` returning its raw value
(tracking terms: the squared error; penalties: the value), listed by name in :data:`TERM_FUNCTIONS`, and one
declaration in :data:`simppo.kernels.imitation.spec.REWARD_TERMS` (kind, weight, σ). The kernel calls the
functions in spec order (unrolled when the kernel is compiled), then one loop turns the raw values into terms,
the weighted total and the episode sums.
"""

import warp as wp

from simppo.kernels.imitation.buffers import ImitationBuffers, ImitationParams, RefState
from simppo.kernels.imitation.common import relative_body_pos, sigma_row, yaw_delta
from simppo.kernels.imitation.spec import ERROR_INDEX, REWARD_TERMS
from simppo.kernels.quat import quat_error_angle, quat_mul
from simppo.kernels.types import SimState

ERR_ANCHOR_POS = wp.constant(ERROR_INDEX["anchor_pos"])
ERR_ANCHOR_ORI = wp.constant(ERROR_INDEX["anchor_ori"])
ERR_BODY_POS = wp.constant(ERROR_INDEX["body_pos"])
ERR_BODY_ORI = wp.constant(ERROR_INDEX["body_ori"])
ERR_JOINT_POS = wp.constant(ERROR_INDEX["joint_pos"])


@wp.func
def _anchor_delta(sim: SimState, ref: RefState, p: ImitationParams, env: int) -> wp.vec4:
    """Heading rotation from the reference anchor's onto the robot anchor's (computed once per term, not per body)."""
    a = p.anchor_id
    return yaw_delta(sim.xquat[env, a], ref.body_quat_w[env, 0, a - 1])


@wp.func
def _target_pos(sim: SimState, ref: RefState, p: ImitationParams, env: int, delta: wp.vec4, bid: int) -> wp.vec3:
    """Reference body ``bid`` moved onto the robot's anchor (x, y) and heading (``delta``: :func:`_anchor_delta`)."""
    a = p.anchor_id
    return relative_body_pos(sim.xpos[env, a], ref.body_pos_w[env, 0, a - 1], delta, ref.body_pos_w[env, 0, bid - 1])


@wp.func
def _mean_velocity_error(ref_vel: wp.array3d(dtype=wp.vec3), vel: wp.array2d(dtype=wp.vec3), p: ImitationParams,
                         env: int) -> float:
    """Mean over tracked bodies of ``|ref_vel - vel|²`` (reference slot 0; linear or angular velocities)."""
    e = float(0.0)
    nt = p.tracked_ids.shape[0]
    for k in range(nt):
        bid = p.tracked_ids[k]
        e += wp.length_sq(ref_vel[env, 0, bid - 1] - vel[env, bid])
    return e * (1.0 / float(nt))


# ----------------------------------------------------------------------------- the terms (raw values)
@wp.func
def anchor_pos(sim: SimState, ref: RefState, p: ImitationParams, buf: ImitationBuffers, env: int) -> float:
    a = p.anchor_id
    return wp.length_sq(ref.body_pos_w[env, 0, a - 1] - sim.xpos[env, a])


@wp.func
def anchor_ori(sim: SimState, ref: RefState, p: ImitationParams, buf: ImitationBuffers, env: int) -> float:
    a = p.anchor_id
    ang = quat_error_angle(ref.body_quat_w[env, 0, a - 1], sim.xquat[env, a])
    return ang * ang


@wp.func
def _mean_position_error(sim: SimState, ref: RefState, p: ImitationParams, env: int,
                         ids: wp.array(dtype=wp.int32)) -> float:
    """Mean over bodies ``ids`` of ``|target - robot|²``, the reference aligned as in :func:`_target_pos`
    (0 for an empty set)."""
    n = ids.shape[0]
    if n == 0:
        return 0.0
    delta = _anchor_delta(sim, ref, p, env)
    e = float(0.0)
    for k in range(n):
        bid = ids[k]
        d = wp.length(_target_pos(sim, ref, p, env, delta, bid) - sim.xpos[env, bid])
        e += d * d
    return e * (1.0 / float(n))


@wp.func
def body_pos(sim: SimState, ref: RefState, p: ImitationParams, buf: ImitationBuffers, env: int) -> float:
    return _mean_position_error(sim, ref, p, env, p.tracked_ids)


@wp.func
def feet_pos(sim: SimState, ref: RefState, p: ImitationParams, buf: ImitationBuffers, env: int) -> float:
    return _mean_position_error(sim, ref, p, env, p.feet_ids)


@wp.func
def body_ori(sim: SimState, ref: RefState, p: ImitationParams, buf: ImitationBuffers, env: int) -> float:
    delta = _anchor_delta(sim, ref, p, env)
    e = float(0.0)
    nt = p.tracked_ids.shape[0]
    for k in range(nt):
        bid = p.tracked_ids[k]
        d = quat_error_angle(quat_mul(delta, ref.body_quat_w[env, 0, bid - 1]), sim.xquat[env, bid])
        e += d * d
    return e * (1.0 / float(nt))


@wp.func
def body_lin_vel(sim: SimState, ref: RefState, p: ImitationParams, buf: ImitationBuffers, env: int) -> float:
    return _mean_velocity_error(ref.body_lin_vel_w, sim.body_lin_vel_w, p, env)


@wp.func
def body_ang_vel(sim: SimState, ref: RefState, p: ImitationParams, buf: ImitationBuffers, env: int) -> float:
    return _mean_velocity_error(ref.body_ang_vel_w, sim.body_ang_vel_w, p, env)


@wp.func
def action_rate(sim: SimState, ref: RefState, p: ImitationParams, buf: ImitationBuffers, env: int) -> float:
    s = float(0.0)
    for j in range(buf.actions.shape[1]):
        d = buf.actions[env, j] - buf.prev_actions[env, j]
        s += d * d
    return s


@wp.func
def joint_limit(sim: SimState, ref: RefState, p: ImitationParams, buf: ImitationBuffers, env: int) -> float:
    s = float(0.0)
    for j in range(buf.actions.shape[1]):
        q = sim.qpos[env, p.joint_qpos_start + j]
        lo = float(p.soft_joint_lo[j])
        hi = float(p.soft_joint_hi[j])
        if p.joint_limit_ref != 0:  # the band takes in the reference's own angle: following it is not penalized
            a = ref.dof_pos[env, 0, j]
            lo = wp.min(lo, a)
            hi = wp.max(hi, a)
        s += wp.max(q - hi, 0.0) + wp.max(lo - q, 0.0)
    return s


@wp.func
def undesired_contacts(sim: SimState, ref: RefState, p: ImitationParams, buf: ImitationBuffers, env: int) -> float:
    return sim.penalized_contacts[env]


@wp.func
def self_collisions(sim: SimState, ref: RefState, p: ImitationParams, buf: ImitationBuffers, env: int) -> float:
    return sim.self_contacts[env]


#: The Warp function of each declared term, by name (the kernel calls them in ``spec.REWARD_TERMS`` order).
TERM_FUNCTIONS = {f.key: f for f in (anchor_pos, anchor_ori, body_pos, body_ori, feet_pos, body_lin_vel,
                                     body_ang_vel, action_rate, joint_limit, undesired_contacts, self_collisions)}
@wp.func
def _write_errors(sim: SimState, ref: RefState, p: ImitationParams, buf: ImitationBuffers, env: int):
    """The logged tracking errors (m / rad): anchor distance and angle, mean tracked-body distance and angle
    (aligned as in the reward), mean absolute joint-position error."""
    a = p.anchor_id
    delta = _anchor_delta(sim, ref, p, env)
    nt = p.tracked_ids.shape[0]
    d_pos = float(0.0)
    d_ori = float(0.0)
    for k in range(nt):
        bid = p.tracked_ids[k]
        d_pos += wp.length(_target_pos(sim, ref, p, env, delta, bid) - sim.xpos[env, bid])
        d_ori += quat_error_angle(quat_mul(delta, ref.body_quat_w[env, 0, bid - 1]), sim.xquat[env, bid])
    nj = buf.actions.shape[1]
    d_joint = float(0.0)
    for j in range(nj):
        d_joint += wp.abs(sim.qpos[env, p.joint_qpos_start + j] - ref.dof_pos[env, 0, j])
    inv_nt = 1.0 / float(nt)
    buf.errors[env, ERR_ANCHOR_POS] = wp.length(ref.body_pos_w[env, 0, a - 1] - sim.xpos[env, a])
    buf.errors[env, ERR_ANCHOR_ORI] = quat_error_angle(ref.body_quat_w[env, 0, a - 1], sim.xquat[env, a])
    buf.errors[env, ERR_BODY_POS] = d_pos * inv_nt
    buf.errors[env, ERR_BODY_ORI] = d_ori * inv_nt
    buf.errors[env, ERR_JOINT_POS] = d_joint / float(nj)


def reward_kernel(terms=REWARD_TERMS, functions: dict | None = None):
    """The reward kernel for the declared ``terms`` (``spec.REWARD_TERMS``), each computed by its function in
    ``functions`` (:data:`TERM_FUNCTIONS`). A term without a function, or a function without a declaration, is an
    error naming it."""
    functions = TERM_FUNCTIONS if functions is None else functions
    unmatched = sorted(set(functions) ^ {t.name for t in terms})
    if unmatched:
        raise ValueError(f"reward terms {unmatched} need both a declaration in spec.REWARD_TERMS and a function in "
                         "simppo.kernels.imitation.rewards.TERM_FUNCTIONS")
    raw_values = [functions[t.name] for t in terms]

    @wp.kernel(module="unique")
    def rewards(sim: SimState, ref: RefState, p: ImitationParams, buf: ImitationBuffers):
        """Robot state (by MuJoCo body id) against reference slot 0, bodies aligned to the robot's anchor (x, y)
        and heading. An unstable world (``sim.unstable``) gets zero raw values, terms, errors and reward and leaves
        its sums unchanged (no NaN leaks).

        # Data in: sim.xpos, sim.xquat, sim.body_lin_vel_w, sim.body_ang_vel_w, sim.qpos, sim.penalized_contacts,
        #   sim.self_contacts, sim.unstable; ref (slot 0); buf.actions, buf.prev_actions, buf.motion_ids (the row
        #   of per-motion σ); p (tracked and feet ids, soft joint limits, weights, sigmas, term kinds)
        # Data out: buf.reward_raw, buf.reward_terms [N, T], buf.reward [N], buf.episode_sums [N, T + 1] (added
        #   to; last column: total), buf.errors [N, E]
        """
        env = wp.tid()
        if sim.unstable[env] != 0:
            for i in range(wp.static(len(raw_values))):
                buf.reward_raw[env, i] = 0.0
                buf.reward_terms[env, i] = 0.0
            for i in range(buf.errors.shape[1]):
                buf.errors[env, i] = 0.0
            buf.reward[env] = 0.0
            return
        _write_errors(sim, ref, p, buf, env)
        for i in range(wp.static(len(raw_values))):
            buf.reward_raw[env, i] = wp.static(raw_values[i])(sim, ref, p, buf, env)
        total = float(0.0)
        row = sigma_row(p.sigmas, buf.motion_ids, env)  # one row for all envs, or one per motion
        for i in range(wp.static(len(raw_values))):
            term = buf.reward_raw[env, i]
            if p.term_kind[i] != 0:
                s = p.sigmas[row, i]
                term = wp.exp(-term / (s * s))
            buf.reward_terms[env, i] = term
            total += p.weights[i] * term
            buf.episode_sums[env, i] += p.weights[i] * term
        buf.reward[env] = total
        buf.episode_sums[env, wp.static(len(raw_values))] += total

    return rewards


_rewards = reward_kernel()


def compute_rewards(sim: SimState, ref: RefState, p: ImitationParams, buf: ImitationBuffers) -> None:
    """Reward terms, total, episode sums and logged errors of every env (see ``_rewards``)."""
    wp.launch(_rewards, dim=buf.reward.shape[0], inputs=[sim, ref, p, buf], device=buf.reward.device)
