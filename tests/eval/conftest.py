"""A tiny real run shared by the evaluation tests: ``simppo-train`` (the README's main job, 2 iterations
of 8 envs × 4 steps, so the policy is as good as untrained) writes ``config.yaml``, ``metrics.csv`` and
``last.ckpt`` once per session."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

TRAIN_OVERRIDES = ["num_envs=8", "max_epochs=2", "agent.num_steps=4", "logger=none", "progress_bar=false"]


def bin_path(name: str) -> str:
    return str(Path(sys.executable).parent / name)


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("eval") / "run"
    proc = subprocess.run([bin_path("simppo-train"), *TRAIN_OVERRIDES, f"run_dir={out}"], capture_output=True,
                          text=True, timeout=600, env={**os.environ, "WANDB_MODE": "disabled"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (out / "last.ckpt").is_file() and (out / "config.yaml").is_file()
    return out


@pytest.fixture(scope="session")
def loaded_run(run_dir):
    from simppo.eval.loading import load_run

    return load_run(run_dir / "last.ckpt")


@pytest.fixture
def player(loaded_run):
    """A one-env player of the run's policy (motion 0)."""
    from simppo.eval.loading import build_model, make_eval_env
    from simppo.eval.player import Player

    env = make_eval_env(loaded_run, 1, "cpu")
    model = build_model(loaded_run)
    yield Player(env, model.act_inference)
    env.close()
