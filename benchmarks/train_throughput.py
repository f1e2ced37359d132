"""Raw MJWarp vs env vs full PPO training throughput of ``env=humanoid_imitation``, side by side.

    python benchmarks/train_throughput.py [--num-envs 64 256] [--iterations 2] [--device auto]

For each num_envs, in one process: raw MJWarp control steps/s (physics steps/s ÷ decimation, the
simulator alone), env steps/s (physics + Warp kernels + resets) and full training steps/s
(rollout + PPO update with the shipped default agent config ``configs/agent/ppo.yaml``), then the
ratios ``env/raw`` and ``train/raw``.

Physics cost depends on the state (a falling, flailing robot has more contacts than one standing on
its home pose), so raw is measured on the very states the env and the training visit: on CPU the
``decimation`` MJWarp steps inside each env step are timed in place (raw = steps / time in physics);
on CUDA, where the decimated step is one captured graph, a physics-only graph is replayed on the
current state right after each phase.
"""

import argparse
import time

import mujoco_warp as mjw
import torch
import warp as wp
from hydra import compose, initialize_config_dir
from lightning_fabric import Fabric
from omegaconf import OmegaConf

from simppo.agent.ppo import PPO
from simppo.config import register_configs
from simppo.envs.humanoid_imitation import HumanoidImitationEnv
from simppo.paths import CONFIG_DIR
from simppo.utils.device import init_warp, resolve_device


def load_train_cfg(num_envs: int, device: str):
    register_configs()
    with initialize_config_dir(version_base=None, config_dir=str(CONFIG_DIR)):
        node = compose("train", overrides=["env=humanoid_imitation", f"num_envs={num_envs}", f"device={device}",
                                         "experiment_name=bench"])
    return OmegaConf.to_object(node)


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


class PhysicsClock:
    """Times the MJWarp physics of an env's simulator (CPU: in place, inside every env step)."""

    def __init__(self, env: HumanoidImitationEnv):
        self.sim = env.sim
        self.seconds = 0.0
        self.steps = 0
        self.inline = not self.sim.use_graph
        if self.inline:
            sim = self.sim

            def timed_decimated_step():
                t0 = time.perf_counter()
                for _ in range(sim.decimation):
                    mjw.step(sim.model, sim.data)
                wp.synchronize_device()
                self.seconds += time.perf_counter() - t0
                self.steps += 1
                sim._post_step()

            sim._decimated_step = timed_decimated_step

    def reset(self) -> None:
        self.seconds, self.steps = 0.0, 0

    def raw_steps_per_s(self, num_envs: int, steps: int) -> float:
        """Inline: from the physics time recorded so far. Graph: replay physics-only on the current state."""
        if self.inline:
            return num_envs * self.steps / self.seconds
        sim = self.sim
        with wp.ScopedDevice(sim.wp_device):
            with wp.ScopedCapture() as cap:
                for _ in range(sim.decimation):
                    mjw.step(sim.model, sim.data)
            wp.capture_launch(cap.graph)
            wp.synchronize_device()
            t0 = time.perf_counter()
            for _ in range(steps):
                wp.capture_launch(cap.graph)
            wp.synchronize_device()
        return num_envs * steps / (time.perf_counter() - t0)


def env_steps_per_s(env: HumanoidImitationEnv, steps: int, device: str) -> float:
    actions = 0.3 * torch.randn(env.num_envs, env.num_actions, device=device)
    env.step(actions)
    sync(device)
    t0 = time.perf_counter()
    for _ in range(steps):
        env.step(actions)
    sync(device)
    return env.num_envs * steps / (time.perf_counter() - t0)


def train_steps_per_s(agent: PPO, iterations: int, device: str) -> float:
    sync(device)
    t0 = time.perf_counter()
    for _ in range(iterations):
        agent.train_iteration()
    sync(device)
    return agent.num_envs * agent.num_steps * iterations / (time.perf_counter() - t0)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--num-envs", type=int, nargs="+", default=[64, 256])
    p.add_argument("--iterations", type=int, default=2, help="PPO iterations timed per num_envs")
    p.add_argument("--device", default="auto")
    args = p.parse_args()
    device = resolve_device(args.device)
    init_warp()
    torch.manual_seed(0)
    for n in args.num_envs:
        cfg = load_train_cfg(n, device)
        env = HumanoidImitationEnv(cfg.env, cfg, num_envs=n, device=device, seed=0)
        fabric = Fabric(accelerator="cuda" if device.startswith("cuda") else "cpu", devices=1, precision="32-true")
        agent = PPO(fabric, env, cfg.agent)
        agent.setup()
        steps = agent.num_steps
        clock = PhysicsClock(env)
        agent.train_iteration()  # warm-up (kernel loads, allocator)
        env.reset()
        clock.reset()
        env_sps = env_steps_per_s(env, steps, device)
        raw_env = clock.raw_steps_per_s(n, steps)
        agent.current_obs = env.reset()
        clock.reset()
        train = train_steps_per_s(agent, args.iterations, device)
        raw_train = clock.raw_steps_per_s(n, steps)
        raw = raw_train
        print(f"[{device}] num_envs={n}: raw={raw_env:.0f} env={env_sps:.0f} (raw on training states {raw:.0f}) "
              f"train={train:.0f} control steps/s "
              f"(agent: {steps} steps x {cfg.agent.num_mini_epochs} epochs x {cfg.agent.num_minibatches} minibatches, "
              f"actor {cfg.agent.actor.units})")
        print(f"env/raw = {env_sps / raw_env:.2f}")
        print(f"train/raw = {train / raw_train:.2f}")


if __name__ == "__main__":
    main()
