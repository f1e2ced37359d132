"""Metric loggers: wandb (offline unless an API key is present) or none."""

import os
from dataclasses import dataclass


@dataclass
class WandbCfg:
    project: str = "simppo"
    entity: str | None = None
    mode: str | None = None  # online | offline | disabled; None → online with an API key, else offline
    group: str | None = None
    tags: list[str] | None = None


class NullLogger:
    def log(self, metrics: dict[str, float], step: int) -> None:
        pass

    def finish(self) -> None:
        pass


class WandbLogger(NullLogger):
    def __init__(self, cfg: WandbCfg, run_dir: str, name: str, config: dict):
        import wandb

        mode = cfg.mode
        if mode is None:
            mode = "online" if os.environ.get("WANDB_API_KEY") else "offline"
        self._run = wandb.init(
            project=cfg.project, entity=cfg.entity, mode=mode, group=cfg.group, tags=cfg.tags,
            name=name, dir=run_dir, config=config, reinit="finish_previous",
        )

    def log(self, metrics: dict[str, float], step: int) -> None:
        self._run.log(metrics, step=step)

    def finish(self) -> None:
        self._run.finish()


def make_logger(kind: str, cfg: WandbCfg, run_dir: str, name: str, config: dict):
    if kind == "none":
        return NullLogger()
    if kind == "wandb":
        return WandbLogger(cfg, run_dir, name, config)
    raise ValueError(f"unknown logger '{kind}' (choose wandb or none)")
