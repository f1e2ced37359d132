"""Actions → position targets of the humanoid-imitation env."""

import warp as wp


@wp.kernel
def apply_actions_kernel(
    actions: wp.array2d(dtype=wp.float32),
    default_joint_pos: wp.array(dtype=wp.float32),
    action_scale: wp.array(dtype=wp.float32),
    action_clip: float,
    ctrl_out: wp.array2d(dtype=wp.float32),
    actions_out: wp.array2d(dtype=wp.float32),
    prev_actions_out: wp.array2d(dtype=wp.float32),
):
    """``actions [N, A]`` (policy output) → ``ctrl_out [N, A]`` = default + scale * clip(action).

    ``actions_out`` keeps the clipped action of this step and ``prev_actions_out`` the one before
    (read-modify-write: the old ``actions_out`` row moves to ``prev_actions_out``).
    """
    env, j = wp.tid()
    a = wp.clamp(actions[env, j], -action_clip, action_clip)
    prev_actions_out[env, j] = actions_out[env, j]
    actions_out[env, j] = a
    ctrl_out[env, j] = default_joint_pos[j] + action_scale[j] * a


def launch_apply_actions(
    actions: wp.array2d,
    default_joint_pos: wp.array,
    action_scale: wp.array,
    action_clip: float,
    ctrl_out: wp.array2d,
    actions_out: wp.array2d,
    prev_actions_out: wp.array2d,
) -> None:
    wp.launch(
        apply_actions_kernel,
        dim=(actions.shape[0], actions.shape[1]),
        inputs=[actions, default_joint_pos, action_scale, float(action_clip)],
        outputs=[ctrl_out, actions_out, prev_actions_out],
        device=actions.device,
    )
