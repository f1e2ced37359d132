"""simppo's own kinematic motion generator for the shipped sample clips (G1).

Each clip is built from smooth task-space trajectories — pelvis pose, flat foot poses (stance feet
pinned to the ground, swing feet on minimum-jerk arcs) and upper-body joint curves — and the legs
are solved per frame by damped-least-squares IK on MuJoCo C Jacobians (``mj_jacBody``) of the foot
bodies. The root height is set by forward kinematics so that the lowest foot collision point of a
flat stance foot is exactly at z = 0.

``generate_all()`` returns ``{name: qpos [T, nq]}`` in MuJoCo qpos order at ``FPS``; the rows of the
shipped CSVs are the same values with joints in the robot config's order.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from simppo.motion.kinematics import (
    RobotKinematics,
    geom_lowest_z,
    quat_conj,
    quat_from_axis_angle,
    quat_mul,
    quat_to_axis_angle,
)

FPS = 30.0
CLIP_NAMES = ("stand_sway", "squat", "arm_wave", "step_in_place", "walk", "turn")


def min_jerk(s):
    """0→1 with zero velocity and acceleration at both ends."""
    s = np.clip(s, 0.0, 1.0)
    return s * s * s * (10.0 - 15.0 * s + 6.0 * s * s)


def bump(s):
    """0→1→0 on s in [0, 1] (peak 1 at s = 0.5), zero slope at both ends."""
    s = np.clip(s, 0.0, 1.0)
    return 16.0 * s * s * (1.0 - s) * (1.0 - s)


def smooth_window(t, t0, t1, ramp):
    """1 inside [t0, t1], 0 outside, min-jerk ramps of ``ramp`` seconds."""
    return min_jerk((t - t0) / ramp) * (1.0 - min_jerk((t - (t1 - ramp)) / ramp))


def yaw_quat(yaw):
    yaw = np.asarray(yaw, dtype=np.float64)
    return np.stack([np.cos(0.5 * yaw), 0 * yaw, 0 * yaw, np.sin(0.5 * yaw)], axis=-1)


def gaussian_smooth(x: np.ndarray, sigma_frames: float) -> np.ndarray:
    """Gaussian smoothing along axis 0 with edge padding."""
    if sigma_frames <= 0:
        return x
    r = int(np.ceil(3 * sigma_frames))
    k = np.exp(-0.5 * (np.arange(-r, r + 1) / sigma_frames) ** 2)
    k /= k.sum()
    pad = np.concatenate([np.repeat(x[:1], r, 0), x, np.repeat(x[-1:], r, 0)], axis=0)
    out = np.zeros_like(x, dtype=np.float64)
    for i, w in enumerate(k):
        out += w * pad[i : i + x.shape[0]]
    return out


@dataclass
class FootStep:
    """Foot ``foot`` (0 left, 1 right) swings during [t0, t1] to planar pose (x, y, yaw)."""

    foot: int
    t0: float
    t1: float
    x: float
    y: float
    yaw: float


class G1MotionSynth:
    """Kinematic clip generator for a humanoid with a free root and two 6-dof legs."""

    def __init__(self, robot: str = "g1", fps: float = FPS):
        from simppo.robot import load_robot_cfg

        cfg = load_robot_cfg(robot)
        self.rk = RobotKinematics.from_robot(robot)
        self.m = self.rk.model
        self.d = mujoco.MjData(self.m)
        self.fps = fps
        m = self.m
        self.jidx = {n: i for i, n in enumerate(self.rk.joint_names)}  # index into dof_pos (qpos order)
        home = np.asarray(cfg.default_joint_pos, dtype=np.float64)[self.rk.input_to_qpos]
        self.home_dof = home
        feet = sorted(self.rk.foot_body_ids, key=lambda b: 0 if "left" in self.rk.body_names[b - 1] else 1)
        self.feet = feet
        # leg joints: hinge joints on the path from each foot up to the root
        self.leg_dofs, self.leg_qpos = [], []
        for fb in feet:
            dofs, qadr = [], []
            b = fb
            while b > 0:
                for j in range(m.njnt):
                    if m.jnt_bodyid[j] == b and int(m.jnt_type[j]) == int(mujoco.mjtJoint.mjJNT_HINGE):
                        dofs.append(int(m.jnt_dofadr[j]))
                        qadr.append(int(m.jnt_qposadr[j]))
                b = m.body_parentid[b]
            self.leg_dofs.append(np.array(dofs[::-1]))
            self.leg_qpos.append(np.array(qadr[::-1]))
        self.foot_geoms = [self.rk.foot_geoms[self.rk.foot_body_ids.index(fb)] for fb in feet]
        # home pose at root height 0 → foot frames relative to the ground
        q = self.qpos_from(np.zeros(3), np.array([1.0, 0, 0, 0]), home)
        self._fk(q)
        low = min(self._foot_lowest(i) for i in range(2))
        self.stand_height = -low
        q[2] = self.stand_height
        self._fk(q)
        self.home_qpos = q.copy()
        self.foot_home_pos = np.array([self.d.xpos[fb].copy() for fb in feet])  # world, pelvis at origin xy
        self.foot_home_quat = np.array([self.d.xquat[fb].copy() for fb in feet])

    # ----------------------------------------------------------------- kinematics
    def qpos_from(self, root_pos, root_quat, dof) -> np.ndarray:
        return np.concatenate([root_pos, root_quat, dof])

    def _fk(self, q):
        self.d.qpos[:] = q
        mujoco.mj_kinematics(self.m, self.d)

    def _foot_lowest(self, i) -> float:
        gs = self.foot_geoms[i]
        return float(geom_lowest_z(self.m, gs, self.d.geom_xpos[gs], self.d.geom_xmat[gs]).min())

    def foot_target(self, x, y, yaw, lift, i):
        """World pose (pos, quat) of foot body ``i`` placed flat at planar pose (x, y, yaw) + lift."""
        rel = self.foot_home_pos[i].copy()
        pos = np.array([x, y, rel[2] + lift])
        quat = quat_mul(yaw_quat(yaw), self.foot_home_quat[i])
        return pos, quat

    def solve_legs(self, q: np.ndarray, targets, iters: int = 60, tol: float = 1e-9) -> np.ndarray:
        """Damped least squares on both legs so the foot bodies reach ``targets`` [(pos, quat)] × 2."""
        m, d = self.m, self.d
        q = q.copy()
        jacp = np.zeros((3, m.nv))
        jacr = np.zeros((3, m.nv))
        for _ in range(iters):
            self._fk(q)
            worst = 0.0
            for i, fb in enumerate(self.feet):
                pos, quat = targets[i]
                e = np.concatenate([pos - d.xpos[fb], quat_to_axis_angle(quat_mul(quat, quat_conj(d.xquat[fb])))])
                worst = max(worst, float(e @ e))
                mujoco.mj_comPos(m, d)
                mujoco.mj_jacBody(m, d, jacp, jacr, fb)
                J = np.vstack([jacp[:, self.leg_dofs[i]], jacr[:, self.leg_dofs[i]]])
                lam = 1e-6
                dq = np.linalg.solve(J.T @ J + lam * np.eye(J.shape[1]), J.T @ e)
                q[self.leg_qpos[i]] += dq
            if worst < tol:
                break
        return q

    # ----------------------------------------------------------------- clip assembly
    def build(self, T: int, root_fn, feet_fn, dof_fn) -> np.ndarray:
        """qpos [T, nq]: root pose, foot targets and non-leg joints from callables of time (s)."""
        out = np.zeros((T, self.m.nq))
        q = self.home_qpos.copy()
        for k in range(T):
            t = k / self.fps
            rp, rq = root_fn(t)
            q[:3] = rp
            q[3:7] = rq / np.linalg.norm(rq)
            dof = dof_fn(t)
            legs = np.concatenate(self.leg_qpos)
            keep = q[legs].copy()
            q[7:] = dof
            q[legs] = keep  # warm start the IK from the previous frame's legs
            q = self.solve_legs(q, feet_fn(t))
            out[k] = q
        return out

    def dof(self, **offsets) -> np.ndarray:
        d = self.home_dof.copy()
        for n, v in offsets.items():
            d[self.jidx[n]] += v
        return d

    def _stance_feet(self, yaw=0.0, x=0.0, y=0.0):
        return [
            self.foot_target(x + self.foot_home_pos[i, 0], y + self.foot_home_pos[i, 1], yaw, 0.0, i) for i in range(2)
        ]

    # ----------------------------------------------------------------- clips
    def stand_sway(self, seconds: float = 4.0) -> np.ndarray:
        """Both feet planted; the pelvis sways side to side and bobs gently; arms swing a little."""
        h = self.stand_height - 0.02
        feet = self._stance_feet()

        def root(t):
            env = smooth_window(t, 0.0, seconds, 0.6)
            y = 0.035 * np.sin(2 * np.pi * t / 2.5) * env
            x = 0.012 * np.sin(2 * np.pi * t / 5.0) * env
            z = h - 0.012 * (1 - np.cos(2 * np.pi * t / 2.5)) * env
            roll = -0.03 * np.sin(2 * np.pi * t / 2.5) * env
            return np.array([x, y, z]), quat_from_axis_angle(np.array([roll, 0.0, 0.0]))

        def dofs(t):
            env = smooth_window(t, 0.0, seconds, 0.6)
            s = np.sin(2 * np.pi * t / 2.5) * env
            return self.dof(
                left_shoulder_pitch_joint=0.12 * s,
                right_shoulder_pitch_joint=-0.12 * s,
                waist_roll_joint=0.04 * s,
                waist_yaw_joint=0.05 * s,
            )

        return self.build(int(seconds * self.fps) + 1, root, lambda t: feet, dofs)

    def squat(self, seconds: float = 4.0) -> np.ndarray:
        """Two squats (pelvis down 18 cm, hips back, trunk forward, arms forward), feet planted."""
        h = self.stand_height - 0.02
        feet = self._stance_feet()

        def depth(t):
            s = np.clip((t - 0.4) / (seconds - 0.8), 0.0, 1.0)
            return 0.5 * (1 - np.cos(4 * np.pi * s))  # two cycles 0→1→0

        def root(t):
            a = depth(t)
            pitch = 0.25 * a
            return (
                np.array([-0.04 * a, 0.0, h - 0.18 * a]),
                quat_from_axis_angle(np.array([0.0, pitch, 0.0])),
            )

        def dofs(t):
            a = depth(t)
            return self.dof(
                left_shoulder_pitch_joint=-0.9 * a,
                right_shoulder_pitch_joint=-0.9 * a,
                left_elbow_joint=-0.8 * a,
                right_elbow_joint=-0.8 * a,
                waist_pitch_joint=0.1 * a,
            )

        return self.build(int(seconds * self.fps) + 1, root, lambda t: feet, dofs)

    def arm_wave(self, seconds: float = 4.0) -> np.ndarray:
        """Right arm raised to the side and waving; feet planted, slight counter-sway."""
        h = self.stand_height - 0.02
        feet = self._stance_feet()

        def up(t):
            return min_jerk(t / 0.8) * (1 - min_jerk((t - (seconds - 0.8)) / 0.8))

        def root(t):
            a = up(t)
            return np.array([0.0, 0.015 * a, h]), quat_from_axis_angle(np.array([-0.02 * a, 0.0, 0.0]))

        def dofs(t):
            a = up(t)
            w = np.sin(2 * np.pi * 1.5 * (t - 0.8)) * smooth_window(t, 0.8, seconds - 0.8, 0.4)
            return self.dof(
                right_shoulder_roll_joint=-1.2 * a,
                right_shoulder_pitch_joint=-0.5 * a,
                right_elbow_joint=-0.5 * a + 0.35 * w,
                right_shoulder_yaw_joint=0.3 * w,
                right_wrist_roll_joint=0.3 * w,
                waist_roll_joint=0.05 * a,
            )

        return self.build(int(seconds * self.fps) + 1, root, lambda t: feet, dofs)

    # --- stepping: planar foot poses with min-jerk swing arcs, pelvis follows the support
    def _stepping(
        self,
        steps: list[FootStep],
        seconds: float,
        lift: float,
        shift: float,
        pelvis_drop: float = 0.03,
        arm_swing: float = 0.0,
    ) -> np.ndarray:
        T = int(seconds * self.fps) + 1
        times = np.arange(T) / self.fps
        h = self.stand_height - pelvis_drop
        start = [(self.foot_home_pos[i, 0], self.foot_home_pos[i, 1], 0.0) for i in range(2)]

        def foot_state(i, t):
            cur = start[i]
            for st in steps:
                if st.foot != i:
                    continue
                if t <= st.t0:
                    break
                if t >= st.t1:
                    cur = (st.x, st.y, st.yaw)
                    continue
                s = (t - st.t0) / (st.t1 - st.t0)
                a = min_jerk(s)
                x = cur[0] + a * (st.x - cur[0])
                y = cur[1] + a * (st.y - cur[1])
                yaw = cur[2] + a * (st.yaw - cur[2])
                return (x, y, yaw, lift * bump(s), True)
            return (*cur, 0.0, False)

        # pelvis planar path: midpoint of the feet, shifted toward the stance foot while the other swings
        mid = np.zeros((T, 3))
        for k, t in enumerate(times):
            fs = [foot_state(i, t) for i in range(2)]
            c = 0.5 * (np.array(fs[0][:2]) + np.array(fs[1][:2]))
            for i in range(2):
                if fs[1 - i][4]:  # other foot swinging → lean over foot i
                    c = c + shift * (np.array(fs[i][:2]) - c) / max(1e-9, np.linalg.norm(np.array(fs[i][:2]) - c))
            yaw = 0.5 * (fs[0][2] + fs[1][2])
            mid[k] = (c[0], c[1], yaw)
        mid = gaussian_smooth(mid, 0.12 * self.fps)

        def root(t):
            k = min(int(round(t * self.fps)), T - 1)
            x, y, yaw = mid[k]
            return np.array([x, y, h]), yaw_quat(yaw)

        def feet(t):
            out = []
            for i in range(2):
                x, y, yaw, z, _ = foot_state(i, t)
                out.append(self.foot_target(x, y, yaw, z, i))
            return out

        def dofs(t):
            if arm_swing == 0.0:
                return self.dof()
            # arms swing opposite to the legs: left arm forward when the right foot is ahead
            k = min(int(round(t * self.fps)), T - 1)
            fs = [foot_state(i, t) for i in range(2)]
            yaw = mid[k, 2]
            fwd = np.array([np.cos(yaw), np.sin(yaw)])
            ahead = float(fwd @ (np.array(fs[1][:2]) - np.array(fs[0][:2])))
            a = np.clip(ahead / 0.3, -1.0, 1.0) * arm_swing
            return self.dof(left_shoulder_pitch_joint=-a, right_shoulder_pitch_joint=a)

        return self.build(T, root, feet, dofs)

    def step_in_place(self, seconds: float = 4.5) -> np.ndarray:
        """Alternating steps lifting each foot 8 cm and putting it back where it was."""
        steps, t = [], 0.6
        for k in range(5):
            i = k % 2
            steps.append(FootStep(i, t + 0.15, t + 0.6, self.foot_home_pos[i, 0], self.foot_home_pos[i, 1], 0.0))
            t += 0.75
        return self._stepping(steps, seconds, lift=0.08, shift=0.05)

    def walk(self, seconds: float = 5.0, stride: float = 0.2) -> np.ndarray:
        """A short forward walk: start from standing, 6 steps of ``stride`` m, end feet together."""
        steps, t = [], 0.6
        x = [self.foot_home_pos[0, 0], self.foot_home_pos[1, 0]]
        n = 6
        for k in range(n):
            i = k % 2
            lead = max(x) if k else x[1 - i]
            nx = lead + stride if k < n - 1 else x[1 - i]
            steps.append(FootStep(i, t + 0.12, t + 0.52, nx, self.foot_home_pos[i, 1], 0.0))
            x[i] = nx
            t += 0.62
        return self._stepping(steps, seconds, lift=0.07, shift=0.04, arm_swing=0.3)

    def turn(self, seconds: float = 5.0, total_yaw: float = np.pi / 2) -> np.ndarray:
        """Turn in place to the left by ``total_yaw`` in four step pairs."""
        steps, t = [], 0.6
        pairs = 4
        for k in range(pairs):
            yaw = total_yaw * (k + 1) / pairs
            for i in (0, 1):
                p = self.foot_home_pos[i, :2]
                c, s = np.cos(yaw), np.sin(yaw)
                x, y = c * p[0] - s * p[1], s * p[0] + c * p[1]
                steps.append(FootStep(i, t + 0.08, t + 0.43, x, y, yaw))
                t += 0.5
        return self._stepping(steps, seconds, lift=0.06, shift=0.04)

    def generate(self, name: str) -> np.ndarray:
        if name not in CLIP_NAMES:
            raise KeyError(f"unknown clip {name!r}; known: {CLIP_NAMES}")
        return getattr(self, name)()

    def generate_all(self) -> dict[str, np.ndarray]:
        return {n: self.generate(n) for n in CLIP_NAMES}

    def to_csv_rows(self, qpos: np.ndarray) -> np.ndarray:
        """qpos [T, nq] (MuJoCo order) → CSV rows: root pos, root quat wxyz, joints in config order."""
        return np.concatenate([qpos[:, :7], qpos[:, 7:][:, self.rk.qpos_to_input]], axis=1)
