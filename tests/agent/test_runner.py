import torch

from simppo.agent.checkpoint import load_checkpoint
from simppo.agent.ppo import PPO
from simppo.agent.runner import gather_metrics
from tests.helpers import pendulum_agent


def _agent(**cfg) -> PPO:
    return pendulum_agent(**cfg)


def test_gather_metrics_averages_episode_sums():
    update = {"actor/loss": torch.tensor(0.5), "actor/lr": torch.tensor(3e-3, dtype=torch.float64)}
    episodes = {"episode/reward": torch.tensor(-12.0), "episode_count": torch.tensor(4.0)}
    m = gather_metrics(update, episodes)
    assert m.keys() == {"actor/loss", "actor/lr", "episode/reward"}
    assert m["actor/loss"] == 0.5 and m["episode/reward"] == -3.0
    assert gather_metrics(update, {"episode/reward": torch.tensor(0.0), "episode_count": torch.tensor(0.0)}).keys() \
        == {"actor/loss", "actor/lr"}


def test_optimize_model_returns_metrics_and_episode_stats_reset():
    agent = _agent()
    agent.collect_rollout()
    metrics = agent.optimize_model()
    assert {"actor/loss", "actor/kl", "actor/lr", "critic/loss", "explained_variance"} <= metrics.keys()
    assert all(isinstance(v, torch.Tensor) and v.dim() == 0 for v in metrics.values())
    first = agent.episode_metrics()
    assert first["episode_count"].item() == 8  # every env ended once in 8 steps
    assert agent.episode_metrics()["episode_count"].item() == 0


def test_runner_rotates_checkpoints_and_stops_on_request(tmp_path):
    agent = _agent(save_last_every=2, save_epoch_every=3)
    runner = agent.loop(tmp_path, max_epochs=3)
    runner.train()
    assert agent.epoch == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["epoch_3.ckpt", "last.ckpt", "metrics.csv",
                                                          "score_based.ckpt"]
    best = load_checkpoint(tmp_path / "score_based.ckpt")["best_evaluated_score"]
    assert best == agent.best_evaluated_score
    runner = agent.loop(tmp_path, max_epochs=10)
    runner.request_stop()
    runner.train()  # no iteration; still saves last.ckpt
    assert agent.epoch == 3 and load_checkpoint(tmp_path / "last.ckpt")["epoch"] == 3
    fresh = _agent()
    fresh.loop(tmp_path).resume()
    assert fresh.epoch == 3 and fresh.step_count == agent.step_count
