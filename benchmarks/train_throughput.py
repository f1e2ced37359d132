"""Raw physics vs env vs full PPO training throughput of ``env=humanoid_imitation``, side by side, per backend.

    python benchmarks/train_throughput.py [--num-envs 256] [--iterations 2] [--backends mjwarp mujoco] [--device auto]

For each num_envs and sim backend, in one process: env steps/s (physics + Warp kernels + resets, random
actions), full training steps/s (rollout + PPO update with the shipped default agent config, TF32 on CUDA as
``simppo-train`` sets it) and two physics figures (:class:`PhysicsClock`): the sim step timed inside the env on the
states the env and the training visit, and a replay of the physics alone with the control held (what earlier
versions called "raw"); every ratio is printed against both (``env/physics-in-env``, ``train/replay``, ...). With
MJWarp the solver's iterations per physics step on those states (mean, max, and the model's cap). Each part of an
iteration (sim step, the rest of the env step, policy inference and bookkeeping in the rollout, the PPO update) is
timed where it runs: CUDA events around each call, read after the phase, no synchronisation inside the timed loop
(one per training iteration, as ``simppo-train``'s metrics read makes). With both backends, ``train
mujoco/mjwarp`` (end-to-end training steps/s of the MuJoCo C backend over MJWarp's). The backends' training
iterations alternate (A, B, A, B, ...), so that a drift of the machine's speed during the run falls on both alike
(on a shared 2-core VM, back-to-back runs of each backend gave ratios from 4.6 to 5.9).

Training runs the shipped default agent config, so ``agent.update_precision=auto`` resolves per machine (bf16 on a
CPU with AMX, fp32 elsewhere: :mod:`simppo.agent.precision`) and the first line of each backend names it.

Update options (on the last backend, unless ``--no-update-options``): one minibatch step in fp32 (eager, the
"before" of ``auto`` on an AMX CPU) timed beside the same step with ``agent.update_precision=bf16`` and, in the
shipped precision, with ``agent.compile=true``; the shipped step beside the same step with ``torch.nn.ELU`` in
place of simppo's ELU (:mod:`simppo.agent.activations`, the "before" of that change); the step's matmul rate
(FLOPs counted by torch's ``FlopCounterMode``) against a plain ``torch.mm`` of the first layer's shape in the same
precision; and what each option would make of ``train mujoco/mjwarp`` (the timed updates rescaled by the step's
time; the rollout as measured); also the bound with a free update (rollout alone).

    python benchmarks/train_throughput.py --devices 2 [--num-envs 256] [--iterations 2] [--device auto]

``--devices N`` (N > 1) measures data-parallel scaling instead: full training samples/s (rollout + PPO update,
every rank's samples) of N DDP ranks with ``num_envs`` envs each, over one rank with ``num_envs`` envs, each run
in fresh processes launched like torchrun (the first backend of ``--backends`` that runs on the device). The
ranks of a CPU share its cores (MuJoCo C threads: cores / N per rank, as ``simppo-train devices=N`` sets them).
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import mujoco_warp as mjw
import torch
import warp as wp
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from torch import nn

from simppo.agent.activations import ELU
from simppo.agent.ppo import PPO
from simppo.agent.precision import cpu_has_amx
from simppo.config import register_configs
from simppo.envs.imitation import HumanoidImitationEnv
from simppo.paths import CONFIG_DIR
from simppo.sim.mujoco_c import MuJoCoSim
from simppo.utils.device import enable_tf32, fabric_for, init_warp, resolve_device


def load_train_cfg(num_envs: int, device: str, backend: str):
    register_configs()
    with initialize_config_dir(version_base=None, config_dir=str(CONFIG_DIR)):
        node = compose("train", overrides=["env=humanoid_imitation", f"num_envs={num_envs}", f"device={device}",
                                         f"sim={backend}", "experiment_name=bench"])
    return OmegaConf.to_object(node)


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


class Stopwatch:
    """Accumulates the time of calls to ``obj.name`` (patched on the instance) without synchronising inside the
    timed loop: on CUDA a pair of events recorded on the current stream around each call (their elapsed times are
    summed when :attr:`seconds` is read, after the phase's one synchronisation); on the CPU, where every launch
    runs to its end before it returns, the wall time of the call."""

    def __init__(self, obj, name: str, device: str):
        self.cuda = device.startswith("cuda")
        self._seconds, self._events, self.calls = 0.0, [], 0
        original = getattr(obj, name)

        def timed(*args, **kwargs):
            self.calls += 1
            if self.cuda:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                out = original(*args, **kwargs)
                end.record()
                self._events.append((start, end))
                return out
            t0 = time.perf_counter()
            out = original(*args, **kwargs)
            self._seconds += time.perf_counter() - t0
            return out

        setattr(obj, name, timed)

    @property
    def seconds(self) -> float:
        if self._events:
            torch.cuda.synchronize()
            self._seconds += sum(a.elapsed_time(b) for a, b in self._events) / 1e3
            self._events.clear()
        return self._seconds

    def reset(self) -> None:
        self._seconds, self._events, self.calls = 0.0, [], 0


class PhysicsClock:
    """The simulator's time, two ways. *In the env*: every ``sim.step`` (the decimated physics and the derived
    quantities, contacts and guard after it) timed where the env calls it, on the states the env and the training
    visit, with their resets and fresh actions. *Replay*: the physics launches alone replayed on the current state
    with the control held and no resets (CUDA: a physics-only graph), the figure earlier versions called "raw".
    The replay flatters the physics: MJWarp's solver loop runs every world until the slowest converges, and a held
    control lets the worlds settle. With MJWarp the solver's iterations per physics step (mean over worlds and
    steps, and the largest) are read from the sim's own counters after each phase."""

    def __init__(self, env: HumanoidImitationEnv, device: str):
        self.sim, self.device = env.sim, device
        self.watch = Stopwatch(self.sim, "step", device)

    def reset(self) -> None:
        self.watch.reset()
        self.solver()

    def in_env(self, num_envs: int) -> tuple[float, float]:
        """(control steps/s of the sim step inside the env, its seconds) since the last reset."""
        seconds = self.watch.seconds
        return num_envs * self.watch.calls / max(seconds, 1e-12), seconds

    def solver(self) -> dict[str, float]:
        """Solver iterations per physics step since the last call (MJWarp; empty otherwise); resets them."""
        read = getattr(self.sim, "solver_metrics", None)
        return {k.split("/", 1)[1]: float(v) for k, v in read().items()} if read is not None else {}

    def replay_steps_per_s(self, num_envs: int, steps: int) -> float:
        """Control steps/s of the physics alone, replayed ``steps`` times on the current state."""
        sim = self.sim
        if isinstance(sim, MuJoCoSim):
            physics = sim.step
        elif getattr(sim, "use_graph", False):
            with wp.ScopedDevice(sim.wp_device), wp.ScopedCapture() as cap:
                for _ in range(sim.decimation):
                    mjw.step(sim.model, sim.data)
            graph = cap.graph

            def physics():
                with wp.ScopedDevice(sim.wp_device):
                    wp.capture_launch(graph)
        else:
            def physics():
                with wp.ScopedDevice(sim.wp_device):
                    for _ in range(sim.decimation):
                        mjw.step(sim.model, sim.data)
        physics()
        sync(self.device)
        t0 = time.perf_counter()
        for _ in range(steps):
            physics()
        sync(self.device)
        self.solver()  # the replay's iterations are not the env's
        return num_envs * steps / (time.perf_counter() - t0)


