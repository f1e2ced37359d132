"""Typed configuration of the PPO agent: the one source of defaults (motion-tracking scale).

``configs/agent/ppo.yaml`` selects these unchanged; ``configs/agent/ppo_small.yaml`` overrides a few.
"""

from dataclasses import dataclass, field

from simppo.agent.precision import PRECISIONS as UPDATE_PRECISIONS

LR_SCHEDULES = ("fixed", "adaptive", "adaptive_iteration")
LR_BATCH_SCALINGS = ("none", "sqrt")


@dataclass
class MLPCfg:
    units: list[int] = field(default_factory=lambda: [512, 256, 128])
    activation: str = "elu"  # elu | relu | tanh


@dataclass
class ActorCfg(MLPCfg):
    # σ ≈ 0.61 of the action scale: wide enough that a walk's steps are tried before standing still pays off
    # (narrower, the walk alone never lifts a foot: docs/learning.md), narrow enough to keep the robot up early on
    init_log_std: float = -0.5
    learnable_log_std: bool = True
    # bounds on each log-std entry (every row with per-motion exploration), applied after each actor step
    min_log_std: float = -7.0
    max_log_std: float = 2.0
    tanh_mean: bool = False  # bound the action mean to (-1, 1)
    # clamp: the log-std parameter is clamped into [min_log_std, max_log_std] after each step; tanh: it is stretched
    # into them, log_std = min + (max - min) * (tanh(p) + 1) / 2 (TensorAeroSpace's actor)
    log_std_bounds: str = "clamp"


