"""Device-resident PPO (ProtoMotions-style API): rollout, in-place GAE, minibatch epochs, checkpoints."""

import time
from dataclasses import asdict
from pathlib import Path

import torch
from torch import nn

from simppo.agent import losses as L
from simppo.agent.buffer import ExperienceBuffer
from simppo.agent.checkpoint import CHECKPOINT_FORMAT, load_checkpoint, save_checkpoint
from simppo.agent.config import PPOAgentConfig
from simppo.agent.models import PPOModel
from simppo.agent.normalizers import RewardNormalizer
from simppo.envs.base import VecEnv
from simppo.kernels.gae import launch_gae
from simppo.utils.logger import NullLogger


def clip_grad_norm(module: nn.Module, max_norm: float) -> torch.Tensor:
    """Clip in place; returns the pre-clip norm as a tensor (no non-finite check: that would sync)."""
    return torch.nn.utils.clip_grad_norm_(module.parameters(), max_norm, error_if_nonfinite=False, foreach=True)


class PPO:
    """PPO on a :class:`~simppo.envs.base.VecEnv`. ``PPO(fabric, env, config).setup(); .train()``."""

    def __init__(self, fabric, env: VecEnv, config: PPOAgentConfig, root_dir: str | Path | None = None,
                 max_epochs: int = 1000, logger=None, progress_bar: bool = False):
        self.fabric = fabric
        self.env = env
        self.config = config
        self.root_dir = Path(root_dir) if root_dir is not None else None
        self.max_epochs = max_epochs
        self.logger = logger or NullLogger()
        self.progress_bar = progress_bar
        self.device = fabric.device
        self.num_envs = env.num_envs
        self.num_steps = config.num_steps
        self.tau = config.tau
        self.e_clip = config.e_clip
        self.epoch = 0
        self.step_count = 0
        self.best_evaluated_score: float | None = None
        self.run_start_time = time.time()
        self._stop_requested = False
        self.motion_index = None

    # ----------------------------------------------------------------- setup
    @property
    def has_critic(self) -> bool:
        return True

    def setup(self) -> None:
        model = self.create_model()
        self.model = model
        self.actor_optimizer, self.critic_optimizer = self.create_optimizers(model)
        self.reward_normalizer = RewardNormalizer(self.num_envs, self.config.gamma).to(self.device)
        self.experience_buffer = ExperienceBuffer(self.num_steps, self.num_envs, self.device)
        self.register_algorithm_experience_buffer_keys()
        self._zeros = torch.zeros((), device=self.device)
        self._ep_count = torch.zeros((), device=self.device)
        self._ep_sums: dict[str, torch.Tensor] = {}  # per episode-stat key, summed over finished episodes
        self.current_obs = self.add_agent_info_to_obs(self.env.reset())

    def create_model(self) -> PPOModel:
        c = self.config
        dims = self.env.obs_dims
        model = PPOModel(dims["obs"], dims.get("critic_obs", dims["obs"]), self.env.num_actions,
                         c.actor, c.critic, obs_clip=c.obs_clip)
        return model.to(self.device)

    def create_optimizers(self, model: PPOModel):
        """Separate fused Adam for actor and critic; learning rates are device tensors (no host sync)."""
        c = self.config
        self.actor_lr = torch.tensor(c.actor_lr, device=self.device)
        self.critic_lr = torch.tensor(c.critic_lr, device=self.device)
        fused = {"fused": True} if self.device.type in ("cpu", "cuda") else {}
        actor_opt = torch.optim.Adam(model.actor.parameters(), lr=self.actor_lr, **fused)
        critic_opt = torch.optim.Adam(model.critic.parameters(), lr=self.critic_lr, **fused)
        # Fabric wraps copies of the handles; self.model keeps the plain modules for clean state dicts.
        self.actor, actor_opt = self.fabric.setup(model.actor, actor_opt)
        self.critic, critic_opt = self.fabric.setup(model.critic, critic_opt)
        return actor_opt, critic_opt

    @property
    def actor_module(self) -> nn.Module:
        return self.model.actor

    @property
    def critic_module(self) -> nn.Module:
        return self.model.critic

    def register_algorithm_experience_buffer_keys(self) -> None:
        b, dims, a = self.experience_buffer, self.env.obs_dims, self.env.num_actions
        b.register_key("obs", (dims["obs"],))
        b.register_key("critic_obs", (dims.get("critic_obs", dims["obs"]),))
        for key in ("actions", "mean", "log_std"):
            b.register_key(key, (a,))
        for key in ("logp", "values", "next_values", "rewards", "dones", "terminated", "advantages",
                    "returns"):
            b.register_key(key)

    def add_agent_info_to_obs(self, obs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Hook for agent-side observation entries (stateless); PPO adds none."""
        return obs

    # --------------------------------------------------------------- rollout
    @torch.no_grad()
    def normalized_obs(self, obs: dict[str, torch.Tensor], update: bool) -> tuple[torch.Tensor, torch.Tensor]:
        actor_obs, critic_obs = obs["obs"], obs.get("critic_obs", obs["obs"])
        if not self.config.normalize_obs:
            return actor_obs, critic_obs
        if update:
            self.model.obs_norm.update(actor_obs)
            self.model.critic_obs_norm.update(critic_obs)
        return self.model.obs_norm(actor_obs), self.model.critic_obs_norm(critic_obs)

    @torch.no_grad()
    def rollout_step(self, step: int) -> None:
        """Act, step the env and record one ``[num_envs]`` slice of the buffer; no host sync."""
        b = self.experience_buffer
        obs, critic_obs = self.normalized_obs(self.current_obs, update=True)
        mean, log_std = self.actor(obs)
        actions = mean + torch.exp(log_std) * torch.randn_like(mean)
        b.update_data("obs", step, obs)
        b.update_data("critic_obs", step, critic_obs)
        b.update_data("actions", step, actions)
        b.update_data("mean", step, mean)
        b.update_data("log_std", step, log_std)
        b.update_data("logp", step, L.gaussian_log_prob(actions, mean, log_std))
        b.update_data("values", step, self.critic(critic_obs))
        next_obs, rewards, terminated, truncated, extras = self.env.step(actions)
        dones = terminated | truncated
        self.record_rollout_step(next_obs, actions, rewards, dones, terminated, None, extras, step)
        self.current_obs = self.add_agent_info_to_obs(next_obs)

    @torch.no_grad()
    def record_rollout_step(self, next_obs_td, actions, rewards, dones, terminated, done_indices, extras, step):
        """Next-value bootstrap from the pre-reset observation: kept for time-outs, zeroed for terminations."""
        b = self.experience_buffer
        terminal = extras.get("terminal_obs", next_obs_td)
        _, terminal_critic_obs = self.normalized_obs(terminal, update=False)
        next_values = self.critic(terminal_critic_obs) * (~terminated).float()
        b.update_data("next_values", step, next_values)
        fdones = dones.float()
        if self.config.normalize_rewards:
            rewards = self.reward_normalizer(rewards, fdones)
        b.update_data("rewards", step, rewards)
        b.update_data("dones", step, fdones)
        b.update_data("terminated", step, terminated.float())
        for key, value in extras.get("episode", {}).items():
            if key not in self._ep_sums:
                self._ep_sums[key] = torch.zeros((), device=self.device)
            self._ep_sums[key] += (value * fdones).sum()
        self._ep_count += fdones.sum()
        self.step_count += self.num_envs

    # ---------------------------------------------------------- optimization
    def compute_advantages(self) -> None:
        b = self.experience_buffer
        launch_gae(b["dones"], b["values"], b["rewards"], b["next_values"], self.config.gamma, self.tau,
                   b["advantages"], b["returns"])

    def optimize_model(self) -> dict[str, torch.Tensor]:
        """Minibatch epochs over the flattened buffer; one device ``randperm`` per epoch."""
        c = self.config
        data = self.experience_buffer.flat()
        total = self.num_steps * self.num_envs
        mb_size = total // c.num_minibatches
        self._logs: dict[str, torch.Tensor] = {}
        num_updates = 0
        for _ in range(c.num_mini_epochs):
            epoch_kl = torch.zeros((), device=self.device)
            perm = torch.randperm(total, device=self.device)
            for batch_idx in range(c.num_minibatches):
                idx = perm[batch_idx * mb_size:(batch_idx + 1) * mb_size]
                batch = {k: v[idx] for k, v in data.items()}
                logs = self.perform_optimization_step(batch, batch_idx)
                epoch_kl += logs["actor/kl"]
                num_updates += 1
            if c.target_kl is not None and (epoch_kl / c.num_minibatches).item() > c.target_kl:
                break  # the one host sync per epoch
        logs = {k: v / num_updates for k, v in self._logs.items()}
        logs["explained_variance"] = L.explained_variance(data["values"], data["returns"])
        return logs

    def perform_optimization_step(self, batch_dict: dict[str, torch.Tensor], batch_idx: int):
        """One actor and one critic update on a minibatch; metrics stay on the device."""
        c = self.config
        if c.normalize_advantages:
            adv = batch_dict["advantages"]
            batch_dict["advantages"] = (adv - adv.mean()) / (adv.std() + 1e-8)
        actor_loss, logs = self.actor_step(batch_dict)
        self.actor_optimizer.zero_grad(set_to_none=True)
        self.fabric.backward(actor_loss)
        logs["actor/grad_norm"] = clip_grad_norm(self.model.actor, c.max_grad_norm)
        if c.lr_schedule == "adaptive":
            kl = logs["actor/kl"]
            factor = torch.where(kl > 2.0 * c.desired_kl, 1.0 / 1.5, torch.where(kl < 0.5 * c.desired_kl, 1.5, 1.0))
            self.actor_lr.copy_((self.actor_lr * factor).clamp(c.min_lr, c.max_lr))
        self.actor_optimizer.step()
        critic_loss, critic_logs = self.critic_step(batch_dict)
        self.critic_optimizer.zero_grad(set_to_none=True)
        self.fabric.backward(critic_loss)
        critic_logs["critic/grad_norm"] = clip_grad_norm(self.model.critic, c.max_grad_norm)
        self.critic_optimizer.step()
        logs.update(critic_logs)
        logs["actor/lr"] = self.actor_lr
        for k, v in logs.items():
            self._logs[k] = self._logs.get(k, self._zeros) + v.detach()
        return logs

    def actor_step(self, batch_dict: dict[str, torch.Tensor]):
        c = self.config
        mean, log_std = self.actor(batch_dict["obs"])
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
        logs.update({"actor/loss": loss.detach(), "actor/surrogate": surr.mean().detach(),
                     "actor/clip_frac": clipped.mean(), "actor/entropy": entropy.mean().detach(),
                     "actor/bounds": bounds.mean().detach(), "actor/kl": kl})
        return loss, logs

    def critic_step(self, batch_dict: dict[str, torch.Tensor]):
        c = self.config
        values = self.critic(batch_dict["critic_obs"])
        vloss = L.value_loss(values, batch_dict["values"], batch_dict["returns"], c.clip_value_loss, c.value_clip)
        loss = c.critic_coef * vloss.mean()
        return loss, {"critic/loss": loss.detach()}

    def calculate_extra_actor_loss(self, batch_td: dict[str, torch.Tensor]):
        """L2C2 smoothness (``lambda_l2c2`` > 0): policy-mean change under observation noise."""
        c = self.config
        if c.lambda_l2c2 <= 0.0:
            return self._zeros, {}
        obs = batch_td["obs"]
        noisy_mean, _ = self.actor(obs + c.l2c2_obs_noise * torch.randn_like(obs))
        l2c2 = L.l2c2_loss(batch_td["mean_action"], noisy_mean).mean()
        return c.lambda_l2c2 * l2c2, {"actor/l2c2": l2c2.detach()}

    # ---------------------------------------------------------------- train
    def request_stop(self) -> None:
        self._stop_requested = True

    def train_iteration(self) -> dict[str, float]:
        """Collect ``num_steps`` steps, compute GAE in place, optimise; one host gather for logs."""
        t0 = time.perf_counter()
        self.model.eval()
        for step in range(self.num_steps):
            self.rollout_step(step)
        self.compute_advantages()
        t1 = time.perf_counter()
        self.model.train()
        logs = self.optimize_model()
        names = [*logs, *(f"episode/{k}" for k in self._ep_sums), "episode_count"]
        values = torch.stack([*(v.float() for v in logs.values()), *self._ep_sums.values(), self._ep_count])
        metrics = dict(zip(names, values.tolist(), strict=True))  # the one host gather per iteration
        count = metrics.pop("episode_count")
        for k in self._ep_sums:
            value = metrics.pop(f"episode/{k}")
            if count > 0:
                metrics[f"episode/{k}"] = value / count
            self._ep_sums[k].zero_()
        self._ep_count.zero_()
        elapsed = time.perf_counter() - t0
        metrics["perf/steps_per_s"] = self.num_steps * self.num_envs / elapsed
        metrics["perf/rollout_s"] = t1 - t0
        metrics["perf/update_s"] = elapsed - (t1 - t0)
        self.epoch += 1
        return metrics

    def train(self) -> None:
        from tqdm import tqdm

        c = self.config
        bar = tqdm(total=self.max_epochs, initial=self.epoch, disable=not self.progress_bar,
                   dynamic_ncols=True, unit="it")
        last_reward = None
        while self.epoch < self.max_epochs and not self._stop_requested:
            metrics = self.train_iteration()
            self.logger.log(metrics, step=self.step_count)
            last_reward = metrics.get("episode/reward", last_reward)
            bar.update(1)
            bar.set_postfix({"steps/s": f"{metrics['perf/steps_per_s']:.0f}",
                             "reward": "n/a" if last_reward is None else f"{last_reward:.3f}"})
            new_high = last_reward is not None and (self.best_evaluated_score is None
                                                    or last_reward > self.best_evaluated_score)
            if new_high:
                self.best_evaluated_score = last_reward
            if self.root_dir is not None:
                if c.save_epoch_every > 0 and self.epoch % c.save_epoch_every == 0:
                    self.save(f"epoch_{self.epoch}.ckpt")
                if self.epoch % max(c.save_last_every, 1) == 0 or new_high:
                    self.save("last.ckpt", new_high_score=new_high)
        bar.close()
        if self.root_dir is not None:
            self.save("last.ckpt")

    # ---------------------------------------------------------- checkpoints
    def get_state_dict(self, state_dict: dict | None = None) -> dict:
        state = {} if state_dict is None else state_dict
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
            "running_reward_norm": self.reward_normalizer.state_dict(),
            "rng": {"torch": torch.get_rng_state(),
                    "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []},
            "env": self.env.state_dict(),
            "config": asdict(self.config),
        })
        return state

    def save(self, checkpoint_name: str = "last.ckpt", new_high_score: bool = False) -> None:
        state = self.get_state_dict()
        save_checkpoint(state, self.root_dir / checkpoint_name)
        if new_high_score:
            save_checkpoint(state, self.root_dir / "score_based.ckpt")

    def load_parameters(self, state_dict: dict, load_training_state: bool = True) -> None:
        """Restore weights; with ``load_training_state`` also optimizers, normalizers, counters, RNG, env."""
        self.model.load_state_dict(state_dict["model"])
        if not load_training_state:
            return
        self.actor_optimizer.load_state_dict(state_dict["actor_optimizer"])
        self.critic_optimizer.load_state_dict(state_dict["critic_optimizer"])
        for opt, lr in ((self.actor_optimizer, self.actor_lr), (self.critic_optimizer, self.critic_lr)):
            lr.copy_(torch.as_tensor(opt.param_groups[0]["lr"]))
            for group in opt.param_groups:
                group["lr"] = lr
        self.reward_normalizer.load_state_dict(state_dict["running_reward_norm"])
        self.epoch = int(state_dict["epoch"])
        self.step_count = int(state_dict["step_count"])
        self.best_evaluated_score = state_dict.get("best_evaluated_score")
        self.run_start_time = state_dict.get("run_start_time", self.run_start_time)
        rng = state_dict["rng"]
        torch.set_rng_state(rng["torch"])
        if rng["cuda"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(rng["cuda"])
        self.env.load_state_dict(state_dict["env"])
        self.current_obs = self.add_agent_info_to_obs(self.env.get_observations())

    def load(self, path: str | Path, load_training_state: bool = True) -> None:
        self.load_parameters(load_checkpoint(path, map_location=self.device), load_training_state)
