"""``simppo-train``: Hydra entry point that builds the env and the PPO agent and trains.

Bad input (an unknown key or a value of the wrong type, a corrupt or foreign checkpoint, unreadable motion
files, resume without a checkpoint) is one line on stderr, ``simppo-train: error: <file>: <what>``, and exit
status 2 (no traceback). Everything is checked before anything is written: a failed start leaves the run folder
as it was. A folder that already holds a run is continued only with ``resume=true`` and replaced only with
``force=true`` (its files are moved aside to ``replaced_<time>/`` inside it). Training that diverges (a loss or a
parameter NaN or inf) stops with exit status 1 before writing a checkpoint.

Several processes (``devices=N num_nodes=M``, or ``torchrun`` / SLURM ``srun`` with the same two keys): DDP on
Lightning Fabric. ``fabric.launch()`` starts the other local ranks (or joins the external launch); each rank
builds its own env with ``num_envs`` envs on its own device with seed ``seed + global rank``; global rank 0
picks the run folder and alone writes ``config.yaml``, the logs and the checkpoints. An error found on any
rank at start-up (config, checkpoint) is the same line on every rank; a rank lost during training stops the
others with ``simppo-train: error: rank R/W: lost contact with another rank ...`` and exit status 1, within
``dist_timeout_s``.
"""

import math
import os
import sys
import time
from pathlib import Path
from typing import NoReturn

if not os.environ.get("DISPLAY"):  # headless video clips (video_every); must precede the first mujoco import
    os.environ.setdefault("MUJOCO_GL", "egl")

import hydra  # noqa: E402
import torch  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

from simppo.cli import errors  # noqa: E402
from simppo.cli.errors import UsageError  # noqa: E402
from simppo.config import TrainCfg, register_configs  # noqa: E402
from simppo.motion.config import CHUNK_MODES  # noqa: E402
from simppo.paths import CONFIG_DIR  # noqa: E402

CPU_DEFAULT_NUM_ENVS = 256  # sim=auto → MuJoCo C threads: ~1,000 training steps/s on 2 cores
GPU_DEFAULT_NUM_ENVS = 4096


def default_num_envs(device: str) -> int:
    """``num_envs`` when the config leaves it unset (``null``): per device kind."""
    return CPU_DEFAULT_NUM_ENVS if device == "cpu" else GPU_DEFAULT_NUM_ENVS


def compose_training(overrides: list[str], device: str) -> TrainCfg:
    """The ``train`` config composed with ``overrides`` and ``device=<device>``, ``num_envs`` resolved per device
    kind when unset; nothing built."""
    from hydra import compose, initialize_config_dir

    register_configs()
    with initialize_config_dir(version_base=None, config_dir=str(CONFIG_DIR)):
        node = compose("train", overrides=[*overrides, f"device={device}"])
    cfg = OmegaConf.to_object(node)
    if cfg.num_envs is None:
        cfg.num_envs = default_num_envs(device)
    return cfg


def build_training(overrides: list[str], device: str):
    """``(cfg, env, agent)`` as ``simppo-train`` builds them, in this process and without a run folder: the config
    of :func:`compose_training`, the torch seed set, the env made and the PPO agent set up (for benchmarks and the
    slow learning checks)."""
    from simppo.agent.ppo import PPO
    from simppo.envs import make_env
    from simppo.utils.device import fabric_for

    cfg = compose_training(overrides, device)
    torch.manual_seed(cfg.seed)
    env = make_env(cfg.env, cfg.num_envs, device=device, seed=cfg.seed, robot_cfg=cfg.robot, sim_cfg=cfg.sim,
                   motion_cfg=cfg.motion)
    agent = PPO(fabric_for(device), env, cfg.agent)
    agent.setup()
    return cfg, env, agent


def fail(message: str, code: int = 2) -> NoReturn:
    """``simppo-train: error: <message>`` (one line) and exit with status ``code`` (2: bad input)."""
    errors.fail("simppo-train", message, code)


RUN_FILES = ("config.yaml", "last.ckpt", "score_based.ckpt", "metrics.csv", "exploration.json")


