"""Host-side kinematics for packing motions: MuJoCo C forward kinematics, finite differences,
NumPy quaternion helpers (wxyz), foot-ground clearance and contact labels.

Motion body ``b`` is MuJoCo body id ``b + 1`` (body 0, the world, is excluded).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import mujoco
import numpy as np

# ----------------------------------------------------------------------------- quaternions (wxyz)


def quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product, ``[..., 4]`` wxyz."""
    aw, ax, ay, az = np.moveaxis(a, -1, 0)
    bw, bx, by, bz = np.moveaxis(b, -1, 0)
    return np.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        axis=-1,
    )


def quat_conj(q: np.ndarray) -> np.ndarray:
    return q * np.array([1.0, -1.0, -1.0, -1.0], dtype=q.dtype)


def quat_normalize(q: np.ndarray) -> np.ndarray:
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def quat_to_axis_angle(q: np.ndarray) -> np.ndarray:
    """Rotation vector ``[..., 3]`` (angle in [0, pi]) of unit quaternions ``[..., 4]``."""
    q = np.where(q[..., :1] < 0.0, -q, q)
    v = q[..., 1:]
    s = np.linalg.norm(v, axis=-1, keepdims=True)
    angle = 2.0 * np.arctan2(s, q[..., :1])
    scale = np.where(s > 1e-12, angle / np.maximum(s, 1e-300), 2.0)
    return v * scale


def quat_from_axis_angle(rv: np.ndarray) -> np.ndarray:
    rv = np.asarray(rv, dtype=np.float64)
    a = np.linalg.norm(rv, axis=-1, keepdims=True)
    half = 0.5 * a
    k = np.where(a > 1e-12, np.sin(half) / np.maximum(a, 1e-300), 0.5)
    return np.concatenate([np.cos(half), rv * k], axis=-1)


def quat_make_continuous(q: np.ndarray) -> np.ndarray:
    """Flip signs along axis 0 so consecutive quaternions have a non-negative dot product."""
    q = q.copy()
    for t in range(1, q.shape[0]):
        flip = np.sum(q[t] * q[t - 1], axis=-1) < 0.0
        q[t][flip] *= -1.0
    return q


def quat_slerp(a: np.ndarray, b: np.ndarray, t) -> np.ndarray:
    """Short-arc slerp of ``[..., 4]`` wxyz quaternions; ``t`` broadcastable to ``[..., 1]``."""
    t = np.asarray(t, dtype=np.float64)
    d = np.sum(a * b, axis=-1, keepdims=True)
    b = np.where(d < 0.0, -b, b)
    d = np.abs(d)
    theta = np.arccos(np.clip(d, -1.0, 1.0))
    s = np.sin(theta)
    small = s < 1e-8
    wa = np.where(small, 1.0 - t, np.sin((1.0 - t) * theta) / np.where(small, 1.0, s))
    wb = np.where(small, t, np.sin(t * theta) / np.where(small, 1.0, s))
    return quat_normalize(wa * a + wb * b)


# ----------------------------------------------------------------------------- finite differences


def finite_diff(x: np.ndarray, dt: float) -> np.ndarray:
    """d/dt along axis 0: central differences inside, one-sided at both ends (float64)."""
    x = np.asarray(x, dtype=np.float64)
    v = np.zeros_like(x)
    if x.shape[0] < 2:
        return v
    v[1:-1] = (x[2:] - x[:-2]) / (2.0 * dt)
    v[0] = (x[1] - x[0]) / dt
    v[-1] = (x[-1] - x[-2]) / dt
    return v


def angular_velocity(q: np.ndarray, dt: float) -> np.ndarray:
    """World-frame angular velocity ``[T, ..., 3]`` of world orientations ``q [T, ..., 4]`` (wxyz).

    Central: ``axis_angle(q[t+1] * conj(q[t-1])) / (2 dt)``; one-sided at the ends.
    """
    q = np.asarray(q, dtype=np.float64)
    w = np.zeros(q.shape[:-1] + (3,))
    if q.shape[0] < 2:
        return w
    w[1:-1] = quat_to_axis_angle(quat_mul(q[2:], quat_conj(q[:-2]))) / (2.0 * dt)
    w[0] = quat_to_axis_angle(quat_mul(q[1], quat_conj(q[0]))) / dt
    w[-1] = quat_to_axis_angle(quat_mul(q[-1], quat_conj(q[-2]))) / dt
    return w


