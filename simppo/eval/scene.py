"""MuJoCo scene pieces shared by the native viewer and the video writer (all testable headless).

- :func:`add_ghost`: the reference "ghost", the robot's visual geoms placed at the reference body
  poses, appended to any ``mjvScene`` (the native viewer's ``user_scn`` or a ``Renderer``'s scene).
- :func:`overlay_text`: the motion name, time, body error, state and key help shown as text.
- :data:`KEYS` / :func:`handle_key`: the native viewer's keys (GLFW key codes) → :class:`Player` actions.
  Arrows, space, backspace and PageUp / PageDown (the plays of a motion) are used because MuJoCo's viewer binds
  most letters to its own visualisation toggles.
- :func:`track_camera`: a free camera that follows the root body.
"""

from __future__ import annotations

import mujoco
import numpy as np

from simppo.eval.player import Frame, Player, play_label

GHOST_RGBA = (0.25, 0.55, 1.0, 0.35)
VISIBLE_GROUPS = (0, 1, 2)  # MuJoCo's default visible geom groups (simppo's MJCFs put collision geoms in 3)

# GLFW key codes
KEY_SPACE, KEY_BACKSPACE, KEY_RIGHT, KEY_LEFT, KEY_DOWN, KEY_UP = 32, 259, 262, 263, 264, 265
KEY_PAGE_UP, KEY_PAGE_DOWN = 266, 267
KEYS = {
    KEY_RIGHT: ("next motion", Player.next_motion),
    KEY_LEFT: ("previous motion", Player.prev_motion),
    KEY_SPACE: ("pause", Player.toggle_pause),
    KEY_BACKSPACE: ("reset", Player.reset),
    KEY_UP: ("toggle ghost", Player.toggle_ghost),
    KEY_DOWN: ("slow motion", Player.toggle_slow_motion),
    KEY_PAGE_DOWN: ("next play", Player.next_play),
    KEY_PAGE_UP: ("previous play", Player.prev_play),
}
KEY_HELP = "Right/Left: next/previous motion   Space: pause   Backspace: reset   Up: ghost   Down: slow motion"
PLAYS_KEY_HELP = "   PageDown/PageUp: next/previous play"


def key_help(player: Player | None = None) -> str:
    """The key line of the overlay (the play keys only where the player has several plays)."""
    return KEY_HELP + (PLAYS_KEY_HELP if player is not None and player.plays > 1 else "")


def handle_key(player: Player, keycode: int) -> str | None:
    """Apply the action bound to ``keycode``; returns its name (``None`` for unbound keys)."""
    entry = KEYS.get(int(keycode))
    if entry is None:
        return None
    name, action = entry
    action(player)
    return name


def visual_geoms(model: mujoco.MjModel, groups=VISIBLE_GROUPS) -> np.ndarray:
    """Ids of the robot's visible geoms (bodies other than the world, in ``groups``)."""
    keep = (model.geom_bodyid > 0) & np.isin(model.geom_group, groups)
    return np.nonzero(keep)[0]


def quat_to_mat(quat: np.ndarray) -> np.ndarray:
    """``[..., 4]`` wxyz → ``[..., 3, 3]``."""
    q = np.asarray(quat, dtype=np.float64)
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
        np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
        np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
    ], -2)


def ghost_geom_poses(model: mujoco.MjModel, ref_body_pos: np.ndarray, ref_body_quat: np.ndarray,
                     geom_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """World poses of ``geom_ids`` when each body sits at its reference pose: ``(pos [G, 3], mat [G, 3, 3])``.
    ``ref_body_pos [B, 3]`` / ``ref_body_quat [B, 4]``: motion body ``b`` = MuJoCo body ``b + 1``."""
    b = model.geom_bodyid[geom_ids] - 1
    rb = quat_to_mat(ref_body_quat[b])
    pos = ref_body_pos[b] + np.einsum("gij,gj->gi", rb, model.geom_pos[geom_ids])
    mat = rb @ quat_to_mat(model.geom_quat[geom_ids])
    return pos, mat


def add_ghost(scn: mujoco.MjvScene, model: mujoco.MjModel, ref_body_pos: np.ndarray, ref_body_quat: np.ndarray,
              geom_ids: np.ndarray | None = None, rgba=GHOST_RGBA) -> int:
    """Append the reference ghost to ``scn`` (after its current ``ngeom``); returns the geoms added
    (fewer when ``scn.maxgeom`` is reached)."""
    geom_ids = visual_geoms(model) if geom_ids is None else geom_ids
    pos, mat = ghost_geom_poses(model, np.asarray(ref_body_pos), np.asarray(ref_body_quat), geom_ids)
    rgba = np.asarray(rgba, dtype=np.float32)
    added = 0
    for k, g in enumerate(geom_ids):
        if scn.ngeom >= scn.maxgeom:
            break
        geom = scn.geoms[scn.ngeom]
        mujoco.mjv_initGeom(geom, int(model.geom_type[g]), model.geom_size[g].astype(np.float64),
                            pos[k], mat[k].reshape(-1), rgba)
        if int(model.geom_type[g]) == int(mujoco.mjtGeom.mjGEOM_MESH):
            geom.dataid = 2 * int(model.geom_dataid[g])  # mjvGeom mesh ids: 2 * mesh id (original mesh)
        geom.category = int(mujoco.mjtCatBit.mjCAT_DECOR)
        scn.ngeom += 1
        added += 1
    return added


def overlay_text(frame: Frame, player: Player | None = None) -> tuple[str, str]:
    """Two text columns (labels, values) describing ``frame``."""
    labels = ["motion", "time", "body error", "state"]
    state = f"FAILED: {frame.failure}" if frame.failure else "tracking"
    if player is not None:
        flags = [f for f, on in (("paused", player.paused), ("slow motion", player.slow_motion),
                                 ("ghost off", not player.show_ghost)) if on]
        if flags:
            state += " (" + ", ".join(flags) + ")"
    values = [f"{frame.motion_name} ({frame.motion_id + 1}/{len(player.motion_names) if player else '?'})",
              f"{frame.time_s:5.2f} / {frame.length_s:.2f} s", f"{1000.0 * frame.body_error_m:.0f} mm", state]
    if player is not None and player.plays > 1:
        labels.insert(1, "play")
        values.insert(1, play_label(frame.play, player.plays))
    return "\n".join(labels), "\n".join(values)


def track_camera(cam: mujoco.MjvCamera, frame: Frame, root_body: int = 1, distance: float = 3.2,
                 elevation: float = -15.0, azimuth: float = 135.0) -> mujoco.MjvCamera:
    """Point the free camera ``cam`` at the robot's root body (height clamped so the floor stays in view)."""
    cam.type = int(mujoco.mjtCamera.mjCAMERA_FREE)
    target = frame.body_pos[root_body].copy()
    target[2] = min(max(target[2], 0.4), 1.2)
    cam.lookat[:] = target
    cam.distance, cam.elevation, cam.azimuth = distance, elevation, azimuth
    return cam
