"""``PPOTrainer`` (TorchRL's trainer interface on simppo's PPO): the loop, stop requests and signals, checkpoint
rotation and loading from a rotation folder, and the arguments it refuses."""

import os
import signal

import gymnasium as gym
import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import NormalParamExtractor, TensorDictModule
from torchrl.envs import StepCounter, TransformedEnv
from torchrl.modules import ProbabilisticActor, TanhNormal, ValueOperator

import simppo
from simppo.agent.losses import gaussian_log_prob
from simppo.integrations.torchrl import TorchRLEnv
from simppo.integrations.trainer import PPOTrainer, rotation

N = 16


def torchrl_actor(obs_dim: int, num_actions: int, distribution=torch.distributions.Normal) -> ProbabilisticActor:
    net = torch.nn.Sequential(torch.nn.Linear(obs_dim, 32), torch.nn.Tanh(), torch.nn.Linear(32, 2 * num_actions),
                              NormalParamExtractor())
    return ProbabilisticActor(TensorDictModule(net, in_keys=["observation"], out_keys=["loc", "scale"]),
                              in_keys=["loc", "scale"], distribution_class=distribution)


def torchrl_critic(obs_dim: int) -> ValueOperator:
    return ValueOperator(torch.nn.Sequential(torch.nn.Linear(obs_dim, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1)),
                         in_keys=["observation"])


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


def test_a_save_folder_is_one_runs_and_a_continued_run_keeps_its_best(tmp_path):
    first = pendulum_trainer(tmp_path, total=N * 32 * 6, keep_last=2, keep_best=("episode/reward", "max"))
    first.train()
    assert first.best is not None  # episodes of 100 steps ended in these 192
    folder = tmp_path / "ckpts"
    assert torch.load(rotation(folder)[-1], weights_only=True)["trainer_best"] == first.best  # its last value too
    files = {p.name: p.read_bytes() for p in folder.iterdir()}
    # another run into the same folder: refused before it trains, every file as it was
    other = pendulum_trainer(tmp_path, total=N * 32 * 2, keep_last=2, keep_best=("episode/reward", "max"))
    with pytest.raises(FileExistsError, match="another run"):
        other.train()
    assert other.checkpoint_step == 0 and {p.name: p.read_bytes() for p in folder.iterdir()} == files
    # continued from its newest checkpoint: trains on, rotates its own files, and keeps the best it has to beat
    more = pendulum_trainer(tmp_path, total=N * 32 * 8, keep_last=2, keep_best=("episode/reward", "max"))
    more.load_from_file(folder)
    assert more.best == first.best
    more.train()
    assert [p.name for p in rotation(folder)] == [f"checkpoint_{N * 32 * 7}.ckpt", f"checkpoint_{N * 32 * 8}.ckpt"]
    assert more.best >= first.best
    # continued from an older checkpoint than the folder's newest: its saves would overwrite them, refused
    branch = pendulum_trainer(tmp_path, total=N * 32 * 9, keep_last=2)
    branch.load_from_file(rotation(folder)[0])
    with pytest.raises(FileExistsError, match=f"checkpoint_{N * 32 * 8}.ckpt"):
        branch.train()


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
    refused = [({"actor": torch.nn.Linear(3, 1)}, "one key"), ({"sub_traj_len": 8}, "feedforward"),
               ({"loss_kwargs": {"clip_epsilon": 0.1, "kl_coef": 1.0}}, "\\['kl_coef'\\]"),
               ({"collector_kwargs": {"storing_device": "cpu"}}, "collector"), ({"batch_size": 3}, "batch_size"),
               ({"value_key": "v"}, "value_key"), ({"actor": torchrl_actor(3, 1, TanhNormal)}, "diagonal Gaussian"),
               ({"critic": torchrl_critic(3), "value_key": "v"}, "not among the module's out_keys")]
    for kwargs, match in refused:
        with pytest.raises(ValueError, match=match):
            PPOTrainer.from_env(env, total_frames=64, **kwargs)


