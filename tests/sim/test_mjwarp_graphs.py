"""MJWarpSim's captured launch sequences (step, reset, forward, kinematics), its persistent buffers and overflow bits.

Warp captures graphs on the CPU too (its API capture, replayed in C++), so the capture / replay code path
that CUDA uses by default is checked here by switching ``use_graph`` on for a CPU sim: it must match the
eager launches bit for bit, capture must not change the state, and replays must not allocate.
"""

import mujoco_warp as mjw
import numpy as np
import pytest
import torch
import warp as wp

from simppo.kernels.sim.overflow import OverflowBuffers, collect_overflow
from simppo.kernels.sim.solver_stats import SolverStatsBuffers, accumulate_solver_stats
from simppo.sim import MJWarpSim, SimCfg
from tests.sim.warp_allocs import WarpAllocCounter

N = 4
VIEWS = ("qpos", "qvel", "xpos", "xquat", "body_lin_vel_w", "body_ang_vel_w", "unstable", "num_unstable",
         "penalized_contacts", "foot_contact", "foot_contact_force", "overflow")


def _sim(graph: bool) -> MJWarpSim:
    s = MJWarpSim("g1", SimCfg(), num_envs=N, device="cpu")
    assert not s.use_graph and s.model.opt.graph_conditional  # CPU default: eager, the solver loop untouched
    s.use_graph = graph
    return s


def _assert_same(a: MJWarpSim, b: MJWarpSim, what: str) -> None:
    for name in VIEWS:
        assert torch.equal(getattr(a, name), getattr(b, name)), f"{what}: {name} differs"


def _drive(s: MJWarpSim, steps: int = 3) -> None:
    """A deterministic little episode: perturbed start, noisy ctrl, a partial reset, forward, kinematics."""
    g = torch.Generator().manual_seed(0)
    s.qpos[:, 2] += 0.05
    s.kinematics()
    for _ in range(steps):
        s.ctrl.copy_(torch.from_numpy(s.home_ctrl).float() + 0.2 * torch.randn(N, s.nu, generator=g))
        s.step()
    mask = torch.tensor([True, False, True, False])
    qpos = s.qpos.clone()
    qpos[:, 0] += 0.3
    s.reset_worlds(mask, qpos, 0.1 * torch.randn(N, s.nv, generator=g))
    s.step()
    s.forward()


def test_captured_launches_match_eager_launches_bit_for_bit():
    eager, graphed = _sim(False), _sim(True)
    before = {k: getattr(graphed, k).clone() for k in VIEWS}
    graphed.warm_up()  # captures every graph; capturing records, it does not run
    assert sorted(graphed._graphs) == ["forward", "kinematics", "reset", "step"]
    for k, v in before.items():
        assert torch.equal(getattr(graphed, k), v), f"warm_up changed {k}"
    _drive(eager)
    _drive(graphed)
    _assert_same(eager, graphed, "graph vs eager")


def test_step_and_reset_allocate_nothing_after_warm_up(monkeypatch):
    """Persistent reset buffers and views: simppo's launches allocate nothing per step or reset. Eagerly,
    mujoco_warp's solver allocates its scratch inside ``step`` (that is why CUDA capture needs Warp's memory
    pool); replaying captured graphs allocates nothing at all."""
    counter = WarpAllocCounter(monkeypatch)
    mask = torch.tensor([True, False, False, True])
    for graph in (False, True):
        s = _sim(graph)
        s.warm_up()
        s.step()
        s.reset_worlds(mask, s.qpos.clone(), s.qvel.clone())
        with counter:
            for _ in range(100):
                s.step()
                s.reset_worlds(mask, s.qpos, s.qvel)
        assert counter.counts["simppo"] == 0, dict(counter.sites)
        if graph:
            assert counter.counts["mujoco_warp"] == 0, counter.counts
        else:
            assert counter.counts["mujoco_warp"] >= 100, counter.counts  # the counter sees mjw.step's scratch


