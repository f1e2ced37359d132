"""motion_interp_kernel vs a float64 NumPy reference (tolerance 1e-5 absolute), in both launch layouts (one thread
per item, CUDA's; one per env and slot, the CPU's), with and without an env mask."""

import numpy as np
import pytest
import torch
import warp as wp

from simppo.kernels.motion_interp import MotionFrames, MotionQuery, MotionStateWp, interpolate
from simppo.utils.device import init_warp

TOL = 1e-5


def _slerp64(a, b, w):
    d = np.sum(a * b, -1, keepdims=True)
    b = np.where(d < 0, -b, b)
    d = np.abs(d)
    th = np.arccos(np.clip(d, -1, 1))
    s = np.sin(th)
    small = s < 1e-9
    wa = np.where(small, 1 - w, np.sin((1 - w) * th) / np.where(small, 1, s))
    wb = np.where(small, w, np.sin(w * th) / np.where(small, 1, s))
    q = wa * a + wb * b
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def _reference(frames, starts, nfr, dts, ids, times, offs):
    N, F = ids.shape[0], 1 + offs.shape[0]
    lengths = (nfr - 1) * dts
    t = np.concatenate([times[:, None], times[:, None] + offs[None, :]], axis=1).astype(np.float64)
    m = ids[:, None].repeat(F, 1)
    t = np.clip(t, 0.0, lengths[m])
    phase = t / dts[m]
    i0 = np.clip(np.floor(phase).astype(int), 0, nfr[m] - 1)
    i1 = np.minimum(i0 + 1, nfr[m] - 1)
    w = np.clip(phase - i0, 0, 1)
    a, b = starts[m] + i0, starts[m] + i1
    out = {}
    for k, x in frames.items():
        x = x.astype(np.float64)
        xa, xb = x[a], x[b]
        ww = w.reshape(w.shape + (1,) * (x.ndim - 1))
        if k in ("root_quat", "body_quat_w"):
            out[k] = _slerp64(xa, xb, ww[..., None] if xa.ndim > ww.ndim else ww)
        elif k == "contacts":
            out[k] = np.where(ww >= 0.5, xb, xa).astype(np.float64)
        else:
            out[k] = (1 - ww) * xa + ww * xb
    assert out["root_pos"].shape == (N, F, 3)
    return out


def _rand_quat(rng, shape, step=0.25):
    """Smoothly varying unit quaternions along axis 0 with random sign flips."""
    q = rng.normal(size=shape)
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    for t in range(1, shape[0]):
        q[t] = q[t - 1] + step * rng.normal(size=shape[1:])
        q[t] /= np.linalg.norm(q[t], axis=-1, keepdims=True)
    flip = rng.random(shape[:-1]) < 0.3
    q[flip] *= -1
    return q


def _view(t: torch.Tensor, name: str) -> wp.array:
    if name in ("dof_pos", "dof_vel", "contacts"):
        return wp.from_torch(t)
    return wp.from_torch(t, dtype=wp.vec3 if t.shape[-1] == 3 else wp.vec4)


