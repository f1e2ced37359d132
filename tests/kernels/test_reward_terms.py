"""Adding a reward term takes one Warp function and one declaration: a toy term goes through exactly the path
``docs/architecture.md`` describes, and the kernel built with it gives the toy's value, weight and sums while
every declared term keeps its own."""

import pytest
import torch
import warp as wp

from simppo.envs.imitation import HumanoidImitationEnv, HumanoidImitationEnvCfg
from simppo.kernels.imitation.buffers import ImitationBuffers, ImitationParams, RefState
from simppo.kernels.imitation.rewards import TERM_FUNCTIONS, reward_kernel
from simppo.kernels.imitation.spec import PENALTY, REWARD_TERMS, RewardTerm
from simppo.kernels.types import SimState
from simppo.sim import SimCfg
from simppo.utils.device import warp_view


@wp.func
def root_height(sim: SimState, ref: RefState, p: ImitationParams, buf: ImitationBuffers, env: int) -> float:
    return sim.qpos[env, 2]


def _copy(struct, cls):
    out = cls()
    for name in cls.vars:
        setattr(out, name, getattr(struct, name))
    return out


def test_a_toy_term_through_one_function_and_one_declaration():
    env = HumanoidImitationEnv(HumanoidImitationEnvCfg(), num_envs=6, device="cpu", seed=0,
                               sim_cfg=SimCfg(name="mujoco"))
    env.reset()
    env.step(0.3 * torch.randn(env.num_envs, env.num_actions, generator=torch.Generator().manual_seed(0)))
    terms = (*REWARD_TERMS, RewardTerm("root_height", PENALTY, weight=-2.0))  # the declaration
    kernel = reward_kernel(terms, {**TERM_FUNCTIONS, "root_height": root_height})  # the function
    n, t = env.num_envs, len(terms)
    own_sums = env.episode_sums.clone()
    env._compute_rewards_and_dones()  # the shipped kernel: the reference for every declared term
    want_raw, want_reward, want_sums = env.reward_raw.clone(), env.reward.clone(), env.episode_sums.clone()
    p = _copy(env.params, ImitationParams)  # the env builds these vectors from the declarations the same way
    p.weights = wp.array([x.weight for x in terms], dtype=wp.float32)
    p.sigmas = wp.array([[x.sigma or 0.0 for x in terms]], dtype=wp.float32)
    p.term_kind = wp.array([int(x.kind != PENALTY) for x in terms], dtype=wp.int32)
    raw, values, sums = torch.zeros(n, t), torch.zeros(n, t), torch.zeros(n, t + 1)
    sums[:, :t - 1], sums[:, t] = own_sums[:, :t - 1], own_sums[:, t - 1]
    reward = torch.zeros(n)
    b = _copy(env.buf, ImitationBuffers)
    b.reward_raw, b.reward_terms, b.episode_sums, b.reward = (warp_view(x) for x in (raw, values, sums, reward))
    wp.launch(kernel, dim=n, inputs=[env.sim.state, env.ref_wp, p, b], device="cpu")
    height = env.sim.qpos[:, 2]
    torch.testing.assert_close(raw[:, :t - 1], want_raw, rtol=0, atol=0)
    torch.testing.assert_close(raw[:, t - 1], height, rtol=0, atol=0)
    torch.testing.assert_close(reward, want_reward - 2.0 * height, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(sums[:, t - 1], -2.0 * height, rtol=1e-6, atol=1e-6)  # the toy's episode sum
    torch.testing.assert_close(sums[:, :t - 1], want_sums[:, :t - 1], rtol=0, atol=0)
    torch.testing.assert_close(sums[:, t], want_sums[:, t - 1] - 2.0 * height, rtol=1e-5, atol=1e-5)  # the total


def test_a_declaration_without_a_function_is_refused():
    with pytest.raises(ValueError, match=r"reward terms \['feet_slip'\] need both a declaration"):
        reward_kernel((*REWARD_TERMS, RewardTerm("feet_slip", PENALTY, weight=-1.0)))
    with pytest.raises(ValueError, match=r"reward terms \['root_height'\]"):
        reward_kernel(REWARD_TERMS, {**TERM_FUNCTIONS, "root_height": root_height})
