"""``make_env``: any registered env, built from the same typed config and overrides as ``simppo-train``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from simppo.envs.base import VecEnv


def compose_train_cfg(overrides: Sequence[str] = ()):
    """The ``train`` config (:class:`~simppo.config.TrainCfg`) composed with Hydra-style ``overrides``; a bad
    override is a one-line ``ValueError`` (the message ``simppo-train`` would print)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf, open_dict

    from simppo.cli.overrides import override_problem
    from simppo.config import register_configs
    from simppo.paths import CONFIG_DIR

    register_configs()
    problem = override_problem(list(overrides), CONFIG_DIR, "train")
    if problem:
        raise ValueError(problem)
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(version_base=None, config_dir=str(CONFIG_DIR)):
            node = compose("train", overrides=list(overrides), return_hydra_config=True)
        HydraConfig.instance().set_config(node)  # interpolations (experiment_name) read Hydra's runtime choices
        with open_dict(node):
            del node["hydra"]
        return OmegaConf.to_object(node)
    finally:
        GlobalHydra.instance().clear()


def as_overrides(overrides: Sequence[str] | Mapping | None = None, **more) -> list[str]:
    """``["key=value", ...]`` from Hydra-style strings, a dict (``{"env.rewards.anchor_pos": 0.5}``) and keywords."""
    if overrides is None:
        items: list[str] = []
    elif isinstance(overrides, Mapping):
        items = [f"{k}={_value(v)}" for k, v in overrides.items()]
    elif isinstance(overrides, str):
        items = [overrides]
    else:
        items = [str(o) for o in overrides]
    return items + [f"{k}={_value(v)}" for k, v in more.items()]


def _value(v) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, list | tuple):
        return "[" + ",".join(_value(x) for x in v) + "]"
    return "null" if v is None else str(v)


def make_env(name: str, num_envs: int | None = None, device: str = "auto", seed: int = 0,
             overrides: Sequence[str] | Mapping | None = None, **more) -> VecEnv:
    """The env ``name`` (``humanoid_imitation``, ``pendulum``) with ``num_envs`` copies on ``device``, configured as
    ``simppo-train env=<name> <overrides>`` would be: ``overrides`` are Hydra-style ``key=value`` strings or a dict,
    and keywords add more (``make_env("humanoid_imitation", 64, "cpu", **{"env.rewards.anchor_pos": 0.5})``).
    ``num_envs=None``: the device's default, as ``simppo-train``. The composed config is ``env.train_cfg``."""
    from simppo.cli.train import default_num_envs
    from simppo.envs import make_env as build
    from simppo.utils.device import init_warp, resolve_device

    cfg = compose_train_cfg([f"env={name}", *as_overrides(overrides, **more)])
    device = resolve_device(device)
    cfg.device = device
    cfg.seed = seed
    cfg.num_envs = num_envs if num_envs is not None else cfg.num_envs or default_num_envs(device)
    if not cfg.robot.source:
        from simppo.cli.train import robot_source

        cfg.robot.source = robot_source(cfg)
    init_warp()
    env = build(cfg.env, cfg.num_envs, device=device, seed=seed, robot_cfg=cfg.robot, sim_cfg=cfg.sim,
                motion_cfg=cfg.motion)
    env.train_cfg = cfg
    return env
