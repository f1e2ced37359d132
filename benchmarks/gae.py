"""Warp GAE kernel vs a PyTorch reverse-loop GAE (rsl_rl style), side by side on one device.

    python benchmarks/gae.py [--device cpu|cuda:0] [--repeats 20] [--sizes 1024x24 4096x32 8192x32]

Each size is ``NUM_ENVSxNUM_STEPS``. Prints one line per size with both timings and the speed-up
over the torch loop (torch loop time / Warp kernel time).
"""

import argparse
import re
import time

import torch

from simppo.kernels.gae import bind_gae, compute_gae
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


def size(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"(\d+)x(\d+)", text)
    if not m or min(int(m[1]), int(m[2])) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected NUM_ENVSxNUM_STEPS, e.g. 8192x32")
    return int(m[1]), int(m[2])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--device", default="auto")
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--sizes", nargs="+", default=["1024x24", "4096x32", "8192x32"], type=size,
                   help="NUM_ENVSxNUM_STEPS, e.g. 8192x32")
    args = p.parse_args()
    device = resolve_device(args.device)
    init_warp()
    print(f"device={device}")
    for n, t in args.sizes:
        g = torch.Generator(device="cpu").manual_seed(0)
        tensors = [torch.rand(t, n, generator=g).to(device) for _ in range(4)]
        dones = (tensors[0] > 0.95).float()
        values, rewards, next_values = tensors[1:]
        adv, ret = torch.empty_like(values), torch.empty_like(values)
        adv2, ret2 = torch.empty_like(values), torch.empty_like(values)
        bufs = bind_gae(dones, values, rewards, next_values, adv, ret)
        warp_s = timed(lambda: compute_gae(bufs, 0.99, 0.95), device, args.repeats)  # noqa: B023
        torch_s = timed(lambda: torch_gae(dones, values, rewards, next_values, 0.99, 0.95, adv2, ret2),  # noqa: B023
                        device, args.repeats)
        err = (adv - adv2).abs().max().item()
        print(f"N={n:5d} T={t:2d}  warp_gae={warp_s * 1e3:8.3f} ms  torch_loop_gae={torch_s * 1e3:8.3f} ms  "
              f"gae speed-up over the torch loop = {torch_s / warp_s:6.2f}x  (max |diff| {err:.1e})")


if __name__ == "__main__":
    main()
