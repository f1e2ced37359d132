"""Observation kernels of the humanoid-imitation env: one thread per env writes one row.

An observation term is one writer function here (listed by name in :data:`ONCE_WRITERS` or
:data:`FUTURE_WRITERS`) and one declaration (an ``ObsTerm`` with its width and noise) in an observation set of
:mod:`simppo.kernels.imitation.spec`. ``compute_observations`` calls every writer (unrolled when the kernel is
compiled) at the column the env's layout gives its term (``p.obs_col`` / ``p.future_col``; -1: not in this
observation set), so one kernel serves every observation set. Vectors are in the robot root's heading (yaw)
frame except the three ``_b`` entries (full root-body frame) and the deploy set's reference-only terms (``ref_*``: the
reference's own heading frames). Rotations are 6D: the first two columns of the rotation matrix,
row-major. ``add_observation_noise`` then writes the actor's noisy view (``env.obs_noise``).
"""

import warp as wp

from simppo.kernels.imitation.buffers import ImitationBuffers, ImitationParams, RefState
from simppo.kernels.imitation.common import GRAVITY_DIR_W, write_rot6d, write_vec3
from simppo.kernels.imitation.spec import FUTURE_TERM_NAMES, ONCE_TERM_NAMES
from simppo.kernels.quat import heading_quat, quat_conj, quat_mul, quat_rotate_inv
from simppo.kernels.types import SimState


@wp.func
def _heading(sim: SimState, p: ImitationParams, env: int) -> wp.vec4:
    """The robot root's heading (yaw) rotation."""
    return heading_quat(sim.xquat[env, p.root_id])


# ----------------------------------------------------------------------------- once-per-row terms
# A writer writes its term's columns of ``buf.obs`` from column ``col`` (widths: the spec's declarations).
@wp.func
def gravity_b(sim: SimState, ref: RefState, p: ImitationParams, buf: ImitationBuffers, env: int, col: int):
    write_vec3(buf.obs, env, col, quat_rotate_inv(sim.xquat[env, p.root_id], GRAVITY_DIR_W))


@wp.func
def root_lin_vel_b(sim: SimState, ref: RefState, p: ImitationParams, buf: ImitationBuffers, env: int, col: int):
    write_vec3(buf.obs, env, col, quat_rotate_inv(sim.xquat[env, p.root_id], sim.body_lin_vel_w[env, p.root_id]))


@wp.func
def root_ang_vel_b(sim: SimState, ref: RefState, p: ImitationParams, buf: ImitationBuffers, env: int, col: int):
    write_vec3(buf.obs, env, col, quat_rotate_inv(sim.xquat[env, p.root_id], sim.body_ang_vel_w[env, p.root_id]))


@wp.func
def joint_pos_rel(sim: SimState, ref: RefState, p: ImitationParams, buf: ImitationBuffers, env: int, col: int):
    for j in range(buf.actions.shape[1]):
        buf.obs[env, col + j] = sim.qpos[env, p.joint_qpos_start + j] - buf.default_joint_pos[env, j]


@wp.func
def joint_vel(sim: SimState, ref: RefState, p: ImitationParams, buf: ImitationBuffers, env: int, col: int):
    for j in range(buf.actions.shape[1]):
        buf.obs[env, col + j] = sim.qvel[env, p.joint_dof_start + j]


@wp.func
def last_action(sim: SimState, ref: RefState, p: ImitationParams, buf: ImitationBuffers, env: int, col: int):
    for j in range(buf.actions.shape[1]):
        buf.obs[env, col + j] = buf.actions[env, j]


@wp.func
def body_pos(sim: SimState, ref: RefState, p: ImitationParams, buf: ImitationBuffers, env: int, col: int):
    h = _heading(sim, p, env)
    root_pos = sim.xpos[env, p.root_id]
    c = col
    for k in range(p.tracked_ids.shape[0]):
        c = write_vec3(buf.obs, env, c, quat_rotate_inv(h, sim.xpos[env, p.tracked_ids[k]] - root_pos))


@wp.func
def body_rot6d(sim: SimState, ref: RefState, p: ImitationParams, buf: ImitationBuffers, env: int, col: int):
    h_inv = quat_conj(_heading(sim, p, env))
    c = col
    for k in range(p.tracked_ids.shape[0]):
        c = write_rot6d(buf.obs, env, c, quat_mul(h_inv, sim.xquat[env, p.tracked_ids[k]]))


