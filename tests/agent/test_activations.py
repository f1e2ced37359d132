"""simppo.agent.activations.ELU vs float64 ``torch.nn.functional.elu`` (values and gradients, 1e-6 absolute), and
its training forward against its no-grad forward (bit-equal, in fp32 and bf16)."""

import pytest
import torch
import torch.nn.functional as F

from simppo.agent.activations import ELU

TOL = 1e-6


def _inputs() -> torch.Tensor:
    x = torch.cat([torch.linspace(-30.0, 30.0, 20001), torch.tensor([0.0, -0.0, 1e-8, -1e-8, -1e-30])])
    return torch.cat([x, torch.randn(4096, generator=torch.Generator().manual_seed(0)) * 3]).reshape(-1, 13)


def test_training_path_matches_float64_elu_values_and_gradients():
    x = _inputs().requires_grad_()
    grad_out = torch.randn(x.shape, generator=torch.Generator().manual_seed(1))
    y = ELU()(x)
    assert y.grad_fn is not None and "ELUFunction" in type(y.grad_fn).__name__  # the output-based backward
    (g,) = torch.autograd.grad(y, x, grad_out)
    x64 = x.detach().double().requires_grad_()
    y64 = F.elu(x64)
    (g64,) = torch.autograd.grad(y64, x64, grad_out.double())
    assert y.shape == x.shape and y.dtype == torch.float32
    torch.testing.assert_close(y.double(), y64, atol=TOL, rtol=0)
    torch.testing.assert_close(g.double(), g64, atol=TOL, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_training_and_no_grad_forwards_are_torch_elu_exactly(dtype):
    """The rollout's sampling forward (no grad) and the update's forward (grad) give the same bits, so the PPO
    ratio of an unchanged policy is exactly 1."""
    x = _inputs().to(dtype)
    assert torch.equal(ELU()(x.clone().requires_grad_()).detach(), F.elu(x))
    with torch.no_grad():
        assert torch.equal(ELU()(x.clone().requires_grad_()), F.elu(x))
    assert torch.equal(ELU()(x), F.elu(x))


def test_traced_graphs_hold_torch_elu():
    traced = torch.jit.trace(ELU(), torch.randn(3, 4, requires_grad=True))
    assert "aten::elu" in str(traced.graph)


def test_gradients_reach_earlier_layers():
    lin = torch.nn.Linear(5, 4)
    x = torch.randn(8, 5)
    ELU()(lin(x)).square().sum().backward()
    ref = torch.nn.Linear(5, 4)
    ref.load_state_dict(lin.state_dict())
    F.elu(ref(x)).square().sum().backward()
    torch.testing.assert_close(lin.weight.grad, ref.weight.grad, atol=1e-5, rtol=1e-5)
