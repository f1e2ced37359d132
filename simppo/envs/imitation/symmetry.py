"""The humanoid-imitation env's left-right mirror (``agent.symmetry_coef``): its observation rows and actions as
signed permutations, from the robot's joint mirror map (``mirror_pairs`` / ``mirror_negate``) and the mirror kind
each observation term declares in :mod:`simppo.kernels.imitation.spec`."""

from __future__ import annotations

import mujoco
import numpy as np
import torch

from simppo.envs.base import Symmetry
from simppo.envs.imitation.config import HumanoidImitationEnvCfg
from simppo.kernels.imitation import spec
from simppo.robot.config import RobotCfg


def tracked_partners(robot_cfg: RobotCfg, mj_model: mujoco.MjModel, tracked_body_ids) -> list[int]:
    """Each tracked body's mirror partner (an index into ``tracked_body_ids``): the body of its joint's mirror
    partner; a body whose joint has no partner, or that has no actuated joint (the root), is its own. A partner
    that is not tracked is an error naming the robot config."""
    partner, _ = robot_cfg.mirror_map()
    names = robot_cfg.joint_names
    body_of_joint = {name: int(mj_model.jnt_bodyid[mj_model.joint(name).id]) for name in names}
    joint_of_body = {b: name for name, b in body_of_joint.items()}
    tracked = [int(b) for b in np.asarray(tracked_body_ids)]
    out = []
    for b in tracked:
        joint = joint_of_body.get(b)
        mirror_body = b if joint is None else body_of_joint[names[partner[names.index(joint)]]]
        if mirror_body not in tracked:
            raise ValueError(f"{robot_cfg.source or robot_cfg.name}: tracked body {mj_model.body(b).name} mirrors "
                             f"onto {mj_model.body(mirror_body).name}, which is not tracked")
        out.append(tracked.index(mirror_body))
    return out


def mirror_symmetry(robot_cfg: RobotCfg, mj_model: mujoco.MjModel, tracked_body_ids, cfg: HumanoidImitationEnvCfg,
                    device) -> Symmetry | None:
    """The actor's row ``[actor_dim]``, the critic's ``[full_dim]`` and the actions ``[A]`` mirrored (index and
    sign tensors on ``device``), or ``None`` when the robot has no mirror map."""
    joint_map = robot_cfg.mirror_map()
    if joint_map is None:
        return None
    joint_partner, joint_sign = joint_map
    tracked = tracked_partners(robot_cfg, mj_model, tracked_body_ids)
    actor = spec.mirror_columns(joint_partner, joint_sign, tracked, cfg.future_steps, False, cfg.observations,
                                cfg.history_length)
    critic = spec.mirror_columns(joint_partner, joint_sign, tracked, cfg.future_steps, cfg.privileged_critic,
                                 cfg.observations, cfg.history_length)
    actions = (joint_partner, [joint_sign[j] for j in joint_partner])

    def tensors(index_sign):
        return (torch.tensor(index_sign[0], dtype=torch.long, device=device),
                torch.tensor(index_sign[1], dtype=torch.float32, device=device))

    return Symmetry(*tensors(actor), *tensors(critic), *tensors(actions))
