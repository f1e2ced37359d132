"""``simppo-train`` on two CPU processes (gloo): the README's ``devices=2`` launch (Fabric starts rank 1), and a
torchrun-style launch (two processes started here with torchrun's variables) in which one rank is killed
mid-run: the other must stop within a bounded time with a clear one-line error, leaving every checkpoint
complete. The env is the pendulum (the README runs the same command on ``env=humanoid_imitation``)."""

import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time

import pytest

from simppo.agent.checkpoint import load_checkpoint
from tests.agent.test_distributed import TIMEOUT_S, rendezvous_store, torchrun_env

ARGS = ["env=pendulum", "agent=ppo_small", "device=cpu", "num_envs=8", "agent.num_steps=8", "logger=none",
        "progress_bar=false", "log_every=1", "agent.save_last_every=1"]


def run_group(cmd: list[str], timeout: float) -> tuple[int, str, str]:
    """Run ``cmd`` in its own session; on a time-out kill the whole group (the ranks Fabric started too)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode, stdout, stderr


def test_devices_2_on_cpu_trains_with_two_ranks(tmp_path):
    run_dir = tmp_path / "run"
    code, stdout, stderr = run_group([sys.executable, "-m", "simppo.cli.train", *ARGS, "devices=2", "max_epochs=3",
                                      f"run_dir={run_dir}"], TIMEOUT_S)
    assert code == 0, stdout + stderr
    assert stdout.count("simppo-train: done at epoch 3") == 1  # rank 0 alone reports
    assert "ranks=2 (num_envs per rank)" in stdout
    state = load_checkpoint(run_dir / "last.ckpt")
    assert (state["epoch"], state["world_size"], len(state["ranks"])) == (3, 2, 2)
    assert state["step_count"] == 3 * 8 * 8 * 2  # steps of both ranks
    assert state["ranks"][0]["env"]["seed"] != state["ranks"][1]["env"]["seed"]  # seed + rank
    assert (run_dir / "metrics.csv").read_text().count("\n") == 4  # header + one row per epoch, rank 0 only


class Rank:
    """One ``simppo-train`` process of a torchrun-style launch; stdout lines arrive in a queue."""

    def __init__(self, rank: int, port: int, run_dir):
        cmd = [sys.executable, "-m", "simppo.cli.train", *ARGS, "devices=2", "max_epochs=1000000",
               "dist_timeout_s=10", f"run_dir={run_dir}"]
        self.proc = subprocess.Popen(cmd, env=torchrun_env(rank, 2, port), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def wait_for(self, prefix: str, deadline: float) -> None:
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.1)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError(f"exited ({self.proc.wait()}) before {prefix!r}: {self.proc.stderr.read()}")
            if line.startswith(prefix):
                return
        raise AssertionError(f"no {prefix!r} in time")


@pytest.mark.parametrize("killed", [1, 0])
def test_killing_one_rank_stops_the_other_with_a_clear_error(tmp_path, killed):
    run_dir = tmp_path / "run"
    with rendezvous_store(2) as port:
        ranks = [Rank(r, port, run_dir) for r in range(2)]
        deadline = time.monotonic() + TIMEOUT_S - 15
        try:
            ranks[0].wait_for("epoch 2/", deadline)  # training runs, checkpoints are being written
            ranks[killed].proc.send_signal(signal.SIGKILL)
            survivor = ranks[1 - killed].proc
            code = survivor.wait(timeout=15)  # gloo sees the closed connection at once; dist_timeout_s=10 bounds it
            stderr = survivor.stderr.read()
        finally:
            for r in ranks:
                r.proc.kill()
    assert code == 1, stderr
    lines = [x for x in stderr.splitlines() if x.startswith("simppo-train: error:")]
    assert len(lines) == 1, stderr
    assert lines[0].startswith(f"simppo-train: error: rank {1 - killed}/2: lost contact with another rank at epoch ")
    assert "continue with resume=true" in lines[0]
    epochs = {p.name: load_checkpoint(p)["epoch"] for p in run_dir.glob("*.ckpt")}  # every file loads
    assert epochs.get("last.ckpt", 0) >= 1, epochs
