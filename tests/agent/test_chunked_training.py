"""``motion.chunk=rank`` on two CPU processes (gloo): each rank loads only its share of the shards, while the
per-motion exploration rows and the periodic evaluation cover every motion; a resume with another chunking is
refused with one line and leaves the run's files as they were."""

import sys

from simppo.agent.checkpoint import load_checkpoint
from simppo.motion.index import MotionIndex, assign_shards
from simppo.motion.pack import PackOptions, pack_motions
from simppo.paths import MOTIONS_DIR
from tests.agent.test_distributed_cli import run_group

TIMEOUT_S = 240
CLIPS = ["stand_sway", "squat", "turn"]  # one shard each: 120, 120 and 150 frames
ARGS = ["env=humanoid_imitation", "agent=ppo_small", "device=cpu", "devices=2", "num_envs=4", "agent.num_steps=4",
        "agent.exploration=per_motion", "eval_every=2", "logger=none", "progress_bar=false", "log_every=1"]


def train(*overrides: str) -> tuple[int, str, str]:
    return run_group([sys.executable, "-m", "simppo.cli.train", *ARGS, *overrides], TIMEOUT_S)


def test_two_ranks_train_on_their_own_chunks_and_resume_refuses_another_chunking(tmp_path):
    opts = PackOptions(max_motions_per_shard=1)
    pack = pack_motions([MOTIONS_DIR / f"{c}.csv" for c in CLIPS], tmp_path / "pack", robot="g1", opts=opts).out_dir
    whole = MotionIndex.from_sources([pack])
    split = assign_shards([whole.header(i).num_frames for i in range(3)], 2)
    local = [sum(whole.shards[i].count for i in shards) for shards in split]
    assert sorted(local) == [1, 2]  # the ranks hold different motions, and different numbers of them
    run_dir = tmp_path / "run"
    code, stdout, stderr = train("motion.chunk=rank", f"motion.files=[{pack}]", "max_epochs=2", f"run_dir={run_dir}")
    assert code == 0, stdout + stderr
    state = load_checkpoint(run_dir / "last.ckpt")
    assert state["signature"]["motion_chunk"] == {"mode": "rank", "world_size": 2, "rank_shards": split}
    assert state["model"]["actor.log_std"].shape[0] == 3  # one row per motion of every rank
    for r in range(2):  # each rank sampled only the motions it loaded
        env = state["ranks"][r]["env"]
        assert int(env["motion_ids"].max()) < local[r] and env["motion_ids"].numel() == 4
    header = (run_dir / "metrics.csv").read_text().splitlines()[0]
    assert all(f"eval/{c}/survival_s" in header for c in CLIPS), header  # evaluated on both ranks, gathered

    before = (run_dir / "last.ckpt").read_bytes()
    code, stdout, stderr = train("motion.chunk=all", f"motion.files=[{pack}]", "max_epochs=3", "resume=true",
                                 f"run_dir={run_dir}")
    errors = [x for x in stderr.splitlines() if x.startswith("simppo-train: error:")]
    assert code != 0 and errors, stdout + stderr
    assert "trained with motion.chunk=rank over 2 ranks" in errors[0] and "this run loads motion.chunk=all" in errors[0]
    assert (run_dir / "last.ckpt").read_bytes() == before
