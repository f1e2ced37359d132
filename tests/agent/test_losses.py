import math

import torch

from simppo.agent import losses as L


def test_ratio_clip_fraction_and_surrogate_hand_computed():
    logp_old = torch.zeros(3)
    logp_new = torch.log(torch.tensor([1.5, 0.9, 0.5]))
    adv = torch.tensor([2.0, -1.0, -1.0])
    loss, ratio, clipped = L.clipped_surrogate_loss(logp_new, logp_old, adv, e_clip=0.2)
    torch.testing.assert_close(ratio, torch.tensor([1.5, 0.9, 0.5]))
    # sample 0: min(3.0, 2*1.2=2.4) → -2.4; sample 1: unclipped -0.9 → 0.9; sample 2: min(-0.5, -0.8) → 0.8
    torch.testing.assert_close(loss, torch.tensor([-2.4, 0.9, 0.8]))
    torch.testing.assert_close(clipped.mean(), torch.tensor(2.0 / 3.0))


def test_clipped_value_loss_hand_computed():
    new = torch.tensor([2.0, 1.0])
    old = torch.tensor([1.0, 2.0])
    ret = torch.tensor([1.5, 0.0])
    # sample 0: unclipped 0.25, clipped value 1.2 → 0.09 → max 0.25
    # sample 1: unclipped 1.0,  clipped value 1.8 → 3.24 → max 3.24
    torch.testing.assert_close(L.value_loss(new, old, ret, True, 0.2), torch.tensor([0.25, 3.24]))
    torch.testing.assert_close(L.value_loss(new, old, ret, False, 0.2), torch.tensor([0.25, 1.0]))


def test_entropy_value_and_bonus_sign_encourages_exploration():
    log_std = torch.zeros(1, 2, requires_grad=True)
    ent = L.gaussian_entropy(log_std)
    torch.testing.assert_close(ent, torch.tensor([2 * (0.5 + 0.5 * math.log(2 * math.pi))]))
    L.entropy_bonus_loss(ent, coef=0.01).sum().backward()
    assert (log_std.grad < 0).all()  # descending the loss widens the policy


def test_bounds_loss_hand_computed():
    mean = torch.tensor([[1.5, -2.0, 0.3]])
    torch.testing.assert_close(L.bounds_loss(mean, 1.0), torch.tensor([0.25 + 1.0]))


def test_l2c2_hand_computed():
    clean = torch.tensor([[0.0, 1.0]])
    noisy = torch.tensor([[0.1, 0.8]])
    torch.testing.assert_close(L.l2c2_loss(clean, noisy), torch.tensor([0.05]))


def test_gaussian_log_prob_and_kl_hand_computed():
    lp = L.gaussian_log_prob(torch.tensor([[1.0]]), torch.zeros(1, 1), torch.zeros(1, 1))
    torch.testing.assert_close(lp, torch.tensor([-0.5 - 0.5 * math.log(2 * math.pi)]))
    kl = L.gaussian_kl(torch.zeros(1, 1), torch.zeros(1, 1), torch.ones(1, 1), torch.zeros(1, 1))
    torch.testing.assert_close(kl, torch.tensor([0.5]))
    # log-prob agrees with torch.distributions
    mean, log_std, a = torch.randn(5, 3), torch.randn(5, 3) * 0.3, torch.randn(5, 3)
    ref = torch.distributions.Normal(mean, log_std.exp()).log_prob(a).sum(-1)
    torch.testing.assert_close(L.gaussian_log_prob(a, mean, log_std), ref)


def test_explained_variance():
    ret = torch.tensor([1.0, 2.0, 3.0, 4.0])
    torch.testing.assert_close(L.explained_variance(ret, ret), torch.tensor(1.0))
    torch.testing.assert_close(L.explained_variance(torch.full((4,), 2.5), ret), torch.tensor(0.0))
