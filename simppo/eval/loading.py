"""Rebuild a trained run for evaluation: its config (``config.yaml`` next to the checkpoint), the policy
and an evaluation copy of its env.

Every bad input raises :class:`EvalInputError` with a one-line message naming the file.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from pathlib import Path

import torch
from omegaconf import OmegaConf

from simppo.agent.checkpoint import CheckpointError, load_checkpoint
from simppo.agent.config import PPOAgentConfig
from simppo.agent.models import PPOModel, log_std_rows
from simppo.config import TrainCfg, register_configs
from simppo.kernels.imitation import spec

_EVAL_EPISODE_S = 1.0e6  # no time-outs (fits the env's int32 step counter at any control rate)


class EvalInputError(ValueError):
    """Missing / unreadable checkpoint or config, or a checkpoint that does not fit the env (one line)."""


@dataclass(frozen=True)
class PolicyLayout:
    """The dims that must agree between a checkpoint and an env."""

    obs_dim: int
    critic_obs_dim: int
    num_actions: int
    detail: str = ""  # how the env's layout was made (future steps, joints, tracked bodies)

    def describe(self) -> str:
        text = f"obs {self.obs_dim}, critic_obs {self.critic_obs_dim}, actions {self.num_actions}"
        return f"{text} ({self.detail})" if self.detail else text

    def dims(self) -> tuple[int, int, int]:
        return self.obs_dim, self.critic_obs_dim, self.num_actions


@dataclass
class LoadedRun:
    checkpoint: Path
    config_path: Path
    cfg: TrainCfg
    state: dict
    layout: PolicyLayout  # the env's, from the config

    @property
    def run_dir(self) -> Path:
        return self.checkpoint.parent


def _one_line(exc: BaseException, limit: int = 300) -> str:
    """``exc``'s message on one line (torch's state-dict errors put the reason on the lines after the first)."""
    text = " ".join(line.strip() for line in str(exc).strip().splitlines() if line.strip())
    if not text:
        return type(exc).__name__
    return text if len(text) <= limit else text[:limit - 3] + "..."


def load_train_config(path: str | Path) -> TrainCfg:
    """The resolved ``config.yaml`` of a run → a typed :class:`TrainCfg` (env schema picked by ``env.name``)."""
    from simppo.envs.imitation.config import HumanoidImitationEnvCfg

    path = Path(path)
    if not path.is_file():
        raise EvalInputError(f"{path}: run config not found (simppo-train writes config.yaml next to the "
                             "checkpoints; pass config=PATH)")
    register_configs()
    try:
        raw = OmegaConf.load(path)
    except Exception as exc:  # yaml errors come in many types
        raise EvalInputError(f"{path}: unreadable config ({_one_line(exc)})") from None
    env_name = OmegaConf.select(raw, "env.name", default=None)
    if env_name != "humanoid_imitation":
        raise EvalInputError(f"{path}: env '{env_name}' cannot be evaluated (simppo-eval needs "
                             "env=humanoid_imitation)")
    if OmegaConf.select(raw, "env.action_reference", default=None) is None:
        raw.env.action_reference = 0.0  # runs saved before the reference feed-forward used the default-pose map
    if OmegaConf.select(raw, "env.action_reference_velocity", default=None) is None:
        raw.env.action_reference_velocity = 0.0  # runs saved before it damped towards rest
    try:
        schema = OmegaConf.structured(TrainCfg)
        schema.env = OmegaConf.structured(HumanoidImitationEnvCfg)
        cfg: TrainCfg = OmegaConf.to_object(OmegaConf.merge(schema, raw))
    except Exception as exc:
        raise EvalInputError(f"{path}: not a simppo-train config ({_one_line(exc)})") from None
    return cfg


def config_layout(cfg: TrainCfg) -> PolicyLayout:
    """The observation / action dims the env of ``cfg`` produces (from the spec; no env is built)."""
    nj, nt = len(cfg.robot.joint_names), len(cfg.robot.tracked_bodies)
    actor, full = spec.obs_dims(nj, nt, list(cfg.env.future_steps), cfg.env.privileged_critic, cfg.env.observations,
                                cfg.env.history_length)
    detail = (f"future_steps {list(cfg.env.future_steps)}, {nj} joints, {nt} tracked bodies, "
              f"privileged_critic {cfg.env.privileged_critic}, observations {cfg.env.observations}, "
              f"history_length {cfg.env.history_length}")
    return PolicyLayout(actor, full, nj, detail)


def checkpoint_layout(state: dict) -> PolicyLayout | None:
    """Dims read off the checkpoint's weights (``None`` when they are not those of a :class:`PPOModel`)."""
    model = state.get("model", {})
    try:
        last = max((k for k in model if k.startswith("actor.mu.") and k.endswith(".weight")),
                   key=lambda k: int(k.split(".")[2]))
        return PolicyLayout(int(model["obs_norm.mean"].shape[0]), int(model["critic_obs_norm.mean"].shape[0]),
                            int(model[last].shape[0]))
    except (KeyError, ValueError, AttributeError, IndexError):
        return None


