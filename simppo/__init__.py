"""simppo: massively parallel PPO for humanoid motion imitation on Warp and MuJoCo Warp."""


def make_env(name: str, num_envs: int | None = None, device: str = "auto", seed: int = 0, overrides=None, **more):
    """Any registered env configured as ``simppo-train`` would (:func:`simppo.integrations.factory.make_env`)."""
    from simppo.integrations.factory import make_env as make

    return make(name, num_envs, device, seed, overrides, **more)
