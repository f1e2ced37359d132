"""The training loop around :class:`~simppo.agent.ppo.PPO`: iterations, progress bar, logging, checkpoint
rotation (``last`` / ``score_based`` / ``epoch_N``), resume, signals and the stop request.

The only agent-side code that touches files or the logger. Host transfers happen once per iteration
(:func:`gather_metrics`).

Several ranks (DDP): every rank runs the same loop; the iteration's metrics are reduced over the ranks
(:func:`reduce_metrics`) so that every rank takes the same decisions (best score, stop request, agreed by one
all-reduce); global rank 0 alone evaluates (and broadcasts the result), runs the epoch hooks, logs, writes
``metrics.csv``, the checkpoints and the sidecar; a failed write stops every rank with the same message.
"""

from __future__ import annotations

import math
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from simppo.agent import distributed as D
from simppo.agent.checkpoint import (
    CheckpointError,
    damaged_hint,
    load_checkpoint,
    raise_on_any_rank,
    remove_partial_writes,
    save_checkpoint,
)
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


class TrainingDivergedError(RuntimeError):
    """A loss or a model parameter became NaN or inf: training stops before any checkpoint is written."""


NONFINITE_METRIC = "model/nonfinite_values"


def nonfinite_count(module: torch.nn.Module) -> torch.Tensor:
    """Device scalar: how many values of the module's floating-point parameters and buffers are NaN or inf."""
    tensors = [t for t in module.state_dict().values() if t.is_floating_point()]
    return torch.stack([(~torch.isfinite(t)).sum() for t in tensors]).sum().float()


def divergence(metrics: dict[str, float]) -> str | None:
    """What went non-finite in an iteration's host metrics (a loss, or the model's values), or ``None``."""
    losses = [k for k, v in metrics.items() if "loss" in k and not math.isfinite(v)]
    if losses:
        return f"{losses[0]} is {metrics[losses[0]]}"
    count = metrics.get(NONFINITE_METRIC, 0.0)
    if count != 0:
        return f"{int(count) if math.isfinite(count) else count} model values are NaN or inf"
    return None


SUMMED_METRICS = ("episode/", "episode_count", "env/num_unstable")  # summed over ranks; the rest are averaged


