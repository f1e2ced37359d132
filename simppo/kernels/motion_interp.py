"""Reference-motion interpolation: every MotionState field, current + future times, one launch.

Frame data are the MotionLib's concatenated per-frame arrays (T = total frames of all motions).
For env ``i`` and slot ``f`` (0 = current time, ``f >= 1`` = ``times[i] + future_offsets[f - 1]``)::

    t     = clamp(time, 0, length[m])             m = motion_ids[i]
    phase = t / dt[m];  i0 = clamp(floor(phase), 0, n[m] - 1);  i1 = min(i0 + 1, n[m] - 1)
    w     = clamp(phase - i0, 0, 1)
    pos/vel/dof  = (1 - w) * x[start + i0] + w * x[start + i1]
    quaternions  = quat_slerp(q[start + i0], q[start + i1], w)   (short arc, wxyz)
    contacts     = c[start + i0] if w < 0.5 else c[start + i1]   (nearest frame, 0/1 float)

Typed buffers: :class:`MotionFrames` (the library), :class:`MotionQuery` (ids, times, offsets,
mask) and :class:`MotionStateWp` (the output). Item ``j`` is body ``j``, dof ``j`` and contact ``j`` (when
in range) and, for ``j == 0``, the root; :func:`interpolate` launches one thread per item on CUDA and one per
``(env, slot)`` on the CPU.
"""

import warp as wp

from simppo.kernels.quat import quat_normalize, quat_slerp


@wp.struct
class MotionFrames:
    """The library: per-frame arrays of all motions concatenated (``T`` frames) and per-motion ``[M]``
    metadata (``start`` frame, ``num_frames``, ``dt`` = 1/fps, ``length`` seconds). Frame fields:
    ``root_*`` [T], ``dof_*`` [T, D], ``body_*`` [T, B], ``contacts`` uint8 [T, max(C, 1)]."""

    start: wp.array(dtype=wp.int32)
    num_frames: wp.array(dtype=wp.int32)
    dt: wp.array(dtype=wp.float32)
    length: wp.array(dtype=wp.float32)
    root_pos: wp.array(dtype=wp.vec3)
    root_quat: wp.array(dtype=wp.vec4)
    root_lin_vel_w: wp.array(dtype=wp.vec3)
    root_ang_vel_w: wp.array(dtype=wp.vec3)
    dof_pos: wp.array2d(dtype=wp.float32)
    dof_vel: wp.array2d(dtype=wp.float32)
    body_pos_w: wp.array2d(dtype=wp.vec3)
    body_quat_w: wp.array2d(dtype=wp.vec4)
    body_lin_vel_w: wp.array2d(dtype=wp.vec3)
    body_ang_vel_w: wp.array2d(dtype=wp.vec3)
    contacts: wp.array2d(dtype=wp.uint8)
    num_bodies: int
    num_dofs: int
    num_contacts: int


@wp.struct
class MotionQuery:
    """``motion_ids`` int32 [N], ``times`` float32 [N] seconds, ``future_offsets`` float32 [max(K, 1)]
    seconds, ``env_mask`` bool [N] (read only when ``use_mask`` != 0)."""

    motion_ids: wp.array(dtype=wp.int32)
    times: wp.array(dtype=wp.float32)
    future_offsets: wp.array(dtype=wp.float32)
    env_mask: wp.array(dtype=wp.bool)
    use_mask: int


@wp.struct
class MotionStateWp:
    """Reference state ``[N, F, ...]`` (slot 0 = now, 1..K = future): ``root_*`` [N, F], ``dof_*``
    [N, F, D], ``body_*`` [N, F, B] (motion body ``b`` = MuJoCo body ``b + 1``), ``contacts``
    float32 [N, F, max(C, 1)]. Quaternions wxyz."""

    root_pos: wp.array2d(dtype=wp.vec3)
    root_quat: wp.array2d(dtype=wp.vec4)
    root_lin_vel_w: wp.array2d(dtype=wp.vec3)
    root_ang_vel_w: wp.array2d(dtype=wp.vec3)
    dof_pos: wp.array3d(dtype=wp.float32)
    dof_vel: wp.array3d(dtype=wp.float32)
    body_pos_w: wp.array3d(dtype=wp.vec3)
    body_quat_w: wp.array3d(dtype=wp.vec4)
    body_lin_vel_w: wp.array3d(dtype=wp.vec3)
    body_ang_vel_w: wp.array3d(dtype=wp.vec3)
    contacts: wp.array3d(dtype=wp.float32)


