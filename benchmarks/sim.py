"""Physics throughput of simppo's G1: MuJoCo Warp (batched) vs MuJoCo C on a thread pool, side by side.

    python benchmarks/sim.py [--nworld 256] [--steps 10] [--threads N] [--device auto]

Every world starts from the home keyframe with ctrl = home pose (the robot slowly tips over with the
soft gains: realistic contact load); each measurement runs ``--steps`` control steps of 4 physics
steps. Prints physics steps/s of:

* ``mjwarp``: bare ``mjw.step`` (CUDA graph on GPU); ``mujoco``: the threads of ``sim=mujoco``
  doing only ``mj_setState`` / ``mj_step`` / ``mj_getState`` (raw physics), and ``mujoco.rollout``
  with as many threads (the alternative design) → ``mujoco/mjwarp = X.XX``;
* the full backend ``sim.step()`` (physics + views + contacts + guard) → ``step mujoco/mjwarp = X.XX``;
* single-threaded MuJoCo C for reference;
* the cost of ``sim.self_collision`` (default off): ``sim.step()`` throughput without it over with it, per
  backend → ``self-collision cost mjwarp = X%``;
* ``sim=mjx`` (when the ``[mjx]`` extra is installed; ``--no-mjx`` skips it): build time, the first step (JAX's
  compilation, or its disk cache's load) apart from the steady-state ``sim.step()`` → ``step mjx/mujoco = X.XX``.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import os
import time
from concurrent.futures import ThreadPoolExecutor

import mujoco
import mujoco_warp as mjw
import numpy as np
import warp as wp
from mujoco import rollout

from simppo.sim import MJWarpSim, MuJoCoSim, SimCfg
from simppo.sim.mujoco_c import STATE_SPEC
from simppo.utils.device import resolve_device

DECIMATION = 4


def bench_c(mjm: mujoco.MjModel, steps: int) -> float:
    d = mujoco.MjData(mjm)
    mujoco.mj_resetDataKeyframe(mjm, d, mjm.key("home").id)
    t = time.perf_counter()
    for _ in range(steps):
        mujoco.mj_step(mjm, d, DECIMATION)
    return steps * DECIMATION / (time.perf_counter() - t)


def bench_mjwarp_raw(nworld: int, steps: int, device: str) -> float:
    sim = MJWarpSim("g1", SimCfg(decimation=1), num_envs=nworld, device=device)
    with wp.ScopedDevice(sim.wp_device):
        graph = None
        if sim.use_graph:
            with wp.ScopedCapture() as cap:
                mjw.step(sim.model, sim.data)
            graph = cap.graph
        for _ in range(2):  # warm-up (compilation is cached by Warp)
            wp.capture_launch(graph) if graph else mjw.step(sim.model, sim.data)
        sim.reset_all_home()
        wp.synchronize_device()
        t = time.perf_counter()
        for _ in range(steps * DECIMATION):
            wp.capture_launch(graph) if graph else mjw.step(sim.model, sim.data)
        wp.synchronize_device()
        dt = time.perf_counter() - t
    return nworld * steps * DECIMATION / dt


def bench_mujoco_raw(sim: MuJoCoSim, steps: int) -> float:
    """The thread pool design of ``sim=mujoco`` doing physics only (no views, no contacts)."""
    m, n, rows = sim.mj_model, sim.num_envs, list(sim.state64)

    def work(d, worlds):
        for w in worlds:
            if w >= n:
                return
            mujoco.mj_setState(m, d, rows[w], STATE_SPEC)
            mujoco.mj_step(m, d, DECIMATION)
            mujoco.mj_getState(m, d, rows[w], STATE_SPEC)

    sim.reset_all_home()
    with ThreadPoolExecutor(sim.threads) as pool:
        t = time.perf_counter()
        for _ in range(steps):
            worlds = itertools.count()
            for f in [pool.submit(work, d, worlds) for d in sim.data]:
                f.result()
        dt = time.perf_counter() - t
    return n * steps * DECIMATION / dt


def bench_rollout(sim: MuJoCoSim, steps: int) -> float:
    """``mujoco.rollout`` (persistent pool, one MjData per thread), same start state and ctrl."""
    m, n = sim.mj_model, sim.num_envs
    full = int(mujoco.mjtState.mjSTATE_FULLPHYSICS)
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, m.key("home").id)
    state0 = np.zeros((n, mujoco.mj_stateSize(m, full)))
    mujoco.mj_getState(m, d, state0[0], full)
    state0[1:] = state0[0]
    ctrl = np.repeat(np.repeat(sim.home_ctrl[None, None], n, 0), DECIMATION, 1)
    out = np.zeros((n, DECIMATION, state0.shape[1]))
    with rollout.Rollout(nthread=sim.threads) as r:
        t = time.perf_counter()
        for _ in range(steps):
            r.rollout(m, sim.data, state0, ctrl, nstep=DECIMATION, state=out)
            state0[:] = out[:, -1]
        dt = time.perf_counter() - t
    return n * steps * DECIMATION / dt


def bench_step(sim, steps: int) -> float:
    sim.reset_all_home()
    sim.step()  # warm-up
    sim.reset_all_home()
    wp.synchronize_device(sim.wp_device)
    t = time.perf_counter()
    for _ in range(steps):
        sim.step()
    wp.synchronize_device(sim.wp_device)
    return sim.num_envs * steps * sim.decimation / (time.perf_counter() - t)


def bench_mjx(n: int, steps: int, device: str, step_c: float) -> None:
    from simppo.sim.mjx import MJXSim

    t = time.perf_counter()
    sim = MJXSim("g1", SimCfg(name="mjx"), num_envs=n, device=device)
    built = time.perf_counter() - t
    sim.reset_all_home()
    t = time.perf_counter()
    sim.step()
    first = time.perf_counter() - t
    step_x = bench_step(sim, steps)
    print(f"nworld={n}  mjx: built in {built:.1f} s, first step (compile or cache load) {first:.1f} s, "
          f"sim.step() physics steps/s {step_x:10.0f}")
    print(f"step mjx/mujoco = {step_x / step_c:.3f}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nworld", type=int, nargs="+", default=[256])
    ap.add_argument("--steps", type=int, default=10, help="control steps (of 4 physics steps) per measurement")
    ap.add_argument("--threads", type=int, default=None, help="MuJoCo C threads (default: all cores)")
    ap.add_argument("--device", default="auto", help="device of mjwarp and mjx (mujoco always runs on the CPU)")
    ap.add_argument("--no-mjx", action="store_true", help="skip the sim=mjx rows")
    args = ap.parse_args(argv)
    device = resolve_device(args.device)
    sim0 = MuJoCoSim("g1", SimCfg(threads=1), num_envs=1)
    print(f"mjwarp device={device}  mujoco threads={args.threads or os.cpu_count()}  "
          f"model=g1 (nq={sim0.nq}, nv={sim0.nv}, dt={sim0.physics_dt})  control steps={args.steps}")
    print(f"mujoco_c (1 thread, 1 world): {bench_c(sim0.mj_model, 10 * args.steps):10.0f} physics steps/s")
    for n in args.nworld:
        wsim = MJWarpSim("g1", SimCfg(), num_envs=n, device=device)
        csim = MuJoCoSim("g1", SimCfg(threads=args.threads), num_envs=n)
        raw_w = bench_mjwarp_raw(n, args.steps, device)
        raw_c = bench_mujoco_raw(csim, args.steps)
        raw_r = bench_rollout(csim, args.steps)
        step_w, step_c = bench_step(wsim, args.steps), bench_step(csim, args.steps)
        print(f"nworld={n}  raw physics steps/s: mjwarp {raw_w:10.0f}  mujoco {raw_c:10.0f}  "
              f"(mujoco.rollout {raw_r:.0f})")
        print(f"nworld={n}  sim.step() physics steps/s: mjwarp {step_w:10.0f}  mujoco {step_c:10.0f}")
        print(f"mujoco/mjwarp = {raw_c / raw_w:.2f}")
        print(f"step mujoco/mjwarp = {step_c / step_w:.2f}")
        if not args.no_mjx and importlib.util.find_spec("jax") is not None:
            bench_mjx(n, args.steps, device, step_c)
        csim.close()
        wsim_on = MJWarpSim("g1", SimCfg(self_collision=True), num_envs=n, device=device)
        csim_on = MuJoCoSim("g1", SimCfg(threads=args.threads, self_collision=True), num_envs=n)
        csim = MuJoCoSim("g1", SimCfg(threads=args.threads), num_envs=n)
        for name, on, off in (("mjwarp", wsim_on, wsim), ("mujoco", csim_on, csim)):
            s_off, s_on = bench_step(off, args.steps), bench_step(on, args.steps)
            print(f"nworld={n}  {name} sim.step() physics steps/s: floor-only {s_off:10.0f}  "
                  f"self-collision {s_on:10.0f}")
            print(f"self-collision cost {name} = {100 * (s_off / s_on - 1):.1f}%")


if __name__ == "__main__":
    main()
