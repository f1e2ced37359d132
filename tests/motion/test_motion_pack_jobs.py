"""simppo-pack at scale: shards written by worker processes, and an interrupted pack resumed (``--resume``)
without redoing the shards whose inputs are unchanged."""

from __future__ import annotations

import os

import pytest

import simppo.motion.pack as pack_mod
from simppo.motion.pack import PackOptions, pack_motions
from simppo.utils.files import partial_directory
from tests.motion.motion_testutil import tiny_clip, tiny_robot, write_csv


def clips(tmp_path, n: int) -> list[str]:
    for i in range(n):
        write_csv(tmp_path / f"c{i}.csv", tiny_clip(12 + i, seed=i))
    return [str(tmp_path / f"c{i}.csv") for i in range(n)]


def contents(pack) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(pack.iterdir())}


REAL_PACK_SHARD = pack_mod.pack_shard


def recording(calls: list[str], interrupt_at: int | None = None):
    """A ``pack_shard`` that appends each shard's name to ``calls`` and raises ``KeyboardInterrupt`` (an interrupted
    pack) on call number ``interrupt_at``."""
    def pack_shard(path, *args):
        calls.append(path.name)
        if len(calls) == interrupt_at:
            raise KeyboardInterrupt
        return REAL_PACK_SHARD(path, *args)
    return pack_shard


def interrupt_at_the_third_shard(monkeypatch, inputs: list[str], out, opts: PackOptions, calls: list[str]) -> None:
    """Pack ``inputs`` into ``out`` and interrupt it at its third shard (``calls``: the shards begun); from then on
    ``pack_shard`` records without interrupting."""
    monkeypatch.setattr(pack_mod, "pack_shard", recording(calls, interrupt_at=3))
    with pytest.raises(KeyboardInterrupt):
        pack_motions(inputs, out, robot=tiny_robot(), opts=opts)
    monkeypatch.setattr(pack_mod, "pack_shard", recording(calls))


def test_worker_processes_write_the_same_pack(tmp_path):
    inputs = clips(tmp_path, 5)
    one = pack_motions(inputs, tmp_path / "one", robot=tiny_robot(), opts=PackOptions(max_motions_per_shard=2))
    two = pack_motions(inputs, tmp_path / "two", robot=tiny_robot(),
                       opts=PackOptions(max_motions_per_shard=2, workers=2))
    assert len(one.shards) == 3 and contents(tmp_path / "one") == contents(tmp_path / "two")
    assert one.num_motions == two.num_motions == 5


def test_resume_keeps_the_finished_shards_and_redoes_the_changed_ones(tmp_path, monkeypatch):
    inputs = clips(tmp_path, 5)
    out, opts = tmp_path / "out", PackOptions(max_motions_per_shard=2, resume=True)
    calls = []
    interrupt_at_the_third_shard(monkeypatch, inputs, out, opts, calls)
    partial = partial_directory(out)
    assert not out.exists() and sorted(os.listdir(partial)) == ["progress.json", "shard_00000.sms", "shard_00001.sms"]
    calls.clear()
    write_csv(tmp_path / "c1.csv", tiny_clip(20, seed=9))  # the first shard's input changed meanwhile
    res = pack_motions(inputs, out, robot=tiny_robot(), opts=opts)
    assert calls == ["shard_00000.sms", "shard_00002.sms"]  # the second shard was finished and is unchanged
    assert not partial.exists() and res.num_motions == 5
    fresh = pack_motions(inputs, tmp_path / "fresh", robot=tiny_robot(), opts=PackOptions(max_motions_per_shard=2))
    assert contents(out) == contents(tmp_path / "fresh") and len(fresh.shards) == 3
    # a resumed folder from a larger input set: its extra shards do not enter the pack
    calls.clear()
    interrupt_at_the_third_shard(monkeypatch, inputs, tmp_path / "out2",
                                 PackOptions(max_motions_per_shard=1, resume=True), calls)
    res = pack_motions(inputs[:1], tmp_path / "out2", robot=tiny_robot(),
                       opts=PackOptions(max_motions_per_shard=1, resume=True))
    assert sorted(os.listdir(tmp_path / "out2")) == ["index.json", "shard_00000.sms"] and res.num_motions == 1


def test_resume_after_an_upgrade_of_the_packing_code_redoes_every_shard(tmp_path, monkeypatch):
    inputs = clips(tmp_path, 3)
    out, opts = tmp_path / "out", PackOptions(max_motions_per_shard=1, resume=True)
    calls = []
    interrupt_at_the_third_shard(monkeypatch, inputs, out, opts, calls)
    assert calls == ["shard_00000.sms", "shard_00001.sms", "shard_00002.sms"]
    calls.clear()
    # the same inputs and options, packed by another version of simppo's packing code
    monkeypatch.setattr(pack_mod, "packing_code_digest", lambda: "another simppo")
    res = pack_motions(inputs, out, robot=tiny_robot(), opts=opts)
    assert calls == ["shard_00000.sms", "shard_00001.sms", "shard_00002.sms"] and res.num_motions == 3


def test_cli_says_where_the_work_was_kept(tmp_path, monkeypatch, capsys):
    from simppo.cli import pack as cli

    inputs = clips(tmp_path, 2)
    monkeypatch.setattr(cli, "pack_motions", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt))
    assert cli.main([*inputs, "--out", str(tmp_path / "p"), "--resume"]) == 130
    err = capsys.readouterr().err
    assert f"finished shards kept in {partial_directory(tmp_path / 'p')}; run again with --resume" in err
    with pytest.raises(SystemExit):
        cli.main([*inputs, "--out", str(tmp_path / "p"), "--workers", "-1"])