def load_run(checkpoint: str | Path, config: str | Path | None = None, map_location: str = "cpu") -> LoadedRun:
    """Checkpoint + its run config; checks that the checkpoint's layout fits the env the config builds."""
    ckpt = Path(checkpoint).expanduser().resolve()
    try:
        state = load_checkpoint(ckpt, map_location=map_location)
    except CheckpointError as exc:
        raise EvalInputError(str(exc)) from None
    config_path = Path(config).expanduser().resolve() if config else ckpt.parent / "config.yaml"
    cfg = load_train_config(config_path)
    layout = config_layout(cfg)
    found = checkpoint_layout(state)
    if found is None:
        raise EvalInputError(f"{ckpt}: checkpoint holds no actor/critic weights with observation normalizers")
    if found.dims() != layout.dims():
        raise EvalInputError(f"{ckpt}: checkpoint layout [{found.describe()}] does not match the env of "
                             f"{config_path} [{layout.describe()}]")
    return LoadedRun(ckpt, config_path, cfg, state, layout)


def agent_config(run: LoadedRun) -> PPOAgentConfig:
    """The agent config saved in the checkpoint (the architecture of its weights), else the run config's."""
    saved = run.state.get("config")
    if not isinstance(saved, dict):
        return run.cfg.agent
    try:
        return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(PPOAgentConfig), saved))
    except Exception as exc:
        raise EvalInputError(f"{run.checkpoint}: unreadable agent config ({_one_line(exc)})") from None


def build_model(run: LoadedRun, device: str = "cpu") -> PPOModel:
    """The checkpoint's :class:`PPOModel` in eval mode on ``device`` (use :meth:`PPOModel.act_inference`)."""
    c = agent_config(run)
    lay = run.layout
    model = PPOModel(lay.obs_dim, lay.critic_obs_dim, lay.num_actions, c.actor, c.critic, obs_clip=c.obs_clip,
                     normalize_obs=c.normalize_obs, num_rows=log_std_rows(run.state["model"]))
    try:
        model.load_state_dict(run.state["model"])
    except RuntimeError as exc:
        raise EvalInputError(f"{run.checkpoint}: weights do not fit the saved agent config "
                             f"({_one_line(exc)})") from None
    return model.to(device).eval()


def eval_env_cfg(env_cfg, kinematic_replay: bool | None = None, randomization: str | None = None,
                 obs_noise: bool | None = None):
    """A copy of the trained env config for deterministic play from t = 0: episodes end only on unstable worlds
    (the env still flags every failure cause with the run's thresholds, and the evaluation reads those flags, so
    the failing state stays readable), no clip-end truncation and no time-out. Physics and observations are
    unchanged, rewards too but at the configured σ (no adaptive σ); domain randomization and observation noise are
    off unless ``randomization`` (``none`` | ``deploy``) / ``obs_noise`` ask for them (drawn from the run's seed:
    reproducible)."""
    from simppo.envs.imitation.config import (
        RANDOMIZATIONS,
        AdaptiveSigmaCfg,
        ResetNoiseCfg,
        RootAssistCfg,
        TerminationCurriculumCfg,
    )

    cfg = copy.deepcopy(env_cfg)
    name = randomization or "none"
    if name not in RANDOMIZATIONS:
        raise EvalInputError(f"randomization={name}: choose one of {', '.join(RANDOMIZATIONS)}")
    cfg.randomization = RANDOMIZATIONS[name]()
    cfg.obs_noise = bool(obs_noise)
    cfg.terminations.end_causes = ["unstable"]  # the env flags the others (fail_bits); the evaluation reads them
    # the global drift is judged by the evaluation's own rule (max_body_error_m, the same for every run)
    cfg.terminations.body_pos = math.inf
    # failures are flagged at the run's thresholds, not at a training curriculum's wider ones
    cfg.terminations.curriculum = TerminationCurriculumCfg(start_scale=1.0)
    cfg.assist = RootAssistCfg(start=0.0)  # a play is never held up
    cfg.reset_noise = ResetNoiseCfg(enabled=False)  # a play starts on the reference
    cfg.adaptive_sigma = AdaptiveSigmaCfg(terms=[])  # a training schedule of the reward; a play's metrics never read it
    cfg.truncate_at_clip_end = False
    cfg.max_episode_length_s = _EVAL_EPISODE_S
    if kinematic_replay is not None:
        cfg.kinematic_replay = kinematic_replay
    return cfg