def mean_seconds(fn, device: str, reps: int) -> float:
    """Mean wall time of ``fn()`` over ``reps`` calls, after one untimed warm-up call."""
    fn()
    sync(device)
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    sync(device)
    return (time.perf_counter() - t0) / reps


def minibatch_step_seconds(agent: PPO, batch: dict[str, torch.Tensor], device: str, reps: int) -> float:
    """Mean wall time of ``agent.perform_optimization_step`` on ``batch``."""
    return mean_seconds(lambda: agent.perform_optimization_step(dict(batch)), device, reps)


def matmul_peak(m: int, k: int, n: int, device: str, dtype: torch.dtype = torch.float32, reps: int = 20) -> float:
    """FLOP/s of a plain ``torch.mm`` of ``[m, k] @ [k, n]`` in ``dtype`` on ``device``."""
    a, b = torch.randn(m, k, device=device, dtype=dtype), torch.randn(k, n, device=device, dtype=dtype)
    return 2.0 * m * k * n / mean_seconds(lambda: torch.mm(a, b), device, reps)


def swap_activations(agent: PPO, cls: type) -> list[tuple[nn.Sequential, int, nn.Module]]:
    """Replace the ELU modules of the actor's and critic's MLPs by ``cls()``; returns what to put back."""
    swapped = []
    for net in (agent.model.actor.mu, agent.model.critic.net):
        for i, m in enumerate(net):
            if isinstance(m, (ELU, nn.ELU)):
                swapped.append((net, i, m))
                net[i] = cls()
    return swapped


