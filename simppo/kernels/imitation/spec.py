"""The one declaration of the humanoid-imitation env's observation and reward layout.

Everything else derives from here: the observation column ranges (``obs_slices``) and dims, the
reward-term indices used inside the Warp kernels (``REWARD_INDEX``, bound as Warp constants in
:mod:`simppo.kernels.imitation.rewards`), the per-term logging names (``episode/rew_<name>``), the
weight / σ vectors built from the env config, and the layout the float64 test oracle assembles.

Two observation sets (``env.observations``, :data:`OBS_SETS`): ``default`` and ``deploy`` (what a real robot
measures). :mod:`simppo.kernels.imitation.observations` writes each term at the column this layout gives it
(:func:`obs_columns`); each actor term declares the noise added to the actor's view (``env.obs_noise``).
Widths are symbolic: ``A`` joints, ``Nt`` tracked bodies; one block of future terms per future frame, and with
``env.history_length`` H >= 2, H - 1 copies of the proprioceptive block from earlier control steps.
"""

from __future__ import annotations

from dataclasses import dataclass

ACTOR, CRITIC = "actor", "critic"  # critic terms follow all actor terms (the actor sees a prefix of the row)
TRACKING, PENALTY = "tracking", "penalty"


@dataclass(frozen=True)
class ObsTerm:
    """``width = const + per_joint * A + per_tracked * Nt``; ``group``: actor (both see it) or critic only;
    ``noise``: half-width of the uniform noise added to the actor's view of each column (``env.obs_noise``);
    ``mirror``: its kind under the left-right mirror (:func:`mirror_columns`)."""

    name: str
    const: int = 0
    per_joint: int = 0
    per_tracked: int = 0
    group: str = ACTOR
    noise: float = 0.0
    mirror: str = ""  # how the left-right mirror image changes it (:data:`MIRROR_SIGNS`, or JOINT)

    def width(self, num_joints: int, num_tracked: int) -> int:
        return self.const + self.per_joint * num_joints + self.per_tracked * num_tracked


# Left-right mirror kinds (reflection in the sagittal plane, M = diag(1, -1, 1), with left and right swapped).
# Every observation is in a frame with a forward and an up axis (the root's, its heading's or the reference's), so
# the mirror image of a row is a signed permutation of its columns: a vector v -> M v, an axial vector (angular
# velocity) w -> -M w, a rotation R -> M R M (6D: the first two columns, row-major), one entry per joint -> its
# partner's, times the robot's mirror sign; per tracked body, the block of its mirror partner.
VEC, AXIAL, ROT6D, JOINT = "vec", "axial", "rot6d", "joint"
MIRROR_SIGNS = {VEC: (1.0, -1.0, 1.0), AXIAL: (-1.0, 1.0, -1.0), ROT6D: (1.0, -1.0, -1.0, 1.0, 1.0, -1.0)}


@dataclass(frozen=True)
class RewardTerm:
    """One reward term: ``tracking``: ``weight * exp(-error / σ²)``; ``penalty``: ``weight * value`` (weight
    negative). ``weight`` and ``sigma`` are the defaults of ``env.rewards.<name>`` / ``env.sigmas.<name>`` (the
    config classes are made from these declarations). Its raw value is the Warp function of the same name in
    :data:`simppo.kernels.imitation.rewards.TERM_FUNCTIONS`."""

    name: str
    kind: str
    weight: float
    sigma: float | None = None  # tracking terms only (units of the error: m, rad, m/s, rad/s)


