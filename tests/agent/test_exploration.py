"""Per-motion exploration (issue 12), unit level: stable rows, prepare_checkpoint's validation and expansion,
the σ sidecar and the σ-spread metrics. No env: a :class:`MotionIndex` of small packs and a bare actor."""

import copy
import json
import os

import pytest
import torch

import simppo.utils.files as files
from simppo.agent.checkpoint import CheckpointError
from simppo.agent.config import ActorCfg
from simppo.agent.exploration import (
    MotionSetError,
    exploration_state,
    joint_groups,
    motion_rows,
    num_rows,
    prepare_checkpoint,
    row_lr_factor,
    save_snapshot,
    sigma_metrics,
)
from simppo.agent.models import Actor
from simppo.motion.index import MotionIndex
from tests.helpers import assert_same_state as _assert_same

A = 29  # G1 actions


def index(packs, *names) -> MotionIndex:
    return MotionIndex.from_sources([packs[n] for n in names])


def actor_for(idx: MotionIndex | None, init_log_std: float = -1.0) -> Actor:
    torch.manual_seed(0)
    return Actor(8, A, ActorCfg(units=[16], init_log_std=init_log_std), None if idx is None else num_rows(idx))


def per_motion_checkpoint(idx: MotionIndex, seed: int = 1, with_optimizer: bool = False) -> dict:
    """A checkpoint as PPO writes it, with a distinct log-std per row (and Adam moments)."""
    g = torch.Generator().manual_seed(seed)
    actor = actor_for(idx)
    table = -1.0 + 0.1 * torch.randn(num_rows(idx), A, generator=g)
    model = {f"actor.{k}": v.clone() for k, v in actor.state_dict().items()}
    model["actor.log_std"] = table
    ckpt = {"model": model, "epoch": 3, "exploration": exploration_state("per_motion", idx)}
    if with_optimizer:
        opt = torch.optim.Adam(actor.parameters())
        actor.log_std.grad = torch.randn(actor.log_std.shape, generator=g)
        opt.step()
        ckpt["actor_optimizer"] = opt.state_dict()
    return ckpt


def shared_checkpoint(log_std: torch.Tensor) -> dict:
    actor = actor_for(None)
    model = {f"actor.{k}": v.clone() for k, v in actor.state_dict().items()}
    model["actor.log_std"] = log_std
    return {"model": model, "epoch": 1, "exploration": {"mode": "shared"}}


# ----------------------------------------------------------------------------- rows


def test_rows_are_stable_under_shard_appends(motion_packs):
    small, big = index(motion_packs, "A"), index(motion_packs, "A", "B", "C")
    assert num_rows(small) == 2 and num_rows(big) == 5
    assert [(s.offset, s.count) for s in big.shards] == [(0, 2), (2, 1), (3, 2)]
    assert torch.equal(motion_rows(big)[:2], motion_rows(small))
    names = [n for i in range(len(big.shards)) for n in big.header(i).motion_names]
    assert names == ["stand_sway", "squat", "walk", "arm_wave", "turn"]  # row r == motion id r of the lib

    # a checkpoint of A, loaded with B and C appended: A's rows unchanged, new rows = mean of the old ones
    ckpt = per_motion_checkpoint(small)
    out = prepare_checkpoint(ckpt, big, actor_for(big), load_training_state=False)
    table, old = out["model"]["actor.log_std"], ckpt["model"]["actor.log_std"]
    assert table.shape == (5, A)
    assert torch.equal(table[:2], old)
    torch.testing.assert_close(table[2:], old.mean(0).expand(3, A))


def test_appended_rows_get_zero_adam_moments_on_resume(motion_packs):
    small, big = index(motion_packs, "A"), index(motion_packs, "A", "B")
    ckpt = per_motion_checkpoint(small, with_optimizer=True)
    before = copy.deepcopy(ckpt)
    actor = actor_for(big)
    out = prepare_checkpoint(ckpt, big, actor, load_training_state=True)
    i = [n for n, _ in actor.named_parameters()].index("log_std")
    st, old = out["actor_optimizer"]["state"][i], ckpt["actor_optimizer"]["state"][i]
    for key in ("exp_avg", "exp_avg_sq"):
        assert st[key].shape == (3, A) and torch.equal(st[key][:2], old[key]) and not st[key][2:].any()
    torch.optim.Adam(actor.parameters()).load_state_dict(out["actor_optimizer"])  # fits the grown actor
    _assert_same(ckpt, before)


def test_same_motion_set_passes_unchanged(motion_packs):
    idx = index(motion_packs, "A", "B")
    ckpt = per_motion_checkpoint(idx)
    out = prepare_checkpoint(ckpt, index(motion_packs, "A", "B"), actor_for(idx), load_training_state=True)
    assert out["model"]["actor.log_std"] is ckpt["model"]["actor.log_std"]


# ----------------------------------------------------------------------------- changed motion sets

