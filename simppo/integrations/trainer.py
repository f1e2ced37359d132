"""TorchRL's ``PPOTrainer`` interface (its seed document, newer than the installable ``torchrl``) on simppo's PPO::

    trainer = PPOTrainer.from_env(simppo.make_env("humanoid_imitation", 256, "cpu"), actor=None, critic=None,
                                  total_frames=1_000_000, frames_per_batch=256 * 24, minibatch_size=1536,
                                  save_trainer_file="runs/trainer", keep_last=3, keep_best=("episode/reward", "max"))
    with trainer.stop_on_signal():
        trainer.train()

``env``: a simppo env, a :class:`~simppo.integrations.torchrl.TorchRLEnv` (its simppo env is trained), another
batched TorchRL env (through :class:`~simppo.integrations.torchrl.FromTorchRL`) or a gymnasium env / vector env
(through :class:`~simppo.integrations.gymnasium.WrappedGymEnv`). ``actor`` / ``critic``: TorchRL modules (a
``ProbabilisticActor`` with a ``Normal`` distribution over ``loc``/``scale``, a ``ValueOperator`` writing
``value_key``; see :class:`~simppo.integrations.torchrl.TorchRLActor`) trained by simppo's PPO core (one core, no
second implementation; the observation normalizers stay simppo's), or ``None`` for simppo's MLPs (sizes: the agent
config). Recurrent windows (``sub_traj_len``) and arguments simppo has no counterpart for are refused with one line,
never ignored. Checkpoints are simppo's (atomic, checksummed, ``weights_only``): with
``save_trainer_file=DIR`` a file ``DIR/checkpoint_<frames>.ckpt`` every ``save_trainer_interval`` frames and at the
end, rotated (``keep_last`` newest, plus ``keep_best=(metric, "min"|"max")``'s best, ``DIR/best.ckpt``). A folder is
one run's: training refuses, before its first batch, a folder that holds another run's checkpoints (continue that run
with :meth:`PPOTrainer.load_from_file` on the folder) or checkpoints past the one loaded from it, so no save overwrites
or rotates away a file this run did not write.
"""

from __future__ import annotations

import contextlib
import signal
from pathlib import Path

from simppo.agent.checkpoint import load_checkpoint, save_checkpoint
from simppo.agent.config import PPOAgentConfig
from simppo.agent.ppo import PPO
from simppo.envs.base import VecEnv
from simppo.utils.device import fabric_for, resolve_device

LOSS_KEYS = {"clip_epsilon": "e_clip", "entropy_coeff": "entropy_coef", "entropy_coef": "entropy_coef",
             "critic_coeff": "critic_coef", "critic_coef": "critic_coef", "normalize_advantage": "normalize_advantages",
             "clip_value": "value_clip"}
GAE_KEYS = {"gamma": "gamma", "lmbda": "tau"}
TRAINER_KEYS = {"num_epochs": "num_mini_epochs", "gamma": "gamma", "lmbda": "tau", "clip_norm": "max_grad_norm"}
BEST_FILE = "best.ckpt"
BEST_KEY = "trainer_best"  # the keep_best metric's best value so far, in every checkpoint of the rotation
LOOP_KEYS = ("progress_bar", "save_trainer_file", "save_trainer_interval", "keep_last", "keep_best", "seed",
             "log_interval", "config")


def _simppo_env(env) -> VecEnv:
    if isinstance(env, VecEnv):
        return env
    inner = getattr(env, "env", None)
    if type(env).__name__ == "TorchRLEnv" and isinstance(inner, VecEnv):
        return inner
    if type(env).__module__.startswith("torchrl") or hasattr(env, "step_and_maybe_reset"):
        from simppo.integrations.torchrl import FromTorchRL

        return FromTorchRL(env)
    try:
        import gymnasium as gym
    except ImportError:
        gym = None
    if gym is not None and isinstance(env, gym.Env | gym.vector.VectorEnv):
        from simppo.integrations.gymnasium import WrappedGymEnv

        return WrappedGymEnv(env)
    raise TypeError(f"PPOTrainer.from_env: {type(env).__name__} is not a simppo env, a TorchRL env or a gymnasium "
                    "env")


def _refuse(what: str, given: dict, known: dict) -> None:
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise ValueError(f"PPOTrainer.from_env: {what} {unknown} have no counterpart in simppo's PPO (supported: "
                         f"{sorted(known)})")


