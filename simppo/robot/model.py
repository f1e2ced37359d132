"""MuJoCo model loading and name → index resolution for a ``RobotCfg``."""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from simppo.robot.config import RobotCfg, load_robot_cfg


def load_mj_model(robot_cfg: RobotCfg | str, self_collision: bool = False) -> mujoco.MjModel:
    """Compile the robot's MJCF with MuJoCo C.

    ``self_collision``: the robot's collision geoms also collide with each other (their ``conaffinity``
    takes their ``contype``). MuJoCo already ignores parent-child pairs; body pairs that touch by
    construction (in contact at the ``home`` keyframe or at ``qpos0``, e.g. a geom-less link between
    them) are excluded as well, so only real self-contacts remain.
    """
    cfg = load_robot_cfg(robot_cfg)
    path = cfg.mjcf_path
    if not path.is_file():
        raise FileNotFoundError(f"{cfg.source or cfg.name}: mjcf not found: {path}")
    spec = mujoco.MjSpec.from_file(str(path))
    m = spec.compile()
    if not self_collision:
        return m
    if len(spec.geoms) != m.ngeom:
        raise ValueError(f"{path}: cannot map the MJCF's geoms to the compiled model for self-collision")
    robot = (m.geom_bodyid > 0) & ((m.geom_contype != 0) | (m.geom_conaffinity != 0))
    for i, g in enumerate(spec.geoms):
        if robot[i]:
            g.conaffinity = int(m.geom_conaffinity[i]) | int(m.geom_contype[i])
    m = spec.compile()
    d = mujoco.MjData(m)
    touching = set()
    home = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_KEY, "home")
    for key in ([home] if home >= 0 else []) + [-1]:
        if key >= 0:
            mujoco.mj_resetDataKeyframe(m, d, key)
        else:
            mujoco.mj_resetData(m, d)
        mujoco.mj_forward(m, d)
        for c in d.contact[:d.ncon]:
            b1, b2 = int(m.geom_bodyid[c.geom[0]]), int(m.geom_bodyid[c.geom[1]])
            if b1 > 0 and b2 > 0:
                touching.add((min(b1, b2), max(b1, b2)))
    for b1, b2 in sorted(touching):
        e = spec.add_exclude()
        e.bodyname1 = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, b1)
        e.bodyname2 = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, b2)
    return spec.compile()


@dataclass
class RobotModel:
    """A compiled robot with its names resolved to MuJoCo indices (numpy int arrays).

    ``joint_qpos_adr [J]`` / ``joint_dof_adr [J]``: qpos / qvel address of each actuated joint in
    ``joint_names`` order; ``actuator_ids [J]``: the actuator driving each joint; body ids index
    MuJoCo bodies directly (0 = world).
    """

    cfg: RobotCfg
    mj_model: mujoco.MjModel
    joint_ids: np.ndarray
    joint_qpos_adr: np.ndarray
    joint_dof_adr: np.ndarray
    actuator_ids: np.ndarray
    root_body_id: int
    anchor_body_id: int
    tracked_body_ids: np.ndarray
    end_effector_ids: np.ndarray
    feet_body_ids: np.ndarray
    foot_site_ids: np.ndarray
    default_joint_pos: np.ndarray
    action_scale: np.ndarray
    joint_limits: np.ndarray
    """[J, 2] lower/upper joint range in joint_names order."""

    @property
    def body_names(self) -> list[str]:
        m = self.mj_model
        return [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, i) or "" for i in range(m.nbody)]


def _ids(m: mujoco.MjModel, cfg: RobotCfg, obj: mujoco.mjtObj, names: list[str], key: str) -> np.ndarray:
    out = []
    for n in names:
        i = mujoco.mj_name2id(m, obj, n)
        if i < 0:
            raise ValueError(f"{cfg.source or cfg.name}: {key}: '{n}' not found in {cfg.mjcf_path.name}")
        out.append(i)
    return np.asarray(out, dtype=np.int64)


