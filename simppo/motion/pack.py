"""Pack motion clips (CSV / NPZ / mjlab NPZ / ProtoMotions .motion / YAML manifest / directories) into simppo
motion shards.

Pipeline per clip: read ``qpos`` rows (root pos, root quat, joints in the robot's standard order) →
validate → optional resampling (lerp / slerp) to ``target_fps`` → MuJoCo C forward kinematics
(``mj_kinematics``) → finite-difference velocities → foot contact labels → shard arrays.

Errors are :class:`MotionPackError` with ``file:row:col`` (1-based; CSV rows are file lines, NPZ rows
are frames; ``0`` when the error concerns the whole file or column). Inputs are never unpickled with
pickle's own resolver (NPZ members are parsed by hand: numeric dtypes only, sizes checked against the archive
before reading; ProtoMotions archives by :mod:`simppo.motion.torch_archive`, which resolves no name from the
file; manifests use ``yaml.safe_load``). Readers of the dataset formats: :mod:`simppo.motion.importers`.

Small defects are repaired with a warning and a count (:attr:`PackResult.warnings`): joint values
beyond their range by at most ``joint_limit_tol`` are clamped into it, and frames whose geometry
reaches between ``ground_slack`` and ``ground_tol`` below the floor are lifted onto it, so reference
state resets never start with joints past their limits or geometry deep in the floor.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import time
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from simppo.motion.bounds import MAX_FPS, MIN_FPS, field_problem, fps_problem
from simppo.motion.format import (
    FORMAT_VERSION,
    SHARD_SUFFIX,
    MotionMeta,
    ShardFormatError,
    ShardHeader,
    write_json_atomic,
    write_shard,
)
from simppo.motion.importers import (
    PROTOMOTIONS_SUFFIX,
    ClipRows,
    ImportProblem,
    body_agreement,
    mjlab_npz_rows,
    read_protomotions,
)
from simppo.motion.index import INDEX_FILE, PACK_FORMAT, read_pack_index, resolve_shard_paths
from simppo.motion.kinematics import (
    RobotKinematics,
    angular_velocity,
    contact_labels,
    finite_diff,
    quat_make_continuous,
    quat_slerp,
)
from simppo.motion.mirror import mirror_qpos
from simppo.motion.shard_jobs import ShardJob, run_shard_jobs
from simppo.utils.files import staged_directory

SUPPORTED_SUFFIXES = (".csv", ".npz", PROTOMOTIONS_SUFFIX)
FORMATS = {"csv": ".csv", "npz": ".npz", "protomotions": PROTOMOTIONS_SUFFIX}  # manifest ``format`` → reader
FIX_HEIGHT_MODES = ("auto", "all", "none")
MANIFEST_SUFFIXES = (".yaml", ".yml")

GRAVITY = 9.81  # m/s²: a ballistic flight of t seconds rises g t² / 8


class MotionPackError(ValueError):
    """One-line packing error located at ``file:row:col``."""

    def __init__(self, file, row: int, col: int, what: str):
        self.file, self.row, self.col, self.what = str(file), int(row), int(col), what
        super().__init__(f"{self.file}:{self.row}:{self.col}: {what}")


@dataclass
class PackOptions:
    fps: float = 30.0  # fps of CSV inputs (NPZ carry their own)
    quat_order: str = "wxyz"  # root quaternion order of the inputs
    target_fps: float | None = None  # resample to this rate
    max_motions_per_shard: int = 256
    joint_limit_tol: float = 0.05  # rad beyond the MJCF range that is clamped (with a warning); more is an error
    ground_tol: float = 0.05  # m below z=0 that a collision geom may reach (lifted, with a warning); more: error
    ground_slack: float = 0.02  # m of penetration left as is (soft contacts push it out within a few steps)
    quat_norm_tol: float = 0.05  # |norm - 1| of an input root quaternion beyond this is an error
    float_height: float = 0.15  # m: lowest geom above this = the robot floats (orientation plausibility)
    recursive: bool = False  # directories: walk their sub-directories too
    workers: int | None = 1  # processes writing shards at once (None: one per core; simppo-pack: --workers)
    resume: bool = False  # stage in <out>/../.<name>.partial, kept when interrupted; reuse its finished shards
    progress: bool = False  # a progress bar over the shards (stderr)
    mirror: bool = False  # add each clip's left-right mirror image as <name>_mirror (the robot's mirror map)
    allow_airborne: bool = False  # a clip that starts (or mostly stays) in the air is meant to
    # shift each clip so that its lowest geometry over all frames touches the floor: "auto" for ProtoMotions files
    # (whose loader applies this fix, so their heights are not meant as they are), "all" or "none"
    fix_height: str = "auto"
    contact_height: float = 0.03  # m: foot lowest point below this ...
    contact_speed: float = 0.3  # m/s: ... and foot speed below this = contact
    # s: a stretch this long with no geometry within contact_height of the floor is warned about (a ballistic flight
    # of 1 s rises 1.2 m, beyond any humanoid's jump): the clip floats there, and no policy can push off the air
    max_airborne_s: float = 1.0


@dataclass
class ClipSource:
    """One clip to pack, as named by the inputs (before reading)."""

    path: Path
    name: str
    weight: float = 1.0
    fps: float | None = None
    quat_order: str | None = None
    where: str = ""  # manifest location for error messages
    row: int = 0
    format: str | None = None  # a key of FORMATS; None: by the file's suffix

    @property
    def suffix(self) -> str:
        return FORMATS[self.format] if self.format else self.path.suffix.lower()


@dataclass
class Clip:
    """A read clip: ``qpos [T, 7 + D]`` in MuJoCo qpos order, root quaternion wxyz."""

    name: str
    fps: float
    qpos: np.ndarray
    weight: float
    source: str
    rows: np.ndarray = field(default_factory=lambda: np.zeros(0, int))  # file row of each frame (1-based)
    quat_order: str = "wxyz"  # the order the input was read with
    warnings: list[str] = field(default_factory=list)  # repairs made (one line each)
    notes: list[str] = field(default_factory=list)  # what the reader found (one line each)
    file_body_pos: np.ndarray | None = None  # the file's own world body positions [T, B, 3], when it has them
    # "whole": shift the clip so that its lowest geometry over all frames touches the floor; "auto": the same unless
    # that leaves it floating (then only the frames that sink are lifted onto the floor); "none". See
    # PackOptions.fix_height
    fix_height: str = "none"


# ----------------------------------------------------------------------------- inputs


def expand_inputs(inputs, opts: PackOptions) -> list[ClipSource]:
    """Files, directories (the motion files inside, sorted; with ``opts.recursive`` in every sub-directory too,
    named by their path below the directory, e.g. ``walks/walk1``) and YAML manifests → clip sources."""
    out: list[ClipSource] = []
    for item in inputs:
        p = Path(item)
        if p.is_dir():
            found = p.rglob("*") if opts.recursive else p.iterdir()
            files = sorted(f for f in found if f.is_file() and f.suffix.lower() in SUPPORTED_SUFFIXES)
            if not files:
                raise MotionPackError(p, 0, 0, f"directory holds no motion files ({', '.join(SUPPORTED_SUFFIXES)})"
                                      + ("" if opts.recursive else "; --recursive walks its sub-directories"))
            out.extend(ClipSource(f, f.relative_to(p).with_suffix("").as_posix()) for f in files)
        elif not p.exists():
            raise MotionPackError(p, 0, 0, "no such file or directory")
        elif p.suffix.lower() in MANIFEST_SUFFIXES:
            out.extend(_read_manifest(p))
        elif p.suffix.lower() in SUPPORTED_SUFFIXES:
            out.append(ClipSource(p, p.stem))
        else:
            raise MotionPackError(p, 0, 0, f"unsupported input type {p.suffix!r} (csv, npz, motion, yaml, "
                                  "directory)")
    seen: dict[str, ClipSource] = {}
    for s in out:
        if s.name in seen:
            raise MotionPackError(
                s.where or s.path,
                s.row,
                0,
                f"duplicate motion name {s.name!r} (also from {seen[s.name].path})",
            )
        seen[s.name] = s
    return out


def _read_manifest(path: Path) -> list[ClipSource]:
    try:
        doc = yaml.safe_load(_read_text(path))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise MotionPackError(
            path,
            (mark.line + 1) if mark else 0,
            (mark.column + 1) if mark else 0,
            f"invalid YAML: {getattr(e, 'problem', e)}",
        ) from None
    defaults: dict = {}
    if isinstance(doc, dict):
        defaults = {k: doc[k] for k in ("fps", "quat_order", "weight", "format") if k in doc}
        entries = doc.get("motions")
    else:
        entries = doc
    if not isinstance(entries, list) or not entries:
        raise MotionPackError(
            path, 0, 0, "manifest needs a non-empty list 'motions' of {file, weight, fps, quat_order, name}"
        )
    out = []
    for i, e in enumerate(entries, start=1):
        if isinstance(e, str):
            e = {"file": e}
        if not isinstance(e, dict) or not isinstance(e.get("file"), str) or not e["file"]:
            raise MotionPackError(path, i, 0, f"manifest entry {i} needs a 'file' (a path)")
        unknown = set(e) - {"file", "name", "weight", "fps", "quat_order", "format"}
        if unknown:
            raise MotionPackError(path, i, 0, f"manifest entry {i}: unknown keys {sorted(unknown)}")
        f = Path(e["file"])
        f = f if f.is_absolute() else path.parent / f
        if not f.is_file():
            raise MotionPackError(path, i, 0, f"manifest entry {i}: no such file {f}")
        fmt = e.get("format")
        if fmt is not None and fmt not in FORMATS:
            raise MotionPackError(path, i, 0, f"manifest entry {i}: format must be one of {sorted(FORMATS)}, "
                                  f"got {fmt!r}")
        if fmt is None and f.suffix.lower() not in SUPPORTED_SUFFIXES:
            raise MotionPackError(path, i, 0, f"manifest entry {i}: unsupported file type {f.suffix!r} (name a "
                                  f"format: {sorted(FORMATS)})")
        e = {**defaults, **e}
        try:
            weight = float(e.get("weight", 1.0))
            fps = float(e["fps"]) if "fps" in e else None
        except (TypeError, ValueError):
            raise MotionPackError(path, i, 0, f"manifest entry {i}: weight/fps must be numbers") from None
        if not (math.isfinite(weight) and weight > 0):
            raise MotionPackError(path, i, 0, f"manifest entry {i}: weight must be > 0, got {weight}")
        if fps is not None and fps_problem(fps):
            raise MotionPackError(path, i, 0, f"manifest entry {i}: {fps_problem(fps)}")
        qo = e.get("quat_order")
        if qo is not None and qo not in ("wxyz", "xyzw"):
            raise MotionPackError(path, i, 0, f"manifest entry {i}: quat_order must be wxyz or xyzw")
        out.append(ClipSource(f, str(e.get("name", f.stem)), weight, fps, qo, where=str(path), row=i, format=fmt))
    return out


#: Input clip files (and each NPZ array) larger than this are refused before they are read.
MAX_CLIP_BYTES = 2**30


def _check_size(path: Path) -> None:
    try:
        size = path.stat().st_size
    except OSError as e:
        raise MotionPackError(path, 0, 0, f"unreadable ({e.strerror or e})") from None
    if size > MAX_CLIP_BYTES:
        raise MotionPackError(path, 0, 0, f"file of {size} bytes is larger than the {MAX_CLIP_BYTES} bytes a clip "
                              "may have; split it")


def _read_text(path: Path) -> str:
    _check_size(path)
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise MotionPackError(path, 0, 0, f"not a UTF-8 text file (byte {e.start})") from None
    except OSError as e:
        raise MotionPackError(path, 0, 0, f"unreadable ({e.strerror or e})") from None


def _parses_as_float(tok: str) -> bool:
    try:
        float(tok)
    except ValueError:
        return False
    return True


def _looks_like_header(line: str) -> bool:
    """A first line is a header when most of its fields are not numbers (one malformed number in a data
    row does not make it a header: that row is read, and reported)."""
    toks = line.split(",")
    return sum(_parses_as_float(t) for t in toks) * 2 < len(toks)


def _read_csv(path: Path, ncols: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``ncols`` floats; returns (values [T, ncols] float64, 1-based file line of each row)."""
    lines = _read_text(path).splitlines()
    first = 0
    while first < len(lines) and not lines[first].strip():
        first += 1
    if first < len(lines) and _looks_like_header(lines[first]):
        first += 1
    rows, vals = [], []
    for ln in range(first, len(lines)):
        line = lines[ln].strip()
        if not line:
            continue
        toks = line.split(",")
        if len(toks) != ncols:
            raise MotionPackError(
                path,
                ln + 1,
                min(len(toks), ncols) + 1,
                f"expected {ncols} columns for this robot, got {len(toks)}",
            )
        rows.append(ln + 1)
        vals.append(toks)
    if not vals:
        raise MotionPackError(path, 0, 0, "empty clip: no data rows")
    try:
        arr = np.array(vals, dtype=np.float64)
    except ValueError:
        for r, toks in zip(rows, vals, strict=False):
            for c, tok in enumerate(toks):
                try:
                    float(tok)
                except ValueError:
                    raise MotionPackError(path, r, c + 1, f"not a number: {tok.strip()!r}") from None
        raise
    return arr, np.array(rows)