def reduce_metrics(update: dict[str, torch.Tensor], episodes: dict[str, torch.Tensor]
                   ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """Several ranks: one all-reduce of every device metric of the iteration (float64). Episode sums, the
    episode count and ``env/num_unstable`` are summed over the ranks, everything else (losses, KL, tracking
    errors, ...) is averaged; afterwards every rank holds the same values. Identity with one process."""
    names = [*update, *episodes]
    values = torch.stack([v.to(torch.float64).reshape(()) for v in (*update.values(), *episodes.values())])
    world = float(torch.distributed.get_world_size()) if torch.distributed.is_initialized() else 1.0
    if world == 1.0:
        return update, episodes
    summed = torch.tensor([n.startswith(SUMMED_METRICS) for n in names], device=values.device)
    values = torch.where(summed, D.all_reduce_(values), values / world)
    out = dict(zip(names, values.unbind(0), strict=True))
    return {k: out[k] for k in update}, {k: out[k] for k in episodes}


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

    Several ranks: build a Runner on every rank; the ``evaluator`` and the hooks are needed (and run) on global
    rank 0 only, which alone logs, shows progress and writes files.
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
        self.is_global_zero = D.is_global_zero(agent.fabric)
        self.world_size = D.world_size(agent.fabric)
        self.metrics_csv = (MetricsCSV(self.root_dir / "metrics.csv")
                            if self.root_dir is not None and self.is_global_zero else None)

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
        update[NONFINITE_METRIC] = nonfinite_count(agent.model)
        metrics = gather_metrics(*reduce_metrics(update, agent.episode_metrics()))
        problem = divergence(metrics)  # the same reduced metrics on every rank: every rank stops
        if problem:
            kept = (f"{self.root_dir / 'last.ckpt'} is kept as it was" if self.root_dir is not None
                    else "no checkpoint was written")
            raise TrainingDivergedError(f"training diverged at epoch {agent.epoch + 1}: {problem}; stopped without "
                                        f"saving ({kept}); lower the learning rates (agent.actor_lr, "
                                        "agent.critic_lr) or check the motions with simppo-pack --verify")
        elapsed = time.perf_counter() - t0
        metrics["perf/steps_per_s"] = agent.num_steps * agent.num_envs * self.world_size / elapsed  # every rank
        metrics["perf/rollout_s"] = t1 - t0
        metrics["perf/update_s"] = elapsed - (t1 - t0)
        agent.epoch += 1
        return metrics

    def train(self) -> None:
        """Iterate until ``max_epochs`` or a stop request; log, show progress and rotate checkpoints."""
        from tqdm import tqdm

        agent, c = self.agent, self.agent.config
        zero = self.is_global_zero
        has_evaluator = self.evaluator is not None
        if self.world_size > 1:  # rank 0 alone holds the evaluator; every rank must know when it runs
            self.eval_every, has_evaluator = D.broadcast_object((self.eval_every, has_evaluator), src=0)
        bar = tqdm(total=self.max_epochs, initial=agent.epoch, disable=not (self.progress_bar and zero),
                   dynamic_ncols=True, unit="it")
        last_reward = last_error = score = None
        if self.root_dir is not None and zero:
            self.root_dir.mkdir(parents=True, exist_ok=True)
        t_start = time.perf_counter()
        while agent.epoch < self.max_epochs and not self.agree(self.stop_requested):
            metrics = self.train_iteration()
            new_score = None
            if self.eval_every > 0 and agent.epoch % self.eval_every == 0:
                evaluation = self.evaluate()
                metrics.update(evaluation)
                new_score = evaluation["eval/score"]
            elif not has_evaluator and "episode/reward" in metrics:
                new_score = metrics["episode/reward"]
            metrics["perf/wall_s"] = time.perf_counter() - t_start
            if zero:
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
            if zero and not self.progress_bar and self.log_every > 0 and agent.epoch % self.log_every == 0:
                print(f"epoch {agent.epoch}/{self.max_epochs} " + " ".join(f"{k} {v}" for k, v in progress.items()),
                      flush=True)
            new_high = self.agree(new_score is not None and (agent.best_evaluated_score is None
                                                             or new_score > agent.best_evaluated_score))
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

    def agree(self, flag: bool) -> bool:
        """``flag`` of this rank, or with several ranks whether it is set on any rank (one tiny all-reduce), so
        that every rank takes the same branch (stop, save on a new best score)."""
        return D.any_rank(flag, self.agent.device) if self.world_size > 1 else bool(flag)

    def evaluate(self) -> dict[str, float]:
        """``evaluator(model)`` on global rank 0; with several ranks every rank receives its metrics."""
        evaluation = self.evaluator(self.agent.model) if self.is_global_zero else None
        return D.broadcast_object(evaluation, src=0) if self.world_size > 1 else evaluation

    def save(self, checkpoint_name: str = "last.ckpt", new_high_score: bool = False) -> None:
        """Write the agent's state to ``root_dir/checkpoint_name`` (and ``score_based.ckpt`` on a new high).

        Several ranks: call it on every rank (the state holds every rank's env state, gathered); only global
        rank 0 writes, and every rank waits until it has. A failed write raises the same
        :class:`~simppo.agent.checkpoint.CheckpointError` on every rank."""
        if self.root_dir is None:
            raise ValueError(f"cannot save {checkpoint_name}: the runner has no root_dir")
        fabric = self.agent.fabric
        state = self.agent.get_state_dict()  # a collective with several ranks
        if D.world_size(fabric) == 1:
            if D.is_global_zero(fabric):
                self._write(state, checkpoint_name, new_high_score)
            return
        error = None
        if D.is_global_zero(fabric):
            try:
                self._write(state, checkpoint_name, new_high_score)
            except Exception as exc:  # every rank must learn of it, or the others would wait for rank 0
                error = f"{self.root_dir / checkpoint_name}: rank 0 could not write the checkpoint ({exc})"
        raise_on_any_rank(fabric, error)  # also the barrier: no rank runs ahead of the write

    def _write(self, state: dict, checkpoint_name: str, new_high_score: bool) -> None:
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
        naming the file) for a corrupt file or one that does not fit this run, before any state changes.
        Several ranks: every rank reads the file; an error on any rank is raised on every rank."""
        if self.world_size == 1:
            state = load_checkpoint(path, map_location=self.agent.device)
        else:
            state, error = None, None
            try:
                state = load_checkpoint(path, map_location=self.agent.device)
            except CheckpointError as exc:
                error = str(exc)
            raise_on_any_rank(self.agent.fabric, error)
        self.agent.load_parameters(state, load_training_state, source=str(path))

    def resume(self, checkpoint: str | Path | None = None) -> None:
        """Continue exactly from ``root_dir/last.ckpt``, or from ``checkpoint`` (e.g. a good ``epoch_N.ckpt``
        when ``last.ckpt`` is damaged): weights, optimizers, normalizers, counters, RNG, env; with several ranks
        each rank's own env state and RNG. ``metrics.csv`` keeps the rows up to the checkpoint's epoch. A damaged
        file's error names the newest good ``epoch_N.ckpt`` beside it."""
        if self.root_dir is None:
            raise ValueError("cannot resume: the runner has no root_dir")
        if self.is_global_zero:
            remove_partial_writes(self.root_dir)  # temp files of a killed run's interrupted checkpoint writes
        path = Path(checkpoint) if checkpoint is not None else self.root_dir / "last.ckpt"
        try:
            self.load(path, load_training_state=True)
        except CheckpointError as exc:
            raise CheckpointError(damaged_hint(exc, path)) from None
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
