"""Typed config of ``env=humanoid_imitation`` (every default lives here; YAML only overrides)."""

from dataclasses import dataclass, field, make_dataclass

from simppo.envs.imitation.sampler import AdaptiveSamplingCfg
from simppo.kernels.imitation.spec import END_CAUSES, REWARD_TERMS, TRACKING


def _term_config(name: str, doc: str, values: dict[str, float]) -> type:
    """A typed config dataclass with one float field per reward term, defaulting to its spec declaration."""
    cls = make_dataclass(name, [(k, float, field(default=v)) for k, v in values.items()])
    cls.__doc__, cls.__module__ = doc, __name__
    return cls


RewardWeightsCfg = _term_config(
    "RewardWeightsCfg", "Weight of each reward term (penalties negative); defaults: spec.REWARD_TERMS.",
    {t.name: t.weight for t in REWARD_TERMS})
RewardSigmasCfg = _term_config(
    "RewardSigmasCfg", "σ of each exp(-err²/σ²) tracking term; defaults: spec.REWARD_TERMS.",
    {t.name: t.sigma for t in REWARD_TERMS if t.kind == TRACKING})


@dataclass
class TerminationCurriculumCfg:
    """A factor on the terminations' distance thresholds (anchor height, end-effector height, body distance) that
    starts at ``start_scale`` and moves by ``step`` (relative, per control step) towards 1 while an env survives on
    average ``survive_s`` between two terminations, back up to ``start_scale`` otherwise (ASAP's termination
    curriculum, driven by the termination rate; :mod:`simppo.kernels.imitation.curriculum`). ``start_scale=1``:
    off. The evaluation always uses the thresholds as configured."""

    start_scale: float = 1.0
    survive_s: float = 2.0
    step: float = 1.0e-3
    ema: float = 0.01  # weight of a step's termination rate in its running mean

    def __post_init__(self) -> None:
        if not self.start_scale >= 1.0:
            raise ValueError(f"env.terminations.curriculum.start_scale={self.start_scale}: must be >= 1 (1: off)")
        if not (self.survive_s > 0.0 and 0.0 < self.step < 1.0 and 0.0 < self.ema <= 1.0):
            raise ValueError(f"env.terminations.curriculum: survive_s={self.survive_s} must be > 0, "
                             f"step={self.step} in (0, 1), ema={self.ema} in (0, 1]")

    @property
    def enabled(self) -> bool:
        return self.start_scale > 1.0


@dataclass
class AdaptiveSigmaCfg:
    """σ of the tracking terms in ``terms`` follows the running mean of each term's squared error over the envs
    (σ² = its EMA, weight ``ema`` per control step) and never rises: it starts at ``env.sigmas.<term>`` and is held
    at or above ``min_scale`` times that (PBHC's adaptive motion tracking; :mod:`simppo.kernels.imitation.
    adaptive_sigma`). ``per_motion``: each motion has its own σ from its own envs' errors (PBHC tracks one clip
    at a time; in a set, a clip not yet tracked keeps a wider σ than the tracked ones). ``start_steps``: control
    steps at the configured σ before any σ adapts (a wide σ pays the first, unbalanced steps of a walk that a sharp
    one does not; 12,000 is where the reset noise reaches its full width, ~3 M samples at 256 envs). By default
    every weighted tracking term, per motion, after 12,000 control steps (measured in ``docs/learning.md``).
    ``terms=[]``: off, every σ stays as configured."""

    terms: list[str] = field(default_factory=lambda: ["anchor_pos", "anchor_ori", "body_pos", "body_ori",
                                                      "body_lin_vel", "body_ang_vel"])
    ema: float = 1.0e-3
    min_scale: float = 0.1
    per_motion: bool = True
    start_steps: int = 12000

    def __post_init__(self) -> None:
        tracking = [t.name for t in REWARD_TERMS if t.kind == TRACKING]
        unknown = [t for t in self.terms if t not in tracking]
        if unknown:
            raise ValueError(f"env.adaptive_sigma.terms: {unknown} are not tracking terms (one of {tracking})")
        if not (0.0 < self.ema <= 1.0 and 0.0 < self.min_scale <= 1.0):
            raise ValueError(f"env.adaptive_sigma: ema={self.ema} and min_scale={self.min_scale} must be in (0, 1]")
        if not (isinstance(self.start_steps, int) and self.start_steps >= 0):
            raise ValueError(f"env.adaptive_sigma.start_steps={self.start_steps}: must be an integer >= 0")


