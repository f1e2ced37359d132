"""PPO, the algorithm (ProtoMotions-style API): act and record rollout steps, GAE in place, minibatch update.

The loop, progress bar, logging, checkpoint files, resume and signals live in :mod:`simppo.agent.runner`;
``train``, ``train_iteration``, ``save`` and ``load`` delegate to a :class:`~simppo.agent.runner.Runner`.
Nothing here touches files, the logger or the host inside a rollout step or a minibatch update.
"""

import hashlib
import json
import time
from dataclasses import asdict
from pathlib import Path

import torch
from torch import nn

from simppo.agent import distributed as D
from simppo.agent import exploration as X
from simppo.agent import losses as L
from simppo.agent.buffer import ExperienceBuffer
from simppo.agent.checkpoint import (
    CHECKPOINT_FORMAT,
    CheckpointError,
    check_compatible,
    env_signature,
    raise_on_any_rank,
    to_device,
)
from simppo.agent.config import PPOAgentConfig
from simppo.agent.models import PPOModel
from simppo.agent.normalizers import RewardNormalizer, sync_running_stats
from simppo.agent.precision import mlp_autocast, resolve_precision
from simppo.agent.runner import Runner
from simppo.envs.base import VecEnv
from simppo.kernels.gae import bind_gae, compute_gae


def clip_grad_norm(module: nn.Module, max_norm: float) -> torch.Tensor:
    """Clip in place; returns the pre-clip norm as a tensor (no non-finite check: that would sync)."""
    return torch.nn.utils.clip_grad_norm_(module.parameters(), max_norm, error_if_nonfinite=False, foreach=True)