def native_bf16(device: str) -> bool:
    """bf16 matmuls that are not emulated: CUDA's bf16 support, or AMX-BF16 / AVX512-BF16 on the CPU."""
    if device.startswith("cuda"):
        return torch.cuda.is_bf16_supported()
    return cpu_has_amx() or bool(getattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)())


def update_options(agent: PPO, device: str) -> dict[str, float]:
    """Seconds of one minibatch step per update option (see the module docstring); prints the comparison."""
    from torch.utils.flop_counter import FlopCounterMode

    c, shipped = agent.config, agent.precision
    data = agent.experience_buffer.flat()
    mb = agent.num_steps * agent.num_envs // c.num_minibatches
    batch = {k: v[:mb].clone() for k, v in data.items()}
    native = native_bf16(device)
    out, flops = {}, {}
    for precision in ("fp32", "bf16"):
        agent.precision = precision
        out[precision] = minibatch_step_seconds(agent, batch, device, reps=5 if native or precision == "fp32" else 1)
        with FlopCounterMode(display=False) as counter:
            agent.perform_optimization_step(dict(batch))
        flops[precision] = counter.get_total_flops()
    agent.precision = shipped
    swapped = swap_activations(agent, nn.ELU)  # before simppo's ELU (activations.py): torch.nn.ELU
    out["torch.nn.ELU"] = minibatch_step_seconds(agent, batch, device, reps=5) if swapped else out[shipped]
    for net, i, m in swapped:
        net[i] = m
    agent.model.compile_mlps()  # as agent.compile=true does (compiles on the next call)
    out["compile"] = minibatch_step_seconds(agent, batch, device, reps=5)
    print(f"  update options, one {mb}-sample minibatch step (actor + critic; shipped: update_precision="
          f"{c.update_precision} -> {shipped}): fp32 eager {1e3 * out['fp32']:.1f} ms, bf16 autocast "
          f"{1e3 * out['bf16']:.1f} ms (x{out['fp32'] / out['bf16']:.2f} over fp32; native bf16 "
          f"{'yes' if native else 'no'}); in {shipped}: torch.compile {1e3 * out['compile']:.1f} ms "
          f"(x{out[shipped] / out['compile']:.2f}), with torch.nn.ELU instead of simppo's ELU (before) "
          f"{1e3 * out['torch.nn.ELU']:.1f} ms (shipped x{out['torch.nn.ELU'] / out[shipped]:.2f} as fast)")
    k = agent.env.obs_dims["obs"]
    for precision, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        if precision == "bf16" and not native:
            continue
        rate, peak = flops[precision] / out[precision], matmul_peak(mb, k, c.actor.units[0], device, dtype)
        print(f"  update matmuls in {precision}: {rate / 1e9:.0f} GFLOP/s in the step vs {peak / 1e9:.0f} GFLOP/s "
              f"of a plain {precision} torch.mm [{mb}x{k}]@[{k}x{c.actor.units[0]}] ({100 * rate / peak:.0f}%)")
    out["shipped"] = shipped
    return out


