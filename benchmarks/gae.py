"""Warp GAE kernel vs a PyTorch reverse-loop GAE (rsl_rl style), side by side on one device.

    python benchmarks/gae.py [--device cpu|cuda:0] [--repeats 20]
"""

import argparse
import time

import torch

from simppo.kernels.gae import launch_gae
from simppo.utils.device import init_warp, resolve_device


def torch_gae(dones, values, rewards, next_values, gamma, tau, adv_out, ret_out):
    last = torch.zeros_like(values[0])
    for t in reversed(range(values.shape[0])):
        delta = rewards[t] + gamma * next_values[t] - values[t]
        last = delta + gamma * tau * (1.0 - dones[t]) * last
        adv_out[t] = last
    torch.add(adv_out, values, out=ret_out)


def timed(fn, device: str, repeats: int) -> float:
    fn()  # warm-up (compiles the kernel on first use)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(repeats):
        fn()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) / repeats


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--device", default="auto")
    p.add_argument("--repeats", type=int, default=20)
    args = p.parse_args()
    device = resolve_device(args.device)
    init_warp()
    print(f"device={device}")
    for n, t in ((1024, 24), (4096, 32), (8192, 32)):
        g = torch.Generator(device="cpu").manual_seed(0)
        tensors = [torch.rand(t, n, generator=g).to(device) for _ in range(4)]
        dones = (tensors[0] > 0.95).float()
        values, rewards, next_values = tensors[1:]
        adv, ret = torch.empty_like(values), torch.empty_like(values)
        adv2, ret2 = torch.empty_like(values), torch.empty_like(values)
        warp_s = timed(lambda: launch_gae(dones, values, rewards, next_values, 0.99, 0.95, adv, ret),  # noqa: B023
                       device, args.repeats)
        torch_s = timed(lambda: torch_gae(dones, values, rewards, next_values, 0.99, 0.95, adv2, ret2),  # noqa: B023
                        device, args.repeats)
        err = (adv - adv2).abs().max().item()
        print(f"N={n:5d} T={t:2d}  warp_gae={warp_s * 1e3:8.3f} ms  torch_loop_gae={torch_s * 1e3:8.3f} ms  "
              f"torch/warp = {torch_s / warp_s:6.2f}  (max |diff| {err:.1e})")


if __name__ == "__main__":
    main()
