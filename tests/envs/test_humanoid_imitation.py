"""humanoid_imitation env: reset state, kinematic replay, falling without a policy, host syncs, CLI."""

import subprocess
import sys
from dataclasses import replace

import pytest
import torch
from lightning_fabric import Fabric

from simppo.agent.ppo import PPO
from simppo.envs.imitation import HumanoidImitationEnv, HumanoidImitationEnvCfg
from simppo.envs.imitation.config import ResetNoiseCfg
from simppo.kernels.imitation.spec import TRACKING_NAMES
from tests.helpers import SyncCounter


@pytest.fixture(scope="module")
def env(sim_cfg):
    torch.manual_seed(0)
    return HumanoidImitationEnv(HumanoidImitationEnvCfg(), num_envs=8, device="cpu", sim_cfg=sim_cfg)


def test_reset_puts_simulator_bodies_on_the_reference(sim_cfg):
    """Reference-state initialisation itself, without the reset noise (tests/envs/test_reset_noise.py)."""
    cfg = replace(HumanoidImitationEnvCfg(), reset_noise=ResetNoiseCfg(enabled=False))
    env = HumanoidImitationEnv(cfg, num_envs=8, device="cpu", sim_cfg=sim_cfg)
    env.reset()
    torch.testing.assert_close(env.sim.xpos[:, 1:], env.ref.body_pos_w[:, 0], atol=1e-4, rtol=0)
    dq = (env.sim.xquat[:, 1:] * env.ref.body_quat_w[:, 0]).sum(-1).abs()
    torch.testing.assert_close(dq, torch.ones_like(dq), atol=1e-4, rtol=0)
    # a partial reset to chosen (motion, time) moves only the masked envs
    before = env.sim.qpos.clone()
    mask = torch.zeros(env.num_envs, dtype=torch.bool)
    mask[2] = True
    env.reset_to(torch.full((env.num_envs,), 3, dtype=torch.int32), torch.full((env.num_envs,), 1.5), mask)
    assert env.motion_ids[2] == 3 and env.times[2] == 1.5
    assert torch.equal(env.sim.qpos[~mask], before[~mask])
    torch.testing.assert_close(env.sim.xpos[2, 1:], env.ref.body_pos_w[2, 0], atol=1e-4, rtol=0)


def test_observation_layout_slices_cover_the_buffer(env):
    slices = env.obs_slices
    assert slices["gravity_b"] == slice(0, 3)
    ordered = sorted(slices.values(), key=lambda s: s.start)  # contiguous: no gap, no overlap, the whole row
    assert ordered[0].start == 0 and ordered[-1].stop == env.full_dim
    assert all(a.stop == b.start and a.start < a.stop for a, b in zip(ordered, ordered[1:], strict=False))
    assert slices["ref_anchor_lin_vel"].start == env.actor_dim
    obs = env.get_observations()
    assert obs["obs"].shape == (env.num_envs, env.actor_dim)
    assert obs["critic_obs"].shape == (env.num_envs, env.full_dim)
    # gravity in the body frame of an upright robot points down
    assert (obs["obs"][:, 2] < -0.8).all()


def test_kinematic_replay_of_every_shipped_clip_scores_near_maximum(sim_cfg):
    cfg = replace(HumanoidImitationEnvCfg(), kinematic_replay=True, init_start_prob=1.0)
    env = HumanoidImitationEnv(cfg, num_envs=6, device="cpu", sim_cfg=sim_cfg)
    m = env.motion_lib.num_motions
    ids = torch.arange(env.num_envs, dtype=torch.int32) % m
    env.reset_to(ids, torch.zeros(env.num_envs))
    max_reward = sum(w for w in (getattr(cfg.rewards, t) for t in TRACKING_NAMES))
    steps = int(torch.ceil(env.motion_lengths.max() / env.dt).item())
    active = torch.ones(env.num_envs, dtype=torch.bool)
    worst = torch.full((env.num_envs,), float("inf"))
    zero = torch.zeros(env.num_envs, env.num_actions)
    for _ in range(steps):
        _, reward, terminated, truncated, _ = env.step(zero)
        assert not terminated[active].any(), env.motion_lib.motion_names
        worst = torch.where(active, torch.minimum(worst, reward), worst)
        active &= ~truncated
        if not active.any():
            break
    assert not active.any()  # every clip reached its end
    assert (worst >= 0.99 * max_reward).all(), dict(zip(env.motion_lib.motion_names, worst.tolist(), strict=False))


