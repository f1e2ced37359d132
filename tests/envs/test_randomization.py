"""Domain randomization and observation noise of ``env=humanoid_imitation`` (issue 16), on both backends:
every term draws within its range, per env, on the env's device, reproducibly from the seed, again at
each reset; pushes come on their interval; the action delay delays; noise reaches only the actor's view;
the reset / step path stays free of host syncs; the deploy preset composes."""

from dataclasses import replace

import numpy as np
import pytest
import torch
import warp as wp
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from simppo.envs.imitation import HumanoidImitationEnv, HumanoidImitationEnvCfg
from simppo.envs.imitation.config import DeployRandomizationCfg, RandomizationCfg, TerminationCfg
from simppo.kernels.imitation.actions import apply_actions
from tests.envs import imitation_reference as R
from tests.helpers import SyncCounter

N = 6
EVERYTHING = DeployRandomizationCfg(
    foot_friction=[0.3, 1.2], joint_pos_offset=[-0.05, 0.05], com_offset_lo=[-0.025, -0.05, -0.05],
    com_offset_hi=[0.025, 0.05, 0.05], link_mass_scale=[0.8, 1.2], kp_scale=[0.7, 1.3], kd_scale=[0.5, 1.5],
    action_delay_steps=[0, 2], push_interval_s=[1.0, 3.0])


def _env(sim_cfg, seed: int = 0, randomization: RandomizationCfg = EVERYTHING, **kw) -> HumanoidImitationEnv:
    cfg = replace(HumanoidImitationEnvCfg(), randomization=randomization, **kw)
    return HumanoidImitationEnv(cfg, num_envs=N, device="cpu", seed=seed, sim_cfg=sim_cfg)


def _draws(env) -> dict[str, torch.Tensor]:
    """Every randomized quantity, ``[N, ...]`` (copies)."""
    out = {k: v.clone() for k, v in env.randomizer.world_tensors().items()}
    out.update(default_joint_pos=env.default_joint_pos.clone(), action_delay=env.action_delay.clone(),
               push_timer=env.randomizer.push_timer.clone())
    return out


@pytest.fixture(scope="module")
def env(sim_cfg):
    e = _env(sim_cfg)
    e.reset()
    return e


def test_each_term_draws_within_its_range_per_env(env):
    m, c, d = env.sim.mj_model, EVERYTHING, _draws(env)
    p = env.randomizer.params
    feet = p.foot_geoms.numpy()
    assert feet.size >= 2 and d["geom_friction"].device.type == torch.device(env.device).type
    mu = d["geom_friction"][:, feet, 0]
    assert (mu >= 0.3).all() and (mu <= 1.2).all()
    assert torch.equal(mu, mu[:, :1].expand_as(mu))  # one ground coefficient per env
    assert mu[:, 0].unique().numel() == N  # per env
    others = np.setdiff1d(np.arange(m.ngeom), feet)
    np.testing.assert_array_equal(d["geom_friction"][:, others].numpy(),
                                  np.broadcast_to(m.geom_friction[others].astype(np.float32), (N, len(others), 3)))
    np.testing.assert_array_equal(d["geom_friction"][:, feet, 1:].numpy(),
                                  np.broadcast_to(m.geom_friction[feet, 1:].astype(np.float32), (N, len(feet), 2)))

    nominal_pose = torch.tensor(env.sim.robot.default_joint_pos, dtype=torch.float32)
    offset = d["default_joint_pos"] - nominal_pose
    assert (offset.abs() <= 0.05 + 1e-6).all() and offset.abs().max() > 0.03
    assert offset[:, 0].unique().numel() == N

    torso = int(p.com_body)
    assert torso == env.anchor_id
    shift = d["body_ipos"][:, torso] - torch.tensor(m.body_ipos[torso], dtype=torch.float32)
    lo, hi = torch.tensor(c.com_offset_lo), torch.tensor(c.com_offset_hi)
    assert ((shift >= lo - 1e-6) & (shift <= hi + 1e-6)).all() and shift[:, 1].unique().numel() == N
    rest = [b for b in range(m.nbody) if b != torso]
    np.testing.assert_array_equal(d["body_ipos"][:, rest].numpy(),
                                  np.broadcast_to(m.body_ipos[rest].astype(np.float32), (N, len(rest), 3)))

    scale = d["body_mass"][:, 1:] / torch.tensor(m.body_mass[1:], dtype=torch.float32)
    assert (scale >= 0.8 - 1e-6).all() and (scale <= 1.2 + 1e-6).all() and scale.std() > 0.05
    inertia_scale = d["body_inertia"][:, 1:] / torch.tensor(m.body_inertia[1:], dtype=torch.float32)
    torch.testing.assert_close(inertia_scale, scale[:, :, None].expand_as(inertia_scale))
    sub = d["body_mass"].double().clone()
    for b in range(m.nbody - 1, 0, -1):
        sub[:, m.body_parentid[b]] += sub[:, b]
    torch.testing.assert_close(d["body_subtreemass"].double(), sub, rtol=1e-5, atol=1e-4)

    kp = torch.tensor(m.actuator_gainprm[:, 0], dtype=torch.float32)
    kv = torch.tensor(-m.actuator_biasprm[:, 2], dtype=torch.float32)
    kp_scale = d["actuator_gainprm"][:, :, 0] / kp
    assert (kp_scale >= 0.7 - 1e-6).all() and (kp_scale <= 1.3 + 1e-6).all() and kp_scale.std() > 0.1
    torch.testing.assert_close(d["actuator_biasprm"][:, :, 1], -d["actuator_gainprm"][:, :, 0])  # a position servo
    kd_scale = -d["actuator_biasprm"][:, :, 2] / kv
    assert (kd_scale >= 0.5 - 1e-6).all() and (kd_scale <= 1.5 + 1e-6).all() and kd_scale.std() > 0.1

    assert set(d["action_delay"].tolist()) <= {0, 1, 2} and env.action_history.shape[1] == 3
    assert ((d["push_timer"] >= 1.0) & (d["push_timer"] <= 3.0)).all()
    if type(env.sim).__name__ == "MJWarpSim":  # MJWarp steps with these very arrays
        assert env.sim.model.body_ipos.ptr == env.randomizer.buffers.world.body_ipos.ptr


