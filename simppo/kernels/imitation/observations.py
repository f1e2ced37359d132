"""Observation kernels of the humanoid-imitation env: one thread per env writes one row.

``compute_observations`` writes every term of :mod:`simppo.kernels.imitation.spec` at the column the env's
layout gives it (``p.obs_col`` / ``p.future_col``; -1: the term is not in this observation set), so one
kernel serves every observation set. Vectors are in the robot root's heading (yaw) frame except the three
``_b`` entries (full root-body frame) and the deploy set's reference-only terms (``ref_*``: the
reference's own heading frames). Rotations are 6D: the first two columns of the rotation matrix,
row-major. ``add_observation_noise`` then writes the actor's noisy view (``env.obs_noise``).
"""

import warp as wp

from simppo.kernels.imitation.buffers import ImitationBuffers, ImitationParams, RefState
from simppo.kernels.imitation.common import GRAVITY_DIR_W, write_rot6d, write_vec3
from simppo.kernels.imitation.spec import FUTURE_INDEX, ONCE_INDEX
from simppo.kernels.quat import heading_quat, quat_conj, quat_mul, quat_rotate_inv
from simppo.kernels.types import SimState

GRAVITY_B = wp.constant(ONCE_INDEX["gravity_b"])
ROOT_LIN_VEL_B = wp.constant(ONCE_INDEX["root_lin_vel_b"])
ROOT_ANG_VEL_B = wp.constant(ONCE_INDEX["root_ang_vel_b"])
JOINT_POS_REL = wp.constant(ONCE_INDEX["joint_pos_rel"])
JOINT_VEL = wp.constant(ONCE_INDEX["joint_vel"])
LAST_ACTION = wp.constant(ONCE_INDEX["last_action"])
BODY_POS = wp.constant(ONCE_INDEX["body_pos"])
BODY_ROT6D = wp.constant(ONCE_INDEX["body_rot6d"])
REF_ANCHOR_LIN_VEL = wp.constant(ONCE_INDEX["ref_anchor_lin_vel"])
REF_ANCHOR_ANG_VEL = wp.constant(ONCE_INDEX["ref_anchor_ang_vel"])
REF_JOINT_VEL = wp.constant(ONCE_INDEX["ref_joint_vel"])
BODY_LIN_VEL = wp.constant(ONCE_INDEX["body_lin_vel"])
BODY_ANG_VEL = wp.constant(ONCE_INDEX["body_ang_vel"])
F_ANCHOR_POS = wp.constant(FUTURE_INDEX["anchor_pos"])
F_ANCHOR_ROT6D = wp.constant(FUTURE_INDEX["anchor_rot6d"])
F_BODY_POS = wp.constant(FUTURE_INDEX["body_pos"])
F_BODY_ROT6D = wp.constant(FUTURE_INDEX["body_rot6d"])
F_REF_ANCHOR_POS = wp.constant(FUTURE_INDEX["ref_anchor_pos"])
F_REF_JOINT_POS = wp.constant(FUTURE_INDEX["ref_joint_pos"])
F_REF_BODY_POS = wp.constant(FUTURE_INDEX["ref_body_pos"])


