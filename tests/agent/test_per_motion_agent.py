"""Per-motion exploration (issue 12) in the agent: the humanoid env's motion ids pick each sample's log-std row,
only used rows learn, resume is bit-exact, changed motion sets are refused before anything loads, the runner
writes the σ sidecar with every ``last.ckpt`` (rank 0 only), and nothing syncs with the host."""

import copy
import json
import types

import numpy as np
import pytest
import torch

from simppo.agent.checkpoint import CheckpointError, raise_on_any_rank
from simppo.agent.config import ActorCfg, MLPCfg
from simppo.agent.exploration import SNAPSHOT_FILE
from simppo.agent.models import PPOModel, log_std_rows
from simppo.agent.ppo import PPO
from simppo.envs.imitation import HumanoidImitationEnv, HumanoidImitationEnvCfg
from simppo.envs.pendulum import PendulumEnv, PendulumEnvCfg
from simppo.motion.config import MotionCfg
from simppo.sim.config import SimCfg
from tests.agent.test_checkpoint_validation import assert_unchanged, snapshot
from tests.agent.test_determinism_resume import _assert_same
from tests.agent.test_host_syncs import count_agent_syncs
from tests.helpers import SyncCounter, cpu_fabric, small_agent_cfg

NUM_ENVS = 8


def make_env(packs, *names, cfg: HumanoidImitationEnvCfg | None = None) -> HumanoidImitationEnv:
    motions = MotionCfg(files=[str(packs[n]) for n in names])
    return HumanoidImitationEnv(cfg or HumanoidImitationEnvCfg(), num_envs=NUM_ENVS, device="cpu",
                                sim_cfg=SimCfg(name="mujoco"), motion_cfg=motions)


def make_agent(env, exploration="per_motion", root_dir=None, **overrides) -> PPO:
    cfg = small_agent_cfg(num_steps=4, num_minibatches=2, num_mini_epochs=2, entropy_coef=0.01,
                          actor=ActorCfg(units=[16]), critic=MLPCfg(units=[16]), exploration=exploration)
    for k, v in overrides.items():
        setattr(cfg, k, v)
    agent = PPO(cpu_fabric(), env, cfg, root_dir=root_dir)
    agent.setup()
    return agent


def seeded_agent(packs, *names, seed=0, **kw) -> PPO:
    torch.manual_seed(seed)
    return make_agent(make_env(packs, *names), **kw)


def test_envs_without_motions_refuse_per_motion_and_keep_shared():
    env = PendulumEnv(PendulumEnvCfg(), num_envs=4, seed=0)
    with pytest.raises(ValueError, match="PendulumEnv has none: use agent.exploration=shared"):
        PPO(cpu_fabric(), env, small_agent_cfg(exploration="per_motion"))
    with pytest.raises(ValueError, match="agent.exploration='per_row': choose from"):
        PPO(cpu_fabric(), env, small_agent_cfg(exploration="per_row"))
    agent = make_agent(env, exploration="shared")
    assert agent.model.actor.log_std.shape == (1,) and agent.current_rows() is None
    assert "rows" not in agent.experience_buffer.store
    agent.train_iteration()
    assert agent.get_state_dict()["exploration"] == {"mode": "shared"}


def test_each_sample_uses_its_motions_row(motion_packs):
    agent = seeded_agent(motion_packs, "A", "B", "C")
    actor, env, b = agent.model.actor, agent.env, agent.experience_buffer
    assert actor.log_std.shape == (5, env.num_actions)
    with torch.no_grad():
        actor.log_std.copy_(torch.linspace(-2.0, 0.0, 5)[:, None].expand_as(actor.log_std))
    agent.model.eval()
    for step in range(agent.num_steps):
        ids = env.motion_ids.clone()  # the motion of each env for the observation it acts on
        agent.rollout_step(step)
        assert torch.equal(b["rows"][step], ids.long())  # one shard list in order: motion id i is row i
        assert torch.equal(b["log_std"][step], actor.log_std[ids.long()])
    assert b["rows"].unique().numel() > 1