def test_draws_are_reproducible_from_the_seed_and_redrawn_at_reset(env, sim_cfg):
    first = _draws(env)
    same, other = _env(sim_cfg, seed=0), _env(sim_cfg, seed=1)
    same.reset()
    other.reset()
    for k, v in _draws(same).items():
        assert torch.equal(v, first[k]), k
    assert not torch.equal(_draws(other)["default_joint_pos"], first["default_joint_pos"])
    # a partial reset redraws only the envs it resets
    mask = torch.zeros(N, dtype=torch.bool)
    mask[[1, 4]] = True
    same.reset_to(torch.zeros(N, dtype=torch.int32), torch.zeros(N), mask)
    again = _draws(same)
    for k in ("default_joint_pos", "body_ipos", "body_mass", "actuator_gainprm"):
        assert torch.equal(again[k][~mask], first[k][~mask]), k
        assert not torch.equal(again[k][mask], first[k][mask]), k
    for e in (same, other):
        e.close()


def test_state_dict_restores_the_draws_and_the_random_state(env, sim_cfg):
    state = env.state_dict()
    twin = _env(sim_cfg, seed=7)
    twin.load_state_dict(state)
    for k, v in _draws(env).items():
        assert torch.equal(_draws(twin)[k], v), k
    all_envs = torch.ones(N, dtype=torch.bool)
    for e in (env, twin):  # the next draws agree too
        e.randomizer.reset(wp.from_torch(all_envs, dtype=wp.bool))
    for k, v in _draws(env).items():
        assert torch.equal(_draws(twin)[k], v), k
    twin.close()