ASSIST_FADES = ("schedule", "survival", "success")


@dataclass
class RootAssistCfg:
    """A virtual harness for early training (:mod:`simppo.kernels.imitation.assist`): before each control step's
    physics the root's horizontal velocity moves a share ``start`` of the way to the velocity that follows the
    reference root (closing the position error in ``tau_s``), and that share falls linearly to 0 over
    ``anneal_steps`` control steps (from then on training is unassisted). ``fade=survival``: each motion has its own
    share, which falls at that rate while the motion's envs survive on average ``survive_s`` between terminations
    and rises back (to ``start``) otherwise, so a motion the policy cannot yet track keeps its harness;
    ``fade=success``: the same, with the share falling while fewer than ``max_fail`` of the motion's episodes end
    on a termination (rather than at the clip's end or a time-out). Pair either with ``env.terminations.body_pos``
    so that a robot left behind ends its episode. ``vertical`` / ``rotation`` assist
    the root's height / orientation too (a harness that also holds the robot up and upright). ``start=0``: off. The
    evaluation never assists. Off by default: it teaches the walk alone to walk, and on 1.5 M samples of walk,
    squat and turn it leaves too little unassisted training for the walk and the turn (``docs/learning.md``)."""

    start: float = 0.0
    # 1 M samples at 256 envs (33 M at 8192): the fade that taught the walk alone to walk in 1.5 M samples
    anneal_steps: int = 4000
    tau_s: float = 0.1
    vertical: bool = False
    rotation: bool = False
    fade: str = "schedule"  # schedule: one share for all | survival, success: one per motion, by how it does
    survive_s: float = 2.0  # fade=survival: mean time between two terminations above which a motion's share falls
    # fade=success: the fraction of a motion's episodes ending on a termination under which its share falls
    max_fail: float = 0.25
    ema: float = 0.01  # fade=survival / success: weight of a step's termination rate in each motion's running mean

    def __post_init__(self) -> None:
        if not 0.0 <= self.start <= 1.0:
            raise ValueError(f"env.assist.start={self.start}: must be in [0, 1] (0: off)")
        if not (isinstance(self.anneal_steps, int) and self.anneal_steps >= 1 and self.tau_s > 0.0):
            raise ValueError(f"env.assist: anneal_steps={self.anneal_steps} must be an integer >= 1 and "
                             f"tau_s={self.tau_s} > 0")
        if self.fade not in ASSIST_FADES:
            raise ValueError(f"env.assist.fade={self.fade!r}: choose one of {', '.join(ASSIST_FADES)}")
        if not (self.survive_s > 0.0 and 0.0 < self.max_fail < 1.0 and 0.0 < self.ema <= 1.0):
            raise ValueError(f"env.assist: survive_s={self.survive_s} must be > 0, max_fail={self.max_fail} in "
                             f"(0, 1) and ema={self.ema} in (0, 1]")

    @property
    def enabled(self) -> bool:
        return self.start > 0.0

    @property
    def per_motion(self) -> bool:
        """One share per motion, moved by how that motion's envs do (``fade`` survival or success)."""
        return self.fade in ("survival", "success")


