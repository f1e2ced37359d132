"""The PPO algorithm on device, with the shape of rsl_rl's ``PPO``: :meth:`PPOAlgorithm.act` on an observation,
:meth:`~PPOAlgorithm.process_env_step` into the experience buffer, :meth:`~PPOAlgorithm.compute_returns` with the
Warp GAE kernel, :meth:`~PPOAlgorithm.update`. It never touches an env, a file or the host: no step of it syncs.

Several ranks (a DDP ``fabric``): gradients are averaged by DDP, the minibatch advantage statistics and the KL are
all-reduced in each minibatch step, and the normalizer statistics are merged by :meth:`sync_normalizers`.
"""

from __future__ import annotations

import math
import warnings

import torch
from torch import nn

from simppo.agent import distributed as D
from simppo.agent import exploration as X
from simppo.agent import losses as L
from simppo.agent.buffer import ExperienceBuffer
from simppo.agent.config import PPOAgentConfig
from simppo.agent.graphed_update import MinibatchStep, graph_update_available
from simppo.agent.models import PPOModel
from simppo.agent.normalizers import RewardNormalizer, sync_running_stats
from simppo.agent.precision import mlp_autocast
from simppo.agent.symmetry import mirror_augmented, mirror_rows
from simppo.envs.base import Symmetry
from simppo.kernels.gae import bind_gae, compute_gae


def clip_grad_norm(module: nn.Module, max_norm: float) -> torch.Tensor:
    """Clip in place; returns the pre-clip norm as a tensor (no non-finite check: that would sync)."""
    return torch.nn.utils.clip_grad_norm_(module.parameters(), max_norm, error_if_nonfinite=False, foreach=True)


def batch_lr_factor(config: PPOAgentConfig, batch: int) -> float:
    """The actor's learning-rate factor for ``batch`` samples per iteration over all ranks:
    ``sqrt(batch / lr_reference_batch)`` with ``lr_batch_scaling=sqrt``, 1 with ``none``."""
    if config.lr_batch_scaling == "none":
        return 1.0
    return math.sqrt(batch / config.lr_reference_batch)