def test_overflow_bits_are_per_step_and_counted_in_metrics():
    s = _sim(False)
    nefc, iters = int(mjw.OverflowType.NEFC), int(mjw.OverflowType.ITERATIONS)
    s.data.overflow.assign(np.array([0, nefc, iters, nefc | iters], dtype=np.int32))
    s.forward()  # every control step / forward reads the bits out and clears them
    assert s.overflow.tolist() == [0, nefc, iters, nefc | iters]
    assert s.data.overflow.numpy().tolist() == [0, 0, 0, 0]
    assert int(s.metrics()["env/overflow"]) == 2  # solver iteration caps are not counted
    s.step()
    assert int(s.metrics()["env/overflow"]) == 0


def test_overflow_kernel_matches_numpy():
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 1 << 12, size=64).astype(np.int32)
    bits[::5] = 0
    counted = int(mjw.OverflowType.ALL) & ~int(mjw.OverflowType.ITERATIONS | mjw.OverflowType.LS_ITERATIONS)
    b = OverflowBuffers()
    b.overflow = wp.array(bits, dtype=wp.int32, device="cpu")
    b.counted_bits = counted
    b.step_overflow_out = wp.zeros(64, dtype=wp.int32, device="cpu")
    b.num_overflow_out = wp.array([3], dtype=wp.int32, device="cpu")  # accumulates onto what is there
    collect_overflow(b)
    np.testing.assert_array_equal(b.step_overflow_out.numpy(), bits)
    np.testing.assert_array_equal(b.overflow.numpy(), np.zeros(64, np.int32))
    assert int(b.num_overflow_out.numpy()[0]) == 3 + int(((bits & counted) != 0).sum())


def test_solver_stats_kernel_matches_numpy():
    rng = np.random.default_rng(1)
    niter = rng.integers(0, 60, size=37).astype(np.int32)
    b = SolverStatsBuffers()
    b.solver_niter = wp.array(niter, dtype=wp.int32, device="cpu")
    b.iterations_out = wp.array([5.0], dtype=wp.float64, device="cpu")  # accumulates onto what is there
    b.max_out = wp.array([70], dtype=wp.int32, device="cpu")
    accumulate_solver_stats(b)
    assert b.iterations_out.numpy()[0] == 5.0 + niter.sum()
    assert int(b.max_out.numpy()[0]) == 70  # a larger earlier max stays
    b.max_out.zero_()
    accumulate_solver_stats(b)
    assert b.iterations_out.numpy()[0] == 5.0 + 2 * niter.sum()
    assert int(b.max_out.numpy()[0]) == niter.max()


@pytest.mark.parametrize("graph", [False, True])
def test_solver_iterations_of_every_physics_step_reach_metrics(graph):
    """The sim's solver metrics equal MJWarp's ``solver_niter`` read after each of the decimated physics steps
    of a twin stepped by hand from the same state (captured and eager alike)."""
    s, twin = _sim(graph), _sim(False)
    g = torch.Generator().manual_seed(3)
    s.qpos[:, 2] += 0.05
    twin.qpos.copy_(s.qpos)
    s.kinematics()
    twin.kinematics()
    s.metrics()  # zero what construction and forward left
    total, largest = 0, 0
    for _ in range(3):
        ctrl = torch.from_numpy(s.home_ctrl).float() + 0.5 * torch.randn(N, s.nu, generator=g)
        s.ctrl.copy_(ctrl)
        twin.ctrl.copy_(ctrl)
        s.step()
        for _ in range(twin.decimation):
            mjw.step(twin.model, twin.data)
            niter = twin.data.solver_niter.numpy()
            total, largest = total + int(niter.sum()), max(largest, int(niter.max()))
    assert torch.equal(s.qpos, twin.qpos)
    m = s.metrics()
    assert largest > 0
    assert float(m["sim/solver_iterations"]) == pytest.approx(total / (3 * s.decimation * N), rel=1e-6)
    assert int(m["sim/solver_iterations_max"]) == largest
    again = s.metrics()  # read once: reset
    assert float(again["sim/solver_iterations"]) == 0.0 and int(again["sim/solver_iterations_max"]) == 0


@pytest.mark.parametrize("graph", [False, True])
def test_load_state_dict_recomputes_views(graph):
    a, b = _sim(False), _sim(graph)
    _drive(a)
    b.load_state_dict(a.state_dict())
    for name in ("qpos", "qvel", "xpos", "xquat", "body_lin_vel_w", "body_ang_vel_w", "unstable"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name