class PPOTrainer:
    """See the module. Build it with :meth:`from_env`."""

    def __init__(self, agent: PPO, total_frames: int, progress_bar: bool = True, save_trainer_file: str | None = None,
                 save_trainer_interval: int | None = None, keep_last: int | None = None,
                 keep_best: tuple[str, str] | None = None, log_interval: int = 10):
        if keep_best is not None and (len(keep_best) != 2 or keep_best[1] not in ("min", "max")):
            raise ValueError(f"PPOTrainer: keep_best={keep_best!r} must be (metric key, 'min' | 'max')")
        self.agent, self.runner, self.total_frames = agent, agent.runner, int(total_frames)
        self.progress_bar, self.log_interval = progress_bar, log_interval
        self.save_dir = Path(save_trainer_file) if save_trainer_file else None
        self.save_interval = save_trainer_interval
        self.keep_last, self.keep_best = keep_last, keep_best
        self.best: float | None = None
        self._loaded_here: int | None = None  # frames of the checkpoint loaded from save_dir (the run continued)
        self.stop_reason: str | None = None
        self.metrics: dict[str, float] = {}
        self._last_saved = 0

    @classmethod
    def from_env(cls, env, *, actor=None, critic=None, total_frames: int, frames_per_batch: int = 1024,
                 minibatch_size: int = 256, sub_traj_len: int | None = None, learning_rate: float = 3e-4,
                 value_key="state_value", loss_kwargs=None, gae_kwargs=None, collector_kwargs=None,
                 **trainer_kwargs) -> PPOTrainer:
        """A trainer of simppo's PPO on ``env`` with TorchRL's argument names (see the module)."""
        if sub_traj_len is not None:
            raise ValueError(f"PPOTrainer.from_env: sub_traj_len={sub_traj_len}: simppo's policies are feedforward "
                             "(no recurrent training windows)")
        if value_key != "state_value" and critic is None:
            raise ValueError(f"PPOTrainer.from_env: value_key={value_key!r}: simppo's own critic (critic=None) has no "
                             "output key to rename")
        if collector_kwargs:
            raise ValueError(f"PPOTrainer.from_env: collector_kwargs {sorted(collector_kwargs)}: simppo steps its env "
                             "in place on its device, without a TorchRL collector")
        loss_kwargs, gae_kwargs = dict(loss_kwargs or {}), dict(gae_kwargs or {})
        _refuse("loss_kwargs", loss_kwargs, LOSS_KEYS)
        _refuse("gae_kwargs", gae_kwargs, GAE_KEYS)
        _refuse("trainer arguments", trainer_kwargs, {**TRAINER_KEYS, **dict.fromkeys(LOOP_KEYS)})
        venv = _simppo_env(env)
        num_steps = max(1, frames_per_batch // venv.num_envs)
        batch = num_steps * venv.num_envs
        config = trainer_kwargs.pop("config", None) or PPOAgentConfig()  # simppo's own agent config, if given
        config.num_steps = num_steps
        config.num_minibatches = max(1, batch // min(minibatch_size, batch))
        config.actor_lr = config.critic_lr = learning_rate
        config.lr_batch_scaling = "none"  # the caller's learning_rate, as given
        for source, names in ((loss_kwargs, LOSS_KEYS), (gae_kwargs, GAE_KEYS)):
            for key, value in source.items():
                setattr(config, names[key], value)
        for key in TRAINER_KEYS:
            if key in trainer_kwargs:
                setattr(config, TRAINER_KEYS[key], trainer_kwargs.pop(key))
        if "seed" in trainer_kwargs:
            import torch

            torch.manual_seed(trainer_kwargs.pop("seed"))
        if actor is not None or critic is not None:
            from simppo.integrations.torchrl import TorchRLActor, TorchRLCritic

            actor = TorchRLActor(actor) if actor is not None else None
            critic = TorchRLCritic(critic, value_key) if critic is not None else None
        agent = PPO(fabric_for(resolve_device(str(venv.device))), venv, config, actor=actor, critic=critic)
        agent.setup()
        return cls(agent, total_frames, **trainer_kwargs)

    # ------------------------------------------------------------------ the loop
    @property
    def checkpoint_step(self) -> int:
        """Frames collected so far (every env's steps): the progress checkpoints are named and rotated by."""
        return int(self.runner.step_count)

    def request_stop(self, reason: str | None = None) -> None:
        """Stop at the next loop boundary (after the current batch's update)."""
        self.stop_reason = reason or "stop requested"

    @contextlib.contextmanager
    def stop_on_signal(self, signals=(signal.SIGINT, signal.SIGTERM)):
        """The first of ``signals`` requests a stop (the batch finishes, a final checkpoint is written when a save
        folder is set); a second raises ``KeyboardInterrupt``. The previous handlers are restored on exit."""
        def handle(signum, frame):
            if self.stop_reason is not None:
                raise KeyboardInterrupt
            self.request_stop(f"signal {signal.Signals(signum).name}")

        previous = {s: signal.signal(s, handle) for s in signals}
        try:
            yield self
        finally:
            for s, h in previous.items():
                signal.signal(s, h)

    def train(self) -> dict[str, float]:
        """Train until ``total_frames`` frames or a stop request; returns the last iteration's metrics."""
        from tqdm import tqdm

        if self.save_dir is not None:
            self._check_save_dir()
        bar = tqdm(total=self.total_frames, initial=self.checkpoint_step, disable=not self.progress_bar, unit="frame")
        while self.checkpoint_step < self.total_frames and self.stop_reason is None:
            before = self.checkpoint_step
            self.metrics = self.runner.train_iteration()  # counts the frames (runner.step_count)
            bar.update(self.checkpoint_step - before)
            if self.save_dir is not None and self.save_interval and \
                    self.checkpoint_step - self._last_saved >= self.save_interval:
                self.save()
        bar.close()
        if self.save_dir is not None and self._last_saved != self.checkpoint_step:
            self.save()
        return self.metrics

    # ------------------------------------------------------------------ checkpoints
    def _check_save_dir(self) -> None:
        """Refuse (one line, naming the folder) a save folder whose files this run's saves would overwrite or rotate
        away: another run's checkpoints, or this run's past the one it was loaded from."""
        found = rotation(self.save_dir) if self.save_dir.is_dir() else []
        best = (self.save_dir / BEST_FILE).exists()
        if self._loaded_here is None and (found or best):
            raise FileExistsError(f"{self.save_dir}: holds the checkpoints of another run ({(found or [BEST_FILE])[-1]}"
                                  "); give a new save_trainer_file, or load_from_file() this folder to continue it")
        later = [p for p in found if checkpoint_frames(p) > (self._loaded_here or 0)]
        if later:
            raise FileExistsError(f"{self.save_dir}: holds {later[-1].name}, past the checkpoint this run continues "
                                  f"(frame {self._loaded_here}); give a new save_trainer_file for this branch")

    def save(self) -> Path:
        """``save_dir/checkpoint_<frames>.ckpt`` (and ``best.ckpt`` on a new best ``keep_best`` metric), rotated."""
        path = self.save_dir / f"checkpoint_{self.checkpoint_step}.ckpt"
        state = self.runner.get_state_dict()
        new_best = False
        if self.keep_best is not None and self.keep_best[0] in self.metrics:
            value = float(self.metrics[self.keep_best[0]])
            if self.best is None or (value > self.best if self.keep_best[1] == "max" else value < self.best):
                self.best, new_best = value, True
        if self.best is not None:  # a continued run keeps the best it has to beat
            state[BEST_KEY] = self.best
        save_checkpoint(state, path)
        self._last_saved = self.checkpoint_step
        if new_best:
            save_checkpoint(state, self.save_dir / BEST_FILE)
        if self.keep_last:
            for old in rotation(self.save_dir)[:-self.keep_last]:
                old.unlink()
        return path

    def load_from_file(self, file, weights_only: bool = False) -> PPOTrainer:
        """Restore from a checkpoint file, or from a rotation folder's newest checkpoint; ``weights_only``: the
        weights alone (a warm start), else everything to continue (optimizers, normalizers, counters, env)."""
        path = Path(file)
        if path.is_dir():
            found = rotation(path)
            if not found:
                raise FileNotFoundError(f"{path}: no checkpoint_<frames>.ckpt in this folder")
            path = found[-1]
        state = load_checkpoint(path, map_location=self.runner.device)
        self.runner.load_parameters(state, load_training_state=not weights_only, source=str(path))
        self._last_saved = self.checkpoint_step
        if not weights_only and self.save_dir is not None and path.parent.resolve() == self.save_dir.resolve():
            self._loaded_here = self.checkpoint_step
            best = state.get(BEST_KEY)
            self.best = float(best) if isinstance(best, (int, float)) else None
        return self


def checkpoint_frames(path: Path) -> int:
    """The frames in a ``checkpoint_<frames>.ckpt`` name (-1 for another name)."""
    try:
        return int(path.stem.split("_", 1)[1])
    except (IndexError, ValueError):
        return -1


def rotation(folder: Path) -> list[Path]:
    """The ``checkpoint_<frames>.ckpt`` files in ``folder``, oldest first (by frames)."""
    return sorted((p for p in Path(folder).glob("checkpoint_*.ckpt") if checkpoint_frames(p) >= 0),
                  key=checkpoint_frames)