class PPO:
    """PPO on a :class:`~simppo.envs.base.VecEnv`. ``PPO(fabric, env, config).setup(); .train()``.

    ``epoch`` (completed iterations), ``step_count`` (env steps recorded), ``best_evaluated_score`` and
    ``run_start_time`` are training progress saved with the weights.

    ``config.exploration=per_motion``: the actor's log-std is a ``[num_rows, A]`` table indexed by the
    :class:`~simppo.motion.index.MotionIndex` row of each env's motion (``env.motion_lib.index``). The env
    reports the motion each env tracks, valid for the observation it returns, as ``extras["motion_ids"]``
    (and ``env.motion_ids`` after a reset); the agent keeps it as ``current_motion_ids`` and records the
    rows with each sample.

    Several ranks (a DDP ``fabric``, ``fabric.world_size > 1``): each rank steps its own ``env`` (``num_envs``
    per rank) with its own seed; gradients are averaged by DDP, the minibatch advantage statistics and the KL
    are all-reduced in each minibatch step, the normalizer statistics are merged at the end of each rollout,
    and :meth:`setup` refuses ranks that would run different amounts of work. ``step_count`` counts the steps
    of every rank. :meth:`get_state_dict` is then a collective (call it on every rank): it stores each rank's
    env state, RNG and running returns under ``ranks``.
    """

    def __init__(self, fabric, env: VecEnv, config: PPOAgentConfig, root_dir: str | Path | None = None):
        self.fabric = fabric
        self.env = env
        self.config = config
        self.root_dir = Path(root_dir) if root_dir is not None else None
        self.device = fabric.device
        self.world_size = D.world_size(fabric)
        self.global_rank = D.global_rank(fabric)
        self.num_envs = env.num_envs
        self.num_steps = config.num_steps
        self.tau = config.tau
        self.e_clip = config.e_clip
        self.precision = resolve_precision(config.update_precision, self.device)  # fp32 | bf16 (auto resolved)
        self.epoch = 0
        self.step_count = 0
        self.best_evaluated_score: float | None = None
        self.run_start_time = time.time()
        if config.exploration not in X.EXPLORATION_MODES:
            raise X.ExplorationConfigError(f"agent.exploration={config.exploration!r}: choose from "
                                           f"{list(X.EXPLORATION_MODES)}")
        self.per_motion = config.exploration == "per_motion"
        lib = getattr(env, "motion_lib", None)
        self.motion_index = getattr(lib, "index", None)  # None for envs without motions
        if self.per_motion and (self.motion_index is None or not hasattr(env, "motion_ids")):
            raise X.ExplorationConfigError(
                f"agent.exploration=per_motion needs an env that tracks motions (a motion library and motion_ids); "
                f"{type(env).__name__} has none: use agent.exploration=shared")

    # ----------------------------------------------------------------- setup
    def setup(self) -> None:
        self.num_rows = X.num_rows(self.motion_index) if self.per_motion else None
        self.check_same_work()
        if self.per_motion:
            self._motion_rows = X.motion_rows(self.motion_index).to(self.device)  # motion id → row
            # per-row samples and terminations since the last rollout_metrics() (one iteration in the Runner): the
            # σ metrics, and the samples set the rows' learning rate in optimize_model()
            self._row_steps = torch.zeros(self.num_rows, device=self.device)
            self._row_terms = torch.zeros(self.num_rows, device=self.device)
        self.model = self.create_model()
        self.actor_optimizer, self.critic_optimizer = self.create_optimizers(self.model)
        self.reward_normalizer = RewardNormalizer(self.num_envs, self.config.gamma).to(self.device)
        if self.world_size > 1:
            for stats in self.running_stats():
                stats.track_pending()
        self.experience_buffer = ExperienceBuffer(self.num_steps, self.num_envs, self.device)
        self.register_algorithm_experience_buffer_keys()
        b = self.experience_buffer
        self._gae = bind_gae(b["dones"], b["values"], b["rewards"], b["next_values"], b["advantages"], b["returns"])
        self._zero = torch.zeros((), device=self.device)  # the extra actor loss when there is none
        self._ep_count = torch.zeros((), device=self.device)
        self._ep_sums: dict[str, torch.Tensor] = {}  # per episode-stat key, summed over finished episodes
        self._ep_table: tuple[tuple[str, ...], torch.Tensor] | None = None  # the same from extras["episode_table"]
        # instability: worlds the env flagged in the last step (kept out of the next obs-normalizer update),
        # and the number of flagged worlds summed over the steps since the last rollout_metrics()
        self._obs_valid = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
        self._num_unstable = torch.zeros((), dtype=torch.int64, device=self.device)
        self.current_obs = self.add_agent_info_to_obs(self.env.reset())
        self.current_motion_ids = getattr(self.env, "motion_ids", None)  # [N], valid for current_obs

    def check_same_work(self) -> None:
        """Several ranks: raise :class:`~simppo.agent.distributed.DistributedConfigError` (the same line on every
        rank) unless every rank has the same ``num_envs``, rollout length, minibatch split, widths and agent
        config: they must run the same minibatch steps and reduce tensors of the same shapes."""
        dims = self.env.obs_dims
        digest = hashlib.sha256(json.dumps(asdict(self.config), sort_keys=True, default=str).encode()).hexdigest()
        D.check_same_on_all_ranks(self.fabric, {
            "num_envs": self.num_envs, "agent.num_steps": self.num_steps,
            "agent.num_minibatches": self.config.num_minibatches, "agent.num_mini_epochs": self.config.num_mini_epochs,
            "the observation width": dims["obs"], "the critic observation width": dims.get("critic_obs", dims["obs"]),
            "the action width": self.env.num_actions, "the per-motion log-std rows": self.num_rows or 0,
            "the MLP precision (bf16: 1)": int(self.precision == "bf16"),
            "the agent config (digest)": int(digest[:15], 16),
        }, fix=" (num_envs is per rank; launch every rank with the same config)")

    def running_stats(self) -> list:
        """The running statistics merged across ranks: actor and critic observations, discounted returns."""
        return [self.model.obs_norm, self.model.critic_obs_norm, self.reward_normalizer.return_rms]

    def sync_normalizers(self) -> None:
        """Several ranks: merge the normalizer batches of every rank since the last sync (one all-gather)."""
        if self.world_size > 1:
            sync_running_stats(self.running_stats())

    @property
    def actor_module(self) -> nn.Module:
        """The actor, unwrapped from Fabric / DDP."""
        return self.model.actor

    @property
    def critic_module(self) -> nn.Module:
        """The critic, unwrapped from Fabric / DDP."""
        return self.model.critic

    def add_agent_info_to_obs(self, obs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Seed hook for agent-side observation entries (stateless); plain PPO adds none."""
        return obs

    def create_model(self) -> PPOModel:
        c = self.config
        dims = self.env.obs_dims
        model = PPOModel(dims["obs"], dims.get("critic_obs", dims["obs"]), self.env.num_actions,
                         c.actor, c.critic, obs_clip=c.obs_clip, normalize_obs=c.normalize_obs, num_rows=self.num_rows)
        if c.compile:
            model.compile_mlps()
        return model.to(self.device)

    def create_optimizers(self, model: PPOModel):
        """Separate fused Adam for actor and critic; learning rates are device tensors (no host sync). The actor's
        learnable log-std is its own parameter group at ``log_std_lr = actor_lr * log_std_lr_scale``, times
        :func:`~simppo.agent.exploration.row_lr_factor` of each iteration's samples with per-motion rows."""
        c = self.config
        self.actor_lr = torch.tensor(c.actor_lr, device=self.device)
        self.critic_lr = torch.tensor(c.critic_lr, device=self.device)
        self.log_std_lr_scale = c.log_std_lr_scale
        self._row_lr_factor = torch.ones((), device=self.device)  # per-motion rows: set from each iteration's rows
        self.log_std_lr = self.actor_lr * self.log_std_lr_scale
        fused = {"fused": True} if self.device.type in ("cpu", "cuda") else {}
        actor_opt = torch.optim.Adam(self.actor_param_groups(model.actor), lr=self.actor_lr, **fused)
        critic_opt = torch.optim.Adam(model.critic.parameters(), lr=self.critic_lr, **fused)
        # Fabric wraps copies of the handles; self.model keeps the plain modules for clean state dicts.
        self.actor, actor_opt = self.fabric.setup(model.actor, actor_opt)
        self.critic, critic_opt = self.fabric.setup(model.critic, critic_opt)
        return actor_opt, critic_opt

    def actor_param_groups(self, actor: nn.Module) -> list[dict]:
        """``log_std`` (its own learning rate) and the rest, in ``actor.parameters()`` order, so that the optimizer's
        state indices are the parameters' positions (per-motion checkpoint growth relies on it)."""
        params = list(actor.named_parameters())
        groups = [{"name": "log_std", "params": [p for n, p in params if n == "log_std"], "lr": self.log_std_lr},
                  {"name": "actor", "params": [p for n, p in params if n != "log_std"], "lr": self.actor_lr}]
        groups = [g for g in groups if g["params"]]
        if [id(p) for g in groups for p in g["params"]] != [id(p) for _, p in params]:
            raise RuntimeError("the actor's log_std must be registered before its other parameters")
        return groups

    def register_algorithm_experience_buffer_keys(self) -> None:
        b, dims, a = self.experience_buffer, self.env.obs_dims, self.env.num_actions
        b.register_key("obs", (dims["obs"],))
        b.register_key("critic_obs", (dims.get("critic_obs", dims["obs"]),))
        for key in ("actions", "mean", "log_std"):
            b.register_key(key, (a,))
        for key in ("logp", "values", "next_values", "rewards", "dones", "terminated", "advantages",
                    "returns"):
            b.register_key(key)
        if self.per_motion:
            b.register_key("rows", dtype=torch.int64)  # each sample's log-std row (its motion's MotionIndex row)

    def current_rows(self) -> torch.Tensor | None:
        """Log-std row ``[N]`` (int64) of each env's current motion; ``None`` with shared exploration."""
        if not self.per_motion:
            return None
        return torch.index_select(self._motion_rows, 0, self.current_motion_ids)

    # --------------------------------------------------------------- rollout
    @torch.no_grad()
    def collect_rollout(self) -> None:
        """Fill the ``[num_steps, num_envs]`` buffer from the env, then compute GAE in place."""
        self.model.eval()
        for step in range(self.num_steps):
            self.rollout_step(step)
        self.sync_normalizers()
        self.compute_advantages()

    @torch.no_grad()
    def rollout_step(self, step: int) -> None:
        """Act (sample from the Gaussian policy), step the env, record one ``[num_envs]`` slice; no host sync."""
        b = self.experience_buffer
        self.update_obs_normalizers(self.current_obs)
        obs, critic_obs = self.model.normalize(self.current_obs)
        rows = self.current_rows()
        with self.mlp_autocast():  # the precision the update differentiates (the PPO ratio starts at 1)
            mean, log_std = self.actor(obs, rows)
            values = self.critic(critic_obs)
        mean, values = mean.float(), values.float()
        actions = mean + torch.exp(log_std) * torch.randn_like(mean)
        if rows is not None:
            b.update_data("rows", step, rows)
        b.update_data("obs", step, obs)
        b.update_data("critic_obs", step, critic_obs)
        b.update_data("actions", step, actions)
        b.update_data("mean", step, mean)
        b.update_data("log_std", step, log_std)
        b.update_data("logp", step, L.gaussian_log_prob(actions, mean, log_std))
        b.update_data("values", step, values)
        next_obs, rewards, terminated, truncated, extras = self.env.step(actions)
        if rows is not None:
            self._row_steps.index_add_(0, rows, torch.ones_like(rewards))
            self._row_terms.index_add_(0, rows, terminated.float())
        self.record_rollout_step(next_obs, actions, rewards, terminated | truncated, terminated, None, extras, step)
        self.current_obs = self.add_agent_info_to_obs(next_obs)
        self.current_motion_ids = extras.get("motion_ids", self.current_motion_ids)

    @torch.no_grad()
    def update_obs_normalizers(self, obs: dict[str, torch.Tensor]) -> None:
        """Merge ``obs`` into the running observation statistics, leaving out envs the env flagged unstable
        in the last step and rows that are not finite (no host sync)."""
        if not self.model.normalize_obs:
            return
        actor_obs, critic_obs = obs["obs"], obs.get("critic_obs", obs["obs"])
        valid = self._obs_valid & torch.isfinite(actor_obs).all(-1) & torch.isfinite(critic_obs).all(-1)
        self.model.obs_norm.update(actor_obs, mask=valid)
        self.model.critic_obs_norm.update(critic_obs, mask=valid)

    @torch.no_grad()
    def record_rollout_step(self, next_obs_td, actions, rewards, dones, terminated, done_indices, extras, step):
        """Next-value bootstrap from the pre-reset observation: kept for time-outs, zeroed for terminations.

        Worlds the env reports in ``extras["unstable"]`` (bool ``[N]``) and non-finite rewards get a zero
        reward and stay out of the normalizer updates; ``extras["num_unstable"]`` is summed per iteration.
        ``done_indices`` is the seed's signature; simppo passes ``None`` (indices would need a host sync)."""
        b = self.experience_buffer
        terminal = extras.get("terminal_obs", next_obs_td)
        terminal_critic_obs = self.model.normalize_critic(terminal)
        # where, not multiply: a terminated world's value may be NaN (NaN * 0 = NaN)
        with self.mlp_autocast():
            terminal_values = self.critic(terminal_critic_obs).float()
        next_values = torch.where(terminated, 0.0, terminal_values)
        b.update_data("next_values", step, next_values)
        fdones = dones.float()
        valid = torch.isfinite(rewards)
        unstable = extras.get("unstable")
        if unstable is not None:
            valid &= ~unstable
            torch.logical_not(unstable, out=self._obs_valid)
        if "num_unstable" in extras:
            self._num_unstable += extras["num_unstable"].sum()
        rewards = torch.where(valid, rewards, 0.0)
        if self.config.normalize_rewards:
            rewards = self.reward_normalizer(rewards, fdones, valid)
        b.update_data("rewards", step, rewards)
        b.update_data("dones", step, fdones)
        b.update_data("terminated", step, terminated.float())
        table = extras.get("episode_table")  # (keys, [N, K]): every episode statistic in one reduction
        if table is not None:
            keys, values = table
            if self._ep_table is None:
                self._ep_table = (tuple(keys), torch.zeros(len(keys), device=self.device))
            self._ep_table[1].add_(fdones @ values)
        else:
            for key, value in extras.get("episode", {}).items():
                if key not in self._ep_sums:
                    self._ep_sums[key] = torch.zeros((), device=self.device)
                self._ep_sums[key] += (value * fdones).sum()
        self._ep_count += fdones.sum()
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
        """Device metrics of the rollouts since the last call: ``env/num_unstable`` (worlds flagged unstable,
        summed over the steps), the env's own :meth:`~simppo.envs.base.VecEnv.metrics` and, with per-motion
        exploration, the σ spread across motions (:func:`~simppo.agent.exploration.sigma_metrics`); resets the
        counters."""
        out = {"env/num_unstable": self._num_unstable.clone(), **self.env.metrics()}
        self._num_unstable.zero_()
        if self.per_motion:
            if self.world_size > 1:  # the hardest motions of every rank's rollouts
                counts = D.all_reduce_(torch.stack([self._row_steps, self._row_terms]))
                self._row_steps.copy_(counts[0])
                self._row_terms.copy_(counts[1])
            out.update(X.sigma_metrics(self.model.actor.log_std, self._row_steps, self._row_terms))
            self._row_steps.zero_()
            self._row_terms.zero_()
        return out

    # ---------------------------------------------------------- optimization
    def compute_advantages(self) -> None:
        compute_gae(self._gae, self.config.gamma, self.tau)

    def optimize_model(self) -> dict[str, torch.Tensor]:
        """Minibatch epochs over the flattened buffer (one device ``randperm`` per epoch).

        Returns the device metrics averaged over the minibatch steps, plus ``explained_variance`` and
        ``actor/mini_epochs`` (the epochs run: fewer than ``num_mini_epochs`` when ``target_kl`` stopped them).
        """
        c = self.config
        self.model.train()
        data = self.experience_buffer.flat()
        total = self.num_steps * self.num_envs
        mb_size = total // c.num_minibatches
        zero = torch.zeros((), device=self.device)
        sums: dict[str, torch.Tensor] = {}
        num_updates = 0
        if self.per_motion:  # the rows' rate from this iteration's samples per row (every rank's)
            counts = self._row_steps if self.world_size == 1 else D.all_reduce_(self._row_steps.clone())
            self._row_lr_factor.copy_(X.row_lr_factor(counts))
            self.sync_log_std_lr()
        for _ in range(c.num_mini_epochs):
            epoch_kl = torch.zeros((), device=self.device)
            perm = self.minibatch_permutation(total)
            for i in range(c.num_minibatches):
                idx = perm[i * mb_size:(i + 1) * mb_size]
                logs = self.perform_optimization_step({k: v.index_select(0, idx) for k, v in data.items()}, i)
                for k, v in logs.items():
                    sums[k] = sums.get(k, zero) + v.detach()
                epoch_kl += logs["actor/kl"]
                num_updates += 1
            if c.target_kl is not None and (epoch_kl / c.num_minibatches).item() > c.target_kl:
                break  # the one host sync per epoch
        metrics = {k: v / num_updates for k, v in sums.items()}
        metrics["actor/mini_epochs"] = zero + num_updates / c.num_minibatches  # < num_mini_epochs: target_kl stopped
        if self.per_motion:
            metrics["exploration/log_std_lr"] = self.log_std_lr.clone()
        if c.lr_schedule == "adaptive_iteration":  # the iteration's mean KL against the rollout policy, once
            self.adapt_actor_lr(metrics["actor/kl"])
        metrics["explained_variance"] = L.explained_variance(data["values"], data["returns"])
        return metrics

    def minibatch_permutation(self, total: int) -> torch.Tensor:
        """The sample order of one epoch (a device ``randperm``; minibatch ``i`` is slice ``i``)."""
        return torch.randperm(total, device=self.device)

    def perform_optimization_step(self, batch_dict: dict[str, torch.Tensor], batch_idx: int = 0
                                  ) -> dict[str, torch.Tensor]:
        """One actor and one critic update on a minibatch; returns its metrics (device tensors).
        ``batch_idx`` is kept for the seed's signature. Several ranks: the advantages are normalised with the
        mean and std of every rank's minibatch (one all-reduce), as one process would on their union."""
        if self.config.normalize_advantages:
            adv = batch_dict["advantages"]
            mean, std = self.advantage_moments(adv)
            batch_dict["advantages"] = (adv - mean) / (std + 1e-8)
        _, actor_logs = self.actor_step(batch_dict)
        _, critic_logs = self.critic_step(batch_dict)
        return {**actor_logs, **critic_logs, "actor/lr": self.actor_lr}

    def advantage_moments(self, adv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and (unbiased) std of the minibatch advantages ``[B]``; of every rank's minibatch together when
        there are several ranks (sums in float64, one all-reduce, no host sync)."""
        if self.world_size == 1:
            return adv.mean(), adv.std()
        a = adv.double()
        sums = D.all_reduce_(torch.stack([torch.full_like(a[0], a.numel()), a.sum(), a.square().sum()]))
        n = sums[0]
        mean = sums[1] / n
        var = ((sums[2] - n * mean.square()) / (n - 1.0).clamp(min=1.0)).clamp(min=0.0)
        return mean.to(adv.dtype), var.sqrt().to(adv.dtype)

    def mlp_autocast(self) -> torch.autocast:
        """bf16 autocast of the actor's and critic's MLPs in the rollout and the minibatch steps when
        :attr:`precision` is ``bf16`` (:mod:`simppo.agent.precision`); a no-op with fp32."""
        return mlp_autocast(self.device, self.precision)

    def actor_step(self, batch_dict: dict[str, torch.Tensor]):
        """Clipped surrogate + entropy bonus + bounds + extra losses, then one clipped Adam step on the actor."""
        c = self.config
        with self.mlp_autocast():
            mean, log_std = self.actor(batch_dict["obs"], batch_dict.get("rows"))  # log_std: each sample's row
        mean = mean.float()  # losses in fp32
        batch_dict["mean_action"] = mean
        logp = L.gaussian_log_prob(batch_dict["actions"], mean, log_std)
        surr, _, clipped = L.clipped_surrogate_loss(logp, batch_dict["logp"], batch_dict["advantages"], c.e_clip)
        entropy = L.gaussian_entropy(log_std)
        bounds = L.bounds_loss(mean, c.bounds_limit)
        extra_loss, logs = self.calculate_extra_actor_loss(batch_dict)
        loss = (surr.mean() + L.entropy_bonus_loss(entropy, c.entropy_coef).mean()
                + c.bounds_loss_coef * bounds.mean() + extra_loss)
        with torch.no_grad():
            kl = L.gaussian_kl(batch_dict["mean"], batch_dict["log_std"], mean, log_std).mean()
            if self.world_size > 1:  # every rank's minibatch: one learning rate and one target_kl stop for all
                D.all_reduce_(kl, "mean")
        self.actor_optimizer.zero_grad(set_to_none=True)
        self.fabric.backward(loss)
        grad_norm = clip_grad_norm(self.actor_module, c.max_grad_norm)
        if c.lr_schedule == "adaptive":
            self.adapt_actor_lr(kl)
        self.actor_optimizer.step()
        self.actor_module.clamp_log_std_()
        logs.update({"actor/loss": loss.detach(), "actor/surrogate": surr.mean().detach(),
                     "actor/clip_frac": clipped.mean(), "actor/entropy": entropy.mean().detach(),
                     "actor/bounds": bounds.mean().detach(), "actor/kl": kl, "actor/grad_norm": grad_norm})
        return loss, logs

    def critic_step(self, batch_dict: dict[str, torch.Tensor]):
        """(Clipped) value loss, then one clipped Adam step on the critic."""
        c = self.config
        with self.mlp_autocast():
            values = self.critic(batch_dict["critic_obs"])
        values = values.float()
        vloss = L.value_loss(values, batch_dict["values"], batch_dict["returns"], c.clip_value_loss, c.value_clip)
        loss = c.critic_coef * vloss.mean()
        self.critic_optimizer.zero_grad(set_to_none=True)
        self.fabric.backward(loss)
        grad_norm = clip_grad_norm(self.critic_module, c.max_grad_norm)
        self.critic_optimizer.step()
        return loss, {"critic/loss": loss.detach(), "critic/grad_norm": grad_norm}

    def calculate_extra_actor_loss(self, batch_td: dict[str, torch.Tensor]):
        """L2C2 smoothness (``lambda_l2c2`` > 0): policy-mean change under observation noise."""
        c = self.config
        if c.lambda_l2c2 <= 0.0:
            return self._zero, {}
        obs = batch_td["obs"]
        with self.mlp_autocast():
            noisy_mean, _ = self.actor(obs + c.l2c2_obs_noise * torch.randn_like(obs), batch_td.get("rows"))
        l2c2 = L.l2c2_loss(batch_td["mean_action"], noisy_mean.float()).mean()
        return c.lambda_l2c2 * l2c2, {"actor/l2c2": l2c2.detach()}

    def adapt_actor_lr(self, kl: torch.Tensor) -> None:
        """KL-adaptive schedule on the device: ÷1.5 above 2x ``desired_kl``, x1.5 below half, clamped."""
        c = self.config
        factor = torch.where(kl > 2.0 * c.desired_kl, 1.0 / 1.5, torch.where(kl < 0.5 * c.desired_kl, 1.5, 1.0))
        self.actor_lr.copy_((self.actor_lr * factor).clamp(c.min_lr, c.max_lr))
        self.sync_log_std_lr()

    def sync_log_std_lr(self) -> None:
        """``log_std_lr = actor_lr * log_std_lr_scale * row factor`` in place (the optimizer group holds it)."""
        self.log_std_lr.copy_(self.actor_lr * self.log_std_lr_scale * self._row_lr_factor)

    # ---------------------------------------------------------- state dicts
    def rank_state(self) -> dict:
        """This rank's own training state: ``env`` (its env's state), ``rng`` (torch / CUDA generators) and
        ``running_reward_norm`` (the shared return statistics and this rank's running returns)."""
        return {
            "running_reward_norm": self.reward_normalizer.state_dict(),
            "rng": {"torch": torch.get_rng_state(),
                    "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []},
            "env": self.env.state_dict(),
        }

    def get_state_dict(self, state_dict: dict | None = None) -> dict:
        """Everything to continue exactly. Several ranks: a collective (every rank calls it); the top-level
        ``env`` / ``rng`` / ``running_reward_norm`` are this rank's, and on global rank 0 ``ranks`` lists every
        rank's (:meth:`rank_state`, on the CPU; ``None`` on the other ranks), with ``world_size``."""
        state = {} if state_dict is None else state_dict
        own = self.rank_state()
        state.update({
            "format": CHECKPOINT_FORMAT,
            "version": 1,
            "epoch": self.epoch,
            "step_count": self.step_count,
            "best_evaluated_score": self.best_evaluated_score,
            "run_start_time": self.run_start_time,
            "model": self.model.state_dict(),
            "actor_optimizer": self.actor_optimizer.state_dict(),
            "critic_optimizer": self.critic_optimizer.state_dict(),
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
        """The checkpoint with this rank's ``env`` / ``rng`` / ``running_reward_norm`` (from ``ranks``) at the
        top level. Raises :class:`~simppo.agent.checkpoint.CheckpointError` unless it was written by as many
        ranks as this run has (each rank's env state continues exactly only on its own rank)."""
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

    def check_checkpoint(self, state_dict: dict, load_training_state: bool = True, source: str = "checkpoint"
                         ) -> None:
        """Raise :class:`~simppo.agent.checkpoint.CheckpointError` (one line naming ``source``) unless the
        checkpoint fits this agent and env: robot, observation / action widths, tensor shapes and, to resume,
        ``num_envs`` and the env state's layout. Changes nothing."""
        training = None
        if load_training_state:
            training = {"env": self.env.state_dict(), "running_reward_norm": self.reward_normalizer.state_dict()}
        check_compatible(state_dict, env_signature(self.env), self.model.state_dict(), source, training)

    def prepare_checkpoint(self, state_dict: dict, load_training_state: bool = True, source: str = "checkpoint"
                           ) -> dict:
        """The checkpoint made to fit this run (:func:`~simppo.agent.exploration.prepare_checkpoint`: motion rows
        validated, log-std rows expanded), then checked (:meth:`check_checkpoint`). An error on any rank raises
        the same one-line :class:`~simppo.agent.checkpoint.CheckpointError` on every rank. Changes nothing."""
        error = None
        try:
            state_dict = X.prepare_checkpoint(state_dict, self.motion_index, self.model.actor, load_training_state)
            if load_training_state:
                state_dict = self.this_rank(state_dict, source)
            self.check_checkpoint(state_dict, load_training_state, source)
        except X.MotionSetError as exc:
            error = f"{source}: {exc}"
        except CheckpointError as exc:
            error = str(exc)
        raise_on_any_rank(self.fabric, error)
        return state_dict

    def load_parameters(self, state_dict: dict, load_training_state: bool = True, source: str = "checkpoint"
                        ) -> None:
        """Restore weights; with ``load_training_state`` also optimizers, normalizers, counters, RNG, env.

        The checkpoint is prepared and checked first on every rank (:meth:`prepare_checkpoint`); a mismatch
        changes nothing."""
        state_dict = self.prepare_checkpoint(state_dict, load_training_state, source)
        self.model.load_state_dict(state_dict["model"])
        if not load_training_state:
            return
        self.actor_optimizer.load_state_dict(state_dict["actor_optimizer"])
        self.critic_optimizer.load_state_dict(state_dict["critic_optimizer"])
        # the stored rates into the device tensors the schedule updates in place, and the groups back onto them
        actor_group = next(g for g in self.actor_optimizer.param_groups if g.get("name") != "log_std")
        self.actor_lr.copy_(torch.as_tensor(actor_group["lr"]))
        self.critic_lr.copy_(torch.as_tensor(self.critic_optimizer.param_groups[0]["lr"]))
        self.sync_log_std_lr()
        for group in self.actor_optimizer.param_groups:
            group["lr"] = self.log_std_lr if group.get("name") == "log_std" else self.actor_lr
        for group in self.critic_optimizer.param_groups:
            group["lr"] = self.critic_lr
        self.reward_normalizer.load_state_dict(state_dict["running_reward_norm"])
        self.epoch = int(state_dict["epoch"])
        self.step_count = int(state_dict["step_count"])
        self.best_evaluated_score = state_dict.get("best_evaluated_score")
        self.run_start_time = state_dict.get("run_start_time", self.run_start_time)
        rng = state_dict["rng"]
        torch.set_rng_state(rng["torch"].cpu())
        if rng["cuda"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all([r.cpu() for r in rng["cuda"]])
        self.env.load_state_dict(state_dict["env"])
        self.current_obs = self.add_agent_info_to_obs(self.env.get_observations())
        self.current_motion_ids = getattr(self.env, "motion_ids", None)

    # ------------------------------------------------- delegated to a Runner
    def train_iteration(self) -> dict[str, float]:
        return Runner(self).train_iteration()

    def train(self, max_epochs: int = 1000) -> None:
        Runner(self, self.root_dir, max_epochs=max_epochs).train()

    def save(self, checkpoint_name: str = "last.ckpt", new_high_score: bool = False) -> None:
        Runner(self, self.root_dir).save(checkpoint_name, new_high_score)

    def load(self, path: str | Path, load_training_state: bool = True) -> None:
        Runner(self, self.root_dir).load(path, load_training_state)
