import torch

from simppo.agent.normalizers import RewardNormalizer, RunningMeanStd


def test_running_mean_std_matches_full_batch_statistics():
    g = torch.Generator().manual_seed(0)
    rms = RunningMeanStd((3,))
    chunks = [torch.randn(n, 3, generator=g) * 2 + 1 for n in (5, 17, 1, 40)]
    for c in chunks:
        rms.update(c)
    full = torch.cat(chunks).double()
    torch.testing.assert_close(rms.mean, full.mean(0))
    torch.testing.assert_close(rms.var, full.var(0, unbiased=False))
    assert rms.count.item() == 63
    assert rms.mean.dtype == torch.float64


def test_running_mean_std_hand_computed_and_clip():
    rms = RunningMeanStd((), epsilon=0.0, clip=1.5)
    rms.update(torch.tensor([1.0, 3.0]))  # mean 2, var 1
    rms.update(torch.tensor([5.0]))  # mean 3, var ((1-3)^2+(3-3)^2+(5-3)^2)/3 = 8/3
    torch.testing.assert_close(rms.mean, torch.tensor(3.0, dtype=torch.float64))
    torch.testing.assert_close(rms.var, torch.tensor(8.0 / 3.0, dtype=torch.float64))
    out = rms.normalize(torch.tensor([3.0, 100.0]))
    torch.testing.assert_close(out, torch.tensor([0.0, 1.5]))


def test_reward_normalizer_divides_by_return_std_and_resets_on_done():
    rn = RewardNormalizer(num_envs=2, gamma=0.5, epsilon=0.0)
    # step 1: returns [1, 3] → var 1 → scaled = r / 1
    out = rn(torch.tensor([1.0, 3.0]), torch.tensor([0.0, 1.0]))
    torch.testing.assert_close(out, torch.tensor([1.0, 3.0]))
    torch.testing.assert_close(rn.returns, torch.tensor([1.0, 0.0], dtype=torch.float64))
    # step 2: returns [0.5*1+1, 0+1] = [1.5, 1]; merged var of {1,3,1.5,1} = 2.6875/4 = 0.671875
    out = rn(torch.tensor([1.0, 1.0]), torch.tensor([0.0, 0.0]))
    torch.testing.assert_close(out, torch.tensor([1.0, 1.0]) / 0.671875 ** 0.5)
