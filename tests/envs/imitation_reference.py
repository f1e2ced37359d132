"""Plain-torch float64 reference of the humanoid-imitation env math (observations, rewards,
terminations, reference-state reset targets, actions), written from the documented formulas and
independent of the Warp kernels. Everything is vectorised over envs; quaternions are wxyz.

Robot state tensors (``xpos/xquat/lin_vel/ang_vel [N, nbody, ...]``) are indexed by MuJoCo body id;
reference tensors (``[N, F, B, ...]``, slot 0 = now, 1..K = future) by motion body ``id - 1``.
"""

from __future__ import annotations

import torch

F64 = torch.float64


def f64(x: torch.Tensor) -> torch.Tensor:
    """A float64 CPU copy (the reference always works on the exact float32 inputs, widened)."""
    return x.detach().to(device="cpu", dtype=F64).clone()


# ------------------------------------------------------------------ quaternions (wxyz)
def q_mul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    aw, av = a[..., :1], a[..., 1:]
    bw, bv = b[..., :1], b[..., 1:]
    w = aw * bw - (av * bv).sum(-1, keepdim=True)
    v = aw * bv + bw * av + torch.cross(av, bv, dim=-1)
    return torch.cat([w, v], dim=-1)


def q_conj(q: torch.Tensor) -> torch.Tensor:
    return torch.cat([q[..., :1], -q[..., 1:]], dim=-1)


def q_normalize(q: torch.Tensor) -> torch.Tensor:
    return q / q.norm(dim=-1, keepdim=True)


def q_to_mat(q: torch.Tensor) -> torch.Tensor:
    """Rotation matrix ``[..., 3, 3]`` of a unit quaternion."""
    w, x, y, z = q.unbind(-1)
    rows = [
        1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
        2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
        2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
    ]
    return torch.stack(rows, dim=-1).reshape(*q.shape[:-1], 3, 3)


