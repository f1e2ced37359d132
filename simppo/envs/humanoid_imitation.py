"""``env=humanoid_imitation``: a humanoid on MJWarp tracks reference motions from the MotionLib.

Every per-step computation is a Warp kernel writing preallocated buffers in place (actions → ctrl,
rewards, terminations, observations, reference-state resets); start states are drawn by the adaptive
sampler with torch ops. Nothing in :meth:`HumanoidImitationEnv.step` synchronises with the host.
"""

from dataclasses import dataclass, field

import numpy as np
import torch
import warp as wp

from simppo.envs.base import VecEnv
from simppo.envs.imitation_sampling import AdaptiveSampler, AdaptiveSamplingCfg
from simppo.kernels.imitation_actions import launch_apply_actions
from simppo.kernels.imitation_contacts import launch_undesired_contacts
from simppo.kernels.imitation_obs import actor_obs_dim, critic_extra_dim, launch_tracking_obs
from simppo.kernels.imitation_reset import launch_reference_state
from simppo.kernels.imitation_rewards import REWARD_TERMS, launch_tracking_reward
from simppo.kernels.imitation_terminations import launch_tracking_termination
from simppo.motion.config import MotionCfg
from simppo.motion.motion_lib import MotionLib
from simppo.robot.config import RobotCfg, load_robot_cfg
from simppo.sim.config import MJWarpSimCfg
from simppo.sim.mjwarp import MJWarpSim
from simppo.utils.device import warp_view as _wp


@dataclass
class RewardWeightsCfg:
    """Weight of each reward term (penalties negative). Defaults follow BeyondMimic / mjlab tracking."""

    anchor_pos: float = 0.5
    anchor_ori: float = 0.5
    body_pos: float = 1.0
    body_ori: float = 1.0
    body_lin_vel: float = 1.0
    body_ang_vel: float = 1.0
    action_rate: float = -0.1
    joint_limit: float = -10.0
    undesired_contacts: float = -0.1


@dataclass
class RewardSigmasCfg:
    """σ of the exp(-err²/σ²) tracking terms (m, rad, m/s, rad/s)."""

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
    privileged_critic: bool = True
    soft_joint_limit_factor: float = 0.9
    kinematic_replay: bool = False  # write the reference into the simulator instead of stepping physics
    rewards: RewardWeightsCfg = field(default_factory=RewardWeightsCfg)
    sigmas: RewardSigmasCfg = field(default_factory=RewardSigmasCfg)
    terminations: TerminationCfg = field(default_factory=TerminationCfg)
    sampling: AdaptiveSamplingCfg = field(default_factory=AdaptiveSamplingCfg)