def test_update_gives_gradients_only_to_used_rows(motion_packs):
    agent = seeded_agent(motion_packs, "A", "B", "C", lambda_l2c2=0.1)
    agent.collect_rollout()
    data = agent.experience_buffer.flat()
    row = int(data["rows"][0])
    idx = torch.nonzero(data["rows"] == row).squeeze(1)
    batch = {k: v[idx] for k, v in data.items()}
    before = agent.model.actor.log_std.detach().clone()
    agent.model.train()
    agent.actor_step(batch)
    grad, after = agent.model.actor.log_std.grad, agent.model.actor.log_std.detach()
    others = torch.arange(5) != row
    assert grad[row].abs().sum() > 0 and not grad[others].any()
    assert torch.equal(after[others], before[others]) and not torch.equal(after[row], before[row])


def test_rows_learn_at_the_scale_times_the_root_of_the_effective_rows(motion_packs):
    """Each iteration sets the log-std group's rate to actor_lr x log_std_lr_scale x sqrt(1 / Σ p²) of its rows'
    sample shares p (counted here with NumPy); the first Adam step then moves a row's entries by ~that rate."""
    agent = seeded_agent(motion_packs, "A", "B", "C", log_std_lr_scale=2.0, lr_schedule="fixed")
    agent.collect_rollout()
    rows = agent.experience_buffer["rows"].flatten().numpy()
    p = np.bincount(rows, minlength=5) / rows.size
    expected = agent.config.actor_lr * 2.0 / np.sqrt(np.square(p).sum())
    before = agent.model.actor.log_std.detach().clone()
    metrics = agent.optimize_model()
    group = next(g for g in agent.actor_optimizer.param_groups if g["name"] == "log_std")
    assert float(group["lr"]) == pytest.approx(expected, rel=1e-6)
    assert float(metrics["exploration/log_std_lr"]) == pytest.approx(expected, rel=1e-6)
    assert group["lr"] is agent.log_std_lr  # updated in place: the optimizer keeps the device tensor
    moved = (agent.model.actor.log_std.detach() - before).abs()[np.unique(rows)]
    assert float(moved.max()) <= 4 * expected * 1.01  # 4 Adam steps of at most ~lr each


def test_iteration_logs_the_sigma_spread(motion_packs):
    agent = seeded_agent(motion_packs, "A", "B")
    metrics = agent.train_iteration()
    m = {k.removeprefix("exploration/"): v for k, v in metrics.items() if k.startswith("exploration/")}
    sigma = agent.model.actor.log_std.detach().exp()  # [rows, A]: the metrics describe this table
    assert m["sigma_min"] == pytest.approx(float(sigma.mean(-1).min()), rel=1e-5)
    assert m["sigma_max"] == pytest.approx(float(sigma.mean(-1).max()), rel=1e-5)
    assert 0 < m["sigma_min"] <= m["sigma_median"] <= m["sigma_max"]
    assert m["sigma_min"] <= m["sigma_hardest"] <= m["sigma_max"] and 0.0 <= m["hardest_term_rate"] <= 1.0


def test_per_motion_rollout_and_update_make_no_host_sync(monkeypatch, motion_packs):
    agent = seeded_agent(motion_packs, "A", "B", lambda_l2c2=0.1)
    counts = count_agent_syncs(agent, monkeypatch)
    zero = dict.fromkeys(SyncCounter.NAMES, 0)
    assert counts == {"rollout": zero, "update": zero}, counts
    counter = SyncCounter(monkeypatch)
    with counter:
        agent.rollout_metrics()
    assert counter.total == 0, counter.counts


def test_resume_with_the_same_motion_set_is_bit_exact(motion_packs, tmp_path):
    straight = seeded_agent(motion_packs, "A", "B")
    for _ in range(3):
        straight.train_iteration()

    split = seeded_agent(motion_packs, "A", "B", root_dir=tmp_path)
    split.train_iteration()
    split.loop(tmp_path).save("last.ckpt")
    side = json.loads((tmp_path / SNAPSHOT_FILE).read_text())
    assert side["epoch"] == 1 and [m["name"] for m in side["motions"]] == ["stand_sway", "squat", "walk"]

    resumed = seeded_agent(motion_packs, "A", "B", seed=99, root_dir=tmp_path)
    resumed.loop(tmp_path).resume()
    for _ in range(2):
        resumed.train_iteration()
    a, b = straight.get_state_dict(), resumed.get_state_dict()
    assert a["epoch"] == b["epoch"] == 3
    for key in ("model", "actor_optimizer", "critic_optimizer", "running_reward_norm", "env", "step_count",
                "exploration"):
        _assert_same(a[key], b[key], key)


