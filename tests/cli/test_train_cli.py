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


def _start_long_pendulum_run(run_dir, *overrides):
    import os

    cmd = [sys.executable, "-m", "simppo.cli.train", "env=pendulum", "agent=ppo_small", "num_envs=16",
           "max_epochs=1000000", "logger=none", "progress_bar=false", f"run_dir={run_dir}", *overrides]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    for line in proc.stdout:  # wait until training has started
        if line.startswith("simppo-train: PendulumEnv"):
            break
    return proc


def test_sigint_finishes_iteration_saves_last_ckpt_and_exits_zero(tmp_path):
    import signal
    import time

    run_dir = tmp_path / "run"
    proc = _start_long_pendulum_run(run_dir)
    time.sleep(3.0)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    state = torch.load(run_dir / "last.ckpt", weights_only=True)
    assert 1 <= state["epoch"] < 1000000


def test_second_signal_exits_at_once(tmp_path):
    import signal
    import time

    # iterations of ~20 s, so both signals land inside the first one
    proc = _start_long_pendulum_run(tmp_path / "run", "num_envs=4096", "agent.num_steps=100")
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)  # separate deliveries (Python coalesces a signal that is pending twice)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM
    assert not (tmp_path / "run" / "last.ckpt").exists()


def test_a_run_shorter_than_the_root_assists_fade_is_told_so():
    """The harness fades over env.assist.anneal_steps control steps; a run that stops before (the CLI's
    max_epochs x agent.num_steps) gets a one-line notice naming the keys, a longer one or one without it none."""
    from simppo.cli.train import assist_notice, compose_training

    def cfg(*overrides: str):
        return compose_training(["experiment_name=t", *overrides], "cpu")

    on = cfg("env=humanoid_imitation", "env.assist.start=1")
    assert on.env.assist.enabled and assist_notice(on) is None  # the default run length outlives the fade
    short = cfg("env=humanoid_imitation", "env.assist.start=1", "max_epochs=10")
    notice = assist_notice(short)
    assert notice is not None and "\n" not in notice
    assert f"after {10 * short.agent.num_steps}" in notice and "env.assist.start=0" in notice
    assert assist_notice(cfg("env=humanoid_imitation", "max_epochs=10", "env.assist.start=0")) is None
    assert assist_notice(cfg("env=pendulum", "max_epochs=10")) is None
    drift_free = assist_notice(cfg("env=humanoid_imitation", "env.assist.start=1", "env.assist.fade=survival"))
    assert drift_free is not None and "env.terminations.body_pos" in drift_free and "\n" not in drift_free
    assert assist_notice(cfg("env=humanoid_imitation", "env.assist.start=1", "env.assist.fade=survival",
                             "env.terminations.body_pos=0.5")) is None
    assert "fade=success" in assist_notice(cfg("env=humanoid_imitation", "env.assist.start=1",
                                               "env.assist.fade=success"))