def run_files(run_dir: Path) -> list[Path]:
    """The files of a training run in ``run_dir`` (config, checkpoints, metrics, sidecars, videos)."""
    if not run_dir.is_dir():
        return []
    found = [run_dir / n for n in RUN_FILES if (run_dir / n).exists()]
    found += sorted(run_dir.glob("epoch_*.ckpt")) + sorted(run_dir.glob("config.until_epoch_*.yaml"))
    found += [p for p in (run_dir / "videos", run_dir / "wandb", run_dir / "eval") if p.exists()]
    return found


def assist_notice(cfg: TrainCfg) -> str | None:
    """A one-line notice when the env's root assist (``env.assist``) fades out later than the run stops: the policy
    it ends with still leans on the harness the evaluation never gives; or when it fades per motion (by survival or
    success) while drift ends no episode (a robot left behind would count as tracking); ``None`` otherwise."""
    assist = getattr(cfg.env, "assist", None)
    if assist is None or not assist.enabled:
        return None
    if assist.per_motion and not math.isfinite(cfg.env.terminations.body_pos):
        return (f"simppo-train: note: env.assist.fade={assist.fade} with env.terminations.body_pos=inf: a robot left "
                "behind by the reference ends no episode, so its motion loses the harness as if it tracked; set "
                "env.terminations.body_pos (e.g. 0.5)")
    steps = cfg.max_epochs * cfg.agent.num_steps
    if steps > assist.anneal_steps:
        return None
    return (f"simppo-train: note: env.assist fades out over {assist.anneal_steps} control steps (at the earliest, "
            f"with a per-motion fade) and this run stops "
            f"after {steps} (max_epochs x agent.num_steps): its policy will still lean on the harness; raise "
            f"max_epochs, shorten env.assist.anneal_steps or set env.assist.start=0")


def check_values(cfg: TrainCfg) -> None:
    """Raise :class:`UsageError` for a value no run can use (the types are Hydra's; this checks ranges)."""
    a = cfg.agent
    rules = [
        ("num_envs", cfg.num_envs, cfg.num_envs is None or cfg.num_envs >= 1, "at least 1 (or null: per device)"),
        ("max_epochs", cfg.max_epochs, cfg.max_epochs >= 1, "at least 1"),
        ("eval_every", cfg.eval_every, cfg.eval_every >= 0, "0 (off) or more"),
        ("video_every", cfg.video_every, cfg.video_every >= 0, "0 (off) or more"),
        ("log_every", cfg.log_every, cfg.log_every >= 0, "0 (off) or more"),
        ("dist_timeout_s", cfg.dist_timeout_s, cfg.dist_timeout_s > 0, "more than 0"),
        ("agent.num_steps", a.num_steps, a.num_steps >= 1, "at least 1"),
        ("agent.num_mini_epochs", a.num_mini_epochs, a.num_mini_epochs >= 1, "at least 1"),
        ("agent.num_minibatches", a.num_minibatches, a.num_minibatches >= 1, "at least 1"),
        ("agent.gamma", a.gamma, 0.0 <= a.gamma <= 1.0, "in [0, 1]"),
        ("agent.tau", a.tau, 0.0 <= a.tau <= 1.0, "in [0, 1]"),
        ("agent.actor_lr", a.actor_lr, 0.0 < a.actor_lr < 1.0, "in (0, 1)"),
        ("agent.critic_lr", a.critic_lr, 0.0 < a.critic_lr < 1.0, "in (0, 1)"),
        ("agent.save_last_every", a.save_last_every, a.save_last_every >= 1, "at least 1"),
        ("agent.save_epoch_every", a.save_epoch_every, a.save_epoch_every >= 0, "0 (off) or more"),
    ]
    for key, value, ok, expected in rules:
        if not ok:
            raise UsageError(f"{key}={value}: must be {expected}")
    if cfg.motion.chunk not in CHUNK_MODES:
        raise UsageError(f"motion.chunk={cfg.motion.chunk}: choose from {list(CHUNK_MODES)}")
    if getattr(cfg.env, "action_reference", None) is not None:
        from simppo.envs.imitation.config import action_reference_problem

        problem = action_reference_problem(cfg.env)
        if problem:
            raise UsageError(problem)
    terminations = getattr(cfg.env, "terminations", None)
    if terminations is not None:
        from simppo.kernels.imitation.spec import cause_mask

        try:
            cause_mask(terminations.end_causes)
        except ValueError as exc:
            raise UsageError(f"env.terminations.end_causes={list(terminations.end_causes)}: {exc}") from None
    if cfg.resume and cfg.force:
        raise UsageError("resume=true and force=true: continue the run, or start it over, not both")