class BackendRun:
    """One backend's env and agent at ``n`` envs, its clocks, and its training time summed over the iterations
    :meth:`train_iteration` ran (``main`` alternates the backends' iterations, so that a drift of the machine's
    speed falls on both alike)."""

    def __init__(self, n: int, backend: str, device: str):
        self.n, self.backend, self.device = n, backend, device
        self.cfg = load_train_cfg(n, device, backend)
        self.env = HumanoidImitationEnv(self.cfg.env, num_envs=n, device=device, seed=0, robot_cfg=self.cfg.robot,
                                        sim_cfg=self.cfg.sim, motion_cfg=self.cfg.motion)
        self.agent = PPO(fabric_for(device), self.env, self.cfg.agent)
        self.agent.setup()
        self.steps = self.agent.num_steps
        self.clock = PhysicsClock(self.env, device)
        self.env_watch = Stopwatch(self.env, "step", device)
        self.agent.collect_rollout()  # warm-up (kernel loads, allocator)
        self.agent.optimize_model()
        self.rollout_watch = Stopwatch(self.agent, "collect_rollout", device)
        self.update_watch = Stopwatch(self.agent, "optimize_model", device)
        self.wall_s = 0.0
        self.iterations = 0

    def measure_env(self) -> None:
        """Env steps/s on one rollout of random actions, the sim step inside it and a physics replay after it,
        then a fresh start for training."""
        env, n, device = self.env, self.n, self.device
        env.reset()
        self.clock.reset()
        self.env_watch.reset()
        with env.eager_steps():  # the sim step timed where the env calls it (inside a step graph it cannot be)
            # fresh noise each step: a held action lets the robot settle and the solver coast
            for _ in range(self.steps):
                env.step(0.3 * torch.randn(env.num_envs, env.num_actions, device=device))
        self.env_eager_sps = n * self.steps / self.env_watch.seconds
        self.sim_env, _ = self.clock.in_env(n)
        self.solver_env = self.clock.solver()
        self.env_watch.reset()
        for _ in range(self.steps):  # the env step as training runs it (one graph where env.graph_step captures)
            env.step(0.3 * torch.randn(env.num_envs, env.num_actions, device=device))
        self.env_sps = n * self.steps / self.env_watch.seconds
        self.graphed = env._step_graph is not None
        self.clock.solver()
        self.replay_env = self.clock.replay_steps_per_s(n, self.steps)
        self.agent.current_obs = env.reset()
        self.clock.reset()
        self.env_watch.reset()

    def train_iteration(self) -> None:
        """One PPO iteration; the wall clock stops after the iteration's work has run (one synchronisation per
        iteration, as simppo-train's metrics read makes)."""
        sync(self.device)
        t0 = time.perf_counter()
        self.agent.collect_rollout()
        self.agent.optimize_model()
        sync(self.device)
        self.wall_s += time.perf_counter() - t0
        self.iterations += 1

    def report(self, options: bool = False) -> dict:
        n, steps, device, cfg = self.n, self.steps, self.device, self.cfg
        samples = n * steps * self.iterations
        train = samples / self.wall_s
        rollout_s, update_s = self.rollout_watch.seconds, self.update_watch.seconds
        total = rollout_s + update_s
        if self.clock.watch.calls:
            sim_train, sim_s = self.clock.in_env(n)
        else:  # the sim step ran inside the env's step graph: its time on the training states is not separable
            sim_train, sim_s = self.sim_env, samples / self.sim_env
        solver = self.clock.solver()
        replay = self.clock.replay_steps_per_s(n, steps)
        env_s = self.env_watch.seconds
        if self.clock.watch.calls:
            shares = {"sim step": sim_s / total, "env kernels+resets": (env_s - sim_s) / total}
        else:  # one graph: the physics and the env's kernels are not timed apart
            shares = {"env step graph (physics, kernels, resets)": env_s / total}
        shares.update({"policy+buffer": (rollout_s - env_s) / total, "update": update_s / total})
        tf32 = torch.get_float32_matmul_precision()
        print(f"[{device}] num_envs={n} sim={self.backend}: env={self.env_sps:.0f} train={train:.0f} control "
              f"steps/s; physics in the env {self.sim_env:.0f} (training states {sim_train:.0f}), replay "
              f"{self.replay_env:.0f} (after training {replay:.0f}) (agent: {steps} steps x {cfg.agent.num_mini_epochs}"
              f" epochs x {cfg.agent.num_minibatches} minibatches, actor {cfg.agent.actor.units}, MLPs in "
              f"{self.agent.precision}, float32 matmul precision {tf32})")
        if solver:
            env_it, train_it = self.solver_env, solver
            print(f"  solver iterations per physics step: random actions mean {env_it['solver_iterations']:.2f} max "
                  f"{env_it['solver_iterations_max']:.0f}; training mean {train_it['solver_iterations']:.2f} max "
                  f"{train_it['solver_iterations_max']:.0f} (cap opt.iterations = "
                  f"{int(self.env.sim.mj_model.opt.iterations)})")
        print(f"  env step {'as one graph' if self.graphed else 'eager'}: {self.env_sps:.0f} control steps/s; eager "
              f"launches {self.env_eager_sps:.0f} (graph/eager {self.env_sps / self.env_eager_sps:.2f})"
              + ("; physics-in-env on training states: not separable inside the graph, the random-action figure "
                 "stands in" if not self.clock.watch.calls else ""))
        print("  shares of an iteration (timed where they run): " + ", ".join(
            f"{k} {100 * v:.0f}%" for k, v in shares.items()))
        print(f"  {self.backend} env/physics-in-env = {self.env_sps / self.sim_env:.2f}, env/replay = "
              f"{self.env_sps / self.replay_env:.2f}")
        print(f"  {self.backend} train/physics-in-env = {train / sim_train:.2f}, train/replay = {train / replay:.2f}")
        res = {"raw": sim_train, "replay": replay, "train": train, "samples": samples, "rollout_s": rollout_s,
               "update_s": update_s}
        if options:
            res["options"] = update_options(self.agent, device)
        self.env.close()
        return res


