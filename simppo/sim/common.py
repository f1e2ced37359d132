"""Model set-up shared by the simulator backends (same MJCF, same options, same home state)."""

from __future__ import annotations

import mujoco
import numpy as np

from simppo.robot.config import RobotCfg
from simppo.robot.model import RobotModel, build_robot_model, load_mj_model
from simppo.sim.config import MJWARP_SPARSE_ABOVE_NV, SimCfg


def configure_model(robot_cfg: RobotCfg, cfg: SimCfg, mj_model: mujoco.MjModel | None = None
                    ) -> tuple[mujoco.MjModel, RobotModel]:
    """The robot's ``MjModel`` with the overrides of ``cfg`` applied, and its resolved names."""
    m = mj_model if mj_model is not None else load_mj_model(robot_cfg, self_collision=cfg.self_collision)
    if cfg.timestep is not None:
        m.opt.timestep = float(cfg.timestep)
    if cfg.solver_iterations is not None:
        m.opt.iterations = int(cfg.solver_iterations)
    if cfg.solver_ls_iterations is not None:
        m.opt.ls_iterations = int(cfg.solver_ls_iterations)
    if cfg.solver_tolerance is not None:
        m.opt.tolerance = float(cfg.solver_tolerance)
    m.opt.jacobian = jacobian_layout(cfg.jacobian, m.nv)
    return m, build_robot_model(robot_cfg, m)


def jacobian_layout(name: str, nv: int) -> int:
    """``mjtJacobian`` for ``SimCfg.jacobian``: ``auto`` resolves by MJWarp's rule, so that both backends use one
    layout (MuJoCo C's own ``auto`` is dense below 60 dofs)."""
    J = mujoco.mjtJacobian
    if name == "auto":
        return int(J.mjJAC_SPARSE if nv > MJWARP_SPARSE_ABOVE_NV else J.mjJAC_DENSE)
    return int({"dense": J.mjJAC_DENSE, "sparse": J.mjJAC_SPARSE}[name])


def robot_collision_geoms(m: mujoco.MjModel) -> np.ndarray:
    """``[ngeom]`` bool: geoms of the robot's bodies that take part in collisions."""
    return (m.geom_bodyid > 0) & ((m.geom_contype != 0) | (m.geom_conaffinity != 0))


def home_state(m: mujoco.MjModel) -> tuple[mujoco.MjData, np.ndarray, np.ndarray]:
    """``MjData`` at the ``home`` keyframe (or ``qpos0``) after ``mj_forward``, its ``qpos`` and ``ctrl``."""
    d = mujoco.MjData(m)
    home = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_KEY, "home")
    if home >= 0:
        mujoco.mj_resetDataKeyframe(m, d, home)
    mujoco.mj_forward(m, d)
    return d, np.array(d.qpos, dtype=np.float64), np.array(d.ctrl, dtype=np.float64)


def root_height_adr(m: mujoco.MjModel) -> int:
    """qpos index of the root free joint's z (-1 if the first joint is not free)."""
    free = m.njnt > 0 and int(m.jnt_type[0]) == int(mujoco.mjtJoint.mjJNT_FREE)
    return int(m.jnt_qposadr[0]) + 2 if free else -1


def geom_foot_map(m: mujoco.MjModel, robot: RobotModel, enabled: bool = True) -> np.ndarray:
    """``[ngeom]`` int32: foot index (``robot_cfg.feet`` order) of each colliding foot geom, else -1."""
    geom_foot = np.full(m.ngeom, -1, dtype=np.int32)
    if enabled:
        collides = (m.geom_contype != 0) | (m.geom_conaffinity != 0)
        for k, bid in enumerate(robot.feet_body_ids):
            geom_foot[(m.geom_bodyid == bid) & collides] = k
    return geom_foot
