"""Readers of the motion files datasets ship in, beside simppo's own CSV / NPZ rows.

Each reader returns a :class:`ClipRows`: one row per frame of root position, root quaternion (in the order the
format defines) and joint angles in the robot's standard joint order, plus the file's own world body positions
when it has them (``simppo-pack`` recomputes every body with the robot's kinematics and reports the largest
difference: a check that file and robot agree).

* BeyondMimic / mjlab motion NPZ (:func:`mjlab_npz_rows`): ``fps``, ``joint_pos [T, D]``, ``body_pos_w``,
  ``body_quat_w [T, B, ·]`` (wxyz, bodies in the MJCF's order, the pelvis first); the root pose is the pelvis
  body's.
* ProtoMotions ``.motion`` (:func:`read_protomotions`): a ``torch.save`` archive of a dict with ``fps``,
  ``dof_pos [T, D]``, ``rigid_body_pos [T, B, 3]``, ``rigid_body_rot [T, B, 4]`` (xyzw; body 0 the pelvis),
  read by :mod:`simppo.motion.torch_archive` (no pickled code runs; pickled objects such as a
  ``StateConversion`` entry are skipped and named in a note).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from simppo.motion.torch_archive import TorchArchiveError, load_torch_archive, opaque_entries

PROTOMOTIONS_SUFFIX = ".motion"


class ImportProblem(ValueError):
    """What is wrong with a file (one line, without the file name)."""


@dataclass
class ClipRows:
    """``values [T, 7 + D]``: root x y z, root quaternion (``quat_order``), joints in the robot's input order."""

    values: np.ndarray
    fps: float | None
    quat_order: str | None = None  # the format's own order (None: the caller's option decides)
    body_pos: np.ndarray | None = None  # the file's own world body positions [T, B, 3]
    notes: list[str] = field(default_factory=list)


def _frames(name: str, a, ndim: int, last: int | None = None) -> np.ndarray:
    if not isinstance(a, np.ndarray) or a.dtype.kind not in "biuf":
        raise ImportProblem(f"{name}: expected a number array, got {type(a).__name__}")
    if a.ndim != ndim or (last is not None and a.shape[-1] != last):
        want = "[frames" + ", n" * (ndim - 2) + f", {last if last is not None else 'n'}]"
        raise ImportProblem(f"{name}: shape {tuple(a.shape)}, expected {want}")
    return a.astype(np.float64)


def _pelvis_rows(d: dict, keys: tuple[str, str, str], num_dofs: int, fps: float | None, order: str) -> ClipRows:
    """Rows from the joint angles ``[T, D]`` and the world body positions ``[T, B, 3]`` and quaternions
    ``[T, B, 4]`` named by ``keys`` (body 0 the pelvis: the root)."""
    missing = [k for k in keys if k not in d]
    if missing:
        raise ImportProblem(f"lacks {missing} (has {sorted(map(str, d))[:12]})")
    joints = _frames(keys[0], d[keys[0]], 2, num_dofs)
    pos = _frames(keys[1], d[keys[1]], 3, 3)
    quat = _frames(keys[2], d[keys[2]], 3, 4)
    counts = {k: a.shape[0] for k, a in zip(keys, (joints, pos, quat), strict=True)}
    if len(set(counts.values())) != 1:
        raise ImportProblem(f"frame counts differ: {counts}")
    if pos.shape[1] != quat.shape[1]:
        raise ImportProblem(f"{keys[1]} has {pos.shape[1]} bodies, {keys[2]} {quat.shape[1]}")
    return ClipRows(np.concatenate([pos[:, 0], quat[:, 0], joints], axis=1), fps, order, pos)


def _fps(value) -> float:
    a = np.asarray(value)
    if a.dtype.kind not in "biuf" or a.size != 1:
        raise ImportProblem(f"fps must be one number, got {value!r}"[:120])
    return float(a.reshape(()))


def mjlab_npz_rows(arrays: dict[str, np.ndarray], num_dofs: int) -> ClipRows:
    """Rows of a BeyondMimic / mjlab motion NPZ (``arrays``: its members by name)."""
    fps = _fps(arrays["fps"]) if "fps" in arrays else None
    return _pelvis_rows(arrays, ("joint_pos", "body_pos_w", "body_quat_w"), num_dofs, fps, "wxyz")


def read_protomotions(path: Path, num_dofs: int, max_bytes: int) -> ClipRows:
    """Rows of a ProtoMotions ``.motion`` file."""
    try:
        d = load_torch_archive(path, max_bytes)
    except TorchArchiveError as e:
        raise ImportProblem(str(e)) from None
    if not isinstance(d, dict):
        raise ImportProblem(f"expected a dict of motion fields, the archive holds a {type(d).__name__}")
    if "fps" not in d:
        raise ImportProblem(f"lacks ['fps'] (has {sorted(map(str, d))[:12]})")
    rows = _pelvis_rows(d, ("dof_pos", "rigid_body_pos", "rigid_body_rot"), num_dofs, _fps(d["fps"]), "xyzw")
    skipped = opaque_entries(d)
    if skipped:
        rows.notes.append("entries not read (pickled objects; no code from the file runs): "
                          + ", ".join(f"{k} ({o})" for k, o in skipped.items()))
    return rows


def body_agreement(file_body_pos: np.ndarray, fk_body_pos: np.ndarray, body_names: list[str]) -> str:
    """One line: the largest distance between the robot's kinematics of the read frames ``[T, B, 3]`` and the
    file's own body positions ``[T, B', 3]``: body by body when ``B' == B``, else (no name map in the file; a
    ProtoMotions G1 has extra head and hand bodies) each robot body against the file body nearest to it on
    average over the clip."""
    fk = fk_body_pos
    if file_body_pos.shape[1] == fk.shape[1]:
        d, how = np.linalg.norm(file_body_pos - fk, axis=-1), "body by body"
    else:
        every = max(1, fk.shape[0] // 200)  # the pairing from at most ~200 frames: [T, B, B'] can be large
        pair = np.linalg.norm(file_body_pos[::every, None] - fk[::every, :, None], axis=-1)  # [T', B, B']
        nearest = pair.mean(0).argmin(-1)  # [B]
        d = np.linalg.norm(file_body_pos[:, nearest] - fk, axis=-1)
        how = f"each of its {fk.shape[1]} bodies against the nearest of the file's {file_body_pos.shape[1]}"
    t, b = np.unravel_index(int(np.argmax(d)), d.shape)
    return (f"the robot's kinematics reproduce the file's body positions within {d[t, b]:.4f} m ({how}; largest: "
            f"{body_names[b]} at frame {t + 1}; mean {d.mean():.4f} m)")
