"""``simppo-train``: Hydra entry point that builds the env and the PPO agent and trains.

Bad input (a corrupt or foreign checkpoint, unreadable motion files, resume without a checkpoint) is one
line on stderr, ``simppo-train: error: <file>: <what>``, and exit status 2 (no traceback).
"""

import os
import sys
import time
from pathlib import Path

if not os.environ.get("DISPLAY"):  # headless video clips (video_every); must precede the first mujoco import
    os.environ.setdefault("MUJOCO_GL", "egl")

import hydra  # noqa: E402
import torch  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

from simppo.config import TrainCfg, register_configs  # noqa: E402
from simppo.paths import CONFIG_DIR  # noqa: E402

CPU_DEFAULT_NUM_ENVS = 64  # MJWarp runs its kernels on one CPU core: small batches keep iterations short
GPU_DEFAULT_NUM_ENVS = 4096


def fail(message: str) -> None:
    """Print ``simppo-train: error: <message>`` (one line) and exit with status 2."""
    print(f"simppo-train: error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(2)


def resolve_run_dir(cfg: TrainCfg) -> Path:
    """``run_dir`` if given; on ``resume`` the newest run of the experiment; else a new timestamped dir."""
    if cfg.run_dir:
        return Path(cfg.run_dir).expanduser().resolve()
    base = Path.cwd() / "runs" / cfg.experiment_name
    if cfg.resume:
        runs = sorted(p for p in base.glob("*") if (p / "last.ckpt").is_file())
        if not runs:
            fail(f"resume=true but no run with last.ckpt under {base}")
        return runs[-1]
    return base / time.strftime("%Y%m%d-%H%M%S")


def robot_source(cfg: TrainCfg) -> str:
    """The yaml file of the selected ``robot`` group option (named in robot config errors)."""
    from hydra.core.hydra_config import HydraConfig

    choice = cfg.robot.name
    if HydraConfig.initialized():
        choice = HydraConfig.get().runtime.choices.get("robot") or choice
    return str(CONFIG_DIR / "robot" / f"{choice}.yaml")


def run(cfg_node) -> None:
    from simppo.agent.checkpoint import CheckpointError
    from simppo.agent.exploration import ExplorationConfigError
    from simppo.agent.ppo import PPO
    from simppo.agent.runner import Runner, StopOnSignal
    from simppo.envs import make_env
    from simppo.motion.format import ShardFormatError
    from simppo.utils.device import enable_tf32, fabric_for, init_warp, resolve_device
    from simppo.utils.files import atomic_write_text
    from simppo.utils.logger import make_logger

    cfg: TrainCfg = OmegaConf.to_object(cfg_node)
    if not cfg.robot.source:
        cfg.robot.source = robot_source(cfg)
    try:
        device = resolve_device(cfg.device)
    except ValueError as exc:
        fail(str(exc))
    if device.startswith("cuda") and not torch.cuda.is_available():
        fail(f"device={cfg.device}: CUDA is not available on this machine")
    if cfg.num_envs is None:
        cfg.num_envs = CPU_DEFAULT_NUM_ENVS if device == "cpu" else GPU_DEFAULT_NUM_ENVS
    init_warp()
    torch.manual_seed(cfg.seed)
    run_dir = resolve_run_dir(cfg)
    resume_path = run_dir / "last.ckpt"
    if cfg.resume and not resume_path.is_file():
        fail(f"resume=true but {resume_path} does not exist")
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(run_dir / "config.yaml", OmegaConf.to_yaml(cfg_node, resolve=True))

    fabric = fabric_for(device)
    device = resolve_device(fabric.device)  # the env, the policy and the motions share one device
    enable_tf32(device)
    print("simppo-train: compiling kernels (first run on this machine; later runs load them from Warp's cache) ...",
          flush=True)
    t0 = time.perf_counter()
    try:
        env = make_env(cfg.env, cfg.num_envs, device=device, seed=cfg.seed, robot_cfg=cfg.robot, sim_cfg=cfg.sim,
                       motion_cfg=cfg.motion)
    except ShardFormatError as exc:
        fail(str(exc))
    sim = getattr(env, "sim", None)
    if sim is not None:
        sim.warm_up()  # compiles the physics kernels and captures the CUDA graphs before the first step
    print(f"simppo-train: kernels ready in {time.perf_counter() - t0:.1f} s", flush=True)
    logger = make_logger(cfg.logger, cfg.wandb, str(run_dir), run_dir.name,
                         OmegaConf.to_container(cfg_node, resolve=True))
    try:
        agent = PPO(fabric, env, cfg.agent, root_dir=run_dir)
    except ExplorationConfigError as exc:
        fail(str(exc))
    agent.setup()
    hooks = []
    if cfg.video_every > 0:
        from simppo.eval.training_video import TrainingVideo

        hooks.append((cfg.video_every, TrainingVideo(cfg, run_dir, device, log_to_wandb=cfg.logger == "wandb")))
    evaluator = None
    if cfg.eval_every > 0 and getattr(env, "motion_lib", None) is not None:
        from simppo.eval.periodic import PeriodicEvaluator

        evaluator = PeriodicEvaluator(cfg, device)
    runner = Runner(agent, run_dir, max_epochs=cfg.max_epochs, logger=logger, progress_bar=cfg.progress_bar,
                    epoch_hooks=hooks, evaluator=evaluator, eval_every=cfg.eval_every, log_every=cfg.log_every)
    try:
        if cfg.resume:
            runner.resume()
        elif cfg.checkpoint:
            runner.load(cfg.checkpoint, load_training_state=False)
    except CheckpointError as exc:
        fail(str(exc))
    with StopOnSignal(runner):
        print(f"simppo-train: {type(env).__name__} num_envs={cfg.num_envs} device={device} run_dir={run_dir}",
              flush=True)
        runner.train()
    logger.finish()
    env.close()
    print(f"simppo-train: done at epoch {agent.epoch}; checkpoints in {run_dir}", flush=True)


@hydra.main(version_base=None, config_path=str(CONFIG_DIR), config_name="train")
def _hydra_main(cfg_node) -> None:
    run(cfg_node)


def main() -> None:
    register_configs()
    _hydra_main()


if __name__ == "__main__":
    main()