def _npz_array(zf: zipfile.ZipFile, member: str, path: Path, key: str, max_ndim: int = 2) -> np.ndarray:
    """One array of an open NPZ archive, parsed without pickle: numeric dtypes only, at most ``max_ndim``-D,
    and the announced size must match the member's size before anything is allocated."""
    fmt = np.lib.format
    try:
        info = zf.getinfo(member)
        with zf.open(info) as fh:
            version = fmt.read_magic(fh)
            if version == (1, 0):
                shape, fortran, dtype = fmt.read_array_header_1_0(fh)
            elif version == (2, 0):
                shape, fortran, dtype = fmt.read_array_header_2_0(fh)
            else:
                raise ValueError(f"unsupported .npy version {version}")
            if dtype.kind not in "biuf" or dtype.hasobject or dtype.fields is not None:
                raise MotionPackError(path, 0, 0, f"{key}: dtype {dtype} is not a plain number type")
            if len(shape) > max_ndim:
                raise MotionPackError(path, 0, 0, f"{key}: {len(shape)}-D array {shape}, expected at most "
                                      f"{max_ndim}-D")
            nbytes = math.prod(shape) * dtype.itemsize
            if nbytes > MAX_CLIP_BYTES:
                raise MotionPackError(path, 0, 0, f"{key}: array {shape} of {nbytes} bytes is too large")
            header_len = fh.tell()
            if info.file_size - header_len != nbytes:
                raise MotionPackError(path, 0, 0, f"{key}: array {shape} needs {nbytes} bytes, the archive "
                                      f"holds {info.file_size - header_len} (truncated or corrupt)")
            data = fh.read(nbytes)
    except MotionPackError:
        raise
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, KeyError, NotImplementedError) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise MotionPackError(path, 0, 0, f"unreadable npz member {key!r} ({reason})") from None
    if len(data) != nbytes:
        raise MotionPackError(path, 0, 0, f"{key}: truncated array data")
    a = np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C")
    return a.astype(np.float64)


