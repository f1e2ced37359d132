"""simppo motion shard files: one binary file per shard, header JSON + contiguous aligned arrays.

Layout (all integers little-endian; see ``docs/motion_format.md``)::

    offset 0   8 bytes   magic  b"SIMPPOMS"
    offset 8   uint32    format version (FORMAT_VERSION)
    offset 12  uint32    CRC-32 of the H header bytes
    offset 16  uint64    header length H in bytes
    offset 24  H bytes   header, UTF-8 JSON
    ...        padding   zeros up to the next multiple of ALIGN
    field arrays, each C-contiguous, starting at a multiple of ALIGN, at the offsets named in the header

Opening a shard (:func:`open_shard`) reads the 24-byte preamble and the header only; the arrays
are exposed as read-only ``np.memmap`` views that touch the file only when indexed. Every field's bytes
carry a CRC-32 in the header (``fields[name]["crc32"]``) and the header's bytes one in the preamble:
:meth:`Shard.read_verified` checks a field when it is first read in full (as ``MotionLib`` does), so damage
anywhere in a shard is a one-line :class:`ShardFormatError` instead of training on it.

Frame fields (axis 0 = frame, motions concatenated in header order; world frame, quaternions wxyz,
float32). Motion body ``b`` is MuJoCo body id ``b + 1`` (the world body 0 is excluded), so
``B = nbody - 1``; ``D`` = number of hinge/slide joints after the free root joint, in MuJoCo
qpos order (listed in the header as ``joint_names``); ``C`` = number of foot bodies (``contact_bodies``)::

    root_pos        [T, 3]      root_quat       [T, 4]
    root_lin_vel_w  [T, 3]      root_ang_vel_w  [T, 3]      (= body 0's velocities)
    dof_pos         [T, D]      dof_vel         [T, D]
    body_pos_w      [T, B, 3]   body_quat_w     [T, B, 4]
    body_lin_vel_w  [T, B, 3]   body_ang_vel_w  [T, B, 3]
    contacts        [T, C]      uint8 0/1 (only when C > 0)
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from simppo.utils.files import atomic_write, atomic_write_text

MAGIC = b"SIMPPOMS"
FORMAT_VERSION = 2  # 2: CRC-32 of the header and of every field
ALIGN = 64
SHARD_SUFFIX = ".sms"
_PREAMBLE = struct.Struct("<8sIIQ")  # magic, version, header CRC-32, header length

#: Per-frame fields: name -> (dtype, trailing shape as a function of (B, D, C)).
FRAME_FIELDS: dict[str, tuple[str, str]] = {
    "root_pos": ("float32", "3"),
    "root_quat": ("float32", "4"),
    "root_lin_vel_w": ("float32", "3"),
    "root_ang_vel_w": ("float32", "3"),
    "dof_pos": ("float32", "D"),
    "dof_vel": ("float32", "D"),
    "body_pos_w": ("float32", "B,3"),
    "body_quat_w": ("float32", "B,4"),
    "body_lin_vel_w": ("float32", "B,3"),
    "body_ang_vel_w": ("float32", "B,3"),
    "contacts": ("uint8", "C"),
}


class ShardFormatError(ValueError):
    """A file is not a readable simppo motion shard."""


def names_digest(names) -> str:
    """Stable SHA-256 hex digest of an ordered list of names (motion, joint or body names)."""
    h = hashlib.sha256()
    for n in names:
        b = str(n).encode("utf-8")
        h.update(len(b).to_bytes(4, "little"))
        h.update(b)
    return h.hexdigest()


def robot_digest(joint_names, body_names) -> str:
    """Digest identifying a robot's kinematic naming: joint names then body names, in file order."""
    return names_digest(["joints:"] + list(joint_names) + ["bodies:"] + list(body_names))


def field_shape(name: str, num_frames: int, num_bodies: int, num_dofs: int, num_contacts: int) -> tuple:
    dims = {"B": num_bodies, "D": num_dofs, "C": num_contacts}
    tail = tuple(dims[s] if s in dims else int(s) for s in FRAME_FIELDS[name][1].split(","))
    return (num_frames,) + tail


