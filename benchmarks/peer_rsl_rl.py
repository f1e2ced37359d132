"""rsl_rl's ``OnPolicyRunner`` and simppo's runner training the same env, robot, motions and ``num_envs``, one after
the other in one process: each one's training samples/s and their ratio.

    python benchmarks/peer_rsl_rl.py [--num-envs 256] [--iterations 10] [--device auto] [-- HYDRA_OVERRIDES...]

rsl_rl trains through :class:`simppo.integrations.rsl_rl.RslRlVecEnv` with BeyondMimic / mjlab's tracking config
(:func:`~simppo.integrations.rsl_rl.tracking_runner_cfg`: 24 steps per env, [512, 256, 128] MLPs); simppo with its
shipped defaults (``simppo-train``'s config, the overrides after ``--`` applied to both envs). Each side first runs
one untimed iteration (kernel compilation, allocations), then ``--iterations`` timed ones; a sample is one env step
of one env. Needs the ``rsl_rl`` extra (``pip install -e '.[rsl_rl]'``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

import simppo  # noqa: E402
from benchmarks.learning import machine_name  # noqa: E402
from simppo.cli.train import build_training  # noqa: E402
from simppo.utils.device import resolve_device  # noqa: E402


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def rsl_rl_samples_per_s(num_envs: int, iterations: int, device: str, overrides: list[str]) -> tuple[float, str]:
    from rsl_rl.runners import OnPolicyRunner

    from simppo.integrations.rsl_rl import RslRlVecEnv, tracking_runner_cfg

    env = RslRlVecEnv(simppo.make_env("humanoid_imitation", num_envs, device, overrides=overrides))
    cfg = tracking_runner_cfg()
    runner = OnPolicyRunner(env, cfg, log_dir=None, device=device)
    runner.learn(num_learning_iterations=1)
    sync(device)
    t0 = time.perf_counter()
    runner.learn(num_learning_iterations=iterations)
    sync(device)
    seconds = time.perf_counter() - t0
    env.close()
    return iterations * num_envs * cfg["num_steps_per_env"] / seconds, f"{cfg['num_steps_per_env']} steps/env"


def simppo_samples_per_s(num_envs: int, iterations: int, device: str, overrides: list[str]) -> tuple[float, str]:
    cfg, env, agent = build_training(["env=humanoid_imitation", f"num_envs={num_envs}", "logger=none",
                                      "experiment_name=peer", *overrides], device)
    runner = agent.loop(None, max_epochs=iterations + 1)
    runner.train_iteration()
    sync(device)
    t0 = time.perf_counter()
    for _ in range(iterations):
        runner.train_iteration()
    sync(device)
    seconds = time.perf_counter() - t0
    env.close()
    return iterations * num_envs * agent.num_steps / seconds, f"{agent.num_steps} steps/env"


def main() -> None:
    argv = sys.argv[1:]
    overrides = argv[argv.index("--") + 1:] if "--" in argv else []
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num-envs", type=int, default=256)
    p.add_argument("--iterations", type=int, default=10)
    p.add_argument("--device", default="auto")
    args = p.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    device = resolve_device(args.device)
    print(f"peer_rsl_rl: {machine_name()}; humanoid_imitation, {args.num_envs} envs on {device}, "
          f"{args.iterations} timed iterations each; overrides {overrides or 'none'}", flush=True)
    rsl, rsl_note = rsl_rl_samples_per_s(args.num_envs, args.iterations, device, overrides)
    print(f"  rsl_rl OnPolicyRunner  {rsl:10.0f} samples/s ({rsl_note})", flush=True)
    own, own_note = simppo_samples_per_s(args.num_envs, args.iterations, device, overrides)
    print(f"  simppo runner          {own:10.0f} samples/s ({own_note})", flush=True)
    print(f"  ratio simppo / rsl_rl  {own / rsl:10.2f}", flush=True)


if __name__ == "__main__":
    main()