@dataclass
class ResetNoiseCfg:
    """A uniform perturbation of every training reset's state around the reference's (BeyondMimic / mjlab's
    tracking command: ``pose_range``, ``velocity_range``, ``joint_position_range``; the same half-widths), so the
    policy starts off the reference and learns to return to it rather than only to stay on it. Each value is a
    half-width: ``root_pos`` m (world x, y, z), ``root_rpy`` rad (roll, pitch, yaw about the world axes),
    ``root_lin_vel`` m/s and ``root_ang_vel`` rad/s (world x, y, z), ``joint_pos`` rad per joint (kept inside the
    soft joint limits); all of them grow linearly from 0 over the first ``ramp_steps`` control steps. The
    evaluation never perturbs; kinematic replay neither. On ten clips (six shipped, four real) it makes the walks
    step from a standing start, where no other lever had; at full width from the first reset it slows the first
    1-2 M samples so much that the walk of the slow check (walk, squat and turn, 1.5 M samples) falls, hence the
    ramp (docs/learning.md)."""

    enabled: bool = True
    root_pos: list[float] = field(default_factory=lambda: [0.05, 0.05, 0.01])
    root_rpy: list[float] = field(default_factory=lambda: [0.1, 0.1, 0.2])
    root_lin_vel: list[float] = field(default_factory=lambda: [0.5, 0.5, 0.2])
    root_ang_vel: list[float] = field(default_factory=lambda: [0.52, 0.52, 0.78])
    joint_pos: float = 0.1
    # control steps over which every half-width grows linearly from 0 to its value (0: full from the start)
    ramp_steps: int = 12000
    # perturb the resets that start a motion at t = 0 (env.init_start_prob) too; false: those start on the
    # reference, as a play from t = 0 (the evaluation, a deployment) does
    at_clip_start: bool = True

    def __post_init__(self) -> None:
        for key in ("root_pos", "root_rpy", "root_lin_vel", "root_ang_vel"):
            value = getattr(self, key)
            if len(value) != 3 or not all(float(v) >= 0.0 for v in value):
                raise ValueError(f"env.reset_noise.{key}={list(value)}: expected 3 half-widths >= 0")
        if not float(self.joint_pos) >= 0.0:
            raise ValueError(f"env.reset_noise.joint_pos={self.joint_pos}: must be >= 0")
        if not (isinstance(self.ramp_steps, int) and self.ramp_steps >= 0):
            raise ValueError(f"env.reset_noise.ramp_steps={self.ramp_steps}: must be an integer >= 0")


@dataclass
class TerminationCfg:
    anchor_height: float = 0.25  # |ref - robot| anchor height (m)
    anchor_ori: float = 0.8  # |ref - robot| z component of gravity in the anchor frame
    ee_height: float = 0.25  # |ref - robot| height of any end effector (m)
    # mean world-frame distance of all bodies to the reference's (m): the global drift that fails a play from t = 0
    # (ProtoMotions' success rule: 0.5 m); inf: off
    body_pos: float = float("inf")
    # the causes (spec.END_CAUSES) that end an episode; the env flags every cause in fail_bits either way
    end_causes: list[str] = field(default_factory=lambda: list(END_CAUSES))
    curriculum: TerminationCurriculumCfg = field(default_factory=TerminationCurriculumCfg)