def crc32(data, value: int = 0) -> int:
    """CRC-32 (zlib's) of a bytes-like object or a C-contiguous array's bytes, continuing from ``value``."""
    return zlib.crc32(memoryview(data).cast("B"), value) & 0xFFFFFFFF


def _zeros_crc32(nbytes: int) -> int:
    """CRC-32 of ``nbytes`` zero bytes (a sparse, reserved field), without allocating them all."""
    chunk = bytes(min(nbytes, 16 * 2**20))
    value, left = 0, nbytes
    while left > 0:
        n = min(left, len(chunk))
        value = zlib.crc32(chunk[:n] if n < len(chunk) else chunk, value)
        left -= n
    return value & 0xFFFFFFFF


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


@dataclass
class MotionMeta:
    """One motion inside a shard: frames ``[start, start + num_frames)`` of every field."""

    name: str
    fps: float
    start: int
    num_frames: int
    weight: float = 1.0
    source: str = ""

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "fps": float(self.fps),
            "start": int(self.start),
            "num_frames": int(self.num_frames),
            "weight": float(self.weight),
            "source": self.source,
        }


@dataclass
class ShardHeader:
    """Everything in a shard file except the arrays."""

    robot: str
    joint_names: list[str]
    body_names: list[str]
    contact_bodies: list[str]
    motions: list[MotionMeta]
    fields: dict[str, dict] = field(default_factory=dict)  # name -> {dtype, shape, offset, nbytes}
    version: int = FORMAT_VERSION
    file_size: int = 0

    @property
    def num_frames(self) -> int:
        return sum(m.num_frames for m in self.motions)

    @property
    def motion_names(self) -> list[str]:
        return [m.name for m in self.motions]

    @property
    def names_digest(self) -> str:
        return names_digest(self.motion_names)

    @property
    def robot_digest(self) -> str:
        return robot_digest(self.joint_names, self.body_names)

    def layout(self) -> None:
        """Fill ``fields`` (shapes, dtypes, aligned byte offsets) and ``file_size`` from the motions."""
        T, B, D, C = self.num_frames, len(self.body_names), len(self.joint_names), len(self.contact_bodies)
        names = [n for n in FRAME_FIELDS if n != "contacts" or C > 0]
        fields = {
            n: {
                "dtype": FRAME_FIELDS[n][0],
                "shape": list(field_shape(n, T, B, D, C)),
                "offset": 0,
                "nbytes": 0,
                "crc32": int(self.fields.get(n, {}).get("crc32", 0)),
            }
            for n in names
        }
        # the header's own size depends on the offsets; iterate until the data start is stable
        data_start = 0
        while True:
            off = data_start
            for f in fields.values():
                f["offset"] = off
                f["nbytes"] = int(np.dtype(f["dtype"]).itemsize * int(np.prod(f["shape"])))
                off = _align(off + f["nbytes"])
            self.fields = fields
            self.file_size = off
            need = _align(_PREAMBLE.size + len(self.to_bytes()))
            if need <= data_start:
                break
            data_start = need

    def to_json(self) -> dict:
        return {
            "format": "simppo-motion-shard",
            "version": self.version,
            "robot": self.robot,
            "robot_digest": self.robot_digest,
            "joint_names": list(self.joint_names),
            "body_names": list(self.body_names),
            "body_index_note": "motion body b = MuJoCo body id b + 1 (world body excluded)",
            "contact_bodies": list(self.contact_bodies),
            "names_digest": self.names_digest,
            "num_motions": len(self.motions),
            "num_frames": self.num_frames,
            "motions": [m.to_json() for m in self.motions],
            "fields": self.fields,
            "file_size": self.file_size,
        }

    def to_bytes(self) -> bytes:
        return json.dumps(self.to_json(), separators=(",", ":")).encode("utf-8")


