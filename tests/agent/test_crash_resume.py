"""Crash test (issue 13): ``simppo-train`` is SIGKILLed at random moments, several times, including in the
middle of a checkpoint write, then resumed with ``resume=true``. Every time training continues from the last
complete checkpoint, and no checkpoint file is ever unreadable (checked after each kill and, while the
trainer runs, by a reader racing the writes).

The checkpoint writes are slowed down from the test only: a launcher script replaces ``torch.save`` with a
version that writes half of the bytes, sleeps, then writes the rest, and prints markers; then it calls
``simppo.cli.train.main()``. Nothing in simppo knows about it.
"""

import os
import queue
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time

from simppo.agent.checkpoint import load_checkpoint

WRITE_DELAY_S = 0.4
LAUNCHER = textwrap.dedent(f"""
    import io, sys, time
    import torch

    _save = torch.save

    def slow_save(obj, f, *args, **kwargs):
        buf = io.BytesIO()
        _save(obj, buf, *args, **kwargs)
        data = buf.getvalue()
        print("CKPT-WRITE-BEGIN", flush=True)
        f.write(data[: len(data) // 2])
        f.flush()
        time.sleep({WRITE_DELAY_S})
        f.write(data[len(data) // 2 :])
        print("CKPT-WRITE-END", flush=True)

    torch.save = slow_save

    import simppo.agent.runner as runner

    _train = runner.Runner.train

    def train(self):
        print(f"TRAIN-START epoch={{self.epoch}} steps={{self.step_count}}", flush=True)
        return _train(self)

    runner.Runner.train = train
    from simppo.cli.train import main

    sys.argv = ["simppo-train", *sys.argv[1:]]
    main()
""")
ARGS = ["env=pendulum", "agent=ppo_small", "num_envs=8", "agent.num_steps=4", "agent.save_last_every=1",
        "logger=none", "progress_bar=false", "device=cpu"]


class Trainer:
    """One ``simppo-train`` process; its stdout lines arrive in a queue (read by a thread)."""

    def __init__(self, launcher, run_dir, *extra):
        self.proc = subprocess.Popen([sys.executable, str(launcher), *ARGS, f"run_dir={run_dir}", *extra],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.lines: queue.Queue = queue.Queue()
        self.stderr = ""
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_for(self, prefix: str, timeout: float = 120.0, on_wait=None) -> str:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                line = self.lines.get(timeout=0.05)
            except queue.Empty:
                if on_wait:
                    on_wait()
                continue
            if line is None:
                rc = self.proc.wait()
                raise AssertionError(f"trainer exited ({rc}) before {prefix!r}: {self.proc.stderr.read()}")
            if line.startswith(prefix):
                return line
        raise AssertionError(f"no {prefix!r} within {timeout} s")

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)
        assert self.proc.returncode == -signal.SIGKILL


def checkpoints_readable(run_dir) -> dict:
    """Load every ``*.ckpt`` in ``run_dir`` (each must be complete); returns {name: epoch}."""
    return {p.name: load_checkpoint(p)["epoch"] for p in sorted(run_dir.glob("*.ckpt"))}


def test_sigkill_at_random_moments_then_resume(tmp_path):
    launcher = tmp_path / "launch_train.py"
    launcher.write_text(LAUNCHER)
    run_dir = tmp_path / "run"
    rng = random.Random(13)
    reads = {"n": 0}

    def racing_reader():  # a reader while the trainer writes: sees the old file or the new one, never a part
        if (run_dir / "last.ckpt").exists():
            load_checkpoint(run_dir / "last.ckpt")
            reads["n"] += 1

    for i, during_write in enumerate([True, False, True, False]):
        resume = (run_dir / "last.ckpt").is_file()
        expected = checkpoints_readable(run_dir).get("last.ckpt", 0)
        t = Trainer(launcher, run_dir, "max_epochs=1000000", *(["resume=true"] if resume else []))
        start = t.wait_for("TRAIN-START")
        assert start.startswith(f"TRAIN-START epoch={expected} steps={expected * 8 * 4}"), (i, start, expected)
        if during_write:
            for _ in range(rng.randint(0, 2)):  # let a few writes complete first
                t.wait_for("CKPT-WRITE-END", on_wait=racing_reader)
            t.wait_for("CKPT-WRITE-BEGIN", on_wait=racing_reader)
            time.sleep(rng.uniform(0.05, 0.8) * WRITE_DELAY_S)  # half the bytes are in the temp file
        else:
            end = time.monotonic() + rng.uniform(0.2, 2.0)
            while time.monotonic() < end:
                racing_reader()
        t.kill()
        if during_write:  # the kill landed inside a write: its half-written temp file is there ...
            assert list(run_dir.glob(".*.ckpt.*.tmp")), sorted(p.name for p in run_dir.iterdir())
        epochs = checkpoints_readable(run_dir)  # ... and every checkpoint file still loads
        assert "last.ckpt" in epochs or i == 0, (i, epochs)

    # resume once more and finish: it starts at the last complete checkpoint and ends where asked
    last = checkpoints_readable(run_dir)["last.ckpt"]
    t = Trainer(launcher, run_dir, "resume=true", f"max_epochs={last + 2}")
    assert t.wait_for("TRAIN-START") == f"TRAIN-START epoch={last} steps={last * 8 * 4}"
    t.wait_for("simppo-train: done")
    assert t.proc.wait(timeout=60) == 0
    final = load_checkpoint(run_dir / "last.ckpt")
    assert final["epoch"] == last + 2 and final["step_count"] == (last + 2) * 8 * 4
    assert not list(run_dir.glob(".*.tmp")), "temp files of the killed writes are cleaned up on resume"
    assert reads["n"] > 0  # the racing reader did read checkpoints while they were being replaced

