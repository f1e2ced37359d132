"""``EpisodeMeans`` against a float64 reference of the moving mean over ended episodes."""

import torch

from simppo.integrations.episodes import EpisodeMeans


def test_moving_mean_over_ended_episodes_skips_steps_where_none_ended():
    alpha = 0.1
    means = EpisodeMeans(alpha)
    rng = torch.Generator().manual_seed(0)
    ref, seen = 0.0, False
    for done_count in (0, 2, 0, 0, 3, 1, 0, 4):
        value = torch.rand(6, generator=rng, dtype=torch.float64)
        done = torch.zeros(6, dtype=torch.bool)
        done[:done_count] = True
        out = means.update({"reward": value.float()}, done)["reward"]
        if done_count:
            batch = float(value[:done_count].float().double().mean())
            w = 1.0 - (1.0 - alpha) ** done_count if seen else 1.0
            ref, seen = ref + w * (batch - ref), True
        assert abs(float(out) - ref) < 1e-6, (done_count, float(out), ref)
