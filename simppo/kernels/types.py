"""The structs that kernels take, at the bottom of the package: nothing here imports from simppo.

``SimState`` is a simulator backend's state as env kernels read it (filled by :mod:`simppo.sim`);
``WorldParams`` the per-world model parameters that randomization writes and the backends step with. Body axes
index MuJoCo body ids (0 = world body). Quaternions are wxyz.
"""

from __future__ import annotations

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
