"""Typed configs of ``simppo-eval``, ``simppo-export`` and the viewers (every default lives here).

Both CLIs take Hydra-style ``key=value`` overrides composed against these schemas, registered in
Hydra's ConfigStore as ``eval_schema`` / ``export_schema`` (:func:`register_eval_configs`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

VIEWERS = ("none", "native", "web", "video")


@dataclass
class EvalMotionCfg:
    files: list[str] | None = None  # None → the run's own motions (config.yaml); else packs / shard files


@dataclass
class VideoCfg:
    width: int = 640
    height: int = 480
    fps: float = 25.0  # frames rendered per second of motion (every round(1 / (fps * dt))-th control step)
    seconds: float | None = None  # None → each clip's length
    motions: list[str] | None = None  # motion names to record; None → every motion of the set
    max_motions: int = 8  # cap when ``motions`` is None
    contact_sheet_frames: int = 8  # thumbnails in the PNG contact sheet (one sheet per video)
    contact_sheet_columns: int = 4
    shadows: bool = False  # software GL renders ~3x faster without shadows and reflections
    distance: float = 3.2  # tracking camera (follows the root body)
    elevation: float = -15.0
    azimuth: float = 135.0


@dataclass
class WebCfg:
    host: str = "127.0.0.1"  # 0.0.0.0 exposes the viewer on every interface; prefer `ssh -L PORT:localhost:PORT`
    port: int = 8080
    speed: float = 1.0  # playback speed (1 = real time)
    environment_map: bool = False  # image-based lighting: nicer, but ~10x slower in software WebGL


@dataclass
class EvalCfg:
    checkpoint: str = MISSING  # a .ckpt written by simppo-train
    config: str | None = None  # the run's config.yaml; default: next to the checkpoint
    motion: EvalMotionCfg = field(default_factory=EvalMotionCfg)
    num_envs: int | None = None  # None → min(number of motions, 64 on CPU / 4096 on CUDA)
    device: str = "auto"
    # simulator backend override (auto | mjwarp | mujoco | mjx); None → the run's (sim-to-sim check)
    sim: str | None = None
    randomization: str = "none"  # none | deploy: domain randomization during the play (sim-to-real check)
    obs_noise: bool = False  # uniform noise on the policy's observations (the spec's scales)
    # plays of each motion from t = 0, each drawing its own randomization and noise (needs randomization=deploy
    # or obs_noise=true: clean plays are alike); the success rate counts plays
    plays: int = 1
    viewer: str = "none"  # none | native | web | video
    metrics: bool | None = None  # None → on for viewer=none|video, off for the interactive viewers
    out: str | None = None  # output folder; default <run_dir>/eval/<timestamp>
    force: bool = False  # replace the evaluation in an existing, non-empty out (the whole set, never a mix)
    # keep the finished rounds of an interrupted evaluation in .<out>.partial beside out (needs out=) and continue
    # from them when run again with the same command
    resume: bool = False
    worst: int = 10  # rows of the worst-motions table
    kinematic_replay: bool = False  # replay the reference instead of the policy (checks the metrics: MPJPE ≈ 0)
    plot: bool = True  # also write learning curves from the run's metrics.csv when present
    video: VideoCfg = field(default_factory=VideoCfg)
    web: WebCfg = field(default_factory=WebCfg)


@dataclass
class ExportCfg:
    checkpoint: str = MISSING
    out: str = MISSING  # folder for policy.onnx and policy.json
    config: str | None = None  # default: config.yaml next to the checkpoint
    opset: int = 18
    force: bool = False  # replace existing policy.onnx / policy.json


def register_eval_configs() -> None:
    cs = ConfigStore.instance()
    cs.store(name="eval_schema", node=EvalCfg)
    cs.store(name="export_schema", node=ExportCfg)