def _read_npz(path: Path, ncols: int) -> ClipRows:
    """simppo's NPZ (``qpos``, or ``root_pos`` / ``root_quat`` / ``dof_pos``; optional ``fps``) or a
    BeyondMimic / mjlab motion NPZ (``joint_pos``, ``body_pos_w``, ``body_quat_w``, ``fps``)."""
    _check_size(path)
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise MotionPackError(path, 0, 0, f"unreadable npz ({reason})") from None
    with zf:
        members = {n[:-4]: n for n in zf.namelist() if n.endswith(".npy")}

        def load(key: str, max_ndim: int = 2) -> np.ndarray:
            return _npz_array(zf, members[key], path, key, max_ndim)

        fps = None
        if "fps" in members:
            f = load("fps")
            if f.size != 1:
                raise MotionPackError(path, 0, 0, f"fps must be one number, got an array of shape {f.shape}")
            fps = float(f.reshape(()))
            if fps_problem(fps):
                raise MotionPackError(path, 0, 0, f"fps: {fps_problem(fps)}")
        if "qpos" in members:
            q = load("qpos")
        elif all(k in members for k in ("root_pos", "root_quat", "dof_pos")):
            parts = [load(k) for k in ("root_pos", "root_quat", "dof_pos")]
            for k, a in zip(("root_pos", "root_quat", "dof_pos"), parts, strict=False):
                if a.ndim != 2:
                    raise MotionPackError(path, 0, 0, f"{k} must be 2-D [frames, n], got shape {a.shape}")
            if len({a.shape[0] for a in parts}) != 1:
                raise MotionPackError(path, 0, 0, "root_pos, root_quat and dof_pos have different frame counts")
            q = np.concatenate(parts, axis=1)
        elif all(k in members for k in ("joint_pos", "body_pos_w", "body_quat_w")):
            arrays = {k: load(k, 3) for k in ("joint_pos", "body_pos_w", "body_quat_w")}
            try:
                rows = mjlab_npz_rows(arrays, ncols - 7)
            except ImportProblem as e:
                raise MotionPackError(path, 0, 0, str(e)) from None
            rows.fps = fps
            return rows
        else:
            raise MotionPackError(path, 0, 0, "npz needs 'qpos', or 'root_pos', 'root_quat', 'dof_pos', or (mjlab) "
                                  "'joint_pos', 'body_pos_w', 'body_quat_w'")
    if q.ndim != 2:
        raise MotionPackError(path, 0, 0, f"qpos must be 2-D [frames, {ncols}], got shape {q.shape}")
    return ClipRows(q, fps)