def _saved_env_config(saved_config: Path) -> dict | None:
    """The ``env`` mapping of a run's saved ``config.yaml``; None when it is missing or unreadable (the
    checkpoint's own checks name what is wrong with the run)."""
    if not saved_config.is_file():
        return None
    import yaml

    try:
        env = (yaml.safe_load(saved_config.read_text()) or {}).get("env") or {}
    except (OSError, yaml.YAMLError, AttributeError):
        return None
    return env if isinstance(env, dict) else None


def check_same_action_map(saved_config: Path, cfg: TrainCfg) -> None:
    """Refuse to resume a run trained with another action map than ``cfg``'s (runs saved before
    ``env.action_reference`` existed used the default-pose map, 0; before ``env.action_reference_lead``, 1; before
    ``env.action_reference_velocity``, 0)."""
    saved = _saved_env_config(saved_config)
    if saved is None or getattr(cfg.env, "action_reference", None) is None:
        return
    for key, before in (("action_reference", 0.0), ("action_reference_lead", 1), ("action_reference_velocity", 0.0)):
        was, now = float(saved.get(key, before)), float(getattr(cfg.env, key, before))
        if was != now:
            raise UsageError(f"{saved_config}: the run was trained with env.{key}={was:g}; resume it with "
                             f"env.{key}={was:g} (the policy's actions mean other joint targets otherwise)")


def check_same_adaptive_sigma(saved_config: Path, cfg: TrainCfg) -> None:
    """Refuse to resume a run whose adaptive σ differs from ``cfg``'s (runs saved before ``env.adaptive_sigma``
    existed had none: ``terms=[]``; before ``start_steps``, 0): its env state and rewards follow the setting it was
    trained with."""
    now_cfg, saved_env = getattr(cfg.env, "adaptive_sigma", None), _saved_env_config(saved_config)
    if saved_env is None or now_cfg is None:
        return
    saved = saved_env.get("adaptive_sigma") or {}
    if not saved.get("terms") and not now_cfg.terms:
        return  # off in both: the other keys do nothing
    for key, before in (("terms", []), ("per_motion", False), ("start_steps", 0)):
        was, now = saved.get(key, before), getattr(now_cfg, key)
        if key == "terms":  # a YAML list against the config's (ListConfig or list)
            was, now = list(was), list(now)
        if was != now:
            shown = f"[{','.join(was)}]" if key == "terms" else str(was).lower()
            raise UsageError(f"{saved_config}: the run was trained with env.adaptive_sigma.{key}={shown}; resume it "
                             f"with env.adaptive_sigma.{key}={shown} (its reward σ and env state follow that setting)")


def check_run_dir(run_dir: Path, cfg: TrainCfg) -> None:
    """Raise :class:`UsageError` unless the run can start in ``run_dir`` as asked; writes nothing."""
    if run_dir.exists() and not run_dir.is_dir():
        raise UsageError(f"run_dir={run_dir}: exists and is not a directory")
    if cfg.resume:
        source = Path(cfg.checkpoint).expanduser() if cfg.checkpoint else run_dir / "last.ckpt"
        if not source.is_file():
            raise UsageError(f"resume=true but {source} does not exist")
        check_same_action_map(run_dir / "config.yaml", cfg)
        check_same_adaptive_sigma(run_dir / "config.yaml", cfg)
        return
    existing = run_files(run_dir)
    if existing and not cfg.force:
        names = ", ".join(p.name for p in existing[:3]) + (" ..." if len(existing) > 3 else "")
        raise UsageError(f"run_dir={run_dir} already holds a run ({names}); continue it with resume=true, pick "
                         "another run_dir, or pass force=true to start over (its files are moved to "
                         "replaced_<time>/ inside it)")