@wp.kernel
def _observations(sim: SimState, ref: RefState, p: ImitationParams, mask: wp.array(dtype=wp.bool),
                  buf: ImitationBuffers):
    """Robot state by MuJoCo body id; reference slot 0 = now, slots 1.. = future frames. Writes the
    rows of ``buf.obs [N, D]`` where ``mask [N]`` is set; the row of an unstable world (``sim.unstable``) is
    zero (its state may be non-finite)."""
    env = wp.tid()
    if not mask[env]:
        return
    obs_out = buf.obs
    if sim.unstable[env] != 0:
        for c in range(obs_out.shape[1]):
            obs_out[env, c] = 0.0
        return
    root_quat = sim.xquat[env, p.root_id]
    root_pos = sim.xpos[env, p.root_id]
    h = heading_quat(root_quat)
    h_inv = quat_conj(h)
    nj = buf.actions.shape[1]
    nt = p.tracked_ids.shape[0]
    col = int(0)
    c = p.obs_col[GRAVITY_B]
    if c >= 0:
        write_vec3(obs_out, env, c, quat_rotate_inv(root_quat, GRAVITY_DIR_W))
    c = p.obs_col[ROOT_LIN_VEL_B]
    if c >= 0:
        write_vec3(obs_out, env, c, quat_rotate_inv(root_quat, sim.body_lin_vel_w[env, p.root_id]))
    c = p.obs_col[ROOT_ANG_VEL_B]
    if c >= 0:
        write_vec3(obs_out, env, c, quat_rotate_inv(root_quat, sim.body_ang_vel_w[env, p.root_id]))
    c = p.obs_col[JOINT_POS_REL]
    if c >= 0:
        for j in range(nj):
            obs_out[env, c + j] = sim.qpos[env, p.joint_qpos_start + j] - buf.default_joint_pos[env, j]
    c = p.obs_col[JOINT_VEL]
    if c >= 0:
        for j in range(nj):
            obs_out[env, c + j] = sim.qvel[env, p.joint_dof_start + j]
    c = p.obs_col[LAST_ACTION]
    if c >= 0:
        for j in range(nj):
            obs_out[env, c + j] = buf.actions[env, j]
    col = p.obs_col[BODY_POS]
    if col >= 0:
        for k in range(nt):
            col = write_vec3(obs_out, env, col, quat_rotate_inv(h, sim.xpos[env, p.tracked_ids[k]] - root_pos))
    col = p.obs_col[BODY_ROT6D]
    if col >= 0:
        for k in range(nt):
            col = write_rot6d(obs_out, env, col, quat_mul(h_inv, sim.xquat[env, p.tracked_ids[k]]))

    a = p.anchor_id
    anchor_pos = sim.xpos[env, a]
    anchor_quat = sim.xquat[env, a]
    ref0_anchor_pos = ref.body_pos_w[env, 0, a - 1]
    ref0_heading = heading_quat(ref.body_quat_w[env, 0, a - 1])
    for f in range(1, ref.body_pos_w.shape[1]):
        ref_anchor_pos = ref.body_pos_w[env, f, a - 1]
        ref_anchor_quat = ref.body_quat_w[env, f, a - 1]
        c = p.future_col[f - 1, F_ANCHOR_POS]
        if c >= 0:
            write_vec3(obs_out, env, c, quat_rotate_inv(h, ref_anchor_pos - anchor_pos))
        c = p.future_col[f - 1, F_ANCHOR_ROT6D]
        if c >= 0:
            write_rot6d(obs_out, env, c, quat_mul(quat_conj(anchor_quat), ref_anchor_quat))
        col = p.future_col[f - 1, F_BODY_POS]
        if col >= 0:
            for k in range(nt):
                rb = p.tracked_ids[k] - 1
                col = write_vec3(obs_out, env, col, quat_rotate_inv(h, ref.body_pos_w[env, f, rb] - anchor_pos))
        col = p.future_col[f - 1, F_BODY_ROT6D]
        if col >= 0:
            for k in range(nt):
                rb = p.tracked_ids[k] - 1
                col = write_rot6d(obs_out, env, col, quat_mul(h_inv, ref.body_quat_w[env, f, rb]))
        c = p.future_col[f - 1, F_REF_ANCHOR_POS]
        if c >= 0:
            write_vec3(obs_out, env, c, quat_rotate_inv(ref0_heading, ref_anchor_pos - ref0_anchor_pos))
        c = p.future_col[f - 1, F_REF_JOINT_POS]
        if c >= 0:
            for j in range(nj):
                obs_out[env, c + j] = ref.dof_pos[env, f, j]
        col = p.future_col[f - 1, F_REF_BODY_POS]
        if col >= 0:
            ref_heading = heading_quat(ref_anchor_quat)
            for k in range(nt):
                rb = p.tracked_ids[k] - 1
                col = write_vec3(obs_out, env, col,
                                 quat_rotate_inv(ref_heading, ref.body_pos_w[env, f, rb] - ref_anchor_pos))

    c = p.obs_col[REF_ANCHOR_LIN_VEL]
    if c >= 0:
        write_vec3(obs_out, env, c, quat_rotate_inv(h, ref.body_lin_vel_w[env, 0, a - 1]))
    c = p.obs_col[REF_ANCHOR_ANG_VEL]
    if c >= 0:
        write_vec3(obs_out, env, c, quat_rotate_inv(h, ref.body_ang_vel_w[env, 0, a - 1]))
    c = p.obs_col[REF_JOINT_VEL]
    if c >= 0:
        for j in range(nj):
            obs_out[env, c + j] = ref.dof_vel[env, 0, j]
    col = p.obs_col[BODY_LIN_VEL]
    if col >= 0:
        for k in range(nt):
            col = write_vec3(obs_out, env, col, quat_rotate_inv(h, sim.body_lin_vel_w[env, p.tracked_ids[k]]))
    col = p.obs_col[BODY_ANG_VEL]
    if col >= 0:
        for k in range(nt):
            col = write_vec3(obs_out, env, col, quat_rotate_inv(h, sim.body_ang_vel_w[env, p.tracked_ids[k]]))


@wp.kernel
def _observation_noise(sim: SimState, p: ImitationParams, mask: wp.array(dtype=wp.bool), buf: ImitationBuffers):
    """Rows of ``buf.obs_actor [N, actor_dim]`` where ``mask [N]``: the clean actor columns of ``buf.obs`` plus
    uniform noise in ``[-p.obs_noise[c], p.obs_noise[c]]`` per column, from the env's own random state
    ``buf.noise_rng [N]`` (advanced). An unstable world's row stays zero."""
    env = wp.tid()
    if not mask[env]:
        return
    clean = sim.unstable[env] == 0
    state = buf.noise_rng[env]
    for c in range(buf.obs_actor.shape[1]):
        v = float(0.0)
        if clean:
            v = buf.obs[env, c]
            s = p.obs_noise[c]
            if s > 0.0:
                v += s * (2.0 * wp.randf(state) - 1.0)
        buf.obs_actor[env, c] = v
    buf.noise_rng[env] = state


def compute_observations(sim: SimState, ref: RefState, p: ImitationParams, mask: wp.array,
                         buf: ImitationBuffers) -> None:
    """Rows of ``buf.obs`` for the envs in ``mask [N]`` (bool)."""
    wp.launch(_observations, dim=buf.obs.shape[0], inputs=[sim, ref, p, mask, buf], device=buf.obs.device)


def add_observation_noise(sim: SimState, p: ImitationParams, mask: wp.array, buf: ImitationBuffers) -> None:
    """Rows of ``buf.obs_actor`` (the actor's noisy view of ``buf.obs``) for the envs in ``mask [N]``."""
    wp.launch(_observation_noise, dim=buf.obs.shape[0], inputs=[sim, p, mask, buf], device=buf.obs.device)