@dataclass
class RandomizationCfg:
    """``env/randomization=none``: nothing is randomized. Every range is ``[lo, hi]``, drawn uniformly per env
    on the device at each of its resets (pushes: on their own interval); ``None`` switches a term off.
    The deploy values (:class:`DeployRandomizationCfg`) follow BeyondMimic's tracking config."""

    name: str = "none"
    foot_friction: list[float] | None = None
    """Sliding friction of the feet's collision geoms (absolute; they win the contact by priority)."""
    joint_pos_offset: list[float] | None = None
    """rad added to each joint's default pose (encoder calibration): the action map's offset and the
    observation's ``joint_pos_rel`` both use the offset pose."""
    com_offset_lo: list[float] | None = None
    com_offset_hi: list[float] | None = None
    """m added to the centre of mass (``body_ipos``) of ``com_body``, per axis of its frame."""
    com_body: str = ""
    """Body whose centre of mass moves; empty: the robot's anchor (the G1's torso)."""
    push_interval_s: list[float] | None = None
    """Time between two pushes of an env (redrawn after each push and at each reset)."""
    push_lin_vel_lo: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    push_lin_vel_hi: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    """m/s added to the root's world-frame linear velocity (x, y, z) by a push."""
    push_ang_vel_lo: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    push_ang_vel_hi: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    """rad/s added to the root's world-frame angular velocity (roll, pitch, yaw) by a push."""
    link_mass_scale: list[float] | None = None
    """Factor on every robot link's mass and inertia (e.g. [0.9, 1.1]); not in BeyondMimic."""
    kp_scale: list[float] | None = None
    kd_scale: list[float] | None = None
    """Factors on each actuator's PD gains (e.g. [0.9, 1.1]); not in BeyondMimic."""
    action_delay_steps: list[int] | None = None
    """Control steps between the policy's action and the actuators (inclusive integer range, e.g. [0, 1])."""


@dataclass
class DeployRandomizationCfg(RandomizationCfg):
    """``env/randomization=deploy``: BeyondMimic's tracking ranges (HybridRobotics/whole_body_tracking as
    mjlab ships it, mjlab/tasks/tracking/tracking_env_cfg.py and config/g1/flat_env_cfg.py):

    ==================  =========================================  ====================================
    term                range                                      source
    ==================  =========================================  ====================================
    foot friction       0.3 .. 1.2 (absolute)                      foot_friction (``geom_friction``)
    joint offsets       -0.01 .. 0.01 rad                          add_joint_default_pos
    torso CoM           x ±0.025, y ±0.05, z ±0.05 m               base_com (torso_link ``body_ipos``)
    push interval       1 .. 3 s                                   push_robot
    push velocity       x, y ±0.5, z ±0.2 m/s; roll, pitch ±0.52,  push_robot (VELOCITY_RANGE)
                        yaw ±0.78 rad/s
    ==================  =========================================  ====================================

    BeyondMimic draws friction, offsets and the CoM once at start-up; simppo redraws them at every reset.
    Link masses, PD gains and action delay stay off (BeyondMimic has none)."""

    name: str = "deploy"
    foot_friction: list[float] | None = field(default_factory=lambda: [0.3, 1.2])
    joint_pos_offset: list[float] | None = field(default_factory=lambda: [-0.01, 0.01])
    com_offset_lo: list[float] | None = field(default_factory=lambda: [-0.025, -0.05, -0.05])
    com_offset_hi: list[float] | None = field(default_factory=lambda: [0.025, 0.05, 0.05])
    push_interval_s: list[float] | None = field(default_factory=lambda: [1.0, 3.0])
    push_lin_vel_lo: list[float] = field(default_factory=lambda: [-0.5, -0.5, -0.2])
    push_lin_vel_hi: list[float] = field(default_factory=lambda: [0.5, 0.5, 0.2])
    push_ang_vel_lo: list[float] = field(default_factory=lambda: [-0.52, -0.52, -0.78])
    push_ang_vel_hi: list[float] = field(default_factory=lambda: [0.52, 0.52, 0.78])


RANDOMIZATIONS = {"none": RandomizationCfg, "deploy": DeployRandomizationCfg}


