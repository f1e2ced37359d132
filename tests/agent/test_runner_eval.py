"""The runner's periodic evaluation decides ``score_based.ckpt``; plain progress lines without a bar."""

import torch

from simppo.agent.checkpoint import load_checkpoint
from simppo.agent.ppo import PPO
from simppo.envs.pendulum import PendulumEnv, PendulumEnvCfg
from tests.helpers import cpu_fabric, small_agent_cfg


def _agent() -> PPO:
    torch.manual_seed(0)
    agent = PPO(cpu_fabric(), PendulumEnv(PendulumEnvCfg(max_episode_steps=8), num_envs=8, seed=0),
                small_agent_cfg(num_steps=8, save_last_every=100))
    agent.setup()
    return agent


def test_eval_score_not_training_reward_decides_score_based(tmp_path, capsys):
    scores = iter([0.5, 0.2, 0.9])
    calls = []

    def evaluator(model):
        calls.append(model)
        return {"eval/score": next(scores), "eval/survival_fraction": 1.0}

    agent = _agent()
    runner = agent.loop(tmp_path, max_epochs=6, evaluator=evaluator, eval_every=2, log_every=3)
    runner.train()
    assert len(calls) == 3 and all(m is agent.model for m in calls)
    assert agent.best_evaluated_score == 0.9
    best = load_checkpoint(tmp_path / "score_based.ckpt")
    assert best["epoch"] == 6 and best["best_evaluated_score"] == 0.9
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("epoch ")]
    assert [ln.split()[1] for ln in lines] == ["3/6", "6/6"]
    assert "steps/s" in lines[0] and "reward" in lines[0] and "eval_score 0.500" in lines[0]
    rows = (tmp_path / "metrics.csv").read_text().splitlines()
    assert "eval/score" in rows[0] and len(rows) == 7


def test_periodic_evaluator_plays_every_motion_and_keeps_the_rng():
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from simppo.agent.config import MLPCfg
    from simppo.agent.models import PPOModel
    from simppo.config import register_configs
    from simppo.eval.periodic import PeriodicEvaluator
    from simppo.paths import CONFIG_DIR

    register_configs()
    with initialize_config_dir(version_base=None, config_dir=str(CONFIG_DIR)):
        cfg = OmegaConf.to_object(compose("train", overrides=["device=cpu", "logger=none", "experiment_name=t"]))
    ev = PeriodicEvaluator(cfg, "cpu")
    env = ev.env
    model = PPOModel(env.actor_dim, env.full_dim, env.num_actions, cfg.agent.actor, MLPCfg(units=[32]))
    torch.manual_seed(3)
    before = torch.get_rng_state()
    out = ev(model)
    assert torch.equal(torch.get_rng_state(), before)
    assert 0.0 <= out["eval/survival_fraction"] <= 1.0 and out["eval/body_error_m"] > 0.0
    assert out["eval/score"] == out["eval/survival_fraction"] - out["eval/body_error_m"]
    names = env.motion_lib.motion_names
    assert all(f"eval/{n}/survival_s" in out and f"eval/{n}/body_error_m" in out for n in names)
    assert out["eval/walk/survival_s"] < env.motion_lib.motion_lengths[names.index("walk")].item()  # untrained
    ev.close()