# Noise half-widths (uniform, per column of the actor's view; ``env.obs_noise=true``). Sources: BeyondMimic's
# tracking config as mjlab ships it (mjlab/tasks/tracking/tracking_env_cfg.py: base_lin_vel 0.5, base_ang_vel
# 0.2, joint_pos 0.01, joint_vel 0.5, motion_anchor_pos_b 0.25, motion_anchor_ori_b 0.05) and mjlab's velocity
# task (projected_gravity 0.05). simppo's own choices: robot body poses come from the encoders and the IMU
# (0.01 m, the IMU's 0.05); reference bodies relative to the robot's anchor carry the anchor position's
# estimate (0.25 m) and the IMU heading (0.05); reference-only terms (``ref_*``) are exact (0).
# Robot proprioception and body poses (vectors in the root's heading frame; ``_b``: full root frame).
PROPRIO_TERMS = (
    ObsTerm("gravity_b", const=3, noise=0.05, mirror=VEC),
    ObsTerm("root_lin_vel_b", const=3, noise=0.5, mirror=VEC),
    ObsTerm("root_ang_vel_b", const=3, noise=0.2, mirror=AXIAL),
    ObsTerm("joint_pos_rel", per_joint=1, noise=0.01, mirror=JOINT),
    ObsTerm("joint_vel", per_joint=1, noise=0.5, mirror=JOINT),
    ObsTerm("last_action", per_joint=1, mirror=JOINT),
    ObsTerm("body_pos", per_tracked=3, noise=0.01, mirror=VEC),
    ObsTerm("body_rot6d", per_tracked=6, noise=0.05, mirror=ROT6D),
)
# Per future frame k (named ``future{k}_<term>``): the reference relative to the robot's anchor.
FUTURE_TERMS = (
    ObsTerm("anchor_pos", const=3, noise=0.25, mirror=VEC),
    ObsTerm("anchor_rot6d", const=6, noise=0.05, mirror=ROT6D),
    ObsTerm("body_pos", per_tracked=3, noise=0.25, mirror=VEC),
    ObsTerm("body_rot6d", per_tracked=6, noise=0.05, mirror=ROT6D),
)
# Privileged critic-only terms (``privileged_critic=true``).
CRITIC_TERMS = (
    ObsTerm("ref_anchor_lin_vel", const=3, group=CRITIC, mirror=VEC),
    ObsTerm("ref_anchor_ang_vel", const=3, group=CRITIC, mirror=AXIAL),
    ObsTerm("ref_joint_vel", per_joint=1, group=CRITIC, mirror=JOINT),
    ObsTerm("body_lin_vel", per_tracked=3, group=CRITIC, mirror=VEC),
    ObsTerm("body_ang_vel", per_tracked=3, group=CRITIC, mirror=AXIAL),
)

# ``env.observations=deploy``: what a real G1 measures (IMU: gravity, angular velocity, orientation; encoders:
# joint positions / velocities) and the reference. No root linear velocity, no world position: per future
# frame, the reference's own motion (anchor displacement from the reference anchor now, joint positions,
# bodies relative to the reference anchor; all in the reference's heading frames) and the reference anchor's
# orientation relative to the robot's anchor (IMU). The critic keeps the privileged default terms.
DEPLOY_PROPRIO_TERMS = (
    ObsTerm("gravity_b", const=3, noise=0.05, mirror=VEC),
    ObsTerm("root_ang_vel_b", const=3, noise=0.2, mirror=AXIAL),
    ObsTerm("joint_pos_rel", per_joint=1, noise=0.01, mirror=JOINT),
    ObsTerm("joint_vel", per_joint=1, noise=0.5, mirror=JOINT),
    ObsTerm("last_action", per_joint=1, mirror=JOINT),
)
DEPLOY_FUTURE_TERMS = (
    # the reference anchor at k - now, in the reference heading frame now
    ObsTerm("ref_anchor_pos", const=3, mirror=VEC),
    ObsTerm("anchor_rot6d", const=6, noise=0.05, mirror=ROT6D),
    ObsTerm("ref_joint_pos", per_joint=1, mirror=JOINT),
    ObsTerm("ref_body_pos", per_tracked=3, mirror=VEC),  # bodies - reference anchor at k, in its heading frame
)
DEPLOY_CRITIC_TERMS = (
    ObsTerm("root_lin_vel_b", const=3, group=CRITIC, mirror=VEC),
    ObsTerm("body_pos", per_tracked=3, group=CRITIC, mirror=VEC),
    ObsTerm("body_rot6d", per_tracked=6, group=CRITIC, mirror=ROT6D),
) + CRITIC_TERMS
DEPLOY_CRITIC_FUTURE_TERMS = tuple(ObsTerm(t.name, t.const, t.per_joint, t.per_tracked, CRITIC, mirror=t.mirror)
                                   for t in FUTURE_TERMS if t.name not in {d.name for d in DEPLOY_FUTURE_TERMS})


