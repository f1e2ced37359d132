"""Typed buffers of the humanoid-imitation kernels: the reference state (``RefState``, the motion
library's :class:`MotionStateWp`), the env's constants and the env's own per-env buffers. Each is a
``wp.struct`` of zero-copy views bound once by the env, so a stage entry point takes
``(sim, ref, params, buf)`` and every kernel signature is written once."""

import warp as wp

from simppo.kernels.motion_interp import MotionStateWp as RefState  # noqa: F401 - the reference view


@wp.struct
class ImitationParams:
    """Constants. Per joint ``[A]``: ``default_joint_pos`` (nominal), ``action_scale``,
    ``damping_over_stiffness`` (the servo's kd / kp), ``soft_joint_lo/hi``;
    ``tracked_ids [Nt]`` / ``ee_ids [E]`` / ``feet_ids [Ft]`` MuJoCo body ids; per reward term ``[T]`` (spec order):
    ``weights``, ``term_kind`` (1 = tracking exp(-err/σ²), 0 = penalty), ``sigmas [S, T]`` (one row for all
    envs, or one per motion: ``S = M``, read at the env's motion);
    ``motion_lengths [M]`` seconds. Observation layout (``spec.obs_columns``): ``obs_col [K]`` start column
    of each once-per-row term of ``spec.ONCE_TERM_NAMES`` and ``future_col [F, KF]`` of each future term of
    ``spec.FUTURE_TERM_NAMES`` per future frame (-1: not in the row); ``obs_noise [actor_dim]`` the noise
    half-width of each actor column; ``history_block`` / ``history_copies`` the observation history
    (:mod:`simppo.kernels.imitation.history`)."""

    default_joint_pos: wp.array(dtype=wp.float32)
    action_scale: wp.array(dtype=wp.float32)
    damping_over_stiffness: wp.array(dtype=wp.float32)  # nominal kd / kp of each joint's servo (s)
    soft_joint_lo: wp.array(dtype=wp.float32)
    soft_joint_hi: wp.array(dtype=wp.float32)
    tracked_ids: wp.array(dtype=wp.int32)
    ee_ids: wp.array(dtype=wp.int32)
    feet_ids: wp.array(dtype=wp.int32)
    weights: wp.array(dtype=wp.float32)
    sigmas: wp.array2d(dtype=wp.float32)
    term_kind: wp.array(dtype=wp.int32)
    motion_lengths: wp.array(dtype=wp.float32)
    obs_col: wp.array(dtype=wp.int32)
    future_col: wp.array2d(dtype=wp.int32)
    obs_noise: wp.array(dtype=wp.float32)
    history_block: int  # width P of the proprioceptive block (the row's first columns)
    history_copies: int  # copies of it from earlier steps after it (env.history_length - 1; 0: no history)
    root_id: int
    anchor_id: int
    joint_qpos_start: int
    joint_dof_start: int
    action_clip: float
    action_ref_weight: float  # share of the reference's joint angles in the action offset (0: default pose)
    action_ref_frame: int  # the ref frame fed forward (env.action_reference_lead control steps ahead)
    action_ref_vel_weight: float  # share of the reference's joint velocities fed forward into the damping
    joint_limit_ref: int  # 1: the joint-limit penalty's band takes in the reference's joint angle
    anchor_height: float
    anchor_ori: float
    ee_height: float
    body_pos: float  # mean world-frame distance of all bodies (m)
    max_episode_steps: int
    truncate_at_clip_end: int
    ending_causes: int  # spec.CAUSE_BIT of the causes that end an episode


@wp.struct
class ImitationBuffers:
    """The env's per-env buffers (``[N, ...]``). ``policy_actions [N, A]`` is the policy's raw output
    (input); ``actions`` / ``prev_actions [N, A]`` the clipped actions of this and the last step;
    ``reward_raw [N, T]`` each term's raw value (tracking: the squared error, penalty: the value);
    ``reward_terms [N, T]`` the unweighted terms; ``episode_sums [N, T + 1]`` weighted sums (last: total);
    ``errors [N, E]`` the tracking errors of ``spec.ERROR_NAMES`` (m / rad); ``term_cause [N]`` the
    ``spec.CAUSE_CODE`` of why the env ended this step (0: it did not); ``fail_bits [N]`` the
    ``spec.CAUSE_BIT`` of every end cause that holds this step, ending the episode or not (the evaluation reads
    them);
    ``obs [N, D]`` the full (clean) observation row and ``obs_actor [N, actor_dim]`` the actor's noisy
    view (``env.obs_noise``; else unused); ``noise_rng [N]`` each env's random state for that noise;
    ``qpos_target [N, nq]`` / ``qvel_target [N, nv]`` the reference-state reset targets;
    ``default_joint_pos [N, A]`` each env's default pose (nominal + its calibration offset);
    ``action_history [N, H, A]`` the last ``H`` clipped actions (slot 0 = this step's) and
    ``action_delay [N]`` the slot each env's actuators follow (``0 <= delay < H``); ``term_scale [1]`` the factor
    on the terminations' distance thresholds (the termination curriculum's; 1 without it)."""

    policy_actions: wp.array2d(dtype=wp.float32)
    actions: wp.array2d(dtype=wp.float32)
    prev_actions: wp.array2d(dtype=wp.float32)
    motion_ids: wp.array(dtype=wp.int32)
    times: wp.array(dtype=wp.float32)
    episode_length: wp.array(dtype=wp.int32)
    reward: wp.array(dtype=wp.float32)
    reward_raw: wp.array2d(dtype=wp.float32)
    reward_terms: wp.array2d(dtype=wp.float32)
    episode_sums: wp.array2d(dtype=wp.float32)
    errors: wp.array2d(dtype=wp.float32)
    terminated: wp.array(dtype=wp.bool)
    truncated: wp.array(dtype=wp.bool)
    term_cause: wp.array(dtype=wp.int32)
    fail_bits: wp.array(dtype=wp.int32)
    obs: wp.array2d(dtype=wp.float32)
    obs_actor: wp.array2d(dtype=wp.float32)
    noise_rng: wp.array(dtype=wp.uint32)
    qpos_target: wp.array2d(dtype=wp.float32)
    qvel_target: wp.array2d(dtype=wp.float32)
    default_joint_pos: wp.array2d(dtype=wp.float32)
    action_history: wp.array3d(dtype=wp.float32)
    action_delay: wp.array(dtype=wp.int32)
    term_scale: wp.array(dtype=wp.float32)
