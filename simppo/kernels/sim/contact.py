"""Per-world contact summaries from the contacts of the last physics substep.

Contacts use MJWarp's flat layout, which the MuJoCo C backend fills too (fixed slots per world):
``nacon [1]`` (slots in use), ``geom [C]`` vec2i, ``worldid [C]``, ``dim [C]`` (condim),
``efc_address [C, k]`` (constraint row of each friction-cone row; ``[c, 0] < 0`` = inactive contact),
``efc_force [N, nefc]``. A contact is counted when it is active.
"""

import warp as wp


@wp.struct
class ContactBuffers:
    """Contacts (above), per-geom maps and outputs.

    ``geom_foot [ngeom]``: foot index of a geom or -1; ``geom_penalized [ngeom]``: 1 for geoms whose
    contacts are penalised; ``geom_robot [ngeom]``: 1 for the robot's geoms; ``elliptic``: 1 for
    elliptic friction cones, 0 for pyramidal.
    Outputs (zeroed by :func:`contacts`): ``foot_contact_out [N, nfeet]`` int32 (1 = the foot has an
    active contact), ``foot_force_out [N, nfeet]`` (summed normal force, N), ``penalized_out [N]``
    (number of active contacts touching a penalised geom), ``self_out [N]`` (number of active contacts
    between two robot geoms).
    """

    nacon: wp.array(dtype=wp.int32)
    geom: wp.array(dtype=wp.vec2i)
    worldid: wp.array(dtype=wp.int32)
    dim: wp.array(dtype=wp.int32)
    efc_address: wp.array2d(dtype=wp.int32)
    efc_force: wp.array2d(dtype=wp.float32)
    geom_foot: wp.array(dtype=wp.int32)
    geom_penalized: wp.array(dtype=wp.int32)
    geom_robot: wp.array(dtype=wp.int32)
    elliptic: wp.int32
    foot_contact_out: wp.array2d(dtype=wp.int32)
    foot_force_out: wp.array2d(dtype=wp.float32)
    penalized_out: wp.array(dtype=wp.float32)
    self_out: wp.array(dtype=wp.float32)


@wp.kernel
def contact_kernel(b: ContactBuffers):
    """Launch dim ``C`` (contact slots of all worlds). Normal force: elliptic cones or condim 1: the
    first constraint row; pyramidal: the sum of the ``2*(condim-1)`` pyramid-edge rows.

    # Data in: b.nacon, b.geom, b.worldid, b.dim, b.efc_address, b.efc_force, b.geom_foot / geom_penalized / geom_robot
    # Data out: b.foot_contact_out, b.foot_force_out, b.penalized_out, b.self_out (added to; zeroed by contacts())
    """
    c = wp.tid()
    if c >= b.nacon[0]:
        return
    if b.efc_address[c, 0] < 0:
        return
    g = b.geom[c]
    w = b.worldid[c]
    if b.geom_penalized[g[0]] != 0 or b.geom_penalized[g[1]] != 0:
        wp.atomic_add(b.penalized_out, w, 1.0)
    if b.geom_robot[g[0]] != 0 and b.geom_robot[g[1]] != 0:
        wp.atomic_add(b.self_out, w, 1.0)
    foot = b.geom_foot[g[0]]
    if foot < 0:
        foot = b.geom_foot[g[1]]
    if foot < 0:
        return
    dim = b.dim[c]
    nrow = wp.int32(1)
    if dim > 1 and b.elliptic == 0:
        nrow = 2 * (dim - 1)
    fn = wp.float32(0.0)
    for k in range(nrow):
        adr = b.efc_address[c, k]
        if adr >= 0 and adr < b.efc_force.shape[1]:
            fn += b.efc_force[w, adr]
    b.foot_contact_out[w, foot] = 1
    wp.atomic_add(b.foot_force_out, w, foot, fn)


def contacts(b: ContactBuffers) -> None:
    """Zero the outputs, then foot contact flags / normal forces, penalised- and self-contact counts."""
    b.foot_contact_out.zero_()
    b.foot_force_out.zero_()
    b.penalized_out.zero_()
    b.self_out.zero_()
    wp.launch(contact_kernel, dim=b.geom.shape[0], inputs=[b], device=b.geom.device)
