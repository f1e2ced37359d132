"""Top-level typed config of ``simppo-train``, registered with Hydra's ConfigStore.

YAML files under ``configs/`` extend these schemas; unknown keys are errors (struct mode).
"""

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from simppo.agent.config import PPOAgentConfig
from simppo.envs.imitation.config import RANDOMIZATIONS, HumanoidImitationEnvCfg
from simppo.envs.pendulum.env import PendulumEnvCfg
from simppo.motion.config import MotionCfg
from simppo.robot.config import RobotCfg
from simppo.sim.config import SimCfg
from simppo.utils.logger import WandbCfg


@dataclass
class TrainCfg:
    env: Any = None  # one of the registered env schemas (group `env`)
    agent: PPOAgentConfig = field(default_factory=PPOAgentConfig)
    sim: SimCfg = field(default_factory=SimCfg)
    robot: RobotCfg = MISSING  # group `robot` (configs/robot/<name>.yaml)
    motion: MotionCfg = field(default_factory=MotionCfg)
    num_envs: int | None = None  # None → 256 on CPU, 4096 on CUDA
    seed: int = 0  # rank r of a multi-process run uses seed + r
    device: str = "auto"  # auto → cuda:<local rank> if available else cpu
    # distributed (DDP on Lightning Fabric): processes per node × nodes; num_envs is per process (rank)
    devices: int = 1
    num_nodes: int = 1
    dist_timeout_s: float = 1800.0  # a rank waiting longer than this in a collective (a lost peer) fails
    max_epochs: int = 1000
    experiment_name: str = "default"
    run_dir: str | None = None  # exact output folder; default runs/<experiment_name>/<timestamp>
    resume: bool = False  # continue from <run_dir>/last.ckpt (or the newest run of experiment_name)
    checkpoint: str | None = None  # weights-only warm start from this file; with resume=true: resume from it
    force: bool = False  # run_dir holds a run: start over, moving its files aside to run_dir/replaced_<time>/
    logger: str = "wandb"  # wandb | none
    wandb: WandbCfg = field(default_factory=WandbCfg)
    progress_bar: bool = True
    video_every: int = 0  # >0: every K epochs record a short clip of the first motion (run_dir/videos, wandb)
    eval_every: int = 25  # >0: every K epochs play every motion from t = 0 (eval/* metrics, score_based.ckpt)
    log_every: int = 10  # progress_bar=false: a plain progress line every K epochs


def register_configs() -> None:
    cs = ConfigStore.instance()
    cs.store(name="train_schema", node=TrainCfg)
    cs.store(group="env", name="pendulum_schema", node=PendulumEnvCfg)
    cs.store(group="env", name="humanoid_imitation_schema", node=HumanoidImitationEnvCfg)
    for name, node in RANDOMIZATIONS.items():  # env/randomization=none|deploy
        cs.store(group="env/randomization", name=name, node=node)
    cs.store(group="agent", name="ppo_schema", node=PPOAgentConfig)
    cs.store(group="sim", name="sim_schema", node=SimCfg)