@wp.func
def ref_anchor_lin_vel(sim: SimState, ref: RefState, p: ImitationParams, buf: ImitationBuffers, env: int, col: int):
    write_vec3(buf.obs, env, col, quat_rotate_inv(_heading(sim, p, env), ref.body_lin_vel_w[env, 0, p.anchor_id - 1]))


@wp.func
def ref_anchor_ang_vel(sim: SimState, ref: RefState, p: ImitationParams, buf: ImitationBuffers, env: int, col: int):
    write_vec3(buf.obs, env, col, quat_rotate_inv(_heading(sim, p, env), ref.body_ang_vel_w[env, 0, p.anchor_id - 1]))


@wp.func
def ref_joint_vel(sim: SimState, ref: RefState, p: ImitationParams, buf: ImitationBuffers, env: int, col: int):
    for j in range(buf.actions.shape[1]):
        buf.obs[env, col + j] = ref.dof_vel[env, 0, j]


@wp.func
def _write_tracked_velocities(vel: wp.array2d(dtype=wp.vec3), sim: SimState, p: ImitationParams,
                              buf: ImitationBuffers, env: int, col: int):
    """Each tracked body's ``vel`` (linear or angular, world frame) in the root's heading frame, from ``col``."""
    h = _heading(sim, p, env)
    c = col
    for k in range(p.tracked_ids.shape[0]):
        c = write_vec3(buf.obs, env, c, quat_rotate_inv(h, vel[env, p.tracked_ids[k]]))


@wp.func
def body_lin_vel(sim: SimState, ref: RefState, p: ImitationParams, buf: ImitationBuffers, env: int, col: int):
    _write_tracked_velocities(sim.body_lin_vel_w, sim, p, buf, env, col)


@wp.func
def body_ang_vel(sim: SimState, ref: RefState, p: ImitationParams, buf: ImitationBuffers, env: int, col: int):
    _write_tracked_velocities(sim.body_ang_vel_w, sim, p, buf, env, col)


# ----------------------------------------------------------------------------- per-future-frame terms
# A writer writes its term for reference slot ``f`` (a future frame) from column ``col``.
@wp.func
def future_anchor_pos(sim: SimState, ref: RefState, p: ImitationParams, buf: ImitationBuffers, env: int, f: int,
                      col: int):
    a = p.anchor_id
    to_ref = ref.body_pos_w[env, f, a - 1] - sim.xpos[env, a]
    write_vec3(buf.obs, env, col, quat_rotate_inv(_heading(sim, p, env), to_ref))


@wp.func
def future_anchor_rot6d(sim: SimState, ref: RefState, p: ImitationParams, buf: ImitationBuffers, env: int, f: int,
                        col: int):
    a = p.anchor_id
    write_rot6d(buf.obs, env, col, quat_mul(quat_conj(sim.xquat[env, a]), ref.body_quat_w[env, f, a - 1]))


@wp.func
def future_body_pos(sim: SimState, ref: RefState, p: ImitationParams, buf: ImitationBuffers, env: int, f: int,
                    col: int):
    h = _heading(sim, p, env)
    anchor_pos = sim.xpos[env, p.anchor_id]
    c = col
    for k in range(p.tracked_ids.shape[0]):
        c = write_vec3(buf.obs, env, c, quat_rotate_inv(h, ref.body_pos_w[env, f, p.tracked_ids[k] - 1] - anchor_pos))


@wp.func
def future_body_rot6d(sim: SimState, ref: RefState, p: ImitationParams, buf: ImitationBuffers, env: int, f: int,
                      col: int):
    h_inv = quat_conj(_heading(sim, p, env))
    c = col
    for k in range(p.tracked_ids.shape[0]):
        c = write_rot6d(buf.obs, env, c, quat_mul(h_inv, ref.body_quat_w[env, f, p.tracked_ids[k] - 1]))


@wp.func
def future_ref_anchor_pos(sim: SimState, ref: RefState, p: ImitationParams, buf: ImitationBuffers, env: int, f: int,
                          col: int):
    a = p.anchor_id
    ref0_heading = heading_quat(ref.body_quat_w[env, 0, a - 1])
    displacement = ref.body_pos_w[env, f, a - 1] - ref.body_pos_w[env, 0, a - 1]
    write_vec3(buf.obs, env, col, quat_rotate_inv(ref0_heading, displacement))


