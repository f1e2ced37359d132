"""MotionIndex: header-only opening of huge packs, stable rows, digests."""

import json
import os
import time

import numpy as np
import pytest

from simppo.motion import MotionIndex, MotionLib, MotionShard, names_digest
from simppo.motion.config import MotionCfg
from simppo.motion.format import MotionMeta, ShardFormatError, ShardHeader, open_shard, write_shard
from simppo.motion.index import INDEX_FILE, assign_shards
from simppo.motion.pack import pack_motions
from tests.motion.motion_testutil import tiny_clip, tiny_robot, write_csv

JOINTS = [f"j{i}" for i in range(29)]
BODIES = [f"b{i}" for i in range(30)]


def _sparse_pack(d, frames_per_motion: int, motions: int = 10):
    """A pack whose shard arrays are reserved sparsely (header written, file truncated to size)."""
    d.mkdir()
    metas = [MotionMeta(f"m{i:04d}", 30.0, i * frames_per_motion, frames_per_motion) for i in range(motions)]
    h = ShardHeader("fake", JOINTS, BODIES, ["b6", "b12"], metas)
    write_shard(d / "shard_00000.sms", h, None)
    (d / INDEX_FILE).write_text(
        json.dumps(
            {
                "format": "simppo-motion-pack",
                "version": 1,
                "robot": "fake",
                "robot_digest": h.robot_digest,
                "num_motions": motions,
                "num_frames": h.num_frames,
                "shards": [
                    {
                        "file": "shard_00000.sms",
                        "num_motions": motions,
                        "num_frames": h.num_frames,
                        "names_digest": h.names_digest,
                    }
                ],
            }
        )
    )
    return h


def _rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _best_open_time(path, reps=7) -> float:
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        MotionIndex.from_sources([path])
        best = min(best, time.perf_counter() - t0)
    return best


def test_open_million_frame_pack_is_header_only(tmp_path):
    big = _sparse_pack(tmp_path / "big", 100_000)
    _sparse_pack(tmp_path / "small", 100)
    size = os.path.getsize(tmp_path / "big/shard_00000.sms")
    assert big.num_frames == 1_000_000 and size > 1_800_000_000  # ~1.8 GB of (sparse) pose arrays
    MotionIndex.from_sources([tmp_path / "small"])  # warm imports / caches
    rss0 = _rss_bytes()
    idx = MotionIndex.from_sources([tmp_path / "big"])
    grew = _rss_bytes() - rss0
    assert idx.num_motions == 10 and idx.shards[0].count == 10
    assert grew < 20 * 2**20, f"opening grew RSS by {grew / 2**20:.1f} MB"
    t_big, t_small = _best_open_time(tmp_path / "big"), _best_open_time(tmp_path / "small")
    print(f"\nopen 1M-frame pack {t_big * 1e3:.3f} ms, 1k-frame pack {t_small * 1e3:.3f} ms")
    assert t_big < 5 * t_small + 2e-3
    # opening a shard maps arrays lazily: touching one frame does not load the file
    rss1 = _rss_bytes()
    sh = open_shard(idx.shards[0].path)
    arr = sh.array("body_pos_w")
    assert arr.shape == (1_000_000, 30, 3) and float(arr[999_999, 29, 2]) == 0.0
    assert _rss_bytes() - rss1 < 20 * 2**20


@pytest.fixture(scope="module")
def three_shards(tmp_path_factory):
    d = tmp_path_factory.mktemp("idx")
    rk = tiny_robot()
    packs = []
    for p, names in enumerate([["a", "b"], ["c"], ["d", "e", "f"]]):
        for n in names:
            write_csv(d / f"{n}.csv", tiny_clip(8, seed=ord(n)))
        pack_motions([d / f"{n}.csv" for n in names], d / f"p{p}", robot=rk)
        packs.append(d / f"p{p}")
    return packs


