import numpy as np
import torch

from simppo.kernels.gae import bind_gae, compute_gae, discount_values


def gae_reference(dones, values, rewards, next_values, gamma, tau):
    """Float64 NumPy reference of the seed's discount_values."""
    T, N = values.shape
    adv = np.zeros((T, N), dtype=np.float64)
    last = np.zeros(N, dtype=np.float64)
    for t in reversed(range(T)):
        delta = rewards[t] + gamma * next_values[t] - values[t]
        last = delta + gamma * tau * (1.0 - dones[t]) * last
        adv[t] = last
    return adv


def test_gae_matches_float64_reference_with_terminations_and_truncations():
    rng = np.random.default_rng(0)
    T, N, gamma, tau = 32, 1024, 0.99, 0.95
    rewards = rng.normal(size=(T, N))
    values = rng.normal(size=(T, N))
    next_values = rng.normal(size=(T, N))
    terminated = rng.random((T, N)) < 0.05
    truncated = (rng.random((T, N)) < 0.05) & ~terminated
    next_values[terminated] = 0.0  # the rollout zeroes terminated envs, keeps time-outs
    dones = (terminated | truncated).astype(np.float64)
    expected = gae_reference(dones, values, rewards, next_values, gamma, tau)
    t = lambda a: torch.tensor(a, dtype=torch.float32)  # noqa: E731
    adv = discount_values(t(dones), t(values), t(rewards), t(next_values), gamma, tau)
    assert adv.shape == (T, N)
    np.testing.assert_allclose(adv.numpy(), expected, atol=1e-5, rtol=0)


def test_gae_hand_computed_three_steps():
    # gamma=0.9, tau=0.8, episode ends after step 1:
    # t=2: delta = 3 + 0.9*2.0 - 1.5 = 3.3            A2 = 3.3
    # t=1: delta = 2 + 0.9*1.5 - 1.0 = 2.35           A1 = 2.35 (done cuts A2)
    # t=0: delta = 1 + 0.9*1.0 - 0.5 = 1.4            A0 = 1.4 + 0.72*2.35 = 3.092
    dones = torch.tensor([[0.0], [1.0], [0.0]])
    values = torch.tensor([[0.5], [1.0], [1.5]])
    rewards = torch.tensor([[1.0], [2.0], [3.0]])
    next_values = torch.tensor([[1.0], [1.5], [2.0]])
    adv = discount_values(dones, values, rewards, next_values, 0.9, 0.8)
    torch.testing.assert_close(adv[:, 0], torch.tensor([3.092, 2.35, 3.3]), atol=1e-6, rtol=0)


def test_gae_writes_in_place_into_given_buffers():
    T, N = 4, 3
    g = torch.Generator().manual_seed(1)
    dones, values, rewards, next_values = (torch.rand(T, N, generator=g) for _ in range(4))
    dones = (dones > 0.7).float()
    adv = torch.full((T, N), 7.0)
    ret = torch.full((T, N), 7.0)
    ptr = adv.data_ptr()
    compute_gae(bind_gae(dones, values, rewards, next_values, adv, ret), 0.99, 0.95)
    assert adv.data_ptr() == ptr
    torch.testing.assert_close(ret, adv + values)
    expected = gae_reference(dones.double().numpy(), values.double().numpy(), rewards.double().numpy(),
                             next_values.double().numpy(), 0.99, 0.95)
    np.testing.assert_allclose(adv.numpy(), expected, atol=1e-6)


def test_discount_values_works_in_a_fresh_process():
    """Every public entry point initialises Warp itself (nothing else has run first)."""
    from tests.helpers import run_fresh_python

    code = ("import torch; from simppo.kernels.gae import discount_values; "
            "a = discount_values(torch.zeros(3, 2), torch.ones(3, 2), torch.ones(3, 2), torch.ones(3, 2), 0.9, 0.9); "
            "print(a.shape)")
    assert "torch.Size([3, 2])" in run_fresh_python(code, timeout=300).stdout
