"""The root assist of the imitation env: a virtual harness that, early in training, nudges the robot's free joint
towards the reference's root, and fades out.

Before the physics of a control step, each env's root velocity moves a share ``alpha`` of the way to the velocity
that follows the reference and closes the remaining pose error in ``tau`` seconds:

    v_des = v_ref + (p_ref - p) / tau                                   (world frame)
    w_des = w_ref + axis_angle(q_ref * conj(q)) / tau                   (world frame)
    v <- v + alpha * (v_des - v);  w <- w + alpha * (w_des - w)         (MuJoCo: w stored in the body frame)

on the horizontal axes of ``v`` always, its vertical axis with ``vertical`` and ``w`` with ``rotation``. Carried
along the reference's path but neither held up nor held upright, a policy must keep its own balance from the start
while the harness, not a risky first step, takes it where the reference goes: it learns to step under itself to
stay up. Without the harness, a robot that cannot yet balance a step keeps its feet down and falls behind.
``alpha`` falls by a fixed amount per control step to 0, from where training is unassisted. A velocity write is an
external impulse on the root, as a push is: nothing else of the simulator changes; the evaluation never assists.

Entry point: :func:`assist_root` (after the reference of the step is queried, before the physics).
"""

import warp as wp

from simppo.kernels.imitation.buffers import RefState
from simppo.kernels.quat import quat_conj, quat_mul, quat_normalize, quat_rotate, quat_rotate_inv, quat_to_axis_angle
from simppo.kernels.types import SimState


@wp.struct
class RootAssist:
    """``alpha [1]`` (float32, state, read-modify-write): the share of the way to the reference's root velocity
    applied this step. ``decrement`` its fall per control step, ``inv_tau`` 1 / the time in which the pose error
    is closed, ``vertical`` / ``rotation`` 1 to assist the height / the orientation too (0: horizontal only)."""

    alpha: wp.array(dtype=wp.float32)
    decrement: float
    inv_tau: float
    vertical: int
    rotation: int


@wp.kernel
def _assist_root(ref: RefState, a: RootAssist, sim: SimState):
    """Launch dim ``N``: every env's free-joint velocity (``qvel[:, 0:2]``, with ``vertical`` ``[:, 2]``, with
    ``rotation`` ``[:, 3:6]``) a share ``alpha`` towards the reference's root (slot 0, the time this step reaches).

    # Data in: ref.root_pos / root_quat / root_lin_vel_w / root_ang_vel_w (slot 0), sim.qpos[:, 0:7], a.alpha
    # Data out: sim.qvel[:, 0:6] (the assisted axes)
    """
    env = wp.tid()
    alpha = a.alpha[0]
    if alpha <= 0.0:
        return
    p = wp.vec3(sim.qpos[env, 0], sim.qpos[env, 1], sim.qpos[env, 2])
    v = wp.vec3(sim.qvel[env, 0], sim.qvel[env, 1], sim.qvel[env, 2])
    v_des = ref.root_lin_vel_w[env, 0] + (ref.root_pos[env, 0] - p) * a.inv_tau
    v = v + alpha * (v_des - v)
    for i in range(2 + a.vertical):
        sim.qvel[env, i] = v[i]
    if a.rotation == 0:
        return
    q = quat_normalize(wp.vec4(sim.qpos[env, 3], sim.qpos[env, 4], sim.qpos[env, 5], sim.qpos[env, 6]))
    w = quat_rotate(q, wp.vec3(sim.qvel[env, 3], sim.qvel[env, 4], sim.qvel[env, 5]))
    err = quat_to_axis_angle(quat_mul(quat_normalize(ref.root_quat[env, 0]), quat_conj(q)))
    w_des = ref.root_ang_vel_w[env, 0] + err * a.inv_tau
    w_b = quat_rotate_inv(q, w + alpha * (w_des - w))
    for i in range(3):
        sim.qvel[env, 3 + i] = w_b[i]


@wp.kernel
def _fade(a: RootAssist):
    """Launch dim ``1``: ``alpha`` one control step's ``decrement`` lower, never below 0.

    # Data in / out: a.alpha (read-modify-write)
    """
    a.alpha[0] = wp.max(0.0, a.alpha[0] - a.decrement)


def assist_root(ref: RefState, a: RootAssist, sim: SimState) -> None:
    """One control step of the assist: the root velocities of every env nudged (while ``alpha > 0``), then
    ``alpha`` faded by one step. Device work only (no host read), capturable in the env's step graph."""
    wp.launch(_assist_root, dim=sim.qvel.shape[0], inputs=[ref, a, sim], device=a.alpha.device)
    wp.launch(_fade, dim=1, inputs=[a], device=a.alpha.device)
