"""The interface every simulator backend follows, and the typed view of its state that env kernels read.

A backend simulates ``num_envs`` worlds of one robot (one MJCF). Everything an env reads lives in
preallocated buffers that torch and Warp share without copies; :attr:`SimBackend.state` bundles the
Warp views in one :class:`SimState` struct, so an env kernel takes ``sim: SimState`` as one argument.

Body axes index MuJoCo body ids (0 = world body). Quaternions are wxyz.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod

import mujoco
import numpy as np
import torch
import warp as wp

from simppo.kernels.types import VEC10, WORLD_PARAM_FIELDS, SimState, WorldParams

__all__ = ["VEC10", "WORLD_PARAM_FIELDS", "SimBackend", "SimState", "WorldParams", "nominal_world_params",
           "world_param_values"]


def world_param_values(m: mujoco.MjModel, num_worlds: int) -> dict[str, np.ndarray]:
    """The model's values of :data:`WORLD_PARAM_FIELDS`, float32, repeated ``[num_worlds, ...]``."""
    out = {}
    for name in WORLD_PARAM_FIELDS:
        value = np.asarray(getattr(m, name), dtype=np.float32)
        out[name] = np.broadcast_to(value, (num_worlds, *value.shape)).copy()  # writable, also for one world
    return out


def nominal_world_params(m: mujoco.MjModel, device: str) -> WorldParams:
    """The model's own :class:`WorldParams` (``W = 1``) on Warp ``device``."""
    p = WorldParams()
    dtypes = dict(WorldParams.vars)
    for name, value in world_param_values(m, 1).items():
        setattr(p, name, wp.array(value, dtype=dtypes[name].type.dtype, device=device))
    return p


class SimBackend(ABC):
    """``num_envs`` worlds of one robot behind one small interface.

    Attributes every backend sets: ``num_envs``, ``device`` (torch name), ``wp_device``, ``decimation``,
    ``physics_dt``, ``control_dt``, ``mj_model`` (the host ``MjModel``), ``robot`` (:class:`RobotModel`),
    ``robot_cfg``, ``home_qpos`` / ``home_ctrl`` (numpy), ``state`` (:class:`SimState`), and torch views
    (zero-copy, same memory as ``state``): ``qpos``, ``qvel``, ``ctrl``, ``xpos [N, nbody, 3]``,
    ``xquat [N, nbody, 4]``, ``body_lin_vel_w``, ``body_ang_vel_w``, ``unstable [N]`` int32,
    ``num_unstable [1]`` int32, ``penalized_contacts [N]``, ``self_contacts [N]``, ``foot_contact [N, nfeet]`` int32 and
    ``foot_contact_force [N, nfeet]`` (``robot_cfg.feet`` order).

    After :meth:`step` and :meth:`reset_worlds` every view is consistent with the final ``qpos`` /
    ``qvel``; contact quantities describe the contacts of the last physics substep.
    """

    num_envs: int
    device: str
    decimation: int
    physics_dt: float
    control_dt: float
    mj_model: mujoco.MjModel
    state: SimState
    qpos: torch.Tensor
    qvel: torch.Tensor
    ctrl: torch.Tensor

    @property
    def nq(self) -> int:
        return self.mj_model.nq

    @property
    def nv(self) -> int:
        return self.mj_model.nv

    @property
    def nu(self) -> int:
        return self.mj_model.nu

    @property
    def nbody(self) -> int:
        return self.mj_model.nbody

    @abstractmethod
    def step(self) -> None:
        """One control step: ``decimation`` physics steps with the targets in ``ctrl``, then the views."""

    @abstractmethod
    def forward(self) -> None:
        """Full forward dynamics (collision, constraint forces) of every world, then the views."""

    @abstractmethod
    def kinematics(self) -> None:
        """Recompute body poses and velocities from the current ``qpos`` / ``qvel`` of every world."""

    @abstractmethod
    def reset_worlds(self, mask: torch.Tensor, qpos_target: torch.Tensor, qvel_target: torch.Tensor) -> None:
        """Worlds where ``mask [N]`` is set get ``qpos_target [N, nq]`` / ``qvel_target [N, nv]`` and a
        cleared solver warm start; then the views and instability flags are recomputed. No host sync."""

    @abstractmethod
    def set_penalized_geoms(self, geom_mask: np.ndarray) -> None:
        """``geom_mask [ngeom]`` (0/1): contacts touching these geoms are counted in ``penalized_contacts``."""

    @abstractmethod
    def state_dict(self) -> dict:
        """Everything needed to continue the simulation exactly (tensors)."""

    @abstractmethod
    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict`, then recompute the views."""

    def enable_world_params(self) -> WorldParams:
        """Give every world its own copy of the :class:`WorldParams` fields (all at their nominal values) and
        return Warp views of them ``[N, ...]`` on ``wp_device``. Kernels may write them at any time between
        steps (no host sync); a world steps, resets and recomputes its views with its own row. Idempotent;
        call it before :meth:`warm_up` (backends that capture graphs recapture them)."""
        raise NotImplementedError(f"{type(self).__name__} has no per-world model parameters")

    def reset_all_home(self) -> None:
        """Every world to the home keyframe (zero velocity, ``ctrl`` = home ctrl)."""
        n = self.num_envs
        mask = torch.ones(n, dtype=torch.bool, device=self.device)
        qpos = torch.as_tensor(self.home_qpos, dtype=torch.float32, device=self.device).expand(n, -1)
        qvel = torch.zeros(n, self.nv, dtype=torch.float32, device=self.device)
        self.ctrl.copy_(torch.as_tensor(self.home_ctrl, dtype=torch.float32, device=self.device).expand(n, -1))
        self.reset_worlds(mask, qpos, qvel)

    def bind_reset_inputs(self, mask: torch.Tensor, qpos_target: torch.Tensor, qvel_target: torch.Tensor) -> None:
        """Bind the buffers :meth:`reset_bound` reads (``mask [N]`` bool, ``qpos_target [N, nq]``,
        ``qvel_target [N, nv]``, float32, allocated once by the caller). Backends that can read them in place
        (MJWarp) do; the others copy them at each :meth:`reset_bound`."""
        self._bound_reset = (mask, qpos_target, qvel_target)

    def reset_bound(self) -> None:
        """:meth:`reset_worlds` from the buffers given to :meth:`bind_reset_inputs`."""
        self.reset_worlds(*self._bound_reset)

    graph_epoch: int = 0
    """Incremented whenever buffers that captured launches read are replaced (graphs of callers are then stale)."""

    @property
    def capturable(self) -> bool:
        """Whether :meth:`step` and :meth:`reset_bound` are device launches only, so a caller may capture them
        inside its own graph (within :meth:`launches_inline`). Host-stepped backends: False."""
        return False

    def launches_inline(self) -> contextlib.AbstractContextManager:
        """A context in which :meth:`step` and :meth:`reset_bound` issue their launches directly instead of
        replaying their own graphs (for a caller capturing them in a larger graph)."""
        return contextlib.nullcontext()

    def account_step(self) -> None:  # noqa: B027 - optional hook
        """Host bookkeeping of one :meth:`step` replayed inside a caller's graph (e.g. physics-step counters)."""

    def warm_up(self) -> None:  # noqa: B027 - optional hook
        """Compile (and, where the backend captures graphs, capture) everything the hot path launches,
        without changing the simulated state. Called once before training; optional."""

    def metrics(self) -> dict[str, torch.Tensor]:
        """Backend device scalars accumulated since the last call (read once per iteration); resets them."""
        return {}

    def close(self) -> None:  # noqa: B027 - optional hook
        pass
