"""``env.reset_noise``: training resets start off the reference (within the configured half-widths, per env,
reproducibly from the seed, again at every reset, in the step without host syncs, saved with the run; the
half-widths ramped up over the first control steps), while the evaluation, kinematic replay and the option's off
state start exactly on it; on both backends."""

from dataclasses import replace

import numpy as np
import pytest
import torch

from simppo.envs.imitation import HumanoidImitationEnv, HumanoidImitationEnvCfg
from simppo.envs.imitation.config import ResetNoiseCfg
from simppo.eval.loading import eval_env_cfg
from tests.envs import imitation_reference as R
from tests.helpers import SyncCounter

N = 8
NOISE = ResetNoiseCfg(enabled=True, ramp_steps=0)  # every reset, the full half-widths


def _env(sim_cfg, seed: int = 0, noise: ResetNoiseCfg = NOISE, **kw) -> HumanoidImitationEnv:
    cfg = replace(HumanoidImitationEnvCfg(), reset_noise=noise, **kw)
    return HumanoidImitationEnv(cfg, num_envs=N, device="cpu", seed=seed, sim_cfg=sim_cfg)


def _offsets(env) -> dict[str, np.ndarray]:
    """The reset state's distance from the reference's, per env: root position (world xyz), rotation angle,
    root linear / angular velocity (world) and joint angles."""
    ref = R.ref_state(env)
    want_q, want_v = R.reference_state(ref, env.joint_qpos_start, env.joint_dof_start, env.sim.nq, env.sim.nv)
    q, v = R.f64(env.sim.qpos), R.f64(env.sim.qvel)
    turn = R.q_mul(R.q_normalize(q[:, 3:7]), R.q_conj(want_q[:, 3:7]))
    w_world = R.q_rotate(R.q_normalize(q[:, 3:7]), v[:, 3:6]) - R.q_rotate(want_q[:, 3:7], want_v[:, 3:6])
    return {"pos": (q[:, :3] - want_q[:, :3]).numpy(), "angle": R.q_angle(turn).numpy(),
            "lin_vel": (v[:, :3] - want_v[:, :3]).numpy(), "ang_vel": w_world.numpy(),
            "joints": (q[:, 7:] - want_q[:, 7:]).numpy(), "joint_vel": (v[:, 6:] - want_v[:, 6:]).numpy()}


def test_a_reset_starts_off_the_reference_within_the_half_widths(sim_cfg):
    env = _env(sim_cfg)
    env.reset()
    d = _offsets(env)
    tol = 1e-4
    assert (np.abs(d["pos"]) <= np.array(NOISE.root_pos) + tol).all()
    assert (np.abs(d["lin_vel"]) <= np.array(NOISE.root_lin_vel) + tol).all()
    assert (np.abs(d["ang_vel"]) <= np.array(NOISE.root_ang_vel) + 1e-3).all()
    assert (d["angle"] <= np.linalg.norm(NOISE.root_rpy) + tol).all()
    assert (np.abs(d["joints"]) <= NOISE.joint_pos + tol).all()
    assert np.abs(d["joint_vel"]).max() < 1e-4  # joint velocities start on the reference's
    # every env is moved, each its own way
    assert (np.abs(d["pos"][:, :2]).max(1) > 1e-4).all()
    assert len({tuple(row) for row in d["pos"].round(5)}) == N
    # the draws are the kernel's, one row per env
    assert env.reset_noise_draws.shape == (N, 12 + env.num_actions)


def test_the_same_seed_gives_the_same_starts_and_every_reset_draws_again(sim_cfg):
    a, b, c = _env(sim_cfg), _env(sim_cfg), _env(sim_cfg, seed=1)
    for e in (a, b, c):
        e.reset()
    assert torch.equal(a.sim.qpos, b.sim.qpos) and torch.equal(a.sim.qvel, b.sim.qvel)
    assert not torch.equal(a.sim.qpos, c.sim.qpos)
    first = a.reset_noise_draws.clone()
    a.reset()
    assert not torch.equal(first, a.reset_noise_draws)