def _read_protomotions(path: Path, ncols: int) -> ClipRows:
    _check_size(path)
    try:
        rows = read_protomotions(path, ncols - 7, MAX_CLIP_BYTES)
    except ImportProblem as e:
        raise MotionPackError(path, 0, 0, str(e)) from None
    if fps_problem(rows.fps):
        raise MotionPackError(path, 0, 0, f"fps: {fps_problem(rows.fps)}")
    return rows


def read_clip(src: ClipSource, robot: RobotKinematics, opts: PackOptions) -> Clip:
    """Read and validate one clip (values, quaternion, joint limits; ground is checked after FK)."""
    D = robot.num_dofs
    ncols = 7 + D
    path = src.path
    if src.suffix == ".csv":
        vals, rows = _read_csv(path, ncols)
        fps, file_order, read = src.fps or opts.fps, None, None
    else:
        read = _read_npz(path, ncols) if src.suffix == ".npz" else _read_protomotions(path, ncols)
        vals, file_order = read.values, read.quat_order
        if vals.shape[0] == 0:
            raise MotionPackError(path, 0, 0, "empty clip: no frames")
        if vals.shape[1] != ncols:
            raise MotionPackError(path, 1, min(vals.shape[1], ncols) + 1,
                                  f"expected {ncols} columns for this robot, got {vals.shape[1]}")
        rows = np.arange(1, vals.shape[0] + 1)
        fps = src.fps or (read.fps if read.fps is not None else opts.fps)
    if fps_problem(fps):
        raise MotionPackError(path, 0, 0, f"fps: {fps_problem(fps)}")
    bad = np.argwhere(~np.isfinite(vals))
    if len(bad):
        r, c = bad[0]
        raise MotionPackError(path, rows[r], c + 1, f"non-finite value {vals[r, c]}")
    if vals.shape[0] < 2:
        raise MotionPackError(path, rows[0], 0, "empty clip: need at least 2 frames")
    order = src.quat_order or file_order or opts.quat_order  # a manifest entry, the format, the option
    q = vals[:, 3:7]
    norms = np.linalg.norm(q, axis=1)
    zero = np.nonzero(norms < 1e-6)[0]
    if len(zero):
        raise MotionPackError(path, rows[zero[0]], 4, "zero-norm root quaternion")
    off = np.nonzero(np.abs(norms - 1.0) > opts.quat_norm_tol)[0]
    if len(off):
        r = off[0]
        raise MotionPackError(
            path, rows[r], 4, f"root quaternion norm {norms[r]:.4f} is not 1 (tolerance {opts.quat_norm_tol}): "
            "are the columns aligned (root x y z, quaternion, joints)?")
    q = q / norms[:, None]
    if order == "xyzw":
        q = q[:, [3, 0, 1, 2]]
    elif order != "wxyz":
        raise MotionPackError(path, 0, 0, f"unknown quaternion order {order!r}")
    q = quat_make_continuous(q)
    dof_in = vals[:, 7:]
    lo = robot.joint_lower[robot.qpos_to_input]
    hi = robot.joint_upper[robot.qpos_to_input]
    viol = np.maximum(lo - dof_in, dof_in - hi)
    over = np.argwhere(viol > opts.joint_limit_tol)
    if len(over):
        r, j = over[0]
        name = robot.input_joint_names[j]
        raise MotionPackError(
            path,
            rows[r],
            8 + j,
            f"joint {name} = {dof_in[r, j]:.4f} is outside its range "
            f"[{lo[j]:.4f}, {hi[j]:.4f}] by more than {opts.joint_limit_tol} rad",
        )
    warnings = []
    over = np.argwhere(viol > 0.0)
    if len(over):  # within the tolerance: clamp, so that no reset starts past a joint limit
        r, j = np.unravel_index(np.argmax(np.where(viol > 0.0, viol, -np.inf)), viol.shape)
        warnings.append(
            f"{path}: {len(over)} joint value(s) up to {opts.joint_limit_tol} rad outside their range were clamped "
            f"into it (largest: {robot.input_joint_names[j]} by {viol[r, j]:.4f} rad at row {rows[r]})")
        dof_in = np.clip(dof_in, lo, hi)
    qpos = np.concatenate([vals[:, :3], q, dof_in[:, robot.input_to_qpos]], axis=1)
    clip = Clip(src.name, float(fps), qpos, src.weight, str(path), rows, order, warnings)
    if read is not None:
        clip.notes = [f"{path}: {n}" for n in read.notes]
        clip.file_body_pos = read.body_pos
    if opts.fix_height not in FIX_HEIGHT_MODES:
        raise MotionPackError("--fix-height", 0, 0, f"must be one of {list(FIX_HEIGHT_MODES)}, got {opts.fix_height!r}")
    if opts.fix_height == "all":
        clip.fix_height = "whole"
    elif opts.fix_height == "auto" and src.suffix == PROTOMOTIONS_SUFFIX:
        clip.fix_height = "auto"
    return clip


# ----------------------------------------------------------------------------- processing


def resample(qpos: np.ndarray, fps: float, target_fps: float) -> np.ndarray:
    """Resample ``qpos [T, 7 + D]`` (root quat wxyz, sign-continuous) to ``target_fps``:
    lerp for positions and joints, slerp for the root quaternion; the last frame is at or before
    the clip end."""
    T = qpos.shape[0]
    duration = (T - 1) / fps
    n = int(math.floor(duration * target_fps + 1e-6)) + 1
    t = np.arange(n) / target_fps * fps  # in source frames
    i0 = np.clip(np.floor(t).astype(int), 0, T - 1)
    i1 = np.minimum(i0 + 1, T - 1)
    w = np.clip(t - i0, 0.0, 1.0)[:, None]
    out = (1.0 - w) * qpos[i0] + w * qpos[i1]
    out[:, 3:7] = quat_slerp(qpos[i0, 3:7], qpos[i1, 3:7], w)
    return out