@pytest.mark.parametrize(("now", "words"), [(("A_renamed", "B"), "motions renamed in checkpoint shard 0"),
                                            (("B", "A"), "motion shards reordered")])
def test_changed_motion_set_is_refused_before_anything_loads(motion_packs, tmp_path, now, words):
    trained = seeded_agent(motion_packs, "A", "B", root_dir=tmp_path)
    trained.train_iteration()
    trained.loop(tmp_path).save("last.ckpt")
    agent = seeded_agent(motion_packs, *now, seed=1)
    before = snapshot(agent)
    for training in (True, False):
        with pytest.raises(CheckpointError) as e:
            agent.loop(tmp_path).load(tmp_path / "last.ckpt", load_training_state=training)
        assert str(e.value).startswith(f"{tmp_path / 'last.ckpt'}: ") and words in str(e.value), str(e.value)
        assert_unchanged(agent, before)


def test_weights_only_start_from_shared_and_appended_shards(motion_packs, tmp_path):
    shared = seeded_agent(motion_packs, "A", exploration="shared", root_dir=tmp_path / "shared")
    shared.train_iteration()
    shared.loop(shared.root_dir).save("last.ckpt")
    state = torch.load(tmp_path / "shared" / "last.ckpt", weights_only=True)
    kept = copy.deepcopy(state)

    agent = seeded_agent(motion_packs, "A", "B", seed=1, root_dir=tmp_path / "per_motion")
    agent.load_parameters(state, load_training_state=False, source="shared.ckpt")
    table = agent.model.actor.log_std.detach()
    assert all(torch.equal(r, state["model"]["actor.log_std"]) for r in table)
    _assert_same(state, kept)  # the input checkpoint is not modified
    with pytest.raises(CheckpointError, match="shared.ckpt: checkpoint was trained with agent.exploration=shared"):
        agent.load_parameters(state, load_training_state=True, source="shared.ckpt")
    agent.train_iteration()
    agent.loop(agent.root_dir).save("last.ckpt")

    # a per-motion checkpoint of A + B, started with C appended: A + B keep their rows, C gets their mean
    grown = seeded_agent(motion_packs, "A", "B", "C", seed=2)
    per_motion = torch.load(tmp_path / "per_motion" / "last.ckpt", weights_only=True)
    grown.load_parameters(per_motion, load_training_state=False)
    old, new = per_motion["model"]["actor.log_std"], grown.model.actor.log_std.detach()
    assert new.shape == (5, old.shape[1]) and torch.equal(new[:3], old)
    torch.testing.assert_close(new[3:], old.mean(0).expand(2, -1))
    grown.train_iteration()


def test_runner_writes_the_sidecar_with_every_last_ckpt_on_rank_zero_only(motion_packs, tmp_path):
    agent = seeded_agent(motion_packs, "A", root_dir=tmp_path, save_last_every=1)
    agent.loop(tmp_path, max_epochs=2).train()
    side = json.loads((tmp_path / SNAPSHOT_FILE).read_text())
    assert (side["epoch"], side["step_count"]) == (2, 2 * agent.num_steps * NUM_ENVS)
    sigma = agent.model.actor.log_std.detach().exp()
    assert side["motions"][1]["sigma_mean"] == pytest.approx(float(sigma[1].mean()), abs=1e-6)
    (tmp_path / SNAPSHOT_FILE).unlink()
    (tmp_path / "last.ckpt").unlink()
    agent.runner.fabric = types.SimpleNamespace(is_global_zero=False, device=torch.device("cpu"))
    agent.loop(tmp_path).save("last.ckpt")  # another rank: neither the checkpoint nor the sidecar
    assert not (tmp_path / "last.ckpt").exists() and not (tmp_path / SNAPSHOT_FILE).exists()


class TwoRankFabric:
    """One process standing in for rank 0 of two; rank 1 failed validation with its own message."""

    device = torch.device("cpu")

    def __init__(self, rank1_message):
        self.rank1_message = rank1_message

    def all_gather(self, flag):
        return torch.stack([flag, torch.tensor([self.rank1_message is not None], dtype=flag.dtype)])

    def broadcast(self, obj, src=0):
        return obj if src == 0 else self.rank1_message