class PPOAlgorithm:
    """Actor-critic PPO for ``num_envs`` envs of widths ``obs_dims`` (``obs``, optional ``critic_obs``) and
    ``num_actions``. ``num_rows``: per-motion exploration (one log-std row per motion row; ``motion_rows [M]`` maps
    an env's motion id to its row), ``None`` for one shared log-std. ``precision``: the MLPs' (``fp32``/``bf16``).
    ``modules``: ``(actor, critic)`` to train instead of simppo's MLPs (see :class:`~simppo.agent.models.PPOModel`;
    either may be ``None``)."""

    def __init__(self, fabric, config: PPOAgentConfig, obs_dims: dict[str, int], num_actions: int, num_envs: int,
                 precision: str = "fp32", num_rows: int | None = None, motion_rows: torch.Tensor | None = None,
                 modules: tuple[nn.Module | None, nn.Module | None] = (None, None), symmetry: Symmetry | None = None):
        self.fabric, self.config, self.precision = fabric, config, precision
        if config.uses_symmetry and symmetry is None:
            what = f"symmetry_coef={config.symmetry_coef}" if config.symmetry_coef > 0 else "symmetry_augment=true"
            raise ValueError(f"agent.{what} needs the env's left-right mirror (env.symmetry(); a robot config with "
                             "mirror_pairs), and there is none")
        self.symmetry = None if symmetry is None else symmetry.to(fabric.device)
        self.given_modules = modules
        self.device = fabric.device
        self.world_size = D.world_size(fabric)
        self.obs_dims, self.num_actions, self.num_envs = obs_dims, num_actions, num_envs
        self.num_steps = config.num_steps
        self.num_rows, self.per_motion = num_rows, num_rows is not None
        if self.per_motion:  # samples and terminations per row since the last exploration_metrics()
            self.motion_rows = motion_rows.to(self.device)
            self.row_steps = torch.zeros(num_rows, device=self.device)
            self.row_terms = torch.zeros(num_rows, device=self.device)
        self.model = self.create_model()
        capturable, why = graph_update_available(self.device, self.world_size, precision)
        self.capture_update = config.graph_update and capturable
        if config.graph_update and not capturable:
            warnings.warn(f"agent.graph_update: minibatch steps run eagerly on static buffers because {why}",
                          stacklevel=2)
        self._minibatch_step: MinibatchStep | None = None  # graph_update: built at the first update
        self.actor_optimizer, self.critic_optimizer = self.create_optimizers(self.model)
        self.reward_normalizer = RewardNormalizer(num_envs, config.gamma).to(self.device)
        if self.world_size > 1:
            for stats in self.running_stats():
                stats.track_pending()
        self.experience_buffer = ExperienceBuffer(self.num_steps, num_envs, self.device)
        self.register_algorithm_experience_buffer_keys()
        b = self.experience_buffer
        self._gae = bind_gae(b["dones"], b["values"], b["rewards"], b["next_values"], b["advantages"], b["returns"])
        self._zero = torch.zeros((), device=self.device)  # the extra actor loss when there is none
        # worlds the env flagged unstable in the last step: kept out of the next obs-normalizer update
        self._obs_valid = torch.ones(num_envs, dtype=torch.bool, device=self.device)

    # ----------------------------------------------------------------- building
    def create_model(self) -> PPOModel:
        c, dims = self.config, self.obs_dims
        model = PPOModel(dims["obs"], dims.get("critic_obs", dims["obs"]), self.num_actions, c.actor, c.critic,
                         obs_clip=c.obs_clip, normalize_obs=c.normalize_obs, num_rows=self.num_rows,
                         actor=self.given_modules[0], critic=self.given_modules[1])
        if c.compile:
            model.compile_mlps()
        return model.to(self.device)

    def create_optimizers(self, model: PPOModel):
        """Fused Adam for actor and critic; learning rates are device tensors (no host sync). The actor's learnable
        log-std is its own group at ``log_std_lr = actor_lr * log_std_lr_scale`` (× the rows' factor). The actor's rate
        starts at ``config.actor_lr`` × :func:`batch_lr_factor` of the iteration's batch over all ranks."""
        c = self.config
        batch = self.num_envs * self.num_steps * self.world_size
        self.actor_lr = torch.tensor(c.actor_lr * batch_lr_factor(c, batch), device=self.device)
        self.critic_lr = torch.tensor(c.critic_lr, device=self.device)
        self.log_std_lr_scale = c.log_std_lr_scale
        self._row_lr_factor = torch.ones((), device=self.device)
        self.log_std_lr = self.actor_lr * self.log_std_lr_scale
        fused = {"fused": True} if self.device.type in ("cpu", "cuda") else {}
        if self.capture_update:  # the step count stays on the device, so the graph can replay Adam's update
            fused["capturable"] = True
        actor_opt = torch.optim.Adam(self.actor_param_groups(model.actor), lr=self.actor_lr, **fused)
        critic_opt = torch.optim.Adam(model.critic.parameters(), lr=self.critic_lr, **fused)
        # Fabric wraps copies of the handles; self.model keeps the plain modules for clean state dicts.
        self.actor, actor_opt = self.fabric.setup(model.actor, actor_opt)
        self.critic, critic_opt = self.fabric.setup(model.critic, critic_opt)
        return actor_opt, critic_opt

    def actor_param_groups(self, actor: nn.Module) -> list[dict]:
        """``log_std`` (its own rate) then the rest, in ``actor.parameters()`` order (the optimizer's state indices
        are the parameters' positions: per-motion checkpoint growth relies on it)."""
        params = list(actor.named_parameters())
        groups = [{"name": "log_std", "params": [p for n, p in params if n == "log_std"], "lr": self.log_std_lr},
                  {"name": "actor", "params": [p for n, p in params if n != "log_std"], "lr": self.actor_lr}]
        groups = [g for g in groups if g["params"]]
        if [id(p) for g in groups for p in g["params"]] != [id(p) for _, p in params]:
            raise RuntimeError("the actor's log_std must be registered before its other parameters")
        return groups

    def register_algorithm_experience_buffer_keys(self) -> None:
        b, dims, a = self.experience_buffer, self.obs_dims, self.num_actions
        b.register_key("obs", (dims["obs"],))
        b.register_key("critic_obs", (dims.get("critic_obs", dims["obs"]),))
        for key in ("actions", "mean", "log_std"):
            b.register_key(key, (a,))
        for key in ("logp", "values", "next_values", "rewards", "dones", "terminated", "advantages", "returns"):
            b.register_key(key)
        if self.per_motion:
            b.register_key("rows", dtype=torch.int64)  # each sample's log-std row

    actor_module = property(lambda self: self.model.actor, doc="The actor, unwrapped from Fabric / DDP.")
    critic_module = property(lambda self: self.model.critic, doc="The critic, unwrapped from Fabric / DDP.")

    def obs_normalizers(self) -> tuple:
        """The actor's and critic's observation normalisers (``None, None`` without normalisation)."""
        m = self.model
        return (m.obs_norm, m.critic_obs_norm) if m.normalize_obs else (None, None)

    def running_stats(self) -> list:
        """The running statistics merged across ranks: actor and critic observations, discounted returns."""
        return [self.model.obs_norm, self.model.critic_obs_norm, self.reward_normalizer.return_rms]

    def sync_normalizers(self) -> None:
        if self.world_size > 1:
            sync_running_stats(self.running_stats())

    def mlp_autocast(self) -> torch.autocast:
        """bf16 autocast of the MLPs (rollout and update alike) when :attr:`precision` is ``bf16``."""
        return mlp_autocast(self.device, self.precision)

    def rows_of(self, motion_ids: torch.Tensor | None) -> torch.Tensor | None:
        """Log-std row ``[N]`` (int64) of each env's motion; ``None`` with shared exploration."""
        return torch.index_select(self.motion_rows, 0, motion_ids) if self.per_motion else None

    # ------------------------------------------------------------------ rollout
    @torch.no_grad()
    def update_obs_normalizers(self, obs: dict[str, torch.Tensor]) -> None:
        """Merge ``obs`` into the running statistics, leaving out envs flagged unstable in the last step and
        non-finite rows."""
        if not self.model.normalize_obs:
            return
        actor_obs, critic_obs = obs["obs"], obs.get("critic_obs", obs["obs"])
        valid = self._obs_valid & torch.isfinite(actor_obs).all(-1) & torch.isfinite(critic_obs).all(-1)
        self.model.obs_norm.update(actor_obs, mask=valid)
        self.model.critic_obs_norm.update(critic_obs, mask=valid)

    @torch.no_grad()
    def act(self, obs: dict[str, torch.Tensor], rows: torch.Tensor | None, step: int) -> torch.Tensor:
        """Sample actions ``[N, A]`` from the Gaussian policy for ``obs`` and record slice ``step`` of the buffer."""
        b = self.experience_buffer
        self.update_obs_normalizers(obs)
        obs, critic_obs = self.model.normalize(obs)
        with self.mlp_autocast():  # the precision the update differentiates (the PPO ratio starts at 1)
            mean, log_std = self.actor(obs, rows)
            values = self.critic(critic_obs)
        mean, values = mean.float(), values.float()
        actions = mean + torch.exp(log_std) * torch.randn_like(mean)
        if rows is not None:
            b.update_data("rows", step, rows)
        for key, value in (("obs", obs), ("critic_obs", critic_obs), ("actions", actions), ("mean", mean),
                           ("log_std", log_std), ("logp", L.gaussian_log_prob(actions, mean, log_std)),
                           ("values", values)):
            b.update_data(key, step, value)
        return actions

    @torch.no_grad()
    def process_env_step(self, step: int, next_obs: dict, rewards: torch.Tensor, terminated: torch.Tensor,
                         truncated: torch.Tensor, extras: dict, rows: torch.Tensor | None = None) -> torch.Tensor:
        """Record the env's answer to slice ``step``; returns the float dones ``[N]``. Next values bootstrap from
        the pre-reset observation (``extras["terminal_obs"]``) for time-outs, zero for terminations. Worlds in
        ``extras["unstable"]`` and non-finite rewards get a zero reward and stay out of the normalizers."""
        b = self.experience_buffer
        if rows is not None:
            self.row_steps.index_add_(0, rows, torch.ones_like(rewards))
            self.row_terms.index_add_(0, rows, terminated.float())
        terminal_critic_obs = self.model.normalize_critic(extras.get("terminal_obs", next_obs))
        with self.mlp_autocast():
            terminal_values = self.critic(terminal_critic_obs).float()
        b.update_data("next_values", step, torch.where(terminated, 0.0, terminal_values))  # NaN * 0 would be NaN
        fdones = (terminated | truncated).float()
        valid = torch.isfinite(rewards)
        unstable = extras.get("unstable")
        if unstable is not None:
            valid &= ~unstable
            torch.logical_not(unstable, out=self._obs_valid)
        rewards = torch.where(valid, rewards, 0.0)
        if self.config.normalize_rewards:
            rewards = self.reward_normalizer(rewards, fdones, valid)
        b.update_data("rewards", step, rewards)
        b.update_data("dones", step, fdones)
        b.update_data("terminated", step, terminated.float())
        return fdones

    def compute_returns(self) -> None:
        """GAE advantages and returns, in place in the buffer (one Warp launch)."""
        compute_gae(self._gae, self.config.gamma, self.config.tau)

    # ------------------------------------------------------------------- update
    def update(self) -> dict[str, torch.Tensor]:
        """``num_mini_epochs`` passes of ``num_minibatches`` actor + critic steps over the flattened buffer.
        Returns device metrics averaged over the steps, ``explained_variance`` and ``actor/mini_epochs`` (fewer
        than ``num_mini_epochs`` when the epoch's mean KL passed ``target_kl``: the one host read per epoch)."""
        c = self.config
        self.model.train()
        data = self.experience_buffer.flat()
        total = self.num_steps * self.num_envs
        mb_size = total // c.num_minibatches
        zero = torch.zeros((), device=self.device)
        sums: dict[str, torch.Tensor] = {}
        num_updates = 0
        if self.per_motion:  # the rows' rate from this iteration's samples per row (every rank's)
            counts = self.row_steps if self.world_size == 1 else D.all_reduce_(self.row_steps.clone())
            self._row_lr_factor.copy_(X.row_lr_factor(counts))
            self.sync_log_std_lr()
        for _ in range(c.num_mini_epochs):
            epoch_kl = torch.zeros((), device=self.device)
            perm = self.minibatch_permutation(total)
            for i in range(c.num_minibatches):
                idx = perm[i * mb_size:(i + 1) * mb_size]
                if c.graph_update:
                    step = self.minibatch_step(data, mb_size)
                    step.fill(data, idx)
                    logs = step.run()
                else:
                    logs = self.perform_optimization_step({k: v.index_select(0, idx) for k, v in data.items()}, i)
                for k, v in logs.items():
                    sums[k] = sums.get(k, zero) + v.detach()
                epoch_kl += logs["actor/kl"]
                num_updates += 1
            if c.target_kl is not None and (epoch_kl / c.num_minibatches).item() > c.target_kl:
                break
        metrics = {k: v / num_updates for k, v in sums.items()}
        metrics["actor/mini_epochs"] = zero + num_updates / c.num_minibatches
        if self.per_motion:
            metrics["exploration/log_std_lr"] = self.log_std_lr.clone()
        if c.lr_schedule == "adaptive_iteration":  # the iteration's mean KL against the rollout policy, once
            self.adapt_actor_lr(metrics["actor/kl"])
        metrics["explained_variance"] = L.explained_variance(data["values"], data["returns"])
        return metrics

    def minibatch_step(self, data: dict[str, torch.Tensor], mb_size: int) -> MinibatchStep:
        """``agent.graph_update``: the minibatch step on static buffers (captured as a CUDA graph where it can be)."""
        if self._minibatch_step is None:
            self._minibatch_step = MinibatchStep(self.perform_optimization_step, data, mb_size,
                                                 self.update_state_tensors, capture=self.capture_update)
        return self._minibatch_step

    def update_state_tensors(self) -> list[torch.Tensor]:
        """Every tensor a minibatch step changes besides its outputs: parameters, optimizer state, learning rates."""
        tensors = list(self.model.actor.parameters()) + list(self.model.critic.parameters())
        for opt in (self.actor_optimizer, self.critic_optimizer):
            tensors += [v for state in opt.state.values() for v in state.values() if torch.is_tensor(v)]
        return tensors + [self.actor_lr, self.critic_lr, self.log_std_lr]

    def minibatch_permutation(self, total: int) -> torch.Tensor:
        """The sample order of one epoch (a device ``randperm``; minibatch ``i`` is slice ``i``)."""
        return torch.randperm(total, device=self.device)

    def perform_optimization_step(self, batch_dict: dict[str, torch.Tensor], batch_idx: int = 0
                                  ) -> dict[str, torch.Tensor]:
        """One actor and one critic step on a minibatch, its advantages normalised with the mean and std of every
        rank's minibatch. ``batch_idx``: the seed's signature."""
        if self.config.normalize_advantages:
            adv = batch_dict["advantages"]
            mean, std = (adv.mean(), adv.std()) if self.world_size == 1 else D.mean_std_all_ranks(adv)
            batch_dict["advantages"] = (adv - mean) / (std + 1e-8)
        if self.config.symmetry_augment:
            batch_dict = mirror_augmented(batch_dict, self.symmetry, *self.obs_normalizers())
        _, actor_logs = self.actor_step(batch_dict)
        _, critic_logs = self.critic_step(batch_dict)
        return {**actor_logs, **critic_logs, "actor/lr": self.actor_lr}

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
        self.actor_optimizer.zero_grad(set_to_none=not self.capture_update)  # a graph writes the same tensors
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
        vloss = L.value_loss(values.float(), batch_dict["values"], batch_dict["returns"], c.clip_value_loss,
                             c.value_clip)
        loss = c.critic_coef * vloss.mean()
        self.critic_optimizer.zero_grad(set_to_none=not self.capture_update)
        self.fabric.backward(loss)
        grad_norm = clip_grad_norm(self.critic_module, c.max_grad_norm)
        self.critic_optimizer.step()
        return loss, {"critic/loss": loss.detach(), "critic/grad_norm": grad_norm}

    def calculate_extra_actor_loss(self, batch_td: dict[str, torch.Tensor]):
        """L2C2 smoothness (``lambda_l2c2`` > 0): policy-mean change under observation noise; mirror symmetry
        (``symmetry_coef`` > 0): the policy mean on the mirrored observation against the mirror image of the
        policy mean (that target held fixed, as rsl_rl's mirror loss)."""
        c = self.config
        loss, logs, obs = self._zero, {}, batch_td["obs"]
        if c.lambda_l2c2 > 0.0:
            with self.mlp_autocast():
                noisy_mean, _ = self.actor(obs + c.l2c2_obs_noise * torch.randn_like(obs), batch_td.get("rows"))
            l2c2 = L.l2c2_loss(batch_td["mean_action"], noisy_mean.float()).mean()
            loss, logs["actor/l2c2"] = loss + c.lambda_l2c2 * l2c2, l2c2.detach()
        if c.symmetry_coef > 0.0:
            s = self.symmetry
            mirrored_obs = mirror_rows(obs, s.obs_index, s.obs_sign, self.obs_normalizers()[0])
            with self.mlp_autocast():
                mirrored_mean, _ = self.actor(mirrored_obs, batch_td.get("rows"))
            target = Symmetry.apply(batch_td["mean_action"].detach(), s.action_index, s.action_sign)
            symmetry = L.symmetry_loss(mirrored_mean.float(), target).mean()
            loss, logs["actor/symmetry"] = loss + c.symmetry_coef * symmetry, symmetry.detach()
        return loss, logs

    def adapt_actor_lr(self, kl: torch.Tensor) -> None:
        """KL-adaptive schedule on the device: ÷1.5 above 2x ``desired_kl``, x1.5 below half, clamped."""
        c = self.config
        factor = torch.where(kl > 2.0 * c.desired_kl, 1.0 / 1.5, torch.where(kl < 0.5 * c.desired_kl, 1.5, 1.0))
        self.actor_lr.copy_((self.actor_lr * factor).clamp(c.min_lr, c.max_lr))
        self.sync_log_std_lr()

    def sync_log_std_lr(self) -> None:
        """``log_std_lr = actor_lr * log_std_lr_scale * row factor`` in place (the optimizer group holds it)."""
        self.log_std_lr.copy_(self.actor_lr * self.log_std_lr_scale * self._row_lr_factor)

    def exploration_metrics(self) -> dict[str, torch.Tensor]:
        """Per-motion exploration: the σ spread across motions over the samples since the last call (every
        rank's); resets the row counters. Empty with shared exploration."""
        if not self.per_motion:
            return {}
        if self.world_size > 1:
            counts = D.all_reduce_(torch.stack([self.row_steps, self.row_terms]))
            self.row_steps.copy_(counts[0])
            self.row_terms.copy_(counts[1])
        out = X.sigma_metrics(self.model.actor.effective_log_std(), self.row_steps, self.row_terms)
        self.row_steps.zero_()
        self.row_terms.zero_()
        return out

    # --------------------------------------------------------------- state
    def state_dict(self) -> dict:
        return {"model": self.model.state_dict(), "actor_optimizer": self.actor_optimizer.state_dict(),
                "critic_optimizer": self.critic_optimizer.state_dict()}

    def load_state_dict(self, state: dict, load_training_state: bool = True) -> None:
        """The weights; to resume also the optimizers (their rates back into the device tensors the schedule
        updates in place) and the running returns."""
        self.model.load_state_dict(state["model"])
        if not load_training_state:
            return
        self.actor_optimizer.load_state_dict(state["actor_optimizer"])
        self.critic_optimizer.load_state_dict(state["critic_optimizer"])
        actor_group = next(g for g in self.actor_optimizer.param_groups if g.get("name") != "log_std")
        self.actor_lr.copy_(torch.as_tensor(actor_group["lr"]))
        self.critic_lr.copy_(torch.as_tensor(self.critic_optimizer.param_groups[0]["lr"]))
        self.sync_log_std_lr()
        for group in self.actor_optimizer.param_groups:
            group["lr"] = self.log_std_lr if group.get("name") == "log_std" else self.actor_lr
        for group in self.critic_optimizer.param_groups:
            group["lr"] = self.critic_lr
        self.reward_normalizer.load_state_dict(state["running_reward_norm"])
