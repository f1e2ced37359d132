"""World-frame body velocities at the body frame origin from MJWarp's ``cvel``.

MuJoCo/MJWarp ``cvel[b] = [ang(3), lin(3)]`` is the spatial velocity of body ``b`` expressed in a
world-aligned frame located at ``subtree_com[body_rootid[b]]``. The linear velocity of the body
frame origin is ``lin + ang x (xpos[b] - subtree_com[root])``; the angular velocity is ``ang``.
This equals ``mujoco.mj_objectVelocity(..., flg_local=0)`` (which returns ``[ang, lin]``).
"""

import warp as wp


@wp.kernel
def body_vel_w_kernel(
    body_rootid: wp.array(dtype=wp.int32),
    xpos: wp.array2d(dtype=wp.vec3),
    subtree_com: wp.array2d(dtype=wp.vec3),
    cvel: wp.array2d(dtype=wp.spatial_vector),
    lin_vel_w_out: wp.array2d(dtype=wp.vec3),
    ang_vel_w_out: wp.array2d(dtype=wp.vec3),
):
    """Launch dim ``(N, nbody)``. ``xpos/subtree_com/cvel [N, nbody]`` → ``*_out [N, nbody]`` (vec3)."""
    w, b = wp.tid()
    v = cvel[w, b]
    ang = wp.vec3(v[0], v[1], v[2])
    lin = wp.vec3(v[3], v[4], v[5])
    com = subtree_com[w, body_rootid[b]]
    lin_vel_w_out[w, b] = lin + wp.cross(ang, xpos[w, b] - com)
    ang_vel_w_out[w, b] = ang


def launch_body_vel_w(
    body_rootid: wp.array,
    xpos: wp.array,
    subtree_com: wp.array,
    cvel: wp.array,
    lin_vel_w_out: wp.array,
    ang_vel_w_out: wp.array,
) -> None:
    """Typed wrapper: all 2-D arrays are ``[N, nbody]``; ``body_rootid [nbody]`` int32."""
    n, nbody = xpos.shape
    wp.launch(
        body_vel_w_kernel,
        dim=(n, nbody),
        inputs=[body_rootid, xpos, subtree_com, cvel],
        outputs=[lin_vel_w_out, ang_vel_w_out],
        device=xpos.device,
    )
