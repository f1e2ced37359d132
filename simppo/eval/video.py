"""Headless MP4 of a policy-driven play (``viewer=video``), with the reference ghost, a tracking camera
and a text overlay, plus a PNG contact sheet.

Renders with ``mujoco.Renderer`` (set ``MUJOCO_GL=egl`` before MuJoCo is first imported on machines
without a display; the CLIs do) and writes H.264 with imageio-ffmpeg (its ffmpeg binary ships in the
wheel). Files are written to a temp file and moved into place.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path

import mujoco
import numpy as np

from simppo.eval.config import VideoCfg
from simppo.eval.outfiles import temp_output
from simppo.eval.player import Frame, Player
from simppo.eval.scene import add_ghost, overlay_text, track_camera, visual_geoms
from simppo.utils.files import atomic_write


class FrameRenderer:
    """Renders :class:`Frame` s of one robot model to RGB ``uint8 [H, W, 3]`` images."""

    def __init__(self, model: mujoco.MjModel, cfg: VideoCfg | None = None, root_body: int = 1):
        self.cfg = cfg = cfg or VideoCfg()
        if cfg.width % 2 or cfg.height % 2 or cfg.width < 16 or cfg.height < 16:
            raise ValueError(f"video size {cfg.width}x{cfg.height}: width and height must be even and >= 16")
        self.model = model = copy.deepcopy(model)  # visual settings only; the sim's model is left alone
        model.vis.global_.offwidth = max(int(model.vis.global_.offwidth), cfg.width)
        model.vis.global_.offheight = max(int(model.vis.global_.offheight), cfg.height)
        model.vis.headlight.ambient[:] = 0.35
        model.vis.headlight.diffuse[:] = 0.55
        self.data = mujoco.MjData(model)
        self.renderer = mujoco.Renderer(model, cfg.height, cfg.width)
        self.camera = mujoco.MjvCamera()
        self.root_body = root_body
        self.geoms = visual_geoms(model)
        self._font = None

    def render(self, frame: Frame, player: Player | None = None, ghost: bool = True) -> np.ndarray:
        c = self.cfg
        self.data.qpos[:] = frame.qpos
        mujoco.mj_kinematics(self.model, self.data)
        track_camera(self.camera, frame, self.root_body, c.distance, c.elevation, c.azimuth)
        self.renderer.update_scene(self.data, camera=self.camera)
        scn = self.renderer.scene
        if not c.shadows:
            scn.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = 0
            scn.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = 0
        if ghost:
            add_ghost(scn, self.model, frame.ref_body_pos, frame.ref_body_quat, self.geoms)
        image = self.renderer.render()
        return self._overlay(image, frame, player)

    def _overlay(self, image: np.ndarray, frame: Frame, player: Player | None) -> np.ndarray:
        from PIL import Image, ImageDraw, ImageFont

        if self._font is None:
            self._font = ImageFont.load_default(size=max(10, self.cfg.height // 32))
        img = Image.fromarray(image)
        draw = ImageDraw.Draw(img)
        labels, values = overlay_text(frame, player)
        x0 = 8
        lw = max(draw.textlength(s, font=self._font) for s in labels.split("\n"))
        draw.multiline_text((x0 + 1, 9), labels, font=self._font, fill=(0, 0, 0))
        draw.multiline_text((x0, 8), labels, font=self._font, fill=(255, 255, 255))
        draw.multiline_text((x0 + lw + 13, 9), values, font=self._font, fill=(0, 0, 0))
        draw.multiline_text((x0 + lw + 12, 8), values, font=self._font,
                            fill=(255, 120, 110) if frame.failure else (255, 255, 255))
        return np.asarray(img)

    def close(self) -> None:
        self.renderer.close()


def frame_stride(dt: float, fps: float) -> int:
    """Control steps per video frame for about ``fps`` frames per second of motion."""
    return max(1, round(1.0 / (dt * fps)))


def record(player: Player, renderer: FrameRenderer, seconds: float | None = None) -> tuple[list[np.ndarray], float]:
    """Play the player's current motion from t = 0 for ``seconds`` (default: the clip) and render it;
    returns ``(images, fps)``."""
    dt = float(player.env.dt)
    stride = frame_stride(dt, renderer.cfg.fps)
    frame = player.reset()
    length = frame.length_s if seconds is None else min(seconds, frame.length_s)
    steps = max(1, math.ceil(length / dt - 1e-6))
    images = [renderer.render(frame, player)]
    for k in range(1, steps + 1):
        frame = player.step()
        if k % stride == 0:
            images.append(renderer.render(frame, player))
    return images, 1.0 / (dt * stride)


def write_mp4(path: str | Path, images: list[np.ndarray], fps: float) -> Path:
    """H.264 MP4 of ``images`` (``uint8 [H, W, 3]``, even sizes), written atomically."""
    import imageio.v2 as imageio

    path = Path(path)
    with temp_output(path) as tmp, imageio.get_writer(tmp, format="FFMPEG", mode="I", fps=fps, codec="libx264",
                                                      quality=7, macro_block_size=1, pixelformat="yuv420p",
                                                      ffmpeg_log_level="error") as writer:
        for image in images:
            writer.append_data(image)
    return path


def contact_sheet(images: list[np.ndarray], count: int = 8, columns: int = 4, thumb_width: int = 320,
                  labels: list[str] | None = None) -> np.ndarray:
    """``count`` evenly spaced thumbnails of ``images`` on a grid (``uint8 [H, W, 3]``)."""
    from PIL import Image, ImageDraw, ImageFont

    count = max(1, min(count, len(images)))
    picks = np.linspace(0, len(images) - 1, count).round().astype(int)
    h0, w0 = images[0].shape[:2]
    tw, th = thumb_width, max(2, round(thumb_width * h0 / w0))
    columns = max(1, min(columns, count))
    rows = math.ceil(count / columns)
    sheet = Image.new("RGB", (columns * tw, rows * th), (255, 255, 255))
    font = ImageFont.load_default(size=max(10, th // 14))
    for k, i in enumerate(picks):
        thumb = Image.fromarray(images[i]).resize((tw, th), Image.LANCZOS)
        if labels is not None:
            ImageDraw.Draw(thumb).text((6, th - th // 9), labels[i], font=font, fill=(255, 255, 0))
        sheet.paste(thumb, ((k % columns) * tw, (k // columns) * th))
    return np.asarray(sheet)


def write_png(path: str | Path, image: np.ndarray) -> Path:
    from PIL import Image

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write(path, lambda f: Image.fromarray(image).save(f, format="PNG"))


def record_motion(player: Player, renderer: FrameRenderer, motion_id: int, out_dir: Path,
                  seconds: float | None = None, stem: str | None = None, play: int = 0) -> dict[str, Path]:
    """``<stem>.mp4`` and ``<stem>_sheet.png`` of play ``play`` of one motion (stem: the motion name)."""
    player.reset(motion_id, play=play)
    images, fps = record(player, renderer, seconds)
    stem = stem or player.motion_names[motion_id]
    dt = 1.0 / fps
    labels = [f"t = {k * dt:.2f} s" for k in range(len(images))]
    c = renderer.cfg
    return {
        "video": write_mp4(out_dir / f"{stem}.mp4", images, fps),
        "sheet": write_png(out_dir / f"{stem}_sheet.png",
                           contact_sheet(images, c.contact_sheet_frames, c.contact_sheet_columns, labels=labels)),
    }
