"""Vectorized envs. ``make_env`` builds one from its typed config (dispatch on ``cfg.name``)."""

from simppo.envs.base import VecEnv


def make_env(env_cfg, num_envs: int, device: str, seed: int, train_cfg=None) -> VecEnv:
    """Build the env named by ``env_cfg.name`` with ``num_envs`` copies on ``device``."""
    name = getattr(env_cfg, "name", None)
    if name == "pendulum":
        from simppo.envs.pendulum import PendulumEnv

        return PendulumEnv(env_cfg, num_envs, device=device, seed=seed)
    if name == "humanoid_imitation":
        from simppo.envs.humanoid_imitation import HumanoidImitationEnv

        return HumanoidImitationEnv(env_cfg, train_cfg, num_envs, device=device, seed=seed)
    raise ValueError(f"unknown env '{name}'")
