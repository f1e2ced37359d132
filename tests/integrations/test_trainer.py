"""``PPOTrainer`` (TorchRL's trainer interface on simppo's PPO): the loop, stop requests and signals, checkpoint
rotation and loading from a rotation folder, and the arguments it refuses."""

import os
import signal

import gymnasium as gym
import pytest
import torch
from torchrl.envs import StepCounter, TransformedEnv

import simppo
from simppo.integrations.torchrl import TorchRLEnv
from simppo.integrations.trainer import PPOTrainer, rotation

N = 16


def pendulum_trainer(tmp_path=None, total=N * 32 * 6, **kw) -> PPOTrainer:
    torch.manual_seed(0)
    env = simppo.make_env("pendulum", N, "cpu")
    save = {"save_trainer_file": str(tmp_path / "ckpts"), "save_trainer_interval": N * 32} if tmp_path else {}
    return PPOTrainer.from_env(env, total_frames=total, frames_per_batch=N * 32, minibatch_size=128,
                               progress_bar=False, **save, **kw)


def test_trains_to_total_frames_rotates_checkpoints_and_loads_the_newest(tmp_path):
    trainer = pendulum_trainer(tmp_path, keep_last=2, keep_best=("episode/reward", "max"))
    trainer.train()
    assert trainer.checkpoint_step == N * 32 * 6
    kept = rotation(tmp_path / "ckpts")
    assert [p.name for p in kept] == [f"checkpoint_{N * 32 * 5}.ckpt", f"checkpoint_{N * 32 * 6}.ckpt"]
    assert (tmp_path / "ckpts" / "best.ckpt").is_file()
    fresh = pendulum_trainer()
    fresh.load_from_file(tmp_path / "ckpts")  # a rotation folder: its newest checkpoint, to continue
    assert fresh.checkpoint_step == N * 32 * 6
    for a, b in zip(fresh.agent.algorithm.model.parameters(), trainer.agent.algorithm.model.parameters(), strict=True):
        assert torch.equal(a, b)
    warm = pendulum_trainer().load_from_file(kept[0], weights_only=True)
    assert warm.checkpoint_step == 0  # weights only: the counters start over


def test_request_stop_and_signals_finish_the_batch_and_checkpoint(tmp_path, monkeypatch):
    trainer = pendulum_trainer(tmp_path, total=10**9)
    runner, original = trainer.runner, trainer.runner.train_iteration

    def iteration():
        out = original()
        if runner.epoch == 2:
            os.kill(os.getpid(), signal.SIGINT)  # the first signal: finish this batch, checkpoint, return
        return out

    monkeypatch.setattr(runner, "train_iteration", iteration)
    before = signal.getsignal(signal.SIGINT)
    with trainer.stop_on_signal():
        trainer.train()
    assert runner.epoch == 2 and trainer.stop_reason == "signal SIGINT"
    assert signal.getsignal(signal.SIGINT) is before
    assert rotation(tmp_path / "ckpts")[-1].name == f"checkpoint_{N * 32 * 2}.ckpt"

    twice = pendulum_trainer(total=10**9)

    def two_signals():
        out = original()
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)
        return out

    monkeypatch.setattr(twice.runner, "train_iteration", two_signals)
    with pytest.raises(KeyboardInterrupt), twice.stop_on_signal():
        twice.train()
    stopped = pendulum_trainer(total=10**9)
    stopped.request_stop("enough")
    stopped.train()
    assert stopped.checkpoint_step == 0 and stopped.stop_reason == "enough"


def test_other_envs_are_accepted_and_unsupported_arguments_refused():
    transformed = TransformedEnv(TorchRLEnv(simppo.make_env("pendulum", 4, "cpu")), StepCounter())  # any TorchRL env
    for env in (TorchRLEnv(simppo.make_env("pendulum", 4, "cpu")), transformed, gym.make("Pendulum-v1"),
                simppo.make_env("humanoid_imitation", 4, "cpu")):
        trainer = PPOTrainer.from_env(env, total_frames=64, frames_per_batch=32, minibatch_size=16,
                                      progress_bar=False)
        trainer.train()
        assert trainer.checkpoint_step >= 64
    env = simppo.make_env("pendulum", 4, "cpu")
    refused = [({"actor": torch.nn.Linear(3, 1)}, "own actor-critic"), ({"sub_traj_len": 8}, "feedforward"),
               ({"loss_kwargs": {"clip_epsilon": 0.1, "kl_coef": 1.0}}, "\\['kl_coef'\\]"),
               ({"collector_kwargs": {"storing_device": "cpu"}}, "collector"), ({"batch_size": 3}, "batch_size"),
               ({"value_key": "v"}, "value_key")]
    for kwargs, match in refused:
        with pytest.raises(ValueError, match=match):
            PPOTrainer.from_env(env, total_frames=64, **kwargs)
