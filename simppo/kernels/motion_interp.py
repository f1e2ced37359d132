"""Reference-motion interpolation: every MotionState field, current + future times, one launch.

Frame data are the MotionLib's concatenated per-frame arrays (T = total frames of all motions).
For env ``i`` and slot ``f`` (0 = current time, ``f >= 1`` = ``times[i] + future_offsets[f - 1]``)::

    t     = clamp(time, 0, length[m])             m = motion_ids[i]
    phase = t / dt[m];  i0 = clamp(floor(phase), 0, n[m] - 1);  i1 = min(i0 + 1, n[m] - 1)
    w     = clamp(phase - i0, 0, 1)
    pos/vel/dof  = (1 - w) * x[start + i0] + w * x[start + i1]
    quaternions  = quat_slerp(q[start + i0], q[start + i1], w)   (short arc, wxyz)
    contacts     = c[start + i0] if w < 0.5 else c[start + i1]   (nearest frame, 0/1 float)

The launch is 3-D ``(N, F, W)``, ``W = max(B, D, C, 1)``: thread ``(i, f, j)`` writes body ``j``,
dof ``j`` and contact ``j`` (when in range) and, for ``j == 0``, the root.
"""

import torch
import warp as wp

from simppo.kernels.quat import quat_normalize, quat_slerp


@wp.func
def _frame_pair(
    motion_ids: wp.array(dtype=wp.int32),
    times: wp.array(dtype=wp.float32),
    future_offsets: wp.array(dtype=wp.float32),
    motion_start: wp.array(dtype=wp.int32),
    motion_num_frames: wp.array(dtype=wp.int32),
    motion_dt: wp.array(dtype=wp.float32),
    motion_length: wp.array(dtype=wp.float32),
    i: int,
    f: int,
):
    m = motion_ids[i]
    t = times[i]
    if f > 0:
        t = t + future_offsets[f - 1]
    t = wp.clamp(t, 0.0, motion_length[m])
    n = motion_num_frames[m]
    phase = t / motion_dt[m]
    i0 = wp.clamp(int(wp.floor(phase)), 0, n - 1)
    i1 = wp.min(i0 + 1, n - 1)
    w = wp.clamp(phase - float(i0), 0.0, 1.0)
    s = motion_start[m]
    return s + i0, s + i1, w


@wp.kernel
def motion_interp_kernel(
    motion_ids: wp.array(dtype=wp.int32),
    times: wp.array(dtype=wp.float32),
    future_offsets: wp.array(dtype=wp.float32),
    motion_start: wp.array(dtype=wp.int32),
    motion_num_frames: wp.array(dtype=wp.int32),
    motion_dt: wp.array(dtype=wp.float32),
    motion_length: wp.array(dtype=wp.float32),
    env_mask: wp.array(dtype=wp.bool),
    use_mask: int,
    root_pos: wp.array(dtype=wp.vec3),
    root_quat: wp.array(dtype=wp.vec4),
    root_lin_vel: wp.array(dtype=wp.vec3),
    root_ang_vel: wp.array(dtype=wp.vec3),
    dof_pos: wp.array2d(dtype=wp.float32),
    dof_vel: wp.array2d(dtype=wp.float32),
    body_pos: wp.array2d(dtype=wp.vec3),
    body_quat: wp.array2d(dtype=wp.vec4),
    body_lin_vel: wp.array2d(dtype=wp.vec3),
    body_ang_vel: wp.array2d(dtype=wp.vec3),
    contacts: wp.array2d(dtype=wp.uint8),
    num_bodies: int,
    num_dofs: int,
    num_contacts: int,
    root_pos_out: wp.array2d(dtype=wp.vec3),
    root_quat_out: wp.array2d(dtype=wp.vec4),
    root_lin_vel_out: wp.array2d(dtype=wp.vec3),
    root_ang_vel_out: wp.array2d(dtype=wp.vec3),
    dof_pos_out: wp.array3d(dtype=wp.float32),
    dof_vel_out: wp.array3d(dtype=wp.float32),
    body_pos_out: wp.array3d(dtype=wp.vec3),
    body_quat_out: wp.array3d(dtype=wp.vec4),
    body_lin_vel_out: wp.array3d(dtype=wp.vec3),
    body_ang_vel_out: wp.array3d(dtype=wp.vec3),
    contacts_out: wp.array3d(dtype=wp.float32),
):
    i, f, j = wp.tid()
    if use_mask != 0 and not env_mask[i]:
        return
    a, b, w = _frame_pair(
        motion_ids, times, future_offsets, motion_start, motion_num_frames, motion_dt, motion_length, i, f
    )
    u = 1.0 - w
    if j == 0:
        root_pos_out[i, f] = u * root_pos[a] + w * root_pos[b]
        root_quat_out[i, f] = quat_normalize(quat_slerp(root_quat[a], root_quat[b], w))
        root_lin_vel_out[i, f] = u * root_lin_vel[a] + w * root_lin_vel[b]
        root_ang_vel_out[i, f] = u * root_ang_vel[a] + w * root_ang_vel[b]
    if j < num_bodies:
        body_pos_out[i, f, j] = u * body_pos[a, j] + w * body_pos[b, j]
        body_quat_out[i, f, j] = quat_normalize(quat_slerp(body_quat[a, j], body_quat[b, j], w))
        body_lin_vel_out[i, f, j] = u * body_lin_vel[a, j] + w * body_lin_vel[b, j]
        body_ang_vel_out[i, f, j] = u * body_ang_vel[a, j] + w * body_ang_vel[b, j]
    if j < num_dofs:
        dof_pos_out[i, f, j] = u * dof_pos[a, j] + w * dof_pos[b, j]
        dof_vel_out[i, f, j] = u * dof_vel[a, j] + w * dof_vel[b, j]
    if j < num_contacts:
        c = contacts[a, j]
        if w >= 0.5:
            c = contacts[b, j]
        contacts_out[i, f, j] = float(c)


