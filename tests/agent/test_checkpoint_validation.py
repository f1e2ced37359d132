"""Corrupt or foreign checkpoints (issue 13): a truncated file, a checkpoint of another robot, or one with
other observation / action widths gets a one-line ``CheckpointError`` naming the file and the mismatch,
before any state changes; ``simppo-train`` turns it into one line on stderr and exit status 2."""

import os
import subprocess
import sys

import pytest
import torch

from simppo.agent.checkpoint import CheckpointError
from simppo.agent.config import ActorCfg, MLPCfg
from simppo.agent.ppo import PPO
from simppo.envs.base import VecEnv
from simppo.envs.imitation import HumanoidImitationEnv, HumanoidImitationEnvCfg
from simppo.motion.config import MotionCfg
from simppo.sim.config import SimCfg
from tests.helpers import cpu_fabric, small_agent_cfg
from tests.motion.test_motion_robot_digest import g1_variant


class WidthEnv(VecEnv):
    """A do-nothing env with chosen widths (obs, critic_obs, actions) and ``num_envs``."""

    def __init__(self, obs=3, critic_obs=5, num_actions=2, num_envs=4):
        self.num_envs, self.num_actions, self.device = num_envs, num_actions, "cpu"
        self.obs_dims = {"obs": obs, "critic_obs": critic_obs}
        self.t = torch.zeros(num_envs)
        self._obs = {"obs": torch.randn(num_envs, obs), "critic_obs": torch.randn(num_envs, critic_obs)}

    def reset(self):
        return self._obs

    def step(self, actions):
        self.t += 1
        n = self.num_envs
        return self._obs, torch.randn(n), torch.zeros(n, dtype=torch.bool), self.t % 3 == 0, {}

    def get_observations(self):
        return self._obs

    def state_dict(self):
        return {"t": self.t.clone()}

    def load_state_dict(self, state):
        self.t.copy_(state["t"])


def make_agent(env, root_dir=None) -> PPO:
    torch.manual_seed(0)
    cfg = small_agent_cfg(num_steps=4, num_minibatches=2, num_mini_epochs=1, actor=ActorCfg(units=[16]),
                          critic=MLPCfg(units=[16]))
    agent = PPO(cpu_fabric(), env, cfg, root_dir=root_dir)
    agent.setup()
    return agent


