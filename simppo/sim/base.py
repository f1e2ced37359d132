"""The interface every simulator backend follows, and the typed view of its state that env kernels read.

A backend simulates ``num_envs`` worlds of one robot (one MJCF). Everything an env reads lives in
preallocated buffers that torch and Warp share without copies; :attr:`SimBackend.state` bundles the
Warp views in one :class:`SimState` struct, so an env kernel takes ``sim: SimState`` as one argument.

Body axes index MuJoCo body ids (0 = world body). Quaternions are wxyz.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import mujoco
import numpy as np
import torch
import warp as wp


@wp.struct
class SimState:
    """Warp views of a backend's state (all ``[N, ...]``, env axis first).

    ``qpos [N, nq]``, ``qvel [N, nv]``, ``ctrl [N, nu]`` (position targets, written by the env),
    ``xpos [N, nbody]`` vec3 and ``xquat [N, nbody]`` vec4 (wxyz) world poses,
    ``body_lin_vel_w`` / ``body_ang_vel_w [N, nbody]`` vec3 world-frame velocities of each body frame
    origin, ``unstable [N]`` int32 (1 = non-finite or out-of-bounds world after the last step/reset),
    ``penalized_contacts [N]`` float32 (active contacts of the last physics substep that touch a geom
    marked by :meth:`SimBackend.set_penalized_geoms`), ``self_contacts [N]`` float32 (active contacts of the
    last physics substep between two of the robot's geoms).
    """

    qpos: wp.array2d(dtype=wp.float32)
    qvel: wp.array2d(dtype=wp.float32)
    ctrl: wp.array2d(dtype=wp.float32)
    xpos: wp.array2d(dtype=wp.vec3)
    xquat: wp.array2d(dtype=wp.vec4)
    body_lin_vel_w: wp.array2d(dtype=wp.vec3)
    body_ang_vel_w: wp.array2d(dtype=wp.vec3)
    unstable: wp.array(dtype=wp.int32)
    penalized_contacts: wp.array(dtype=wp.float32)
    self_contacts: wp.array(dtype=wp.float32)


VEC10 = wp.types.vector(length=10, dtype=wp.float32)  # MuJoCo's actuator gain / bias parameters (mjNGAIN)


@wp.struct
class WorldParams:
    """Per-world model parameters (MuJoCo ``MjModel`` fields of the same names), ``[W, ...]`` with ``W =
    num_envs`` after :meth:`SimBackend.enable_world_params` (``W = 1``: the nominal values). World ``w``
    steps with row ``w``: ``geom_friction [W, ngeom]`` vec3 (slide, spin, roll), ``body_ipos [W, nbody]``
    vec3 (centre of mass in the body frame), ``body_mass [W, nbody]``, ``body_inertia [W, nbody]`` vec3,
    ``body_subtreemass [W, nbody]`` (kept consistent with ``body_mass`` by whoever writes it),
    ``actuator_gainprm`` / ``actuator_biasprm [W, nu]`` vec10 (position servo: ``gain[0] = kp``,
    ``bias[1] = -kp``, ``bias[2] = -kv``). Other derived constants (``body_invweight0`` ...) stay nominal."""

    geom_friction: wp.array2d(dtype=wp.vec3)
    body_ipos: wp.array2d(dtype=wp.vec3)
    body_mass: wp.array2d(dtype=wp.float32)
    body_inertia: wp.array2d(dtype=wp.vec3)
    body_subtreemass: wp.array2d(dtype=wp.float32)
    actuator_gainprm: wp.array2d(dtype=VEC10)
    actuator_biasprm: wp.array2d(dtype=VEC10)


WORLD_PARAM_FIELDS = ("geom_friction", "body_ipos", "body_mass", "body_inertia", "body_subtreemass",
                      "actuator_gainprm", "actuator_biasprm")


def world_param_values(m: mujoco.MjModel, num_worlds: int) -> dict[str, np.ndarray]:
    """The model's values of :data:`WORLD_PARAM_FIELDS`, float32, repeated ``[num_worlds, ...]``."""
    out = {}
    for name in WORLD_PARAM_FIELDS:
        value = np.asarray(getattr(m, name), dtype=np.float32)
        out[name] = np.ascontiguousarray(np.broadcast_to(value, (num_worlds, *value.shape)))
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

    def warm_up(self) -> None:  # noqa: B027 - optional hook
        """Compile (and, where the backend captures graphs, capture) everything the hot path launches,
        without changing the simulated state. Called once before training; optional."""

    def metrics(self) -> dict[str, torch.Tensor]:
        """Backend device scalars accumulated since the last call (read once per iteration); resets them."""
        return {}

    def close(self) -> None:  # noqa: B027 - optional hook
        pass
