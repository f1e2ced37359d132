"""The one declaration of the humanoid-imitation env's observation and reward layout.

Everything else derives from here: the observation column ranges (``obs_slices``) and dims, the
reward-term indices used inside the Warp kernels (``REWARD_INDEX``, bound as Warp constants in
:mod:`simppo.kernels.imitation.rewards`), the per-term logging names (``episode/rew_<name>``), the
weight / σ vectors built from the env config, and the layout the float64 test oracle assembles.

Observation terms are written by :mod:`simppo.kernels.imitation.observations` in exactly this order.
Widths are symbolic: ``A`` joints, ``Nt`` tracked bodies; one block of ``FUTURE_TERMS`` per future frame.
"""

from __future__ import annotations

from dataclasses import dataclass

ACTOR, CRITIC = "actor", "critic"  # critic terms follow all actor terms (the actor sees a prefix of the row)
TRACKING, PENALTY = "tracking", "penalty"


@dataclass(frozen=True)
class ObsTerm:
    """``width = const + per_joint * A + per_tracked * Nt``; ``group``: actor (both see it) or critic only."""

    name: str
    const: int = 0
    per_joint: int = 0
    per_tracked: int = 0
    group: str = ACTOR

    def width(self, num_joints: int, num_tracked: int) -> int:
        return self.const + self.per_joint * num_joints + self.per_tracked * num_tracked


@dataclass(frozen=True)
class RewardTerm:
    """``tracking``: ``exp(-error / σ²)`` with σ from ``cfg.sigmas.<name>``; ``penalty``: the raw value.
    Weight from ``cfg.rewards.<name>`` (penalties negative)."""

    name: str
    kind: str


# Robot proprioception and body poses (vectors in the root's heading frame; ``_b``: full root frame).
PROPRIO_TERMS = (
    ObsTerm("gravity_b", const=3),
    ObsTerm("root_lin_vel_b", const=3),
    ObsTerm("root_ang_vel_b", const=3),
    ObsTerm("joint_pos_rel", per_joint=1),
    ObsTerm("joint_vel", per_joint=1),
    ObsTerm("last_action", per_joint=1),
    ObsTerm("body_pos", per_tracked=3),
    ObsTerm("body_rot6d", per_tracked=6),
)
# Per future frame k (named ``future{k}_<term>``): the reference relative to the robot's anchor.
FUTURE_TERMS = (
    ObsTerm("anchor_pos", const=3),
    ObsTerm("anchor_rot6d", const=6),
    ObsTerm("body_pos", per_tracked=3),
    ObsTerm("body_rot6d", per_tracked=6),
)
# Privileged critic-only terms (``privileged_critic=true``).
CRITIC_TERMS = (
    ObsTerm("ref_anchor_lin_vel", const=3, group=CRITIC),
    ObsTerm("ref_anchor_ang_vel", const=3, group=CRITIC),
    ObsTerm("ref_joint_vel", per_joint=1, group=CRITIC),
    ObsTerm("body_lin_vel", per_tracked=3, group=CRITIC),
    ObsTerm("body_ang_vel", per_tracked=3, group=CRITIC),
)

REWARD_TERMS = (
    RewardTerm("anchor_pos", TRACKING),
    RewardTerm("anchor_ori", TRACKING),
    RewardTerm("body_pos", TRACKING),
    RewardTerm("body_ori", TRACKING),
    RewardTerm("body_lin_vel", TRACKING),
    RewardTerm("body_ang_vel", TRACKING),
    RewardTerm("action_rate", PENALTY),
    RewardTerm("joint_limit", PENALTY),
    RewardTerm("undesired_contacts", PENALTY),
    RewardTerm("self_collisions", PENALTY),
)
REWARD_NAMES = tuple(t.name for t in REWARD_TERMS)
REWARD_INDEX = {name: i for i, name in enumerate(REWARD_NAMES)}
TRACKING_NAMES = tuple(t.name for t in REWARD_TERMS if t.kind == TRACKING)


# Tracking errors written every step for logging (mjlab's metrics), in metres / radians: anchor position
# distance, anchor orientation angle, mean tracked-body distance and angle (bodies aligned to the robot's
# anchor and heading, as in the reward), mean absolute joint-position error.
ERROR_NAMES = ("anchor_pos", "anchor_ori", "body_pos", "body_ori", "joint_pos")
ERROR_INDEX = {name: i for i, name in enumerate(ERROR_NAMES)}

# Why an episode ended (``term_cause``): 0 = it did not; terminations first (the first that fires, in
# this order), then truncations (bootstrapped).
TERMINATION_CAUSES = ("anchor_height", "anchor_ori", "ee_height", "unstable")
TRUNCATION_CAUSES = ("clip_end", "timeout")
END_CAUSES = TERMINATION_CAUSES + TRUNCATION_CAUSES
CAUSE_CODE = {name: i + 1 for i, name in enumerate(END_CAUSES)}


def obs_terms(future_steps: list[int], privileged: bool) -> list[tuple[str, ObsTerm]]:
    """``(column name, term)`` in row order."""
    out = [(t.name, t) for t in PROPRIO_TERMS]
    for k in future_steps:
        out += [(f"future{k}_{t.name}", t) for t in FUTURE_TERMS]
    if privileged:
        out += [(t.name, t) for t in CRITIC_TERMS]
    return out


def obs_slices(num_joints: int, num_tracked: int, future_steps: list[int], privileged: bool) -> dict[str, slice]:
    """Named column ranges of the full (critic) row; the actor's row is the prefix of ``actor`` terms."""
    out, col = {}, 0
    for name, term in obs_terms(future_steps, privileged):
        width = term.width(num_joints, num_tracked)
        out[name] = slice(col, col + width)
        col += width
    return out


def obs_dims(num_joints: int, num_tracked: int, future_steps: list[int], privileged: bool) -> tuple[int, int]:
    """``(actor_dim, full_dim)``."""
    actor = sum(t.width(num_joints, num_tracked) for _, t in obs_terms(future_steps, False))
    full = sum(t.width(num_joints, num_tracked) for _, t in obs_terms(future_steps, privileged))
    return actor, full


def reward_weights(rewards_cfg) -> list[float]:
    """Weights in ``REWARD_TERMS`` order from a config with one attribute per term."""
    return [float(getattr(rewards_cfg, t.name)) for t in REWARD_TERMS]


def reward_sigmas(sigmas_cfg) -> list[float]:
    """σ per term in ``REWARD_TERMS`` order (0 for penalties, which have none)."""
    return [float(getattr(sigmas_cfg, t.name)) if t.kind == TRACKING else 0.0 for t in REWARD_TERMS]
