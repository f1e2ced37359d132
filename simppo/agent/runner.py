"""The training loop around :class:`~simppo.agent.ppo.PPO`: iterations, progress bar, logging, checkpoint
rotation (``last`` / ``score_based`` / ``epoch_N``), resume, signals and the stop request.

The only agent-side code that touches files or the logger. Host transfers happen once per iteration
(:func:`gather_metrics`).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from simppo.agent.checkpoint import load_checkpoint, remove_partial_writes, save_checkpoint
from simppo.agent.exploration import SNAPSHOT_FILE, save_snapshot
from simppo.utils.logger import NullLogger
from simppo.utils.metrics_csv import MetricsCSV

if TYPE_CHECKING:
    from simppo.agent.ppo import PPO


def gather_metrics(update: dict[str, torch.Tensor], episodes: dict[str, torch.Tensor]) -> dict[str, float]:
    """One host transfer for the iteration's device metrics.

    ``update``: 0-dim tensors from :meth:`PPO.optimize_model`; ``episodes``: sums ``episode/<key>`` and
    ``episode_count`` from :meth:`PPO.episode_metrics`. Episode sums become means (left out without episodes).
    """
    names = [*update, *episodes]
    values = torch.stack([*(v.float() for v in update.values()), *episodes.values()])
    metrics = dict(zip(names, values.tolist(), strict=True))  # the one host gather per iteration
    count = metrics.pop("episode_count")
    for k in episodes:
        if k != "episode_count":
            value = metrics.pop(k)
            if count > 0:
                metrics[k] = value / count
    return metrics


class Runner:
    """Drives a set-up :class:`PPO`: ``Runner(agent, root_dir, max_epochs, logger, progress_bar).train()``.

    Checkpoints go to ``root_dir`` (none are written when it is ``None``): ``last.ckpt`` every
    ``save_last_every`` epochs, on a new best score (also copied to ``score_based.ckpt``) and at the end;
    the score is ``eval/score`` of ``evaluator(model)`` (run every ``eval_every`` epochs) when an evaluator is
    given, else the mean training episode reward; ``epoch_N.ckpt`` every ``save_epoch_every`` epochs.
    Per-iteration metrics are also appended
    to ``root_dir/metrics.csv``; with per-motion exploration every ``last.ckpt`` comes with the σ sidecar
    ``root_dir/exploration.json``. ``epoch_hooks``: ``(every, fn)`` pairs; ``fn(runner)`` runs after every
    ``every``-th iteration and may return a dict to log (e.g. the ``video_every`` clip). Progress: a tqdm bar
    (steps/s, reward, body error), or with ``progress_bar=False`` a plain line every ``log_every`` epochs.
    """

    def __init__(self, agent: PPO, root_dir: str | Path | None = None, max_epochs: int = 1000, logger=None,
                 progress_bar: bool = False, epoch_hooks: list[tuple[int, Callable]] | None = None,
                 evaluator: Callable | None = None, eval_every: int = 0, log_every: int = 10):
        self.agent = agent
        self.evaluator = evaluator
        self.eval_every = eval_every if evaluator is not None else 0
        self.log_every = log_every
        self.root_dir = Path(root_dir) if root_dir is not None else None
        self.max_epochs = max_epochs
        self.logger = logger or NullLogger()
        self.progress_bar = progress_bar
        self.stop_requested = False
        self.epoch_hooks = list(epoch_hooks or [])
        if self.root_dir is not None:
            self.root_dir.mkdir(parents=True, exist_ok=True)
        self.metrics_csv = MetricsCSV(self.root_dir / "metrics.csv") if self.root_dir is not None else None

    def request_stop(self) -> None:
        """Finish the current iteration, save ``last.ckpt`` and return from :meth:`train`."""
        self.stop_requested = True

    def train_iteration(self) -> dict[str, float]:
        """Collect ``num_steps`` steps, GAE, optimise; returns host metrics (one gather)."""
        agent = self.agent
        t0 = time.perf_counter()
        agent.collect_rollout()
        t1 = time.perf_counter()
        update = {**agent.optimize_model(), **agent.rollout_metrics()}  # + env/num_unstable of this iteration
        metrics = gather_metrics(update, agent.episode_metrics())
        elapsed = time.perf_counter() - t0
        metrics["perf/steps_per_s"] = agent.num_steps * agent.num_envs / elapsed
        metrics["perf/rollout_s"] = t1 - t0
        metrics["perf/update_s"] = elapsed - (t1 - t0)
        agent.epoch += 1
        return metrics

    def train(self) -> None:
        """Iterate until ``max_epochs`` or a stop request; log, show progress and rotate checkpoints."""
        from tqdm import tqdm

        agent, c = self.agent, self.agent.config
        bar = tqdm(total=self.max_epochs, initial=agent.epoch, disable=not self.progress_bar,
                   dynamic_ncols=True, unit="it")
        last_reward = last_error = score = None
        t_start = time.perf_counter()
        while agent.epoch < self.max_epochs and not self.stop_requested:
            metrics = self.train_iteration()
            new_score = None
            if self.eval_every > 0 and agent.epoch % self.eval_every == 0:
                evaluation = self.evaluator(agent.model)
                metrics.update(evaluation)
                new_score = evaluation["eval/score"]
            elif self.evaluator is None and "episode/reward" in metrics:
                new_score = metrics["episode/reward"]
            metrics["perf/wall_s"] = time.perf_counter() - t_start
            self.logger.log(metrics, step=agent.step_count)
            if self.metrics_csv is not None:
                self.metrics_csv.append({"epoch": agent.epoch, "step": agent.step_count, **metrics})
            for every, hook in self.epoch_hooks:
                if every > 0 and agent.epoch % every == 0:
                    extra = hook(self)
                    if extra:
                        self.logger.log(extra, step=agent.step_count)
            last_reward = metrics.get("episode/reward", last_reward)
            last_error = metrics.get("error/body_pos", last_error)
            score = metrics.get("eval/score", score)
            progress = {"steps/s": f"{metrics['perf/steps_per_s']:.0f}",
                        "reward": "n/a" if last_reward is None else f"{last_reward:.3f}",
                        "body_err": "n/a" if last_error is None else f"{last_error:.3f}m"}
            if score is not None:
                progress["eval_score"] = f"{score:.3f}"
            bar.update(1)
            bar.set_postfix(progress)
            if not self.progress_bar and self.log_every > 0 and agent.epoch % self.log_every == 0:
                print(f"epoch {agent.epoch}/{self.max_epochs} " + " ".join(f"{k} {v}" for k, v in progress.items()),
                      flush=True)
            new_high = new_score is not None and (agent.best_evaluated_score is None
                                                  or new_score > agent.best_evaluated_score)
            if new_high:
                agent.best_evaluated_score = new_score
            if self.root_dir is not None:
                if c.save_epoch_every > 0 and agent.epoch % c.save_epoch_every == 0:
                    self.save(f"epoch_{agent.epoch}.ckpt")
                if agent.epoch % max(c.save_last_every, 1) == 0 or new_high:
                    self.save("last.ckpt", new_high_score=new_high)
        bar.close()
        if self.root_dir is not None:
            self.save("last.ckpt")

    def save(self, checkpoint_name: str = "last.ckpt", new_high_score: bool = False) -> None:
        """Write the agent's state to ``root_dir/checkpoint_name`` (and ``score_based.ckpt`` on a new high)."""
        if self.root_dir is None:
            raise ValueError(f"cannot save {checkpoint_name}: the runner has no root_dir")
        state = self.agent.get_state_dict()
        save_checkpoint(state, self.root_dir / checkpoint_name)
        if new_high_score:
            save_checkpoint(state, self.root_dir / "score_based.ckpt")
        if checkpoint_name == "last.ckpt":
            self.save_exploration_snapshot()

    def save_exploration_snapshot(self) -> None:
        """Per-motion exploration: replace ``root_dir/exploration.json``, the human-readable σ of every motion
        (:func:`~simppo.agent.exploration.save_snapshot`); rank 0 only. Resume never reads it."""
        agent = self.agent
        if not getattr(agent, "per_motion", False) or not getattr(agent.fabric, "is_global_zero", True):
            return
        save_snapshot(self.root_dir / SNAPSHOT_FILE, agent.motion_index, agent.model.actor.log_std, agent.epoch,
                      agent.step_count)

    def load(self, path: str | Path, load_training_state: bool = True) -> None:
        """Restore from a checkpoint file; raises :class:`~simppo.agent.checkpoint.CheckpointError` (one line
        naming the file) for a corrupt file or one that does not fit this run, before any state changes."""
        state = load_checkpoint(path, map_location=self.agent.device)
        self.agent.load_parameters(state, load_training_state, source=str(path))

    def resume(self) -> None:
        """Continue exactly from ``root_dir/last.ckpt`` (weights, optimizers, normalizers, counters, RNG, env)."""
        if self.root_dir is None:
            raise ValueError("cannot resume: the runner has no root_dir")
        remove_partial_writes(self.root_dir)  # temp files of a killed run's interrupted checkpoint writes
        self.load(self.root_dir / "last.ckpt", load_training_state=True)
        if self.metrics_csv is not None:
            self.metrics_csv.truncate_after(self.agent.epoch)


class StopOnSignal:
    """First SIGINT/SIGTERM: ``runner.request_stop()`` (finish the iteration, save ``last.ckpt``, exit 0).
    Second: exit at once with ``128 + signum``. Restores the previous handlers on exit."""

    def __init__(self, runner: Runner, prog: str = "simppo-train"):
        self.runner = runner
        self.prog = prog
        self.count = 0
        self._previous = {}

    def __enter__(self):
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame):
        self.count += 1
        if self.count > 1:
            os._exit(128 + signum)
        print(f"\n{self.prog}: got signal {signum}; finishing this iteration and saving last.ckpt "
              "(send again to exit at once)", file=sys.stderr, flush=True)
        self.runner.request_stop()

    def __exit__(self, *exc):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
