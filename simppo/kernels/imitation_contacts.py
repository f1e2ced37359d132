"""Per-world count of contacts touching bodies that should not touch anything (penalised contacts)."""

import warp as wp


@wp.kernel
def undesired_contacts_kernel(
    nacon: wp.array(dtype=wp.int32),
    contact_geom: wp.array(dtype=wp.vec2i),
    contact_worldid: wp.array(dtype=wp.int32),
    contact_efc_address: wp.array2d(dtype=wp.int32),
    geom_penalized: wp.array(dtype=wp.int32),
    count_out: wp.array(dtype=wp.float32),
):
    """Launch dim ``naconmax`` (the contacts of all worlds, first axis). ``geom_penalized [ngeom]`` is 1
    for geoms of penalised bodies. ``count_out [N]`` (zeroed before the launch) += 1 per active contact
    that involves such a geom."""
    c = wp.tid()
    if c >= nacon[0]:
        return
    if contact_efc_address[c, 0] < 0:
        return
    g = contact_geom[c]
    if geom_penalized[g[0]] != 0 or geom_penalized[g[1]] != 0:
        wp.atomic_add(count_out, contact_worldid[c], 1.0)


def launch_undesired_contacts(
    nacon: wp.array,
    contact_geom: wp.array,
    contact_worldid: wp.array,
    contact_efc_address: wp.array2d,
    geom_penalized: wp.array,
    count_out: wp.array,
) -> None:
    count_out.zero_()
    wp.launch(
        undesired_contacts_kernel,
        dim=contact_geom.shape[0],
        inputs=[nacon, contact_geom, contact_worldid, contact_efc_address, geom_penalized],
        outputs=[count_out],
        device=count_out.device,
    )
