"""``env=pendulum``: the built-in torque-limited pendulum swing-up (a fast env for tests)."""

from simppo.envs.pendulum.env import PendulumEnv, PendulumEnvCfg

__all__ = ["PendulumEnv", "PendulumEnvCfg"]
