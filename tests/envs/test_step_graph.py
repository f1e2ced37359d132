"""``env.graph_step``: the whole control step captured as one graph (MJWarp; Warp replays it in C++ on the CPU,
as a CUDA graph on a GPU) gives exactly the eager step's observations, rewards, resets and simulator state."""

from dataclasses import replace

import pytest
import torch

from simppo.envs.imitation import HumanoidImitationEnv, HumanoidImitationEnvCfg
from simppo.envs.imitation.config import DeployRandomizationCfg, RootAssistCfg, TerminationCfg
from simppo.sim import SimCfg
from tests.helpers import SyncCounter

N = 8
DEPLOY = replace(HumanoidImitationEnvCfg(), observations="deploy", obs_noise=True,
                 randomization=DeployRandomizationCfg(push_interval_s=[0.04, 0.1], action_delay_steps=[0, 1]),
                 assist=RootAssistCfg(start=0.5, anneal_steps=20))  # held for the first half of the steps
COMPARED = ("obs_full", "obs_actor", "terminal_obs_full", "reward", "reward_terms", "terminated", "truncated",
            "done", "done_stats", "motion_ids", "times", "episode_length", "step_unstable", "action_history",
            "assist_alpha", "assist_rate")
# one harness share per motion, faded by the share of each motion's episodes ending on a termination (drift ends
# episodes); it reads terminations and time-outs, a superset of what fade=survival reads
PER_MOTION = replace(HumanoidImitationEnvCfg(), terminations=TerminationCfg(body_pos=0.3),
                     assist=RootAssistCfg(start=0.5, anneal_steps=20, fade="success", ema=0.5))


def _env(cfg: HumanoidImitationEnvCfg, graph: bool, backend: str = "mjwarp") -> HumanoidImitationEnv:
    env = HumanoidImitationEnv(replace(cfg, graph_step=graph), num_envs=N, device="cpu",
                               sim_cfg=SimCfg(name=backend), seed=5)
    env.reset()
    return env


def _actions(num_actions: int, steps: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(2)
    return [2.0 * torch.randn(N, num_actions, generator=g) for _ in range(steps)]


def _assert_same(a: HumanoidImitationEnv, b: HumanoidImitationEnv) -> None:
    for key in COMPARED:
        assert torch.equal(getattr(a, key), getattr(b, key)), key
    assert torch.equal(a.sim.qpos, b.sim.qpos) and torch.equal(a.sim.qvel, b.sim.qvel)
    assert torch.equal(a.sampler.failure_ema, b.sampler.failure_ema) and torch.equal(a.sampler.rng, b.sampler.rng)


@pytest.mark.parametrize("cfg", [HumanoidImitationEnvCfg(), DEPLOY, PER_MOTION],
                         ids=["default", "deploy", "per_motion"])
def test_graph_and_eager_steps_agree_exactly(cfg):
    eager, graph = _env(cfg, False), _env(cfg, True)
    resets = torch.zeros(N, dtype=torch.int32)
    for a in _actions(eager.num_actions, 40):
        eager.step(a)
        graph.step(a)
        resets += eager.done
    assert eager._step_graph is None and graph._step_graph is not None
    assert int(resets.sum()) >= 4, resets  # the resets ran inside the graph
    _assert_same(eager, graph)
    m_eager, m_graph = eager.metrics(), graph.metrics()
    for key in m_eager:
        torch.testing.assert_close(m_graph[key], m_eager[key], rtol=1e-6, atol=0, msg=key)


def test_a_replaced_simulator_buffer_recaptures_and_stays_exact():
    eager, graph = _env(HumanoidImitationEnvCfg(), False), _env(HumanoidImitationEnvCfg(), True)
    acts = _actions(eager.num_actions, 12)
    for a in acts[:6]:
        eager.step(a)
        graph.step(a)
    first = graph._step_graph
    graph.sim.graph_epoch += 1  # as enable_world_params does when it swaps model fields
    for a in acts[6:]:
        eager.step(a)
        graph.step(a)
    assert graph._step_graph is not None and graph._step_graph is not first
    _assert_same(eager, graph)


def test_graph_steps_read_nothing_back_to_the_host(monkeypatch):
    env = _env(HumanoidImitationEnvCfg(), True)
    acts = _actions(env.num_actions, 5)
    for a in acts[:2]:
        env.step(a)
    assert env._step_graph is not None
    counter = SyncCounter(monkeypatch)
    with counter:
        for a in acts[2:]:
            env.step(a)
    assert counter.total == 0, counter.counts


def test_a_failed_capture_warns_once_and_steps_eagerly(monkeypatch):
    eager, env = _env(HumanoidImitationEnvCfg(), False), _env(HumanoidImitationEnvCfg(), True)

    def broken():
        raise RuntimeError("no capture here")

    monkeypatch.setattr(env, "capture_step", broken)
    acts = _actions(env.num_actions, 6)
    with pytest.warns(RuntimeWarning, match="env.graph_step: capturing the env step failed"):
        for a in acts:
            eager.step(a)
            env.step(a)
    assert env._step_graph is None
    _assert_same(eager, env)


@pytest.mark.parametrize("backend, cfg", [("mujoco", HumanoidImitationEnvCfg()),
                                          ("mjwarp", replace(HumanoidImitationEnvCfg(), kinematic_replay=True))],
                         ids=["host-stepped-backend", "kinematic-replay"])
def test_steps_stay_eager_where_a_graph_cannot_hold_them(backend, cfg):
    env = _env(cfg, True, backend)
    for a in _actions(env.num_actions, 3):
        env.step(a)
    assert env._step_graph is None
