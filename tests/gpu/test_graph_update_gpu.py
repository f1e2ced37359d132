"""``agent.graph_update`` on a GPU: the minibatch step captured once and replayed gives the eager step's parameters,
and a replay allocates nothing."""

import time

import torch

from simppo.agent.ppo import PPO
from simppo.envs.pendulum import PendulumEnv, PendulumEnvCfg
from simppo.utils.device import fabric_for
from tests.gpu import GPU_ONLY
from tests.helpers import small_agent_cfg

pytestmark = GPU_ONLY


def _agent(graph: bool, **cfg) -> PPO:
    torch.manual_seed(0)
    agent = PPO(fabric_for("cuda:0"), PendulumEnv(PendulumEnvCfg(), num_envs=4096, seed=0, device="cuda:0"),
                small_agent_cfg(num_steps=16, graph_update=graph, update_precision="fp32", **cfg))
    agent.setup()
    return agent


def _params(agent: PPO) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in agent.model.parameters()])


def test_captured_step_matches_eager_and_replays_without_allocating(gpu_report):
    for cfg in ({}, {"lr_schedule": "fixed", "target_kl": 1e-4}):
        eager, graphed = _agent(False, **cfg), _agent(True, **cfg)
        assert graphed.algorithm.capture_update
        for _ in range(3):
            for a in (eager, graphed):
                a.collect_rollout()
                a.optimize_model()
        assert graphed.algorithm._minibatch_step.graph is not None
        diff = float((_params(eager) - _params(graphed)).abs().max())
        gpu_report(f"gpu/graph_update_max_param_diff{'_target_kl' if cfg else ''}", f"{diff:.3g}")
        assert diff < 1e-5, diff
        torch.testing.assert_close(graphed.algorithm.actor_lr, eager.algorithm.actor_lr)
    graphed.collect_rollout()
    torch.cuda.synchronize()
    before = torch.cuda.memory_stats()["allocation.all.allocated"]
    graphed.optimize_model()
    torch.cuda.synchronize()
    gpu_report("gpu/graph_update_allocations_per_update",
               torch.cuda.memory_stats()["allocation.all.allocated"] - before)


def test_captured_update_is_faster(gpu_report):
    times = {}
    for graph in (False, True):
        agent = _agent(graph)
        agent.collect_rollout()
        agent.optimize_model()  # capture / warm-up
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(5):
            agent.optimize_model()
        torch.cuda.synchronize()
        times[graph] = (time.perf_counter() - t0) / 5
    gpu_report("gpu/update_eager_ms", f"{1e3 * times[False]:.2f}")
    gpu_report("gpu/update_graph_ms", f"{1e3 * times[True]:.2f}")
    gpu_report("gpu/update_graph_speedup", f"{times[False] / times[True]:.2f}")
