"""Domain randomization of the humanoid-imitation env: per-env draws at reset and interval pushes.

Every env owns a random state (``rng [N]``, uint32, advanced by each draw), so the draws are made on the
device without host syncs and are reproducible from the env's seed. Model parameters are written into the
simulator's per-world :class:`~simppo.sim.base.WorldParams`; the calibration offsets into the env's
per-env default pose; the action delay into the env's ``action_delay``.
"""

import warp as wp

from simppo.kernels.quat import quat_rotate_inv
from simppo.kernels.types import SimState, WorldParams

PUSH_EPS = 1.0e-6  # a timer below this has run out (float32 sums of dt)


@wp.struct
class RandomizationParams:
    """Ranges ``[lo, hi]`` (``*_on``: 0 = term off) and what they apply to. ``nominal``: the model's values
    (``W = 1``); ``default_joint_pos [A]`` the nominal pose; ``foot_geoms [G]`` geoms whose sliding friction
    is drawn (one value per env); ``com_body`` the body whose ``body_ipos`` moves by ``[com_lo, com_hi]``
    per axis; ``body_parentid [nbody]`` to keep ``body_subtreemass`` consistent with scaled masses;
    ``dt`` the control step (push timers)."""

    nominal: WorldParams
    default_joint_pos: wp.array(dtype=wp.float32)
    foot_geoms: wp.array(dtype=wp.int32)
    body_parentid: wp.array(dtype=wp.int32)
    friction_on: int
    friction_lo: float
    friction_hi: float
    offset_on: int
    offset_lo: float
    offset_hi: float
    com_on: int
    com_body: int
    com_lo: wp.vec3
    com_hi: wp.vec3
    mass_on: int
    mass_lo: float
    mass_hi: float
    kp_on: int
    kp_lo: float
    kp_hi: float
    kd_on: int
    kd_lo: float
    kd_hi: float
    delay_on: int
    delay_lo: int
    delay_hi: int
    push_on: int
    push_interval_lo: float
    push_interval_hi: float
    push_lin_lo: wp.vec3
    push_lin_hi: wp.vec3
    push_ang_lo: wp.vec3
    push_ang_hi: wp.vec3
    dt: float


@wp.struct
class RandomizationBuffers:
    """Per env: ``rng [N]`` random states; ``push_timer [N]`` seconds to the next push; ``push_count [N]``
    pushes so far; ``world`` the simulator's per-world parameters ``[N, ...]`` (outputs);
    ``default_joint_pos [N, A]`` and ``action_delay [N]`` the env's buffers (outputs)."""

    rng: wp.array(dtype=wp.uint32)
    push_timer: wp.array(dtype=wp.float32)
    push_count: wp.array(dtype=wp.int32)
    world: WorldParams
    default_joint_pos: wp.array2d(dtype=wp.float32)
    action_delay: wp.array(dtype=wp.int32)


