"""Device-resident reference motions with one-launch interpolation of current and future frames.

All per-frame fields of all loaded motions are concatenated along the frame axis and copied to the
device once at load. Body index ``b`` in every ``body_*`` tensor is MuJoCo body id ``b + 1`` (the
world body is excluded); dofs are in MuJoCo qpos order (``joint_names``).

Hot-path methods (:meth:`MotionLib.sample_motions`, :meth:`MotionLib.sample_times`,
:meth:`MotionLib.get_motion_state`) never synchronise with the host: no ``.item()``, ``.cpu()``,
``.numpy()``, ``.tolist()`` or Python branching on tensor values.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np
import torch
import warp as wp

from simppo.kernels.motion_interp import MotionFrames, MotionQuery, MotionStateWp, interpolate
from simppo.motion.bounds import field_problem, fps_problem
from simppo.motion.format import FRAME_FIELDS, Shard, ShardFormatError
from simppo.motion.frame_map import map_frames
from simppo.motion.index import MotionIndex
from simppo.utils.device import init_warp, resolve_device, torch_stream_scope, warp_device, warp_view

_STATE_FIELDS = (
    "root_pos",
    "root_quat",
    "root_lin_vel_w",
    "root_ang_vel_w",
    "dof_pos",
    "dof_vel",
    "body_pos_w",
    "body_quat_w",
    "body_lin_vel_w",
    "body_ang_vel_w",
)
_VEC_DTYPES = {3: wp.vec3, 4: wp.vec4}
_VEC_FIELDS = {
    "root_pos",
    "root_quat",
    "root_lin_vel_w",
    "root_ang_vel_w",
    "body_pos_w",
    "body_quat_w",
    "body_lin_vel_w",
    "body_ang_vel_w",
}


@dataclass
class MotionState:
    """Reference state at the current time (slot 0 of axis 1) and K future times (slots 1..K).

    ``root_pos [N,F,3]``, ``root_quat [N,F,4]`` (wxyz), ``root_lin_vel_w [N,F,3]``,
    ``root_ang_vel_w [N,F,3]``, ``dof_pos [N,F,D]``, ``dof_vel [N,F,D]``, ``body_pos_w [N,F,B,3]``,
    ``body_quat_w [N,F,B,4]``, ``body_lin_vel_w [N,F,B,3]``, ``body_ang_vel_w [N,F,B,3]``,
    ``contacts [N,F,C]`` float 0/1 (``None`` when the motions have no contact labels); F = 1 + K.
    """

    root_pos: torch.Tensor
    root_quat: torch.Tensor
    root_lin_vel_w: torch.Tensor
    root_ang_vel_w: torch.Tensor
    dof_pos: torch.Tensor
    dof_vel: torch.Tensor
    body_pos_w: torch.Tensor
    body_quat_w: torch.Tensor
    body_lin_vel_w: torch.Tensor
    body_ang_vel_w: torch.Tensor
    contacts: torch.Tensor | None = None
    # private: the query scratch (ids, times, offsets, mask) and the Warp views, bound once per buffer
    _ids32: torch.Tensor | None = field(default=None, repr=False)
    _times32: torch.Tensor | None = field(default=None, repr=False)
    _offsets: torch.Tensor | None = field(default=None, repr=False)
    _mask: torch.Tensor | None = field(default=None, repr=False)
    _contacts_buf: torch.Tensor | None = field(default=None, repr=False)
    _warp: tuple | None = field(default=None, repr=False)

    @property
    def num_envs(self) -> int:
        return self.root_pos.shape[0]

    @property
    def num_slots(self) -> int:
        return self.root_pos.shape[1]

    def tensors(self) -> dict[str, torch.Tensor]:
        """The public fields that are set, by name."""
        return {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if not f.name.startswith("_") and getattr(self, f.name) is not None
        }


class MotionLib:
    """Packed motions on one device.

    Attributes (device tensors): ``motion_start`` int32 [M] (first frame of each motion in the
    concatenated arrays), ``motion_num_frames`` int32 [M], ``motion_dt`` float32 [M] (1/fps),
    ``motion_lengths`` float32 [M] seconds = (num_frames - 1) * dt, ``motion_weights`` float32 [M]
    normalised sampling probabilities, and ``frames``: field name -> tensor [T, ...] (see
    :mod:`simppo.motion.format`). Host metadata: ``motion_names``, ``motion_fps``, ``joint_names``,
    ``body_names``, ``contact_bodies``, ``robot``, ``index`` (:class:`MotionIndex` of the shards loaded).
    """

    def __init__(self, sources: list[str] | MotionIndex, device: str = "cpu", robot_digest: str | None = None,
                 robot_name: str = "the robot", joint_limits: dict[str, tuple[float, float]] | None = None,
                 map_on_cpu: bool = True):
        """``robot_digest``: :func:`~simppo.motion.format.robot_digest` of the robot in use (its joint and
        body names); shards packed for another kinematic naming are refused, naming ``robot_name``.
        ``joint_limits``: joint name → (lower, upper) rad of the robot in use; loaded joint positions beyond them
        (plus :data:`~simppo.motion.bounds.JOINT_LIMIT_TOL`) are refused.

        Every field is checked as it is read: its CRC-32 against the shard header, then the bounds of
        :mod:`simppo.motion.bounds` (unit quaternions, speeds, positions, joint ranges); any failure is a
        one-line :class:`ShardFormatError` naming the file, the field, the motion and the frame.

        ``map_on_cpu``: on the CPU the frames are mapped from disk (:mod:`simppo.motion.frame_map`; only the pages
        read become resident) instead of copied into memory; on a GPU they are one device copy."""
        init_warp()
        self.device = torch.device(resolve_device(device))  # "cuda" → cuda:N, as the tensors report it
        self.wp_device = warp_device(self.device)
        self.index = sources if isinstance(sources, MotionIndex) else MotionIndex.from_sources(sources)
        if not self.index.shards:
            raise ShardFormatError("no motion shards given")
        headers = [self.index.header(i) for i in range(len(self.index.shards))]
        for s, h in zip(self.index.shards, headers, strict=False):
            if h.names_digest != s.names_digest:
                raise ShardFormatError(f"{s.path}: motion names changed since the index was built")
        h0 = headers[0]
        for s, h in zip(self.index.shards, headers, strict=False):
            if h.robot_digest != h0.robot_digest:
                raise ShardFormatError(
                    f"{s.path}: packed for robot {h.robot!r} with different joints/bodies "
                    f"than {self.index.shards[0].path} ({h0.robot!r})"
                )
            if h.contact_bodies != h0.contact_bodies:
                raise ShardFormatError(f"{s.path}: contact bodies differ from the first shard")
        if robot_digest is not None and h0.robot_digest != robot_digest:
            raise ShardFormatError(
                f"{self.index.shards[0].path}: packed for robot {h0.robot!r} whose joint/body names differ from "
                f"{robot_name} (robot digest {h0.robot_digest[:12]} != {robot_digest[:12]}); re-pack the motions "
                "for this robot"
            )
        self.robot = h0.robot
        self.joint_names = list(h0.joint_names)
        self.body_names = list(h0.body_names)
        self.contact_bodies = list(h0.contact_bodies)
        self.num_bodies = len(self.body_names)
        self.num_dofs = len(self.joint_names)
        self.num_contacts = len(self.contact_bodies)

        metas = [m for h in headers for m in h.motions]
        self.num_motions = len(metas)
        self.motion_names = [m.name for m in metas]
        self.motion_fps = [float(m.fps) for m in metas]
        total = sum(h.num_frames for h in headers)
        self.num_frames_total = total

        dev = self.device
        names = [n for n in FRAME_FIELDS if n != "contacts" or self.num_contacts > 0]
        self.mapped_file: str | None = None  # the file the frames are mapped from (CPU), else None
        mapped = map_on_cpu and dev.type == "cpu"
        self.frames: dict[str, torch.Tensor] = {}
        if not mapped:  # device buffers, filled shard by shard and field by field: the host holds one shard's
            for n in names:  # field at a time, never a copy of the whole set
                dt, _ = FRAME_FIELDS[n]
                tail = tuple(headers[0].fields[n]["shape"][1:])
                self.frames[n] = torch.empty((total,) + tail, dtype=torch.from_numpy(np.empty(0, dt)).dtype,
                                             device=dev)
        limits = None
        if joint_limits is not None:
            missing = [j for j in self.joint_names if j not in joint_limits]
            if missing:
                raise ShardFormatError(f"{self.index.shards[0].path}: joints {missing} are not joints of {robot_name}")
            limits = tuple(np.array([joint_limits[j][k] for j in self.joint_names]) for k in (0, 1))
        starts = np.empty(self.num_motions, np.int32)
        shards: list[Shard] = []
        base = 0
        k = 0
        for i, h in enumerate(headers):
            shard = Shard(self.index.shards[i].path, h)
            for m in h.motions:
                problem = fps_problem(m.fps)
                if problem:
                    raise ShardFormatError(f"{shard.path}: motion {m.name}: {problem}")
            for n in names:
                pieces = shard.verified_chunks(n) if mapped else [(0, shard.read_verified(n))]
                problem = None  # raised after the whole field passed its checksum: damage is named as such
                for t0, seg in pieces:
                    found = None if problem else field_problem(n, seg, limits)
                    if found:
                        problem = (found[0] + t0, found[1])
                    if not mapped:
                        self.frames[n][base : base + h.num_frames].copy_(torch.from_numpy(seg))
                if problem:
                    frame, what = problem
                    m = next(m for m in h.motions if m.start <= frame < m.start + m.num_frames)
                    raise ShardFormatError(f"{shard.path}: field {n}: motion {m.name} frame {frame - m.start} "
                                           f"holds {what}; re-pack it with simppo-pack")
            shards.append(shard)
            for m in h.motions:
                starts[k] = base + m.start
                k += 1
            base += h.num_frames
        if mapped:
            maps, self.mapped_file = map_frames(shards, names)
            self.frames = {n: torch.from_numpy(a) for n, a in maps.items()}
        nfr = np.array([m.num_frames for m in metas], np.int32)
        dts = np.array([1.0 / m.fps for m in metas], np.float32)
        weights = np.array([m.weight for m in metas], np.float64)
        if np.any(nfr < 1) or np.any(weights < 0) or weights.sum() <= 0:
            raise ShardFormatError("motions need >= 1 frame, weights >= 0 with a positive sum")

        if self.num_contacts == 0:  # the kernel always takes a contacts array
            self._contacts_dummy = torch.zeros((max(total, 1), 1), dtype=torch.uint8, device=dev)
        self.motion_start = torch.from_numpy(starts).to(dev)
        self.motion_num_frames = torch.from_numpy(nfr).to(dev)
        self.motion_dt = torch.from_numpy(dts).to(dev)
        self.motion_lengths = torch.from_numpy((nfr - 1).astype(np.float32) * dts).to(dev)
        self.motion_weights = torch.from_numpy((weights / weights.sum()).astype(np.float32)).to(dev)
        self._sample_scratch: dict[int, torch.Tensor] = {}

        self.frames_wp = self._bind_frames()

    # ------------------------------------------------------------------ helpers
    def _bind_frames(self) -> MotionFrames:
        lib = MotionFrames()
        lib.start, lib.num_frames = warp_view(self.motion_start), warp_view(self.motion_num_frames)
        lib.dt, lib.length = warp_view(self.motion_dt), warp_view(self.motion_lengths)
        for n in _STATE_FIELDS:
            t = self.frames[n]
            setattr(lib, n, warp_view(t, _VEC_DTYPES[t.shape[-1]] if n in _VEC_FIELDS else None))
        lib.contacts = warp_view(self.frames["contacts"] if self.num_contacts > 0 else self._contacts_dummy)
        lib.num_bodies, lib.num_dofs, lib.num_contacts = self.num_bodies, self.num_dofs, self.num_contacts
        return lib

    @property
    def bytes_per_frame(self) -> int:
        return sum(t[0].numel() * t.element_size() for t in self.frames.values())

    def describe(self) -> str:
        """One line: motions, frames, bytes per frame and in total, and where the frames live."""
        where = f"mapped from {self.mapped_file}" if self.mapped_file else f"one copy on {self.device}"
        total = self.bytes_per_frame * self.num_frames_total
        return (f"{self.num_motions} motions, {self.num_frames_total} frames, {self.bytes_per_frame} bytes per frame, "
                f"{total / 2**20:.1f} MiB ({where})")

    def motion_id(self, name: str) -> int:
        return self.motion_names.index(name)

    def state_dict(self) -> dict:
        return {"index": self.index.state_dict(), "motion_names": list(self.motion_names)}

    # ------------------------------------------------------------------ sampling
    def sample_motions(self, n: int, out: torch.Tensor | None = None) -> torch.Tensor:
        """``n`` motion ids (int32 [n], on device) drawn with probability ``motion_weights``."""
        scratch = self._sample_scratch.get(n)
        if scratch is None:
            scratch = torch.empty(n, dtype=torch.int64, device=self.device)
            self._sample_scratch[n] = scratch
        torch.multinomial(self.motion_weights, n, replacement=True, out=scratch)
        if out is None:
            return scratch.to(torch.int32)
        out.copy_(scratch)
        return out

    def sample_times(
        self, motion_ids: torch.Tensor, truncate_time: float | None = None, out: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Uniform times (float32 [n] seconds) in ``[0, length - truncate_time]`` (clamped at 0).

        ``motion_ids``: int32 or int64 [n] device tensor.
        """
        lengths = self.motion_lengths[motion_ids]
        if truncate_time is not None:
            lengths = (lengths - truncate_time).clamp_(min=0.0)
        if out is None:
            out = torch.empty(lengths.shape, dtype=torch.float32, device=self.device)
        out.uniform_(0.0, 1.0)
        return out.mul_(lengths)

    # ------------------------------------------------------------------ state
    def alloc_state(self, num_envs: int, num_future: int = 0) -> MotionState:
        """Zeroed output buffers for ``num_envs`` envs and ``1 + num_future`` time slots."""
        N, F, B, D, C = num_envs, 1 + num_future, self.num_bodies, self.num_dofs, self.num_contacts
        z = lambda *s: torch.zeros(s, dtype=torch.float32, device=self.device)  # noqa: E731
        st = MotionState(
            root_pos=z(N, F, 3),
            root_quat=z(N, F, 4),
            root_lin_vel_w=z(N, F, 3),
            root_ang_vel_w=z(N, F, 3),
            dof_pos=z(N, F, D),
            dof_vel=z(N, F, D),
            body_pos_w=z(N, F, B, 3),
            body_quat_w=z(N, F, B, 4),
            body_lin_vel_w=z(N, F, B, 3),
            body_ang_vel_w=z(N, F, B, 3),
            contacts=z(N, F, C) if C > 0 else None,
        )
        st.root_quat[..., 0] = 1.0
        st.body_quat_w[..., 0] = 1.0
        st._ids32 = torch.zeros(N, dtype=torch.int32, device=self.device)
        st._times32 = torch.zeros(N, dtype=torch.float32, device=self.device)
        st._offsets = torch.zeros(max(F - 1, 1), dtype=torch.float32, device=self.device)
        st._mask = torch.zeros(N, dtype=torch.bool, device=self.device)
        if C == 0:
            st._contacts_buf = z(N, F, 1)
        return st

    def warp_state(self, out: MotionState) -> MotionStateWp:
        """The :class:`MotionStateWp` view of ``out`` (bound on first use; zero-copy)."""
        return self._warp_views(out)[0]

    def _warp_views(self, out: MotionState) -> tuple[MotionStateWp, MotionQuery]:
        if out._warp is None:
            st = MotionStateWp()
            for n in _STATE_FIELDS:
                t = getattr(out, n)
                if not t.is_contiguous() or t.device != self.device or t.dtype != torch.float32:
                    raise ValueError(f"MotionState.{n} must be a contiguous float32 tensor on {self.device}")
                setattr(st, n, warp_view(t, _VEC_DTYPES[t.shape[-1]] if n in _VEC_FIELDS else None))
            st.contacts = warp_view(out.contacts if out.contacts is not None else out._contacts_buf)
            q = MotionQuery()
            q.motion_ids, q.times = warp_view(out._ids32), warp_view(out._times32)
            q.future_offsets, q.env_mask = warp_view(out._offsets), warp_view(out._mask, wp.bool)
            q.use_mask = 0
            out._warp = (st, q)
        return out._warp

    def get_motion_state(
        self,
        motion_ids: torch.Tensor,
        times: torch.Tensor,
        future_offsets: torch.Tensor | None = None,
        out: MotionState | None = None,
        mask: torch.Tensor | None = None,
    ) -> MotionState:
        """Fill ``out`` with the reference state at ``times`` and ``times + future_offsets[k]``.

        ``motion_ids``: int32 or int64 [N] (copied into ``out``'s int32 scratch on device, no sync);
        ``times``: float [N] seconds; ``future_offsets``: float32 [K] seconds (K = F - 1 of ``out``;
        ``None`` when K = 0). Times are clamped to ``[0, length]``. ``mask`` (bool [N], optional): fill
        only those envs' rows of ``out`` (the others keep their values). One Warp launch, no host sync.
        """
        N = motion_ids.shape[0]
        if out is None:
            K = 0 if future_offsets is None else future_offsets.shape[0]
            out = self.alloc_state(N, K)
        if out.num_envs != N or times.shape[0] != N:
            raise ValueError(f"motion_ids [{N}], times [{times.shape[0]}] and out [{out.num_envs}] differ")
        K = out.num_slots - 1
        nk = 0 if future_offsets is None else future_offsets.shape[0]
        if nk != K:
            raise ValueError(f"out has {K} future slots; pass future_offsets of shape [{K}]")
        st, q = self._warp_views(out)
        out._ids32.copy_(motion_ids)
        out._times32.copy_(times)
        if K > 0:
            out._offsets.copy_(future_offsets)
        q.use_mask = int(mask is not None)
        if mask is not None:
            out._mask.copy_(mask)
        with torch_stream_scope(self.wp_device):
            interpolate(self.frames_wp, q, st)
        return out

    def bind_query(self, motion_ids: torch.Tensor, times: torch.Tensor, future_offsets: torch.Tensor | None,
                   out: MotionState, mask: torch.Tensor | None = None) -> MotionQuery:
        """A query that reads ``motion_ids`` (int32 [N]), ``times`` (float32 [N]) and ``mask`` (bool [N], optional)
        in place, for :meth:`query`: the caller's buffers are bound once, so a query is one launch and no copy.
        ``future_offsets`` (float32 [K]) is copied once into ``out``."""
        n, k = out.num_envs, out.num_slots - 1
        for name, t, dtype in (("motion_ids", motion_ids, torch.int32), ("times", times, torch.float32),
                               ("mask", mask, torch.bool)):
            if t is not None and (t.dtype != dtype or t.shape != (n,) or not t.is_contiguous()
                                  or t.device != self.device):
                raise ValueError(f"bind_query: {name} must be a contiguous {dtype} [{n}] tensor on {self.device}")
        if (0 if future_offsets is None else future_offsets.shape[0]) != k:
            raise ValueError(f"out has {k} future slots; pass future_offsets of shape [{k}]")
        self._warp_views(out)
        if k > 0:
            out._offsets.copy_(future_offsets)
        q = MotionQuery()
        q.motion_ids, q.times = warp_view(motion_ids), warp_view(times)
        q.future_offsets = warp_view(out._offsets)
        q.env_mask = warp_view(mask if mask is not None else out._mask, wp.bool)
        q.use_mask = int(mask is not None)
        return q

    def query(self, q: MotionQuery, out: MotionState) -> None:
        """Fill ``out`` (the state ``q`` was bound with) from the buffers ``q`` reads: one launch, no host sync."""
        with torch_stream_scope(self.wp_device):
            interpolate(self.frames_wp, q, self._warp_views(out)[0])
