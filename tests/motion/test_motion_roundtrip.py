"""Pack → open → load round trip, interpolation against NumPy, FK and finite-difference velocities."""

import inspect

import mujoco
import numpy as np
import pytest
import torch

from simppo.motion import MotionIndex, MotionLib, open_shard
from simppo.motion.kinematics import RobotKinematics, quat_mul, quat_slerp
from simppo.motion.pack import PackOptions, expand_inputs, pack_motions, process_clip, read_clip
from tests.motion.motion_testutil import g1_robot_digest, tiny_clip, tiny_robot, write_csv


@pytest.fixture(scope="module")
def tiny_pack(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny")
    rk = tiny_robot()
    write_csv(d / "a.csv", tiny_clip(40, seed=1))
    write_csv(d / "b.csv", tiny_clip(25, seed=2), header="x,y,z,qw,qx,qy,qz,sh,lh,lk,rh,rk")
    np.savez(d / "c.npz", fps=50.0, qpos=tiny_clip(60, seed=3, fps=50.0))
    (d / "m.yaml").write_text("motions:\n  - {file: a.csv, name: a_heavy, weight: 3.0}\n")
    opts = PackOptions(max_motions_per_shard=2)
    res = pack_motions([d / "a.csv", d / "b.csv", d / "c.npz", d / "m.yaml"], d / "pack", robot=rk, opts=opts)
    return d, rk, opts, res


def test_pack_open_load_roundtrip_is_exact(tiny_pack):
    d, rk, opts, res = tiny_pack
    assert res.num_motions == 4 and len(res.shards) == 2
    srcs = expand_inputs([d / "a.csv", d / "b.csv", d / "c.npz", d / "m.yaml"], opts)
    expected = [process_clip(read_clip(s, rk, opts), rk, opts) for s in srcs]
    lib = MotionLib([str(d / "pack")])
    assert lib.motion_names == ["a", "b", "c", "a_heavy"]
    assert (lib.num_bodies, lib.num_dofs, lib.num_contacts) == (rk.num_bodies, rk.num_dofs, 2)
    assert lib.joint_names == ["l_hip", "l_knee", "r_hip", "r_knee", "shoulder"]  # MJCF qpos order
    starts = lib.motion_start.numpy()
    nfr = lib.motion_num_frames.numpy()
    assert list(nfr) == [40, 25, 60, 40]
    np.testing.assert_allclose(lib.motion_dt.numpy(), [1 / 30, 1 / 30, 1 / 50, 1 / 30], rtol=1e-7)
    np.testing.assert_allclose(lib.motion_lengths.numpy(), [39 / 30, 24 / 30, 59 / 50, 39 / 30], rtol=1e-6)
    np.testing.assert_allclose(lib.motion_weights.numpy(), [1 / 6, 1 / 6, 1 / 6, 3 / 6], rtol=1e-6)
    for m, exp in enumerate(expected):
        for k, v in exp.items():
            got = lib.frames[k][starts[m] : starts[m] + nfr[m]].numpy()
            assert got.dtype == v.dtype and np.array_equal(got, v), (m, k)
    # the shard itself holds the same bytes (memmap view)
    sh = open_shard(res.shards[1])
    assert isinstance(sh.array("body_pos_w"), np.memmap)
    assert np.array_equal(sh.array("dof_pos")[:60], expected[2]["dof_pos"])
    # loading from a MotionIndex, from shard files or from the index file gives the same lib
    for src in (
        MotionIndex.from_sources([d / "pack"]),
        [str(p) for p in res.shards],
        [str(d / "pack/index.json")],
    ):
        lib2 = MotionLib(src)
        assert lib2.motion_names == lib.motion_names
        assert all(torch.equal(lib2.frames[k], lib.frames[k]) for k in lib.frames)
    # CSV input columns are in the robot's joint order; dof_pos is in MJCF order
    rows = tiny_clip(40, seed=1)
    np.testing.assert_array_equal(expected[0]["dof_pos"][:, 4], rows[:, 7].astype(np.float32))  # shoulder


def test_get_motion_state_frames_midframes_and_future(tiny_pack):
    d, rk, opts, res = tiny_pack
    lib = MotionLib([str(d / "pack")])
    fr = {k: v.numpy() for k, v in lib.frames.items()}
    starts, nfr, dts = lib.motion_start.numpy(), lib.motion_num_frames.numpy(), lib.motion_dt.numpy()
    ids = np.concatenate([np.full(n, m) for m, n in enumerate(nfr)]).astype(np.int32)
    k = np.concatenate([np.arange(n) for n in nfr])
    # exactly at frame times → stored frames
    times = torch.from_numpy((k * dts[ids].astype(np.float64)).astype(np.float32))
    st = lib.get_motion_state(torch.from_numpy(ids), times)
    rows = starts[ids] + k
    for name, t in st.tensors().items():
        ref = fr[name][rows].astype(np.float32)
        got = t[:, 0].numpy()
        if name in ("root_quat", "body_quat_w"):
            got = got * np.sign(np.sum(got * ref, -1, keepdims=True))
        np.testing.assert_allclose(got, ref, atol=2e-6, rtol=0, err_msg=name)
    # mid-frame → NumPy lerp / slerp (float64) reference
    sel = k < nfr[ids] - 1
    ids2, k2 = ids[sel], k[sel]
    w = np.random.default_rng(0).uniform(0.05, 0.95, len(k2))
    times2 = ((k2 + w) * dts[ids2].astype(np.float64)).astype(np.float32)
    w = times2.astype(np.float64) / dts[ids2].astype(np.float64) - k2  # the blend the float32 time encodes
    st2 = lib.get_motion_state(torch.from_numpy(ids2).long(), torch.from_numpy(times2))  # int64 ids
    a, b = starts[ids2] + k2, starts[ids2] + k2 + 1
    for name, t in st2.tensors().items():
        x = fr[name].astype(np.float64)
        ww = w.reshape((-1,) + (1,) * (x.ndim - 1))
        if name in ("root_quat", "body_quat_w"):
            ref = quat_slerp(x[a], x[b], ww)
        elif name == "contacts":
            ref = np.where(ww >= 0.5, x[b], x[a])
        else:
            ref = (1 - ww) * x[a] + ww * x[b]
        got = t[:, 0].numpy().astype(np.float64)
        if name in ("root_quat", "body_quat_w"):
            got = got * np.sign(np.sum(got * ref, -1, keepdims=True))
        np.testing.assert_allclose(got, ref, atol=1e-5, rtol=0, err_msg=name)
    # future offsets == separate queries (clamped at the clip end and at 0)
    n = 64
    ids3 = lib.sample_motions(n)
    t3 = lib.sample_times(ids3)
    offs = torch.tensor([-0.5, 0.0, 0.07, 0.5, 3.0])
    out = lib.alloc_state(n, num_future=len(offs))
    lib.get_motion_state(ids3, t3, offs, out=out)
    for j, o in enumerate(offs):
        single = lib.get_motion_state(ids3, t3 + o)
        for name, tt in single.tensors().items():
            torch.testing.assert_close(getattr(out, name)[:, j + 1], tt[:, 0], atol=1e-6, rtol=0)
    for name, tt in lib.get_motion_state(ids3, t3).tensors().items():
        torch.testing.assert_close(getattr(out, name)[:, 0], tt[:, 0], atol=0, rtol=0)
    # clamping: beyond the end = last frame, before 0 = first frame
    end = lib.get_motion_state(ids3, lib.motion_lengths[ids3.long()] + 10.0)
    last = starts[ids3.numpy()] + nfr[ids3.numpy()] - 1
    np.testing.assert_allclose(end.root_pos[:, 0].numpy(), fr["root_pos"][last], atol=1e-6)


def test_sampling_weighted_and_in_range(tiny_pack):
    d, *_ = tiny_pack
    lib = MotionLib([str(d / "pack")])
    torch.manual_seed(0)
    out = torch.empty(20000, dtype=torch.int32)
    ids = lib.sample_motions(20000, out=out)
    assert ids is out and ids.dtype == torch.int32
    freq = torch.bincount(ids.long(), minlength=4).float() / 20000
    torch.testing.assert_close(freq, lib.motion_weights, atol=0.02, rtol=0)
    t = lib.sample_times(ids, truncate_time=0.2)
    assert t.dtype == torch.float32
    lim = (lib.motion_lengths[ids.long()] - 0.2).clamp(min=0)
    assert bool((t >= 0).all()) and bool((t <= lim + 1e-6).all())
    assert float(t.max()) > 0.5 * float(lim.max())
    t64 = lib.sample_times(ids.long())
    assert bool((t64 <= lib.motion_lengths[ids.long()] + 1e-6).all())


def test_hot_paths_have_no_host_sync_calls():
    src = "".join(
        inspect.getsource(getattr(MotionLib, f))
        for f in ("sample_motions", "sample_times", "get_motion_state", "_warp_views")
    )
    for bad in (".item(", ".cpu(", ".numpy(", ".tolist(", "bool(", "float(", "int(t", "np."):
        assert bad not in src, bad


def test_body_positions_equal_mujoco_fk_and_constant_velocity(tmp_path):
    rk = RobotKinematics.from_robot("g1")
    m = rk.model
    rng = np.random.default_rng(0)
    T = 20
    home = m.key("home").qpos
    q = np.tile(home, (T, 1))
    q[:, 7:] += rng.uniform(-0.1, 0.1, (T, m.nq - 7))
    q[:, 7:] = np.clip(q[:, 7:], rk.joint_lower, rk.joint_upper)
    q[:, 3:7] = quat_mul(np.array([np.cos(0.3), 0, 0, np.sin(0.3)]), np.tile(home[3:7], (T, 1)))
    rows = np.concatenate([q[:, :7], q[:, 7:][:, rk.qpos_to_input]], 1)
    np.savez(tmp_path / "fk.npz", fps=30.0, qpos=rows)
    # constant linear + angular velocity clip (joints fixed)
    v = np.array([0.4, -0.2, 0.05])
    w = np.array([0.3, -0.2, 1.1])
    t = np.arange(45) / 30.0
    c = np.tile(home, (45, 1))
    c[:, :3] = home[:3] + t[:, None] * v
    from simppo.motion.kinematics import quat_from_axis_angle

    c[:, 3:7] = quat_from_axis_angle(t[:, None] * w)
    c[:, 2] += 0.3  # keep every body above the ground while tumbling slowly
    crow = np.concatenate([c[:, :7], c[:, 7:][:, rk.qpos_to_input]], 1)
    np.savez(tmp_path / "const.npz", fps=30.0, qpos=crow)
    pack_motions([tmp_path / "fk.npz", tmp_path / "const.npz"], tmp_path / "p", robot="g1",
                 opts=PackOptions(allow_airborne=True))
    lib = MotionLib([str(tmp_path / "p")], robot_digest=g1_robot_digest())
    d = mujoco.MjData(m)
    for i in range(T):
        d.qpos[:] = q[i]
        mujoco.mj_kinematics(m, d)
        np.testing.assert_allclose(lib.frames["body_pos_w"][i].numpy(), d.xpos[1:], atol=1e-5, rtol=0)
        qq = lib.frames["body_quat_w"][i].numpy()
        np.testing.assert_allclose(np.abs(np.sum(qq * d.xquat[1:], -1)), 1.0, atol=1e-5)
    s = int(lib.motion_start[1])
    np.testing.assert_allclose(lib.frames["root_lin_vel_w"][s : s + 45].numpy(), np.tile(v, (45, 1)), atol=1e-4)
    np.testing.assert_allclose(lib.frames["root_ang_vel_w"][s : s + 45].numpy(), np.tile(w, (45, 1)), atol=1e-4)
    np.testing.assert_allclose(
        lib.frames["body_ang_vel_w"][s : s + 45].numpy(), np.tile(w, (45, rk.num_bodies, 1)), atol=1e-4
    )
    np.testing.assert_allclose(lib.frames["dof_vel"][s : s + 45].numpy(), 0.0, atol=1e-6)
    assert lib.body_names[0] == "pelvis"  # motion body 0 = MuJoCo body id 1
    np.testing.assert_array_equal(lib.frames["root_pos"].numpy(), lib.frames["body_pos_w"][:, 0].numpy())


def test_resampling_to_target_fps(tmp_path):
    rk = tiny_robot()
    rows = tiny_clip(31, seed=4, fps=30.0)
    write_csv(tmp_path / "r.csv", rows)
    pack_motions([tmp_path / "r.csv"], tmp_path / "p", robot=rk, opts=PackOptions(target_fps=50.0))
    lib = MotionLib([str(tmp_path / "p")])
    assert int(lib.motion_num_frames[0]) == 51 and abs(float(lib.motion_dt[0]) - 0.02) < 1e-9
    # frame 5 at 50 fps = t 0.1 s = source frame 3 exactly; frame 1 = source frame 0.6
    np.testing.assert_allclose(lib.frames["root_pos"][5].numpy(), rows[3, :3], atol=1e-6)
    np.testing.assert_allclose(lib.frames["root_pos"][1].numpy(), 0.4 * rows[0, :3] + 0.6 * rows[1, :3], atol=1e-6)
    q = quat_slerp(rows[0, 3:7], rows[1, 3:7], 0.6)
    got = lib.frames["root_quat"][1].numpy()
    np.testing.assert_allclose(got * np.sign(got @ q), q, atol=1e-6)


def test_state_shape_mismatches_are_rejected(tiny_pack):
    d, *_ = tiny_pack
    lib = MotionLib([str(d / "pack")])
    ids = lib.sample_motions(4)
    t = lib.sample_times(ids)
    out = lib.alloc_state(4, num_future=2)
    assert out.body_pos_w.shape == (4, 3, lib.num_bodies, 3) and out.contacts.shape == (4, 3, 2)
    with pytest.raises(ValueError, match="future"):
        lib.get_motion_state(ids, t, None, out=out)
    with pytest.raises(ValueError, match="future"):
        lib.get_motion_state(ids, t, torch.zeros(3), out=out)
    with pytest.raises(ValueError):
        lib.get_motion_state(ids[:3], t[:3], torch.zeros(2), out=out)
    st = lib.get_motion_state(ids, t.double(), torch.tensor([0.1, 0.2], dtype=torch.float64), out=out)
    assert st is out


def test_get_motion_state_mask_fills_only_masked_rows():
    import torch

    from simppo.motion.config import MotionCfg
    from simppo.motion.motion_lib import MotionLib

    lib = MotionLib(MotionCfg().resolved_files())
    n = 6
    ids = torch.arange(n, dtype=torch.int32) % lib.num_motions
    times = torch.linspace(0.1, 2.0, n)
    offs = torch.tensor([0.02, 0.04])
    full = lib.get_motion_state(ids, times, offs)
    out = lib.alloc_state(n, 2)
    for t in out.tensors().values():
        t.fill_(7.0)
    mask = torch.tensor([True, False, True, False, False, True])
    lib.get_motion_state(ids, times, offs, out=out, mask=mask)
    for name, t in out.tensors().items():
        ref = getattr(full, name)
        assert torch.equal(t[mask], ref[mask]), name
        assert (t[~mask] == 7.0).all(), name


def test_bound_queries_read_the_callers_buffers_in_place():
    from simppo.motion.config import MotionCfg

    lib = MotionLib(MotionCfg().resolved_files())
    n = 6
    ids = torch.arange(n, dtype=torch.int32) % lib.num_motions
    times = torch.linspace(0.1, 2.0, n)
    offs = torch.tensor([0.02, 0.04])
    mask = torch.zeros(n, dtype=torch.bool)
    out = lib.alloc_state(n, 2)
    q_all, q_masked = lib.bind_query(ids, times, offs, out), lib.bind_query(ids, times, offs, out, mask=mask)
    lib.query(q_all, out)
    for name, t in lib.get_motion_state(ids, times, offs).tensors().items():
        assert torch.equal(getattr(out, name), t), name
    times += 0.5  # the bound query sees the new values without being rebound
    ids.copy_(ids.flip(0))
    mask[[1, 4]] = True
    before = {k: v.clone() for k, v in out.tensors().items()}
    lib.query(q_masked, out)
    for name, t in lib.get_motion_state(ids, times, offs).tensors().items():
        assert torch.equal(getattr(out, name)[mask], t[mask]), name
        assert torch.equal(getattr(out, name)[~mask], before[name][~mask]), name
    with pytest.raises(ValueError, match="times must be a contiguous torch.float32"):
        lib.bind_query(ids, times.double(), offs, out)
    with pytest.raises(ValueError, match="future slots"):
        lib.bind_query(ids, times, torch.zeros(3), out)
