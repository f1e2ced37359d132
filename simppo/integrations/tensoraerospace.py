"""TensorAeroSpace's PPO interface on simppo's PPO core, for gymnasium envs (one env or a vector env)::

    from simppo.integrations.tensoraerospace import PPO
    agent = PPO(gymnasium.make("Pendulum-v1"), rollout_len=2048, num_epochs=10)
    stats = agent.train(max_steps=200_000)
    action, mean, log_prob = agent.act(obs, deterministic=True)
    path = agent.save("checkpoints")            # checkpoints/<Mon02_18-04-05>_PPO/
    same = PPO.load(path)                      # or PPO.from_pretrained(local_dir)

The arguments map onto :class:`~simppo.agent.config.PPOAgentConfig` (``rollout_len`` transitions per update across
all envs, ``num_epochs`` passes of ``batch_size`` minibatches, ``clip_pram`` the clip range, ``gae_lambda`` GAE's λ);
the actor is simppo's with a tanh mean and the log-std stretched into ``[actor_log_std_min, actor_log_std_max]``
(``actor.log_std_bounds=tanh``). Actions are in ``[-1, 1]``, scaled to the env's Box bounds by
:class:`~simppo.integrations.gymnasium.WrappedGymEnv`; :meth:`PPO.act` returns them in the env's units.
``auxiliary_coef > 0`` adds a reward-prediction head on the critic's features, trained on each rollout by
:meth:`PPO.auxiliary_task` (a supervised loss beside the PPO update, not a change of it).
"""

from __future__ import annotations

import inspect
import json
import time
from pathlib import Path

import numpy as np
import torch

from simppo.agent.config import ActorCfg, MLPCfg, PPOAgentConfig
from simppo.agent.losses import gaussian_log_prob
from simppo.agent.ppo import PPO as SimppoPPO
from simppo.integrations import require
from simppo.utils.device import fabric_for, resolve_device
from simppo.utils.files import atomic_write, atomic_write_text, staged_directory

require("gymnasium", "gymnasium")
from simppo.integrations.gymnasium import WrappedGymEnv  # noqa: E402

FILES = ("config.json", "actor.pth", "critic.pth", "actor_opt.pth", "critic_opt.pth", "train_state.json",
         "obs_rms.npz", "ret_rms.npz")


