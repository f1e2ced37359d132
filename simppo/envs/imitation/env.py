"""``env=humanoid_imitation``: a humanoid tracks reference motions from the MotionLib.

The env orchestrates; the work is done by one Warp entry point per stage (:mod:`simppo.kernels.imitation`)
on typed buffers bound once (``sim.state``, ``ref_wp``, ``params``, ``buf``, ``episodes``, the reference
queries and the simulator's reset inputs), with the adaptive start-state sampler (:mod:`.sampler`) and the domain
randomization (:mod:`.randomization`; ``env/randomization``). A step after the copy of the actions is device
launches only, so it can be replayed as one captured graph (``env.graph_step``, :meth:`capture_step`); nothing in
:meth:`HumanoidImitationEnv.step` synchronises with the host.

Observation sets (``env.observations``, declared in :mod:`.spec`): the actor sees the prefix of actor terms
of the full row, the critic the full row. With ``env.obs_noise`` the actor's view is a separate buffer, the
clean prefix plus uniform noise per column; the critic's row stays clean.
"""

from __future__ import annotations

import contextlib
import warnings

import numpy as np
import torch
import warp as wp

from simppo.envs.base import Symmetry, VecEnv
from simppo.envs.imitation.config import HumanoidImitationEnvCfg, action_reference_problem
from simppo.envs.imitation.randomization import Randomizer
from simppo.envs.imitation.rng import RNG_OBS_NOISE, RNG_RANDOMIZATION, RNG_RESET_NOISE, keyed_rng_states, rng_states
from simppo.envs.imitation.sampler import AdaptiveSampler
from simppo.envs.imitation.symmetry import mirror_symmetry
from simppo.kernels.imitation import spec
from simppo.kernels.imitation.actions import apply_actions
from simppo.kernels.imitation.adaptive_sigma import AdaptiveSigma, adapt_sigmas
from simppo.kernels.imitation.assist import RootAssist, assist_root, fade_assist
from simppo.kernels.imitation.buffers import ImitationBuffers, ImitationParams
from simppo.kernels.imitation.curriculum import TerminationCurriculum, update_termination_scale
from simppo.kernels.imitation.episodes import EpisodeBuffers, advance_clock, close_episodes, copy_rows, record_step
from simppo.kernels.imitation.history import fill_history, shift_history
from simppo.kernels.imitation.observations import add_observation_noise, compute_observations
from simppo.kernels.imitation.resets import (
    RESET_NOISE_ROOT_DRAWS,
    ResetNoise,
    advance_reset_noise,
    perturb_reset_state,
    reference_state,
)
from simppo.kernels.imitation.rewards import compute_rewards
from simppo.kernels.imitation.terminations import compute_terminations
from simppo.motion.config import MotionCfg
from simppo.motion.format import robot_digest
from simppo.motion.motion_lib import MotionLib
from simppo.robot.config import RobotCfg, load_robot_cfg
from simppo.robot.model import servo_damping_over_stiffness
from simppo.sim import make_sim
from simppo.sim.config import SimCfg
from simppo.utils.device import gc_paused, on_torch_stream, torch_stream_scope, warp_view