def build_robot_model(robot_cfg: RobotCfg | str, mj_model: mujoco.MjModel | None = None) -> RobotModel:
    """Validate every name of ``robot_cfg`` against the model and return the index arrays."""
    cfg = load_robot_cfg(robot_cfg)
    m = mj_model if mj_model is not None else load_mj_model(cfg)
    where = cfg.source or cfg.name
    B = mujoco.mjtObj.mjOBJ_BODY
    jids = _ids(m, cfg, mujoco.mjtObj.mjOBJ_JOINT, cfg.joint_names, "joint_names")
    for n, j in zip(cfg.joint_names, jids, strict=True):
        if int(m.jnt_type[j]) not in (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE)):
            raise ValueError(f"{where}: joint_names: '{n}' is not a hinge/slide joint")
    act = []
    for n, j in zip(cfg.joint_names, jids, strict=True):
        is_jnt = m.actuator_trntype == int(mujoco.mjtTrn.mjTRN_JOINT)
        hits = np.nonzero(is_jnt & (m.actuator_trnid[:, 0] == j))[0]
        if len(hits) != 1:
            raise ValueError(
                f"{where}: joint_names: '{n}' needs exactly one joint actuator, found {len(hits)}"
            )
        act.append(int(hits[0]))
    limits = np.where(
        m.jnt_limited[jids, None].astype(bool), m.jnt_range[jids], np.array([-np.inf, np.inf])
    )
    return RobotModel(
        cfg=cfg,
        mj_model=m,
        joint_ids=jids,
        joint_qpos_adr=m.jnt_qposadr[jids].astype(np.int64),
        joint_dof_adr=m.jnt_dofadr[jids].astype(np.int64),
        actuator_ids=np.asarray(act, dtype=np.int64),
        root_body_id=int(_ids(m, cfg, B, [cfg.root_body], "root_body")[0]),
        anchor_body_id=int(_ids(m, cfg, B, [cfg.anchor_body], "anchor_body")[0]),
        tracked_body_ids=_ids(m, cfg, B, cfg.tracked_bodies, "tracked_bodies"),
        end_effector_ids=_ids(m, cfg, B, cfg.end_effectors, "end_effectors"),
        feet_body_ids=_ids(m, cfg, B, cfg.feet, "feet"),
        foot_site_ids=_ids(m, cfg, mujoco.mjtObj.mjOBJ_SITE, cfg.foot_sites, "foot_sites"),
        default_joint_pos=np.asarray(cfg.default_joint_pos, dtype=np.float64),
        action_scale=np.asarray(cfg.action_scale, dtype=np.float64),
        joint_limits=np.asarray(limits, dtype=np.float64),
    )


def servo_gains(mj_model: mujoco.MjModel, actuator_ids) -> tuple[np.ndarray, np.ndarray]:
    """``(kp [J], kd [J])`` float64 of the position servos ``actuator_ids`` (MuJoCo's position actuator:
    ``gain[0] = kp``, ``bias = (0, -kp, -kd)``, force ``kp * (ctrl - q) - kd * qdot``)."""
    ids = np.asarray(actuator_ids)
    return mj_model.actuator_gainprm[ids, 0].astype(np.float64), -mj_model.actuator_biasprm[ids, 2].astype(np.float64)


def servo_damping_over_stiffness(mj_model: mujoco.MjModel, actuator_ids) -> np.ndarray:
    """``kd / kp [J]`` (seconds) of the position servos ``actuator_ids``: how far a position target must lead to
    damp towards a joint velocity ``v`` rather than towards rest (``kp (ctrl + kd / kp v - q) - kd qdot``); 0 for
    an actuator that is no position servo (``kp <= 0``)."""
    kp, kd = servo_gains(mj_model, actuator_ids)
    return np.divide(kd, kp, out=np.zeros_like(kp), where=kp > 0.0)
