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


def test_float32_batches_keep_float64_statistics_over_a_long_run():
    """Batch moments are taken in float32 and merged in float64: over 2,000 batches of 512 rows with a large
    offset (a mean up to 10,000 standard deviations from zero) and a mask, mean and variance match a float64
    computation of the whole stream to float32 precision of one batch, not of the sum of all (the variance's
    relative error from float32 batch moments is about (6e-8 · |mean| / std)^2)."""
    g = torch.Generator().manual_seed(1)
    rms = RunningMeanStd((4,))
    scale = torch.tensor([1e-2, 1.0, 30.0, 2.0], dtype=torch.float64)
    offset = torch.tensor([100.0, -2.0, 1e3, 0.0], dtype=torch.float64)
    kept = []
    for _ in range(2000):
        x64 = torch.randn(512, 4, generator=g, dtype=torch.float64) * scale + offset
        mask = torch.rand(512, generator=g) > 0.3
        x32 = x64.float()
        x32[~mask, 0] = float("nan")  # masked-out rows may hold NaN (unstable worlds)
        rms.update(x32, mask=mask)
        kept.append(x32.double()[mask])
    full = torch.cat(kept)
    assert rms.count.item() == full.shape[0]
    torch.testing.assert_close(rms.mean, full.mean(0), rtol=1e-7, atol=0.0)
    torch.testing.assert_close(rms.var, full.var(0, unbiased=False), rtol=1e-4, atol=0.0)
    assert rms.mean.dtype == rms.var.dtype == torch.float64
    before = (rms.mean.clone(), rms.var.clone(), rms.count.clone())
    rms.update(torch.full((8, 4), float("nan")), mask=torch.zeros(8, dtype=torch.bool))  # nothing kept: unchanged
    for a, b in zip(before, (rms.mean, rms.var, rms.count), strict=True):
        assert torch.equal(a, b)
