"""``simppo-export``: ONNX parity with torch inference, the ``policy.json`` contents, and bad input."""

import json

import numpy as np
import pytest
import torch

from simppo.cli.export import main as export_main


@pytest.fixture(scope="module")
def exported(run_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("export") / "policy"
    assert export_main([f"checkpoint={run_dir / 'last.ckpt'}", f"out={out}"]) == 0
    return out


def test_onnx_matches_torch_inference(exported, loaded_run):
    import onnxruntime as ort

    from simppo.eval.loading import build_model

    model = build_model(loaded_run)
    obs_dim = loaded_run.layout.obs_dim
    obs = 3.0 * torch.randn(1000, obs_dim, generator=torch.Generator().manual_seed(1))  # hits the clip too
    session = ort.InferenceSession(str(exported / "policy.onnx"), providers=["CPUExecutionProvider"])
    out = session.run(["actions"], {"obs": obs.numpy()})[0]
    ref = model.act_inference(obs).numpy()
    assert out.shape == (1000, loaded_run.layout.num_actions)
    assert np.abs(out - ref).max() <= 1e-5
    for batch in (1, 7):  # dynamic batch
        assert session.run(["actions"], {"obs": obs[:batch].numpy()})[0].shape[0] == batch


def test_policy_json(exported, loaded_run):
    meta = json.loads((exported / "policy.json").read_text())
    cfg = loaded_run.cfg
    assert meta["joint_names"] == cfg.robot.joint_names
    assert meta["default_joint_pos"] == pytest.approx(cfg.robot.default_joint_pos)
    assert meta["action_scale"] == pytest.approx(cfg.robot.action_scale)
    assert meta["action_reference"] == cfg.env.action_reference == 1.0  # the shipped map feeds the reference forward
    assert "reference_joint_pos" in meta["joint_target"]
    lead = meta["action_reference_lead"]
    assert lead == cfg.env.action_reference_lead and lead in meta["future_steps"]  # a frame the observation has
    assert f"t + {lead} * control_dt" in meta["joint_target"]
    assert meta["action_reference_velocity"] == cfg.env.action_reference_velocity
    assert "kd * (joint_velocity_target - qdot)" in meta["joint_velocity_target"]
    assert meta["observation"]["history_length"] == cfg.env.history_length == 0  # the shipped row: no history
    assert meta["observation"]["history"] == "none"
    assert len(meta["pd_gains"]["kp"]) == 29 and meta["pd_gains"]["kp"][0] == pytest.approx(40.1792)
    assert meta["pd_gains"]["kd"][0] == pytest.approx(2.5579)
    assert meta["control_dt"] == pytest.approx(0.02)
    assert meta["future_steps"] == [1, 2, 4, 8] and meta["future_offsets_s"] == pytest.approx([0.02, 0.04, 0.08, 0.16])
    layout = meta["observation"]["layout"]
    assert layout[0] == {"name": "gravity_b", "start": 0, "stop": 3}
    assert layout[-1]["stop"] == meta["observation"]["dim"] == loaded_run.layout.obs_dim
    assert all(a["stop"] == b["start"] for a, b in zip(layout, layout[1:], strict=False))
    assert meta["simppo_version"] and meta["onnx"]["input"] == "obs" and meta["onnx_max_abs_diff"] <= 1e-5


def test_existing_output_is_kept_without_force(exported, run_dir, capsys):
    before = (exported / "policy.json").read_bytes()
    assert export_main([f"checkpoint={run_dir / 'last.ckpt'}", f"out={exported}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "force=true" in err
    assert (exported / "policy.json").read_bytes() == before


def test_a_failed_forced_export_leaves_the_pair_as_it_was(exported, run_dir, tmp_path, monkeypatch, capsys):
    import simppo.eval.export as export

    out = tmp_path / "policy"
    assert export_main([f"checkpoint={run_dir / 'last.ckpt'}", f"out={out}"]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def broken(*a, **k):
        raise RuntimeError("metadata failed")

    monkeypatch.setattr(export, "policy_metadata", broken)  # after the ONNX file is written
    with pytest.raises(RuntimeError, match="metadata failed"):
        export_main([f"checkpoint={run_dir / 'last.ckpt'}", f"out={out}", "force=true"])
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # no new ONNX beside the old json, no stage


def test_an_out_that_cannot_be_made_is_a_one_line_error(run_dir, tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("mine")
    assert export_main([f"checkpoint={run_dir / 'last.ckpt'}", f"out={afile / 'sub'}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"simppo-export: error: {afile}: is a file, so the folder {afile / 'sub'} cannot be made there", err
    assert afile.read_text() == "mine"


def test_missing_checkpoint(tmp_path, capsys):
    assert export_main([f"checkpoint={tmp_path / 'x.ckpt'}", f"out={tmp_path / 'o'}"]) == 2
    assert "x.ckpt" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_run_saved_before_the_feedforward_map_plays_with_the_default_pose_map(run_dir, tmp_path):
    """A ``config.yaml`` without ``env.action_reference`` (written before the reference feed-forward) loads with
    the map its policy was trained with (0: default pose + scale * action), not the new default."""
    from simppo.eval.loading import load_train_config

    text = (run_dir / "config.yaml").read_text()
    assert "action_reference: 1.0" in text
    old = tmp_path / "config.yaml"
    old.write_text("\n".join(line for line in text.splitlines() if "action_reference" not in line) + "\n")
    assert load_train_config(run_dir / "config.yaml").env.action_reference == 1.0
    assert load_train_config(old).env.action_reference == 0.0