def test_zero_actions_on_a_dynamic_clip_terminate_within_seconds(sim_cfg):
    env = HumanoidImitationEnv(HumanoidImitationEnvCfg(), num_envs=2, device="cpu", sim_cfg=sim_cfg)
    walk = env.motion_lib.motion_id("walk")
    env.reset_to(torch.full((2,), walk, dtype=torch.int32), torch.zeros(2))
    zero = torch.zeros(2, env.num_actions)
    ended = torch.zeros(2, dtype=torch.bool)
    for _ in range(int(4.0 / env.dt)):
        _, _, terminated, truncated, _ = env.step(zero)
        assert not (truncated & ~ended).any()
        ended |= terminated
        if ended.all():
            break
    assert ended.all()


def test_env_step_and_ppo_update_make_no_host_sync(monkeypatch, sim_cfg):
    from tests.agent.test_host_syncs import count_agent_syncs
    from tests.helpers import small_agent_cfg

    torch.manual_seed(0)
    env = HumanoidImitationEnv(HumanoidImitationEnvCfg(), num_envs=4, device="cpu", sim_cfg=sim_cfg)
    agent = PPO(Fabric(accelerator="cpu", devices=1), env, small_agent_cfg(num_steps=4, lambda_l2c2=0.1,
                                                                              symmetry_coef=0.1))
    agent.setup()
    counts = count_agent_syncs(agent, monkeypatch)
    assert counts.keys() == {"rollout", "update"}, counts
    assert all(n == 0 for part in counts.values() for n in part.values()), counts
    counter = SyncCounter(monkeypatch)
    with counter:
        env.step(torch.zeros(4, env.num_actions))
    assert counter.total == 0, counter.counts