def _trained_with(cfg_yaml: str) -> dict:
    """A run config without the keys that say how the run was started (not what it trains)."""
    import yaml

    try:
        cfg = yaml.safe_load(cfg_yaml)
    except yaml.YAMLError:
        return {"unreadable": cfg_yaml}
    if not isinstance(cfg, dict):
        return {"unreadable": cfg_yaml}
    return {k: v for k, v in cfg.items() if k not in ("resume", "checkpoint", "force")}


def start_run_dir(run_dir: Path, cfg_yaml: str, force: bool, resumed_epoch: int | None = None) -> Path | None:
    """Once the run is sure to start: with ``force`` move an old run's files aside (returned), then write
    ``config.yaml`` (atomically). A run resumed (``resumed_epoch``) under other settings keeps the config its
    epochs so far were trained with as ``config.until_epoch_<N>.yaml``."""
    from simppo.utils.files import atomic_write_text

    moved = None
    existing = run_files(run_dir)
    if force and existing:
        moved = run_dir / time.strftime("replaced_%Y%m%d-%H%M%S")
        suffix = 0
        while moved.exists():
            suffix += 1
            moved = moved.with_name(f"{moved.name.split('.')[0]}.{suffix}")
        moved.mkdir()
        for p in existing:
            os.replace(p, moved / p.name)
    run_dir.mkdir(parents=True, exist_ok=True)
    config = run_dir / "config.yaml"
    if resumed_epoch is not None and config.is_file() and _trained_with(config.read_text()) != _trained_with(cfg_yaml):
        kept = run_dir / f"config.until_epoch_{resumed_epoch}.yaml"
        if not kept.exists():  # a second resume from the same epoch: that epoch's first config stays
            os.replace(config, kept)
    atomic_write_text(config, cfg_yaml)
    return moved


def resolve_run_dir(cfg: TrainCfg) -> Path:
    """``run_dir`` if given; on ``resume`` the newest run of the experiment; else a new timestamped dir.
    Raises :class:`UsageError` for ``resume=true`` without a run."""
    if cfg.run_dir:
        return Path(cfg.run_dir).expanduser().resolve()
    base = Path.cwd() / "runs" / cfg.experiment_name
    if cfg.resume:
        runs = sorted(p for p in base.glob("*") if (p / "last.ckpt").is_file())
        if not runs:
            raise UsageError(f"resume=true but no run with last.ckpt under {base}")
        return runs[-1]
    return base / time.strftime("%Y%m%d-%H%M%S")


def robot_source(cfg: TrainCfg) -> str:
    """The yaml file of the selected ``robot`` group option (named in robot config errors)."""
    from hydra.core.hydra_config import HydraConfig

    choice = cfg.robot.name
    if HydraConfig.initialized():
        choice = HydraConfig.get().runtime.choices.get("robot") or choice
    return str(CONFIG_DIR / "robot" / f"{choice}.yaml")


def check_launch(cfg: TrainCfg) -> None:
    """Raise :class:`UsageError` for ``devices`` / ``num_nodes`` / ``device`` values that cannot work, or that
    disagree with an external launch (torchrun's ``WORLD_SIZE``, the tasks of a SLURM ``srun`` step)."""
    if cfg.devices < 1 or cfg.num_nodes < 1:
        raise UsageError(f"devices={cfg.devices} num_nodes={cfg.num_nodes}: both must be at least 1")
    world = cfg.devices * cfg.num_nodes
    if world > 1 and cfg.device not in ("auto", "cpu", "cuda"):
        raise UsageError(f"device={cfg.device} with devices={cfg.devices} num_nodes={cfg.num_nodes}: each rank uses "
                         "cuda:<local rank>; pass device=cuda (or auto, or cpu) and pick the GPUs with "
                         "CUDA_VISIBLE_DEVICES")
    for var, what in (("WORLD_SIZE", "processes (WORLD_SIZE)"), ("SLURM_NTASKS", "SLURM tasks (SLURM_NTASKS)")):
        value = os.environ.get(var)
        if var == "SLURM_NTASKS" and "SLURM_PROCID" not in os.environ:
            continue  # an allocation, not an srun step: Fabric does not treat it as a launch
        if value and value.isdigit() and int(value) > 1 and int(value) != world:
            raise UsageError(f"launched as {value} {what} but devices={cfg.devices} x num_nodes={cfg.num_nodes} = "
                             f"{world}; pass devices=<processes per node> num_nodes=<nodes>")


