"""TorchRL's trainer interface learns ``humanoid_imitation`` (run by hand)::

    pytest -m slow tests/integrations/test_trainer_learning_slow.py -s

``PPOTrainer.from_env`` on the shipped ``stand_sway`` clip with simppo-train's config and batch shape (256 envs × 24
steps, 4 minibatches), 1.5 M frames (``SIMPPO_SLOW_TRAIN_SAMPLES``), then the clip played from t = 0 by
simppo-eval's evaluator: it must be tracked to its end (ProtoMotions' success rule).
"""

import os

import pytest
import torch

import simppo
from simppo.integrations.trainer import PPOTrainer
from simppo.motion.pack import pack_motions
from simppo.paths import MOTIONS_DIR
from tests.helpers import play_clips

TRAIN_SAMPLES = int(float(os.environ.get("SIMPPO_SLOW_TRAIN_SAMPLES", 1.5e6)))


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_ppo_trainer_learns_humanoid_imitation(tmp_path):
    pack_motions([str(MOTIONS_DIR / "stand_sway.csv")], str(tmp_path / "pack"), robot="g1")
    env = simppo.make_env("humanoid_imitation", 256, "cpu", **{"motion.files": [str(tmp_path / "pack")]})
    cfg = env.train_cfg
    trainer = PPOTrainer.from_env(env, total_frames=TRAIN_SAMPLES, frames_per_batch=256 * cfg.agent.num_steps,
                                  minibatch_size=256 * cfg.agent.num_steps // cfg.agent.num_minibatches,
                                  learning_rate=cfg.agent.actor_lr, seed=0, config=cfg.agent, progress_bar=False)
    metrics = trainer.train()
    print(f"\n{trainer.checkpoint_step} frames, last iteration: reward {metrics.get('episode/reward')}, "
          f"length {metrics.get('episode/length')}")
    with torch.no_grad():
        (result,) = play_clips(cfg, trainer.agent.model, 1)
    print(result.to_json())
    assert result.success, result.to_json()
