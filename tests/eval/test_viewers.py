"""The viewers' testable parts, headless: the ghost geoms, keys and overlay of the native viewer (with a
stand-in for MuJoCo's viewer handle), and the video writer (frame count, size, contact sheet)."""

import contextlib

import mujoco
import numpy as np
import pytest

from simppo.eval.config import VideoCfg
from simppo.eval.native import NativeSession
from simppo.eval.scene import (
    KEY_BACKSPACE,
    KEY_DOWN,
    KEY_LEFT,
    KEY_PAGE_DOWN,
    KEY_PAGE_UP,
    KEY_RIGHT,
    KEY_SPACE,
    KEY_UP,
    add_ghost,
    handle_key,
    key_help,
    overlay_text,
    visual_geoms,
)


class FakeHandle:
    """What :class:`NativeSession` uses of ``mujoco.viewer.Handle``."""

    def __init__(self, model, running_steps: int):
        self.user_scn = mujoco.MjvScene(model, maxgeom=1000)
        self.texts = None
        self.syncs = 0
        self.left = running_steps

    def lock(self):
        return contextlib.nullcontext()

    def set_texts(self, texts):
        self.texts = texts

    def sync(self):
        self.syncs += 1

    def is_running(self):
        self.left -= 1
        return self.left >= 0


def test_ghost_geoms_sit_on_the_reference_body_poses():
    """Ghost of a reference pose = the model's own geoms after forward kinematics of that pose."""
    from simppo.robot.model import load_mj_model

    model = load_mj_model("g1")
    data = mujoco.MjData(model)
    rng = np.random.default_rng(0)
    data.qpos[:3] = [0.3, -0.2, 0.8]
    q = rng.normal(size=4)
    data.qpos[3:7] = q / np.linalg.norm(q)
    data.qpos[7:] = 0.3 * rng.uniform(-1, 1, model.nq - 7)
    mujoco.mj_kinematics(model, data)
    geoms = visual_geoms(model)
    assert len(geoms) > 20 and all(model.geom_group[g] != 3 for g in geoms)
    scn = mujoco.MjvScene(model, maxgeom=500)
    scn.ngeom = 3  # appended after what is already there
    added = add_ghost(scn, model, data.xpos[1:], data.xquat[1:], geoms, rgba=(0.1, 0.2, 0.9, 0.3))
    assert added == len(geoms) and scn.ngeom == 3 + len(geoms)
    for k, g in enumerate(geoms):
        geom = scn.geoms[3 + k]
        np.testing.assert_allclose(geom.pos, data.geom_xpos[g], atol=1e-5)
        np.testing.assert_allclose(np.asarray(geom.mat).reshape(-1), data.geom_xmat[g], atol=1e-5)
        assert geom.type == model.geom_type[g]
        np.testing.assert_allclose(geom.rgba, [0.1, 0.2, 0.9, 0.3], atol=1e-6)
    small = mujoco.MjvScene(model, maxgeom=5)
    assert add_ghost(small, model, data.xpos[1:], data.xquat[1:], geoms) == 5  # stops at maxgeom


def test_keys_drive_the_player(player):
    names = player.motion_names
    assert handle_key(player, KEY_RIGHT) == "next motion" and player.motion_id == 1
    assert handle_key(player, KEY_LEFT) == "previous motion" and player.motion_id == 0
    handle_key(player, KEY_LEFT)
    assert player.frame.motion_name == names[-1]  # wraps around
    handle_key(player, KEY_SPACE)
    assert player.paused
    t = player.frame.time_s
    player.step()
    assert player.frame.time_s == t  # paused
    handle_key(player, KEY_SPACE)
    for _ in range(5):
        player.step()
    assert player.frame.time_s == pytest.approx(t + 5 * player.env.dt, abs=1e-5)
    assert handle_key(player, KEY_BACKSPACE) == "reset" and player.frame.time_s == 0.0
    handle_key(player, KEY_UP)
    assert not player.show_ghost
    handle_key(player, KEY_DOWN)
    assert player.slow_motion and player.speed < 1.0
    assert handle_key(player, ord("Q")) is None


def test_native_session_draws_ghost_and_text(player):
    model = player.env.sim.mj_model
    data = mujoco.MjData(model)
    session = NativeSession(player, model, data)
    handle = FakeHandle(model, running_steps=3)
    session.run(handle)
    assert handle.syncs == 3 and session.frame.time_s == pytest.approx(3 * player.env.dt, abs=1e-5)
    assert handle.user_scn.ngeom == len(visual_geoms(model))
    np.testing.assert_allclose(data.qpos, session.frame.qpos)
    (_, _, left, right), (_, _, help_text, _) = handle.texts
    assert "motion" in left and player.motion_names[0] in right and "mm" in right
    assert "next" in help_text
    session.key_callback(KEY_RIGHT)
    session.key_callback(KEY_UP)
    assert session.process_keys() == ["next motion", "toggle ghost"]
    session.draw(handle)
    assert handle.user_scn.ngeom == 0  # ghost hidden
    assert player.motion_names[1] in handle.texts[0][3] and "ghost off" in handle.texts[0][3]