def longest_run(mask: np.ndarray) -> tuple[int, int]:
    """``(start, stop)`` of the longest stretch of consecutive True in the 1-D ``mask`` (``(0, 0)``: none)."""
    edges = np.diff(np.concatenate([[0], mask.astype(np.int8), [0]]))
    starts, stops = np.nonzero(edges == 1)[0], np.nonzero(edges == -1)[0]
    if not len(starts):
        return 0, 0
    i = int(np.argmax(stops - starts))
    return int(starts[i]), int(stops[i])


def airborne_seconds(lowest_z: np.ndarray, dt: float, opts: PackOptions) -> float:
    """Length in s of the longest stretch of frames with no geometry within ``contact_height`` of the floor
    (``lowest_z [T]``: each frame's lowest collision geometry)."""
    a, b = longest_run(lowest_z > opts.contact_height)
    return (b - a) * dt


def orientation_stats(fk: dict[str, np.ndarray], opts: PackOptions) -> tuple[float, float, float]:
    """Fractions of frames with the root body upside down (its z axis pointing down), floating (lowest
    collision geom above ``float_height``) and sunk (below ``-ground_tol``), from :meth:`RobotKinematics.forward`."""
    qb = fk["body_quat"][:, 0]
    up_z = 1.0 - 2.0 * (qb[:, 1] ** 2 + qb[:, 2] ** 2)  # world z of the root body's z axis (wxyz)
    low = fk["lowest_z"]
    return float(np.mean(up_z < 0.0)), float(np.mean(low > opts.float_height)), float(np.mean(low < -opts.ground_tol))


def _other_order(qpos: np.ndarray, order: str) -> np.ndarray:
    """``qpos`` with the root quaternion read from the same input columns in the other order."""
    alt = qpos.copy()
    alt[:, 3:7] = qpos[:, [4, 5, 6, 3]] if order == "xyzw" else qpos[:, [6, 3, 4, 5]]
    return alt


def _check_orientation(clip: Clip, qpos: np.ndarray, fk: dict, robot: RobotKinematics, opts: PackOptions) -> None:
    """Refuse a clip whose root orientation is implausible (mostly upside down, floating or sunk) when the
    other quaternion order is clearly plausible; warn when neither is."""
    upside, floating, sunk = orientation_stats(fk, opts)
    first_low = float(fk["lowest_z"][0])
    if max(upside, floating, sunk) <= 0.5 and first_low <= opts.float_height:
        return
    what = (f"{robot.body_names[0]} upside down in {upside:.0%} of the frames, lowest geometry more than "
            f"{opts.float_height} m above the floor in {floating:.0%} and more than {opts.ground_tol} m below it "
            f"in {sunk:.0%}")
    other = "xyzw" if clip.quat_order == "wxyz" else "wxyz"
    if max(upside, floating, sunk) > 0.5 and max(orientation_stats(
            robot.forward(_other_order(qpos, clip.quat_order)), opts)) <= 0.1:
        raise MotionPackError(
            clip.source, 0, 4, f"implausible root orientation with quaternion order {clip.quat_order} ({what}); "
            f"read as {other} the clip is plausible: pack it with --quat-order {other} (or quat_order: {other} "
            "in the manifest)")
    if not opts.allow_airborne and (floating > 0.5 or first_low > opts.float_height):
        raise MotionPackError(
            clip.source, int(clip.rows[0]) if len(clip.rows) else 0, 3,
            f"not on the ground: the lowest geometry is {first_low:.3f} m above the floor at the first frame and more "
            f"than {opts.float_height} m above it in {floating:.0%} of the frames; fix the root height, or pack "
            "with --allow-airborne if the clip is meant to start in the air")
    if max(upside, floating, sunk) <= 0.5:
        return
    clip.warnings.append(f"{clip.source}: implausible root orientation ({what}); check the quaternion order and "
                         "the root height")


def _lift(qpos: np.ndarray, fk: dict[str, np.ndarray], dz) -> np.ndarray:
    """``qpos [T, 7 + D]`` raised by ``dz`` (m; a scalar or one per frame ``[T]``), with the kinematics ``fk`` of
    :meth:`RobotKinematics.forward` moved along in place."""
    dz = np.asarray(dz, dtype=np.float64)
    per_body = dz[:, None] if dz.ndim else dz
    qpos = qpos.copy()
    qpos[:, 2] += dz
    fk["body_pos"][:, :, 2] += per_body
    fk["foot_lowest_z"] += per_body
    fk["lowest_z"] = fk["lowest_z"] + dz
    return qpos


