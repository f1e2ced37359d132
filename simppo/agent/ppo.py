"""The seed-facing PPO agent (ProtoMotions' ``PPO(fabric, env, config)`` API): ``setup``, ``train``, ``save``,
``load``, ``get_state_dict``, ``load_parameters`` and the seed's hooks, composed of the
:class:`~simppo.agent.algorithm.PPOAlgorithm` (the device math) and the :class:`~simppo.agent.runner.Runner` (the
env loop, counters, checkpoints, logging). Imports point one way: this facade → runner → algorithm."""

from __future__ import annotations

from pathlib import Path

from simppo.agent import exploration as X
from simppo.agent.algorithm import PPOAlgorithm
from simppo.agent.config import PPOAgentConfig
from simppo.agent.precision import resolve_precision
from simppo.agent.runner import Runner, check_same_work
from simppo.envs.base import VecEnv


def _forward(part: str, name: str, settable: bool = False) -> property:
    """A property reading (and with ``settable`` writing) ``self.<part>.<name>``."""

    def get(self):
        return getattr(getattr(self, part), name)

    def set_(self, value):
        setattr(getattr(self, part), name, value)

    return property(get, set_ if settable else None, doc=f"``{part}.{name}``")


class PPO:
    """PPO on a :class:`~simppo.envs.base.VecEnv`: ``PPO(fabric, env, config).setup(); .train()``.

    ``config.exploration=per_motion``: the actor's log-std is a ``[num_rows, A]`` table indexed by the
    :class:`~simppo.motion.index.MotionIndex` row of each env's motion (``env.motion_lib.index``). Several ranks (a
    DDP ``fabric``): each rank steps its own ``env`` with its own seed, and :meth:`setup` refuses ranks that would
    run different amounts of work. After :meth:`setup`, ``algorithm`` and ``runner`` are the two pieces; the
    attributes below read through to them. ``actor`` / ``critic``: modules to train instead of simppo's MLPs (the
    contract of :class:`~simppo.agent.models.PPOModel`).
    """

    def __init__(self, fabric, env: VecEnv, config: PPOAgentConfig, root_dir: str | Path | None = None,
                 actor=None, critic=None):
        self.fabric, self.env, self.config = fabric, env, config
        self.given_modules = (actor, critic)
        self.root_dir = Path(root_dir) if root_dir is not None else None
        self.device = fabric.device
        self.num_envs, self.num_steps = env.num_envs, config.num_steps
        if config.exploration not in X.EXPLORATION_MODES:
            raise X.ExplorationConfigError(f"agent.exploration={config.exploration!r}: choose from "
                                           f"{list(X.EXPLORATION_MODES)}")
        self.per_motion = config.exploration == "per_motion"
        self.motion_index = getattr(getattr(env, "motion_lib", None), "index", None)  # None without motions
        if self.per_motion and (self.motion_index is None or not hasattr(env, "motion_ids")):
            raise X.ExplorationConfigError(
                f"agent.exploration=per_motion needs an env that tracks motions (a motion library and motion_ids); "
                f"{type(env).__name__} has none: use agent.exploration=shared")
        self.precision = resolve_precision(config.update_precision, self.device)  # fp32 | bf16 (auto resolved)

    def setup(self) -> None:
        """Check the ranks agree, build the algorithm (model, optimizers, buffer) and the runner (resets the env)."""
        # rows number every motion of every rank (the whole index); this rank's motions map into them
        num_rows = X.num_rows(self.motion_index.whole) if self.per_motion else None
        check_same_work(self.fabric, self.env, self.config, num_rows, self.precision)
        motion_rows = X.motion_rows(self.motion_index) if self.per_motion else None
        symmetry = self.env.symmetry() if self.config.uses_symmetry and hasattr(self.env, "symmetry") else None
        self.algorithm = PPOAlgorithm(self.fabric, self.config, self.env.obs_dims, self.env.num_actions,
                                      self.num_envs, self.precision, num_rows, motion_rows, self.given_modules,
                                      symmetry)
        self.runner = Runner(self.fabric, self.env, self.algorithm, self.config, self.root_dir)

    def loop(self, root_dir: str | Path | None = None, **options) -> Runner:
        """The runner with its loop options set (:meth:`Runner.set_loop`): ``agent.loop(dir, max_epochs=3).train()``."""
        return self.runner.set_loop(root_dir, **options)

    # ------------------------------------------------------------------ the seed's API
    def train(self, max_epochs: int = 1000) -> None:
        self.loop(self.root_dir, max_epochs=max_epochs).train()

    def train_iteration(self) -> dict[str, float]:
        return self.runner.train_iteration()

    def save(self, checkpoint_name: str = "last.ckpt", new_high_score: bool = False) -> None:
        self.loop(self.root_dir).save(checkpoint_name, new_high_score)

    def load(self, path: str | Path, load_training_state: bool = True) -> None:
        self.runner.load(path, load_training_state)

    def get_state_dict(self, state_dict: dict | None = None) -> dict:
        return self.runner.get_state_dict(state_dict)

    def load_parameters(self, state_dict: dict, load_training_state: bool = True, source: str = "checkpoint"):
        self.runner.load_parameters(state_dict, load_training_state, source)

    def collect_rollout(self) -> None:
        self.runner.collect_rollout()

    def rollout_step(self, step: int) -> None:
        self.runner.rollout_step(step)

    def optimize_model(self):
        return self.algorithm.update()

    def compute_advantages(self) -> None:
        self.algorithm.compute_returns()

    def perform_optimization_step(self, batch_dict, batch_idx: int = 0):
        return self.algorithm.perform_optimization_step(batch_dict, batch_idx)

    def actor_step(self, batch_dict):
        return self.algorithm.actor_step(batch_dict)

    def critic_step(self, batch_dict):
        return self.algorithm.critic_step(batch_dict)

    def calculate_extra_actor_loss(self, batch_td):
        return self.algorithm.calculate_extra_actor_loss(batch_td)

    def episode_metrics(self):
        return self.runner.episode_metrics()

    def rollout_metrics(self):
        return self.runner.rollout_metrics()

    def current_rows(self):
        return self.algorithm.rows_of(self.runner.current_motion_ids)

    def update_obs_normalizers(self, obs) -> None:
        self.algorithm.update_obs_normalizers(obs)

    def sync_normalizers(self) -> None:
        self.algorithm.sync_normalizers()

    def mlp_autocast(self):
        return self.algorithm.mlp_autocast()

    model = _forward("algorithm", "model")
    actor = _forward("algorithm", "actor")
    critic = _forward("algorithm", "critic")
    actor_module = _forward("algorithm", "actor_module")
    critic_module = _forward("algorithm", "critic_module")
    actor_optimizer = _forward("algorithm", "actor_optimizer")
    critic_optimizer = _forward("algorithm", "critic_optimizer")
    actor_lr = _forward("algorithm", "actor_lr")
    critic_lr = _forward("algorithm", "critic_lr")
    log_std_lr = _forward("algorithm", "log_std_lr")
    reward_normalizer = _forward("algorithm", "reward_normalizer")
    experience_buffer = _forward("algorithm", "experience_buffer")
    num_rows = _forward("algorithm", "num_rows")
    world_size = _forward("runner", "world_size")
    epoch = _forward("runner", "epoch", settable=True)
    step_count = _forward("runner", "step_count", settable=True)
    best_evaluated_score = _forward("runner", "best_evaluated_score", settable=True)
    run_start_time = _forward("runner", "run_start_time", settable=True)
    current_obs = _forward("runner", "current_obs", settable=True)
    current_motion_ids = _forward("runner", "current_motion_ids", settable=True)
