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
A velocity write is an external impulse on the root, as a push is: nothing else of the simulator changes; the
evaluation never assists.

How ``alpha`` fades, after each step's terminations (:func:`fade_assist`):

- one share for every env (``per_motion = 0``, ``alpha [1]``): it falls by ``decrement`` per control step to 0, from
  where training is unassisted;
- one share per motion (``per_motion = 1``, ``alpha [M]``): each motion's envs are counted, its termination rate
  folded into an EMA, and its share moves by ``decrement``: down (to 0) while the EMA is under ``max_rate``, back
  up (to ``hi``) otherwise. The rate is per env-step (``per_episode = 0``: ``max_rate`` is one termination per
  ``survive_s``) or per ended episode (``per_episode = 1``: the fraction of the motion's episodes that end on a
  termination rather than at the clip's end or a time-out, a rate that does not count a short clip's episodes as
  surviving because they run out of clip first). A motion the policy tracks alone loses its harness as fast as the
  schedule's; one it cannot yet track keeps as much as it needs. Ending episodes on the global drift
  (``env.terminations.body_pos``) makes a robot left behind count.

Entry points: :func:`assist_root` (after the reference of the step is queried, before the physics) and
:func:`fade_assist` (after the terminations of the step).
"""

import warp as wp

from simppo.kernels.imitation.buffers import RefState
from simppo.kernels.quat import quat_conj, quat_mul, quat_normalize, quat_rotate, quat_rotate_inv, quat_to_axis_angle
from simppo.kernels.types import SimState


@wp.struct
class RootAssist:
    """``alpha [1]`` or, with ``per_motion``, ``[M]`` (float32, state, read-modify-write): the share of the way to
    the reference's root velocity applied this step (env ``i`` reads ``alpha[per_motion * motion_ids[i]]``).
    ``motion_ids [N]`` (int32), ``terminated`` / ``truncated [N]`` (bool) in; with ``per_motion``: ``counts [M, 3]``
    (float32 scratch: each motion's env-steps, ended episodes and terminations this step) and ``rate_ema [M]``
    (float32 state: the EMA of each motion's terminations per env-step, or with ``per_episode`` per ended
    episode). ``decrement`` the share's move per control step, ``hi`` its ceiling, ``ema`` the EMA's weight of a
    step, ``max_rate`` the EMA under which a motion's share falls, ``inv_tau`` 1 / the time in which the pose
    error is closed, ``vertical`` / ``rotation`` 1 to assist the height / the orientation too (0: horizontal
    only)."""

    alpha: wp.array(dtype=wp.float32)
    motion_ids: wp.array(dtype=wp.int32)
    terminated: wp.array(dtype=wp.bool)
    truncated: wp.array(dtype=wp.bool)
    counts: wp.array2d(dtype=wp.float32)
    rate_ema: wp.array(dtype=wp.float32)
    per_motion: int
    per_episode: int
    decrement: float
    hi: float
    ema: float
    max_rate: float
    inv_tau: float
    vertical: int
    rotation: int


@wp.kernel
def _assist_root(ref: RefState, a: RootAssist, sim: SimState):
    """Launch dim ``N``: every env's free-joint velocity (``qvel[:, 0:2]``, with ``vertical`` ``[:, 2]``, with
    ``rotation`` ``[:, 3:6]``) a share ``alpha`` towards the reference's root (slot 0, the time this step reaches).

    # Data in: ref.root_pos / root_quat / root_lin_vel_w / root_ang_vel_w (slot 0), sim.qpos[:, 0:7], a.alpha,
    #          a.motion_ids (per_motion)
    # Data out: sim.qvel[:, 0:6] (the assisted axes)
    """
    env = wp.tid()
    alpha = a.alpha[a.per_motion * a.motion_ids[env]]
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


@wp.kernel
def _count_motion_outcomes(a: RootAssist):
    """Launch dim ``N``: each env's step, its episode's end and its termination, counted for its motion.

    # Data in: a.motion_ids, a.terminated, a.truncated
    # Data out: a.counts (accumulated)
    """
    env = wp.tid()
    m = a.motion_ids[env]
    wp.atomic_add(a.counts, m, 0, 1.0)
    if a.terminated[env] or a.truncated[env]:
        wp.atomic_add(a.counts, m, 1, 1.0)
    if a.terminated[env]:
        wp.atomic_add(a.counts, m, 2, 1.0)


@wp.kernel
def _fade_by_rate(a: RootAssist):
    """Launch dim ``M``: a motion with envs this step folds its termination rate (per env-step, or with
    ``per_episode`` per ended episode, when some ended) into its EMA and moves its share one ``decrement`` down
    (the EMA under ``max_rate``) or up (within ``[0, hi]``); the counts restart. A motion without envs this step
    keeps its share and EMA.

    # Data in: a.counts
    # Data out: a.rate_ema, a.alpha (read-modify-write), a.counts (zeroed)
    """
    m = wp.tid()
    if a.counts[m, 0] > 0.0:
        per = a.counts[m, a.per_episode]
        ema = a.rate_ema[m]
        if per > 0.0:
            ema = ema + a.ema * (a.counts[m, 2] / per - ema)
            a.rate_ema[m] = ema
        if ema < a.max_rate:
            a.alpha[m] = wp.max(0.0, a.alpha[m] - a.decrement)
        else:
            a.alpha[m] = wp.min(a.hi, a.alpha[m] + a.decrement)
    for k in range(3):
        a.counts[m, k] = 0.0


def assist_root(ref: RefState, a: RootAssist, sim: SimState) -> None:
    """The root velocities of every env nudged by its share (those at 0 untouched). Device work only."""
    wp.launch(_assist_root, dim=sim.qvel.shape[0], inputs=[ref, a, sim], device=a.alpha.device)


def fade_assist(a: RootAssist) -> None:
    """One control step of the fade, after the step's terminations: the one share one ``decrement`` lower, or each
    motion's share moved by its termination rate. Device work only (no host read), capturable in the step graph."""
    if a.per_motion:
        wp.launch(_count_motion_outcomes, dim=a.motion_ids.shape[0], inputs=[a], device=a.alpha.device)
        wp.launch(_fade_by_rate, dim=a.alpha.shape[0], inputs=[a], device=a.alpha.device)
    else:
        wp.launch(_fade, dim=1, inputs=[a], device=a.alpha.device)