def test_simppo_train_humanoid_cli_end_to_end(tmp_path):
    run_dir = tmp_path / "run"
    out = subprocess.run([sys.executable, "-m", "simppo.cli.train", "num_envs=8", "max_epochs=1", "logger=none",
                          "agent.num_steps=4", "progress_bar=false", f"run_dir={run_dir}"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert "HumanoidImitationEnv" in out.stdout
    state = torch.load(run_dir / "last.ckpt", weights_only=True)
    assert state["epoch"] == 1 and "sampler" in state["env"]


def test_root_assist_holds_the_robot_on_the_reference_and_fades(sim_cfg):
    """A strong push (every joint's action at +1) in the walk: carried by the assist, the root stays on the
    reference's path (horizontally, the axes it assists by default); without it, it leaves. The share fades by
    start / anneal_steps per step, resumes, and the evaluation never assists."""
    from simppo.envs.imitation.config import RootAssistCfg
    from simppo.eval.loading import eval_env_cfg

    def root_error(start: float, anneal_steps: int) -> tuple[list[float], HumanoidImitationEnv]:
        cfg = replace(HumanoidImitationEnvCfg(), assist=RootAssistCfg(start=start, anneal_steps=anneal_steps),
                      reset_noise=ResetNoiseCfg(enabled=False))
        env = HumanoidImitationEnv(cfg, num_envs=2, device="cpu", sim_cfg=sim_cfg)
        walk = env.motion_lib.motion_names.index("walk")
        env.reset_to(torch.full((2,), walk, dtype=torch.int32), torch.zeros(2))
        out = []
        for _ in range(30):
            env.step(torch.full((2, env.num_actions), 1.0))
            out.append(float((env.sim.qpos[:, :2] - env.ref.root_pos[:, 0, :2]).norm(dim=1).max()))
        return out, env

    held, env = root_error(1.0, 10**6)
    free, _ = root_error(0.0, 10**6)
    assert max(held) < 0.01 < 0.08 < max(free)
    assert float(env.assist_alpha[0]) == pytest.approx(1.0 - 30e-6, abs=1e-6)
    assert float(env.metrics()["env/assist"]) == pytest.approx(1.0 - 30e-6, abs=1e-6)
    # the share falls to 0 in anneal_steps control steps and stays there
    _, faded = root_error(0.5, 20)
    assert float(faded.assist_alpha[0]) == 0.0
    state = env.state_dict()
    fresh = HumanoidImitationEnv(env.cfg, num_envs=2, device="cpu", sim_cfg=sim_cfg)
    fresh.load_state_dict(state)
    assert float(fresh.assist_alpha[0]) == float(env.assist_alpha[0])
    off = replace(HumanoidImitationEnvCfg(), assist=RootAssistCfg(start=0.0))
    assert "assist_alpha" not in HumanoidImitationEnv(off, 2, "cpu", sim_cfg=sim_cfg).state_dict()
    assert not eval_env_cfg(env.cfg).assist.enabled  # whatever the default


def _failing_shares_rise(failing: HumanoidImitationEnv) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-motion shares set to 0.2 in an env where every episode ends on a termination: after 10 steps each
    motion that had envs (a rate above 0) has risen; after 100 more no share is above ``start`` (0.5). Returns
    the motions visited in the first 10 steps and every share at that point."""
    failing.assist_alpha.fill_(0.2)
    for _ in range(10):
        failing.step(torch.zeros(2, failing.num_actions))
    visited, shares = failing.assist_rate > 0, failing.assist_alpha.clone()
    assert visited.any() and bool((shares[visited] > 0.2 + 0.004).all())
    for _ in range(100):
        failing.step(torch.zeros(2, failing.num_actions))
    assert float(failing.assist_alpha.max()) <= 0.5
    return visited, shares


def test_root_assist_per_motion_fades_by_each_motions_survival(sim_cfg):
    """``fade=survival``: one share per motion. A motion whose envs keep their balance loses its share at the
    schedule's rate; where every env terminates each step the shares rise back, to ``start`` at most; a motion
    without envs keeps its share. Shares and rates resume, and a state saved before motions were appended keeps its
    motions' shares (the new ones start at ``start``)."""
    from simppo.envs.imitation.config import RootAssistCfg, TerminationCfg

    def make(**terminations) -> HumanoidImitationEnv:  # survive_s = 200 control steps: one failure turns it
        cfg = replace(HumanoidImitationEnvCfg(), terminations=TerminationCfg(**terminations),
                      assist=RootAssistCfg(start=0.5, anneal_steps=100, fade="survival", survive_s=4.0))
        return HumanoidImitationEnv(cfg, num_envs=2, device="cpu", sim_cfg=sim_cfg)

    env = make()
    num_motions = env.motion_lib.num_motions
    assert env.assist_alpha.shape == (num_motions,) and num_motions >= 3
    sway = env.motion_lib.motion_names.index("stand_sway")
    env.reset_to(torch.full((2,), sway, dtype=torch.int32), torch.zeros(2))
    for _ in range(10):
        env.step(torch.zeros(2, env.num_actions))
    assert not env.terminated.any()
    others = [m for m in range(num_motions) if m != sway]
    assert float(env.assist_alpha[sway]) == pytest.approx(0.5 - 10 * 0.005, abs=1e-6)
    assert torch.equal(env.assist_alpha[others], torch.full((num_motions - 1,), 0.5))
    assert float(env.metrics()["env/assist"]) == pytest.approx(float(env.assist_alpha.mean()), abs=1e-6)

    visited, shares = _failing_shares_rise(make(anchor_height=1e-6))  # every env terminates every step
    assert torch.equal(shares[~visited], torch.full((int((~visited).sum()),), 0.2))

    state = env.state_dict()
    fresh = make()
    fresh.load_state_dict(state)
    assert torch.equal(fresh.assist_alpha, env.assist_alpha) and torch.equal(fresh.assist_rate, env.assist_rate)
    fewer = {**state, "assist_alpha": state["assist_alpha"][:2] * 0.5, "assist_rate": state["assist_rate"][:2]}
    fresh.load_state_dict(fewer)
    assert torch.equal(fresh.assist_alpha[:2], state["assist_alpha"][:2] * 0.5)
    assert torch.equal(fresh.assist_alpha[2:], torch.full((num_motions - 2,), 0.5))


def test_root_assist_per_motion_fades_by_each_motions_success(sim_cfg):
    """``fade=success``: a motion's share falls while under ``max_fail`` of its episodes end on a termination.
    Episodes that run out of clip are successes (the share falls at the schedule's rate, the rate stays 0);
    where every episode terminates the shares rise back, to ``start`` at most."""
    from simppo.envs.imitation.config import RootAssistCfg, TerminationCfg

    def make(ema=0.01, **terminations) -> HumanoidImitationEnv:
        cfg = replace(HumanoidImitationEnvCfg(), terminations=TerminationCfg(**terminations),
                      assist=RootAssistCfg(start=0.5, anneal_steps=100, fade="success", max_fail=0.25, ema=ema))
        return HumanoidImitationEnv(cfg, num_envs=2, device="cpu", sim_cfg=sim_cfg)

    env = make()
    sway = env.motion_lib.motion_names.index("stand_sway")
    end = float(env.motion_lib.motion_lengths[sway])
    env.reset_to(torch.full((2,), sway, dtype=torch.int32), torch.full((2,), end - 3.5 * env.dt))
    ended = 0
    for _ in range(10):
        env.step(torch.zeros(2, env.num_actions))
        ended += int(env.truncated.sum())
        assert not env.terminated.any()
    assert ended >= 2  # both ran out of clip (and restarted elsewhere)
    assert float(env.assist_alpha[sway]) <= 0.5 - 3 * 0.005 + 1e-6  # one 0.005 per step with its envs
    assert not env.assist_rate.any() and float(env.assist_alpha.max()) == 0.5 and float(env.assist_alpha.min()) < 0.5

    _failing_shares_rise(make(ema=0.5, anchor_height=1e-6))  # every episode terminates: the rate 0.5 at once


def test_termination_curriculum_tightens_in_the_step_and_resumes(sim_cfg):
    from simppo.envs.imitation.config import TerminationCurriculumCfg
    from simppo.eval.loading import eval_env_cfg

    base = HumanoidImitationEnvCfg()
    curriculum = TerminationCurriculumCfg(start_scale=2.0, survive_s=1e-3, step=0.01)  # every step tightens
    cfg = replace(base, terminations=replace(base.terminations, curriculum=curriculum))
    env = HumanoidImitationEnv(cfg, num_envs=4, device="cpu", sim_cfg=sim_cfg)
    env.reset()
    assert float(env.termination_scale[0]) == 2.0
    for _ in range(5):  # the first step eager, the others replayed from the step graph where it can be captured
        env.step(torch.zeros(4, env.num_actions))
    want = 2.0 * 0.99 ** 5
    assert float(env.termination_scale[0]) == pytest.approx(want, rel=1e-5)
    assert float(env.metrics()["env/termination_scale"]) == pytest.approx(want, rel=1e-5)
    state = env.state_dict()
    fresh = HumanoidImitationEnv(cfg, num_envs=4, device="cpu", sim_cfg=sim_cfg)
    fresh.load_state_dict(state)
    assert float(fresh.termination_scale[0]) == pytest.approx(want, rel=1e-5)
    # without a curriculum the state has no such key (checkpoints of other runs keep their layout) and the
    # evaluation judges at the run's own thresholds
    assert "termination_curriculum" not in HumanoidImitationEnv(base, 2, "cpu", sim_cfg=sim_cfg).state_dict()
    assert not eval_env_cfg(cfg).terminations.curriculum.enabled


def test_adaptive_sigma_tightens_only_its_terms_in_the_step_and_resumes(sim_cfg):
    from simppo.envs.imitation.config import AdaptiveSigmaCfg
    from simppo.kernels.imitation.spec import REWARD_NAMES

    base = HumanoidImitationEnvCfg()
    # a fast EMA: within a few steps σ² of the body-position term falls towards its squared errors (cm², far
    # under the configured 0.3² m²)
    cfg = replace(base, adaptive_sigma=AdaptiveSigmaCfg(terms=["body_pos"], ema=0.5, min_scale=0.1, per_motion=False,
                                                        start_steps=0))
    env = HumanoidImitationEnv(cfg, num_envs=4, device="cpu", sim_cfg=sim_cfg)
    env.reset()
    start = env.reward_sigmas.clone()
    i = REWARD_NAMES.index("body_pos")
    sigmas = []
    for _ in range(5):  # the first step eager, the others replayed from the step graph where it can be captured
        env.step(torch.zeros(4, env.num_actions))
        sigmas.append(float(env.reward_sigmas[0, i]))
    assert env.reward_sigmas.shape == (1, len(REWARD_NAMES))  # one row for every env
    assert 0.03 <= sigmas[-1] < 0.5 * float(start[0, i])  # tightened, not under its floor
    assert sigmas == sorted(sigmas, reverse=True)
    others = [k for k in range(len(REWARD_NAMES)) if k != i]
    torch.testing.assert_close(env.reward_sigmas[:, others], start[:, others], rtol=0, atol=0)
    # the reward of the last step was computed with the σ of the step before it
    raw, term = env.reward_raw[:, i], env.reward_terms[:, i]
    torch.testing.assert_close(term, torch.exp(-raw / sigmas[-2] ** 2), rtol=1e-5, atol=1e-6)
    assert float(env.metrics()["env/sigma_body_pos"]) == pytest.approx(sigmas[-1])
    fresh = HumanoidImitationEnv(cfg, num_envs=4, device="cpu", sim_cfg=sim_cfg)
    fresh.load_state_dict(env.state_dict())
    torch.testing.assert_close(fresh.reward_sigmas, env.reward_sigmas, rtol=0, atol=0)
    # on by default (every weighted tracking term, one row per motion, after start_steps); off, the state keeps the
    # layout it had before the option; a play never adapts σ
    default = HumanoidImitationEnv(base, 2, "cpu", sim_cfg=sim_cfg)
    assert default.reward_sigmas.shape[0] == default.motion_lib.num_motions > 1
    assert {"adaptive_sigma", "adaptive_sigma_steps"} <= set(default.state_dict())
    off = HumanoidImitationEnv(replace(base, adaptive_sigma=AdaptiveSigmaCfg(terms=[])), 2, "cpu", sim_cfg=sim_cfg)
    assert not {"adaptive_sigma", "adaptive_sigma_steps"} & set(off.state_dict())
    from simppo.eval.loading import eval_env_cfg
    assert not eval_env_cfg(cfg).adaptive_sigma.terms


def test_adaptive_sigma_per_motion_reads_and_tightens_each_envs_own_row(sim_cfg):
    from simppo.envs.imitation.config import AdaptiveSigmaCfg
    from simppo.kernels.imitation.spec import REWARD_NAMES

    cfg = replace(HumanoidImitationEnvCfg(),
                  adaptive_sigma=AdaptiveSigmaCfg(terms=["body_pos"], ema=0.5, per_motion=True, start_steps=0))
    env = HumanoidImitationEnv(cfg, num_envs=4, device="cpu", sim_cfg=sim_cfg)
    m = env.motion_lib.num_motions
    assert env.reward_sigmas.shape == (m, len(REWARD_NAMES))
    i = REWARD_NAMES.index("body_pos")
    # two motions played, by two envs each, from t = 0 with no resets before the last step
    env.reset_to(torch.tensor([0, 0, 2, 2], dtype=torch.int32), torch.zeros(4))
    for _ in range(4):
        before = env.reward_sigmas.clone()
        env.step(torch.zeros(4, env.num_actions))
    played = torch.zeros(m, dtype=torch.bool)
    played[[0, 2]] = True
    assert (env.reward_sigmas[played, i] < 0.3).all() and (env.reward_sigmas[~played, i] == 0.3).all()
    assert env.reward_sigmas[0, i] != env.reward_sigmas[2, i]  # each row from its own envs' errors
    rows = before[env.motion_ids.long(), i]  # the reward of the last step read each env's own row
    torch.testing.assert_close(env.reward_terms[:, i], torch.exp(-env.reward_raw[:, i] / rows ** 2),
                               rtol=1e-5, atol=1e-6)
    assert float(env.metrics()["env/sigma_body_pos"]) == pytest.approx(float(env.reward_sigmas[:, i].mean()))
    fresh = HumanoidImitationEnv(cfg, num_envs=4, device="cpu", sim_cfg=sim_cfg)
    fresh.load_state_dict(env.state_dict())
    torch.testing.assert_close(fresh.reward_sigmas, env.reward_sigmas, rtol=0, atol=0)


def test_adaptive_sigma_waits_start_steps_counted_in_the_step_and_resumes_mid_wait(sim_cfg):
    from simppo.envs.imitation.config import AdaptiveSigmaCfg
    from simppo.kernels.imitation.spec import REWARD_NAMES

    cfg = replace(HumanoidImitationEnvCfg(),
                  adaptive_sigma=AdaptiveSigmaCfg(terms=["body_pos"], ema=0.5, per_motion=False, start_steps=3))
    env = HumanoidImitationEnv(cfg, num_envs=4, device="cpu", sim_cfg=sim_cfg)
    off = HumanoidImitationEnv(replace(cfg, adaptive_sigma=AdaptiveSigmaCfg(terms=[])), num_envs=4, device="cpu",
                               sim_cfg=sim_cfg)
    env.reset()
    off.reset()
    i = REWARD_NAMES.index("body_pos")
    zeros = torch.zeros(4, env.num_actions)
    for _ in range(2):  # while it waits, the run is the run without adaptive σ
        env.step(zeros)
        off.step(zeros)
        torch.testing.assert_close(env.reward, off.reward, rtol=0, atol=0)
    assert float(env.reward_sigmas[0, i]) == pytest.approx(0.3)  # still the configured σ
    state = env.state_dict()
    assert int(state["adaptive_sigma_steps"][0]) == 2
    fresh = HumanoidImitationEnv(cfg, num_envs=4, device="cpu", sim_cfg=sim_cfg)
    fresh.load_state_dict(state)
    for e in (env, fresh):  # the third step ends the wait; the fourth adapts, on the resumed env as well
        e.step(zeros)
        assert float(e.reward_sigmas[0, i]) == pytest.approx(0.3)
        e.step(zeros)
        assert float(e.reward_sigmas[0, i]) < 0.3
    # ungated runs keep the state layout of the checkpoints written before the option
    ungated = replace(cfg, adaptive_sigma=AdaptiveSigmaCfg(terms=["body_pos"], start_steps=0))
    assert "adaptive_sigma_steps" not in HumanoidImitationEnv(ungated, 2, "cpu", sim_cfg=sim_cfg).state_dict()


def test_adaptive_sigma_config_names_what_is_wrong():
    from simppo.envs.imitation.config import AdaptiveSigmaCfg

    with pytest.raises(ValueError, match="action_rate"):
        AdaptiveSigmaCfg(terms=["body_pos", "action_rate"])
    with pytest.raises(ValueError, match="min_scale=0"):
        AdaptiveSigmaCfg(terms=["body_pos"], min_scale=0.0)
    with pytest.raises(ValueError, match="start_steps=-1"):
        AdaptiveSigmaCfg(terms=["body_pos"], start_steps=-1)


def test_sampler_split_by_rate_counts_every_env_step_and_resumes(sim_cfg):
    from simppo.envs.imitation.sampler import AdaptiveSamplingCfg

    base = HumanoidImitationEnvCfg()
    cfg = replace(base, sampling=AdaptiveSamplingCfg(motion_split="rate"))
    env = HumanoidImitationEnv(cfg, num_envs=4, device="cpu", sim_cfg=sim_cfg)
    env.reset()
    for _ in range(5):  # the first step eager, the others replayed from the step graph where it can be captured
        env.step(torch.zeros(4, env.num_actions))
    alpha = cfg.sampling.ema_alpha
    want = 4 * alpha * sum((1 - alpha) ** k for k in range(5))  # each env's step counts once towards its motion
    assert float(env.sampler.visits().sum()) == pytest.approx(want, rel=1e-5)
    fresh = HumanoidImitationEnv(cfg, num_envs=4, device="cpu", sim_cfg=sim_cfg)
    fresh.load_state_dict(env.state_dict())
    torch.testing.assert_close(fresh.sampler.visits(), env.sampler.visits())
    torch.testing.assert_close(fresh.sampler.cdf, env.sampler.cdf)
    # split by count, the state keeps its layout (checkpoints of other runs resume)
    assert "motion_visits" not in HumanoidImitationEnv(base, 2, "cpu", sim_cfg=sim_cfg).state_dict()["sampler"]
