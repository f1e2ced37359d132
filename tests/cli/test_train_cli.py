import subprocess
import sys

import torch


def test_simppo_train_pendulum_writes_last_ckpt(tmp_path):
    run_dir = tmp_path / "run"
    cmd = ["simppo-train", "env=pendulum", "num_envs=64", "max_epochs=5", "logger=none", f"run_dir={run_dir}"]
    bin_dir = sys.executable.rsplit("/", 1)[0]
    out = subprocess.run([f"{bin_dir}/{cmd[0]}", *cmd[1:]], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert (run_dir / "last.ckpt").is_file()
    assert (run_dir / "config.yaml").is_file()
    state = torch.load(run_dir / "last.ckpt", weights_only=True)
    assert state["epoch"] == 5


def test_unknown_key_is_an_error(tmp_path):
    out = subprocess.run([sys.executable, "-m", "simppo.cli.train", "env=pendulum", "no_such_key=1",
                          "logger=none", f"run_dir={tmp_path}"], capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert "no_such_key" in out.stderr