@pytest.mark.parametrize("per_item", [False, True], ids=["per_slot", "per_item"])
def test_motion_interp_matches_numpy_reference(per_item):
    init_warp()
    rng = np.random.default_rng(0)
    B, D, C = 5, 7, 2
    nfr = np.array([12, 1, 30, 7], np.int32)
    dts = np.array([1 / 30, 1 / 50, 1 / 30, 1 / 10], np.float32)
    starts = np.concatenate([[0], np.cumsum(nfr)[:-1]]).astype(np.int32)
    T = int(nfr.sum())
    frames = {
        "root_pos": rng.normal(size=(T, 3)),
        "root_quat": _rand_quat(rng, (T, 4)),
        "root_lin_vel_w": rng.normal(size=(T, 3)),
        "root_ang_vel_w": rng.normal(size=(T, 3)),
        "dof_pos": rng.normal(size=(T, D)),
        "dof_vel": rng.normal(size=(T, D)),
        "body_pos_w": rng.normal(size=(T, B, 3)),
        "body_quat_w": _rand_quat(rng, (T, B, 4)),
        "body_lin_vel_w": rng.normal(size=(T, B, 3)),
        "body_ang_vel_w": rng.normal(size=(T, B, 3)),
        "contacts": rng.integers(0, 2, size=(T, C)).astype(np.uint8),
    }
    frames = {k: (v if v.dtype == np.uint8 else v.astype(np.float32)) for k, v in frames.items()}
    N, K = 257, 3
    ids = rng.integers(0, len(nfr), N).astype(np.int32)
    lengths = (nfr - 1) * dts
    times = (rng.uniform(-0.2, 1.2, N) * lengths[ids]).astype(np.float32)
    times[:4] = 0.0
    times[4] = lengths[ids[4]]
    offs = np.array([0.0333, 0.1, 0.5], np.float32)

    tf = {k: torch.from_numpy(v) for k, v in frames.items()}
    wf = {k: _view(v, k) for k, v in tf.items()}
    shapes = {
        "root_pos": (3,),
        "root_quat": (4,),
        "root_lin_vel_w": (3,),
        "root_ang_vel_w": (3,),
        "dof_pos": (D,),
        "dof_vel": (D,),
        "body_pos_w": (B, 3),
        "body_quat_w": (B, 4),
        "body_lin_vel_w": (B, 3),
        "body_ang_vel_w": (B, 3),
        "contacts": (C,),
    }
    out_t = {k: torch.zeros((N, K + 1) + s) for k, s in shapes.items()}
    lib = MotionFrames()
    lib.start, lib.num_frames = wp.from_numpy(starts, dtype=wp.int32), wp.from_numpy(nfr, dtype=wp.int32)
    lib.dt = wp.from_numpy(dts, dtype=wp.float32)
    lib.length = wp.from_numpy(((nfr - 1) * dts).astype(np.float32), dtype=wp.float32)
    for k, v in wf.items():
        setattr(lib, k, v)
    lib.num_bodies, lib.num_dofs, lib.num_contacts = B, D, C
    query = MotionQuery()
    query.motion_ids, query.times = wp.from_numpy(ids, dtype=wp.int32), wp.from_numpy(times, dtype=wp.float32)
    query.future_offsets, query.env_mask = wp.from_numpy(offs, dtype=wp.float32), wp.zeros(N, dtype=wp.bool)
    query.use_mask = 0
    out = MotionStateWp()
    for k, v in out_t.items():
        setattr(out, k, _view(v, k))
    interpolate(lib, query, out, per_item=per_item)
    wp.synchronize()
    ref = _reference(frames, starts, nfr, dts.astype(np.float64), ids, times, offs)
    _check(out_t, ref, np.ones(N, bool))

    # masked: only the envs in the mask get the new times; the others keep their rows
    mask = rng.random(N) < 0.3
    before = {k: v.clone() for k, v in out_t.items()}
    times2 = (times + 0.05).astype(np.float32)
    query.times = wp.from_numpy(times2, dtype=wp.float32)
    query.env_mask, query.use_mask = wp.from_numpy(mask, dtype=wp.bool), 1
    interpolate(lib, query, out, per_item=per_item)
    wp.synchronize()
    _check(out_t, _reference(frames, starts, nfr, dts.astype(np.float64), ids, times2, offs), mask)
    for k, v in out_t.items():
        assert torch.equal(v[torch.from_numpy(~mask)], before[k][torch.from_numpy(~mask)]), k


def _check(out_t: dict, ref: dict, rows: np.ndarray) -> None:
    for k, r in ref.items():
        got = out_t[k].numpy().astype(np.float64)[rows]
        r = r[rows]
        if k in ("root_quat", "body_quat_w"):  # q and -q are the same rotation
            got = got * np.sign(np.sum(got * r, -1, keepdims=True))
        np.testing.assert_allclose(got, r, atol=TOL, rtol=0, err_msg=k)