def process_clip(clip: Clip, robot: RobotKinematics, opts: PackOptions) -> dict[str, np.ndarray]:
    """Frame arrays (shard field name → float32/uint8 array) for one validated clip.

    Refuses a clip read with the wrong quaternion order (see :func:`_check_orientation`) or with geometry
    more than ``ground_tol`` below the floor; lifts frames whose geometry is between ``ground_slack`` and
    ``ground_tol`` below it onto the floor (a warning in ``clip.warnings``)."""
    qpos, fps = clip.qpos, clip.fps
    src_fps = clip.fps
    if opts.target_fps and abs(opts.target_fps - fps) > 1e-9:
        qpos = resample(qpos, fps, opts.target_fps)
        if qpos.shape[0] < 2:
            raise MotionPackError(clip.source, 0, 0, f"resampled to --target-fps {opts.target_fps:g} the "
                                  f"{(clip.qpos.shape[0] - 1) / fps:.3f} s clip keeps {qpos.shape[0]} frame; a clip "
                                  "needs at least 2")
        fps = float(opts.target_fps)
        rows = None
    else:
        rows = clip.rows

    def file_row(t: int) -> int:
        if rows is not None:
            return int(rows[t])
        return int(clip.rows[min(int(round(t * src_fps / fps)), len(clip.rows) - 1)])

    clip.fps = fps
    dt = 1.0 / fps
    fk = robot.forward(qpos)
    _check_orientation(clip, qpos, fk, robot, opts)
    shift, raised = -float(fk["lowest_z"].min()), 0.0
    if clip.fix_height != "none" and abs(shift) > opts.ground_slack:  # on the floor within the slack: as it is
        frame_lift = np.maximum(-fk["lowest_z"], 0.0)
        airborne_if_shifted = airborne_seconds(fk["lowest_z"] + shift, dt, opts)
        if (clip.fix_height == "auto" and airborne_if_shifted > opts.max_airborne_s
                and airborne_seconds(fk["lowest_z"] + frame_lift, dt, opts) <= opts.max_airborne_s):
            # a clip of which only a part sinks (a crouch on tiptoe) would float elsewhere (its run) if raised
            # whole: lift each sinking frame just onto the floor (continuous in the frame's depth: no step in the root)
            qpos = _lift(qpos, fk, frame_lift)
            clip.notes.append(f"{clip.source}: {int(np.count_nonzero(frame_lift))} frame(s) that sink (up to "
                              f"{shift:.3f} m) lifted onto the floor one by one: raising the whole clip by "
                              f"{shift:.3f} m would leave it off the floor for {airborne_if_shifted:.2f} s "
                              "(--fix-height auto)")
        else:
            raised = max(shift, 0.0)
            qpos = _lift(qpos, fk, shift)
            clip.notes.append(f"{clip.source}: {'raised' if shift > 0 else 'lowered'} by {abs(shift):.3f} m so "
                              "that its lowest point touches the floor (--fix-height)")
    low = np.nonzero(fk["lowest_z"] < -opts.ground_tol)[0]
    if len(low):
        t = low[0]
        body = robot.body_names[fk["lowest_body"][t]]
        raise MotionPackError(
            clip.source,
            file_row(t),
            1,
            f"body {body} is {-fk['lowest_z'][t]:.3f} m below the ground "
            "(root height wrong? if the clip looks tumbled, try the other --quat-order)",
        )
    lift = np.where(fk["lowest_z"] < -opts.ground_slack, -fk["lowest_z"], 0.0)
    if lift.any():  # a reset must not start with geometry in the floor: lift those frames onto it
        t = int(np.argmax(lift))
        clip.warnings.append(
            f"{clip.source}: {int(np.count_nonzero(lift))} frame(s) with geometry up to {opts.ground_tol} m below "
            f"the floor were lifted onto it (deepest: {robot.body_names[fk['lowest_body'][t]]} {lift[t]:.3f} m at "
            f"row {file_row(t)})")
        qpos = _lift(qpos, fk, lift)
    airborne = longest_run(fk["lowest_z"] > opts.contact_height)
    if (airborne[1] - airborne[0]) * dt > opts.max_airborne_s:
        a, b = airborne
        rise = GRAVITY * opts.max_airborne_s ** 2 / 8
        fix = ("fix the root height frame by frame" if not raised else
               f"--fix-height raised the whole clip by {raised:.3f} m: --fix-height none with --ground-tol above "
               f"{raised:.2f} lifts only the frames that sink")
        clip.warnings.append(
            f"{clip.source}: no geometry within {opts.contact_height} m of the floor for {(b - a) * dt:.2f} s (rows "
            f"{file_row(a)}-{file_row(b - 1)}, lowest {float(fk['lowest_z'][a:b].min()):.3f} m; a flight of "
            f"{opts.max_airborne_s:g} s would rise {rise:.1f} m): the clip floats there and a robot cannot push off "
            f"the air to track it; {fix}")
    body_quat = quat_make_continuous(fk["body_quat"])
    body_lin = finite_diff(fk["body_pos"], dt)
    body_ang = angular_velocity(body_quat, dt)
    root_quat = quat_make_continuous(qpos[:, 3:7])
    arrays = {
        "root_pos": qpos[:, :3],
        "root_quat": root_quat,
        "root_lin_vel_w": body_lin[:, 0],
        "root_ang_vel_w": body_ang[:, 0],
        "dof_pos": qpos[:, 7:],
        "dof_vel": finite_diff(qpos[:, 7:], dt),
        "body_pos_w": fk["body_pos"],
        "body_quat_w": body_quat,
        "body_lin_vel_w": body_lin,
        "body_ang_vel_w": body_ang,
    }
    for name, values in arrays.items():  # speeds and positions no body reaches: a wrong fps or garbage rows
        problem = field_problem(name, values)
        if problem:
            t, what = problem
            raise MotionPackError(clip.source, file_row(t), 0, f"{name} at {fps:g} fps reaches {what} (is the "
                                  "frame rate right? --fps, or fps in the manifest / NPZ)")
    if robot.foot_body_ids:
        fidx = np.array(robot.foot_body_ids) - 1
        speed = np.linalg.norm(body_lin[:, fidx], axis=-1)
        arrays["contacts"] = contact_labels(fk["foot_lowest_z"], speed, opts.contact_height, opts.contact_speed)
    return {k: (v if v.dtype == np.uint8 else v.astype(np.float32)) for k, v in arrays.items()}


# ----------------------------------------------------------------------------- writing


@dataclass
class PackResult:
    out_dir: Path
    shards: list[Path]
    num_motions: int
    num_frames: int
    seconds: float
    warnings: list[str] = field(default_factory=list)  # repairs made while packing, one line each
    notes: list[str] = field(default_factory=list)  # what the readers found (skipped entries, body agreement)


