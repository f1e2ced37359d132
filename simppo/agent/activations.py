"""ELU (alpha = 1) whose training backward costs less than ``torch.nn.ELU``'s on the CPU, with one forward.

The forward is always ``torch.nn.functional.elu``, so the rollout's sampling forward (no gradients) and the
update's forward (gradients) give the same bits and the PPO ratio of an unchanged policy is exactly 1, in fp32
and in bf16 (in bf16 another formula's rounding differs enough to move log-probs visibly); exported and traced
graphs hold a plain ``Elu``. The backward is computed from the output, ``elu'(x) = 1 if y > 0 else y + 1`` (aten's
``elu_backward`` with ``is_result``), instead of evaluating ``exp`` on the input again as ``torch.nn.ELU``'s
backward does (``benchmarks/train_throughput.py`` times both).
"""

import torch
from torch import nn


class _ELUFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        y = nn.functional.elu(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return torch.ops.aten.elu_backward(grad, 1.0, 1.0, 1.0, True, y)  # alpha, scale, input_scale, is_result


class ELU(nn.Module):
    """``nn.ELU()`` (alpha = 1) with the cheaper backward above; any shape, elementwise."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if (x.requires_grad and torch.is_grad_enabled() and not torch.jit.is_tracing()
                and not torch.onnx.is_in_onnx_export() and not torch.compiler.is_compiling()):
            return _ELUFunction.apply(x)
        return nn.functional.elu(x)