def test_rows_are_stable_and_digests_validate(three_shards):
    p0, p1, p2 = three_shards
    idx01 = MotionIndex.from_sources([p0, p1])
    idx012 = MotionIndex.from_sources([p0, p1, p2])
    assert [s.offset for s in idx012.shards] == [0, 2, 3] and idx012.num_motions == 6
    assert idx012.shards[:2] == idx01.shards  # appending keeps earlier rows
    assert idx01.extend([p2]).shards == idx012.shards
    assert idx012.shards[2].names_digest == names_digest(["d", "e", "f"])
    sd = idx012.state_dict()
    assert json.loads(json.dumps(sd)) == sd  # plain types only
    assert MotionIndex.from_state_dict(sd).shards == idx012.shards
    assert isinstance(idx012.shards[0], MotionShard)
    lib = MotionLib([p2])
    assert idx012.offset_for(lib) == 3
    lib12 = MotionLib([p1, p2])
    assert idx012.offset_for(lib12) == 2
    assert MotionIndex.build(lib12).shards == MotionIndex.from_sources([p1, p2]).shards
    with pytest.raises(ValueError, match="not part of this motion index"):
        idx01.offset_for(lib)
    with pytest.raises(ValueError):
        MotionIndex.from_sources([p2, p1]).offset_for(MotionLib([p1, p0]))


def test_bad_sources(tmp_path, three_shards):
    with pytest.raises(ShardFormatError, match="no such"):
        MotionIndex.from_sources([tmp_path / "nope.sms"])
    (tmp_path / "junk.sms").write_bytes(b"not a shard at all" * 4)
    with pytest.raises(ShardFormatError, match="bad magic"):
        MotionIndex.from_sources([tmp_path / "junk.sms"])
    shard = three_shards[0] / "shard_00000.sms"
    data = shard.read_bytes()
    (tmp_path / "trunc.sms").write_bytes(data[: len(data) // 2])
    with pytest.raises(ShardFormatError, match="truncated"):
        MotionIndex.from_sources([tmp_path / "trunc.sms"])
    # a shard header records aligned, contiguous fields
    h = open_shard(shard).header
    offs = [f["offset"] for f in h.fields.values()]
    assert all(o % 64 == 0 for o in offs) and offs == sorted(offs)
    assert np.all(np.diff(offs) >= [f["nbytes"] for f in list(h.fields.values())[:-1]])


def test_assign_shards_gives_every_shard_to_one_rank_balanced_by_frames():
    assert assign_shards([100, 10, 60, 50], 2) == [[0, 1], [2, 3]]  # 110 frames each
    rng = np.random.default_rng(0)
    for _ in range(50):
        world = int(rng.integers(1, 6))
        frames = [int(f) for f in rng.integers(1, 1000, size=int(rng.integers(world, 20)))]
        ranks = assign_shards(frames, world)
        assert sorted(i for r in ranks for i in r) == list(range(len(frames)))
        assert all(r and r == sorted(r) for r in ranks)
        totals = [sum(frames[i] for i in r) for r in ranks]
        assert max(totals) - min(totals) <= max(frames)  # greedy to the least-loaded rank never overshoots more
        assert assign_shards(frames, world) == ranks  # every rank computes the same split


def test_rank_chunks_load_disjoint_shards_with_global_rows(three_shards):
    whole = MotionIndex.from_sources(three_shards)  # 2, 1 and 3 motions of 8 frames: 16, 8 and 24 frames
    chunks = [whole.chunk(r, 2) for r in range(2)]
    assert [[s.path for s in c.shards] for c in chunks] == [[whole.shards[2].path],
                                                            [whole.shards[0].path, whole.shards[1].path]]
    assert chunks[0].shards[0].offset == 3 and [s.offset for s in chunks[1].shards] == [0, 2]  # rows stay global
    assert all(c.whole is whole for c in chunks) and whole.whole is whole and whole.chunk(0, 1) is whole
    assert chunks[0].chunk_state() == chunks[1].chunk_state() == {"mode": "rank", "world_size": 2,
                                                                  "rank_shards": [[2], [0, 1]]}
    assert whole.chunk_state() == {"mode": "all"}
    libs = [MotionLib(c) for c in chunks]
    assert [lib.motion_names for lib in libs] == [["d", "e", "f"], ["a", "b", "c"]]  # only the rank's share
    with pytest.raises(ShardFormatError, match="3 shard\\(s\\) for 4 ranks.*--max-motions-per-shard"):
        whole.chunk(0, 4)


def test_motion_cfg_chunk_picks_this_ranks_share(three_shards):
    cfg = MotionCfg(files=[str(p) for p in three_shards], chunk="rank")
    assert cfg.load_index().num_motions == 6  # no process group: one rank loads everything
    assert cfg.load_index(rank=1, world_size=2).num_motions == 3
    assert MotionCfg(files=cfg.files).load_index(rank=1, world_size=2).num_motions == 6  # chunk=all
    with pytest.raises(ValueError, match="motion.chunk='shard': choose from"):
        MotionCfg(files=cfg.files, chunk="shard").load_index()