class PPO:
    """See the module. ``env``: a gymnasium ``Env`` or ``VectorEnv`` (same-step autoreset), or ``None`` to act
    only (a loaded agent)."""

    def __init__(self, env, gamma: float = 0.99, max_episodes: int = 30, rollout_len: int = 2048,
                 clip_pram: float = 0.2, num_epochs: int = 64, batch_size: int = 64, entropy_coef: float = 0.005,
                 actor_lr: float = 1e-3, critic_lr: float = 5e-3, gae_lambda: float = 0.95, max_grad_norm: float = 0.5,
                 target_kl: float | None = None, normalize_obs: bool = True, normalize_reward: bool = False,
                 actor_hidden_dim: int = 256, critic_hidden_dim: int = 256, actor_log_std_min: float = -20.0,
                 actor_log_std_max: float = 0.0, eval_freq: int = 10, seed: int = 336699, device: str | None = None,
                 log_dir: str | None = None, save_best_model: bool = True, best_model_dir: str | None = None,
                 auxiliary_coef: float = 0.0, _spaces: tuple | None = None):
        frame = inspect.currentframe()
        args = inspect.getargvalues(frame)
        self.config = {k: args.locals[k] for k in args.args if k not in ("self", "env", "_spaces")}
        if rollout_len < 1 or batch_size < 1 or num_epochs < 1:
            raise ValueError("PPO: rollout_len, batch_size and num_epochs must be at least 1")
        self.device = resolve_device(device or "cpu")
        torch.manual_seed(seed)
        self.env = WrappedGymEnv(env, seed=seed, device=self.device) if env is not None else None
        if self.env is None and _spaces is None:
            raise ValueError("PPO: pass a gymnasium env (or use PPO.load to act without one)")
        num_envs = self.env.num_envs if self.env is not None else 1
        obs_dim, num_actions = (self.env.obs_dims["obs"], self.env.num_actions) if self.env else _spaces[:2]
        self.action_low, self.action_high = (self.env._low, self.env._high) if self.env else _spaces[2:]
        num_steps = max(1, rollout_len // num_envs)
        cfg = PPOAgentConfig(
            num_steps=num_steps, num_mini_epochs=num_epochs,
            num_minibatches=max(1, (num_steps * num_envs) // batch_size), gamma=gamma, tau=gae_lambda,
            e_clip=clip_pram, entropy_coef=entropy_coef, max_grad_norm=max_grad_norm, actor_lr=actor_lr,
            critic_lr=critic_lr, lr_batch_scaling="none", target_kl=target_kl, normalize_obs=normalize_obs,
            normalize_rewards=normalize_reward,
            actor=ActorCfg(units=[actor_hidden_dim, actor_hidden_dim], activation="tanh", init_log_std=-0.5,
                           min_log_std=actor_log_std_min, max_log_std=actor_log_std_max, tanh_mean=True,
                           log_std_bounds="tanh"),
            critic=MLPCfg(units=[critic_hidden_dim, critic_hidden_dim], activation="tanh"),
            update_precision="fp32", save_last_every=10**9, save_epoch_every=0)
        self.agent = SimppoPPO(fabric_for(self.device), self.env or _ActOnly(obs_dim, num_actions, self.device), cfg)
        self.agent.setup()
        self.model = self.agent.algorithm.model
        critic_net = self.model.critic.net
        self.aux_head = torch.nn.Linear(critic_net[-1].in_features, 1).to(self.device) if auxiliary_coef > 0 else None
        self.aux_optimizer = (torch.optim.Adam(list(self.aux_head.parameters()) + list(critic_net[:-1].parameters()),
                                               lr=critic_lr) if self.aux_head is not None else None)
        self.episodes, self.steps, self.best_eval = 0, 0, None
        self.episode_rewards: list[float] = []
        self.log_dir = Path(log_dir) if log_dir else None

    # ------------------------------------------------------------------ acting
    @torch.no_grad()
    def act(self, state, deterministic: bool = False):
        """``(action, mean, log_prob)`` for one state ``[obs_dim]`` or a batch ``[B, obs_dim]`` (numpy arrays;
        action and mean in the env's units, log_prob of the sampled pre-scaling action)."""
        x = torch.as_tensor(np.asarray(state, dtype=np.float32), device=self.device)
        single = x.dim() == 1
        x = x.reshape(1, -1) if single else x
        obs = self.model.obs_norm(x) if self.model.normalize_obs else x
        mean, log_std = self.model.actor(obs)
        action = mean if deterministic else mean + log_std.exp() * torch.randn_like(mean)
        log_prob = gaussian_log_prob(action, mean, log_std)
        out = [self._to_env(action), self._to_env(mean), log_prob.cpu().numpy()]
        return tuple(o[0] for o in out) if single else tuple(out)

    def _to_env(self, a: torch.Tensor) -> np.ndarray:
        a = a.cpu().numpy()
        if self.action_low is None:
            return a
        return self.action_low + (np.clip(a, -1.0, 1.0) + 1.0) * 0.5 * (self.action_high - self.action_low)

    # ------------------------------------------------------------------ training
    def train(self, num_episodes: int | None = None, max_steps: int | None = None) -> dict:
        """PPO updates of ``rollout_len`` transitions until ``num_episodes`` episodes have ended (default
        ``max_episodes``) or ``max_steps`` transitions were collected; returns the statistics."""
        if self.env is None:
            raise ValueError("PPO.train: this agent has no env (loaded to act); build it with a gymnasium env")
        target = num_episodes if num_episodes is not None else (None if max_steps else self.config["max_episodes"])
        runner = self.agent.runner
        iteration = 0
        while (target is None or self.episodes < target) and (max_steps is None or self.steps < max_steps):
            before = self.env.episodes_done
            metrics = runner.train_iteration()
            iteration += 1
            self.steps = runner.step_count
            self.episodes += self.env.episodes_done - before
            if "episode/reward" in metrics:
                self.episode_rewards.append(float(metrics["episode/reward"]))
            if self.aux_head is not None:
                b = self.agent.algorithm.experience_buffer
                self.auxiliary_task(b["obs"].reshape(-1, b["obs"].shape[-1]), b["rewards"].reshape(-1))
            if self.config["eval_freq"] > 0 and iteration % self.config["eval_freq"] == 0:
                self._evaluate()
            if self.log_dir is not None:
                self.log_dir.mkdir(parents=True, exist_ok=True)
                with open(self.log_dir / "progress.jsonl", "a") as fh:
                    fh.write(json.dumps({"iteration": iteration, "steps": self.steps, "episodes": self.episodes,
                                         "episode_reward": self.episode_rewards[-1] if self.episode_rewards else None})
                             + "\n")
        return {"episodes": self.episodes, "steps": self.steps, "episode_rewards": list(self.episode_rewards),
                "best_eval_reward": self.best_eval}

    def auxiliary_task(self, states: torch.Tensor, rewards: torch.Tensor) -> float:
        """One step of the auxiliary reward prediction (``auxiliary_coef`` × MSE of the predicted reward) on the
        critic's hidden features of ``states [B, obs_dim]``; returns the loss."""
        if self.aux_head is None:
            raise ValueError("PPO.auxiliary_task: the agent was built with auxiliary_coef=0 (no auxiliary head)")
        obs = self.model.obs_norm(states) if self.model.normalize_obs else states
        pred = self.aux_head(self.model.critic.net[:-1](obs)).squeeze(-1)
        loss = self.config["auxiliary_coef"] * torch.nn.functional.mse_loss(pred, rewards.to(pred.dtype))
        self.aux_optimizer.zero_grad()
        loss.backward()
        self.aux_optimizer.step()
        return float(loss.detach())

    auxillary_task = auxiliary_task  # TensorAeroSpace's spelling

    def _evaluate(self) -> float:
        """One deterministic episode on a copy of the first env's spec; saves the best model when asked."""
        import gymnasium as gym

        spec = self.env.gym_env.envs[0].spec if hasattr(self.env.gym_env, "envs") else None
        if spec is None:
            return float("nan")
        env = gym.make(spec)
        obs, _ = env.reset(seed=self.config["seed"])
        total, done = 0.0, False
        while not done:
            action, _, _ = self.act(obs, deterministic=True)
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
        env.close()
        if self.best_eval is None or total > self.best_eval:
            self.best_eval = total
            where = self.config["best_model_dir"] or (self.log_dir / "best" if self.log_dir is not None else None)
            if self.config["save_best_model"] and where is not None:  # nowhere given: nothing is written
                self.save(where)
        return total

    # ------------------------------------------------------------------ files
    def save(self, path) -> Path:
        """Write ``<path>/<%b%d_%H-%M-%S>_PPO/`` (config, weights, optimizers, normalizer statistics, counters;
        tensors and plain types only) and return it. The folder is written aside and moved into place complete; a
        second save within the same second gets ``_2``, ``_3``, ... rather than replacing the first."""
        base = Path(path) / f"{time.strftime('%b%d_%H-%M-%S')}_PPO"
        out, k = base, 1
        while out.exists():
            k += 1
            out = base.with_name(f"{base.name}_{k}")
        alg = self.agent.algorithm
        spaces = {"obs_dim": alg.obs_dims["obs"], "num_actions": alg.num_actions,
                  "action_low": None if self.action_low is None else np.asarray(self.action_low).tolist(),
                  "action_high": None if self.action_high is None else np.asarray(self.action_high).tolist()}
        states = {"actor.pth": self.model.actor.state_dict(), "critic.pth": self.model.critic.state_dict(),
                  "actor_opt.pth": alg.actor_optimizer.state_dict(),
                  "critic_opt.pth": alg.critic_optimizer.state_dict()}
        with staged_directory(out, may_replace=False) as tmp:
            atomic_write_text(tmp / "config.json", json.dumps({**self.config, "spaces": spaces}, indent=2))
            for name, state in states.items():
                atomic_write(tmp / name, lambda fh, state=state: torch.save(state, fh))
            atomic_write_text(tmp / "train_state.json", json.dumps({"episodes": self.episodes, "steps": self.steps,
                                                                   "best_eval_reward": self.best_eval}))
            for name, rms in (("obs_rms.npz", self.model.obs_norm),
                              ("ret_rms.npz", alg.reward_normalizer.return_rms)):
                arrays = {k: v.detach().cpu().numpy() for k, v in rms.state_dict().items()}
                atomic_write(tmp / name, lambda fh, arrays=arrays: np.savez(fh, **arrays))
        return out

    @classmethod
    def load(cls, path, env=None) -> PPO:
        """The agent saved in ``path`` (a directory :meth:`save` wrote); with ``env`` it can train on."""
        path = Path(path)
        missing = [f for f in FILES if not (path / f).is_file()]
        if missing:
            raise FileNotFoundError(f"{path}: not a saved PPO agent (missing {', '.join(missing)})")
        config = json.loads((path / "config.json").read_text())
        spaces = config.pop("spaces")
        low = None if spaces["action_low"] is None else np.asarray(spaces["action_low"], np.float32)
        high = None if spaces["action_high"] is None else np.asarray(spaces["action_high"], np.float32)
        agent = cls(env, **config, _spaces=(spaces["obs_dim"], spaces["num_actions"], low, high))
        alg = agent.agent.algorithm
        agent.model.actor.load_state_dict(torch.load(path / "actor.pth", weights_only=True))
        agent.model.critic.load_state_dict(torch.load(path / "critic.pth", weights_only=True))
        alg.actor_optimizer.load_state_dict(torch.load(path / "actor_opt.pth", weights_only=True))
        alg.critic_optimizer.load_state_dict(torch.load(path / "critic_opt.pth", weights_only=True))
        for name, rms in (("obs_rms.npz", agent.model.obs_norm), ("ret_rms.npz", alg.reward_normalizer.return_rms)):
            with np.load(path / name, allow_pickle=False) as z:
                rms.load_state_dict({k: torch.as_tensor(z[k]) for k in z.files})
        state = json.loads((path / "train_state.json").read_text())
        agent.episodes, agent.steps, agent.best_eval = state["episodes"], state["steps"], state["best_eval_reward"]
        return agent

    @classmethod
    def from_pretrained(cls, repo_or_dir, env=None) -> PPO:
        """:meth:`load` from a local directory; simppo fetches nothing from the network."""
        if not Path(repo_or_dir).is_dir():
            raise FileNotFoundError(f"PPO.from_pretrained: {repo_or_dir} is not a local directory (simppo loads "
                                    "saved agents from disk only; download it first)")
        return cls.load(repo_or_dir, env)


class _ActOnly:
    """The widths of an env, for an agent loaded to act (never stepped)."""

    def __init__(self, obs_dim: int, num_actions: int, device: str):
        self.num_envs, self.num_actions, self.device = 1, int(num_actions), device
        self.obs_dims = {"obs": int(obs_dim), "critic_obs": int(obs_dim)}

    def reset(self):
        z = torch.zeros(1, self.obs_dims["obs"], device=self.device)
        return {"obs": z, "critic_obs": z}

    get_observations = reset