@wp.kernel
def _randomize(p: RandomizationParams, mask: wp.array(dtype=wp.bool), rb: RandomizationBuffers):
    """Draw the randomized parameters of every env in ``mask [N]``, in a fixed order from its own state.

    # Data in: p (ranges, nominal model values, geom / body ids), mask, rb.rng
    # Data out: rb.world (the env's row of every WorldParams field), rb's drawn offsets and delays, rb.rng
    """
    env = wp.tid()
    if not mask[env]:
        return
    state = rb.rng[env]
    if p.friction_on != 0:
        mu = wp.randf(state, p.friction_lo, p.friction_hi)
        for i in range(p.foot_geoms.shape[0]):
            g = p.foot_geoms[i]
            f = p.nominal.geom_friction[0, g]
            rb.world.geom_friction[env, g] = wp.vec3(mu, f[1], f[2])
    if p.offset_on != 0:
        for j in range(p.default_joint_pos.shape[0]):
            rb.default_joint_pos[env, j] = p.default_joint_pos[j] + wp.randf(state, p.offset_lo, p.offset_hi)
    if p.com_on != 0:
        d = wp.vec3(wp.randf(state, p.com_lo[0], p.com_hi[0]), wp.randf(state, p.com_lo[1], p.com_hi[1]),
                    wp.randf(state, p.com_lo[2], p.com_hi[2]))
        rb.world.body_ipos[env, p.com_body] = p.nominal.body_ipos[0, p.com_body] + d
    if p.mass_on != 0:
        nbody = p.body_parentid.shape[0]
        rb.world.body_subtreemass[env, 0] = p.nominal.body_mass[0, 0]
        for b in range(1, nbody):
            s = wp.randf(state, p.mass_lo, p.mass_hi)
            m = p.nominal.body_mass[0, b] * s
            rb.world.body_mass[env, b] = m
            rb.world.body_inertia[env, b] = p.nominal.body_inertia[0, b] * s
            rb.world.body_subtreemass[env, b] = m
        for i in range(1, nbody):  # children follow their parents in MuJoCo's body order
            b = nbody - i
            parent = p.body_parentid[b]
            rb.world.body_subtreemass[env, parent] = rb.world.body_subtreemass[env, parent] + \
                rb.world.body_subtreemass[env, b]
    if p.kp_on != 0 or p.kd_on != 0:
        for u in range(p.nominal.actuator_gainprm.shape[1]):
            gain = p.nominal.actuator_gainprm[0, u]
            bias = p.nominal.actuator_biasprm[0, u]
            if p.kp_on != 0:
                s = wp.randf(state, p.kp_lo, p.kp_hi)
                gain[0] = gain[0] * s
                bias[1] = bias[1] * s
            if p.kd_on != 0:
                bias[2] = bias[2] * wp.randf(state, p.kd_lo, p.kd_hi)
            rb.world.actuator_gainprm[env, u] = gain
            rb.world.actuator_biasprm[env, u] = bias
    if p.delay_on != 0:
        rb.action_delay[env] = wp.min(wp.randi(state, p.delay_lo, p.delay_hi + 1), p.delay_hi)
    if p.push_on != 0:
        rb.push_timer[env] = wp.randf(state, p.push_interval_lo, p.push_interval_hi)
    rb.rng[env] = state


@wp.kernel
def _push(p: RandomizationParams, rb: RandomizationBuffers, sim: SimState):
    """Count down each env's push timer by ``dt``; when it runs out, add a uniform velocity kick to the root
    (world-frame linear and angular velocity; the free joint's angular velocity is in the root frame) and
    draw the next interval. An unstable world is not kicked (it is reset anyway).

    # Data in: p.dt, p.push_* ranges, rb.push_timer, rb.rng, sim.unstable
    # Data out: sim.qvel (root rows of kicked envs), rb.push_timer, rb.rng
    """
    env = wp.tid()
    t = rb.push_timer[env] - p.dt
    if t < PUSH_EPS:
        state = rb.rng[env]
        dv = wp.vec3(wp.randf(state, p.push_lin_lo[0], p.push_lin_hi[0]),
                     wp.randf(state, p.push_lin_lo[1], p.push_lin_hi[1]),
                     wp.randf(state, p.push_lin_lo[2], p.push_lin_hi[2]))
        dw = wp.vec3(wp.randf(state, p.push_ang_lo[0], p.push_ang_hi[0]),
                     wp.randf(state, p.push_ang_lo[1], p.push_ang_hi[1]),
                     wp.randf(state, p.push_ang_lo[2], p.push_ang_hi[2]))
        if sim.unstable[env] == 0:
            q = wp.vec4(sim.qpos[env, 3], sim.qpos[env, 4], sim.qpos[env, 5], sim.qpos[env, 6])
            dw_b = quat_rotate_inv(q, dw)
            for i in range(3):
                sim.qvel[env, i] = sim.qvel[env, i] + dv[i]
                sim.qvel[env, 3 + i] = sim.qvel[env, 3 + i] + dw_b[i]
            rb.push_count[env] = rb.push_count[env] + 1
        t = wp.randf(state, p.push_interval_lo, p.push_interval_hi)
        rb.rng[env] = state
    rb.push_timer[env] = t


def randomize(p: RandomizationParams, mask: wp.array, rb: RandomizationBuffers) -> None:
    """Per-env draws (friction, calibration offsets, CoM, masses, gains, delay, first push time) of the envs
    in ``mask [N]`` (bool); others untouched."""
    wp.launch(_randomize, dim=mask.shape[0], inputs=[p, mask, rb], device=mask.device)


def push(p: RandomizationParams, rb: RandomizationBuffers, sim: SimState) -> None:
    """Advance the push timers by one control step and kick the root of the envs whose timer ran out
    (writes ``sim.qvel``; the root is the free joint at ``qpos[0:7]`` / ``qvel[0:6]``)."""
    wp.launch(_push, dim=rb.push_timer.shape[0], inputs=[p, rb, sim], device=rb.push_timer.device)