def q_rotate(q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return (q_to_mat(q) @ v.unsqueeze(-1)).squeeze(-1)


def q_rotate_inv(q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return (q_to_mat(q).transpose(-1, -2) @ v.unsqueeze(-1)).squeeze(-1)


def q_heading(q: torch.Tensor) -> torch.Tensor:
    """Yaw-only quaternion (about world z) with yaw = atan2(2(wz+xy), 1-2(y²+z²))."""
    w, x, y, z = q.unbind(-1)
    yaw = torch.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
    zero = torch.zeros_like(yaw)
    return torch.stack([torch.cos(yaw / 2), zero, zero, torch.sin(yaw / 2)], dim=-1)


def q_angle(q: torch.Tensor) -> torch.Tensor:
    """Rotation angle in [0, pi] (sign of q irrelevant)."""
    return 2 * torch.atan2(q[..., 1:].norm(dim=-1), q[..., 0].abs())


def q_error_angle(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Angle of the relative rotation a^-1 b."""
    return q_angle(q_mul(q_conj(a), b))


def rot6d(q: torch.Tensor) -> torch.Tensor:
    """First two columns of the rotation matrix, row-major: [m00, m01, m10, m11, m20, m21]."""
    return q_to_mat(q)[..., :, :2].reshape(*q.shape[:-1], 6)


GRAVITY_W = torch.tensor([0.0, 0.0, -1.0], dtype=F64)


def _grav(q: torch.Tensor) -> torch.Tensor:
    return q_rotate_inv(q, GRAVITY_W.expand(*q.shape[:-1], 3))


# ------------------------------------------------------------------ inputs
def robot_state(env) -> dict[str, torch.Tensor]:
    s = env.sim
    return {"xpos": f64(s.xpos), "xquat": f64(s.xquat), "lin_vel": f64(s.body_lin_vel_w),
            "ang_vel": f64(s.body_ang_vel_w), "qpos": f64(s.qpos), "qvel": f64(s.qvel)}


def ref_state(env) -> dict[str, torch.Tensor]:
    r = env.ref
    keys = ("root_pos", "root_quat", "root_lin_vel_w", "root_ang_vel_w", "dof_pos", "dof_vel", "body_pos_w",
            "body_quat_w", "body_lin_vel_w", "body_ang_vel_w")
    return {k: f64(getattr(r, k)) for k in keys}


# ------------------------------------------------------------------ observations
def tracking_obs(rs: dict, ref: dict, actions: torch.Tensor, default_joint_pos: torch.Tensor, tracked: list[int],
                 root_id: int, anchor_id: int, qpos_start: int, dof_start: int, privileged: bool
                 ) -> dict[str, torch.Tensor]:
    """Every observation term ``[N, width]`` of every observation set by its column name (future-frame terms
    are ``slot{f}_<name>`` for reference slot ``f``; :func:`assemble_obs` maps them to ``future{k}_<name>``).
    ``default_joint_pos``: ``[A]`` or per env ``[N, A]`` (calibration offsets)."""
    actions, default_joint_pos = f64(actions), f64(default_joint_pos)
    nj = actions.shape[1]
    n = actions.shape[0]
    xpos, xquat = rs["xpos"], rs["xquat"]
    root_pos, root_quat = xpos[:, root_id], xquat[:, root_id]
    h = q_heading(root_quat)  # [N, 4]
    hb = h[:, None, :]
    nt = len(tracked)
    a = anchor_id
    parts = {
        "gravity_b": _grav(root_quat),
        "root_lin_vel_b": q_rotate_inv(root_quat, rs["lin_vel"][:, root_id]),
        "root_ang_vel_b": q_rotate_inv(root_quat, rs["ang_vel"][:, root_id]),
        "joint_pos_rel": rs["qpos"][:, qpos_start:qpos_start + nj] - default_joint_pos,
        "joint_vel": rs["qvel"][:, dof_start:dof_start + nj],
        "last_action": actions,
        "body_pos": q_rotate_inv(hb.expand(n, nt, 4), xpos[:, tracked] - root_pos[:, None]).reshape(n, -1),
        "body_rot6d": rot6d(q_mul(q_conj(hb).expand(n, nt, 4), xquat[:, tracked])).reshape(n, -1),
    }
    anchor_pos, anchor_quat = xpos[:, a], xquat[:, a]
    rb = [t - 1 for t in tracked]
    num_slots = ref["body_pos_w"].shape[1]
    for f in range(1, num_slots):
        bp, bq = ref["body_pos_w"][:, f], ref["body_quat_w"][:, f]
        parts[f"slot{f}_anchor_pos"] = q_rotate_inv(h, bp[:, a - 1] - anchor_pos)
        parts[f"slot{f}_anchor_rot6d"] = rot6d(q_mul(q_conj(anchor_quat), bq[:, a - 1]))
        parts[f"slot{f}_body_pos"] = q_rotate_inv(hb.expand(n, nt, 4), bp[:, rb] - anchor_pos[:, None]).reshape(n, -1)
        parts[f"slot{f}_body_rot6d"] = rot6d(q_mul(q_conj(hb).expand(n, nt, 4), bq[:, rb])).reshape(n, -1)
        # deploy set: the reference's own motion, in the reference's heading frames
        h0 = q_heading(ref["body_quat_w"][:, 0, a - 1])
        hf = q_heading(bq[:, a - 1])
        parts[f"slot{f}_ref_anchor_pos"] = q_rotate_inv(h0, bp[:, a - 1] - ref["body_pos_w"][:, 0, a - 1])
        parts[f"slot{f}_ref_joint_pos"] = ref["dof_pos"][:, f]
        parts[f"slot{f}_ref_body_pos"] = q_rotate_inv(hf[:, None].expand(n, nt, 4),
                                                      bp[:, rb] - bp[:, a - 1][:, None]).reshape(n, -1)
    if privileged:
        parts.update({
            "ref_anchor_lin_vel": q_rotate_inv(h, ref["body_lin_vel_w"][:, 0, a - 1]),
            "ref_anchor_ang_vel": q_rotate_inv(h, ref["body_ang_vel_w"][:, 0, a - 1]),
            "ref_joint_vel": ref["dof_vel"][:, 0],
            "body_lin_vel": q_rotate_inv(hb.expand(n, nt, 4), rs["lin_vel"][:, tracked]).reshape(n, -1),
            "body_ang_vel": q_rotate_inv(hb.expand(n, nt, 4), rs["ang_vel"][:, tracked]).reshape(n, -1),
        })
    return parts


def assemble_obs(parts: dict[str, torch.Tensor], future_steps: list[int], privileged: bool,
                 observations: str = "default") -> torch.Tensor:
    """Full rows ``[N, D]`` in the layout the env's spec declares (future frame ``k`` = slot ``i + 1``)."""
    from simppo.kernels.imitation.spec import obs_terms

    terms = obs_terms(future_steps, privileged, observations)
    return torch.cat([parts[t.name if slot is None else f"slot{slot}_{t.name}"] for _, t, slot in terms], dim=1)


def observation_noise_bounds(clean_actor: torch.Tensor, scales: torch.Tensor, unstable: torch.Tensor
                             ) -> tuple[torch.Tensor, torch.Tensor]:
    """(lo, hi) ``[N, actor_dim]`` of the actor's noisy view: clean ± scale per column (uniform noise);
    an unstable world's row is exactly zero."""
    clean, scales = f64(clean_actor), f64(scales)[None]
    lo, hi = clean - scales, clean + scales
    bad = unstable.cpu() != 0
    lo[bad], hi[bad] = 0.0, 0.0
    return lo, hi


# ------------------------------------------------------------------ rewards
def tracking_rewards(rs: dict, ref: dict, actions: torch.Tensor, prev_actions: torch.Tensor,
                     undesired: torch.Tensor, self_contacts: torch.Tensor, tracked: list[int], feet: list[int],
                     anchor_id: int, qpos_start: int,
                     soft_lo: torch.Tensor, soft_hi: torch.Tensor, sigmas: dict[str, float],
                     weights: dict[str, float], joint_limit_reference: bool = False,
                     ) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """(unweighted terms ``[N]`` by reward-term name, weighted total ``[N]``), BeyondMimic style.
    ``sigmas`` has the tracking terms' σ, ``weights`` every term's weight, by name; ``joint_limit_reference``: the
    joint-limit band widened to take in the reference's joint angles."""
    actions, prev_actions, undesired = f64(actions), f64(prev_actions), f64(undesired)
    soft_lo, soft_hi = f64(soft_lo), f64(soft_hi)
    n, nj = actions.shape
    a = anchor_id
    xpos, xquat = rs["xpos"], rs["xquat"]
    ref_a_pos, ref_a_quat = ref["body_pos_w"][:, 0, a - 1], ref["body_quat_w"][:, 0, a - 1]
    rob_a_pos, rob_a_quat = xpos[:, a], xquat[:, a]
    # reference bodies moved onto the robot anchor's (x, y) and heading, reference heights kept
    delta = q_heading(q_mul(rob_a_quat, q_conj(ref_a_quat)))  # [N, 4]
    nt = len(tracked)
    rb = [t - 1 for t in tracked]
    d_exp = delta[:, None].expand(n, nt, 4)
    base = torch.stack([rob_a_pos[:, 0], rob_a_pos[:, 1], ref_a_pos[:, 2]], dim=-1)

    def target_pos(bodies: list[int]) -> torch.Tensor:
        d = delta[:, None].expand(n, len(bodies), 4)
        return base[:, None] + q_rotate(d, ref["body_pos_w"][:, 0, [b - 1 for b in bodies]] - ref_a_pos[:, None])

    tgt_pos = target_pos(tracked)
    tgt_quat = q_mul(d_exp, ref["body_quat_w"][:, 0, rb])

    errors = {
        "anchor_pos": ((ref_a_pos - rob_a_pos) ** 2).sum(-1),
        "anchor_ori": q_error_angle(ref_a_quat, rob_a_quat) ** 2,
        "body_pos": ((tgt_pos - xpos[:, tracked]) ** 2).sum(-1).mean(-1),
        "body_ori": (q_error_angle(tgt_quat, xquat[:, tracked]) ** 2).mean(-1),
        "feet_pos": ((target_pos(feet) - xpos[:, feet]) ** 2).sum(-1).mean(-1),
        "body_lin_vel": ((ref["body_lin_vel_w"][:, 0, rb] - rs["lin_vel"][:, tracked]) ** 2).sum(-1).mean(-1),
        "body_ang_vel": ((ref["body_ang_vel_w"][:, 0, rb] - rs["ang_vel"][:, tracked]) ** 2).sum(-1).mean(-1),
    }
    terms = {k: torch.exp(-e / sigmas[k] ** 2) for k, e in errors.items()}
    q = rs["qpos"][:, qpos_start:qpos_start + nj]
    terms["action_rate"] = ((actions - prev_actions) ** 2).sum(-1)
    if joint_limit_reference:
        ref_q = ref["dof_pos"][:, 0]
        soft_lo, soft_hi = torch.minimum(soft_lo, ref_q), torch.maximum(soft_hi, ref_q)
    terms["joint_limit"] = ((q - soft_hi).clamp(min=0) + (soft_lo - q).clamp(min=0)).sum(-1)
    terms["undesired_contacts"] = undesired
    terms["self_collisions"] = f64(self_contacts)
    return terms, sum(weights[k] * t for k, t in terms.items())


def tracking_errors(rs: dict, ref: dict, tracked: list[int], anchor_id: int,
                    qpos_start: int) -> dict[str, torch.Tensor]:
    """Logged errors ``[N]`` by ``spec.ERROR_NAMES``: anchor distance and angle, mean tracked-body distance
    and angle (bodies aligned to the robot's anchor and heading), mean |joint position error|."""
    a = anchor_id
    xpos, xquat = rs["xpos"], rs["xquat"]
    ref_a_pos, ref_a_quat = ref["body_pos_w"][:, 0, a - 1], ref["body_quat_w"][:, 0, a - 1]
    rob_a_pos, rob_a_quat = xpos[:, a], xquat[:, a]
    delta = q_heading(q_mul(rob_a_quat, q_conj(ref_a_quat)))
    n, nt = xpos.shape[0], len(tracked)
    rb = [t - 1 for t in tracked]
    d_exp = delta[:, None].expand(n, nt, 4)
    base = torch.stack([rob_a_pos[:, 0], rob_a_pos[:, 1], ref_a_pos[:, 2]], dim=-1)
    tgt_pos = base[:, None] + q_rotate(d_exp, ref["body_pos_w"][:, 0, rb] - ref_a_pos[:, None])
    tgt_quat = q_mul(d_exp, ref["body_quat_w"][:, 0, rb])
    nj = ref["dof_pos"].shape[2]
    return {
        "anchor_pos": (ref_a_pos - rob_a_pos).norm(dim=-1),
        "anchor_ori": q_error_angle(ref_a_quat, rob_a_quat),
        "body_pos": (tgt_pos - xpos[:, tracked]).norm(dim=-1).mean(-1),
        "body_ori": q_error_angle(tgt_quat, xquat[:, tracked]).mean(-1),
        "joint_pos": (rs["qpos"][:, qpos_start:qpos_start + nj] - ref["dof_pos"][:, 0]).abs().mean(-1),
    }


# ------------------------------------------------------------------ terminations
def termination_errors(rs: dict, ref: dict, ee_ids: list[int], anchor_id: int) -> dict[str, torch.Tensor]:
    """The quantities compared with the thresholds: anchor height error ``[N]``, anchor gravity-z error
    ``[N]``, end-effector height errors ``[N, E]`` and the mean world-frame distance of all bodies ``[N]``."""
    a = anchor_id
    ref_a_pos, ref_a_quat = ref["body_pos_w"][:, 0, a - 1], ref["body_quat_w"][:, 0, a - 1]
    return {
        "anchor_height": (ref_a_pos[:, 2] - rs["xpos"][:, a, 2]).abs(),
        "anchor_ori": (_grav(ref_a_quat)[:, 2] - _grav(rs["xquat"][:, a])[:, 2]).abs(),
        "ee_height": (ref["body_pos_w"][:, 0, [e - 1 for e in ee_ids], 2] - rs["xpos"][:, ee_ids, 2]).abs(),
        "body_pos": (ref["body_pos_w"][:, 0] - rs["xpos"][:, 1:]).norm(dim=-1).mean(-1),
    }


def terminations(errs: dict, unstable: torch.Tensor, motion_ids: torch.Tensor, times: torch.Tensor,
                 motion_lengths: torch.Tensor, episode_length: torch.Tensor, cfg, max_episode_steps: int
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """(terminated, truncated) bool ``[N]``; truncation only where not terminated."""
    failed = (
        (errs["anchor_height"] > cfg.anchor_height)
        | (errs["anchor_ori"] > cfg.anchor_ori)
        | (errs["ee_height"] > cfg.ee_height).any(-1)
        | (errs["body_pos"] > cfg.body_pos)
        | (unstable.cpu() != 0)
    )
    # times and lengths compared as the float32 values they are
    clip_end = times.cpu() >= motion_lengths.cpu()[motion_ids.cpu().long()]
    timeout = episode_length.cpu() >= max_episode_steps
    return failed, ~failed & (clip_end | timeout)


def end_conditions(errs: dict, unstable: torch.Tensor, truncated_clip_end: torch.Tensor, timeout: torch.Tensor,
                   cfg) -> list[tuple[str, torch.Tensor]]:
    """Every end cause in spec order (terminations, then truncations) with where it holds (bool ``[N]``)."""
    return [
        ("anchor_height", errs["anchor_height"] > cfg.anchor_height),
        ("anchor_ori", errs["anchor_ori"] > cfg.anchor_ori),
        ("ee_height", (errs["ee_height"] > cfg.ee_height).any(-1)),
        ("body_pos", errs["body_pos"] > cfg.body_pos),
        ("unstable", unstable.cpu() != 0),
        ("clip_end", truncated_clip_end),
        ("timeout", timeout),
    ]


def end_causes(errs: dict, unstable: torch.Tensor, truncated_clip_end: torch.Tensor, timeout: torch.Tensor,
               cfg, ending: tuple[str, ...] | None = None) -> list[str | None]:
    """Per env, the first condition (of those in ``ending``; all by default) that ended it."""
    conditions = [(name, fired) for name, fired in end_conditions(errs, unstable, truncated_clip_end, timeout, cfg)
                  if ending is None or name in ending]
    return [next((name for name, fired in conditions if fired[i]), None) for i in range(unstable.shape[0])]


def fail_bits(errs: dict, unstable: torch.Tensor, truncated_clip_end: torch.Tensor, timeout: torch.Tensor,
              cfg) -> list[int]:
    """Per env, the bit (``1 << spec index``) of every end cause that holds."""
    conditions = end_conditions(errs, unstable, truncated_clip_end, timeout, cfg)
    return [sum(1 << k for k, (_, fired) in enumerate(conditions) if fired[i]) for i in range(unstable.shape[0])]


# ------------------------------------------------------------------ resets and actions
def reference_state(ref: dict, qpos_start: int, dof_start: int, nq: int, nv: int
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """Simulator qpos/qvel ``[N, nq] / [N, nv]`` of the reference at slot 0: free joint (pos, unit wxyz
    quat; world linear velocity, body-frame angular velocity) and joints."""
    n = ref["root_pos"].shape[0]
    qpos = torch.zeros(n, nq, dtype=F64)
    qvel = torch.zeros(n, nv, dtype=F64)
    quat = q_normalize(ref["root_quat"][:, 0])
    nj = ref["dof_pos"].shape[2]
    qpos[:, 0:3] = ref["root_pos"][:, 0]
    qpos[:, 3:7] = quat
    qpos[:, qpos_start:qpos_start + nj] = ref["dof_pos"][:, 0]
    qvel[:, 0:3] = ref["root_lin_vel_w"][:, 0]
    qvel[:, 3:6] = q_rotate_inv(quat, ref["root_ang_vel_w"][:, 0])
    qvel[:, dof_start:dof_start + nj] = ref["dof_vel"][:, 0]
    return qpos, qvel


def apply_actions(actions: torch.Tensor, default_joint_pos: torch.Tensor, action_scale: torch.Tensor,
                  clip: float, ref_joint_pos: torch.Tensor | None = None, ref_weight: float = 0.0,
                  nominal_joint_pos: torch.Tensor | None = None, ref_joint_vel: torch.Tensor | None = None,
                  vel_weight: float = 0.0, kp: torch.Tensor | None = None,
                  kd: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(ctrl, clip(a)): ctrl = default + w * (ref - nominal) + wv * kd / kp * ref_vel + scale * clip(a);
    ``default_joint_pos [A]`` or per env ``[N, A]`` (nominal + calibration offset), ``ref_joint_pos`` /
    ``ref_joint_vel [N, A]`` the reference one step ahead, ``nominal`` the robot's default pose ``[A]``
    (``default_joint_pos`` when not given), ``kp`` / ``kd [A]`` the servos' gains."""
    a = f64(actions).clamp(-clip, clip)
    offset = f64(default_joint_pos)
    if ref_weight:
        nominal = offset if nominal_joint_pos is None else f64(nominal_joint_pos)
        offset = offset + ref_weight * (f64(ref_joint_pos) - nominal)
    if vel_weight:
        offset = offset + vel_weight * f64(kd) / f64(kp) * f64(ref_joint_vel)
    return offset + f64(action_scale) * a, a