@dataclass
class HumanoidImitationEnvCfg:
    name: str = "humanoid_imitation"
    future_steps: list[int] = field(default_factory=lambda: [1, 2, 4, 8])  # control steps ahead
    init_start_prob: float = 0.1  # chance a reset starts its motion at t = 0
    max_episode_length_s: float = 20.0
    truncate_at_clip_end: bool = True  # False: keep tracking the clip's last frame after it ends (evaluation)
    action_clip: float = 10.0
    # position target = offset + action_scale * action, offset = default pose + action_reference * (the reference's
    # joint angles one control step ahead - default pose): 1 feeds the reference forward, so the policy learns a
    # correction of the motion rather than the motion itself; 0 is the plain default-pose map
    action_reference: float = 1.0
    # control steps ahead of the observation's time of the reference frame fed forward (one of env.future_steps): the
    # position servos lag their targets, so a target further ahead can make up for that lag
    action_reference_lead: int = 1
    # share of the reference's joint velocities (same frame) fed forward into the servos' damping: the position target
    # moves by action_reference_velocity * kd / kp * reference joint velocity, the same torque as a PD whose velocity
    # target is that velocity (kp (q* - q) + kd (w qdot_ref - qdot)). 0: the servos damp towards rest and brake every
    # fast reference motion (a take-off, a rise) unless the policy learns to push past it
    action_reference_velocity: float = 0.0
    privileged_critic: bool = True  # the critic also sees reference and body velocities
    soft_joint_limit_factor: float = 0.9
    # the joint-limit penalty's band [soft lo, soft hi] widened to take in the reference's own joint angle, so a
    # reference that goes past the soft limits (a deep squat, a crouch) is not penalized for being followed
    joint_limit_reference: bool = False
    kinematic_replay: bool = False  # write the reference into the simulator instead of stepping physics
    # replay the whole control step as one captured graph where the simulator is device launches only (MJWarp:
    # CUDA with Warp's memory pool, and the CPU); captured after the first step; other backends step eagerly
    graph_step: bool = True
    observations: str = "default"  # default | deploy: the actor's observation set (simppo.kernels.imitation.spec)
    # control steps of the set's proprioceptive terms in the row, this one included (Isaac Lab's history_length):
    # H >= 2 appends the blocks of the H - 1 steps before (prev1_*, ...); 0 or 1: this step's only
    history_length: int = 0
    obs_noise: bool = False  # uniform noise on the actor's observations (scales in the spec); the critic's stay clean
    randomization: RandomizationCfg = field(default_factory=RandomizationCfg)  # group env/randomization: none|deploy
    rewards: RewardWeightsCfg = field(default_factory=RewardWeightsCfg)
    sigmas: RewardSigmasCfg = field(default_factory=RewardSigmasCfg)
    adaptive_sigma: AdaptiveSigmaCfg = field(default_factory=AdaptiveSigmaCfg)  # σ that tightens with the errors
    terminations: TerminationCfg = field(default_factory=TerminationCfg)
    sampling: AdaptiveSamplingCfg = field(default_factory=AdaptiveSamplingCfg)
    assist: RootAssistCfg = field(default_factory=RootAssistCfg)  # a fading root harness for early training
    reset_noise: ResetNoiseCfg = field(default_factory=ResetNoiseCfg)  # training resets off the reference

    def __post_init__(self) -> None:
        if not (isinstance(self.history_length, int) and self.history_length >= 0):
            raise ValueError(f"env.history_length={self.history_length}: must be an integer >= 0")


def action_reference_problem(cfg: HumanoidImitationEnvCfg) -> str | None:
    """What is wrong with ``cfg.action_reference`` (one line, naming the key), or ``None``."""
    w, lead, steps = cfg.action_reference, cfg.action_reference_lead, list(cfg.future_steps)
    if not 0.0 <= w <= 1.0:
        return f"env.action_reference={w}: must be in [0, 1]"
    if w > 0.0 and lead not in steps:
        return (f"env.action_reference={w} needs env.action_reference_lead={lead} in env.future_steps (the "
                f"reference frame it feeds forward), got {steps}")
    v = cfg.action_reference_velocity
    if not 0.0 <= v <= 1.0:
        return f"env.action_reference_velocity={v}: must be in [0, 1]"
    if v > 0.0 and lead not in steps:
        return (f"env.action_reference_velocity={v} needs env.action_reference_lead={lead} in env.future_steps (the "
                f"reference frame it feeds forward), got {steps}")
    return None