def test_seeded_episodes_draw_by_key_whatever_their_env_slot(sim_cfg):
    """``seed_episodes``: the same key draws the same randomization, observation noise and reset noise in any slot,
    after any earlier episodes, and over the steps that follow; other keys draw otherwise."""
    keys = [(0, 0), (0, 1), (0, 0), (1, 0), (2, 3), (0, 1)]

    def play(e, ks):
        e.reset()
        e.step(torch.zeros(N, e.num_actions))  # the streams move on from the seed (and the reset-noise ramp)
        e.seed_episodes(ks)
        obs = [e.reset_to(torch.zeros(N, dtype=torch.int32), torch.zeros(N))["obs"].clone()]
        draws = _draws(e)
        for _ in range(3):
            obs.append(e.step(torch.zeros(N, e.num_actions))[0]["obs"].clone())
        return torch.stack(obs, 1), draws  # [N, steps, obs], {name: [N, ...]}

    env = _env(sim_cfg, obs_noise=True)
    obs, draws = play(env, keys)
    for a, b in ((0, 2), (1, 5)):  # one key, two slots
        assert torch.equal(obs[a], obs[b])
        for k, v in draws.items():
            assert torch.equal(v[a], v[b]), k
    assert not torch.equal(obs[0], obs[1]) and not torch.equal(draws["default_joint_pos"][0],
                                                                draws["default_joint_pos"][1])
    order = [3, 0, 4, 1, 5, 2]  # the same keys in other slots, in a fresh env of the same seed
    twin = _env(sim_cfg, obs_noise=True)
    twin_obs, twin_draws = play(twin, [keys[i] for i in order])
    assert torch.equal(twin_obs, obs[order])
    for k, v in draws.items():
        assert torch.equal(twin_draws[k], v[order]), k
    other_seed = _env(sim_cfg, seed=1, obs_noise=True)
    assert not torch.equal(play(other_seed, keys)[0], obs)
    with pytest.raises(ValueError, match="5 keys for 6 envs"):
        env.seed_episodes(keys[:5])
    for e in (env, twin, other_seed):
        e.close()


