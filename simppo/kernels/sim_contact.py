"""Per-world, per-foot contact flags and normal forces from MJWarp's contact/constraint buffers."""

import warp as wp


@wp.kernel
def foot_contact_kernel(
    nacon: wp.array(dtype=wp.int32),
    contact_geom: wp.array(dtype=wp.vec2i),
    contact_worldid: wp.array(dtype=wp.int32),
    contact_dim: wp.array(dtype=wp.int32),
    contact_efc_address: wp.array2d(dtype=wp.int32),
    efc_force: wp.array2d(dtype=wp.float32),
    geom_foot: wp.array(dtype=wp.int32),
    elliptic: int,
    contact_out: wp.array2d(dtype=wp.int32),
    force_out: wp.array2d(dtype=wp.float32),
):
    """Launch dim ``naconmax`` (contacts of all worlds). ``geom_foot [ngeom]``: foot index of a geom
    or -1; ``elliptic``: 1 for elliptic friction cones, 0 for pyramidal. Outputs (zeroed before
    launch): ``contact_out [N, nfeet]`` = 1 where the foot has an active contact;
    ``force_out [N, nfeet]`` += contact normal force (elliptic or condim 1: the first constraint
    row; pyramidal: the sum of the ``2*(condim-1)`` pyramid-edge rows)."""
    c = wp.tid()
    if c >= nacon[0]:
        return
    adr0 = contact_efc_address[c, 0]
    if adr0 < 0:
        return
    g = contact_geom[c]
    foot = geom_foot[g[0]]
    if foot < 0:
        foot = geom_foot[g[1]]
    if foot < 0:
        return
    w = contact_worldid[c]
    dim = contact_dim[c]
    nrow = wp.int32(1)
    if dim > 1 and elliptic == 0:
        nrow = 2 * (dim - 1)
    fn = wp.float32(0.0)
    for k in range(nrow):
        adr = contact_efc_address[c, k]
        if adr >= 0:
            fn += efc_force[w, adr]
    contact_out[w, foot] = 1
    wp.atomic_add(force_out, w, foot, fn)


def launch_foot_contact(
    nacon: wp.array,
    contact_geom: wp.array,
    contact_worldid: wp.array,
    contact_dim: wp.array,
    contact_efc_address: wp.array,
    efc_force: wp.array,
    geom_foot: wp.array,
    elliptic: bool,
    contact_out: wp.array,
    force_out: wp.array,
) -> None:
    """Typed wrapper; zeroes the outputs ``[N, nfeet]`` then launches over all contact slots."""
    contact_out.zero_()
    force_out.zero_()
    wp.launch(
        foot_contact_kernel,
        dim=contact_geom.shape[0],
        inputs=[
            nacon,
            contact_geom,
            contact_worldid,
            contact_dim,
            contact_efc_address,
            efc_force,
            geom_foot,
            int(elliptic),
        ],
        outputs=[contact_out, force_out],
        device=contact_geom.device,
    )
