"""Vectorized envs. ``make_env`` builds one from its typed config (dispatch on ``cfg.name``)."""

from simppo.envs.base import VecEnv


def make_env(env_cfg, num_envs: int, device: str, seed: int, robot_cfg=None, sim_cfg=None, motion_cfg=None) -> VecEnv:
    """Build the env named by ``env_cfg.name`` with ``num_envs`` copies on ``device``.

    ``robot_cfg`` (:class:`~simppo.robot.config.RobotCfg`), ``sim_cfg`` and ``motion_cfg`` go to envs that
    simulate a robot tracking motions; self-contained envs ignore them.
    """
    name = getattr(env_cfg, "name", None)
    if name == "pendulum":
        from simppo.envs.pendulum import PendulumEnv

        return PendulumEnv(env_cfg, num_envs, device=device, seed=seed)
    if name == "humanoid_imitation":
        from simppo.envs.imitation import HumanoidImitationEnv

        return HumanoidImitationEnv(env_cfg, num_envs, device=device, seed=seed, robot_cfg=robot_cfg,
                                    sim_cfg=sim_cfg, motion_cfg=motion_cfg)
    raise ValueError(f"unknown env '{name}'")