def test_overlay_reports_failure(player):
    player.reset(player.motion_names.index("walk"))
    for _ in range(150):
        frame = player.step()
        if frame.failure:
            break
    assert frame.failure, "the untrained policy should fail the walk clip"
    _, values = overlay_text(frame, player)
    assert "FAILED" in values and frame.failure in values


def test_video_writer_frame_count_and_size(player, tmp_path):
    import imageio.v2 as imageio

    from simppo.eval.video import FrameRenderer, contact_sheet, frame_stride, record, write_mp4, write_png

    cfg = VideoCfg(width=96, height=64, fps=25.0)
    renderer = FrameRenderer(player.env.sim.mj_model, cfg)
    images, fps = record(player, renderer, seconds=0.4)
    stride = frame_stride(player.env.dt, cfg.fps)
    steps = round(0.4 / player.env.dt)
    assert stride == 2 and fps == pytest.approx(25.0)
    assert len(images) == 1 + steps // stride
    assert all(im.shape == (64, 96, 3) and im.dtype == np.uint8 for im in images)
    assert images[0].std() > 5.0  # something was drawn
    path = write_mp4(tmp_path / "clip.mp4", images, fps)
    reader = imageio.get_reader(path)
    frames = [f for f in reader]
    assert reader.get_meta_data()["fps"] == pytest.approx(25.0)
    reader.close()
    assert len(frames) == len(images) and frames[0].shape == (64, 96, 3)
    assert np.abs(frames[3].astype(float) - images[3]).mean() < 12.0  # lossy, but the same picture
    sheet = contact_sheet(images, count=6, columns=3, thumb_width=48)
    assert sheet.shape == (2 * 32, 3 * 48, 3)
    assert write_png(tmp_path / "sheet.png", sheet).read_bytes()[:4] == b"\x89PNG"
    renderer.close()


def test_ghost_changes_the_rendered_image(player):
    from simppo.eval.video import FrameRenderer

    renderer = FrameRenderer(player.env.sim.mj_model, VideoCfg(width=96, height=64))
    frame = player.reset(0)
    with_ghost = renderer.render(frame, player, ghost=True)
    without = renderer.render(frame, player, ghost=False)
    assert np.abs(with_ghost.astype(int) - without).sum() > 0
    renderer.close()


def test_training_video_hook(loaded_run, tmp_path):
    """``video_every``: the runner hook writes an MP4 of the first motion (logging to wandb is off here)."""
    from types import SimpleNamespace

    from simppo.eval.loading import build_model
    from simppo.eval.training_video import TrainingVideo

    hook = TrainingVideo(loaded_run.cfg, tmp_path, "cpu", log_to_wandb=False,
                         video=VideoCfg(width=64, height=48, fps=25.0, seconds=0.2))
    runner = SimpleNamespace(algorithm=SimpleNamespace(model=build_model(loaded_run)), epoch=7)
    assert hook(runner) is None
    assert (tmp_path / "videos" / "epoch_7.mp4").stat().st_size > 0


def test_the_player_plays_the_evaluations_draws_of_a_play(loaded_run):
    """Under deploy randomization and noise, the player's start of (motion, play) draws what the evaluation's play of
    that key draws in whatever env slot: the same trajectory; another play of the motion goes otherwise."""
    import torch

    from simppo.eval.loading import build_model, make_eval_env
    from simppo.eval.player import Player

    model = build_model(loaded_run)
    batch = make_eval_env(loaded_run, 4, "cpu", randomization="deploy", obs_noise=True)
    keys = [(0, 0), (1, 1), (2, 1), (3, 0)]  # the evaluator's (motion id, play) slots
    batch.seed_episodes(keys)
    obs = batch.reset_to(torch.tensor([m for m, _ in keys], dtype=torch.int32), torch.zeros(4))
    want = []
    for _ in range(25):
        obs, *_ = batch.step(model.act_inference(obs))
        want.append(batch.sim.qpos[2].clone())
    batch.close()
    one = make_eval_env(loaded_run, 1, "cpu", randomization="deploy", obs_noise=True)
    player = Player(one, model.act_inference, plays=2)

    def trajectory(play: int) -> list[torch.Tensor]:
        player.reset(2, play=play)
        return [player.step().qpos.copy() for _ in range(25)]

    got, other = trajectory(1), trajectory(0)
    one.close()
    assert player.play == 0 and player.motion_id == 2
    np.testing.assert_allclose(np.stack(got), torch.stack(want).numpy(), atol=1e-5)
    assert np.abs(np.stack(other) - np.stack(got)).max() > 1e-3