CHANGES = {
    # name: (checkpoint packs, packs now, the checkpoint pack named in the error, words the error must contain)
    "renamed": (("A", "B"), ("A_renamed", "B"), "A",
                ["motions renamed", "shard 0", "motion 1 is 'squat' in the checkpoint, 'squat_deep' now"]),
    "reordered_shards": (("A", "B"), ("B", "A"), "A", ["motion shards reordered", "shard 0", "is loaded as shard 1"]),
    "reordered_motions": (("A", "B"), ("A_reordered", "B"), "A",
                          ["motions reordered inside", "shard 0", "motion 0 is 'stand_sway' in the checkpoint, "
                           "'squat' now"]),
    "removed_middle": (("A", "B", "C"), ("A", "C"), "B",
                       ["motion shard removed", "shard 1", "1 motion, rows 2..2", "(motions ['walk'])"]),
    "removed_last": (("A", "B"), ("A",), "B", ["motion shard removed", "shard 1"]),
    "resized": (("A", "B"), ("A_resized", "B"), "A",
                ["motion shard resized", "shard 0", "has 3 motions now", "added ['step_in_place']"]),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_changed_motion_set_gets_a_precise_error(motion_packs, change):
    old, new, named, words = CHANGES[change]
    before_idx, now = index(motion_packs, *old), index(motion_packs, *new)
    ckpt = per_motion_checkpoint(before_idx, with_optimizer=True)
    snapshot = copy.deepcopy(ckpt)
    actor = actor_for(now)
    actor_before = {k: v.clone() for k, v in actor.state_dict().items()}
    for training in (False, True):
        with pytest.raises(MotionSetError) as e:
            prepare_checkpoint(ckpt, now, actor, load_training_state=training)
        msg = str(e.value)
        assert "\n" not in msg and isinstance(e.value, CheckpointError)
        for w in words:
            assert w in msg, msg
        assert str(motion_packs[named].resolve()) in msg, msg  # names the shard's file
    _assert_same(ckpt, snapshot)
    assert all(torch.equal(v, actor.state_dict()[k]) for k, v in actor_before.items())


def test_row_bounds_are_validated(motion_packs):
    idx = index(motion_packs, "A", "B")
    ckpt = per_motion_checkpoint(idx)
    short = {**ckpt, "model": {**ckpt["model"], "actor.log_std": ckpt["model"]["actor.log_std"][:2]}}
    with pytest.raises(MotionSetError, match="log-std has 2 rows but its motion index covers 3"):
        prepare_checkpoint(short, idx, actor_for(idx), False)
    bad = copy.deepcopy(ckpt)
    bad["exploration"]["motion_index"]["shards"][1]["offset"] = 5
    with pytest.raises(MotionSetError, match="shard 1 covers rows 5..5, expected to start at row 2"):
        prepare_checkpoint(bad, idx, actor_for(idx), False)
    no_index = {**ckpt, "exploration": {"mode": "per_motion"}}
    with pytest.raises(MotionSetError, match="no motion index"):
        prepare_checkpoint(no_index, idx, actor_for(idx), False)


# ----------------------------------------------------------------------------- shared <-> per-motion


def test_weights_only_start_expands_the_shared_sigma(motion_packs):
    idx = index(motion_packs, "A", "B", "C")
    shared = torch.linspace(-2.0, 0.0, A)
    ckpt = shared_checkpoint(shared)
    before = copy.deepcopy(ckpt)
    actor = actor_for(idx)
    out = prepare_checkpoint(ckpt, idx, actor, load_training_state=False)
    table = out["model"]["actor.log_std"]
    assert table.shape == (5, A) and all(torch.equal(row, shared) for row in table)
    actor.load_state_dict({k.removeprefix("actor."): v for k, v in out["model"].items()})
    _assert_same(ckpt, before)
    with pytest.raises(MotionSetError, match="trained with agent.exploration=shared; it cannot be resumed"):
        prepare_checkpoint(ckpt, idx, actor, load_training_state=True)


def test_shared_actor_refuses_a_per_motion_checkpoint_and_passes_a_shared_one(motion_packs):
    idx = index(motion_packs, "A")
    with pytest.raises(MotionSetError, match="trained with agent.exploration=per_motion"):
        prepare_checkpoint(per_motion_checkpoint(idx), idx, actor_for(None), False)
    ckpt = shared_checkpoint(torch.zeros(A))
    assert prepare_checkpoint(ckpt, None, actor_for(None), True) is ckpt


# ----------------------------------------------------------------------------- gradients, bounds


def test_only_used_rows_get_gradients_and_bounds_apply_per_row(motion_packs):
    idx = index(motion_packs, "A", "B", "C")
    actor = actor_for(idx)
    rows = torch.tensor([0, 3, 3, 0])
    mean, log_std = actor(torch.randn(4, 8), rows)
    assert log_std.shape == (4, A) and mean.shape == (4, A)
    (log_std.square().sum() + mean.sum()).backward()
    used = torch.zeros(5, dtype=torch.bool)
    used[[0, 3]] = True
    assert actor.log_std.grad[used].abs().sum(-1).gt(0).all() and not actor.log_std.grad[~used].any()
    with pytest.raises(ValueError, match="needs each sample's motion row"):
        actor(torch.randn(4, 8))
    with torch.no_grad():
        actor.log_std[1] = 5.0
        actor.log_std[2] = -9.0
    actor.clamp_log_std_()
    assert (actor.log_std[1] == 2.0).all() and (actor.log_std[2] == -7.0).all() and (actor.log_std[0] == -1.0).all()


# ----------------------------------------------------------------------------- sidecar and metrics


def test_snapshot_holds_every_motion_sigma_per_joint_group(motion_packs, tmp_path):
    idx = index(motion_packs, "A", "B")
    table = torch.full((3, A), -1.0)
    table[1] = 0.0  # squat: σ = 1
    path = save_snapshot(tmp_path / "exploration.json", idx, table, epoch=7, step_count=1234)
    doc = json.loads(path.read_text())
    assert (doc["format"], doc["epoch"], doc["step_count"]) == ("simppo-exploration", 7, 1234)
    assert list(doc["joint_groups"]) == ["left_leg", "right_leg", "waist", "left_arm", "right_arm"]
    assert sum(len(v) for v in doc["joint_groups"].values()) == A
    assert [(m["row"], m["name"]) for m in doc["motions"]] == [(0, "stand_sway"), (1, "squat"), (2, "walk")]
    assert doc["motions"][1]["sigma"]["left_leg"] == 1.0
    assert doc["motions"][0]["sigma_mean"] == pytest.approx(0.367879, abs=1e-6)
    assert doc["motions"][2]["shard"].startswith(str(motion_packs["B"]))
    e = pytest.approx(0.367879, abs=1e-6)
    assert doc["sigma_spread"] == {"min": e, "median": e, "max": 1.0}
    lines = path.read_text().splitlines()
    counts = [sum(f'"{n}"' in line for line in lines) for n in ("stand_sway", "squat", "walk", "left_leg")]
    assert counts == [1, 1, 1, 4]
    assert len(lines) == 23  # braces, 4 scalars, 3 + 5 + 3 entries with their brackets: one line per group and motion


@pytest.mark.parametrize("where", ["write", "replace"])
def test_snapshot_is_replaced_atomically(motion_packs, tmp_path, monkeypatch, where):
    """A crash while the new sidecar is written (or just before it is moved into place) leaves the old one."""
    idx = index(motion_packs, "A")
    path = save_snapshot(tmp_path / "exploration.json", idx, torch.zeros(2, A), epoch=1, step_count=10)
    old = path.read_bytes()

    def crash(*args, **kwargs):
        raise KeyboardInterrupt("killed")

    if where == "write":
        real_fdopen = os.fdopen

        def half_writer(fd, *args, **kwargs):
            f = real_fdopen(fd, *args, **kwargs)
            real_write = f.write

            def write(data):
                real_write(data[: len(data) // 2])
                f.flush()
                crash()

            f.write = write
            return f

        monkeypatch.setattr(files.os, "fdopen", half_writer)
    else:
        monkeypatch.setattr(files.os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        save_snapshot(path, idx, torch.ones(2, A), epoch=2, step_count=20)
    assert path.read_bytes() == old and json.loads(old)["epoch"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exploration.json"]  # no temp file left


def test_sigma_metrics_spread_and_hardest_motions():
    log_std = torch.log(torch.tensor([[0.1, 0.1], [0.2, 0.2], [0.4, 0.4], [0.8, 0.8]]))
    steps = torch.tensor([10.0, 10.0, 0.0, 10.0])
    terms = torch.tensor([5.0, 1.0, 0.0, 0.0])  # row 0 hardest, row 2 unvisited
    m = sigma_metrics(log_std, steps, terms, num_hardest=2)
    assert all(v.dim() == 0 for v in m.values())
    torch.testing.assert_close(m["exploration/sigma_min"], torch.tensor(0.1))
    torch.testing.assert_close(m["exploration/sigma_median"], torch.tensor(0.2))  # lower median
    torch.testing.assert_close(m["exploration/sigma_max"], torch.tensor(0.8))
    torch.testing.assert_close(m["exploration/sigma_hardest"], torch.tensor(0.15))  # rows 0 and 1
    torch.testing.assert_close(m["exploration/hardest_term_rate"], torch.tensor(0.3))


def test_joint_groups_fall_back_to_one_group_per_unknown_joint():
    assert joint_groups(["l_knee", "r_elbow", "neck_yaw", "slider"]) == {
        "left_leg": [0], "right_arm": [1], "head": [2], "slider": [3]}


def test_row_lr_factor_is_the_root_of_the_effective_number_of_rows():
    """sqrt(1 / Σ p²), hand-computed: R equal shares → sqrt(R); unused rows count for nothing; no samples: 1."""
    cases = [([5.0], 1.0), ([3.0, 3.0], 2 ** 0.5), ([7.0] * 16, 4.0), ([2.0, 1.0, 1.0, 0.0], (1 / 0.375) ** 0.5),
             ([9.0, 0.0, 1.0], (1 / 0.82) ** 0.5), ([0.0, 0.0], 1.0)]
    for counts, expected in cases:
        got = row_lr_factor(torch.tensor(counts))
        assert got.shape == () and float(got) == pytest.approx(expected, rel=1e-6), counts
