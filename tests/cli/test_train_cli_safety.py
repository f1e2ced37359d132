"""simppo-train never loses a run: a failed start writes nothing, an existing run is continued only with
``resume=true`` and replaced only with ``force=true``, bad values are one line and exit status 2, a damaged
checkpoint is refused with the way back, and a diverging run stops before it writes NaN."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from simppo.agent.checkpoint import state_checksum
from simppo.cli.overrides import override_problem
from simppo.cli.train import UsageError, check_values
from simppo.config import TrainCfg, register_configs
from simppo.envs.imitation.config import HumanoidImitationEnvCfg
from simppo.paths import CONFIG_DIR

PENDULUM = ["env=pendulum", "agent=ppo_small", "num_envs=16", "logger=none", "progress_bar=false"]


def train(run_dir: Path, *overrides: str) -> subprocess.CompletedProcess:
    cmd = [str(Path(sys.executable).parent / "simppo-train"), *PENDULUM, f"run_dir={run_dir}", *overrides]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def one_line_error(proc, code: int = 2) -> str:
    err = proc.stderr.strip()
    assert proc.returncode == code, proc.stderr[-2000:]
    assert err.startswith("simppo-train: error: ") and "\n" not in err, err
    return err[len("simppo-train: error: "):]


def snapshot(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """A finished 4-epoch pendulum run with epoch_2.ckpt and epoch_4.ckpt beside last.ckpt."""
    r = tmp_path_factory.mktemp("runs") / "R"
    proc = train(r, "max_epochs=4", "agent.save_epoch_every=2")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return r


def copy_run(run: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(run, dst)
    return dst


def test_existing_run_is_refused_and_force_moves_it_aside(run, tmp_path):
    r = copy_run(run, tmp_path / "R")
    before = snapshot(r)
    msg = one_line_error(train(r, "max_epochs=2"))
    assert f"run_dir={r} already holds a run" in msg and "resume=true" in msg and "force=true" in msg, msg
    assert snapshot(r) == before
    proc = train(r, "max_epochs=2", "force=true")
    assert proc.returncode == 0, proc.stderr[-2000:]
    moved = [p for p in r.iterdir() if p.name.startswith("replaced_")]
    assert len(moved) == 1 and snapshot(moved[0]) == before
    assert torch.load(r / "last.ckpt", weights_only=True)["epoch"] == 2
    assert [line.split(",")[0] for line in (r / "metrics.csv").read_text().splitlines()[1:]] == ["1", "2"]


def test_a_failed_start_rewrites_nothing(run, tmp_path):
    r = copy_run(run, tmp_path / "R")
    before = snapshot(r)
    # resume with motions that do not exist (the env fails to build) and with a layout the checkpoint lacks
    one_line_error(train(r, "resume=true", "env=humanoid_imitation", "motion.files=[typo]", "env.future_steps=[1,2]"))
    assert snapshot(r) == before
    msg = one_line_error(train(r, "resume=true", "agent.actor.units=[8]"))
    assert "last.ckpt" in msg, msg
    assert snapshot(r) == before
    # a fresh run_dir stays absent when the start fails
    one_line_error(train(tmp_path / "fresh", "env=humanoid_imitation", "motion.files=[typo]"))
    assert not (tmp_path / "fresh").exists()


def test_impossible_values_are_one_line_and_write_nothing(tmp_path):
    assert one_line_error(train(tmp_path / "R", "num_envs=0")).startswith("num_envs=0: must be at least 1")
    assert not (tmp_path / "R").exists()


@pytest.mark.parametrize("key, value, what", [
    ("num_envs", -1, "num_envs=-1: must be at least 1"),
    ("max_epochs", -3, "max_epochs=-3: must be at least 1"),
    ("agent.num_steps", 0, "agent.num_steps=0: must be at least 1"),
    ("agent.gamma", 1.5, "agent.gamma=1.5: must be in [0, 1]"),
])
def test_check_values(key, value, what):
    register_configs()
    cfg = TrainCfg()
    owner = cfg.agent if key.startswith("agent.") else cfg
    setattr(owner, key.split(".")[-1], value)
    with pytest.raises(UsageError) as e:
        check_values(cfg)
    assert str(e.value).startswith(what)


@pytest.mark.parametrize("action_reference, velocity, future_steps, what", [
    (1.5, 0.0, [1, 2, 4, 8], "env.action_reference=1.5: must be in [0, 1]"),
    (1.0, 0.0, [2, 4], "env.action_reference=1.0 needs env.action_reference_lead=1 in env.future_steps"),
    (1.0, -0.5, [1, 2, 4, 8], "env.action_reference_velocity=-0.5: must be in [0, 1]"),
    (0.0, 1.0, [2, 4], "env.action_reference_velocity=1.0 needs env.action_reference_lead=1 in env.future_steps"),
])
def test_action_reference_needs_the_next_reference_frame(action_reference, velocity, future_steps, what):
    register_configs()
    cfg = TrainCfg(env=HumanoidImitationEnvCfg(action_reference=action_reference, action_reference_velocity=velocity,
                                               future_steps=future_steps))
    with pytest.raises(UsageError) as e:
        check_values(cfg)
    assert str(e.value).startswith(what)
    cfg.env.action_reference = cfg.env.action_reference_velocity = 0.0  # the default-pose map reads no reference
    check_values(cfg)


def test_a_run_is_resumed_only_with_its_action_map(tmp_path):
    """A run saved before ``env.action_reference`` existed (default-pose map) is not resumed under the new default,
    whose actions would mean other joint targets."""
    from simppo.cli.train import check_same_action_map

    register_configs()
    cfg = TrainCfg(env=HumanoidImitationEnvCfg())
    saved = tmp_path / "config.yaml"
    saved.write_text("env:\n  name: humanoid_imitation\n  action_clip: 10.0\n")
    with pytest.raises(UsageError) as e:
        check_same_action_map(saved, cfg)
    assert str(e.value) == (f"{saved}: the run was trained with env.action_reference=0; resume it with "
                            "env.action_reference=0 (the policy's actions mean other joint targets otherwise)")
    cfg.env.action_reference = 0.0
    check_same_action_map(saved, cfg)
    saved.write_text("env:\n  name: humanoid_imitation\n  action_reference: 1.0\n")
    check_same_action_map(saved, TrainCfg(env=HumanoidImitationEnvCfg()))
    with pytest.raises(UsageError) as e:  # the reference fed forward from another frame: other targets too
        check_same_action_map(saved, TrainCfg(env=HumanoidImitationEnvCfg(action_reference_lead=4)))
    assert str(e.value) == (f"{saved}: the run was trained with env.action_reference_lead=1; resume it with "
                            "env.action_reference_lead=1 (the policy's actions mean other joint targets otherwise)")
    velocity = HumanoidImitationEnvCfg(action_reference_velocity=1.0)
    with pytest.raises(UsageError) as e:  # saved before the velocity feed-forward: the servos damped towards rest
        check_same_action_map(saved, TrainCfg(env=velocity))
    assert str(e.value) == (f"{saved}: the run was trained with env.action_reference_velocity=0; resume it with "
                            "env.action_reference_velocity=0 (the policy's actions mean other joint targets otherwise)")
    saved.write_text("env:\n  name: humanoid_imitation\n  action_reference: 1.0\n  action_reference_velocity: 1.0\n")
    check_same_action_map(saved, TrainCfg(env=velocity))


def test_a_run_is_resumed_only_with_its_adaptive_sigma(tmp_path):
    """A run saved before adaptive σ was on by default (or before the option existed) resumes only with its own
    setting, which its env state and rewards follow; the error names the override."""
    from simppo.cli.train import check_same_adaptive_sigma
    from simppo.envs.imitation.config import AdaptiveSigmaCfg

    register_configs()
    saved = tmp_path / "config.yaml"
    saved.write_text("env:\n  name: humanoid_imitation\n  action_reference: 1.0\n")  # before the option
    with pytest.raises(UsageError) as e:
        check_same_adaptive_sigma(saved, TrainCfg(env=HumanoidImitationEnvCfg()))
    assert str(e.value) == (f"{saved}: the run was trained with env.adaptive_sigma.terms=[]; resume it with "
                            "env.adaptive_sigma.terms=[] (its reward σ and env state follow that setting)")
    check_same_adaptive_sigma(saved, TrainCfg(env=HumanoidImitationEnvCfg(adaptive_sigma=AdaptiveSigmaCfg(terms=[]))))
    saved.write_text("env:\n  name: humanoid_imitation\n  adaptive_sigma:\n    terms: [body_pos]\n"
                     "    per_motion: false\n")  # saved before start_steps
    with pytest.raises(UsageError, match=r"env.adaptive_sigma.start_steps=0; resume it with"):
        check_same_adaptive_sigma(saved, TrainCfg(env=HumanoidImitationEnvCfg(
            adaptive_sigma=AdaptiveSigmaCfg(terms=["body_pos"], per_motion=False))))
    check_same_adaptive_sigma(saved, TrainCfg(env=HumanoidImitationEnvCfg(
        adaptive_sigma=AdaptiveSigmaCfg(terms=["body_pos"], per_motion=False, start_steps=0))))


@pytest.mark.parametrize("override, what", [
    ("env.sampling.motion_floor=2", "env.sampling.motion_floor=2.0: must be in [0, 1]"),
    ("agent.lr_schedule=bogus", "agent.lr_schedule: unknown schedule 'bogus'"),
    ("env.history_length=-1", "env.history_length=-1: must be an integer >= 0"),
])
def test_a_config_class_refusing_a_value_is_one_line(tmp_path, override, what):
    assert one_line_error(train(tmp_path / "R", "env=humanoid_imitation", override)).startswith(what)
    assert not (tmp_path / "R").exists()


def test_wrong_types_and_unknown_keys_are_one_line(tmp_path):
    msg = one_line_error(train(tmp_path / "R", "num_envs=abc"))
    assert msg.startswith("num_envs=abc: Value 'abc' of type 'str' could not be converted to Integer"), msg
    assert not (tmp_path / "R").exists()


@pytest.mark.parametrize("argv, expected", [
    (["agent.num_stepz=3"], "agent.num_stepz=3: unknown key 'agent.num_stepz'; did you mean 'agent.num_steps'?"),
    (["nmu_envs=3"], "nmu_envs=3: unknown key 'nmu_envs'; did you mean 'num_envs'?"),
    (["env.randomization=deploy"],
     "env.randomization=deploy: 'env.randomization' is a config group; choose an option with env/randomization=deploy"),
    (["env=nope"], "env=nope: no such option in group 'env'; choose one of humanoid_imitation, pendulum"),
    (["max_epochs=1.5"], "max_epochs=1.5: Value '1.5' of type 'float' could not be converted to Integer "
                         "(key 'max_epochs')"),
    (["seed"], "Error parsing override 'seed': missing EQUAL at '<EOF>' (write key=value)"),
    (["env/randomization=deploy", "num_envs=8"], None),
])
def test_override_problems(argv, expected):
    register_configs()
    assert override_problem(argv, CONFIG_DIR, "train") == expected


def test_damaged_checkpoint_is_refused_with_the_way_back(run, tmp_path):
    r = copy_run(run, tmp_path / "R")
    state = torch.load(r / "last.ckpt", weights_only=True)
    key = next(k for k in state["model"] if k.endswith("weight"))
    state["model"][key].view(-1)[0] = 1e30
    torch.save(state, r / "last.ckpt")  # one weight changed, the stored checksum kept
    before = snapshot(r)
    msg = one_line_error(train(r, "resume=true", "max_epochs=6"))
    assert f"{r / 'last.ckpt'}: checksum mismatch" in msg, msg
    assert f"resume=true checkpoint={r / 'epoch_4.ckpt'}" in msg, msg
    assert snapshot(r) == before
    proc = train(r, "resume=true", f"checkpoint={r / 'epoch_4.ckpt'}", "max_epochs=6")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert torch.load(r / "last.ckpt", weights_only=True)["epoch"] == 6
    # resumed under other settings: the config of the first 4 epochs is kept beside the new one
    assert (r / "config.until_epoch_4.yaml").read_bytes() == before["config.yaml"]
    assert "max_epochs: 6" in (r / "config.yaml").read_text()
    proc = train(r, "resume=true", "max_epochs=6")  # resumed as it was started: nothing more is kept
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sorted(p.name for p in r.glob("config.*.yaml")) == ["config.until_epoch_4.yaml"]


def test_a_checkpoint_that_diverges_stops_without_overwriting_it(run, tmp_path):
    """A weight of 1e30 with a valid checksum (a state that is garbage, not damaged): the first losses are
    non-finite, training stops with exit status 1 and last.ckpt stays as it was."""
    r = copy_run(run, tmp_path / "R")
    state = torch.load(r / "last.ckpt", weights_only=True)
    for k in state["model"]:
        if k.startswith("critic.") and k.endswith("weight"):
            state["model"][k].fill_(1e30)
    state["checksum"] = state_checksum(state)
    torch.save(state, r / "last.ckpt")
    before = (r / "last.ckpt").read_bytes()
    msg = one_line_error(train(r, "resume=true", "max_epochs=8"), code=1)
    assert msg.startswith("training diverged at epoch 5: ") and "last.ckpt is kept as it was" in msg, msg
    assert (r / "last.ckpt").read_bytes() == before
