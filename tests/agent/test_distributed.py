"""DDP (issue 14) on the CPU: two processes on gloo, started by the test like torchrun starts them (its
environment variables; Fabric joins that launch). Each process runs :func:`worker` (``python -m
tests.agent.test_distributed OUT_DIR``) and saves what it saw to ``OUT_DIR/rank<r>.pt``; the tests compare.

- the update: both ranks fill their experience buffer with their half of one batch (``NUM_ENVS`` envs each,
  the halves side by side make the batch of ``2 * NUM_ENVS`` envs), merge their halves of the normalizer inputs
  and run one ``optimize_model``; this process runs the same update on the whole batch with one process (the
  minibatch order made equal: minibatch ``i`` of the union is rank 0's minibatch ``i`` and rank 1's).
  Tolerance: parameters within 1e-6 absolute (measured ~1e-7; the update moves them by ~1e-2): float32 sums
  in another order (the per-rank means that DDP averages, the advantage moments summed in float64);
  normalizer statistics within 1e-9 relative (float64, measured ~1e-16); the learning rate of the KL rule
  exactly (same decisions at every minibatch) and the mean KL within 1e-5 relative.
- training: after 4 iterations (a Runner, checkpoints every epoch) the parameters, optimizer and normalizer
  states are identical on both ranks; only rank 0 wrote, and ``last.ckpt`` holds both ranks' env states.
- resume: 2 iterations, then a fresh agent (other seeds) on each rank resumes ``last.ckpt`` and runs 2 more:
  everything (weights, optimizers, normalizers, each rank's env state and RNG) equals the straight 4 iterations.
- ``target_kl``: both ranks stop the epochs at the same minibatch (a one-sided stop would deadlock); ranks
  with different ``num_envs`` are refused at set-up, with the same message on both.
"""

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from simppo.agent import losses as L
from simppo.agent.algorithm import PPOAlgorithm
from simppo.agent.checkpoint import load_checkpoint
from simppo.agent.distributed import DistributedConfigError, close_process_group
from simppo.agent.ppo import PPO
from simppo.envs.pendulum import PendulumEnv, PendulumEnvCfg
from tests.helpers import assert_same_state as assert_same
from tests.helpers import cpu_fabric, small_agent_cfg

NUM_ENVS = 8  # per rank
NUM_STEPS = 8
WORLD = 2
TIMEOUT_S = 180  # a guard against a hung rank, not a speed check (a loaded 2-core machine is slow)


def agent_cfg(**overrides):
    # fp32: the DDP update is compared with one process's at 1e-6, and bf16 rounds the gradient of each rank's
    # half differently from the gradient of their union
    cfg = dict(num_steps=NUM_STEPS, num_mini_epochs=3, num_minibatches=2, lr_schedule="adaptive", desired_kl=1e-4,
               save_last_every=1, save_epoch_every=0, update_precision="fp32")
    cfg.update(overrides)
    return small_agent_cfg(**cfg)


