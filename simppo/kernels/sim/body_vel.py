"""World-frame body velocities at the body frame origin from MuJoCo's ``cvel``.

MuJoCo/MJWarp ``cvel[b] = [ang(3), lin(3)]`` is the spatial velocity of body ``b`` expressed in a
world-aligned frame located at ``subtree_com[body_rootid[b]]``. The linear velocity of the body
frame origin is ``lin + ang x (xpos[b] - subtree_com[root])``; the angular velocity is ``ang``.
This equals ``mujoco.mj_objectVelocity(..., mjOBJ_XBODY, flg_local=0)`` (which returns ``[ang, lin]``).
"""

import warp as wp


@wp.struct
class BodyVelBuffers:
    """``body_rootid [nbody]``; ``xpos``, ``subtree_com``, ``cvel`` and both outputs ``[N, nbody]``."""

    body_rootid: wp.array(dtype=wp.int32)
    xpos: wp.array2d(dtype=wp.vec3)
    subtree_com: wp.array2d(dtype=wp.vec3)
    cvel: wp.array2d(dtype=wp.spatial_vector)
    lin_vel_w_out: wp.array2d(dtype=wp.vec3)
    ang_vel_w_out: wp.array2d(dtype=wp.vec3)


@wp.kernel
def body_vel_w_kernel(b: BodyVelBuffers):
    """Launch dim ``(N, nbody)``.

    # Data in: b.cvel, b.subtree_com, b.body_rootid, b.xpos
    # Data out: b.lin_vel_w_out, b.ang_vel_w_out (world-frame velocities of each body frame's origin)
    """
    w, i = wp.tid()
    v = b.cvel[w, i]
    ang = wp.vec3(v[0], v[1], v[2])
    lin = wp.vec3(v[3], v[4], v[5])
    com = b.subtree_com[w, b.body_rootid[i]]
    b.lin_vel_w_out[w, i] = lin + wp.cross(ang, b.xpos[w, i] - com)
    b.ang_vel_w_out[w, i] = ang


def body_velocities(b: BodyVelBuffers) -> None:
    """``lin_vel_w_out`` / ``ang_vel_w_out [N, nbody]`` from the current ``xpos``, ``subtree_com``, ``cvel``."""
    wp.launch(body_vel_w_kernel, dim=b.xpos.shape, inputs=[b], device=b.xpos.device)
