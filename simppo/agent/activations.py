"""ELU (alpha = 1) whose training forward and backward cost ~30 % less than ``torch.nn.ELU`` on the CPU.

``torch.nn.functional.elu`` evaluates ``expm1`` on every element and its backward reads the input again. Here,
with gradients, ``elu(x) = max(x, exp(min(x, 0)) - 1)`` (the same function: ``exp(x) - 1 >= x`` for every x, and
both sides are 0 for x >= 0) and the backward uses only the output: ``elu'(x) = 1 if y > 0 else y + 1``.
Measured on a 2-core AVX2 CPU, forward + backward of a ``[1536, 512]`` batch: 2.45 ms → 1.74 ms (one PPO
minibatch step of the shipped agent runs six). The result differs from ``elu`` by float32 rounding (< 1e-6
absolute: ``exp(x) - 1`` instead of ``expm1``). Without gradients (rollout, evaluation, ONNX export, tracing)
it is ``torch.nn.functional.elu``, so exported graphs hold a plain ``Elu``.
"""

import torch
from torch import nn


class _ELUFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        y = torch.clamp(x, max=0.0).exp_().sub_(1.0)
        torch.maximum(x, y, out=y)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return grad * y.clamp(max=0.0).add_(1.0)


class ELU(nn.Module):
    """``nn.ELU()`` (alpha = 1) with the cheaper training path above; any shape, elementwise."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if (x.requires_grad and torch.is_grad_enabled() and not torch.jit.is_tracing()
                and not torch.onnx.is_in_onnx_export() and not torch.compiler.is_compiling()):
            return _ELUFunction.apply(x)
        return nn.functional.elu(x)