def launch_motion_interp(
    motion_ids: wp.array,
    times: wp.array,
    future_offsets: wp.array,
    motion_start: wp.array,
    motion_num_frames: wp.array,
    motion_dt: wp.array,
    motion_length: wp.array,
    frames: dict[str, wp.array],
    out: dict[str, wp.array],
    num_envs: int,
    num_slots: int,
    num_bodies: int,
    num_dofs: int,
    num_contacts: int,
    device: str,
    env_mask: wp.array | None = None,
) -> None:
    """Launch :func:`motion_interp_kernel` once over ``(N, F, max(B, D, C, 1))``.

    Shapes: ``motion_ids`` int32 [N], ``times`` float32 [N] seconds, ``future_offsets`` float32 [max(K, 1)]
    seconds (F = K + 1), per-motion ``motion_*`` [M]. ``frames``: ``root_pos`` vec3 [T], ``root_quat``
    vec4 [T], ``root_lin_vel_w``/``root_ang_vel_w`` vec3 [T], ``dof_pos``/``dof_vel`` float32 [T, D],
    ``body_pos_w``/``body_lin_vel_w``/``body_ang_vel_w`` vec3 [T, B], ``body_quat_w`` vec4 [T, B],
    ``contacts`` uint8 [T, max(C, 1)]. ``out``: the same names with ``[N, F]`` prepended to the
    trailing shape (``contacts`` float32 [N, F, max(C, 1)]). ``env_mask`` (bool [N], optional): only
    those envs' rows are written; the others keep their values.
    """
    width = max(num_bodies, num_dofs, num_contacts, 1)
    use_mask = env_mask is not None
    if env_mask is None:
        env_mask = wp.zeros(1, dtype=wp.bool, device=device)
    wp.launch(
        motion_interp_kernel,
        dim=(num_envs, num_slots, width),
        inputs=[
            motion_ids,
            times,
            future_offsets,
            motion_start,
            motion_num_frames,
            motion_dt,
            motion_length,
            env_mask,
            int(use_mask),
            frames["root_pos"],
            frames["root_quat"],
            frames["root_lin_vel_w"],
            frames["root_ang_vel_w"],
            frames["dof_pos"],
            frames["dof_vel"],
            frames["body_pos_w"],
            frames["body_quat_w"],
            frames["body_lin_vel_w"],
            frames["body_ang_vel_w"],
            frames["contacts"],
            num_bodies,
            num_dofs,
            num_contacts,
        ],
        outputs=[
            out["root_pos"],
            out["root_quat"],
            out["root_lin_vel_w"],
            out["root_ang_vel_w"],
            out["dof_pos"],
            out["dof_vel"],
            out["body_pos_w"],
            out["body_quat_w"],
            out["body_lin_vel_w"],
            out["body_ang_vel_w"],
            out["contacts"],
        ],
        device=device,
    )


_VEC_DTYPES = {3: wp.vec3, 4: wp.vec4}


def torch_to_warp(t: torch.Tensor, vec_last: bool = False) -> wp.array:
    """Zero-copy Warp view of a contiguous tensor; ``vec_last`` maps a trailing dim of 3/4 to vec3/vec4."""
    if vec_last:
        return wp.from_torch(t, dtype=_VEC_DTYPES[t.shape[-1]])
    return wp.from_torch(t)