class HumanoidImitationEnv(VecEnv):
    """Motion tracking for ``num_envs`` humanoids. Observation layout: see ``obs_slices``."""

    def __init__(self, cfg: HumanoidImitationEnvCfg, train_cfg=None, num_envs: int = 64, device: str = "cpu",
                 seed: int = 0, robot: RobotCfg | str | None = None, sim_cfg: MJWarpSimCfg | None = None,
                 motion_cfg: MotionCfg | None = None):
        self.cfg = cfg
        self.num_envs = num_envs
        self.device = device
        self.seed = seed
        robot = robot or getattr(train_cfg, "robot", None) or "g1"
        sim_cfg = sim_cfg or getattr(train_cfg, "sim", None) or MJWarpSimCfg()
        motion_cfg = motion_cfg or getattr(train_cfg, "motion", None) or MotionCfg()
        self.robot_cfg = load_robot_cfg(robot)
        self.sim = MJWarpSim(self.robot_cfg, sim_cfg, num_envs=num_envs, device=device)
        self.motion_lib = MotionLib(motion_cfg.resolved_files(), device=device, robot=self.robot_cfg.name)
        self.dt = self.sim.control_dt
        self._check_layout()

        r = self.sim.robot
        self.num_actions = len(r.joint_qpos_adr)
        self.joint_qpos_start = int(r.joint_qpos_adr[0])
        self.joint_dof_start = int(r.joint_dof_adr[0])
        self.root_id, self.anchor_id = int(r.root_body_id), int(r.anchor_body_id)
        nt, nj, k = len(r.tracked_body_ids), self.num_actions, len(cfg.future_steps)
        self.actor_dim = actor_obs_dim(nj, nt, k)
        self.full_dim = self.actor_dim + (critic_extra_dim(nj, nt) if cfg.privileged_critic else 0)
        self.obs_dims = {"obs": self.actor_dim, "critic_obs": self.full_dim}
        self.max_episode_steps = max(1, int(round(cfg.max_episode_length_s / self.dt)))

        dev = device
        f32, i32 = {"dtype": torch.float32, "device": dev}, {"dtype": torch.int32, "device": dev}
        n = num_envs
        # --- constant tables
        lo, hi = r.joint_limits[:, 0], r.joint_limits[:, 1]
        mid, half = 0.5 * (lo + hi), 0.5 * (hi - lo) * cfg.soft_joint_limit_factor
        self._const = {
            "default_joint_pos": torch.tensor(r.default_joint_pos, **f32),
            "action_scale": torch.tensor(r.action_scale, **f32),
            "tracked_ids": torch.tensor(r.tracked_body_ids, **i32),
            "ee_ids": torch.tensor(r.end_effector_ids, **i32),
            "soft_lo": torch.tensor(mid - half, **f32),
            "soft_hi": torch.tensor(mid + half, **f32),
            "sigmas": torch.tensor([getattr(cfg.sigmas, t) for t in REWARD_TERMS[:6]], **f32),
            "weights": torch.tensor([getattr(cfg.rewards, t) for t in REWARD_TERMS], **f32),
            "geom_penalized": torch.tensor(self._penalized_geoms(), **i32),
        }
        self.future_offsets = torch.tensor([s * self.dt for s in cfg.future_steps], **f32)
        # --- state and outputs (allocated once)
        self.motion_ids = torch.zeros(n, **i32)
        self.times = torch.zeros(n, **f32)
        self.episode_length = torch.zeros(n, **i32)
        self.actions = torch.zeros(n, nj, **f32)
        self.prev_actions = torch.zeros(n, nj, **f32)
        self.reward = torch.zeros(n, **f32)
        self.reward_terms = torch.zeros(n, len(REWARD_TERMS), **f32)
        self.episode_sums = torch.zeros(n, len(REWARD_TERMS) + 1, **f32)
        self.done_sums = torch.zeros_like(self.episode_sums)
        self.done_length = torch.zeros(n, **f32)
        self.undesired_contacts = torch.zeros(n, **f32)
        self.terminated = torch.zeros(n, dtype=torch.bool, device=dev)
        self.truncated = torch.zeros(n, dtype=torch.bool, device=dev)
        self.done = torch.zeros(n, dtype=torch.bool, device=dev)
        self.all_envs = torch.ones(n, dtype=torch.bool, device=dev)
        self.obs_full = torch.zeros(n, self.full_dim, **f32)
        self.terminal_obs_full = torch.zeros(n, self.full_dim, **f32)
        self.qpos_target = torch.zeros(n, self.sim.nq, **f32)
        self.qvel_target = torch.zeros(n, self.sim.nv, **f32)
        self.ref = self.motion_lib.alloc_state(n, len(cfg.future_steps))
        self.sampler = AdaptiveSampler(self.motion_lib.motion_lengths.cpu().tolist(), self.motion_lib.motion_weights,
                                       cfg.sampling, cfg.init_start_prob, dev, self.motion_lib.motion_dt)
        self.motion_lengths = self.motion_lib.motion_lengths
        self._bind_warp()
        self._obs = {"obs": self.obs_full[:, :self.actor_dim], "critic_obs": self.obs_full}
        self._extras = {
            "terminal_obs": {"obs": self.terminal_obs_full[:, :self.actor_dim], "critic_obs": self.terminal_obs_full},
            "episode": {"reward": self.done_sums[:, -1], "length": self.done_length,
                        **{f"rew_{t}": self.done_sums[:, i] for i, t in enumerate(REWARD_TERMS)}},
            "motion_ids": self.motion_ids,
            "reward_terms": self.reward_terms,
            "num_unstable": self.sim.num_unstable,
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
        return np.array([int(robot_geom[g] and int(m.geom_bodyid[g]) not in allowed) for g in range(m.ngeom)])

    def _bind_warp(self) -> None:
        """Warp views of every buffer the kernels touch (created once; zero-copy)."""
        s, ref, c = self.sim, self.ref, self._const
        v3, v4 = wp.vec3, wp.vec4
        self._w = {
            "xpos": _wp(s.xpos, v3), "xquat": _wp(s.xquat, v4),
            "lin_vel": _wp(s.body_lin_vel_w, v3), "ang_vel": _wp(s.body_ang_vel_w, v3),
            "qpos": s.wp_qpos, "qvel": s.wp_qvel, "ctrl": s.wp_ctrl,
            "ref_root_pos": _wp(ref.root_pos, v3), "ref_root_quat": _wp(ref.root_quat, v4),
            "ref_root_lin_vel": _wp(ref.root_lin_vel_w, v3), "ref_root_ang_vel": _wp(ref.root_ang_vel_w, v3),
            "ref_body_pos": _wp(ref.body_pos_w, v3), "ref_body_quat": _wp(ref.body_quat_w, v4),
            "ref_body_lin_vel": _wp(ref.body_lin_vel_w, v3), "ref_body_ang_vel": _wp(ref.body_ang_vel_w, v3),
            "ref_dof_pos": _wp(ref.dof_pos), "ref_dof_vel": _wp(ref.dof_vel),
            "actions": _wp(self.actions), "prev_actions": _wp(self.prev_actions),
            "motion_ids": _wp(self.motion_ids), "times": _wp(self.times),
            "episode_length": _wp(self.episode_length), "motion_lengths": _wp(self.motion_lengths),
            "reward": _wp(self.reward), "reward_terms": _wp(self.reward_terms),
            "episode_sums": _wp(self.episode_sums), "undesired": _wp(self.undesired_contacts),
            "terminated": _wp(self.terminated, wp.bool), "truncated": _wp(self.truncated, wp.bool),
            "done": _wp(self.done, wp.bool), "all_envs": _wp(self.all_envs, wp.bool),
            "obs_full": _wp(self.obs_full), "qpos_target": _wp(self.qpos_target),
            "qvel_target": _wp(self.qvel_target), **{k: _wp(v) for k, v in c.items()},
        }

    @property
    def obs_slices(self) -> dict[str, slice]:
        """Named column ranges of ``critic_obs`` (the actor's ``obs`` is its first ``actor_dim`` columns)."""
        nj, nt = self.num_actions, len(self.sim.robot.tracked_body_ids)
        parts = [("gravity_b", 3), ("root_lin_vel_b", 3), ("root_ang_vel_b", 3), ("joint_pos_rel", nj),
                 ("joint_vel", nj), ("last_action", nj), ("body_pos", 3 * nt), ("body_rot6d", 6 * nt)]
        for k in self.cfg.future_steps:
            parts += [(f"future{k}_anchor_pos", 3), (f"future{k}_anchor_rot6d", 6),
                      (f"future{k}_body_pos", 3 * nt), (f"future{k}_body_rot6d", 6 * nt)]
        if self.cfg.privileged_critic:
            parts += [("ref_anchor_lin_vel", 3), ("ref_anchor_ang_vel", 3), ("ref_joint_vel", nj),
                      ("body_lin_vel", 3 * nt), ("body_ang_vel", 3 * nt)]
        out, col = {}, 0
        for name, width in parts:
            out[name] = slice(col, col + width)
            col += width
        return out

    # ------------------------------------------------------------- kernels
    def _query_reference(self, mask: torch.Tensor | None = None) -> None:
        """Reference (now + future frames) into ``self.ref``; with ``mask [N]`` only for those envs."""
        self.motion_lib.get_motion_state(self.motion_ids, self.times, self.future_offsets, out=self.ref, mask=mask)

    def _compute_observations(self) -> None:
        w = self._w
        launch_tracking_obs(
            w["xpos"], w["xquat"], w["lin_vel"], w["ang_vel"], w["qpos"], w["qvel"], w["actions"],
            w["ref_body_pos"], w["ref_body_quat"], w["ref_body_lin_vel"], w["ref_body_ang_vel"], w["ref_dof_vel"],
            w["default_joint_pos"], w["tracked_ids"], self.root_id, self.anchor_id, self.joint_qpos_start,
            self.joint_dof_start, self.cfg.privileged_critic, w["obs_full"],
        )

    def _compute_rewards_and_dones(self) -> None:
        w, t = self._w, self.cfg.terminations
        d = self.sim.data
        launch_undesired_contacts(d.nacon, d.contact.geom, d.contact.worldid, d.contact.efc_address,
                                  w["geom_penalized"], w["undesired"])
        launch_tracking_reward(
            w["xpos"], w["xquat"], w["lin_vel"], w["ang_vel"], w["qpos"], w["actions"], w["prev_actions"],
            w["undesired"], w["ref_body_pos"], w["ref_body_quat"], w["ref_body_lin_vel"], w["ref_body_ang_vel"],
            w["tracked_ids"], self.anchor_id, self.joint_qpos_start, w["soft_lo"], w["soft_hi"], w["sigmas"],
            w["weights"], w["reward_terms"], w["reward"], w["episode_sums"],
        )
        launch_tracking_termination(
            w["xpos"], w["xquat"], w["ref_body_pos"], w["ref_body_quat"], self.sim.wp_unstable, w["motion_ids"],
            w["times"], w["motion_lengths"], w["episode_length"], w["ee_ids"], self.anchor_id, t.anchor_height,
            t.anchor_ori, t.ee_height, self.max_episode_steps, int(self.cfg.truncate_at_clip_end), w["terminated"],
            w["truncated"],
        )

    def _write_reference_into_sim(self, mask_wp: wp.array, mask: torch.Tensor) -> None:
        w = self._w
        launch_reference_state(
            mask_wp, w["ref_root_pos"], w["ref_root_quat"], w["ref_root_lin_vel"], w["ref_root_ang_vel"],
            w["ref_dof_pos"], w["ref_dof_vel"], self.joint_qpos_start, self.joint_dof_start, w["qpos_target"],
            w["qvel_target"], w["actions"], w["prev_actions"],
        )
        self.sim.reset_worlds(mask, self.qpos_target, self.qvel_target)

    def _reset_envs(self, mask: torch.Tensor, mask_wp: wp.array) -> None:
        """Reference-state initialisation of the envs in ``mask`` (others untouched)."""
        self.sampler.sample(mask, self.motion_ids, self.times)
        self.episode_length.masked_fill_(mask, 0)
        self.episode_sums.masked_fill_(mask.unsqueeze(1), 0.0)
        self._query_reference(mask)
        self._write_reference_into_sim(mask_wp, mask)

    # ------------------------------------------------------------------ API
    def reset(self) -> dict[str, torch.Tensor]:
        self._reset_envs(self.all_envs, self._w["all_envs"])
        self._compute_observations()
        return self._obs

    def reset_to(self, motion_ids: torch.Tensor, times: torch.Tensor,
                 mask: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """Reset the envs in ``mask [N]`` (default: all) to the given ``motion_ids [N]`` / ``times [N]``."""
        mask = self.all_envs if mask is None else mask.to(device=self.device, dtype=torch.bool)
        self.motion_ids.copy_(torch.where(mask, motion_ids.to(self.motion_ids), self.motion_ids))
        self.times.copy_(torch.where(mask, times.to(self.times), self.times))
        self.episode_length.masked_fill_(mask, 0)
        self.episode_sums.masked_fill_(mask.unsqueeze(1), 0.0)
        self._query_reference()
        self._write_reference_into_sim(wp.from_torch(mask.contiguous(), dtype=wp.bool), mask)
        self._compute_observations()
        return self._obs

    def step(self, actions: torch.Tensor):
        w = self._w
        launch_apply_actions(_wp(actions.detach().contiguous()), w["default_joint_pos"], w["action_scale"],
                             self.cfg.action_clip, w["ctrl"], w["actions"], w["prev_actions"])
        self.episode_length += 1
        self.times += self.dt
        self._query_reference()
        if self.cfg.kinematic_replay:
            self._write_reference_into_sim(w["all_envs"], self.all_envs)
        else:
            self.sim.step()
        self._compute_rewards_and_dones()
        self.sampler.update(self.motion_ids, self.times, self.terminated)
        self._compute_observations()
        self.terminal_obs_full.copy_(self.obs_full)
        torch.logical_or(self.terminated, self.truncated, out=self.done)
        self.done_sums.copy_(self.episode_sums)
        self.done_length.copy_(self.episode_length)
        self._reset_envs(self.done, w["done"])
        self._compute_observations()
        return self._obs, self.reward, self.terminated, self.truncated, self._extras

    def get_observations(self) -> dict[str, torch.Tensor]:
        self._query_reference()
        self._compute_observations()
        return self._obs

    def state_dict(self) -> dict:
        d = self.sim.data
        return {
            "qpos": self.sim.qpos.clone(), "qvel": self.sim.qvel.clone(), "ctrl": self.sim.ctrl.clone(),
            "qacc_warmstart": wp.to_torch(d.qacc_warmstart).clone(),
            "motion_ids": self.motion_ids.clone(), "times": self.times.clone(),
            "episode_length": self.episode_length.clone(), "actions": self.actions.clone(),
            "prev_actions": self.prev_actions.clone(), "episode_sums": self.episode_sums.clone(),
            "sampler": self.sampler.state_dict(),
        }

    def load_state_dict(self, state: dict) -> None:
        self.sim.qpos.copy_(state["qpos"])
        self.sim.qvel.copy_(state["qvel"])
        self.sim.ctrl.copy_(state["ctrl"])
        wp.to_torch(self.sim.data.qacc_warmstart).copy_(state["qacc_warmstart"])
        for key in ("motion_ids", "times", "episode_length", "actions", "prev_actions", "episode_sums"):
            getattr(self, key).copy_(state[key])
        self.sampler.load_state_dict(state["sampler"])
        self.sim.kinematics()