@dataclass(frozen=True)
class ObsSet:
    """One observation set: the row is ``proprio``, one ``future`` block per future frame (the actor's view),
    then, with ``privileged_critic``, ``privileged`` and one ``privileged_future`` block per frame (critic only)."""

    proprio: tuple[ObsTerm, ...]
    future: tuple[ObsTerm, ...]
    privileged: tuple[ObsTerm, ...]
    privileged_future: tuple[ObsTerm, ...] = ()


OBS_SETS = {
    "default": ObsSet(PROPRIO_TERMS, FUTURE_TERMS, CRITIC_TERMS),
    "deploy": ObsSet(DEPLOY_PROPRIO_TERMS, DEPLOY_FUTURE_TERMS, DEPLOY_CRITIC_TERMS, DEPLOY_CRITIC_FUTURE_TERMS),
}


def _unique_names(*groups: tuple[ObsTerm, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(t.name for group in groups for t in group))


# Every term the observation kernel writes, by kind (once per row / once per future frame), in first-appearance
# order over the sets: each has one writer function in simppo.kernels.imitation.observations, and the kernel writes
# it at the column the env's layout gives it (``obs_columns``), or skips it.
ONCE_TERM_NAMES = _unique_names(*(g for s in OBS_SETS.values() for g in (s.proprio, s.privileged)))
FUTURE_TERM_NAMES = _unique_names(*(g for s in OBS_SETS.values() for g in (s.future, s.privileged_future)))
ONCE_INDEX = {name: i for i, name in enumerate(ONCE_TERM_NAMES)}
FUTURE_INDEX = {name: i for i, name in enumerate(FUTURE_TERM_NAMES)}

# Defaults follow BeyondMimic / mjlab tracking, but for the anchor's world position: its weight is 1.5 (0.5 there)
# because every other tracking term is measured relative to the robot's anchor, so this term alone holds the robot
# on the reference's path, and success from t = 0 fails on that drift (docs/learning.md).
REWARD_TERMS = (
    RewardTerm("anchor_pos", TRACKING, weight=1.5, sigma=0.3),
    RewardTerm("anchor_ori", TRACKING, weight=0.5, sigma=0.4),
    RewardTerm("body_pos", TRACKING, weight=1.0, sigma=0.3),
    RewardTerm("body_ori", TRACKING, weight=1.0, sigma=0.4),
    # the feet alone (robot.feet), aligned as body_pos and sharper: a swing foot left on the floor moves body_pos's
    # mean over every tracked body little. Off by default: on real clips it did not make the walks step
    RewardTerm("feet_pos", TRACKING, weight=0.0, sigma=0.1),
    RewardTerm("body_lin_vel", TRACKING, weight=1.0, sigma=1.0),
    RewardTerm("body_ang_vel", TRACKING, weight=1.0, sigma=3.14),
    RewardTerm("action_rate", PENALTY, weight=-0.1),
    RewardTerm("joint_limit", PENALTY, weight=-10.0),
    RewardTerm("undesired_contacts", PENALTY, weight=-0.1),
    RewardTerm("self_collisions", PENALTY, weight=-0.1),  # per contact between two robot geoms (sim.self_collision)
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
TERMINATION_CAUSES = ("anchor_height", "anchor_ori", "ee_height", "body_pos", "unstable")
TRUNCATION_CAUSES = ("clip_end", "timeout")
END_CAUSES = TERMINATION_CAUSES + TRUNCATION_CAUSES
CAUSE_CODE = {name: i + 1 for i, name in enumerate(END_CAUSES)}
#: Each cause's bit in the env's ``fail_bits [N]`` (every cause that holds this step, ending the episode or not).
CAUSE_BIT = {name: 1 << (code - 1) for name, code in CAUSE_CODE.items()}


def cause_mask(names) -> int:
    """The bits of ``names`` (a subset of :data:`END_CAUSES`); ``ValueError`` naming an unknown cause."""
    unknown = [n for n in names if n not in CAUSE_BIT]
    if unknown:
        raise ValueError(f"unknown end causes {unknown}; choose from {list(END_CAUSES)}")
    return sum({CAUSE_BIT[n] for n in names})


def obs_set(observations: str) -> ObsSet:
    if observations not in OBS_SETS:
        raise ValueError(f"env.observations={observations!r}: choose one of {sorted(OBS_SETS)}")
    return OBS_SETS[observations]


def obs_terms(future_steps: list[int], privileged: bool, observations: str = "default", history_length: int = 0
              ) -> list[tuple[str, ObsTerm, int | None]]:
    """``(column name, term, slot)`` in row order; the slot is ``i + 1`` for ``future_steps[i]`` (the reference
    slot the kernel reads), ``None`` for once-per-row terms and ``-h`` for a copy of a proprioceptive term ``h``
    control steps ago: with ``history_length`` H >= 2 (Isaac Lab's ``history_length``: H control steps, this one
    included), the set's proprioceptive block is followed by H - 1 copies of it, ``prev1_<term>`` (the step
    before) to ``prev{H-1}_<term>``. Actor terms come first."""
    s = obs_set(observations)
    out = [(t.name, t, None) for t in s.proprio]
    for h in range(1, history_length):
        out += [(f"prev{h}_{t.name}", t, -h) for t in s.proprio]
    for i, k in enumerate(future_steps):
        out += [(f"future{k}_{t.name}", t, i + 1) for t in s.future]
    if privileged:
        out += [(t.name, t, None) for t in s.privileged]
        for i, k in enumerate(future_steps):
            out += [(f"future{k}_{t.name}", t, i + 1) for t in s.privileged_future]
    if len({name for name, _, _ in out}) != len(out):
        raise ValueError(f"env.observations={observations}: a column name repeats (future_steps {future_steps})")
    return out


def obs_slices(num_joints: int, num_tracked: int, future_steps: list[int], privileged: bool,
               observations: str = "default", history_length: int = 0) -> dict[str, slice]:
    """Named column ranges of the full (critic) row; the actor's row is the prefix of ``actor`` terms."""
    out, col = {}, 0
    for name, term, _ in obs_terms(future_steps, privileged, observations, history_length):
        width = term.width(num_joints, num_tracked)
        out[name] = slice(col, col + width)
        col += width
    return out


def actor_obs_slices(num_joints: int, num_tracked: int, future_steps: list[int],
                     observations: str = "default", history_length: int = 0) -> dict[str, slice]:
    """Named column ranges of the actor's row (what a deployed policy is fed)."""
    return obs_slices(num_joints, num_tracked, future_steps, False, observations, history_length)


def obs_dims(num_joints: int, num_tracked: int, future_steps: list[int], privileged: bool,
             observations: str = "default", history_length: int = 0) -> tuple[int, int]:
    """``(actor_dim, full_dim)``."""
    def width(with_critic: bool) -> int:
        return sum(t.width(num_joints, num_tracked)
                   for _, t, _ in obs_terms(future_steps, with_critic, observations, history_length))
    return width(False), width(privileged)


def history_block(num_joints: int, num_tracked: int, observations: str = "default") -> int:
    """Width of the proprioceptive block (the row's first columns); copy ``h`` of it (``prev{h}_*``) starts at
    column ``h * width``."""
    return sum(t.width(num_joints, num_tracked) for t in obs_set(observations).proprio)


def obs_columns(num_joints: int, num_tracked: int, future_steps: list[int], privileged: bool,
                observations: str = "default", history_length: int = 0) -> tuple[list[int], list[list[int]]]:
    """Start column of every kernel term (``-1``: not in the row): ``once [len(ONCE_TERM_NAMES)]`` and
    ``future [F][len(FUTURE_TERM_NAMES)]`` (frame ``i`` = ``future_steps[i]``). History columns are not written
    by a term's writer: :mod:`simppo.kernels.imitation.history` carries them from step to step."""
    once = [-1] * len(ONCE_TERM_NAMES)
    future = [[-1] * len(FUTURE_TERM_NAMES) for _ in future_steps]
    col = 0
    for _, term, slot in obs_terms(future_steps, privileged, observations, history_length):
        if slot is None:
            once[ONCE_INDEX[term.name]] = col
        elif slot > 0:
            future[slot - 1][FUTURE_INDEX[term.name]] = col
        col += term.width(num_joints, num_tracked)
    return once, future


def obs_noise_scales(num_joints: int, num_tracked: int, future_steps: list[int],
                     observations: str = "default", history_length: int = 0) -> list[float]:
    """Noise half-width of every column of the actor's row (``[actor_dim]``); a history column holds its term's
    noisy reading of that step (carried, not drawn again)."""
    out = []
    for _, term, _ in obs_terms(future_steps, False, observations, history_length):
        out += [float(term.noise)] * term.width(num_joints, num_tracked)
    return out


def mirror_columns(joint_partner: list[int], joint_sign: list[float], tracked_partner: list[int],
                   future_steps: list[int], privileged: bool, observations: str = "default",
                   history_length: int = 0) -> tuple[list[int], list[float]]:
    """The mirror image of an observation row as a signed permutation ``(index, sign)``: column ``i`` of the
    mirrored row is ``sign[i] * row[index[i]]``. ``joint_partner [A]`` / ``joint_sign [A]``: the robot's joint
    mirror map (``RobotCfg.mirror_map``); ``tracked_partner [Nt]``: each tracked body's mirror partner (an index
    into the tracked bodies). The row is the actor's, or with ``privileged`` the critic's."""
    num_joints, num_tracked = len(joint_partner), len(tracked_partner)
    index, sign, col = [], [], 0
    for name, term, _ in obs_terms(future_steps, privileged, observations, history_length):
        if term.mirror == JOINT:
            if term.per_joint != 1 or term.const or term.per_tracked:
                raise ValueError(f"observation term {name}: a joint term has one column per joint")
            index += [col + joint_partner[j] for j in range(num_joints)]
            sign += [float(joint_sign[joint_partner[j]]) for j in range(num_joints)]
        elif term.mirror in MIRROR_SIGNS:
            k = len(MIRROR_SIGNS[term.mirror])
            blocks = term.width(num_joints, num_tracked) // k
            if term.per_joint or (term.per_tracked and (term.const or term.per_tracked != k)) or \
                    (not term.per_tracked and term.const != k):
                raise ValueError(f"observation term {name}: mirror kind {term.mirror} needs {k} columns per block")
            partner = tracked_partner if term.per_tracked else [0]
            for b in range(blocks):
                index += [col + k * partner[b] + c for c in range(k)]
                sign += list(MIRROR_SIGNS[term.mirror])
        else:
            raise ValueError(f"observation term {name} declares no mirror kind ({term.mirror!r})")
        col += term.width(num_joints, num_tracked)
    return index, sign


def reward_weights(rewards_cfg) -> list[float]:
    """Weights in ``REWARD_TERMS`` order from a config with one attribute per term."""
    return [float(getattr(rewards_cfg, t.name)) for t in REWARD_TERMS]


def reward_sigmas(sigmas_cfg) -> list[float]:
    """σ per term in ``REWARD_TERMS`` order (0 for penalties, which have none)."""
    return [float(getattr(sigmas_cfg, t.name)) if t.kind == TRACKING else 0.0 for t in REWARD_TERMS]
