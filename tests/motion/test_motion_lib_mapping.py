"""On the CPU, MotionLib maps the frames from disk instead of copying them: the same values as a copy, a
resident-memory cost that is a small fraction of the pack, and a frames file per multi-shard pack that is built
once and rebuilt when a shard changes."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from simppo.motion.format import MotionMeta, ShardHeader, open_shard, write_shard
from simppo.motion.index import resolve_shard_paths
from simppo.motion.motion_lib import MotionLib
from simppo.motion.pack import PackOptions, pack_motions
from simppo.paths import MOTIONS_DIR
from tools.resident import motion_lib_resident_growth

CLIPS = [str(MOTIONS_DIR / f"{c}.csv") for c in ("walk", "squat", "turn")]


def test_mapped_frames_equal_copied_frames_and_the_frames_file_follows_the_shards(tmp_path):
    pack_motions(CLIPS, tmp_path / "p", opts=PackOptions(max_motions_per_shard=2))  # two shards
    mapped, copied = MotionLib([str(tmp_path / "p")]), MotionLib([str(tmp_path / "p")], map_on_cpu=False)
    assert copied.mapped_file is None and mapped.mapped_file.endswith(".frames")
    assert set(mapped.frames) == set(copied.frames)
    for name, t in copied.frames.items():
        assert torch.equal(mapped.frames[name], t), name
    state_m, state_c = mapped.alloc_state(3, 2), copied.alloc_state(3, 2)
    ids, times = torch.tensor([0, 1, 2], dtype=torch.int32), torch.tensor([0.3, 1.7, 4.9])
    mapped.get_motion_state(ids, times, torch.tensor([0.02, 0.1]), out=state_m)
    copied.get_motion_state(ids, times, torch.tensor([0.02, 0.1]), out=state_c)
    for name, t in state_c.tensors().items():
        assert torch.equal(getattr(state_m, name), t), name
    # built once: a second library maps the same file; a changed shard gets a new one
    first = mapped.mapped_file
    stamp = os.stat(first).st_mtime_ns
    assert MotionLib([str(tmp_path / "p")]).mapped_file == first and os.stat(first).st_mtime_ns == stamp
    pack_motions(CLIPS[::-1], tmp_path / "p", force=True, opts=PackOptions(max_motions_per_shard=2))
    again = MotionLib([str(tmp_path / "p")])
    assert again.mapped_file != first and again.motion_names == ["turn", "squat", "walk"]
    # one shard: mapped as it is
    pack_motions(CLIPS[:1], tmp_path / "one")
    assert MotionLib([str(tmp_path / "one")]).mapped_file == str(resolve_shard_paths([str(tmp_path / "one")])[0])


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="resident memory is read from /proc (Linux)")
def test_resident_memory_grows_by_a_small_fraction_of_the_pack(tmp_path):
    pack_motions(CLIPS[:1], tmp_path / "walk")
    shard = open_shard(resolve_shard_paths([str(tmp_path / "walk")])[0])
    reps = 200  # ~55 MB of frames: one long motion of the walk repeated
    arrays = {n: np.concatenate([np.asarray(shard.array(n))] * reps) for n in shard.header.fields}
    frames = len(arrays["root_pos"])
    meta = MotionMeta("long_walk", shard.header.motions[0].fps, 0, frames, 1.0, "walk.csv")
    h = shard.header
    header = ShardHeader(robot=h.robot, joint_names=h.joint_names, body_names=h.body_names,
                         contact_bodies=h.contact_bodies, motions=[meta])
    path = write_shard(tmp_path / "big.sms", header, arrays)
    size = os.path.getsize(path)
    assert size > 50 * 2**20
    mapped, num_frames = motion_lib_resident_growth(path, "map")
    fixed, _ = motion_lib_resident_growth(shard.path, "map")  # what any MotionLib costs: a 5 s clip
    copied, _ = motion_lib_resident_growth(path, "copy")
    assert num_frames == frames
    assert mapped - fixed < 0.1 * size, (mapped, fixed, size)
    assert copied - fixed > 0.8 * size, (copied, fixed, size)  # a copy, for comparison, holds the whole pack