def test_pushes_come_on_their_interval(sim_cfg):
    """Interval 0.1 s = 5 control steps: every 5th step the push adds exactly the drawn kick to the root's
    velocity (here +0.5 m/s along world x, 0.3 rad/s about world z), nothing in between; ``env.step`` pushes
    on the same schedule."""
    kick = RandomizationCfg(push_interval_s=[0.1, 0.1], push_lin_vel_lo=[0.5, 0.0, 0.0],
                            push_lin_vel_hi=[0.5, 0.0, 0.0], push_ang_vel_lo=[0.0, 0.0, 0.3],
                            push_ang_vel_hi=[0.0, 0.0, 0.3])
    never = TerminationCfg(anchor_height=1e9, anchor_ori=1e9, ee_height=1e9)  # no resets: one timer per env
    env = _env(sim_cfg, randomization=kick, init_start_prob=1.0, terminations=never, truncate_at_clip_end=False)
    assert env.randomizer.pushes and not env.randomizer.model_terms
    env.reset_to(torch.zeros(N, dtype=torch.int32), torch.zeros(N))
    for step in range(1, 13):
        env.policy_actions.zero_()
        apply_actions(env.params, env.ref_wp, env.buf, env.sim.state)
        before = env.sim.qvel.clone()
        env.randomizer.push(env.sim.state)
        dv = env.sim.qvel - before
        quat = R.f64(env.sim.qpos[:, 3:7])
        env.sim.step()
        pushed = step % 5 == 0
        torch.testing.assert_close(dv[:, 0:3], torch.tensor([0.5 * pushed, 0.0, 0.0]).expand(N, 3), atol=1e-6, rtol=0)
        # the free joint's angular velocity is in the root frame: the world-z kick, rotated
        want_w = R.q_rotate_inv(quat, torch.tensor([0.0, 0.0, 0.3 * pushed], dtype=torch.float64).expand(N, 3))
        torch.testing.assert_close(R.f64(dv[:, 3:6]), want_w, atol=1e-5, rtol=0)
        assert (dv[:, 6:] == 0).all()
        assert torch.equal(env.randomizer.push_count, torch.full((N,), step // 5, dtype=torch.int32))
    env.reset_to(torch.zeros(N, dtype=torch.int32), torch.zeros(N))  # the timer restarts at a reset
    env.randomizer.push_count.zero_()
    for step in range(1, 11):
        env.step(torch.zeros(N, env.num_actions))
        assert torch.equal(env.randomizer.push_count, torch.full((N,), step // 5, dtype=torch.int32)), step
    env.close()


def test_action_delay_and_offset_pose(sim_cfg):
    """``action_delay_steps=[2, 2]``: the actuators follow the action of two steps before, around each env's
    offset default pose; a reset clears the history (the first two targets carry no action: the offset alone)."""
    r = RandomizationCfg(joint_pos_offset=[-0.1, 0.1], action_delay_steps=[2, 2])
    env = _env(sim_cfg, randomization=r)
    env.reset()
    assert (env.action_delay == 2).all()
    scale = torch.tensor(env.sim.robot.action_scale, dtype=torch.float32)
    g = torch.Generator().manual_seed(3)
    actions = [torch.randn(N, env.num_actions, generator=g) for _ in range(5)]
    for t, a in enumerate(actions):
        env.policy_actions.copy_(a)
        apply_actions(env.params, env.ref_wp, env.buf, env.sim.state)
        delayed = actions[t - 2] if t >= 2 else torch.zeros_like(a)
        ref_q = env.ref.dof_pos[:, 1 + list(env.cfg.future_steps).index(1)]
        want, _ = R.apply_actions(delayed, env.default_joint_pos, scale, env.cfg.action_clip, ref_q,
                                  env.cfg.action_reference, torch.tensor(env.sim.robot.default_joint_pos))
        torch.testing.assert_close(R.f64(env.sim.ctrl), want, atol=1e-5, rtol=0)
        assert torch.equal(env.actions, a.clamp(-env.cfg.action_clip, env.cfg.action_clip))  # observed: undelayed
    env.close()


def test_noise_reaches_only_the_actor(sim_cfg):
    """Same seed, with and without noise: identical physics, rewards and critic rows; the actor's rows
    differ by at most the spec's scales (checked per column against the float64 bounds in the kernel tests)."""
    envs = [_env(sim_cfg, randomization=DeployRandomizationCfg(), obs_noise=noise) for noise in (True, False)]
    outs = [e.reset_to(torch.zeros(N, dtype=torch.int32), torch.full((N,), 0.5)) for e in envs]
    assert not torch.equal(outs[0]["obs"], outs[1]["obs"])
    for step in range(6):
        steps = []
        for e in envs:
            torch.manual_seed(step)  # the start-state sampler (torch's RNG) draws the same resets for both
            steps.append(e.step(torch.zeros(N, e.num_actions)))
        (o_noisy, r_noisy, *_), (o_clean, r_clean, *_) = steps
        assert torch.equal(o_noisy["critic_obs"], o_clean["critic_obs"]) and torch.equal(r_noisy, r_clean)
        assert torch.equal(o_clean["obs"], o_clean["critic_obs"][:, :envs[1].actor_dim])
        diff = (o_noisy["obs"] - o_clean["obs"]).abs()
        scales = wp.to_torch(envs[0].params.obs_noise)
        assert (diff <= scales + 1e-5).all() and (diff > 0).any()
        assert torch.equal(steps[0][4]["terminal_obs"]["critic_obs"], steps[1][4]["terminal_obs"]["critic_obs"])
    for e in envs:
        e.close()


def test_randomized_noisy_step_has_no_host_sync(env, monkeypatch):
    noisy = replace(env.cfg, obs_noise=True, observations="deploy")
    e = HumanoidImitationEnv(noisy, num_envs=N, device="cpu", seed=0, sim_cfg=env.sim.cfg)
    e.reset()
    e.step(torch.zeros(N, e.num_actions))
    with SyncCounter(monkeypatch) as counter:
        for _ in range(3):
            e.step(torch.zeros(N, e.num_actions))
        e.reset()
    assert sum(counter.counts.values()) == 0, counter.counts
    e.close()


def test_deploy_preset_composes():
    from simppo.config import register_configs
    from simppo.paths import CONFIG_DIR

    register_configs()
    cfgs = {}
    for name, overrides in (("default", []), ("preset", ["+preset=deploy"]),
                            ("groups", ["env/randomization=deploy", "env.obs_noise=true", "env.observations=deploy"])):
        with initialize_config_dir(version_base=None, config_dir=str(CONFIG_DIR)):
            node = compose("train", overrides=[*overrides, "experiment_name=x"])
        cfgs[name] = OmegaConf.to_object(node).env
    assert cfgs["default"].randomization == RandomizationCfg() and not cfgs["default"].obs_noise
    assert cfgs["default"].observations == "default"
    assert cfgs["preset"] == cfgs["groups"]
    assert cfgs["preset"].randomization == DeployRandomizationCfg() and cfgs["preset"].obs_noise
    assert cfgs["preset"].observations == "deploy"