def test_off_eval_and_kinematic_replay_start_on_the_reference(sim_cfg):
    for env in (_env(sim_cfg, noise=ResetNoiseCfg(enabled=False)), _env(sim_cfg, kinematic_replay=True)):
        env.reset()
        d = _offsets(env)
        assert max(np.abs(v).max() for v in d.values()) < 2e-4
        assert env.reset_noise is None and "reset_noise_rng" not in env.state_dict()
    played = eval_env_cfg(replace(HumanoidImitationEnvCfg(), reset_noise=NOISE))
    assert played.reset_noise.enabled is False


def test_starts_at_the_clip_start_stay_on_the_reference_when_asked(sim_cfg):
    """``at_clip_start=false``: the resets that start their motion at t = 0 start on the reference (as a play from
    t = 0 does), the others off it; on by default, t = 0 starts are perturbed like any other."""
    for at_clip_start in (False, True):
        env = _env(sim_cfg, noise=replace(NOISE, at_clip_start=at_clip_start), init_start_prob=0.5)
        env.reset()
        at_zero = (env.times == 0).numpy()
        assert 0 < at_zero.sum() < N
        moved = np.abs(_offsets(env)["pos"][:, :2]).max(1) > 1e-4
        assert (moved == ~at_zero).all() if not at_clip_start else moved.all()


def test_resets_in_the_step_are_perturbed_without_host_syncs_and_the_streams_are_saved(sim_cfg, monkeypatch):
    env = _env(sim_cfg)
    env.reset()
    env.step(torch.zeros(N, env.num_actions))
    state = env.state_dict()
    assert torch.equal(state["reset_noise_rng"], env.reset_noise_rng)
    env.reset_mask.zero_()
    env.reset_mask[[1, 4]] = True
    env.reset_noise_draws.zero_()
    with SyncCounter(monkeypatch) as counter:
        env._reset_envs()
    draws = env.reset_noise_draws
    assert (draws[[1, 4]] != 0).any(1).all() and (draws[[0, 2, 3, 5, 6, 7]] == 0).all()
    with counter:
        env.step(torch.zeros(N, env.num_actions))
    assert sum(counter.counts.values()) == 0, counter.counts
    # a restored env draws what the saved one drew next
    other = _env(sim_cfg, seed=7)
    other.reset()
    other.load_state_dict(state)
    assert torch.equal(other.reset_noise_rng, state["reset_noise_rng"])


def test_the_half_widths_ramp_up_over_the_first_control_steps_and_the_ramp_is_saved(sim_cfg):
    env = _env(sim_cfg, noise=replace(NOISE, ramp_steps=4))
    env.reset()
    d = _offsets(env)
    assert max(np.abs(v).max() for v in d.values()) < 2e-4  # the ramp's start: on the reference
    assert (env.reset_noise_draws != 0).any()  # the draws are made all the same
    for _ in range(2):
        env.step(torch.zeros(N, env.num_actions))
    assert env.reset_noise_scale.item() == pytest.approx(0.5)
    assert env.metrics()["env/reset_noise_scale"].item() == pytest.approx(0.5)
    state = env.state_dict()
    env.reset()  # half-way: every offset within half of its half-width, and not on the reference
    d = _offsets(env)
    assert (np.abs(d["pos"]) <= 0.5 * np.array(NOISE.root_pos) + 1e-4).all()
    assert (np.abs(d["joints"]) <= 0.5 * NOISE.joint_pos + 1e-4).all()
    assert (np.abs(d["pos"][:, :2]).max(1) > 1e-5).all()
    for _ in range(3):
        env.step(torch.zeros(N, env.num_actions))
    assert env.reset_noise_scale.item() == 1.0
    other = _env(sim_cfg, noise=replace(NOISE, ramp_steps=4))
    other.load_state_dict(state)
    assert other.reset_noise_scale.item() == pytest.approx(0.5)
    assert "reset_noise_scale" not in _env(sim_cfg).state_dict()  # no ramp: nothing to save


@pytest.mark.parametrize("key, value", [("root_pos", [0.1, 0.1]), ("root_rpy", [0.1, -0.1, 0.2]),
                                        ("joint_pos", -0.1),
                                        ("ramp_steps", -1), ("ramp_steps", 2.5)])
def test_bad_half_widths_are_refused(key, value):
    with pytest.raises(ValueError, match=f"env.reset_noise.{key}"):
        ResetNoiseCfg(**{key: value})
