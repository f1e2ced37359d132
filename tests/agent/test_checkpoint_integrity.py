"""Checkpoints carry a checksum, refuse code and non-finite weights, and training stops when it diverges instead
of writing NaN over a good checkpoint."""

import math

import pytest
import torch

from simppo.agent.checkpoint import (
    CheckpointError,
    DamagedCheckpointError,
    NonFiniteStateError,
    load_checkpoint,
    newest_good_checkpoint,
    save_checkpoint,
    state_checksum,
)
from simppo.agent.ppo import PPO
from simppo.agent.runner import TrainingDivergedError, divergence
from tests.helpers import pendulum_agent


def _agent(**cfg) -> PPO:
    return pendulum_agent(**cfg)


def _state(**extra) -> dict:
    return {"format": "simppo-ppo", "epoch": 3, "model": {"w": torch.arange(6.0).reshape(2, 3)}, **extra}


def test_checksum_detects_any_change_of_a_tensor(tmp_path):
    path = tmp_path / "a.ckpt"
    save_checkpoint(_state(), path)
    state = torch.load(path, weights_only=True)
    assert state["checksum"] == state_checksum(state)
    for change in (lambda s: s["model"]["w"].__setitem__((0, 1), 1e30),
                   lambda s: s["model"]["w"].__setitem__((1, 2), torch.nextafter(torch.tensor(5.0), torch.tensor(9.0))),
                   lambda s: s.update(epoch=4)):
        bad = torch.load(path, weights_only=True)
        change(bad)
        torch.save(bad, tmp_path / "bad.ckpt")  # edited, the stored checksum kept
        with pytest.raises(DamagedCheckpointError, match="bad.ckpt: checksum mismatch"):
            load_checkpoint(tmp_path / "bad.ckpt")


def test_non_finite_parameters_are_never_written_nor_loaded(tmp_path):
    path = tmp_path / "last.ckpt"
    save_checkpoint(_state(), path)
    before = path.read_bytes()
    nan = _state(model={"w": torch.tensor([1.0, math.nan])})
    with pytest.raises(NonFiniteStateError, match="last.ckpt: not written: the model's w hold non-finite values"):
        save_checkpoint(nan, path)
    assert path.read_bytes() == before
    torch.save(nan, tmp_path / "nan.ckpt")  # written by something else, without a checksum
    with pytest.raises(DamagedCheckpointError, match="nan.ckpt: the model's w hold non-finite values"):
        load_checkpoint(tmp_path / "nan.ckpt")


def test_a_pickle_that_runs_code_is_named_as_such(tmp_path):
    import os

    class Evil:
        def __reduce__(self):
            return os.system, ("echo pwned",)

    torch.save({"format": "simppo-ppo", "epoch": 1, "model": {}, "x": Evil()}, tmp_path / "evil.ckpt")
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(tmp_path / "evil.ckpt")
    msg = str(e.value)
    assert "holds pickled objects that would run code" in msg and "will not load it" in msg, msg
    assert "weights_only" not in msg and "likely succeed" not in msg and "\n" not in msg, msg
    assert not isinstance(e.value, DamagedCheckpointError)


def test_newest_good_checkpoint_skips_damaged_ones(tmp_path):
    for n in (2, 4, 6):
        save_checkpoint(_state(epoch=n), tmp_path / f"epoch_{n}.ckpt")
    (tmp_path / "epoch_6.ckpt").write_bytes((tmp_path / "epoch_6.ckpt").read_bytes()[:100])
    assert newest_good_checkpoint(tmp_path) == tmp_path / "epoch_4.ckpt"
    assert newest_good_checkpoint(tmp_path, exclude=tmp_path / "epoch_4.ckpt") == tmp_path / "epoch_2.ckpt"


def test_truncated_last_ckpt_names_the_good_epoch_checkpoint(tmp_path):
    agent = _agent(save_last_every=1, save_epoch_every=2)
    agent.loop(tmp_path, max_epochs=3).train()
    (tmp_path / "last.ckpt").write_bytes((tmp_path / "last.ckpt").read_bytes()[:500])
    with pytest.raises(CheckpointError) as e:
        _agent().loop(tmp_path).resume()
    msg = str(e.value)
    assert "last.ckpt: corrupt or truncated checkpoint" in msg, msg
    assert f"the newest good checkpoint beside it is {tmp_path / 'epoch_2.ckpt'}" in msg, msg
    assert f"resume=true checkpoint={tmp_path / 'epoch_2.ckpt'}" in msg and "\n" not in msg
    fresh = _agent()
    fresh.loop(tmp_path).resume(tmp_path / "epoch_2.ckpt")
    assert fresh.epoch == 2


