"""What the constraint solver's iteration cap and tolerance change, measured before any default moves.

From the same states (frames spread over the shipped clips, the reference's joint angles as PD targets plus fresh
noise each control step, as a tracking policy drives the robot), every setting of ``sim.solver_iterations`` x
``sim.solver_tolerance`` on MJWarp is stepped beside a converged float64 reference (MuJoCo C, 100 iterations,
tolerance 1e-12) and MuJoCo C at the shipped settings. Printed per setting: the largest and mean deviation of the
root position (mm) and of the joint angles (mrad) from the reference after each horizon, MJWarp's solver iterations
per physics step (mean over worlds and steps, and the largest, which sets the batch's loop count), and its control
steps/s on this device, with the ratio to the shipped setting measured in the same run.

    python benchmarks/solver_study.py [--worlds 64] [--steps 25] [--device cpu]
"""

from __future__ import annotations

import argparse
import itertools
import time

import torch

from simppo.motion import DEFAULT_MOTIONS, MotionLib
from simppo.sim import MJWarpSim, MuJoCoSim, SimCfg
from simppo.utils.device import init_warp


def start_states(n: int, device: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """qpos / qvel / PD targets [n, ...] of frames spread over every shipped clip."""
    lib = MotionLib([str(DEFAULT_MOTIONS)], device="cpu")
    ids = torch.arange(n) % lib.num_motions
    times = (torch.arange(n) // lib.num_motions + 0.5) / (n // lib.num_motions + 1) * lib.motion_lengths[ids]
    st = lib.get_motion_state(ids.int(), times.float())
    root_ang_b = quat_rotate_inverse(st.root_quat[:, 0], st.root_ang_vel_w[:, 0])
    qpos = torch.cat([st.root_pos[:, 0], st.root_quat[:, 0], st.dof_pos[:, 0]], 1)
    qvel = torch.cat([st.root_lin_vel_w[:, 0], root_ang_b, st.dof_vel[:, 0]], 1)
    return qpos.to(device), qvel.to(device), st.dof_pos[:, 0].to(device).clone()


def quat_rotate_inverse(q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Rotate ``v [n, 3]`` by the inverse of the wxyz quaternion ``q [n, 4]``."""
    w, xyz = q[:, :1], -q[:, 1:]
    t = 2.0 * torch.cross(xyz, v, dim=1)
    return v + w * t + torch.cross(xyz, t, dim=1)


def run(sim, qpos, qvel, targets, noise, horizons) -> dict[int, torch.Tensor]:
    """qpos (float64, on the CPU) after each horizon; the ctrl of step k is ``targets + noise[k]``."""
    sim.reset_worlds(torch.ones(sim.num_envs, dtype=torch.bool, device=sim.device), qpos, qvel)
    out = {}
    for k in range(max(horizons)):
        sim.ctrl.copy_((targets + noise[k]).to(sim.ctrl))
        sim.step()
        if k + 1 in horizons:
            out[k + 1] = sim.qpos.double().cpu().clone()
    return out


def deviation(a: torch.Tensor, ref: torch.Tensor) -> dict[str, float]:
    root = (a[:, :3] - ref[:, :3]).norm(dim=1) * 1e3
    joints = (a[:, 7:] - ref[:, 7:]).abs() * 1e3
    return {"root_max_mm": float(root.max()), "root_mean_mm": float(root.mean()),
            "joint_max_mrad": float(joints.max()), "joint_mean_mrad": float(joints.mean())}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--worlds", type=int, default=64)
    p.add_argument("--steps", type=int, default=25, help="control steps (the longest horizon)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--iterations", default="3,5,10,20")
    p.add_argument("--tolerances", default="1e-8,1e-6,1e-4")
    args = p.parse_args()
    init_warp()
    n, device = args.worlds, args.device
    horizons = sorted(h for h in {1, 5, args.steps} if h <= args.steps)
    qpos, qvel, targets = start_states(n, device)
    g = torch.Generator().manual_seed(0)
    noise = [0.1 * torch.randn(n, targets.shape[1], generator=g).to(device) for _ in range(args.steps)]
    ref_sim = MuJoCoSim("g1", SimCfg(name="mujoco", solver_iterations=100, solver_tolerance=1e-12), num_envs=n)
    ref = run(ref_sim, qpos.cpu(), qvel.cpu(), targets.cpu(), [x.cpu() for x in noise], horizons)
    shipped = MuJoCoSim("g1", SimCfg(name="mujoco"), num_envs=n)
    print(f"reference: MuJoCo C float64, 100 iterations, tolerance 1e-12; {n} worlds over the shipped clips, "
          f"horizons {horizons} control steps; shipped MJCF: iterations {int(shipped.mj_model.opt.iterations)}, "
          f"tolerance {shipped.mj_model.opt.tolerance:g}")
    got = run(shipped, qpos.cpu(), qvel.cpu(), targets.cpu(), [x.cpu() for x in noise], horizons)
    for h in horizons:
        print(f"  MuJoCo C shipped, after {h:>3d}: " + ", ".join(f"{k} {v:.3g}" for k, v in
                                                                deviation(got[h], ref[h]).items()))
    rows = []
    for iters, tol in itertools.product([int(x) for x in args.iterations.split(",")],
                                        [float(x) for x in args.tolerances.split(",")]):
        sim = MJWarpSim("g1", SimCfg(name="mjwarp", solver_iterations=iters, solver_tolerance=tol), num_envs=n,
                        device=device)
        sim.warm_up()
        run(sim, qpos, qvel, targets, noise, [1])  # compile / capture
        sim.solver_metrics()
        t0 = time.perf_counter()
        got = run(sim, qpos, qvel, targets, noise, horizons)
        seconds = time.perf_counter() - t0
        solver = {k.split("/", 1)[1]: float(v) for k, v in sim.solver_metrics().items()}
        rows.append((iters, tol, got, solver, n * args.steps / seconds))
        sim.close()
    base = next((r[4] for r in rows if r[0] == int(shipped.mj_model.opt.iterations)
                 and r[1] == shipped.mj_model.opt.tolerance), rows[0][4])
    for iters, tol, got, solver, sps in rows:
        dev = {h: deviation(got[h], ref[h]) for h in horizons}
        last = dev[horizons[-1]]
        print(f"MJWarp iterations {iters:>3d} tolerance {tol:<6g}: solver mean {solver['solver_iterations']:.2f} max "
              f"{solver['solver_iterations_max']:.0f}; {sps:.0f} control steps/s ({sps / base:.2f}x shipped); after "
              f"{horizons[-1]} steps root max {last['root_max_mm']:.2f} mean {last['root_mean_mm']:.2f} mm, joints "
              f"max {last['joint_max_mrad']:.1f} mean {last['joint_mean_mrad']:.2f} mrad; after 1 step root max "
              f"{dev[1]['root_max_mm']:.3f} mm joints max {dev[1]['joint_max_mrad']:.2f} mrad")


if __name__ == "__main__":
    main()
