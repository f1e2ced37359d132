"""``env=humanoid_imitation``: a humanoid tracks reference motions (env, config, spec, start-state sampler,
domain randomization).

Exports are resolved lazily so that the kernels can import :mod:`.spec` without importing the env.
"""

_EXPORTS = {
    "HumanoidImitationEnv": "simppo.envs.imitation.env",
    "HumanoidImitationEnvCfg": "simppo.envs.imitation.config",
    "RewardWeightsCfg": "simppo.envs.imitation.config",
    "RewardSigmasCfg": "simppo.envs.imitation.config",
    "TerminationCfg": "simppo.envs.imitation.config",
    "RandomizationCfg": "simppo.envs.imitation.config",
    "DeployRandomizationCfg": "simppo.envs.imitation.config",
    "Randomizer": "simppo.envs.imitation.randomization",
    "AdaptiveSampler": "simppo.envs.imitation.sampler",
    "AdaptiveSamplingCfg": "simppo.envs.imitation.sampler",
}
__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