def test_divergence_names_what_went_non_finite():
    assert divergence({"actor/loss": 0.1, "critic/loss": 2.0, "model/nonfinite_values": 0.0}) is None
    assert divergence({"critic/loss": math.nan}) == "critic/loss is nan"
    assert divergence({"actor/loss": 0.1, "model/nonfinite_values": 3.0}) == "3 model values are NaN or inf"


def _poison_critic(agent) -> None:
    with torch.no_grad():
        next(agent.model.critic.parameters()).view(-1)[0] = math.nan


def test_training_stops_when_a_parameter_becomes_nan_and_keeps_the_good_checkpoint(tmp_path):
    agent = _agent(save_last_every=1)
    update = agent.algorithm.update

    def diverging_update():
        metrics = update()
        if agent.epoch == 2:  # the third iteration's update goes wrong
            _poison_critic(agent)
        return metrics

    agent.algorithm.update = diverging_update
    runner = agent.loop(tmp_path, max_epochs=10)
    with pytest.raises(TrainingDivergedError, match=r"training diverged at epoch 3: 1 model values are NaN or inf; "
                                                    r".*last.ckpt is kept as it was"):
        runner.train()
    state = load_checkpoint(tmp_path / "last.ckpt")
    assert state["epoch"] == 2
    assert all(torch.isfinite(v).all() for v in state["model"].values() if v.is_floating_point())


def test_a_save_of_non_finite_weights_fails_and_keeps_the_good_checkpoint(tmp_path):
    agent = _agent(save_last_every=1)
    runner = agent.loop(tmp_path, max_epochs=10,
                    epoch_hooks=[(1, lambda r: _poison_critic(r.algorithm) if r.epoch == 2 else None)])
    with pytest.raises(NonFiniteStateError, match="last.ckpt: not written"):
        runner.train()
    assert load_checkpoint(tmp_path / "last.ckpt")["epoch"] == 1


def test_random_bytes_and_plain_pickles_are_not_taken_for_code(tmp_path, recwarn):
    import os
    import pickle

    class Evil:
        def __reduce__(self):
            return os.system, (f"touch {tmp_path / 'ran'}",)

    noise = tmp_path / "noise.ckpt"
    noise.write_bytes(bytes(torch.randint(0, 256, (5000,), generator=torch.Generator().manual_seed(1),
                                          dtype=torch.uint8).tolist()))
    plain = tmp_path / "plain.ckpt"
    plain.write_bytes(pickle.dumps({"format": "simppo-ppo", "x": Evil()}, protocol=4))
    for path in (noise, plain):
        with pytest.raises(DamagedCheckpointError) as e:
            load_checkpoint(path)
        msg = str(e.value)
        assert msg.startswith(f"{path}: corrupt checkpoint, or a plain pickle") and "\n" not in msg, msg
        assert "run code" not in msg
    assert not (tmp_path / "ran").exists()
    assert not [w for w in recwarn if "pickle protocol" in str(w.message)]  # torch's note is not passed on


@pytest.mark.parametrize("field, value, said", [
    ("model", 3, "'model' is a int, not a dict of tensors"),
    ("model", {"w": [1.0]}, "'model' is a dict, not a dict of tensors"),
    ("epoch", "x", "'epoch' is a str, not a int"),
    ("config", "garbage", "'config' is a str, not a dict"),
    ("step_count", True, "'step_count' is a bool, not a int"),
])
def test_a_checkpoint_with_fields_of_the_wrong_type_is_refused_in_one_line(tmp_path, field, value, said):
    state = _state(epoch=1)
    state[field] = value
    torch.save(state, tmp_path / "odd.ckpt")  # no checksum: as an older simppo or another tool wrote it
    with pytest.raises(CheckpointError, match=f"odd.ckpt: {said}"):
        load_checkpoint(tmp_path / "odd.ckpt")