class FixedOrderPPO(PPO):
    """With ``fixed_order``, PPO whose epochs visit the samples in a seeded order, the same on every rank.
    ``union_of`` (one process standing in for that many ranks side by side): minibatch ``i`` is the union of
    every rank's minibatch ``i``."""

    fixed_order = False
    union_of: int | None = None

    def setup(self) -> None:
        super().setup()
        self.algorithm.minibatch_permutation = self.minibatch_permutation  # the order the update visits

    def minibatch_permutation(self, total: int) -> torch.Tensor:
        if not self.fixed_order:
            return PPOAlgorithm.minibatch_permutation(self.algorithm, total)
        self._orders = getattr(self, "_orders", 0) + 1
        g = torch.Generator().manual_seed(1000 + self._orders)
        if self.union_of is None:
            return torch.randperm(total, generator=g)
        ranks, n = self.union_of, self.num_envs // self.union_of
        per_rank = total // ranks
        order = torch.randperm(per_rank, generator=g)  # each rank's order of its flat index step * n + env
        mb = per_rank // self.config.num_minibatches
        parts = [(q // n) * (ranks * n) + r * n + q % n
                 for i in range(self.config.num_minibatches) for q in [order[i * mb:(i + 1) * mb]]
                 for r in range(ranks)]
        return torch.cat(parts)


def union_batch(agent: PPO) -> dict[str, torch.Tensor]:
    """A seeded batch of ``[NUM_STEPS, WORLD * NUM_ENVS]`` samples drawn from ``agent``'s initial policy, and
    the raw observations / rewards / dones the normalizers merge."""
    g = torch.Generator().manual_seed(123)
    t, n = NUM_STEPS, WORLD * NUM_ENVS
    raw_obs = torch.randn(t, n, 3, generator=g) * torch.tensor([1.0, 2.0, 0.5]) + 0.3
    obs = agent.model.obs_norm(raw_obs.reshape(-1, 3)).reshape(t, n, 3)  # the identity statistics: clipped raw
    with torch.no_grad():
        mean, log_std = agent.actor_module(obs.reshape(-1, 3))
    mean, log_std = mean.reshape(t, n, -1).detach(), log_std.reshape(t, n, -1).detach()
    actions = mean + log_std.exp() * torch.randn(mean.shape, generator=g)
    values = torch.randn(t, n, generator=g)
    return {
        "obs": obs, "critic_obs": obs, "actions": actions, "mean": mean, "log_std": log_std,
        "logp": L.gaussian_log_prob(actions, mean, log_std), "values": values,
        "returns": values + torch.randn(t, n, generator=g), "advantages": torch.randn(t, n, generator=g) * 2 + 0.5,
        "raw_obs": raw_obs, "raw_rewards": torch.randn(t, n, generator=g) - 1.0,
        "dones": (torch.rand(t, n, generator=g) < 0.2).float(), "valid": torch.rand(t, n, generator=g) < 0.9,
    }


def run_update(agent: PPO, batch: dict[str, torch.Tensor], envs: slice) -> dict:
    """Fill the buffer with ``batch[:, envs]``, merge the normalizer inputs step by step, one update."""
    agent.fixed_order = True
    for key, value in batch.items():
        if key in agent.experience_buffer.store:
            agent.experience_buffer[key].copy_(value[:, envs])
    for t in range(NUM_STEPS):
        agent.update_obs_normalizers({"obs": batch["raw_obs"][t, envs]})
        agent.reward_normalizer(batch["raw_rewards"][t, envs], batch["dones"][t, envs], batch["valid"][t, envs])
    agent.sync_normalizers()
    metrics = agent.optimize_model()
    return {"model": {k: v.clone() for k, v in agent.model.state_dict().items()},
            "return_rms": {k: v.clone() for k, v in agent.reward_normalizer.return_rms.state_dict().items()},
            "actor_lr": float(agent.actor_lr), "kl": float(metrics["actor/kl"])}


def make_agent(fabric, seed: int, num_envs: int = NUM_ENVS, **cfg) -> PPO:
    torch.manual_seed(seed)
    env = PendulumEnv(PendulumEnvCfg(max_episode_steps=12), num_envs=num_envs, seed=seed)
    agent = FixedOrderPPO(fabric, env, agent_cfg(**cfg))
    agent.setup()
    return agent


def training_state(agent: PPO) -> dict:
    state = agent.get_state_dict()
    keep = ("model", "actor_optimizer", "critic_optimizer", "running_reward_norm", "env", "rng", "epoch", "step_count")
    return {k: state[k] for k in keep}


# ----------------------------------------------------------------------------- the two processes


def worker(out_dir: Path) -> None:
    from simppo.agent import runner as runner_mod
    from simppo.utils.device import fabric_for

    fabric = fabric_for("cpu", devices=WORLD, timeout_s=30)
    fabric.launch()
    rank = fabric.global_rank
    out: dict = {}

    agent = make_agent(fabric, seed=rank)  # DDP starts every rank from rank 0's weights
    out["init"] = {k: v.clone() for k, v in agent.model.state_dict().items()}
    out["update"] = run_update(agent, union_batch(agent), slice(rank * NUM_ENVS, (rank + 1) * NUM_ENVS))

    try:
        make_agent(fabric, seed=rank, num_envs=NUM_ENVS + rank)  # ranks that would run different minibatches
    except DistributedConfigError as exc:
        out["refused"] = str(exc)

    stopper = make_agent(fabric, seed=rank, target_kl=1e-12)
    stopper.collect_rollout()
    calls = []
    step = stopper.algorithm.perform_optimization_step
    stopper.algorithm.perform_optimization_step = lambda batch, i=0: calls.append(i) or step(batch, i)
    stopper.optimize_model()
    out["target_kl_steps"] = len(calls)

    writes = []
    save = runner_mod.save_checkpoint
    runner_mod.save_checkpoint = lambda state, path: writes.append(Path(path).name) or save(state, path)
    straight = make_agent(fabric, seed=10 + rank)
    straight.loop(out_dir / "straight", max_epochs=4).train()
    out["straight"] = training_state(straight)
    out["writes"] = list(writes)  # the straight run's

    split = make_agent(fabric, seed=10 + rank)
    split.loop(out_dir / "split", max_epochs=2).train()
    resumed = make_agent(fabric, seed=50 + rank)  # other seeds: everything must come from the checkpoint
    runner = resumed.loop(out_dir / "split", max_epochs=4)
    runner.resume()
    runner.train()
    out["resumed"] = training_state(resumed)
    torch.save(out, out_dir / f"rank{rank}.pt")
    close_process_group()


@contextlib.contextmanager
def rendezvous_store(world: int):
    """The c10d store of a launch, hosted by this process on a port the OS picks, as torchrun's agent hosts it; the
    ranks join it as clients (``TORCHELASTIC_USE_AGENT_STORE``). Yields the port."""
    store = torch.distributed.TCPStore("127.0.0.1", 0, world, is_master=True, wait_for_workers=False)
    try:
        yield store.port
    finally:
        del store


def torchrun_env(rank: int, world: int, port: int) -> dict[str, str]:
    """The variables torchrun sets for one worker (Fabric detects the launch from them)."""
    return {**os.environ, "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world),
            "LOCAL_WORLD_SIZE": str(world), "GROUP_RANK": "0", "TORCHELASTIC_RUN_ID": "simppo-test",
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "TORCHELASTIC_USE_AGENT_STORE": "True",
            "OMP_NUM_THREADS": "1",
            "PYTHONUNBUFFERED": "1"}


@pytest.fixture(scope="module")
def ranks(tmp_path_factory) -> tuple[Path, list[dict]]:
    out_dir = tmp_path_factory.mktemp("ddp")
    logs = []
    with rendezvous_store(WORLD) as port:
        procs = [subprocess.Popen([sys.executable, "-m", "tests.agent.test_distributed", str(out_dir)],
                                  env=torchrun_env(r, WORLD, port), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, cwd=Path(__file__).parents[2]) for r in range(WORLD)]
        try:
            for p in procs:
                logs.append(p.communicate(timeout=TIMEOUT_S)[0])
        finally:
            for p in procs:
                p.kill()
    for r, p in enumerate(procs):
        assert p.returncode == 0, f"rank {r} exited {p.returncode}:\n{logs[r] if r < len(logs) else ''}"
    return out_dir, [torch.load(out_dir / f"rank{r}.pt", weights_only=True) for r in range(WORLD)]


def test_one_update_equals_a_single_process_update_on_the_concatenated_batch(ranks):
    _, (r0, r1) = ranks
    assert_same(r0["init"], r1["init"], "init")
    assert_same(r0["update"], r1["update"], "update")  # the ranks agree bit for bit
    agent = make_agent(cpu_fabric(), seed=0, num_envs=WORLD * NUM_ENVS)
    agent.union_of = WORLD
    agent.model.load_state_dict(r0["init"])
    ref = run_update(agent, union_batch(agent), slice(None))
    for k, v in ref["model"].items():
        if "norm" in k:  # the batch moments are float32 (two half batches vs the whole), merged in float64
            torch.testing.assert_close(r0["update"]["model"][k], v, rtol=1e-6, atol=1e-7, msg=k)
        else:
            torch.testing.assert_close(r0["update"]["model"][k], v, rtol=0, atol=1e-6, msg=k)
    for k, v in ref["return_rms"].items():
        torch.testing.assert_close(r0["update"]["return_rms"][k], v, rtol=1e-9, atol=1e-12, msg=k)
    assert r0["update"]["actor_lr"] == ref["actor_lr"] != agent_cfg().actor_lr  # the KL rule moved it, alike
    assert r0["update"]["kl"] == pytest.approx(ref["kl"], rel=1e-5)
    assert not torch.equal(r0["init"]["actor.mu.0.weight"], ref["model"]["actor.mu.0.weight"])


def test_parameters_and_statistics_are_identical_on_both_ranks_after_training(ranks):
    _, (r0, r1) = ranks
    s0, s1 = r0["straight"], r1["straight"]
    assert s0["epoch"] == 4 and s0["step_count"] == 4 * NUM_STEPS * NUM_ENVS * WORLD
    for key in ("model", "actor_optimizer", "critic_optimizer", "epoch", "step_count"):
        assert_same(s0[key], s1[key], key)
    rms = [{k: v for k, v in s["running_reward_norm"].items() if k.startswith("return_rms.")} for s in (s0, s1)]
    assert len(rms[0]) == 3
    assert_same(*rms, "return_rms")  # the shared return statistics (the running returns are per env)
    assert not torch.equal(s0["env"]["theta"], s1["env"]["theta"])  # each rank steps its own envs


def test_target_kl_stops_every_rank_at_the_same_minibatch(ranks):
    _, (r0, r1) = ranks
    assert r0["target_kl_steps"] == r1["target_kl_steps"] == agent_cfg().num_minibatches


def test_ranks_with_different_num_envs_are_refused_with_one_message(ranks):
    _, (r0, r1) = ranks
    assert r0["refused"] == r1["refused"]
    assert r0["refused"].startswith(f"the ranks disagree on num_envs (rank 0: {NUM_ENVS}, rank 1: {NUM_ENVS + 1})")


def test_checkpoints_are_written_once_by_rank_zero_with_every_rank_state(ranks):
    out_dir, (r0, r1) = ranks
    assert r0["writes"].count("last.ckpt") == 5  # every epoch, then at the end
    assert set(r0["writes"]) <= {"last.ckpt", "score_based.ckpt"}  # and on a new best episode reward
    assert r1["writes"] == []
    files = {p.name for p in (out_dir / "straight").iterdir()}
    assert {"last.ckpt", "metrics.csv"} <= files <= {"last.ckpt", "metrics.csv", "score_based.ckpt"}
    state = load_checkpoint(out_dir / "straight" / "last.ckpt")
    assert state["world_size"] == WORLD and len(state["ranks"]) == WORLD
    for r, result in enumerate((r0, r1)):
        assert_same(state["ranks"][r]["env"], result["straight"]["env"], f"ranks[{r}].env")
    assert not torch.equal(state["ranks"][0]["rng"]["torch"], state["ranks"][1]["rng"]["torch"])


def test_resume_on_two_ranks_continues_exactly(ranks):
    _, results = ranks
    for r, result in enumerate(results):
        assert_same(result["resumed"], result["straight"], f"rank {r}")


def test_a_checkpoint_of_two_ranks_is_refused_by_one_process(ranks):
    from simppo.agent.checkpoint import CheckpointError

    out_dir, _ = ranks
    agent = make_agent(cpu_fabric(), seed=0)
    with pytest.raises(CheckpointError, match="written by 2 ranks, this run has 1"):
        agent.loop(out_dir / "straight").resume()
    agent.loop(out_dir).load(out_dir / "straight" / "last.ckpt", load_training_state=False)  # weights: fine


if __name__ == "__main__":
    worker(Path(sys.argv[1]))


def test_close_process_group_destroys_the_group_and_is_a_no_op_without_one(tmp_path):
    close_process_group()  # no process group: nothing to do
    torch.distributed.init_process_group("gloo", store=torch.distributed.FileStore(str(tmp_path / "store"), 1),
                                         rank=0, world_size=1)
    try:
        assert torch.distributed.is_initialized()
        close_process_group()
        assert not torch.distributed.is_initialized()
    finally:
        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