@pytest.fixture
def noisy_player(loaded_run):
    """A one-env player under deploy randomization and observation noise, stepping through 3 plays."""
    from simppo.eval.loading import build_model, make_eval_env
    from simppo.eval.player import Player

    env = make_eval_env(loaded_run, 1, "cpu", randomization="deploy", obs_noise=True)
    yield Player(env, build_model(loaded_run).act_inference, motion_id=1, plays=3)
    env.close()


def test_play_keys_step_through_the_plays_of_a_motion(noisy_player):
    """PageDown / PageUp restart the motion as its next / previous play (wrapping around), which is what a reset
    to that play draws; the overlay names the play only when there are several."""
    p = noisy_player

    def trajectory() -> np.ndarray:
        return np.stack([p.step().qpos.copy() for _ in range(15)])

    play0 = trajectory()
    assert handle_key(p, KEY_PAGE_DOWN) == "next play"
    assert (p.play, p.motion_id, p.frame.play, p.frame.time_s) == (1, 1, 1, 0.0)
    play1 = trajectory()
    assert np.abs(play1 - play0).max() > 1e-3  # another play draws otherwise
    p.reset(1, play=1)
    np.testing.assert_allclose(trajectory(), play1, atol=1e-6)
    handle_key(p, KEY_PAGE_UP)
    assert p.play == 0
    np.testing.assert_allclose(trajectory(), play0, atol=1e-6)
    assert handle_key(p, KEY_PAGE_UP) == "previous play" and p.play == 2  # wraps around
    handle_key(p, KEY_RIGHT)
    assert (p.motion_id, p.play) == (2, 2)  # another motion keeps the play
    labels, values = overlay_text(p.frame, p)
    assert labels.split("\n")[1] == "play" and values.split("\n")[1] == "2 (0-2)"
    assert "PageDown" in key_help(p)
    for outside in (3, -1):  # no play past the evaluation's: it would show draws that eval.json never reported
        with pytest.raises(ValueError, match="not one of the 3 plays"):
            p.reset(0, play=outside)
    assert (p.motion_id, p.play) == (2, 2)


def test_one_play_shows_no_play_controls(player):
    assert player.plays == 1 and "play" not in overlay_text(player.frame, player)[0]
    assert "PageDown" not in key_help(player)
    handle_key(player, KEY_PAGE_DOWN)
    assert player.play == 0


def test_web_viewer_play_selector(noisy_player):
    """The page's play selector (only with several plays) queues a restart as that play, applied between steps."""
    from simppo.eval.web import WebViewer

    viewer = WebViewer(noisy_player, noisy_player.env.sim.mj_model, "127.0.0.1", 0)
    try:
        assert viewer.play_select is not None and tuple(viewer.play_select.options) == ("0", "1", "2")
        viewer.show(noisy_player.step())
        viewer.commands.put(("play", 2))
        viewer.run(max_steps=3)
        assert noisy_player.play == 2 and noisy_player.frame.time_s == pytest.approx(3 * noisy_player.env.dt)
        assert viewer.play_select.value == "2" and "**play:** 2 (0-2)" in viewer.status.content
    finally:
        viewer.stop()


def test_video_records_every_play(run_dir, tmp_path, capsys):
    from simppo.cli.eval import main as eval_main

    out = tmp_path / "ev"
    assert eval_main([f"checkpoint={run_dir / 'last.ckpt'}", f"out={out}", "viewer=video", "metrics=false",
                      "plays=2", "randomization=deploy", "video.motions=[squat]", "video.seconds=0.2",
                      "video.width=64", "video.height=48"]) == 0
    assert sorted(p.name for p in (out / "videos").iterdir()) == [
        "squat_play0.mp4", "squat_play0_sheet.png", "squat_play1.mp4", "squat_play1_sheet.png"]
    assert "squat play 1:" in capsys.readouterr().out


def test_two_motions_whose_names_make_the_same_file_name_get_two_videos(run_dir, tmp_path):
    from simppo.cli.eval import main as eval_main
    from simppo.motion.pack import pack_motions
    from simppo.paths import MOTIONS_DIR

    manifest = tmp_path / "set.yaml"
    manifest.write_text(f"motions:\n  - {{file: {MOTIONS_DIR / 'squat.csv'}, name: walk/fast}}\n"
                        f"  - {{file: {MOTIONS_DIR / 'stand_sway.csv'}, name: walk_fast}}\n")
    pack_motions([str(manifest)], str(tmp_path / "pack"), robot="g1")
    out = tmp_path / "ev"
    assert eval_main([f"checkpoint={run_dir / 'last.ckpt'}", f"out={out}", "viewer=video", "metrics=false",
                      f"motion.files=[{tmp_path / 'pack'}]", "video.seconds=0.1", "video.width=64",
                      "video.height=48"]) == 0
    assert sorted(p.name for p in (out / "videos").iterdir()) == [
        "walk_fast.mp4", "walk_fast_2.mp4", "walk_fast_2_sheet.png", "walk_fast_sheet.png"]