def flat(state: dict, prefix: str = "") -> dict:
    """Nested state → {dotted key: tensor or value}."""
    out = {}
    for k, v in state.items():
        if isinstance(v, dict):
            out.update(flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v.clone() if isinstance(v, torch.Tensor) else v
    return out


def snapshot(agent: PPO) -> dict:
    return {"model": flat(agent.model.state_dict()), "epoch": agent.epoch,
            "env": flat(agent.env.state_dict()), "rng": torch.get_rng_state().clone(),
            "reward_norm": {k: v.clone() for k, v in agent.reward_normalizer.state_dict().items()}}


def assert_unchanged(agent: PPO, before: dict) -> None:
    after = snapshot(agent)
    assert after["epoch"] == before["epoch"]
    for part in ("model", "env", "reward_norm"):
        for k, v in before[part].items():
            same = torch.equal(after[part][k], v) if isinstance(v, torch.Tensor) else after[part][k] == v
            assert same, (part, k)
    assert torch.equal(after["rng"], before["rng"])


def refused(agent: PPO, path, match: str, load_training_state: bool = True) -> str:
    before = snapshot(agent)
    with pytest.raises(CheckpointError) as e:
        agent.loop().load(path, load_training_state)
    msg = str(e.value)
    assert msg.startswith(f"{path}: ") and "\n" not in msg, msg
    assert match in msg, msg
    assert_unchanged(agent, before)
    return msg


@pytest.fixture()
def saved(tmp_path):
    agent = make_agent(WidthEnv(), tmp_path)
    agent.train_iteration()
    agent.save("last.ckpt")
    return tmp_path / "last.ckpt"


def test_truncated_and_garbage_checkpoints(saved, tmp_path):
    agent = make_agent(WidthEnv())
    data = saved.read_bytes()
    for cut in (0, 100, len(data) // 2, len(data) - 10):
        bad = tmp_path / f"cut{cut}.ckpt"
        bad.write_bytes(data[:cut])
        refused(agent, bad, "corrupt or truncated checkpoint")


def test_other_observation_or_action_widths(saved):
    refused(make_agent(WidthEnv(obs=4)), saved, "observation widths differ: checkpoint {'obs': 3, 'critic_obs': 5}, "
            "this run {'obs': 4, 'critic_obs': 5}")
    refused(make_agent(WidthEnv(critic_obs=6)), saved, "observation widths differ", load_training_state=False)
    refused(make_agent(WidthEnv(num_actions=3)), saved, "action widths differ: checkpoint 2, this run 3")


def test_resume_needs_the_same_num_envs_but_weights_do_not(saved):
    agent = make_agent(WidthEnv(num_envs=8))
    refused(agent, saved, "checkpoint has num_envs=4, this run 8")
    agent.loop().load(saved, load_training_state=False)  # weights-only warm start is fine
    ckpt = torch.load(saved, weights_only=True)
    assert all(torch.equal(v, ckpt["model"][k]) for k, v in agent.model.state_dict().items())


def test_checkpoint_without_signature_is_still_checked_by_shapes(saved, tmp_path):
    state = torch.load(saved, weights_only=True)
    del state["signature"], state["checksum"]  # as written before checkpoints carried either
    old = tmp_path / "old.ckpt"
    torch.save(state, old)
    refused(make_agent(WidthEnv(obs=4)), old, "model does not fit this run (model.actor.mu.0.weight: [16, 3] "
            "float32 in the checkpoint, [16, 4] float32 in this run)")
    del state["actor_optimizer"]
    torch.save(state, old)
    refused(make_agent(WidthEnv()), old, "lacks the training state ['actor_optimizer']")


def test_checkpoint_of_another_robot_is_refused(tmp_path):
    variant_cfg, pack = g1_variant(tmp_path)
    sim = SimCfg(name="mujoco")
    other = HumanoidImitationEnv(HumanoidImitationEnvCfg(), num_envs=2, device="cpu", robot_cfg=variant_cfg,
                                 sim_cfg=sim, motion_cfg=MotionCfg(files=[str(pack)]))
    make_agent(other, tmp_path).save("g1_v2.ckpt")
    g1 = HumanoidImitationEnv(HumanoidImitationEnvCfg(), num_envs=2, device="cpu", sim_cfg=sim)
    assert g1.obs_dims == other.obs_dims and g1.num_actions == other.num_actions  # only the names differ
    agent = make_agent(g1)
    for training in (True, False):
        msg = refused(agent, tmp_path / "g1_v2.ckpt", "checkpoint is for robot 'g1_v2'", training)
        assert "this run uses robot 'g1'" in msg and "other joint/body names" in msg, msg


def _train_cli(*args, timeout=300):
    bin_dir = os.path.dirname(sys.executable)
    return subprocess.run([f"{bin_dir}/simppo-train", "logger=none", "progress_bar=false", *args],
                          capture_output=True, text=True, timeout=timeout)


def _one_error_line(out) -> str:
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    lines = [ln for ln in out.stderr.splitlines() if ln.startswith("simppo-train: error: ")]
    assert len(lines) == 1, out.stderr
    return lines[0]


def test_simppo_train_reports_bad_checkpoints_and_motions_in_one_line(tmp_path, saved):
    run = tmp_path / "run"
    run.mkdir()
    (run / "last.ckpt").write_bytes(saved.read_bytes()[:500])
    line = _one_error_line(_train_cli("env=pendulum", "num_envs=8", f"run_dir={run}", "resume=true"))
    assert line.startswith(f"simppo-train: error: {run / 'last.ckpt'}: corrupt or truncated checkpoint"), line
    bad = tmp_path / "bad.sms"
    bad.write_bytes(b"SIMPPOMS" + b"\x02\x00\x00\x00" * 2 + b"\xff" * 8)
    line = _one_error_line(_train_cli("env=humanoid_imitation", "sim=mujoco", "num_envs=2",
                                      f"run_dir={tmp_path / 'r3'}", f"motion.files=[{bad}]"))
    assert line.startswith(f"simppo-train: error: {bad}: truncated header"), line


def test_env_state_of_other_options_is_refused_with_what_to_do(saved, tmp_path):
    state = torch.load(saved, weights_only=True)
    state["env"] = {**state["env"], "reset_noise_rng": torch.zeros(4, dtype=torch.int32)}  # an option on then
    del state["checksum"]
    other = tmp_path / "other.ckpt"
    torch.save(state, other)
    msg = refused(make_agent(WidthEnv()), other, "training state does not fit this run (env: keys differ (only in "
                  "the checkpoint: ['reset_noise_rng']")
    assert "resume with the options it was trained with" in msg and "checkpoint=..." in msg