@wp.func
def _frame_pair(lib: MotionFrames, q: MotionQuery, i: int, f: int):
    m = q.motion_ids[i]
    t = q.times[i]
    if f > 0:
        t = t + q.future_offsets[f - 1]
    t = wp.clamp(t, 0.0, lib.length[m])
    n = lib.num_frames[m]
    phase = t / lib.dt[m]
    i0 = wp.clamp(int(wp.floor(phase)), 0, n - 1)
    i1 = wp.min(i0 + 1, n - 1)
    w = wp.clamp(phase - float(i0), 0.0, 1.0)
    s = lib.start[m]
    return s + i0, s + i1, w


@wp.func
def _interpolate_item(lib: MotionFrames, out: MotionStateWp, i: int, f: int, j: int, a: int, b: int, w: float):
    """Item ``j`` of env ``i``'s slot ``f``: body, dof and contact ``j`` (when in range) and, for ``j == 0``, the
    root, between frames ``a`` and ``b`` at weight ``w``."""
    u = 1.0 - w
    if j == 0:
        out.root_pos[i, f] = u * lib.root_pos[a] + w * lib.root_pos[b]
        out.root_quat[i, f] = quat_normalize(quat_slerp(lib.root_quat[a], lib.root_quat[b], w))
        out.root_lin_vel_w[i, f] = u * lib.root_lin_vel_w[a] + w * lib.root_lin_vel_w[b]
        out.root_ang_vel_w[i, f] = u * lib.root_ang_vel_w[a] + w * lib.root_ang_vel_w[b]
    if j < lib.num_bodies:
        out.body_pos_w[i, f, j] = u * lib.body_pos_w[a, j] + w * lib.body_pos_w[b, j]
        out.body_quat_w[i, f, j] = quat_normalize(quat_slerp(lib.body_quat_w[a, j], lib.body_quat_w[b, j], w))
        out.body_lin_vel_w[i, f, j] = u * lib.body_lin_vel_w[a, j] + w * lib.body_lin_vel_w[b, j]
        out.body_ang_vel_w[i, f, j] = u * lib.body_ang_vel_w[a, j] + w * lib.body_ang_vel_w[b, j]
    if j < lib.num_dofs:
        out.dof_pos[i, f, j] = u * lib.dof_pos[a, j] + w * lib.dof_pos[b, j]
        out.dof_vel[i, f, j] = u * lib.dof_vel[a, j] + w * lib.dof_vel[b, j]
    if j < lib.num_contacts:
        c = lib.contacts[a, j]
        if w >= 0.5:
            c = lib.contacts[b, j]
        out.contacts[i, f, j] = float(c)


@wp.kernel
def _interpolate(lib: MotionFrames, q: MotionQuery, width: int, out: MotionStateWp):
    """One thread per (env, slot, item).

    # Data in: lib (every frame of every motion), q.motion_ids, q.times, q.future_offsets, q.env_mask / use_mask
    # Data out: every field of out at [env, slot] (the envs in q.env_mask when use_mask)
    """
    i, f, j = wp.tid()
    if q.use_mask != 0 and not q.env_mask[i]:
        return
    a, b, w = _frame_pair(lib, q, i, f)
    _interpolate_item(lib, out, i, f, j, a, b, w)


@wp.kernel
def _interpolate_slots(lib: MotionFrames, q: MotionQuery, width: int, out: MotionStateWp):
    """One thread per (env, slot), looping over the items (the CPU layout). Data in / out: as ``_interpolate``."""
    i, f = wp.tid()
    if q.use_mask != 0 and not q.env_mask[i]:
        return
    a, b, w = _frame_pair(lib, q, i, f)
    for j in range(width):
        _interpolate_item(lib, out, i, f, j, a, b, w)


def interpolate(lib: MotionFrames, q: MotionQuery, out: MotionStateWp, per_item: bool | None = None) -> None:
    """Fill ``out`` for every env (or the envs in ``q.env_mask``) and slot.

    ``per_item`` (default: on CUDA): one thread per ``(env, slot, item)``, a launch over ``(N, F, W)`` with
    ``W = max(B, D, C, 1)``; otherwise one thread per ``(env, slot)`` looping over the ``W`` items, the CPU
    layout (Warp's CPU threads run one after another, and each costs ~50 ns before its first instruction:
    over ``(N, F, W)`` that was 40 % of the launch, most of the launch when a mask leaves few envs)."""
    n, f = out.root_pos.shape
    width = max(lib.num_bodies, lib.num_dofs, lib.num_contacts, 1)
    device = out.root_pos.device
    if per_item is None:
        per_item = device.is_cuda
    kernel, dim = (_interpolate, (n, f, width)) if per_item else (_interpolate_slots, (n, f))
    wp.launch(kernel, dim=dim, inputs=[lib, q, width], outputs=[out], device=device)
