"""The humanoid env on sim=mjx in the default suite (its full run of the env tests is slow, see conftest): steps,
terminations and resets, no host read per step (DLPack views only), and ``simppo-train sim=mjx`` end to end."""

import subprocess
import sys

import pytest
import torch

pytest.importorskip("jax", reason="sim=mjx needs the [mjx] extra")

from simppo.envs.imitation import HumanoidImitationEnv, HumanoidImitationEnvCfg  # noqa: E402
from simppo.sim import SimCfg  # noqa: E402
from tests.helpers import SyncCounter  # noqa: E402

N = 4  # the world count of tests/sim/test_mjx_sim.py: one compilation for both


def test_env_steps_resets_and_reads_nothing_on_the_host(monkeypatch):
    torch.manual_seed(0)
    env = HumanoidImitationEnv(HumanoidImitationEnvCfg(), num_envs=N, device="cpu", sim_cfg=SimCfg(name="mjx"))
    reference = HumanoidImitationEnv(HumanoidImitationEnvCfg(), num_envs=N, device="cpu",
                                     sim_cfg=SimCfg(name="mujoco"))
    for e in (env, reference):
        e.reset()
        e.reset_to(torch.arange(N, dtype=torch.int32) % e.motion_lib.num_motions, torch.tensor([0.0, 0.5, 1.0, 1.5]))
    # the same reset state on both simulators gives the same observations (float32 against float64 physics)
    torch.testing.assert_close(env.get_observations()["obs"], reference.get_observations()["obs"], atol=1e-3,
                               rtol=0)
    env.step(torch.zeros(N, env.num_actions))  # compiles (or loads from the cache) before counting
    counter = SyncCounter(monkeypatch)
    ended = torch.zeros(N, dtype=torch.bool)
    g = torch.Generator().manual_seed(1)
    with counter:
        for _ in range(40):
            _, reward, terminated, truncated, _ = env.step(3.0 * torch.randn(N, env.num_actions, generator=g))
            ended |= terminated | truncated
    assert counter.total == 0, counter.counts
    assert ended.any()  # wild actions: some envs fell and were reset in the step
    assert torch.isfinite(reward).all() and int(env.sim.num_unstable[0]) == 0
    assert all(a == b for a, b in env.sim.aliasing().values())


def test_simppo_train_on_mjx_end_to_end(tmp_path):
    run_dir = tmp_path / "run"
    out = subprocess.run([sys.executable, "-m", "simppo.cli.train", "sim=mjx", f"num_envs={N}", "max_epochs=2",
                          "logger=none", "agent.num_steps=4", "progress_bar=false", f"run_dir={run_dir}"],
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    state = torch.load(run_dir / "last.ckpt", weights_only=True)
    assert state["epoch"] == 2


def test_simppo_eval_plays_a_mujoco_trained_policy_on_mjx(tmp_path):
    """Sim-to-sim: a policy trained on MuJoCo C played by simppo-eval on MJX writes the same report."""
    import json

    run_dir = tmp_path / "run"
    train = subprocess.run([sys.executable, "-m", "simppo.cli.train", "sim=mujoco", f"num_envs={N}", "max_epochs=1",
                            "logger=none", "agent.num_steps=4", "progress_bar=false", f"run_dir={run_dir}"],
                           capture_output=True, text=True, timeout=600)
    assert train.returncode == 0, train.stderr[-3000:]
    reports = {}
    for sim in ("mujoco", "mjx"):
        out = tmp_path / f"eval_{sim}"
        play = subprocess.run([sys.executable, "-m", "simppo.cli.eval", f"checkpoint={run_dir / 'last.ckpt'}",
                               f"sim={sim}", f"num_envs={N}", f"out={out}", "plot=false"],
                              capture_output=True, text=True, timeout=900)
        assert play.returncode == 0, play.stderr[-3000:]
        reports[sim] = json.loads((out / "eval.json").read_text())
    assert reports["mjx"]["sim"] == "MJXSim" and reports["mjx"]["trained_sim"] == "mujoco"
    assert [m["name"] for m in reports["mjx"]["motions"]] == [m["name"] for m in reports["mujoco"]["motions"]]
    assert reports["mjx"]["summary"].keys() == reports["mujoco"]["summary"].keys()