def test_a_validation_error_on_any_rank_stops_every_rank_with_its_message():
    raise_on_any_rank(cpu_fabric(), None)
    with pytest.raises(CheckpointError, match="^ckpt: bad rows$"):
        raise_on_any_rank(cpu_fabric(), "ckpt: bad rows")
    raise_on_any_rank(TwoRankFabric(None), None)
    with pytest.raises(CheckpointError, match="^ckpt: rank 1 motions differ$"):
        raise_on_any_rank(TwoRankFabric("ckpt: rank 1 motions differ"), None)  # rank 0 itself was fine
    with pytest.raises(CheckpointError, match="^ckpt: rank 0$"):
        raise_on_any_rank(TwoRankFabric("ckpt: rank 1"), "ckpt: rank 0")  # the lowest failing rank's message


def test_inference_is_the_mean_and_needs_no_motion_ids(motion_packs):
    agent = seeded_agent(motion_packs, "A", "B")
    obs = agent.env.get_observations()
    norm, _ = agent.model.normalize(obs)
    torch.testing.assert_close(agent.model.act_inference(obs), agent.model.actor.mean(norm))
    state = agent.model.state_dict()
    model = PPOModel(*(agent.env.obs_dims[k] for k in ("obs", "critic_obs")), agent.env.num_actions,
                     agent.config.actor, agent.config.critic, num_rows=log_std_rows(state))
    model.load_state_dict(state)  # the eval loader builds the table from the checkpoint's shape
    torch.testing.assert_close(model.act_inference(obs["obs"]), agent.model.act_inference(obs))


def test_resume_after_appending_a_shard_keeps_old_rows_and_sampler_bins(motion_packs, tmp_path):
    """Full resume (training state) from A + B into A + B + C: old σ rows and the start-state sampler's
    failure EMA of the old motions are kept; C's rows start from the old rows' mean, its bins at zero."""
    agent = seeded_agent(motion_packs, "A", "B", root_dir=tmp_path)
    agent.train_iteration()
    agent.env.sampler.failure_ema.copy_(torch.rand_like(agent.env.sampler.failure_ema))
    agent.loop(tmp_path).save("last.ckpt")
    state = torch.load(tmp_path / "last.ckpt", weights_only=True)

    grown = seeded_agent(motion_packs, "A", "B", "C", seed=3, root_dir=tmp_path)
    grown.loop(tmp_path).resume()
    old_ema = state["env"]["sampler"]["failure_ema"]
    ema = grown.env.sampler.failure_ema
    assert ema.shape[0] > old_ema.shape[0]
    assert torch.equal(ema[:old_ema.shape[0]], old_ema) and (ema[old_ema.shape[0]:] == 0).all()
    old, new = state["model"]["actor.log_std"], grown.model.actor.log_std.detach()
    assert torch.equal(new[:old.shape[0]], old)
    assert grown.epoch == 1
    grown.train_iteration()


def test_resume_after_appending_a_shard_keeps_each_old_motions_adaptive_sigma(motion_packs, tmp_path):
    """Per-motion adaptive σ (one σ row per motion, the state's second axis): resumed from A + B into A + B + C, the
    old motions keep their σ and error EMA, C starts at the configured σ."""
    from dataclasses import replace

    from simppo.envs.imitation.config import AdaptiveSigmaCfg

    cfg = replace(HumanoidImitationEnvCfg(),
                  adaptive_sigma=AdaptiveSigmaCfg(terms=["body_pos"], ema=0.5, per_motion=True, start_steps=0))
    torch.manual_seed(0)
    agent = make_agent(make_env(motion_packs, "A", "B", cfg=cfg), root_dir=tmp_path)
    agent.train_iteration()
    agent.loop(tmp_path).save("last.ckpt")
    old = torch.load(tmp_path / "last.ckpt", weights_only=True)["env"]["adaptive_sigma"]
    assert (old[0] < old[0].max()).any()  # some row tightened

    torch.manual_seed(3)
    grown = make_agent(make_env(motion_packs, "A", "B", "C", cfg=cfg), root_dir=tmp_path)
    grown.loop(tmp_path).resume()
    env, m = grown.env, old.shape[1]
    assert env.reward_sigmas.shape[0] > m
    assert torch.equal(env.reward_sigmas[:m], old[0]) and torch.equal(env._sigma_error_ema[:m], old[1])
    configured = HumanoidImitationEnv(cfg, 2, "cpu", sim_cfg=SimCfg(name="mujoco")).reward_sigmas[0]
    assert torch.equal(env.reward_sigmas[m:], configured.expand_as(env.reward_sigmas[m:]))
    grown.train_iteration()