def build_eval_env(cfg: TrainCfg, num_envs: int, device: str, motion_files: list[str] | None = None,
                   sim_name: str | None = None, kinematic_replay: bool | None = None,
                   randomization: str | None = None, obs_noise: bool | None = None):
    """The env of ``cfg`` (same robot, sim settings and observation layout) in evaluation mode
    (:func:`eval_env_cfg`), optionally on other motions, another simulator backend (``sim_name``: a policy
    trained on ``mjwarp`` plays on ``mujoco`` and vice versa, the sim-to-sim check) or with domain
    randomization / observation noise."""
    from simppo.envs import make_env
    from simppo.motion.config import MotionCfg

    motion_cfg = MotionCfg(files=list(motion_files)) if motion_files else cfg.motion
    sim_cfg = copy.deepcopy(cfg.sim)
    if sim_name:
        sim_cfg.name = sim_name
    try:
        env_cfg = eval_env_cfg(cfg.env, kinematic_replay, randomization, obs_noise)
        return make_env(env_cfg, num_envs, device=device, seed=cfg.seed, robot_cfg=cfg.robot, sim_cfg=sim_cfg,
                        motion_cfg=motion_cfg)
    except (FileNotFoundError, ValueError) as exc:
        raise EvalInputError(_one_line(exc)) from None


def make_eval_env(run: LoadedRun, num_envs: int, device: str, motion_files: list[str] | None = None,
                  sim_name: str | None = None, kinematic_replay: bool | None = None,
                  randomization: str | None = None, obs_noise: bool | None = None):
    """:func:`build_eval_env` for a loaded run, checking the env's layout against the checkpoint's."""
    env = build_eval_env(run.cfg, num_envs, device, motion_files, sim_name, kinematic_replay, randomization,
                         obs_noise)
    got = (env.actor_dim, env.full_dim, env.num_actions)
    if got != run.layout.dims():  # the spec and the env disagree only if the env changed under us
        raise EvalInputError(f"{run.checkpoint}: checkpoint layout [{run.layout.describe()}] does not match the "
                             f"env [obs {got[0]}, critic_obs {got[1]}, actions {got[2]}]")
    return env


def resolve_num_envs(num_envs: int | None, num_motions: int, device: str) -> int:
    if num_envs is not None:
        if num_envs < 1:
            raise EvalInputError(f"num_envs must be >= 1, got {num_envs}")
        return num_envs
    return max(1, min(num_motions, 64 if device == "cpu" else 4096))


def count_motions(run: LoadedRun, motion_files: list[str] | None = None) -> int:
    """Number of motions the eval env will load (the run's, or ``motion_files``), from shard headers only."""
    from simppo.motion.config import MotionCfg
    from simppo.motion.index import MotionIndex

    motion_cfg = MotionCfg(files=list(motion_files)) if motion_files else run.cfg.motion
    try:
        return MotionIndex.from_sources(motion_cfg.resolved_files()).num_motions
    except (FileNotFoundError, ValueError, OSError) as exc:
        raise EvalInputError(_one_line(exc)) from None


def torch_device(name: str) -> str:
    from simppo.utils.device import resolve_device

    dev = resolve_device(name)
    if dev.startswith("cuda") and not torch.cuda.is_available():
        raise EvalInputError(f"device={name}: CUDA is not available on this machine")
    return dev
