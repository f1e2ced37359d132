"""Typed config of ``env=humanoid_imitation`` (every default lives here; YAML only overrides)."""

from dataclasses import dataclass, field

from simppo.envs.imitation.sampler import AdaptiveSamplingCfg


@dataclass
class RewardWeightsCfg:
    """Weight of each reward term of the spec (penalties negative). Defaults follow BeyondMimic / mjlab tracking."""

    anchor_pos: float = 0.5
    anchor_ori: float = 0.5
    body_pos: float = 1.0
    body_ori: float = 1.0
    body_lin_vel: float = 1.0
    body_ang_vel: float = 1.0
    action_rate: float = -0.1
    joint_limit: float = -10.0
    undesired_contacts: float = -0.1
    self_collisions: float = -0.1  # per contact between two robot geoms (sim.self_collision)


@dataclass
class RewardSigmasCfg:
    """σ of the exp(-err²/σ²) tracking terms (m, rad, m, rad, m/s, rad/s)."""

    anchor_pos: float = 0.3
    anchor_ori: float = 0.4
    body_pos: float = 0.3
    body_ori: float = 0.4
    body_lin_vel: float = 1.0
    body_ang_vel: float = 3.14


@dataclass
class TerminationCfg:
    anchor_height: float = 0.25  # |ref - robot| anchor height (m)
    anchor_ori: float = 0.8  # |ref - robot| z component of gravity in the anchor frame
    ee_height: float = 0.25  # |ref - robot| height of any end effector (m)


@dataclass
class HumanoidImitationEnvCfg:
    name: str = "humanoid_imitation"
    future_steps: list[int] = field(default_factory=lambda: [1, 2, 4, 8])  # control steps ahead
    init_start_prob: float = 0.1  # chance a reset starts its motion at t = 0
    max_episode_length_s: float = 20.0
    truncate_at_clip_end: bool = True  # False: keep tracking the clip's last frame after it ends (evaluation)
    action_clip: float = 10.0
    privileged_critic: bool = True  # the critic also sees reference and body velocities
    soft_joint_limit_factor: float = 0.9
    kinematic_replay: bool = False  # write the reference into the simulator instead of stepping physics
    rewards: RewardWeightsCfg = field(default_factory=RewardWeightsCfg)
    sigmas: RewardSigmasCfg = field(default_factory=RewardSigmasCfg)
    terminations: TerminationCfg = field(default_factory=TerminationCfg)
    sampling: AdaptiveSamplingCfg = field(default_factory=AdaptiveSamplingCfg)
