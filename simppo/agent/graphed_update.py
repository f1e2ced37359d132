"""The minibatch step on static buffers, replayed as one CUDA graph (``agent.graph_update``).

Eagerly, one minibatch step of :meth:`~simppo.agent.algorithm.PPOAlgorithm.perform_optimization_step` is ~180
small launches of host work (two Adam steps, gradient clipping, the losses) over a few ms of GPU work. Here the
minibatch is gathered into buffers allocated once (``index_select(out=...)``) and the whole step — advantage
normalisation, forward, losses, backward, foreach gradient clipping, both fused capturable Adam steps, the log-std
clamp and the KL-adaptive learning rate — is captured once and replayed. The learning rates are already device
tensors; the gradients are zeroed in place (``set_to_none=False``) so that the graph always writes the same
tensors.

Capturing needs a warm-up step (it creates the optimizers' state and the gradient tensors); the parameters, the
optimizers' state and the learning rates are restored afterwards, so the first replay is the first update.

Without capture (the CPU, or ``capture=False``) :meth:`MinibatchStep.run` calls the same step eagerly on the same
static buffers: it gives the eager path's parameters bit for bit, which is what the CPU tests check.
"""

from __future__ import annotations

import torch

from simppo.utils.device import gc_paused


def graph_update_available(device: torch.device, world_size: int, precision: str) -> tuple[bool, str]:
    """Whether the minibatch step can be captured here, and why not: a CUDA device, one rank (the gradients'
    all-reduce of DDP is not captured), fp32 MLPs (autocast caches casts across a capture)."""
    if device.type != "cuda":
        return False, f"the device is {device.type}, not CUDA"
    if world_size > 1:
        return False, f"{world_size} ranks (DDP's gradient all-reduce is not captured)"
    if precision != "fp32":
        return False, f"agent.update_precision resolved to {precision} (only fp32 is captured)"
    return True, ""


class MinibatchStep:
    """``step_fn(batch) -> logs`` on static minibatch buffers shaped like ``data`` ``{key: [total, ...]}`` with
    ``size`` rows. :meth:`fill` gathers rows ``idx [size]`` into them; :meth:`run` performs the step (a graph replay
    once captured). ``state_tensors()`` lists every tensor the step changes besides its outputs (parameters,
    optimizer state, learning rates): they are restored after the capture's warm-up (state the warm-up created is
    zeroed, Adam's initial value)."""

    def __init__(self, step_fn, data: dict[str, torch.Tensor], size: int, state_tensors, capture: bool):
        self.step_fn, self.state_tensors, self.capture = step_fn, state_tensors, capture
        self.static = {k: torch.empty((size, *v.shape[1:]), dtype=v.dtype, device=v.device) for k, v in data.items()}
        self.graph: torch.cuda.CUDAGraph | None = None
        self.logs: dict[str, torch.Tensor] = {}

    def fill(self, data: dict[str, torch.Tensor], idx: torch.Tensor) -> None:
        for k, v in data.items():
            torch.index_select(v, 0, idx, out=self.static[k])

    def run(self) -> dict[str, torch.Tensor]:
        if not self.capture:
            return self.step_fn(dict(self.static))
        if self.graph is None:
            self._capture()
        self.graph.replay()
        return self.logs

    def _capture(self) -> None:
        before = {id(t): t.detach().clone() for t in self.state_tensors()}
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up: optimizer state, gradient tensors, cuBLAS workspaces
            self.step_fn(dict(self.static))
        torch.cuda.current_stream().wait_stream(side)
        with torch.no_grad():  # the warm-up's update is undone: the first replay is the first update
            for t in self.state_tensors():
                if id(t) in before:
                    t.copy_(before[id(t)])
                else:  # optimizer state the warm-up created (Adam's moments and step count start at zero)
                    t.zero_()
        graph = torch.cuda.CUDAGraph()
        with gc_paused(), torch.cuda.graph(graph):
            self.logs = self.step_fn(dict(self.static))
        self.graph = graph
