"""``simppo-train``: Hydra entry point that builds the env and the PPO agent and trains."""

import os
import signal
import sys
import time
from pathlib import Path

import hydra
import torch
from omegaconf import OmegaConf

from simppo.config import TrainCfg, register_configs
from simppo.paths import CONFIG_DIR

CPU_DEFAULT_NUM_ENVS = 64  # MJWarp runs its kernels on one CPU core: small batches keep iterations short
GPU_DEFAULT_NUM_ENVS = 4096


def resolve_run_dir(cfg: TrainCfg) -> Path:
    """``run_dir`` if given; on ``resume`` the newest run of the experiment; else a new timestamped dir."""
    if cfg.run_dir:
        return Path(cfg.run_dir).expanduser().resolve()
    base = Path.cwd() / "runs" / cfg.experiment_name
    if cfg.resume:
        runs = sorted(p for p in base.glob("*") if (p / "last.ckpt").is_file())
        if not runs:
            raise SystemExit(f"simppo-train: error: resume=true but no run with last.ckpt under {base}")
        return runs[-1]
    return base / time.strftime("%Y%m%d-%H%M%S")


def write_config(cfg_node, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(OmegaConf.to_yaml(cfg_node, resolve=True))
    os.replace(tmp, path)


class StopOnSignal:
    """First SIGINT/SIGTERM: finish the iteration, save ``last.ckpt``, exit 0. Second: exit at once."""

    def __init__(self, agent):
        self.agent = agent
        self.count = 0
        self._previous = {}

    def __enter__(self):
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame):
        self.count += 1
        if self.count > 1:
            os._exit(128 + signum)
        print(f"\nsimppo-train: got signal {signum}; finishing this iteration and saving last.ckpt "
              "(send again to exit at once)", file=sys.stderr, flush=True)
        self.agent.request_stop()

    def __exit__(self, *exc):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def run(cfg_node) -> None:
    from lightning_fabric import Fabric

    from simppo.agent.checkpoint import CheckpointError
    from simppo.agent.ppo import PPO
    from simppo.envs import make_env
    from simppo.utils.device import init_warp, resolve_device
    from simppo.utils.logger import make_logger

    cfg: TrainCfg = OmegaConf.to_object(cfg_node)
    device = resolve_device(cfg.device)
    if cfg.num_envs is None:
        cfg.num_envs = CPU_DEFAULT_NUM_ENVS if device == "cpu" else GPU_DEFAULT_NUM_ENVS
    init_warp()
    torch.manual_seed(cfg.seed)
    run_dir = resolve_run_dir(cfg)
    resume_path = run_dir / "last.ckpt"
    if cfg.resume and not resume_path.is_file():
        raise SystemExit(f"simppo-train: error: resume=true but {resume_path} does not exist")
    run_dir.mkdir(parents=True, exist_ok=True)
    write_config(cfg_node, run_dir / "config.yaml")

    fabric = Fabric(accelerator="cuda" if device.startswith("cuda") else "cpu", devices=1, precision="32-true")
    env = make_env(cfg.env, cfg.num_envs, device=device, seed=cfg.seed, train_cfg=cfg)
    logger = make_logger(cfg.logger, cfg.wandb, str(run_dir), run_dir.name,
                         OmegaConf.to_container(cfg_node, resolve=True))
    agent = PPO(fabric, env, cfg.agent, root_dir=run_dir, max_epochs=cfg.max_epochs, logger=logger,
                progress_bar=cfg.progress_bar)
    agent.setup()
    try:
        if cfg.resume:
            agent.load(resume_path, load_training_state=True)
        elif cfg.checkpoint:
            agent.load(cfg.checkpoint, load_training_state=False)
    except CheckpointError as exc:
        raise SystemExit(f"simppo-train: error: {exc}") from None
    with StopOnSignal(agent):
        print(f"simppo-train: {type(env).__name__} num_envs={cfg.num_envs} device={device} run_dir={run_dir}",
              flush=True)
        agent.train()
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