def is_lost_rank_error(exc: BaseException) -> bool:
    """Whether ``exc`` is a collective that failed because a peer died or timed out (gloo / NCCL)."""
    import torch.distributed as dist

    if isinstance(exc, getattr(dist, "DistError", ())):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and any(k in text for k in (
        "gloo", "NCCL", "nccl", "Connection reset", "Connection closed", "Timed out", "timed out", "ProcessGroup"))


def run(cfg_node) -> None:
    from simppo.agent.checkpoint import CheckpointError
    from simppo.agent.distributed import DistributedConfigError, broadcast_object, close_process_group
    from simppo.agent.exploration import ExplorationConfigError
    from simppo.agent.ppo import PPO
    from simppo.agent.runner import StopOnSignal, TrainingDivergedError
    from simppo.envs import make_env
    from simppo.motion.format import ShardFormatError
    from simppo.utils.device import enable_tf32, fabric_for, init_warp, resolve_device
    from simppo.utils.logger import NullLogger, make_logger

    try:
        cfg: TrainCfg = OmegaConf.to_object(cfg_node)  # runs every config dataclass's own checks
        if not cfg.robot.source:
            cfg.robot.source = robot_source(cfg)
        check_values(cfg)
        check_launch(cfg)
        device = resolve_device(cfg.device)
    except ValueError as exc:
        fail(str(exc))
    if device.startswith("cuda") and not torch.cuda.is_available():
        fail(f"device={cfg.device}: CUDA is not available on this machine")
    world = cfg.devices * cfg.num_nodes
    if world > 1 and device == "cpu" and cfg.sim.threads is None:
        cfg.sim.threads = max(1, (os.cpu_count() or 1) // cfg.devices)  # the ranks of a node share its cores
    fabric = fabric_for(device, devices=cfg.devices, num_nodes=cfg.num_nodes, timeout_s=cfg.dist_timeout_s)
    if world > 1:
        fabric.launch()  # starts the other local ranks (or joins torchrun / SLURM) and the process group
    rank, zero = fabric.global_rank, fabric.is_global_zero
    device = resolve_device(fabric.device)  # the env, the policy and the motions share one device per rank
    say = print if zero else (lambda *args, **kwargs: None)
    if cfg.num_envs is None:
        cfg.num_envs = default_num_envs(device)
    init_warp()
    seed = cfg.seed + rank  # every rank its own random streams (env resets, action noise)
    torch.manual_seed(seed)
    plan = None  # rank 0 picks the run folder (a timestamp, or the newest run on resume); every rank uses it
    if zero:
        try:
            run_dir = resolve_run_dir(cfg)
            check_run_dir(run_dir, cfg)
            plan = (str(run_dir), None)
        except (UsageError, OSError) as exc:
            plan = (None, str(exc))
    if world > 1:
        plan = broadcast_object(plan, src=0)
    if plan[1] is not None:
        fail(plan[1])
    run_dir = Path(plan[0])

    enable_tf32(device)
    say("simppo-train: compiling kernels (first run on this machine; later runs load them from Warp's cache) ...",
        flush=True)
    t0 = time.perf_counter()
    try:
        env = make_env(cfg.env, cfg.num_envs, device=device, seed=seed, robot_cfg=cfg.robot, sim_cfg=cfg.sim,
                       motion_cfg=cfg.motion)
    except ShardFormatError as exc:
        fail(str(exc))
    sim = getattr(env, "sim", None)
    if sim is not None:
        sim.warm_up()  # compiles the physics kernels and captures the CUDA graphs before the first step
    say(f"simppo-train: kernels ready in {time.perf_counter() - t0:.1f} s", flush=True)
    motion_lib = getattr(env, "motion_lib", None)
    if motion_lib is not None:
        say(f"simppo-train: {motion_lib.describe()}", flush=True)
    try:
        agent = PPO(fabric, env, cfg.agent, root_dir=run_dir)
        agent.setup()
    except (ExplorationConfigError, DistributedConfigError) as exc:
        fail(str(exc))
    hooks, evaluator = [], None  # rank 0 alone records clips and (unless the motions are chunked) evaluates
    if zero and cfg.video_every > 0:
        from simppo.eval.training_video import TrainingVideo

        hooks.append((cfg.video_every, TrainingVideo(cfg, run_dir, device, log_to_wandb=cfg.logger == "wandb")))
    chunked = world > 1 and cfg.motion.chunk == "rank"  # every rank evaluates its own share of the motions
    if (zero or chunked) and cfg.eval_every > 0 and getattr(env, "motion_lib", None) is not None:
        from simppo.eval.periodic import PeriodicEvaluator

        evaluator = PeriodicEvaluator(cfg, device)
    logger = NullLogger()
    runner = agent.loop(run_dir, max_epochs=cfg.max_epochs, logger=logger, progress_bar=cfg.progress_bar,
                        epoch_hooks=hooks, evaluator=evaluator, eval_every=cfg.eval_every, log_every=cfg.log_every)
    try:
        if cfg.resume:
            runner.resume(cfg.checkpoint)
        elif cfg.checkpoint:
            runner.load(cfg.checkpoint, load_training_state=False)
    except CheckpointError as exc:
        fail(str(exc))  # resume: the runner has named the newest good epoch_N.ckpt of a damaged file
    # the run is sure to start: only now is anything in run_dir replaced or written
    started = None
    if zero:
        try:
            moved = start_run_dir(run_dir, OmegaConf.to_yaml(cfg_node, resolve=True), cfg.force,
                                  runner.epoch if cfg.resume else None)
            if moved is not None:
                say(f"simppo-train: force=true: the previous run's files were moved to {moved}", flush=True)
        except OSError as exc:
            started = f"{run_dir}: cannot start the run ({exc.strerror or exc})"
    if world > 1:
        started = broadcast_object(started, src=0)
    if started is not None:
        fail(started)
    if zero:
        logger = make_logger(cfg.logger, cfg.wandb, str(run_dir), run_dir.name,
                             OmegaConf.to_container(cfg_node, resolve=True))
        runner.logger = logger
    ranks = f" ranks={world} (num_envs per rank)" if world > 1 else ""
    notice = assist_notice(cfg)
    if notice:
        say(notice, flush=True)
    try:
        with StopOnSignal(runner):
            say(f"simppo-train: {type(env).__name__} num_envs={cfg.num_envs}{ranks} device={device} "
                f"mlp_precision={agent.precision} (agent.update_precision={cfg.agent.update_precision}) "
                f"run_dir={run_dir}", flush=True)
            runner.train()
    except CheckpointError as exc:  # a failed checkpoint write: the same message on every rank
        close_process_group()
        fail(str(exc), code=1)
    except TrainingDivergedError as exc:  # every rank sees the same reduced metrics and stops alike
        logger.finish()
        close_process_group()
        fail(str(exc), code=1)
    except Exception as exc:
        if world == 1 or not is_lost_rank_error(exc):
            raise
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"simppo-train: error: rank {rank}/{world}: lost contact with another rank at epoch {agent.epoch} "
              f"({reason[:300]}); every checkpoint in {run_dir} is complete: continue with resume=true",
              file=sys.stderr, flush=True)
        os._exit(1)  # a collective of a broken process group may block at interpreter exit
    logger.finish()
    env.close()
    close_process_group()
    say(f"simppo-train: done at epoch {agent.epoch}; checkpoints in {run_dir}", flush=True)


@hydra.main(version_base=None, config_path=str(CONFIG_DIR), config_name="train")
def _hydra_main(cfg_node) -> None:
    run(cfg_node)


def main() -> None:
    from simppo.cli.overrides import override_problem

    register_configs()
    problem = override_problem(sys.argv[1:], CONFIG_DIR, "train")
    if problem:
        fail(problem)
    _hydra_main()


if __name__ == "__main__":
    main()
