"""``env=humanoid_imitation``: a humanoid tracks reference motions (env, config, start-state sampler, domain
randomization). Its observation and reward layout is declared once in :mod:`simppo.kernels.imitation.spec`."""

from simppo.envs.imitation.config import (
    DeployRandomizationCfg,
    HumanoidImitationEnvCfg,
    RandomizationCfg,
    RewardSigmasCfg,
    RewardWeightsCfg,
    TerminationCfg,
    TerminationCurriculumCfg,
)
from simppo.envs.imitation.env import HumanoidImitationEnv
from simppo.envs.imitation.randomization import Randomizer
from simppo.envs.imitation.sampler import AdaptiveSampler, AdaptiveSamplingCfg

__all__ = ["AdaptiveSampler", "AdaptiveSamplingCfg", "DeployRandomizationCfg", "HumanoidImitationEnv",
           "HumanoidImitationEnvCfg", "RandomizationCfg", "Randomizer", "RewardSigmasCfg", "RewardWeightsCfg",
           "TerminationCfg", "TerminationCurriculumCfg"]