def test_torchrl_actor_and_critic_are_trained_by_simppos_core(tmp_path):
    torch.manual_seed(0)
    env = simppo.make_env("pendulum", N, "cpu")
    actor, critic = torchrl_actor(3, 1), torchrl_critic(3)
    before = [p.detach().clone() for p in (*actor.parameters(), *critic.parameters())]
    trainer = PPOTrainer.from_env(env, actor=actor, critic=critic, total_frames=N * 32 * 3, frames_per_batch=N * 32,
                                  minibatch_size=128, progress_bar=False, save_trainer_file=str(tmp_path / "c"))
    trainer.train()
    after = list((*actor.parameters(), *critic.parameters()))
    assert all(not torch.equal(a, b) for a, b in zip(before, after, strict=True))  # every module tensor was trained
    model = trainer.agent.algorithm.model
    assert model.actor.module is actor and model.critic.module is critic

    # simppo's policy is the module's Gaussian on simppo's normalised observation
    obs = env.get_observations()
    norm_obs, norm_critic = model.normalize(obs)
    with torch.no_grad():
        mean, log_std = model.actor(norm_obs)
        td = TensorDict({"observation": norm_obs}, [N])
        dist = actor.get_dist(td)
        actions = dist.sample()
        assert torch.allclose(mean, dist.loc) and torch.allclose(log_std.exp(), dist.scale)
        simppo_logp = gaussian_log_prob(actions, mean, log_std)  # what the PPO core scores samples with
        assert torch.allclose(simppo_logp, dist.log_prob(actions).sum(-1), atol=1e-5)
        values = critic(td.set("observation", norm_critic))["state_value"][:, 0]
        assert torch.allclose(model.critic(norm_critic), values)
        assert torch.equal(model.act_inference(obs), mean)

    # its checkpoint restores the modules' weights into fresh modules
    fresh_actor, fresh_critic = torchrl_actor(3, 1), torchrl_critic(3)
    fresh = PPOTrainer.from_env(simppo.make_env("pendulum", N, "cpu"), actor=fresh_actor, critic=fresh_critic,
                                total_frames=1, frames_per_batch=N * 32, progress_bar=False)
    fresh.load_from_file(tmp_path / "c")
    for a, b in zip(fresh_actor.state_dict().values(), actor.state_dict().values(), strict=True):
        assert torch.equal(a, b)


def test_a_given_actor_refuses_per_motion_exploration():
    from simppo.agent.config import PPOAgentConfig

    env = simppo.make_env("humanoid_imitation", 4, "cpu")
    obs_dim = env.obs_dims["obs"]
    with pytest.raises(ValueError, match="agent.exploration=shared"):
        PPOTrainer.from_env(env, actor=torchrl_actor(obs_dim, env.num_actions), total_frames=8,
                            config=PPOAgentConfig(exploration="per_motion"))


def test_on_humanoid_imitation_it_trains_exactly_what_simppo_train_trains():
    """One PPO core: the trainer's parameters after two batches equal those of simppo's own PPO on the same env,
    config and seed (so simppo's learning checks of humanoid_imitation hold for the trainer)."""
    from simppo.agent.ppo import PPO
    from tests.helpers import cpu_fabric

    def env():
        return simppo.make_env("humanoid_imitation", 8, "cpu", seed=3)

    first = env()
    config = first.train_cfg.agent
    trainer = PPOTrainer.from_env(first, total_frames=8 * 8 * 2, frames_per_batch=8 * 8, minibatch_size=32,
                                  learning_rate=config.actor_lr, seed=3, config=config, progress_bar=False)
    trainer.train()
    second = env()
    same = second.train_cfg.agent
    same.num_steps, same.num_minibatches, same.critic_lr = 8, 2, same.actor_lr
    same.lr_batch_scaling = "none"  # the trainer takes its learning_rate as given
    torch.manual_seed(3)
    agent = PPO(cpu_fabric(), second, same)
    agent.setup()
    for _ in range(2):
        agent.train_iteration()
    theirs, ours = trainer.agent.model.state_dict(), agent.model.state_dict()
    assert theirs.keys() == ours.keys()
    for key in ours:
        assert torch.equal(theirs[key], ours[key]), key