class Shard:
    """An opened shard: header in memory, arrays memory-mapped on first access (read-only)."""

    def __init__(self, path: str | os.PathLike, header: ShardHeader):
        self.path = str(path)
        self.header = header
        self._maps: dict[str, np.ndarray] = {}

    def __repr__(self) -> str:
        return f"Shard({self.path!r}, motions={len(self.header.motions)}, frames={self.header.num_frames})"

    def has(self, name: str) -> bool:
        return name in self.header.fields

    def array(self, name: str) -> np.ndarray:
        """Read-only memmap of one field, shape as in the header (pages load on access)."""
        if name not in self._maps:
            f = self.header.fields[name]
            shape = tuple(f["shape"])
            if int(np.prod(shape)) == 0:
                self._maps[name] = np.zeros(shape, dtype=f["dtype"])
            else:
                self._maps[name] = np.memmap(self.path, dtype=f["dtype"], mode="r", offset=f["offset"], shape=shape)
        return self._maps[name]

    def _checksum_error(self, name: str, got: int) -> ShardFormatError:
        want = int(self.header.fields[name].get("crc32", 0))
        return ShardFormatError(f"{self.path}: field {name}: checksum mismatch (crc32 {got:08x}, the header says "
                                f"{want:08x}): the file is damaged; re-pack it or restore it")

    def read_verified(self, name: str) -> np.ndarray:
        """A copy of field ``name`` whose bytes match the CRC-32 in the header; a one-line
        :class:`ShardFormatError` naming the file and the field when they do not (a damaged file)."""
        f = self.header.fields[name]
        data = np.array(self.array(name), dtype=f["dtype"], order="C")
        got = crc32(data)
        if got != f.get("crc32"):
            raise self._checksum_error(name, got)
        return data

    def verified_chunks(self, name: str, max_bytes: int = 4 * 2**20):
        """``(first frame, array)`` pieces of field ``name``, read from the file into one reused buffer of at most
        ``max_bytes`` (not through a mapping: nothing of the file stays resident; each piece is valid until the
        next); after the last piece the field's CRC-32 is checked (one-line :class:`ShardFormatError` as
        :meth:`read_verified`)."""
        f = self.header.fields[name]
        shape, dtype = tuple(f["shape"]), np.dtype(f["dtype"])
        row = dtype.itemsize * int(np.prod(shape[1:], dtype=np.int64))
        rows_per = max(1, max_bytes // max(row, 1))
        buf = memoryview(bytearray(min(rows_per, shape[0]) * row))
        value = 0
        with open(self.path, "rb") as fh:
            for t0 in range(0, shape[0], rows_per):
                n = min(rows_per, shape[0] - t0)
                data = buf[:n * row]
                if os.preadv(fh.fileno(), [data], int(f["offset"]) + t0 * row) != n * row:
                    raise ShardFormatError(f"{self.path}: field {name}: the file ends early (truncated)")
                value = crc32(data, value)
                yield t0, np.frombuffer(data, dtype=dtype).reshape((n,) + shape[1:])
        if value != f.get("crc32"):
            raise self._checksum_error(name, value)

    def verify(self) -> None:
        """Check every field's CRC-32 (reads the whole file)."""
        for name in self.header.fields:
            self.read_verified(name)


#: A header longer than this is refused before it is read (real headers are a few KiB per motion).
MAX_HEADER_BYTES = 64 * 2**20


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _check_names(path, d: dict, key: str) -> list[str]:
    v = d.get(key)
    if not isinstance(v, list) or not all(isinstance(n, str) for n in v):
        raise ShardFormatError(f"{path}: corrupt header ({key!r} must be a list of names)")
    return v


def _parse_header(path, d) -> ShardHeader:
    """A :class:`ShardHeader` from the decoded JSON, every key checked for its type (one-line errors)."""
    if not isinstance(d, dict) or d.get("format") != "simppo-motion-shard":
        raise ShardFormatError(f"{path}: corrupt header (not a simppo-motion-shard JSON object)")
    joints, bodies = _check_names(path, d, "joint_names"), _check_names(path, d, "body_names")
    contacts = _check_names(path, d, "contact_bodies")
    if not isinstance(d.get("robot"), str):
        raise ShardFormatError(f"{path}: corrupt header ('robot' must be a string)")
    motions = d.get("motions")
    if not isinstance(motions, list) or not motions:
        raise ShardFormatError(f"{path}: corrupt header ('motions' must be a non-empty list)")
    metas = []
    start = 0
    for i, m in enumerate(motions):
        where = f"{path}: motion {i}"
        if not isinstance(m, dict) or set(m) - {"name", "fps", "start", "num_frames", "weight", "source"}:
            raise ShardFormatError(f"{where}: corrupt header entry")
        name, fps, weight = m.get("name"), m.get("fps"), m.get("weight", 1.0)
        if not isinstance(name, str) or not isinstance(m.get("source", ""), str):
            raise ShardFormatError(f"{where}: 'name' and 'source' must be strings")
        if not _is_number(fps) or not math.isfinite(fps) or fps <= 0:
            raise ShardFormatError(f"{where} ({name}): fps must be a number > 0, got {fps!r}")
        if not _is_number(weight) or not math.isfinite(weight) or weight < 0:
            raise ShardFormatError(f"{where} ({name}): weight must be a number >= 0, got {weight!r}")
        n = m.get("num_frames")
        if not _is_int(n) or n < 1:
            raise ShardFormatError(f"{where} ({name}): num_frames must be an integer >= 1, got {n!r}")
        if m.get("start") != start:
            raise ShardFormatError(f"{where} ({name}): start {m.get('start')!r} != {start} (motions must be "
                                   "consecutive)")
        metas.append(MotionMeta(name, float(fps), start, n, float(weight), m.get("source", "")))
        start += n
    fields = d.get("fields")
    if not isinstance(fields, dict) or not all(isinstance(f, dict) for f in fields.values()):
        raise ShardFormatError(f"{path}: corrupt header ('fields' must map names to objects)")
    version, file_size = d.get("version"), d.get("file_size")
    if not _is_int(version) or not _is_int(file_size):
        raise ShardFormatError(f"{path}: corrupt header ('version' and 'file_size' must be integers)")
    return ShardHeader(d["robot"], joints, bodies, contacts, metas, dict(fields), version, file_size)


def _check_layout(path, h: ShardHeader, data_start: int, size: int) -> None:
    """Every field present with the dtype and shape that ``num_frames`` and the names imply, aligned,
    inside the file and not overlapping another; ``file_size`` not beyond the end of the file."""
    if h.file_size > size:
        raise ShardFormatError(f"{path}: truncated ({size} bytes, header says {h.file_size})")
    T, B, D, C = h.num_frames, len(h.body_names), len(h.joint_names), len(h.contact_bodies)
    expected = [n for n in FRAME_FIELDS if n != "contacts" or C > 0]
    if sorted(h.fields) != sorted(expected):
        raise ShardFormatError(f"{path}: corrupt header (fields {sorted(h.fields)}, expected {sorted(expected)})")
    spans = []
    for name in expected:
        f = h.fields[name]
        shape, dtype, offset, nbytes = f.get("shape"), f.get("dtype"), f.get("offset"), f.get("nbytes")
        want = list(field_shape(name, T, B, D, C))
        if shape != want or dtype != FRAME_FIELDS[name][0]:
            raise ShardFormatError(f"{path}: field {name}: {dtype} {shape} in the header, expected "
                                   f"{FRAME_FIELDS[name][0]} {want} for {T} frames")
        if not (_is_int(offset) and _is_int(nbytes)) or nbytes != np.dtype(dtype).itemsize * math.prod(want):
            raise ShardFormatError(f"{path}: field {name}: bad offset/nbytes {offset!r}/{nbytes!r}")
        if not _is_int(f.get("crc32")) or not 0 <= f["crc32"] < 2**32:
            raise ShardFormatError(f"{path}: field {name}: missing or bad crc32 {f.get('crc32')!r}")
        if offset % ALIGN or offset < data_start or offset + nbytes > h.file_size:
            raise ShardFormatError(f"{path}: field {name}: bytes [{offset}, {offset + nbytes}) are not aligned "
                                   f"data inside the file's {h.file_size} bytes")
        spans.append((offset, offset + nbytes, name))
    spans.sort()
    for (_, end, a), (start, _, b) in zip(spans, spans[1:], strict=False):
        if start < end:
            raise ShardFormatError(f"{path}: fields {a} and {b} overlap")


def read_header(path: str | os.PathLike) -> ShardHeader:
    """Read and check a shard's preamble and JSON header; never touches the arrays.

    The header is validated against the file: every field's dtype and shape follow from ``num_frames``
    and the names, lie inside the file and do not overlap; each motion has ``fps > 0`` and frames.
    Any problem is a one-line :class:`ShardFormatError` naming the file.
    """
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            pre = fh.read(_PREAMBLE.size)
            if len(pre) < _PREAMBLE.size:
                raise ShardFormatError(f"{path}: too short to be a motion shard")
            magic, version, header_crc, hlen = _PREAMBLE.unpack(pre)
            if magic != MAGIC:
                raise ShardFormatError(f"{path}: not a simppo motion shard (bad magic {magic!r})")
            if version != FORMAT_VERSION:
                raise ShardFormatError(
                    f"{path}: shard format version {version}, this simppo reads "
                    f"version {FORMAT_VERSION}; re-pack with simppo-pack"
                )
            if hlen > size - _PREAMBLE.size:
                raise ShardFormatError(f"{path}: truncated header ({hlen} bytes announced, file has {size})")
            if hlen > MAX_HEADER_BYTES:
                raise ShardFormatError(f"{path}: header of {hlen} bytes is larger than {MAX_HEADER_BYTES}")
            raw = fh.read(hlen)
    except FileNotFoundError:
        raise ShardFormatError(f"{path}: no such shard file") from None
    except IsADirectoryError:
        raise ShardFormatError(f"{path}: is a directory, not a shard file") from None
    except OSError as e:
        raise ShardFormatError(f"{path}: unreadable ({e.strerror or e})") from None
    if len(raw) != hlen:
        raise ShardFormatError(f"{path}: truncated header")
    if crc32(raw) != header_crc:
        raise ShardFormatError(f"{path}: header checksum mismatch (crc32 {crc32(raw):08x}, the preamble says "
                               f"{header_crc:08x}): the file is damaged; re-pack it or restore it")
    try:
        d = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as e:
        raise ShardFormatError(f"{path}: corrupt header ({str(e).splitlines()[0] if str(e) else type(e).__name__})"
                               ) from None
    header = _parse_header(path, d)
    if header.version != FORMAT_VERSION:
        raise ShardFormatError(f"{path}: header version {header.version} != {FORMAT_VERSION}")
    _check_layout(path, header, _PREAMBLE.size + hlen, size)
    return header


def open_shard(path: str | os.PathLike) -> Shard:
    return Shard(path, read_header(path))


def _write_preamble_and_header(fh, header: ShardHeader) -> None:
    hb = header.to_bytes()
    fh.write(_PREAMBLE.pack(MAGIC, FORMAT_VERSION, crc32(hb), len(hb)))
    fh.write(hb)


def _write_field(fh, header: ShardHeader, name: str, a: np.ndarray) -> None:
    fh.seek(header.fields[name]["offset"])
    fh.write(a.tobytes(order="C"))


def _field_bytes(header: ShardHeader, name: str, arr: np.ndarray) -> np.ndarray:
    f = header.fields[name]
    a = np.ascontiguousarray(arr, dtype=f["dtype"])
    if list(a.shape) != f["shape"]:
        raise ValueError(f"field {name}: shape {list(a.shape)} != {f['shape']}")
    return a


def write_shard(path: str | os.PathLike, header: ShardHeader, arrays: dict[str, np.ndarray] | None) -> Path:
    """Write a shard atomically (temp file next to ``path`` then ``os.replace``).

    ``header.layout()`` is called here. ``arrays`` maps every field in the layout to its array;
    ``arrays=None`` reserves the arrays as a sparse, zero-filled region (used for streaming writers and
    for tests of very large packs).
    """
    header.layout()
    if arrays is not None:
        missing = set(header.fields) - set(arrays)
        if missing:
            raise ValueError(f"missing fields {sorted(missing)}")
        data = {name: _field_bytes(header, name, arrays[name]) for name in header.fields}
        for name, a in data.items():
            header.fields[name]["crc32"] = crc32(a)
    else:
        data = {}
        for f in header.fields.values():
            f["crc32"] = _zeros_crc32(f["nbytes"])
    header.layout()  # the checksums' digits may move the data start

    def write(fh) -> None:
        _write_preamble_and_header(fh, header)
        for name, a in data.items():
            _write_field(fh, header, name, a)
        fh.truncate(header.file_size)

    return atomic_write(path, write)


def write_json_atomic(path: str | os.PathLike, obj) -> None:
    atomic_write_text(path, json.dumps(obj, indent=1) + "\n")