def run_backends(n: int, backends: list[str], device: str, iterations: int, options: bool) -> dict[str, dict]:
    """Every backend set up and its env measured, then ``iterations`` training iterations of each, alternating
    (backend A, B, A, B, ...); the update options are timed on the last backend."""
    runs = {b: BackendRun(n, b, device) for b in backends}
    for run in runs.values():
        run.measure_env()
    for _ in range(iterations):
        for run in runs.values():
            run.train_iteration()
    return {b: run.report(options=options and b == backends[-1]) for b, run in runs.items()}


# ----------------------------------------------------------------------------- data-parallel scaling


def rank_samples_per_s(n: int, backend: str, device: str, iterations: int, devices: int) -> float:
    """Training samples/s of every rank together: ``devices`` DDP ranks (or one process), ``n`` envs each.
    Runs in a worker process; every rank times the same iterations between two collectives."""
    from simppo.agent.distributed import all_reduce_, any_rank, close_process_group

    fabric = fabric_for(device, devices=devices, timeout_s=600)
    if devices > 1:
        fabric.launch()
    device = resolve_device(fabric.device)
    cfg = load_train_cfg(n, device, backend)
    if devices > 1 and device == "cpu" and cfg.sim.threads is None:
        cfg.sim.threads = max(1, (os.cpu_count() or 1) // devices)  # as simppo-train devices=N does
    torch.manual_seed(fabric.global_rank)
    env = HumanoidImitationEnv(cfg.env, num_envs=n, device=device, seed=fabric.global_rank, robot_cfg=cfg.robot,
                               sim_cfg=cfg.sim, motion_cfg=cfg.motion)
    agent = PPO(fabric, env, cfg.agent)
    agent.setup()
    agent.collect_rollout()  # warm-up (kernel loads, allocator, DDP buckets)
    agent.optimize_model()
    any_rank(False, device)  # every rank starts the clock together
    sync(device)
    t0 = time.perf_counter()
    for _ in range(iterations):
        agent.collect_rollout()
        agent.optimize_model()
    sync(device)
    elapsed = all_reduce_(torch.tensor([time.perf_counter() - t0], device=device), "max").item()  # the slowest
    env.close()
    close_process_group()
    return devices * n * agent.num_steps * iterations / elapsed


def launch_ranks(devices: int, n: int, backend: str, device: str, iterations: int) -> float:
    """Run :func:`rank_samples_per_s` in ``devices`` fresh processes (torchrun's variables when several)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        cmd = [sys.executable, __file__, "--worker", "--devices", str(devices), "--num-envs", str(n),
               "--backends", backend, "--device", device, "--iterations", str(iterations), "--out", str(out)]
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        procs = []
        for rank in range(devices):
            env = dict(os.environ)
            if devices > 1:
                env.update({"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(devices),
                            "LOCAL_WORLD_SIZE": str(devices), "GROUP_RANK": "0", "TORCHELASTIC_RUN_ID": "bench",
                            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
            procs.append(subprocess.Popen(cmd, env=env))
        codes = [p.wait() for p in procs]
        if any(codes):
            raise SystemExit(f"train_throughput: a worker with {devices} rank(s) exited with {codes}")
        return json.loads(out.read_text())["samples_per_s"]


def scaling(args, device: str) -> None:
    backend = "mujoco" if device == "cpu" and "mujoco" in args.backends else "mjwarp"  # as sim=auto
    for n in args.num_envs:
        one = launch_ranks(1, n, backend, device, args.iterations)
        many = launch_ranks(args.devices, n, backend, device, args.iterations)
        print(f"[{device}] sim={backend} num_envs={n} per rank: 1 rank {one:.0f} samples/s, {args.devices} ranks "
              f"{many:.0f} samples/s (rollout + update, every rank's samples)")
        print(f"scaling {args.devices} ranks / 1 rank = {many / one:.2f}")
        if device == "cpu":
            cores = os.cpu_count() or 1
            sim = f"{cores} MuJoCo C threads" if backend == "mujoco" else "Warp's CPU kernels"
            print(f"  limit: {cores} CPU cores shared by every rank. One rank already steps its worlds on {sim} "
                  f"and runs the policy and the update with torch's threads on the same cores; {args.devices} ranks "
                  f"get {max(1, cores // args.devices)} core(s) each, so they split the cores instead of adding "
                  "compute, and add the gradient all-reduces and the other collectives. On GPUs each rank has its "
                  "own device.")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--num-envs", type=int, nargs="+", default=[256])
    p.add_argument("--iterations", type=int, default=2, help="PPO iterations timed per num_envs")
    p.add_argument("--backends", nargs="+", default=["mjwarp", "mujoco"], choices=["mjwarp", "mujoco"])
    p.add_argument("--device", default="auto")
    p.add_argument("--devices", type=int, default=1, help="N > 1: the scaling of N DDP ranks over one rank")
    p.add_argument("--no-update-options", action="store_true", help="skip timing the bf16 / compile update options")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args()
    init_warp()
    if args.worker:
        rate = rank_samples_per_s(args.num_envs[0], args.backends[0], args.device, args.iterations, args.devices)
        if int(os.environ.get("RANK", "0")) == 0:
            Path(args.out).write_text(json.dumps({"samples_per_s": rate}))
        return
    device = resolve_device(args.device)
    enable_tf32(device)  # as simppo-train
    if args.devices > 1:
        scaling(args, device)
        return
    backends = [b for b in args.backends if b != "mujoco" or device == "cpu"]
    for n in args.num_envs:
        torch.manual_seed(0)
        res = run_backends(n, backends, device, args.iterations, options=not args.no_update_options)
        if {"mjwarp", "mujoco"} <= res.keys():
            mj, wp_ = res["mujoco"], res["mjwarp"]
            print(f"physics-in-env mujoco/mjwarp = {mj['raw'] / wp_['raw']:.2f}")
            print(f"train mujoco/mjwarp = {mj['train'] / wp_['train']:.2f}")
            print(f"  bound with a free update (mujoco rollout alone): "
                  f"{mj['samples'] / mj['rollout_s'] / wp_['train']:.2f}")
            options = dict(mj.get("options", {}))
            shipped = options.pop("shipped", None)
            for name, step_s in options.items():
                if name == shipped:
                    continue
                update_s = mj["update_s"] * step_s / options[shipped]  # the timed updates, rescaled
                est = mj["samples"] / (mj["rollout_s"] + update_s) / wp_["train"]
                print(f"  with the {name} update (estimated from its timed minibatch step): {est:.2f}")


if __name__ == "__main__":
    main()
