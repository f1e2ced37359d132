"""Model set-up shared by the backends: the constraint Jacobian layout."""

import mujoco
import numpy as np
import pytest
import torch
from mujoco_warp._src.io import is_sparse

from simppo.robot import load_mj_model
from simppo.robot.config import load_robot_cfg
from simppo.sim import MuJoCoSim, SimCfg
from simppo.sim.common import configure_model

J = mujoco.mjtJacobian


def test_auto_jacobian_is_mjwarps_layout_for_both_backends():
    """``auto`` resolves to the layout MJWarp picks for the MJCF (sparse for the G1's 35 dofs), which MuJoCo C's own
    ``auto`` would not (dense below 60 dofs); explicit layouts pass through; unknown names are refused."""
    raw = load_mj_model("g1")
    assert raw.opt.jacobian == J.mjJAC_AUTO and raw.nv == 35 and not mujoco.mj_isSparse(raw)
    m, _ = configure_model(load_robot_cfg("g1"), SimCfg())
    assert m.opt.jacobian == J.mjJAC_SPARSE and is_sparse(m) == is_sparse(raw) is True
    assert configure_model(load_robot_cfg("g1"), SimCfg(jacobian="dense"))[0].opt.jacobian == J.mjJAC_DENSE
    with pytest.raises(ValueError, match="sim.jacobian: unknown layout 'csr'"):
        SimCfg(jacobian="csr")


def test_jacobian_layout_changes_no_physics():
    """MuJoCo C dense vs sparse from the same contact-rich states: the same trajectory to float64 rounding
    (measured 1e-13 in qpos after 40 physics steps on training states; bound 1e-9)."""
    sims = [MuJoCoSim("g1", SimCfg(jacobian=j, threads=1), num_envs=3) for j in ("dense", "sparse")]
    g = torch.Generator().manual_seed(0)
    for _ in range(8):
        ctrl = sims[0].home_ctrl_t + 0.5 * torch.randn(3, sims[0].nu, generator=g)
        for s in sims:
            s.ctrl.copy_(ctrl)
            s.step()
    assert int(sims[0].foot_contact.sum()) > 0
    a, b = (s.state64[:, s.state_cols["qpos"].start:s.state_cols["qacc_warmstart"].start] for s in sims)
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-9)
