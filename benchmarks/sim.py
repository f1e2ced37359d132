"""Raw physics throughput of simppo's G1: MuJoCo Warp (batched) vs MuJoCo C (single thread).

    python benchmarks/sim.py --nworld 64 256 1024 --steps 50 [--device auto]

Both start from the home keyframe with ctrl = home pose (the robot slowly tips over with the
table's soft gains: realistic contact load). Prints physics steps/s and the ratios
``mjwarp(nworld=N)/mujoco_c``.
"""

from __future__ import annotations

import argparse
import time

import mujoco
import mujoco_warp as mjw
import warp as wp

from simppo.sim import MJWarpSim, MJWarpSimCfg
from simppo.utils.device import resolve_device


def bench_c(mjm: mujoco.MjModel, steps: int) -> float:
    d = mujoco.MjData(mjm)
    mujoco.mj_resetDataKeyframe(mjm, d, mjm.key("home").id)
    for _ in range(10):
        mujoco.mj_step(mjm, d)
    t = time.perf_counter()
    for _ in range(steps):
        mujoco.mj_step(mjm, d)
    return steps / (time.perf_counter() - t)


def bench_mjwarp(nworld: int, steps: int, device: str) -> float:
    sim = MJWarpSim("g1", MJWarpSimCfg(decimation=1), num_envs=nworld, device=device)
    with wp.ScopedDevice(sim.wp_device):
        graph = None
        if sim.use_graph:
            with wp.ScopedCapture() as cap:
                mjw.step(sim.model, sim.data)
            graph = cap.graph
        for _ in range(2):  # warm-up (compilation is cached by Warp)
            wp.capture_launch(graph) if graph else mjw.step(sim.model, sim.data)
        wp.synchronize_device()
        t = time.perf_counter()
        for _ in range(steps):
            wp.capture_launch(graph) if graph else mjw.step(sim.model, sim.data)
        wp.synchronize_device()
        dt = time.perf_counter() - t
    return nworld * steps / dt


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nworld", type=int, nargs="+", default=[64, 256, 1024])
    ap.add_argument("--steps", type=int, default=50, help="batched steps per nworld")
    ap.add_argument("--c-steps", type=int, default=4000, help="MuJoCo C steps")
    ap.add_argument("--device", default="auto")
    args = ap.parse_args(argv)
    device = resolve_device(args.device)
    sim0 = MJWarpSim("g1", MJWarpSimCfg(decimation=1), num_envs=1, device=device)
    c_sps = bench_c(sim0.mj_model, args.c_steps)
    print(f"device={device}  model=g1 (nq={sim0.nq}, nv={sim0.nv}, dt={sim0.physics_dt})")
    print(f"mujoco_c (1 thread): {c_sps:12.0f} physics steps/s")
    for n in args.nworld:
        sps = bench_mjwarp(n, args.steps, device)
        tag = f"mjwarp(nworld={n})"
        print(f"{tag}: {sps:12.0f} physics steps/s   {tag}/mujoco_c = {sps / c_sps:.2f}")


if __name__ == "__main__":
    main()