@wp.func
def future_ref_joint_pos(sim: SimState, ref: RefState, p: ImitationParams, buf: ImitationBuffers, env: int, f: int,
                         col: int):
    for j in range(buf.actions.shape[1]):
        buf.obs[env, col + j] = ref.dof_pos[env, f, j]


@wp.func
def future_ref_body_pos(sim: SimState, ref: RefState, p: ImitationParams, buf: ImitationBuffers, env: int, f: int,
                        col: int):
    a = p.anchor_id
    ref_anchor_pos = ref.body_pos_w[env, f, a - 1]
    ref_heading = heading_quat(ref.body_quat_w[env, f, a - 1])
    c = col
    for k in range(p.tracked_ids.shape[0]):
        c = write_vec3(buf.obs, env, c,
                       quat_rotate_inv(ref_heading, ref.body_pos_w[env, f, p.tracked_ids[k] - 1] - ref_anchor_pos))


#: The writer of each declared term, by name (once per row; per future frame).
ONCE_WRITERS = {f.key: f for f in (gravity_b, root_lin_vel_b, root_ang_vel_b, joint_pos_rel, joint_vel, last_action,
                                   body_pos, body_rot6d, ref_anchor_lin_vel, ref_anchor_ang_vel, ref_joint_vel,
                                   body_lin_vel, body_ang_vel)}
FUTURE_WRITERS = {f.key.removeprefix("future_"): f for f in (
    future_anchor_pos, future_anchor_rot6d, future_body_pos, future_body_rot6d, future_ref_anchor_pos,
    future_ref_joint_pos, future_ref_body_pos)}
for _kind, _names, _writers in (("once-per-row", ONCE_TERM_NAMES, ONCE_WRITERS),
                                ("future", FUTURE_TERM_NAMES, FUTURE_WRITERS)):
    if set(_names) != set(_writers):
        raise ImportError(f"{_kind} observation terms {sorted(set(_names) ^ set(_writers))} need both a "
                          "declaration in a set of spec.OBS_SETS and a writer in simppo.kernels.imitation.observations")
_ONCE = [ONCE_WRITERS[n] for n in ONCE_TERM_NAMES]
_FUTURE = [FUTURE_WRITERS[n] for n in FUTURE_TERM_NAMES]


@wp.kernel
def _observations(sim: SimState, ref: RefState, p: ImitationParams, mask: wp.array(dtype=wp.bool),
                  buf: ImitationBuffers):
    """Robot state by MuJoCo body id; reference slot 0 = now, slots 1.. = future frames. The row of an unstable
    world (``sim.unstable``) is zero (its state may be non-finite).

    # Data in: sim (poses, velocities, qpos, qvel, unstable), ref (every slot), buf.actions, buf.default_joint_pos,
    #   p.obs_col / p.future_col (each term's start column; -1: not in this set), ids
    # Data out: the rows of buf.obs [N, D] where mask [N] is set
    """
    env = wp.tid()
    if not mask[env]:
        return
    if sim.unstable[env] != 0:
        for c in range(buf.obs.shape[1]):
            buf.obs[env, c] = 0.0
        return
    for i in range(wp.static(len(_ONCE))):
        c = p.obs_col[i]
        if c >= 0:
            wp.static(_ONCE[i])(sim, ref, p, buf, env, c)
    for f in range(1, ref.body_pos_w.shape[1]):
        for i in range(wp.static(len(_FUTURE))):
            c = p.future_col[f - 1, i]
            if c >= 0:
                wp.static(_FUTURE[i])(sim, ref, p, buf, env, f, c)


@wp.kernel
def _observation_noise(sim: SimState, p: ImitationParams, mask: wp.array(dtype=wp.bool), buf: ImitationBuffers):
    """Rows of ``buf.obs_actor [N, actor_dim]`` where ``mask [N]``: the clean actor columns of ``buf.obs`` plus
    uniform noise in ``[-p.obs_noise[c], p.obs_noise[c]]`` per column, from the env's own random state
    ``buf.noise_rng [N]`` (advanced). An unstable world's row stays zero. The history columns are left as they
    are: they hold the noisy readings of earlier steps (:mod:`simppo.kernels.imitation.history`)."""
    env = wp.tid()
    if not mask[env]:
        return
    clean = sim.unstable[env] == 0
    state = buf.noise_rng[env]
    history_lo, history_hi = p.history_block, p.history_block * (p.history_copies + 1)
    for c in range(buf.obs_actor.shape[1]):
        if c >= history_lo and c < history_hi and clean:
            continue
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
