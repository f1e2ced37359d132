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

from simppo.kernels.motion_interp import launch_motion_interp, torch_to_warp
from simppo.motion.format import FRAME_FIELDS, Shard, ShardFormatError
from simppo.motion.index import MotionIndex
from simppo.utils.device import init_warp, warp_device

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
    # private scratch: int32 ids / float32 times when callers pass other dtypes; cached Warp views
    _ids32: torch.Tensor | None = field(default=None, repr=False)
    _times32: torch.Tensor | None = field(default=None, repr=False)
    _contacts_buf: torch.Tensor | None = field(default=None, repr=False)
    _warp: dict | None = field(default=None, repr=False)

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

    def __init__(self, sources: list[str] | MotionIndex, device: str = "cpu", robot: str | None = None):
        init_warp()
        self.device = torch.device(device)
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
        if robot is not None:
            self._check_robot(robot, h0)
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

        # host staging: one buffer per field, filled shard by shard from the memmaps
        names = [n for n in FRAME_FIELDS if n != "contacts" or self.num_contacts > 0]
        host: dict[str, np.ndarray] = {}
        for n in names:
            dt, _ = FRAME_FIELDS[n]
            tail = tuple(headers[0].fields[n]["shape"][1:])
            host[n] = np.empty((total,) + tail, dtype=dt)
        starts = np.empty(self.num_motions, np.int32)
        base = 0
        k = 0
        for i, h in enumerate(headers):
            shard = Shard(self.index.shards[i].path, h)
            for n in names:
                host[n][base : base + h.num_frames] = shard.array(n)
            for m in h.motions:
                starts[k] = base + m.start
                k += 1
            base += h.num_frames
        nfr = np.array([m.num_frames for m in metas], np.int32)
        dts = np.array([1.0 / m.fps for m in metas], np.float32)
        weights = np.array([m.weight for m in metas], np.float64)
        if np.any(nfr < 1) or np.any(weights < 0) or weights.sum() <= 0:
            raise ShardFormatError("motions need >= 1 frame, weights >= 0 with a positive sum")

        dev = self.device
        self.frames: dict[str, torch.Tensor] = {n: torch.from_numpy(a).to(dev) for n, a in host.items()}
        if self.num_contacts == 0:  # the kernel always takes a contacts array
            self._contacts_dummy = torch.zeros((max(total, 1), 1), dtype=torch.uint8, device=dev)
        self.motion_start = torch.from_numpy(starts).to(dev)
        self.motion_num_frames = torch.from_numpy(nfr).to(dev)
        self.motion_dt = torch.from_numpy(dts).to(dev)
        self.motion_lengths = torch.from_numpy((nfr - 1).astype(np.float32) * dts).to(dev)
        self.motion_weights = torch.from_numpy((weights / weights.sum()).astype(np.float32)).to(dev)
        self._no_offsets = torch.zeros(1, dtype=torch.float32, device=dev)
        self._sample_scratch: dict[int, torch.Tensor] = {}

        self._wp_frames = {
            n: torch_to_warp(t, vec_last=n in _VEC_FIELDS and t.dim() >= 2) for n, t in self.frames.items()
        }
        if self.num_contacts == 0:
            self._wp_frames["contacts"] = wp.from_torch(self._contacts_dummy)
        self._wp_meta = (
            wp.from_torch(self.motion_start),
            wp.from_torch(self.motion_num_frames),
            wp.from_torch(self.motion_dt),
            wp.from_torch(self.motion_lengths),
        )

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _check_robot(robot: str, header) -> None:
        from simppo.robot import load_robot_cfg  # the robot package is only needed for this check

        cfg = load_robot_cfg(robot)
        if cfg.name != header.robot:
            raise ShardFormatError(f"motions were packed for robot {header.robot!r}, not {cfg.name!r}")
        if set(cfg.joint_names) != set(header.joint_names):
            raise ShardFormatError(f"motion joint names do not match robot {cfg.name!r}")

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
        if C == 0:
            st._contacts_buf = z(N, F, 1)
        return st

    def _warp_views(self, out: MotionState) -> dict:
        key = tuple(t.data_ptr() for t in out.tensors().values())
        if out._warp is None or out._warp["key"] != key:
            views = {}
            for n in _STATE_FIELDS:
                t = getattr(out, n)
                if not t.is_contiguous() or t.device != self.device or t.dtype != torch.float32:
                    raise ValueError(f"MotionState.{n} must be a contiguous float32 tensor on {self.device}")
                views[n] = torch_to_warp(t, vec_last=n in _VEC_FIELDS)
            views["contacts"] = wp.from_torch(out.contacts if out.contacts is not None else out._contacts_buf)
            out._warp = {
                "key": key,
                "views": views,
                "ids": wp.from_torch(out._ids32),
                "times": wp.from_torch(out._times32),
            }
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

        ``motion_ids``: int32 or int64 [N] (int64 is copied into an int32 scratch on device, no sync);
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
        views = self._warp_views(out)
        if motion_ids.dtype == torch.int32 and motion_ids.is_contiguous() and motion_ids.device == self.device:
            wp_ids = wp.from_torch(motion_ids)
        else:
            out._ids32.copy_(motion_ids)
            wp_ids = views["ids"]
        if times.dtype == torch.float32 and times.is_contiguous() and times.device == self.device:
            wp_times = wp.from_torch(times)
        else:
            out._times32.copy_(times)
            wp_times = views["times"]
        if K > 0:
            offs = future_offsets
            if offs.dtype != torch.float32 or not offs.is_contiguous() or offs.device != self.device:
                offs = offs.to(device=self.device, dtype=torch.float32).contiguous()
            wp_offs = wp.from_torch(offs)
        else:
            wp_offs = wp.from_torch(self._no_offsets)
        launch_motion_interp(
            wp_ids,
            wp_times,
            wp_offs,
            *self._wp_meta,
            self._wp_frames,
            views["views"],
            num_envs=N,
            num_slots=K + 1,
            num_bodies=self.num_bodies,
            num_dofs=self.num_dofs,
            num_contacts=self.num_contacts,
            device=self.wp_device,
            env_mask=None if mask is None else wp.from_torch(mask, dtype=wp.bool),
        )
        return out