# ----------------------------------------------------------------------------- robot model


def geom_lowest_z(model: mujoco.MjModel, geom_ids, geom_xpos: np.ndarray, geom_xmat: np.ndarray) -> np.ndarray:
    """World z of the lowest point of each geom, ``[..., G]`` from ``geom_xpos [..., G, 3]`` and
    ``geom_xmat [..., G, 9]`` (MuJoCo row-major) of the geoms ``geom_ids``. Exact for sphere, capsule,
    cylinder, box and ellipsoid; the bounding sphere for meshes and other types.
    """
    geom_ids = np.asarray(geom_ids, dtype=int)
    z = geom_xpos[..., 2]
    r2 = geom_xmat[..., 6:9]  # world z components of the geom's local x, y, z axes
    size = model.geom_size[geom_ids]
    gt = model.geom_type[geom_ids]
    G = mujoco.mjtGeom
    ext = np.broadcast_to(model.geom_rbound[geom_ids], z.shape).copy()
    sph = gt == G.mjGEOM_SPHERE
    ext[..., sph] = size[sph, 0]
    cap = gt == G.mjGEOM_CAPSULE
    ext[..., cap] = np.abs(r2[..., cap, 2]) * size[cap, 1] + size[cap, 0]
    cyl = gt == G.mjGEOM_CYLINDER
    ext[..., cyl] = np.abs(r2[..., cyl, 2]) * size[cyl, 1] + size[cyl, 0] * np.sqrt(
        np.clip(1.0 - r2[..., cyl, 2] ** 2, 0.0, None)
    )
    box = gt == G.mjGEOM_BOX
    ext[..., box] = np.sum(np.abs(r2[..., box, :]) * size[box], axis=-1)
    ell = gt == G.mjGEOM_ELLIPSOID
    ext[..., ell] = np.sqrt(np.sum((r2[..., ell, :] * size[ell]) ** 2, axis=-1))
    return z - ext