@dataclass
class PPOAgentConfig:
    """PPO hyper-parameters. Batch = ``num_steps * num_envs`` split into ``num_minibatches``."""

    num_steps: int = 24
    num_mini_epochs: int = 5
    num_minibatches: int = 4
    gamma: float = 0.99
    tau: float = 0.95
    e_clip: float = 0.2
    clip_value_loss: bool = True
    value_clip: float = 0.2
    critic_coef: float = 1.0
    entropy_coef: float = 0.005
    # No bounds loss for tracking (as mjlab / rsl_rl): with the BeyondMimic action map the clips need |a| up to
    # ~4 (knee in a squat), and a penalty on |mean| > 1 acts as a near-hard clamp. Bounded tasks can enable it.
    bounds_loss_coef: float = 0.0
    bounds_limit: float = 1.0
    lambda_l2c2: float = 0.0
    l2c2_obs_noise: float = 0.05
    # mirror-symmetry loss (rsl_rl's mirror loss): coef x mean squared distance between the policy mean on the
    # mirrored observation and the mirror image of the policy mean (env.symmetry(): the robot's left-right map)
    symmetry_coef: float = 0.0
    # mirror-symmetry data augmentation (rsl_rl's): each minibatch is trained on with its left-right mirror image too
    symmetry_augment: bool = False
    max_grad_norm: float = 1.0
    # 1e-4: at 3e-4 a tracking iteration clipped ~45 % of its samples and σ grew; at 1e-4 the clip fraction is
    # 0.2-0.3, σ holds, and the real clips track as often with less error (docs/learning.md)
    actor_lr: float = 1e-4
    critic_lr: float = 1e-3
    # actor_lr is the rate for a batch of lr_reference_batch samples per iteration (256 envs x 24 steps, where the
    # defaults were tuned). sqrt: a run whose batch over all ranks (num_envs x num_steps x ranks) is B starts the
    # actor at actor_lr x sqrt(B / lr_reference_batch) (Adam's square-root scaling rule). At 4096 envs the
    # tuned rate moved the policy half as far per iteration (KL 0.006-0.009 against 0.013) and learned less per
    # sample; x4 restored the KL and learned more (docs/learning.md). none: actor_lr as given.
    lr_batch_scaling: str = "sqrt"
    lr_reference_batch: int = 6144
    # fixed | adaptive | adaptive_iteration. adaptive (rsl_rl): the actor LR is ÷1.5 / ×1.5 after every minibatch
    # whose KL to the rollout policy is above 2x / below 0.5x desired_kl; at the tracking exploration noise it
    # drove the LR to min_lr within an iteration (the KL accumulates over the minibatch steps) and stalled
    # learning. adaptive_iteration applies the same rule once per iteration to the iteration's mean KL.
    lr_schedule: str = "fixed"
    desired_kl: float = 0.01
    min_lr: float = 1e-5
    max_lr: float = 1e-2
    # Stop the remaining epochs of an iteration once an epoch's mean KL to the rollout policy exceeds it (one host
    # sync per epoch; None: never). A guard, not a trust region: as σ shrinks late in training the KL of a
    # fixed-LR step grows ~1/σ² and can run away within a few iterations (figures: README, per-motion exploration).
    target_kl: float | None = 0.15
    normalize_obs: bool = True
    # shared: one log-std vector [A] for every env. per_motion: a table [num_rows, A] whose row is the env's
    # motion's MotionIndex row (stable when shards are appended); needs an env with motions.
    exploration: str = "shared"
    # learning rate of the actor's log-std over actor_lr. With per_motion, every row's rate is further scaled by
    # sqrt(effective rows of the iteration's samples) (simppo.agent.exploration.row_lr_factor): a row fed a share
    # p of the samples has a gradient sqrt(p) as far above its noise as the shared vector's, and Adam moves an
    # entry by ~lr x that ratio, so each row then moves as the shared σ would on its motion alone.
    log_std_lr_scale: float = 1.0
    normalize_rewards: bool = True
    normalize_advantages: bool = True
    obs_clip: float = 5.0
    actor: ActorCfg = field(default_factory=ActorCfg)
    critic: MLPCfg = field(default_factory=MLPCfg)
    # Speed of training's MLPs (benchmarks/train_throughput.py prints each option's effect). update_precision
    # bf16: every actor/critic MLP forward of training (the rollout's and each minibatch step's) and the backward
    # under bf16 autocast, with fp32 master weights, losses, log-probs and Adam (simppo.agent.precision: the rollout
    # and the update must share one precision, or the PPO ratio is rounding noise at small σ). It pays only where
    # the hardware multiplies bf16 natively, so auto picks bf16 on CPUs with AMX and fp32 elsewhere. compile:
    # torch.compile of the two MLPs (Inductor; on CPU it needs a C++ compiler and compiles for a while at start).
    update_precision: str = "auto"
    compile: bool = False
    # graph_update: each minibatch step gathered into static buffers and replayed as one CUDA graph
    # (simppo.agent.graphed_update; one rank, fp32). Off until measured on a GPU; on a CPU it runs the same static
    # step eagerly (the parameters of the eager path, bit for bit).
    graph_update: bool = False
    # checkpoints
    save_last_every: int = 10
    save_epoch_every: int = 500

    @property
    def uses_symmetry(self) -> bool:
        """Whether the update needs the env's mirror (:meth:`simppo.envs.base.VecEnv.symmetry`)."""
        return self.symmetry_coef > 0 or self.symmetry_augment

    def __post_init__(self) -> None:
        if self.lr_schedule not in LR_SCHEDULES:
            raise ValueError(f"agent.lr_schedule: unknown schedule {self.lr_schedule!r}; choose one of {LR_SCHEDULES}")
        if self.lr_batch_scaling not in LR_BATCH_SCALINGS:
            raise ValueError(f"agent.lr_batch_scaling: unknown rule {self.lr_batch_scaling!r}; choose one of "
                             f"{LR_BATCH_SCALINGS}")
        if not self.lr_reference_batch >= 1:
            raise ValueError(f"agent.lr_reference_batch must be >= 1, got {self.lr_reference_batch}")
        if not self.symmetry_coef >= 0:
            raise ValueError(f"agent.symmetry_coef must be >= 0, got {self.symmetry_coef}")
        if not self.log_std_lr_scale > 0:
            raise ValueError(f"agent.log_std_lr_scale must be > 0, got {self.log_std_lr_scale}")
        if self.update_precision not in UPDATE_PRECISIONS:
            raise ValueError(f"agent.update_precision: unknown precision {self.update_precision!r}; choose one of "
                             f"{UPDATE_PRECISIONS}")