class HumanoidImitationEnv(VecEnv):
    """Motion tracking for ``num_envs`` humanoids. Observation layout: ``obs_slices`` (from the spec)."""

    def __init__(self, cfg: HumanoidImitationEnvCfg | None = None, num_envs: int = 64, device: str = "cpu",
                 seed: int = 0, robot_cfg: RobotCfg | None = None, sim_cfg: SimCfg | None = None,
                 motion_cfg: MotionCfg | None = None):
        self.cfg = cfg = cfg if cfg is not None else HumanoidImitationEnvCfg()
        self.num_envs = n = num_envs
        self.device = device
        self.seed = seed
        self.robot_cfg = robot_cfg if robot_cfg is not None else load_robot_cfg("g1")
        self.sim = make_sim(self.robot_cfg, sim_cfg or SimCfg(), num_envs=num_envs, device=device)
        r = self.sim.robot
        motion_cfg = motion_cfg or MotionCfg()
        self.motion_lib = MotionLib(motion_cfg.load_index(), device=device,
                                    robot_digest=robot_digest(self.robot_cfg.joint_names, r.body_names[1:]),
                                    robot_name=self.robot_cfg.source or self.robot_cfg.name,
                                    joint_limits=dict(zip(self.robot_cfg.joint_names, r.joint_limits.tolist(),
                                                          strict=True)))
        self.dt = self.sim.control_dt
        self._check_layout()
        spec.obs_set(cfg.observations)  # a clear error for an unknown set
        problem = action_reference_problem(cfg)
        if problem:
            raise ValueError(problem)

        self.num_actions = nj = len(r.joint_qpos_adr)
        self.joint_qpos_start = int(r.joint_qpos_adr[0])
        self.joint_dof_start = int(r.joint_dof_adr[0])
        self.root_id, self.anchor_id = int(r.root_body_id), int(r.anchor_body_id)
        self.num_tracked = len(r.tracked_body_ids)
        self.actor_dim, self.full_dim = spec.obs_dims(nj, self.num_tracked, cfg.future_steps, cfg.privileged_critic,
                                                      cfg.observations, cfg.history_length)
        self.obs_dims = {"obs": self.actor_dim, "critic_obs": self.full_dim}
        self.max_episode_steps = max(1, int(round(cfg.max_episode_length_s / self.dt)))
        self.sim.set_penalized_geoms(self._penalized_geoms())

        f32, i32 = {"dtype": torch.float32, "device": device}, {"dtype": torch.int32, "device": device}
        boolean = {"dtype": torch.bool, "device": device}
        nterms = len(spec.REWARD_TERMS)
        self.future_offsets = torch.tensor([s * self.dt for s in cfg.future_steps], **f32)
        # --- state and outputs (allocated once)
        self.policy_actions = torch.zeros(n, nj, **f32)
        self.actions = torch.zeros(n, nj, **f32)
        self.prev_actions = torch.zeros(n, nj, **f32)
        self.motion_ids = torch.zeros(n, **i32)
        self.times = torch.zeros(n, **f32)
        self.episode_length = torch.zeros(n, **i32)
        self.reward = torch.zeros(n, **f32)
        self.reward_raw = torch.zeros(n, nterms, **f32)
        self.reward_terms = torch.zeros(n, nterms, **f32)
        self.episode_sums = torch.zeros(n, nterms + 1, **f32)
        # stats of the episodes that ended this step: episode sums (terms, total), length, one-hot end cause
        ncauses = len(spec.END_CAUSES)
        self.done_stats = torch.zeros(n, nterms + 2 + ncauses, **f32)
        self.done_sums, self.done_length = self.done_stats[:, :nterms + 1], self.done_stats[:, nterms + 1]
        self._cause_codes = torch.tensor([spec.CAUSE_CODE[c] for c in spec.END_CAUSES], **i32)
        self._cause_onehot = torch.zeros(n, ncauses, **boolean)
        self.errors = torch.zeros(n, len(spec.ERROR_NAMES), **f32)
        self.term_cause = torch.zeros(n, **i32)
        self.fail_bits = torch.zeros(n, **i32)  # spec.CAUSE_BIT of every end cause that holds this step
        self._error_sum = torch.zeros(len(spec.ERROR_NAMES), **f32)
        self._error_count = 0  # host counter of env-steps folded into _error_sum
        self.terminated = torch.zeros(n, **boolean)
        self.truncated = torch.zeros(n, **boolean)
        self.done = torch.zeros(n, **boolean)
        # worlds the sim flagged unstable in this step, and their count, kept before the resets re-run the guard
        self.step_unstable = torch.zeros(n, **boolean)
        self.step_num_unstable = torch.zeros(1, **i32)
        self.all_envs = torch.ones(n, **boolean)
        self.reset_mask = torch.zeros(n, **boolean)
        self.obs_full = torch.zeros(n, self.full_dim, **f32)
        self.terminal_obs_full = torch.zeros(n, self.full_dim, **f32)
        # the actor's noisy view (env.obs_noise); without noise the actor reads the prefix of obs_full
        self.obs_actor = torch.zeros(n, self.actor_dim if cfg.obs_noise else 0, **f32)
        self.terminal_obs_actor = torch.zeros_like(self.obs_actor)
        self.noise_rng = rng_states(seed, RNG_OBS_NOISE, n, device)
        self.default_joint_pos = torch.as_tensor(np.asarray(r.default_joint_pos, dtype=np.float32),
                                                 device=device).repeat(n, 1)  # + calibration offsets
        self.action_delay = torch.zeros(n, **i32)
        # the termination curriculum's state: the factor on the distance thresholds, the termination-rate EMA
        curriculum = cfg.terminations.curriculum
        self.termination_scale = torch.full((1,), curriculum.start_scale, **f32)
        self._termination_rate = torch.zeros(1, **f32)
        # the tracking terms' σ the reward kernel reads [S, T] (S: 1, or one row per motion), and (env.adaptive_sigma)
        # the EMA of their squared errors
        sigma_rows = self.motion_lib.num_motions if cfg.adaptive_sigma.terms and cfg.adaptive_sigma.per_motion else 1
        self.reward_sigmas = torch.tensor(spec.reward_sigmas(cfg.sigmas), **f32).repeat(sigma_rows, 1)
        self._sigma_error_ema = self.reward_sigmas.square()
        self._sigma_sums = torch.zeros(sigma_rows, nterms + 1, **f32)
        self._sigma_steps = torch.zeros(1, dtype=torch.int32, device=self.device)  # counted up to start_steps
        # the root assist's share this step: one, or one per motion (fade=survival / success) with its
        # termination-rate EMA
        self._assist_per_motion = cfg.assist.per_motion
        num_shares = self.motion_lib.num_motions if self._assist_per_motion else 1
        self.assist_alpha = torch.full((num_shares,), cfg.assist.start, **f32)
        self.assist_rate = torch.zeros(num_shares if self._assist_per_motion else 0, **f32)
        self._assist_counts = torch.zeros(self.assist_rate.shape[0], 3, **f32)
        self._termination_count = torch.zeros(1, **f32)
        self.randomizer = Randomizer(cfg.randomization, self.sim, self.default_joint_pos, self.action_delay,
                                     self.anchor_id, seed)
        self.action_history = torch.zeros(n, self.randomizer.history, nj, **f32)
        self.qpos_target = torch.zeros(n, self.sim.nq, **f32)
        self.qvel_target = torch.zeros(n, self.sim.nv, **f32)
        # the reset perturbation (env.reset_noise): each env's random stream and its last unit draws
        perturb = cfg.reset_noise.enabled and not cfg.kinematic_replay
        self.reset_noise_rng = rng_states(seed, RNG_RESET_NOISE, n if perturb else 0, device)
        self.reset_noise_draws = torch.zeros(n if perturb else 0, int(RESET_NOISE_ROOT_DRAWS) + nj, **f32)
        self._ramp_reset_noise = perturb and cfg.reset_noise.ramp_steps > 0
        self.reset_noise_scale = torch.full((1,), 0.0 if self._ramp_reset_noise else 1.0, **f32)
        self.ref = self.motion_lib.alloc_state(n, len(cfg.future_steps))
        self.motion_lengths = self.motion_lib.motion_lengths
        self.sampler = AdaptiveSampler(self.motion_lib.motion_lengths.cpu().tolist(), self.motion_lib.motion_weights,
                                       cfg.sampling, cfg.init_start_prob, device, self.motion_lib.motion_dt,
                                       num_envs=n, seed=seed)
        self.undesired_contacts = self.sim.penalized_contacts
        # --- typed Warp views (bound once; zero-copy)
        self.params = self._build_params()
        self.buf = self._bind_buffers()
        self.curriculum = self._bind_curriculum() if curriculum.enabled else None
        self.adaptive_sigma = self._bind_adaptive_sigma() if cfg.adaptive_sigma.terms else None
        self._sigma_gated = self.adaptive_sigma is not None and cfg.adaptive_sigma.start_steps > 0
        self.assist = self._bind_assist() if cfg.assist.enabled and not cfg.kinematic_replay else None
        self.reset_noise = self._bind_reset_noise() if perturb else None
        self.ref_wp = self.motion_lib.warp_state(self.ref)
        self._wp_all = warp_view(self.all_envs, wp.bool)
        self._wp_reset_mask = warp_view(self.reset_mask, wp.bool)
        self._wp_terminal_obs = warp_view(self.terminal_obs_full)
        self._wp_terminal_obs_actor = warp_view(self.terminal_obs_actor)
        self.episodes = self._bind_episode_buffers()
        # the reference queries and the simulator's reset read the env's buffers in place (bound once)
        offsets = self.future_offsets if len(cfg.future_steps) else None
        self._query_all = self.motion_lib.bind_query(self.motion_ids, self.times, offsets, self.ref)
        self._query_reset = self.motion_lib.bind_query(self.motion_ids, self.times, offsets, self.ref,
                                                       mask=self.reset_mask)
        self.sim.bind_reset_inputs(self.reset_mask, self.qpos_target, self.qvel_target)
        self._step_graph = None  # capture_step(): the step's launches as one graph
        self._graph_epoch = -1  # the simulator's graph_epoch when the step graph was captured
        self._capture_pending = bool(cfg.graph_step and self.sim.capturable and not cfg.kinematic_replay)
        self._eager_steps = 0

        actor = self.obs_actor if cfg.obs_noise else self.obs_full[:, :self.actor_dim]
        terminal_actor = self.terminal_obs_actor if cfg.obs_noise else self.terminal_obs_full[:, :self.actor_dim]
        self._obs = {"obs": actor, "critic_obs": self.obs_full}
        # the columns of done_stats; the agent sums the whole table in one reduction per step
        episode_keys = (*(f"rew_{t}" for t in spec.REWARD_NAMES), "reward", "length",
                        *(f"end_{c}" for c in spec.END_CAUSES))
        self._extras = {
            "terminal_obs": {"obs": terminal_actor, "critic_obs": self.terminal_obs_full},
            "episode": {k: self.done_stats[:, i] for i, k in enumerate(episode_keys)},
            "episode_table": (episode_keys, self.done_stats),
            "motion_ids": self.motion_ids,
            "reward_terms": self.reward_terms,
            "num_unstable": self.step_num_unstable,
            "unstable": self.step_unstable,
        }

    # ------------------------------------------------------------------ setup
    def _check_layout(self) -> None:
        r, lib = self.sim.robot, self.motion_lib
        names = self.robot_cfg.joint_names
        src = self.robot_cfg.source or self.robot_cfg.name
        if list(lib.joint_names) != list(names):
            raise ValueError(f"{src}: motion joints {lib.joint_names} differ from the robot's joint_names")
        if lib.num_bodies != self.sim.nbody - 1:
            raise ValueError(f"{src}: motions have {lib.num_bodies} bodies, the model has {self.sim.nbody - 1}")
        if not np.array_equal(r.joint_qpos_adr, r.joint_qpos_adr[0] + np.arange(len(names))):
            raise ValueError(f"{src}: joints must be consecutive in qpos after the free joint")
        if not np.array_equal(r.actuator_ids, np.arange(len(names))):
            raise ValueError(f"{src}: actuators must follow joint_names order")

    def _penalized_geoms(self) -> np.ndarray:
        """1 for collision geoms of bodies other than the end effectors (feet and hands may touch)."""
        m = self.sim.mj_model
        allowed = set(int(b) for b in self.sim.robot.end_effector_ids)
        robot_geom = (m.geom_bodyid > 0) & ((m.geom_contype != 0) | (m.geom_conaffinity != 0))
        return np.array([int(robot_geom[g] and int(m.geom_bodyid[g]) not in allowed) for g in range(m.ngeom)],
                        dtype=np.int32)

    def _build_params(self) -> ImitationParams:
        r, cfg = self.sim.robot, self.cfg
        lo, hi = r.joint_limits[:, 0], r.joint_limits[:, 1]
        mid, half = 0.5 * (lo + hi), 0.5 * (hi - lo) * cfg.soft_joint_limit_factor

        def f32(x):
            return wp.array(np.asarray(x, dtype=np.float32), dtype=wp.float32, device=self.sim.wp_device)

        def i32(x):
            return wp.array(np.asarray(x, dtype=np.int32), dtype=wp.int32, device=self.sim.wp_device)

        p = ImitationParams()
        p.default_joint_pos, p.action_scale = f32(r.default_joint_pos), f32(r.action_scale)
        p.soft_joint_lo, p.soft_joint_hi = f32(mid - half), f32(mid + half)
        p.tracked_ids, p.ee_ids = i32(r.tracked_body_ids), i32(r.end_effector_ids)
        p.feet_ids = i32(r.feet_body_ids)
        p.weights, p.sigmas = f32(spec.reward_weights(cfg.rewards)), warp_view(self.reward_sigmas)
        p.term_kind = i32([int(t.kind == spec.TRACKING) for t in spec.REWARD_TERMS])
        p.motion_lengths = warp_view(self.motion_lib.motion_lengths)
        layout = (self.num_actions, self.num_tracked, cfg.future_steps)
        once, future = spec.obs_columns(*layout, cfg.privileged_critic, cfg.observations, cfg.history_length)
        p.obs_col = i32(once)
        p.future_col = wp.array(np.asarray(future, dtype=np.int32).reshape(len(cfg.future_steps),
                                                                           len(spec.FUTURE_TERM_NAMES)),
                                dtype=wp.int32, device=self.sim.wp_device)
        p.obs_noise = f32(spec.obs_noise_scales(*layout, cfg.observations, cfg.history_length))
        p.history_block = spec.history_block(self.num_actions, self.num_tracked, cfg.observations)
        p.history_copies = max(0, int(cfg.history_length) - 1)
        p.root_id, p.anchor_id = self.root_id, self.anchor_id
        p.joint_qpos_start, p.joint_dof_start = self.joint_qpos_start, self.joint_dof_start
        p.action_clip = float(cfg.action_clip)
        p.action_ref_weight = float(cfg.action_reference)
        lead = int(cfg.action_reference_lead)
        p.action_ref_frame = 1 + list(cfg.future_steps).index(lead) if lead in cfg.future_steps else 0
        p.action_ref_vel_weight = float(cfg.action_reference_velocity)
        p.joint_limit_ref = int(bool(cfg.joint_limit_reference))
        ratio = servo_damping_over_stiffness(self.sim.mj_model, r.actuator_ids)
        if cfg.action_reference_velocity and not np.all(ratio > 0.0):  # a robot without servos runs without it
            j = int(np.argmin(ratio > 0.0))
            raise ValueError(f"env.action_reference_velocity={cfg.action_reference_velocity} needs position servos "
                             f"with damping; joint {self.robot_cfg.joint_names[j]}'s actuator has none")
        p.damping_over_stiffness = f32(ratio)
        t = cfg.terminations
        p.anchor_height, p.anchor_ori, p.ee_height = float(t.anchor_height), float(t.anchor_ori), float(t.ee_height)
        p.body_pos = float(t.body_pos)
        p.max_episode_steps, p.truncate_at_clip_end = self.max_episode_steps, int(cfg.truncate_at_clip_end)
        p.ending_causes = spec.cause_mask(t.end_causes)
        return p

    def _bind_reset_noise(self) -> ResetNoise:
        c, noise = self.cfg.reset_noise, ResetNoise()
        noise.root_pos, noise.root_rpy = wp.vec3(*c.root_pos), wp.vec3(*c.root_rpy)
        noise.root_lin_vel, noise.root_ang_vel = wp.vec3(*c.root_lin_vel), wp.vec3(*c.root_ang_vel)
        noise.joint_pos = float(c.joint_pos)
        noise.soft_joint_lo, noise.soft_joint_hi = self.params.soft_joint_lo, self.params.soft_joint_hi
        noise.joint_qpos_start = self.joint_qpos_start
        noise.at_clip_start = int(c.at_clip_start)
        noise.scale = warp_view(self.reset_noise_scale)
        noise.scale_step = 1.0 / c.ramp_steps if c.ramp_steps > 0 else 0.0
        self._wp_reset_noise_rng = warp_view(self.reset_noise_rng, wp.uint32)
        self._wp_reset_noise_draws = warp_view(self.reset_noise_draws)
        return noise

    def _bind_buffers(self) -> ImitationBuffers:
        b = ImitationBuffers()
        for name in ("policy_actions", "actions", "prev_actions", "motion_ids", "times", "episode_length", "reward",
                     "reward_raw", "reward_terms", "episode_sums", "errors", "term_cause", "fail_bits", "qpos_target",
                     "qvel_target", "default_joint_pos", "action_history", "action_delay"):
            setattr(b, name, warp_view(getattr(self, name)))
        b.terminated, b.truncated = warp_view(self.terminated, wp.bool), warp_view(self.truncated, wp.bool)
        b.obs = warp_view(self.obs_full)
        b.obs_actor = warp_view(self.obs_actor) if self.cfg.obs_noise else b.obs  # unused without noise
        b.noise_rng = warp_view(self.noise_rng, wp.uint32)
        b.term_scale = warp_view(self.termination_scale)
        return b

    def _bind_curriculum(self) -> TerminationCurriculum:
        cfg = self.cfg.terminations.curriculum
        c = TerminationCurriculum()
        c.terminated, c.scale = self.buf.terminated, self.buf.term_scale
        c.count, c.rate_ema = warp_view(self._termination_count), warp_view(self._termination_rate)
        c.alpha, c.step, c.survive_steps = float(cfg.ema), float(cfg.step), float(cfg.survive_s / self.dt)
        c.lo, c.hi = 1.0, float(cfg.start_scale)
        return c

    def _bind_adaptive_sigma(self) -> AdaptiveSigma:
        cfg, names = self.cfg.adaptive_sigma, spec.REWARD_NAMES
        a = AdaptiveSigma()
        a.reward_raw, a.unstable, a.sigmas = self.buf.reward_raw, self.sim.state.unstable, self.params.sigmas
        a.motion_ids = self.buf.motion_ids
        adapt = torch.tensor([int(name in cfg.terms) for name in names], dtype=torch.int32, device=self.device)
        self._sigma_adapt, self._sigma_min = adapt, self.reward_sigmas[0] * cfg.min_scale
        a.adapt, a.sigma_min = warp_view(adapt), warp_view(self._sigma_min)
        a.sums, a.error_ema, a.alpha = warp_view(self._sigma_sums), warp_view(self._sigma_error_ema), float(cfg.ema)
        a.steps, a.start_steps = warp_view(self._sigma_steps), int(cfg.start_steps)
        return a

    def _bind_assist(self) -> RootAssist:
        cfg = self.cfg.assist
        a = RootAssist()
        a.alpha, a.motion_ids, a.terminated = warp_view(self.assist_alpha), self.buf.motion_ids, self.buf.terminated
        a.truncated = self.buf.truncated
        a.counts, a.rate_ema = warp_view(self._assist_counts), warp_view(self.assist_rate)
        a.per_motion, a.hi = int(self._assist_per_motion), float(cfg.start)
        a.per_episode = int(cfg.fade == "success")
        # survival: one termination per survive_s of env-steps; success: a fraction of the episodes that ended
        a.ema, a.max_rate = float(cfg.ema), float(cfg.max_fail if a.per_episode else self.dt / cfg.survive_s)
        a.decrement, a.inv_tau = float(cfg.start / cfg.anneal_steps), float(1.0 / cfg.tau_s)
        a.vertical, a.rotation = int(cfg.vertical), int(cfg.rotation)
        return a

    @property
    def obs_slices(self) -> dict[str, slice]:
        """Named column ranges of ``critic_obs`` (the actor's ``obs`` is its first ``actor_dim`` columns)."""
        return spec.obs_slices(self.num_actions, self.num_tracked, self.cfg.future_steps, self.cfg.privileged_critic,
                               self.cfg.observations, self.cfg.history_length)

    def _bind_episode_buffers(self) -> EpisodeBuffers:
        e = EpisodeBuffers()
        e.episode_length, e.times, e.term_cause = self.buf.episode_length, self.buf.times, self.buf.term_cause
        e.terminated, e.truncated = self.buf.terminated, self.buf.truncated
        e.cause_codes, e.episode_sums, e.errors = warp_view(self._cause_codes), self.buf.episode_sums, self.buf.errors
        e.done_out, e.reset_mask_out = warp_view(self.done, wp.bool), self._wp_reset_mask
        e.done_stats_out = warp_view(self.done_stats)
        e.step_unstable_out, e.step_num_unstable_out = warp_view(self.step_unstable, wp.bool), \
            warp_view(self.step_num_unstable)
        e.error_sum_out, e.dt = warp_view(self._error_sum), float(self.dt)
        return e

    def symmetry(self) -> Symmetry | None:
        """The left-right mirror of the actor's and critic's rows and of the actions (:func:`mirror_symmetry`);
        ``None`` for a robot without a mirror map."""
        return mirror_symmetry(self.robot_cfg, self.sim.mj_model, self.sim.robot.tracked_body_ids, self.cfg,
                               self.device)

    # ------------------------------------------------------------- stages
    def _query_reference(self, masked: bool = False) -> None:
        """Reference (now + future frames) into ``self.ref``; ``masked``: only for the envs in ``reset_mask``."""
        self.motion_lib.query(self._query_reset if masked else self._query_all, self.ref)

    def _compute_observations(self, mask_wp: wp.array | None = None) -> None:
        """Rows of the envs in ``mask_wp`` (default: all); their history copies stay as they are."""
        mask_wp = self._wp_all if mask_wp is None else mask_wp
        compute_observations(self.sim.state, self.ref_wp, self.params, mask_wp, self.buf)
        if self.cfg.obs_noise:
            add_observation_noise(self.sim.state, self.params, mask_wp, self.buf)

    def _start_history(self, mask_wp: wp.array) -> None:
        """The envs in ``mask_wp`` start an episode: every history copy of their rows is this step's block."""
        fill_history(self.params, mask_wp, self.buf.obs)
        if self.cfg.obs_noise:
            fill_history(self.params, mask_wp, self.buf.obs_actor)

    def _age_history(self) -> None:
        """Every history copy one control step older, before this step's rows are written."""
        shift_history(self.params, self.buf.obs)
        if self.cfg.obs_noise:
            shift_history(self.params, self.buf.obs_actor)

    def _compute_rewards_and_dones(self) -> None:
        compute_rewards(self.sim.state, self.ref_wp, self.params, self.buf)
        if self.adaptive_sigma is not None:
            adapt_sigmas(self.adaptive_sigma)
        compute_terminations(self.sim.state, self.ref_wp, self.params, self.buf)
        if self.curriculum is not None:
            update_termination_scale(self.curriculum)
        if self.assist is not None:
            fade_assist(self.assist)
        if self._ramp_reset_noise:
            advance_reset_noise(self.reset_noise)

    def _write_reference_into_sim(self) -> None:
        """The reference state of the envs in ``reset_mask`` into the simulator, moved off it by the reset noise
        when that is on (``env.reset_noise``; never with kinematic replay, which writes the reference every step)."""
        reference_state(self.ref_wp, self.params, self._wp_reset_mask, self.buf)
        if self.reset_noise is not None:
            perturb_reset_state(self.reset_noise, self._wp_reset_mask, self.buf.times, self._wp_reset_noise_rng,
                                self.buf.qpos_target, self.buf.qvel_target, self._wp_reset_noise_draws)
        self.sim.reset_bound()

    def _reset_envs(self) -> None:
        """Reference-state initialisation of the envs in ``reset_mask`` (others untouched); their episode length
        and sums are cleared by the caller (:func:`close_episodes` in a step)."""
        self.sampler.sample(self._wp_reset_mask, self.buf.motion_ids, self.buf.times)
        self.randomizer.reset(self._wp_reset_mask)
        self._query_reference(masked=True)
        self._write_reference_into_sim()

    def _clear_episodes(self) -> None:
        self.episode_length.masked_fill_(self.reset_mask, 0)
        self.episode_sums.masked_fill_(self.reset_mask.unsqueeze(1), 0.0)

    def _step_launches(self) -> None:
        """One control step as device work only (no host read, no host decision): a graph can hold it."""
        apply_actions(self.params, self.ref_wp, self.buf, self.sim.state)
        advance_clock(self.episodes)
        self._query_reference()
        if self.cfg.kinematic_replay:
            self.reset_mask.fill_(True)
            self._write_reference_into_sim()
        else:
            self.randomizer.push(self.sim.state)
            if self.assist is not None:
                assist_root(self.ref_wp, self.assist, self.sim.state)
            self.sim.step()
        self._compute_rewards_and_dones()
        record_step(self.sim.state, self.episodes)
        self.sampler.update(self.buf.motion_ids, self.buf.times, self.buf.terminated)
        self._age_history()
        self._compute_observations()
        copy_rows(self.buf.obs, self._wp_terminal_obs)
        if self.cfg.obs_noise:
            copy_rows(self.buf.obs_actor, self._wp_terminal_obs_actor)
        close_episodes(self.episodes)  # done, the ended episodes' statistics, reset_mask = done
        self._reset_envs()
        self._compute_observations(self._wp_reset_mask)  # only the reset envs' rows changed
        self._start_history(self._wp_reset_mask)

    def capture_step(self) -> bool:
        """Capture the control step's launches (actions, reference, physics, rewards, terminations, observations,
        sampler, resets) as one graph that every later :meth:`step` replays; only the copy of the actions in and
        host counters stay outside. Possible where the simulator is device launches only (MJWarp); with CUDA it
        needs Warp's memory pool (as the simulator's own graphs). Captured on a side stream, with Python's garbage
        collector paused (a collection during capture could free memory the graph records). Returns whether a
        graph is in use; False (eager steps) for host-stepped backends and kinematic replay."""
        if not self.sim.capturable or self.cfg.kinematic_replay:
            return False
        dev = wp.get_device(self.sim.wp_device)
        side = torch.cuda.Stream(device=self.device) if dev.is_cuda else None
        with gc_paused(), (torch.cuda.stream(side) if side is not None else contextlib.nullcontext()), \
                wp.ScopedDevice(dev), torch_stream_scope(self.device), self.sim.launches_inline():
            if side is not None:
                side.wait_stream(torch.cuda.default_stream(self.device))
            with wp.ScopedCapture(dev, stream=dev.stream if dev.is_cuda else None) as capture:
                self._step_launches()
        self._step_graph, self._graph_epoch = capture.graph, self.sim.graph_epoch
        return True

    @contextlib.contextmanager
    def eager_steps(self):
        """Steps inside run their launches eagerly; a captured step graph is kept and replayed again after (for
        timing one stage of the step, or debugging)."""
        graph, pending = self._step_graph, self._capture_pending
        self._step_graph, self._capture_pending = None, False
        try:
            yield
        finally:
            self._step_graph, self._capture_pending = graph, pending

    def _capture_or_warn(self) -> None:
        self._capture_pending = False
        try:
            self.capture_step()
        except Exception as e:  # noqa: BLE001 - any capture failure leaves the eager step, which is always correct
            self._step_graph = None
            warnings.warn(f"env.graph_step: capturing the env step failed ({type(e).__name__}: {e}); stepping "
                          "eagerly (set env.graph_step=false to silence this)", RuntimeWarning, stacklevel=3)

    # ------------------------------------------------------------------ API
    @on_torch_stream
    def reset(self) -> dict[str, torch.Tensor]:
        self.reset_mask.fill_(True)
        self._clear_episodes()
        self._reset_envs()
        self._compute_observations()
        self._start_history(self._wp_reset_mask)
        return self._obs

    @on_torch_stream
    def reset_to(self, motion_ids: torch.Tensor, times: torch.Tensor,
                 mask: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """Reset the envs in ``mask [N]`` (default: all) to the given ``motion_ids [N]`` / ``times [N]``, moved off
        the reference by ``env.reset_noise`` as every training reset is (the evaluation's env has it off)."""
        if mask is None:
            self.reset_mask.fill_(True)
        else:
            self.reset_mask.copy_(mask.to(device=self.device, dtype=torch.bool))
        mask = self.reset_mask
        self.motion_ids.copy_(torch.where(mask, motion_ids.to(self.motion_ids), self.motion_ids))
        self.times.copy_(torch.where(mask, times.to(self.times), self.times))
        self._clear_episodes()
        self.randomizer.reset(self._wp_reset_mask)
        self._query_reference()
        self._write_reference_into_sim()
        self._compute_observations()
        self._start_history(self._wp_reset_mask)
        return self._obs

    def seed_episodes(self, keys: list[tuple[int, ...]]) -> None:
        """Re-seed each env's random streams of an episode (domain randomization, observation noise, reset noise)
        from ``keys`` (one tuple of ints per env, e.g. ``(motion id, play)``), in place: what an episode started by
        the next :meth:`reset_to` draws then depends on its key and the env's seed only, not on its env slot or what
        that slot played before. An evaluation's plays are so the same in any number of envs, rounds or resumes, and
        alike for every policy. Host work, once per round of plays; training never calls it."""
        if len(keys) != self.num_envs:
            raise ValueError(f"seed_episodes: {len(keys)} keys for {self.num_envs} envs")
        if not (self.randomizer.enabled or self.cfg.obs_noise or self.reset_noise_rng.numel()):
            return  # nothing is drawn per episode (a clean evaluation): spare the host the seeding
        self.randomizer.rng.copy_(keyed_rng_states(self.seed, RNG_RANDOMIZATION, keys, self.device))
        self.noise_rng.copy_(keyed_rng_states(self.seed, RNG_OBS_NOISE, keys, self.device))
        if self.reset_noise_rng.numel():
            self.reset_noise_rng.copy_(keyed_rng_states(self.seed, RNG_RESET_NOISE, keys, self.device))

    @on_torch_stream
    def step(self, actions: torch.Tensor):
        self.policy_actions.copy_(actions.detach())
        if self._capture_pending and self._eager_steps > 0:  # the first step ran eagerly: kernels are loaded
            self._capture_or_warn()
        if self._step_graph is not None and self._graph_epoch != self.sim.graph_epoch:
            self._step_graph, self._capture_pending = None, True  # the simulator replaced buffers: recapture
        if self._step_graph is not None:
            wp.capture_launch(self._step_graph)
            self.sim.account_step()
        else:
            self._step_launches()
            self._eager_steps += 1
        self._error_count += self.num_envs
        return self._obs, self.reward, self.terminated, self.truncated, self._extras

    def metrics(self) -> dict[str, torch.Tensor]:
        """Device scalars since the last call: mean tracking errors ``error/<name>`` (m, rad) over every
        env-step, and the start-state sampler's entropy and top-bin probability. Resets the sums."""
        count = max(self._error_count, 1)
        out = {f"error/{name}": self._error_sum[i] / count for i, name in enumerate(spec.ERROR_NAMES)}
        out.update(self.sampler.metrics())
        out.update(self.sim.metrics())  # env/overflow (MJWarp)
        if self.curriculum is not None:
            out["env/termination_scale"] = self.termination_scale[0]
        if self.assist is not None:
            out["env/assist"] = self.assist_alpha.mean()
        if self._ramp_reset_noise:
            out["env/reset_noise_scale"] = self.reset_noise_scale[0]
        if self.adaptive_sigma is not None:
            out.update({f"env/sigma_{name}": self.reward_sigmas[:, i].mean() for i, name in enumerate(spec.REWARD_NAMES)
                        if name in self.cfg.adaptive_sigma.terms})  # per motion: the mean over the motions
        self._error_sum.zero_()
        self._error_count = 0
        return out

    @on_torch_stream
    def get_observations(self) -> dict[str, torch.Tensor]:
        self._query_reference()
        self._compute_observations()
        return self._obs

    def state_dict(self) -> dict:
        return {
            "sim": self.sim.state_dict(),
            "motion_ids": self.motion_ids.clone(), "times": self.times.clone(),
            "episode_length": self.episode_length.clone(), "actions": self.actions.clone(),
            "prev_actions": self.prev_actions.clone(), "episode_sums": self.episode_sums.clone(),
            "sampler": self.sampler.state_dict(),
            "action_history": self.action_history.clone(), "default_joint_pos": self.default_joint_pos.clone(),
            "action_delay": self.action_delay.clone(), "noise_rng": self.noise_rng.clone(),
            "randomization": self.randomizer.state_dict(),
            **({"termination_curriculum": torch.cat([self.termination_scale, self._termination_rate])}
               if self.curriculum is not None else {}),
            **({"assist_alpha": self.assist_alpha.clone()} if self.assist is not None else {}),
            **({"adaptive_sigma": torch.stack([self.reward_sigmas, self._sigma_error_ema])}
               if self.adaptive_sigma is not None else {}),
            **({"adaptive_sigma_steps": self._sigma_steps.clone()} if self._sigma_gated else {}),
            **({"reset_noise_rng": self.reset_noise_rng.clone()} if self.reset_noise is not None else {}),
            **({"reset_noise_scale": self.reset_noise_scale.clone()} if self._ramp_reset_noise else {}),
            **({"assist_rate": self.assist_rate.clone()} if self.assist is not None and self._assist_per_motion
               else {}),
            **({"obs_history": torch.cat([rows[:, self._history_cols] for rows in self._history_rows()], dim=1)}
               if self.params.history_copies > 0 else {}),
        }

    @property
    def _history_cols(self) -> slice:
        return slice(self.params.history_block, self.params.history_block * (self.params.history_copies + 1))

    def _history_rows(self) -> list[torch.Tensor]:
        """The row buffers that carry history copies: the clean rows, and the actor's noisy view if any."""
        return [self.obs_full, self.obs_actor] if self.cfg.obs_noise else [self.obs_full]

    def load_state_dict(self, state: dict) -> None:
        """Every key of :meth:`state_dict` (a checkpoint's env state is checked against it before it loads)."""
        self.randomizer.load_state_dict(state["randomization"])  # first: the sim recomputes its views with them
        self.sim.load_state_dict(state["sim"])
        for key in ("motion_ids", "times", "episode_length", "actions", "prev_actions", "episode_sums",
                    "action_history", "default_joint_pos", "action_delay", "noise_rng"):
            getattr(self, key).copy_(state[key])
        self.sampler.load_state_dict(state["sampler"])
        if self.reset_noise is not None:
            self.reset_noise_rng.copy_(state["reset_noise_rng"])
        if self._ramp_reset_noise:
            self.reset_noise_scale.copy_(state["reset_noise_scale"])
        if self.adaptive_sigma is not None:  # per motion: appended motions start at the configured σ
            saved = state["adaptive_sigma"]
            self.reward_sigmas[:saved.shape[1]].copy_(saved[0])
            self._sigma_error_ema[:saved.shape[1]].copy_(saved[1])
        if self._sigma_gated:
            self._sigma_steps.copy_(state["adaptive_sigma_steps"])
        if self.curriculum is not None:
            self.termination_scale.copy_(state["termination_curriculum"][:1])
            self._termination_rate.copy_(state["termination_curriculum"][1:])
        if self.assist is not None:  # per motion: appended motions start at the full share
            self.assist_alpha.fill_(self.cfg.assist.start)
            self.assist_alpha[:state["assist_alpha"].shape[0]].copy_(state["assist_alpha"])
            if self._assist_per_motion:
                self.assist_rate.zero_()
                rate = state.get("assist_rate", self.assist_rate[:0])
                self.assist_rate[:rate.shape[0]].copy_(rate)
        if self.params.history_copies > 0:
            cols = self._history_cols
            for rows, saved in zip(self._history_rows(), state["obs_history"].split(cols.stop - cols.start, dim=1),
                                   strict=True):
                rows[:, cols].copy_(saved)

    def close(self) -> None:
        self.sim.close()