def check_body_agreement(clip: Clip, robot: RobotKinematics) -> None:
    """A note in ``clip.notes``: how far the robot's kinematics of the read frames are from the file's own world
    body positions (when the file has them)."""
    if clip.file_body_pos is not None:
        fk = robot.forward(clip.qpos, with_ground=False)
        clip.notes.append(f"{clip.source}: {body_agreement(clip.file_body_pos, fk['body_pos'], robot.body_names)}")


def mirrored_clip(clip: Clip, robot: RobotKinematics, opts: PackOptions) -> Clip:
    """``clip``'s left-right mirror image (:mod:`simppo.motion.mirror`), named ``<name>_mirror``."""
    if robot.mirror_partner is None:
        raise MotionPackError("--mirror", 0, 0, f"robot {robot.name} has no mirror map (mirror_pairs and "
                              "mirror_negate in its config)")
    qpos = mirror_qpos(clip.qpos, robot.mirror_partner, robot.mirror_sign)
    dof = qpos[:, 7:]
    over = np.argwhere(np.maximum(robot.joint_lower - dof, dof - robot.joint_upper) > opts.joint_limit_tol)
    if len(over):  # the robot's ranges are not symmetric where the map says they are
        r, j = over[0]
        raise MotionPackError(clip.source, int(clip.rows[r]), 0, f"mirror image: joint {robot.joint_names[j]} = "
                              f"{dof[r, j]:.4f} is outside its range; check the robot's mirror map")
    qpos[:, 7:] = np.clip(dof, robot.joint_lower, robot.joint_upper)
    # every property of the clip (fps, weight, rows, fix_height, ...) holds for its image; what the reader found in the
    # file (its notes, its own body positions) and the repairs made to it do not
    return dataclasses.replace(clip, name=f"{clip.name}_mirror", qpos=qpos, warnings=[], notes=[],
                               file_body_pos=None)


def pack_shard(path: Path, sources: list[ClipSource], robot: RobotKinematics, opts: PackOptions) -> dict:
    """Read, check and process ``sources`` and write them as the shard ``path``. Returns the shard's index entry
    (``file``, ``num_motions``, ``num_frames``, ``names_digest``), the ``robot_digest`` and the ``warnings`` and
    ``notes`` of its clips (plain types: the result crosses process boundaries and is kept for ``--resume``)."""
    metas, chunks, warnings, notes = [], [], [], []
    start = 0
    for src in sources:
        clip = read_clip(src, robot, opts)
        check_body_agreement(clip, robot)
        for c in (clip, mirrored_clip(clip, robot, opts)) if opts.mirror else (clip,):
            arrays = process_clip(c, robot, opts)  # may add warnings (repairs) to the clip
            T = arrays["root_pos"].shape[0]
            metas.append(MotionMeta(c.name, c.fps, start, T, c.weight, Path(c.source).name))
            chunks.append(arrays)
            start += T
            warnings.extend(c.warnings)
            notes.extend(c.notes)
    header = ShardHeader(robot=robot.name, joint_names=robot.joint_names, body_names=robot.body_names,
                         contact_bodies=list(robot.feet), motions=metas)
    write_shard(path, header, {k: np.concatenate([c[k] for c in chunks], axis=0) for k in chunks[0]})
    entry = {"file": path.name, "num_motions": len(metas), "num_frames": start, "names_digest": header.names_digest}
    return {"entry": entry, "robot_digest": header.robot_digest, "warnings": warnings, "notes": notes}


@functools.cache
def packing_code_digest() -> str:
    """Digest of the source of the code that turns a clip into a shard's arrays (the ``simppo.motion`` and
    ``simppo.robot`` packages): a ``--resume`` after an upgrade of simppo redoes the shards, whose repairs may have
    changed, rather than mixing them with the new ones."""
    h = hashlib.sha256()
    for package in (Path(__file__).parent, Path(__file__).parents[1] / "robot"):
        for src in sorted(package.glob("*.py")):
            h.update(src.name.encode() + b"\0" + src.read_bytes())
    return h.hexdigest()


def _signature(sources: list[ClipSource], robot: RobotKinematics, opts: PackOptions) -> str:
    """Digest of what a shard is made from: its inputs (path, size, modification time and how they are read), the
    robot, the options that change the arrays and the packing code (:func:`packing_code_digest`)."""
    h = hashlib.sha256()
    options = {k: v for k, v in dataclasses.asdict(opts).items() if k not in ("workers", "resume", "progress")}
    h.update(json.dumps([FORMAT_VERSION, packing_code_digest(), robot.name, robot.joint_names, robot.body_names,
                         options], sort_keys=True, default=str).encode())
    for s in sources:
        st = s.path.stat()
        h.update(json.dumps([str(s.path.resolve()), s.name, s.weight, s.fps, s.quat_order, s.format, st.st_size,
                             st.st_mtime_ns]).encode())
    return h.hexdigest()


def write_pack(tmp: Path, sources: list[ClipSource], robot: RobotKinematics, opts: PackOptions,
               warnings: list[str], notes: list[str]) -> tuple[list[str], int]:
    """The shards (``opts.max_motions_per_shard`` clips each, written by :func:`pack_shard` in ``opts.workers``
    processes) and ``index.json`` of a pack, in ``tmp``. Returns the shard file names and the frame count."""
    per = max(1, int(opts.max_motions_per_shard))
    groups = [sources[s0:s0 + per] for s0 in range(0, len(sources), per)]
    jobs = [ShardJob(f"shard_{k:05d}{SHARD_SUFFIX}", _signature(g, robot, opts), (g,)) for k, g in enumerate(groups)]
    results = run_shard_jobs(tmp, jobs, pack_shard, (robot, opts), opts.workers, opts.resume, opts.progress)
    for r in results:
        warnings.extend(r["warnings"])
        notes.extend(r["notes"])
    names = {j.file for j in jobs}
    for stale in tmp.iterdir():  # a resumed folder: shards of an earlier, larger input set, and the record
        if stale.name not in names:
            stale.unlink()
    entries = [r["entry"] for r in results]
    total_frames = sum(e["num_frames"] for e in entries)
    index = {
        "format": PACK_FORMAT,
        "version": FORMAT_VERSION,
        "robot": robot.name,
        "robot_digest": results[-1]["robot_digest"],
        "num_motions": sum(e["num_motions"] for e in entries),
        "num_frames": total_frames,
        "shards": entries,
    }
    write_json_atomic(tmp / INDEX_FILE, index)
    return [e["file"] for e in entries], total_frames