@dataclass
class RobotKinematics:
    """What the packer needs to know about a robot.

    ``joint_names``: hinge/slide joints in MuJoCo qpos order (the order of ``dof_pos`` in shards).
    ``input_joint_names``: the robot's standard joint order used by CSV/NPZ inputs.
    ``body_names``: MuJoCo bodies 1..nbody-1. ``feet``: foot body names (contact labels).
    """

    name: str
    model: mujoco.MjModel
    feet: list[str] = field(default_factory=list)
    input_joint_names: list[str] | None = None
    mirror_map: tuple[list[int], list[float]] | None = None  # (partner, sign) in input order (RobotCfg.mirror_map)

    def __post_init__(self):
        m = self.model
        if m.njnt < 1 or int(m.jnt_type[0]) != int(mujoco.mjtJoint.mjJNT_FREE) or m.jnt_qposadr[0] != 0:
            raise ValueError(f"robot {self.name}: the first joint must be the free root joint at qpos[0:7]")
        hinge = [
            j
            for j in range(1, m.njnt)
            if int(m.jnt_type[j]) in (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
        ]
        if len(hinge) != m.njnt - 1 or m.nq != 7 + len(hinge):
            raise ValueError(f"robot {self.name}: expected one free joint followed by hinge/slide joints")
        hinge.sort(key=lambda j: m.jnt_qposadr[j])
        self.joint_names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j) for j in hinge]
        self.qposadr = np.array([m.jnt_qposadr[j] for j in hinge])
        self.dofadr = np.array([m.jnt_dofadr[j] for j in hinge])
        if self.input_joint_names is None:
            self.input_joint_names = list(self.joint_names)
        if sorted(self.input_joint_names) != sorted(self.joint_names):
            raise ValueError(f"robot {self.name}: joint names of the config and the MJCF differ")
        pos = {n: i for i, n in enumerate(self.joint_names)}
        # dof_pos_qpos_order = dof_pos_input_order[:, self.input_to_qpos]
        self.input_to_qpos = np.array([self.input_joint_names.index(n) for n in self.joint_names])
        self.qpos_to_input = np.array([pos[n] for n in self.input_joint_names])
        self.mirror_partner = self.mirror_sign = None  # in qpos order; None: no mirror map
        if self.mirror_map is not None:
            partner_in, sign_in = self.mirror_map
            names = self.input_joint_names
            self.mirror_partner = np.array([pos[names[partner_in[names.index(n)]]] for n in self.joint_names])
            self.mirror_sign = np.array([sign_in[names.index(n)] for n in self.joint_names], dtype=np.float64)
        jr = np.array([m.jnt_range[j] for j in hinge])
        limited = np.array([bool(m.jnt_limited[j]) for j in hinge])
        self.joint_lower = np.where(limited, jr[:, 0], -np.inf)
        self.joint_upper = np.where(limited, jr[:, 1], np.inf)
        self.body_names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, b) for b in range(1, m.nbody)]
        self.foot_body_ids = []
        for f in self.feet:
            bid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, f)
            if bid < 1:
                raise ValueError(f"robot {self.name}: foot body {f!r} not in the model")
            self.foot_body_ids.append(bid)
        coll = [g for g in range(m.ngeom) if m.geom_bodyid[g] > 0 and (m.geom_contype[g] or m.geom_conaffinity[g])]
        self.collision_geoms = np.array(coll, dtype=int)
        self.foot_geoms = []
        for bid in self.foot_body_ids:
            gs = [g for g in coll if m.geom_bodyid[g] == bid] or [g for g in range(m.ngeom) if m.geom_bodyid[g] == bid]
            self.foot_geoms.append(gs)
        self._data = mujoco.MjData(m)

    @property
    def num_dofs(self) -> int:
        return len(self.joint_names)

    @property
    def num_bodies(self) -> int:
        return self.model.nbody - 1

    @classmethod
    def from_robot(cls, name_or_path: str) -> RobotKinematics:
        """Build from simppo's robot config (``simppo.robot.load_robot_cfg`` / ``load_mj_model``)."""
        from simppo.robot import load_mj_model, load_robot_cfg

        cfg = load_robot_cfg(name_or_path)
        return cls(
            name=cfg.name,
            model=load_mj_model(cfg),
            feet=list(cfg.feet),
            input_joint_names=list(cfg.joint_names),
            mirror_map=cfg.mirror_map(),
        )

    def forward(self, qpos: np.ndarray, with_ground: bool = True) -> dict[str, np.ndarray]:
        """MuJoCo C ``mj_kinematics`` for every frame of ``qpos [T, nq]`` (MuJoCo qpos order).

        Returns float64 ``body_pos [T,B,3]``, ``body_quat [T,B,4]``, ``foot_lowest_z [T,C]`` and
        (``with_ground``) ``lowest_z [T]`` / ``lowest_body [T]`` (collision geom lowest point, body index b).
        """
        m, d = self.model, self._data
        T = qpos.shape[0]
        B = self.num_bodies
        pos = np.empty((T, B, 3))
        quat = np.empty((T, B, 4))
        gxpos = np.empty((T, m.ngeom, 3))
        gxmat = np.empty((T, m.ngeom, 9))
        for t in range(T):
            d.qpos[:] = qpos[t]
            mujoco.mj_kinematics(m, d)
            pos[t] = d.xpos[1:]
            quat[t] = d.xquat[1:]
            gxpos[t] = d.geom_xpos
            gxmat[t] = d.geom_xmat
        foot = np.empty((T, len(self.foot_body_ids)))
        for c, gs in enumerate(self.foot_geoms):
            if gs:
                foot[:, c] = geom_lowest_z(m, gs, gxpos[:, gs], gxmat[:, gs]).min(axis=1)
            else:
                foot[:, c] = pos[:, self.foot_body_ids[c] - 1, 2]
        out = {"body_pos": pos, "body_quat": quat, "foot_lowest_z": foot}
        if with_ground:
            geoms = self.collision_geoms
            if len(geoms):
                lz = geom_lowest_z(m, geoms, gxpos[:, geoms], gxmat[:, geoms])
                k = lz.argmin(axis=1)
                out["lowest_z"] = lz[np.arange(T), k]
                out["lowest_body"] = m.geom_bodyid[geoms[k]] - 1
            else:
                out["lowest_z"] = pos[:, :, 2].min(axis=1)
                out["lowest_body"] = pos[:, :, 2].argmin(axis=1)
        return out


def contact_labels(
    foot_lowest_z: np.ndarray, foot_speed: np.ndarray, height: float = 0.03, speed: float = 0.3
) -> np.ndarray:
    """Foot contact 0/1 ``[T, C]``: lowest foot point below ``height`` m, foot speed below ``speed`` m/s."""
    return ((foot_lowest_z < height) & (foot_speed < speed)).astype(np.uint8)
