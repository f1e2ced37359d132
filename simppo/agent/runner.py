"""The runner around :class:`~simppo.agent.algorithm.PPOAlgorithm`: the env loop and episode statistics, the
counters, iterations, progress bar, logging, checkpoint dicts and files (``last`` / ``score_based`` /
``epoch_N``), resume, evaluation hooks, signals and the stop request.

The only agent-side code that steps the env or touches files or the logger. Host transfers happen once per
iteration (:func:`gather_metrics`).

Several ranks (DDP): every rank runs the same loop; the iteration's metrics are reduced over the ranks
(:func:`reduce_metrics`) so that every rank takes the same decisions (best score, stop request, agreed by one
all-reduce); global rank 0 alone evaluates (and broadcasts the result), runs the epoch hooks, logs, writes
``metrics.csv``, the checkpoints and the sidecar; a failed write stops every rank with the same message.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import torch

from simppo.agent import distributed as D
from simppo.agent import exploration as X
from simppo.agent.checkpoint import (
    CHECKPOINT_FORMAT,
    CheckpointError,
    check_compatible,
    damaged_hint,
    env_signature,
    load_checkpoint,
    raise_on_any_rank,
    remove_partial_writes,
    save_checkpoint,
    to_device,
)
from simppo.agent.exploration import SNAPSHOT_FILE, save_snapshot
from simppo.utils.logger import NullLogger
from simppo.utils.metrics_csv import MetricsCSV


def gather_metrics(update: dict[str, torch.Tensor], episodes: dict[str, torch.Tensor]) -> dict[str, float]:
    """One host transfer for the iteration's device metrics.

    ``update``: 0-dim tensors from :meth:`PPOAlgorithm.update`; ``episodes``: sums ``episode/<key>`` and
    ``episode_count`` from :meth:`Runner.episode_metrics`. Episode sums become means (left out without episodes).
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
    """Owns the env loop around a :class:`~simppo.agent.algorithm.PPOAlgorithm`: ``Runner(fabric, env, algorithm,
    config, root_dir).train()``.

    The loop: :meth:`collect_rollout` steps ``env`` ``num_steps`` times (``algorithm.act`` →
    ``env.step`` → ``algorithm.process_env_step``), keeps the episode statistics, then GAE; :meth:`train_iteration`
    adds ``algorithm.update()`` and one host gather of the metrics. The counters ``epoch`` (completed iterations),
    ``step_count`` (env steps of every rank), ``best_evaluated_score`` and ``run_start_time`` are saved with the
    weights. Checkpoints go to ``root_dir`` (none when ``None``): ``last.ckpt`` every ``save_last_every`` epochs,
    on a new best score (also copied to ``score_based.ckpt``) and at the end; the score is ``eval/score`` of
    ``evaluator(model)`` (every ``eval_every`` epochs) when an evaluator is given, else the mean episode reward;
    ``epoch_N.ckpt`` every ``save_epoch_every`` epochs; ``metrics.csv`` every iteration; with per-motion
    exploration ``exploration.json`` beside ``last.ckpt``. ``epoch_hooks``: ``(every, fn)`` pairs; ``fn(runner)``
    runs after every ``every``-th iteration and may return a dict to log. :meth:`set_loop` sets these options.

    Per-motion exploration: the env reports each env's motion (valid for the observation it returns) as
    ``extras["motion_ids"]`` (and ``env.motion_ids`` after a reset); it selects the log-std rows of each sample.

    Several ranks: every rank builds its Runner; the ``evaluator`` and the hooks are needed (and run) on global
    rank 0 only, which alone logs, shows progress and writes files. :meth:`get_state_dict` is then a collective.
    """

    def __init__(self, fabric, env, algorithm, config, root_dir: str | Path | None = None, **loop_options):
        self.fabric, self.env, self.algorithm, self.config = fabric, env, algorithm, config
        self.device = fabric.device
        self.world_size, self.global_rank = D.world_size(fabric), D.global_rank(fabric)
        self.is_global_zero = D.is_global_zero(fabric)
        self.num_envs, self.num_steps = env.num_envs, config.num_steps
        index = getattr(getattr(env, "motion_lib", None), "index", None)  # None without motions
        self.motion_index = index.whole if index is not None else None  # every rank's motions (motion.chunk=rank)
        self.epoch = 0
        self.step_count = 0
        self.best_evaluated_score: float | None = None
        self.run_start_time = time.time()
        self._ep_count = torch.zeros((), device=self.device)
        self._ep_sums: dict[str, torch.Tensor] = {}  # per episode-stat key, summed over finished episodes
        self._ep_table: tuple[tuple[str, ...], torch.Tensor] | None = None  # the same from extras["episode_table"]
        self._num_unstable = torch.zeros((), dtype=torch.int64, device=self.device)  # flagged worlds, summed
        self.current_obs = self.add_agent_info_to_obs(env.reset())
        self.current_motion_ids = getattr(env, "motion_ids", None)  # [N], valid for current_obs
        self.stop_requested = False
        self.set_loop(root_dir, **loop_options)

    def set_loop(self, root_dir: str | Path | None = None, max_epochs: int = 1000, logger=None,
                 progress_bar: bool = False, epoch_hooks: list[tuple[int, Callable]] | None = None,
                 evaluator: Callable | None = None, eval_every: int = 0, log_every: int = 10) -> Runner:
        """The loop's options (see the class); returns ``self``."""
        self.root_dir = Path(root_dir) if root_dir is not None else None
        self.max_epochs, self.logger, self.progress_bar = max_epochs, logger or NullLogger(), progress_bar
        self.epoch_hooks, self.evaluator = list(epoch_hooks or []), evaluator
        self.eval_every = eval_every if evaluator is not None else 0
        self.log_every = log_every
        self.metrics_csv = (MetricsCSV(self.root_dir / "metrics.csv")
                            if self.root_dir is not None and self.is_global_zero else None)
        return self

    # ------------------------------------------------------------------ the env loop
    def add_agent_info_to_obs(self, obs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Seed hook for agent-side observation entries (stateless); plain PPO adds none."""
        return obs

    @torch.no_grad()
    def collect_rollout(self) -> None:
        """Fill the ``[num_steps, num_envs]`` buffer from the env, then compute GAE in place."""
        self.algorithm.model.eval()
        for step in range(self.num_steps):
            self.rollout_step(step)
        self.algorithm.sync_normalizers()
        self.algorithm.compute_returns()

    @torch.no_grad()
    def rollout_step(self, step: int) -> None:
        """Act, step the env, record one ``[num_envs]`` slice and the finished episodes; no host sync."""
        rows = self.algorithm.rows_of(self.current_motion_ids)
        actions = self.algorithm.act(self.current_obs, rows, step)
        next_obs, rewards, terminated, truncated, extras = self.env.step(actions)
        dones = self.algorithm.process_env_step(step, next_obs, rewards, terminated, truncated, extras, rows)
        self.record_episodes(dones, extras)
        self.current_obs = self.add_agent_info_to_obs(next_obs)
        self.current_motion_ids = extras.get("motion_ids", self.current_motion_ids)

    def record_episodes(self, dones: torch.Tensor, extras: dict) -> None:
        """Sum the statistics of the episodes that ended (``dones [N]`` float) and the unstable worlds."""
        if "num_unstable" in extras:
            self._num_unstable += extras["num_unstable"].sum()
        table = extras.get("episode_table")  # (keys, [N, K]): every episode statistic in one reduction
        if table is not None:
            keys, values = table
            if self._ep_table is None:
                self._ep_table = (tuple(keys), torch.zeros(len(keys), device=self.device))
            self._ep_table[1].add_(dones @ values)
        else:
            for key, value in extras.get("episode", {}).items():
                if key not in self._ep_sums:
                    self._ep_sums[key] = torch.zeros((), device=self.device)
                self._ep_sums[key] += (value * dones).sum()
        self._ep_count += dones.sum()
        self.step_count += self.num_envs * self.world_size

    def episode_metrics(self) -> dict[str, torch.Tensor]:
        """Device sums ``episode/<key>`` over the episodes finished since the last call, and their
        ``episode_count``; resets the accumulators."""
        out = {f"episode/{k}": v.clone() for k, v in self._ep_sums.items()}
        if self._ep_table is not None:
            keys, sums = self._ep_table
            out.update({f"episode/{k}": v for k, v in zip(keys, sums.clone().unbind(0), strict=True)})
            sums.zero_()
        out["episode_count"] = self._ep_count.clone()
        for v in (*self._ep_sums.values(), self._ep_count):
            v.zero_()
        return out

    def rollout_metrics(self) -> dict[str, torch.Tensor]:
        """Device metrics of the rollouts since the last call: ``env/num_unstable``, the env's own
        :meth:`~simppo.envs.base.VecEnv.metrics` and the per-motion σ spread; resets the counters."""
        out = {"env/num_unstable": self._num_unstable.clone(), **self.env.metrics()}
        self._num_unstable.zero_()
        out.update(self.algorithm.exploration_metrics())
        return out

    # ------------------------------------------------------------------ iterations
    def request_stop(self) -> None:
        """Finish the current iteration, save ``last.ckpt`` and return from :meth:`train`."""
        self.stop_requested = True

    def train_iteration(self) -> dict[str, float]:
        """Collect ``num_steps`` steps, GAE, optimise; returns host metrics (one gather). Raises
        :class:`TrainingDivergedError` when a loss or a model value went non-finite."""
        t0 = time.perf_counter()
        self.collect_rollout()
        t1 = time.perf_counter()
        update = {**self.algorithm.update(), **self.rollout_metrics()}  # + env/num_unstable of this iteration
        update[NONFINITE_METRIC] = nonfinite_count(self.algorithm.model)
        metrics = gather_metrics(*reduce_metrics(update, self.episode_metrics()))
        problem = divergence(metrics)  # the same reduced metrics on every rank: every rank stops
        if problem:
            kept = (f"{self.root_dir / 'last.ckpt'} is kept as it was" if self.root_dir is not None
                    else "no checkpoint was written")
            raise TrainingDivergedError(f"training diverged at epoch {self.epoch + 1}: {problem}; stopped without "
                                        f"saving ({kept}); lower the learning rates (agent.actor_lr, "
                                        "agent.critic_lr) or check the motions with simppo-pack --verify")
        elapsed = time.perf_counter() - t0
        metrics["perf/steps_per_s"] = self.num_steps * self.num_envs * self.world_size / elapsed  # every rank
        metrics["perf/rollout_s"] = t1 - t0
        metrics["perf/update_s"] = elapsed - (t1 - t0)
        self.epoch += 1
        return metrics

    def train(self) -> None:
        """Iterate until ``max_epochs`` or a stop request; log, show progress and rotate checkpoints."""
        from tqdm import tqdm

        c, zero = self.config, self.is_global_zero
        has_evaluator = self.evaluator is not None
        if self.world_size > 1:  # rank 0 alone holds the evaluator; every rank must know when it runs
            self.eval_every, has_evaluator = D.broadcast_object((self.eval_every, has_evaluator), src=0)
        bar = tqdm(total=self.max_epochs, initial=self.epoch, disable=not (self.progress_bar and zero),
                   dynamic_ncols=True, unit="it")
        last_reward = last_error = score = None
        if self.root_dir is not None and zero:
            self.root_dir.mkdir(parents=True, exist_ok=True)
        t_start = time.perf_counter()
        while self.epoch < self.max_epochs and not self.agree(self.stop_requested):
            metrics = self.train_iteration()
            new_score = None
            if self.eval_every > 0 and self.epoch % self.eval_every == 0:
                evaluation = self.evaluate()
                metrics.update(evaluation)
                new_score = evaluation["eval/score"]
            elif not has_evaluator and "episode/reward" in metrics:
                new_score = metrics["episode/reward"]
            metrics["perf/wall_s"] = time.perf_counter() - t_start
            if zero:
                self.logger.log(metrics, step=self.step_count)
                if self.metrics_csv is not None:
                    self.metrics_csv.append({"epoch": self.epoch, "step": self.step_count, **metrics})
                for every, hook in self.epoch_hooks:
                    if every > 0 and self.epoch % every == 0:
                        extra = hook(self)
                        if extra:
                            self.logger.log(extra, step=self.step_count)
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
            if zero and not self.progress_bar and self.log_every > 0 and self.epoch % self.log_every == 0:
                print(f"epoch {self.epoch}/{self.max_epochs} " + " ".join(f"{k} {v}" for k, v in progress.items()),
                      flush=True)
            new_high = self.agree(new_score is not None and (self.best_evaluated_score is None
                                                             or new_score > self.best_evaluated_score))
            if new_high:
                self.best_evaluated_score = new_score
            if self.root_dir is not None:
                if c.save_epoch_every > 0 and self.epoch % c.save_epoch_every == 0:
                    self.save(f"epoch_{self.epoch}.ckpt")
                if self.epoch % max(c.save_last_every, 1) == 0 or new_high:
                    self.save("last.ckpt", new_high_score=new_high)
        bar.close()
        if self.root_dir is not None:
            self.save("last.ckpt")

    def agree(self, flag: bool) -> bool:
        """``flag`` of this rank, or with several ranks whether it is set on any rank (one tiny all-reduce)."""
        return D.any_rank(flag, self.device) if self.world_size > 1 else bool(flag)

    def evaluate(self) -> dict[str, float]:
        """``evaluator(model)`` on global rank 0 (on every rank for an evaluator with ``every_rank``, which returns
        the metrics on rank 0); with several ranks every rank receives the metrics."""
        run_here = self.is_global_zero or getattr(self.evaluator, "every_rank", False)
        evaluation = self.evaluator(self.algorithm.model) if run_here else None
        return D.broadcast_object(evaluation, src=0) if self.world_size > 1 else evaluation

    # ------------------------------------------------------------------ checkpoint dicts
    def rank_state(self) -> dict:
        """This rank's own training state: ``running_reward_norm``, ``rng`` (torch / CUDA) and ``env``."""
        return {
            "running_reward_norm": self.algorithm.reward_normalizer.state_dict(),
            "rng": {"torch": torch.get_rng_state(),
                    "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []},
            "env": self.env.state_dict(),
        }

    def get_state_dict(self, state_dict: dict | None = None) -> dict:
        """Everything to continue exactly. Several ranks: a collective; the top-level ``env`` / ``rng`` /
        ``running_reward_norm`` are this rank's, and on global rank 0 ``ranks`` lists every rank's, with
        ``world_size``."""
        state = {} if state_dict is None else state_dict
        own = self.rank_state()
        state.update({
            "format": CHECKPOINT_FORMAT,
            "version": 1,
            "epoch": self.epoch,
            "step_count": self.step_count,
            "best_evaluated_score": self.best_evaluated_score,
            "run_start_time": self.run_start_time,
            **self.algorithm.state_dict(),
            **own,
            "config": asdict(self.config),
            "signature": env_signature(self.env),
            "exploration": X.exploration_state(self.config.exploration, self.motion_index),
        })
        if self.world_size > 1:  # the file is written by rank 0: it alone receives every rank's state
            state["world_size"] = self.world_size
            state["ranks"] = D.gather_objects(to_device(own, "cpu"), dst=0)
        return state

    def this_rank(self, state_dict: dict, source: str = "checkpoint") -> dict:
        """The checkpoint with this rank's ``env`` / ``rng`` / ``running_reward_norm`` (from ``ranks``) on top.
        Raises :class:`~simppo.agent.checkpoint.CheckpointError` unless written by as many ranks as this run has."""
        stored = state_dict.get("world_size", 1)
        if stored != self.world_size:
            raise CheckpointError(
                f"{source}: checkpoint was written by {stored} rank{'s' if stored != 1 else ''}, this run has "
                f"{self.world_size} (devices x num_nodes); resume with the same devices, num_nodes and num_envs per "
                "rank (or warm-start the weights with checkpoint=...)")
        if self.world_size == 1:
            return state_dict
        ranks = state_dict.get("ranks")
        if not isinstance(ranks, list) or len(ranks) != self.world_size or not all(isinstance(r, dict) for r in ranks):
            raise CheckpointError(f"{source}: checkpoint lacks the per-rank training state ('ranks', one entry per "
                                  f"rank) needed to resume on {self.world_size} ranks")
        return {**state_dict, **ranks[self.global_rank]}

    def prepare_checkpoint(self, state_dict: dict, load_training_state: bool = True, source: str = "checkpoint"
                           ) -> dict:
        """The checkpoint made to fit this run (motion rows validated, log-std rows expanded) and checked against
        the env and the model (robot, widths, shapes; to resume ``num_envs`` and the env state). An error on any
        rank raises the same one-line :class:`~simppo.agent.checkpoint.CheckpointError` on every rank."""
        error = None
        try:
            model = self.algorithm.model
            state_dict = X.prepare_checkpoint(state_dict, self.motion_index, model.actor, load_training_state)
            training = None
            if load_training_state:
                state_dict = self.this_rank(state_dict, source)
                training = {"env": self.env.state_dict(),
                            "running_reward_norm": self.algorithm.reward_normalizer.state_dict()}
            check_compatible(state_dict, env_signature(self.env), model.state_dict(), source, training)
        except X.MotionSetError as exc:
            error = f"{source}: {exc}"
        except CheckpointError as exc:
            error = str(exc)
        raise_on_any_rank(self.fabric, error)
        return state_dict

    def load_parameters(self, state_dict: dict, load_training_state: bool = True, source: str = "checkpoint"
                        ) -> None:
        """Restore the weights; with ``load_training_state`` also optimizers, normalizers, counters, RNG, env.
        The checkpoint is prepared and checked first on every rank; a mismatch changes nothing."""
        state_dict = self.prepare_checkpoint(state_dict, load_training_state, source)
        self.algorithm.load_state_dict(state_dict, load_training_state)
        if not load_training_state:
            return
        self.epoch = int(state_dict["epoch"])
        self.step_count = int(state_dict["step_count"])
        self.best_evaluated_score = state_dict["best_evaluated_score"]
        self.run_start_time = state_dict.get("run_start_time", self.run_start_time)  # see migrate_old_checkpoint
        rng = state_dict["rng"]
        torch.set_rng_state(rng["torch"].cpu())
        if rng["cuda"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all([r.cpu() for r in rng["cuda"]])
        self.env.load_state_dict(state_dict["env"])
        self.current_obs = self.add_agent_info_to_obs(self.env.get_observations())
        self.current_motion_ids = getattr(self.env, "motion_ids", None)

    # ------------------------------------------------------------------ files
    def save(self, checkpoint_name: str = "last.ckpt", new_high_score: bool = False) -> None:
        """Write the state to ``root_dir/checkpoint_name`` (and ``score_based.ckpt`` on a new high).

        Several ranks: call it on every rank (the state holds every rank's env state, gathered); only global
        rank 0 writes, and every rank waits until it has. A failed write raises the same
        :class:`~simppo.agent.checkpoint.CheckpointError` on every rank."""
        if self.root_dir is None:
            raise ValueError(f"cannot save {checkpoint_name}: the runner has no root_dir")
        state = self.get_state_dict()  # a collective with several ranks
        if self.world_size == 1:
            if D.is_global_zero(self.fabric):
                self._write(state, checkpoint_name, new_high_score)
            return
        error = None
        if D.is_global_zero(self.fabric):
            try:
                self._write(state, checkpoint_name, new_high_score)
            except Exception as exc:  # every rank must learn of it, or the others would wait for rank 0
                error = f"{self.root_dir / checkpoint_name}: rank 0 could not write the checkpoint ({exc})"
        raise_on_any_rank(self.fabric, error)  # also the barrier: no rank runs ahead of the write

    def _write(self, state: dict, checkpoint_name: str, new_high_score: bool) -> None:
        save_checkpoint(state, self.root_dir / checkpoint_name)
        if new_high_score:
            save_checkpoint(state, self.root_dir / "score_based.ckpt")
        if checkpoint_name == "last.ckpt":
            self.save_exploration_snapshot()

    def save_exploration_snapshot(self) -> None:
        """Per-motion exploration: replace ``root_dir/exploration.json`` (every motion's σ); rank 0 only. Resume
        never reads it."""
        if not self.algorithm.per_motion or not getattr(self.fabric, "is_global_zero", True):
            return
        save_snapshot(self.root_dir / SNAPSHOT_FILE, self.motion_index, self.algorithm.model.actor.effective_log_std(),
                      self.epoch, self.step_count)

    def load(self, path: str | Path, load_training_state: bool = True) -> None:
        """Restore from a checkpoint file; raises :class:`~simppo.agent.checkpoint.CheckpointError` (one line
        naming the file) for a corrupt file or one that does not fit this run, before any state changes.
        Several ranks: every rank reads the file; an error on any rank is raised on every rank."""
        if self.world_size == 1:
            state = load_checkpoint(path, map_location=self.device)
        else:
            state, error = None, None
            try:
                state = load_checkpoint(path, map_location=self.device)
            except CheckpointError as exc:
                error = str(exc)
            raise_on_any_rank(self.fabric, error)
        self.load_parameters(state, load_training_state, source=str(path))

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
            self.metrics_csv.truncate_after(self.epoch)


def check_same_work(fabric, env, config, num_rows: int | None, precision: str) -> None:
    """Several ranks: raise :class:`~simppo.agent.distributed.DistributedConfigError` (the same line on every
    rank) unless every rank has the same ``num_envs``, rollout length, minibatch split, widths and agent config:
    they must run the same minibatch steps and reduce tensors of the same shapes."""
    dims = env.obs_dims
    digest = hashlib.sha256(json.dumps(asdict(config), sort_keys=True, default=str).encode()).hexdigest()
    D.check_same_on_all_ranks(fabric, {
        "num_envs": env.num_envs, "agent.num_steps": config.num_steps,
        "agent.num_minibatches": config.num_minibatches, "agent.num_mini_epochs": config.num_mini_epochs,
        "the observation width": dims["obs"], "the critic observation width": dims.get("critic_obs", dims["obs"]),
        "the action width": env.num_actions, "the per-motion log-std rows": num_rows or 0,
        "the MLP precision (bf16: 1)": int(precision == "bf16"),
        "the agent config (digest)": int(digest[:15], 16),
    }, fix=" (num_envs is per rank; launch every rank with the same config)")


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
