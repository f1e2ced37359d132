"""MJWarp on the GPU vs MuJoCo C (float64, CPU) on the same state: the tolerances of
``tests/sim/test_sim_parity.py`` (measured there for MJWarp on Warp's CPU device)."""

import torch

from simppo.sim import MJWarpSim, MuJoCoSim, SimCfg
from tests.gpu import GPU_ONLY
from tests.sim.test_sim_parity import STANDING, WALK, _walk_start

pytestmark = GPU_ONLY
N = 4


def _compare(device: str, qpos, qvel, ctrl, tol, report, label):
    a = MJWarpSim("g1", SimCfg(), num_envs=N, device=device)
    b = MuJoCoSim("g1", SimCfg(threads=2), num_envs=N)
    for s in (a, b):
        s.reset_worlds(torch.ones(N, dtype=torch.bool, device=s.device), qpos.to(s.device), qvel.to(s.device))
        s.ctrl.copy_(ctrl.to(s.device))
    ids = torch.as_tensor(a.robot.tracked_body_ids)
    worst = dict.fromkeys(tol, 0.0)
    for step in range(10):
        a.step()
        b.step()
        for k, t in tol.items():
            x, y = getattr(a, k).cpu(), getattr(b, k)
            if x.dim() == 3:
                x, y = x[:, ids], y[:, ids]
            worst[k] = max(worst[k], float((x - y).abs().max()))
            torch.testing.assert_close(x, y, atol=t, rtol=0, msg=lambda m, k=k, s=step: f"{k} at step {s + 1}: {m}")
        assert torch.equal(a.foot_contact.cpu(), b.foot_contact), step
    report(f"gpu/parity_{label}_max_abs_diff", {k: f"{v:.1e}" for k, v in worst.items()})


def test_standing_parity_on_gpu(cuda_device, gpu_report):
    ref = MuJoCoSim("g1", SimCfg(threads=1), num_envs=1)  # the home state and ctrl
    g = torch.Generator().manual_seed(0)
    ctrl = ref.home_ctrl_t + torch.tensor([0.0, 0.05, 0.1, 0.2])[:, None] * torch.randn(N, ref.nu, generator=g)
    _compare(cuda_device, ref.home_qpos_t.expand(N, -1), torch.zeros(N, ref.nv), ctrl, STANDING, gpu_report,
             "standing")


def test_walk_start_parity_on_gpu(cuda_device, gpu_report):
    _compare(cuda_device, *_walk_start(N), WALK, gpu_report, "walk")