def check_replaceable(out_dir: Path, inputs: list[Path]) -> None:
    """Raise :class:`MotionPackError` unless ``--force`` may replace ``out_dir``: it must be a simppo pack (its
    ``index.json`` says so) holding nothing but that index and the shards it names, and it must neither be nor
    contain an input."""
    out = out_dir.resolve()
    for p in inputs:
        q = Path(p).resolve()
        if q == out or out in q.parents:
            raise MotionPackError(out_dir, 0, 0, f"--force would delete the input {p}; choose another --out")
    entries = sorted(out_dir.iterdir())
    if not entries:
        return  # an empty folder: nothing to lose
    index = out_dir / INDEX_FILE
    try:
        shards = {s["file"] for s in read_pack_index(index)["shards"]}
    except ShardFormatError as exc:
        raise MotionPackError(out_dir, 0, 0, "is not a simppo motion pack (no valid index.json: "
                              f"{str(exc).split(': ', 1)[-1]}); --force replaces only a pack; choose another --out"
                              ) from None
    foreign = [e.name for e in entries if e.name != INDEX_FILE and e.name not in shards]
    if foreign:
        raise MotionPackError(out_dir, 0, 0, f"holds {foreign[0]!r}, which is not part of the pack; --force replaces "
                              "only a directory holding a pack alone; move it away or choose another --out")


def verify_pack(sources, robot: str | RobotKinematics | None = None) -> list[tuple[str, int, int]]:
    """Check every shard of ``sources`` (packs, index files, shards) in full: header, every field's CRC-32 and
    the bounds of :mod:`simppo.motion.bounds` (with ``robot``: its joint ranges too). Returns
    ``(shard path, motions, frames)`` per shard; raises a one-line :class:`ShardFormatError` on the first
    problem."""
    from simppo.motion.motion_lib import MotionLib

    limits = None
    if robot is not None:
        rk = robot if isinstance(robot, RobotKinematics) else RobotKinematics.from_robot(robot)
        limits = {n: (float(lo), float(hi)) for n, lo, hi in zip(rk.joint_names, rk.joint_lower, rk.joint_upper,
                                                                  strict=True)}
    out = []
    for path in resolve_shard_paths(sources):
        lib = MotionLib([str(path)], device="cpu", joint_limits=limits)
        out.append((str(path), lib.num_motions, lib.num_frames_total))
    return out


def pack_motions(
    inputs, out_dir, robot: str | RobotKinematics = "g1", force: bool = False, opts: PackOptions | None = None
) -> PackResult:
    """Pack ``inputs`` into ``out_dir`` (shards + ``index.json``), atomically.

    The pack is built in a temporary directory next to ``out_dir`` and moved into place with
    ``os.replace`` only when complete; an existing ``out_dir`` is replaced only with ``force`` (and
    only after the new pack is completely written). On any error or interrupt nothing is left behind.
    """
    t0 = time.perf_counter()
    opts = opts or PackOptions()
    out_dir = Path(out_dir).expanduser().absolute()  # "." has no name to replace; keep symlinks visible
    if opts.quat_order not in ("wxyz", "xyzw"):
        raise MotionPackError("--quat-order", 0, 0, f"must be wxyz or xyzw, got {opts.quat_order!r}")
    for flag, v in (("--fps", opts.fps), ("--target-fps", opts.target_fps)):
        if v is not None and fps_problem(v):
            raise MotionPackError(flag, 0, 0, f"must be in [{MIN_FPS:g}, {MAX_FPS:g}], got {v:g}")
    for flag, v in (("--joint-limit-tol", opts.joint_limit_tol), ("--ground-tol", opts.ground_tol)):
        if not (math.isfinite(v) and v >= 0):
            raise MotionPackError(flag, 0, 0, f"must be >= 0, got {v}")
    if out_dir.exists() and not out_dir.is_dir():
        raise MotionPackError(out_dir, 0, 0, "exists and is not a directory; choose another --out (a pack is a "
                              "directory)")
    if out_dir.is_symlink():
        raise MotionPackError(out_dir, 0, 0, "is a symbolic link; choose another --out")
    sources = expand_inputs(list(inputs), opts)
    if not sources:
        raise MotionPackError(out_dir, 0, 0, "no input motions")
    if opts.mirror:
        names = {s.name: s for s in sources}
        clash = next((s for s in sources if f"{s.name}_mirror" in names), None)
        if clash:
            raise MotionPackError(clash.path, 0, 0, f"--mirror would name a copy {clash.name}_mirror, which is "
                                  "already a motion's name")
    if out_dir.exists():  # what --force could not replace is refused first: no advice that fails next
        check_replaceable(out_dir, [s.path for s in sources] + [Path(i) for i in inputs])
        if not force:
            raise MotionPackError(out_dir, 0, 0, "output directory exists; pass --force to replace it")
    rk = robot if isinstance(robot, RobotKinematics) else RobotKinematics.from_robot(robot)
    warnings: list[str] = []
    notes: list[str] = []
    # complete, or nothing: an old pack stays until the new one is whole
    with staged_directory(out_dir, may_replace=out_dir.exists(), resumable=opts.resume) as tmp:
        shard_paths, total_frames = write_pack(tmp, sources, rk, opts, warnings, notes)
    return PackResult(out_dir, [out_dir / p for p in shard_paths], len(sources) * (2 if opts.mirror else 1),
                      total_frames,
                      time.perf_counter() - t0, warnings, notes)
