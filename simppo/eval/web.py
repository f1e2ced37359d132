"""``viewer=web``: a browser viewer (viser) for machines where no window can open, e.g. remote GPU servers.

The page shows the policy-driven robot (orange) and the translucent reference ghost (blue), a motion
selector (and a play selector where the player has several plays: ``simppo-eval plays=K``), play/pause and reset
buttons, a time slider, ghost / slow-motion switches and a status line
with the motion name, time and live body error. Widgets only queue commands; the stepping thread
applies them between control steps, so the env is touched by one thread only.
"""

from __future__ import annotations

import queue
import threading
import time

import mujoco
import numpy as np

from simppo.eval.player import Frame, Player, play_label
from simppo.eval.scene import visual_geoms

ROBOT_COLOR = (235, 125, 35)
GHOST_COLOR = (70, 140, 255)
GHOST_OPACITY = 0.4
GUI_PERIOD_S = 0.1


def geom_mesh(model: mujoco.MjModel, g: int):
    """A ``trimesh.Trimesh`` of geom ``g`` in its body's frame (``None`` for planes and unknown types)."""
    import trimesh

    t, size = int(model.geom_type[g]), model.geom_size[g]
    G = mujoco.mjtGeom
    if t == G.mjGEOM_BOX:
        mesh = trimesh.creation.box(extents=2.0 * size[:3])
    elif t == G.mjGEOM_SPHERE:
        mesh = trimesh.creation.icosphere(subdivisions=2, radius=size[0])
    elif t == G.mjGEOM_CAPSULE:
        mesh = trimesh.creation.capsule(height=2.0 * size[1], radius=size[0], count=[12, 12])
    elif t == G.mjGEOM_CYLINDER:
        mesh = trimesh.creation.cylinder(radius=size[0], height=2.0 * size[1], sections=16)
    elif t == G.mjGEOM_ELLIPSOID:
        mesh = trimesh.creation.icosphere(subdivisions=2, radius=1.0)
        mesh.apply_scale(size[:3])
    elif t == G.mjGEOM_MESH:
        m = int(model.geom_dataid[g])
        v0, nv = model.mesh_vertadr[m], model.mesh_vertnum[m]
        f0, nf = model.mesh_faceadr[m], model.mesh_facenum[m]
        mesh = trimesh.Trimesh(model.mesh_vert[v0:v0 + nv].copy(), model.mesh_face[f0:f0 + nf].copy(), process=False)
    else:
        return None
    tf = np.eye(4)
    tf[:3, :3] = mujoco_quat_mat(model.geom_quat[g])
    tf[:3, 3] = model.geom_pos[g]
    mesh.apply_transform(tf)
    return mesh


def mujoco_quat_mat(quat: np.ndarray) -> np.ndarray:
    mat = np.zeros(9)
    mujoco.mju_quat2Mat(mat, np.asarray(quat, dtype=np.float64))
    return mat.reshape(3, 3)


def body_meshes(model: mujoco.MjModel) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Body id → ``(vertices [V, 3] float32, faces [F, 3] uint32)`` of its visible geoms, in the body frame."""
    import trimesh

    parts: dict[int, list] = {}
    for g in visual_geoms(model):
        mesh = geom_mesh(model, int(g))
        if mesh is not None:
            parts.setdefault(int(model.geom_bodyid[g]), []).append(mesh)
    out = {}
    for b, meshes in parts.items():
        merged = trimesh.util.concatenate(meshes)
        out[b] = (np.asarray(merged.vertices, dtype=np.float32), np.asarray(merged.faces, dtype=np.uint32))
    return out


class WebViewer:
    """Serves the viewer at ``http://host:port`` and plays ``player`` (call :meth:`run` or :meth:`start`)."""

    def __init__(self, player: Player, model: mujoco.MjModel, host: str = "127.0.0.1", port: int = 8080,
                 speed: float = 1.0, environment_map: bool = False):
        import viser

        self.player, self.model, self.speed = player, model, float(speed)
        self.environment_map = environment_map
        self.server = viser.ViserServer(host=host, port=port, label="simppo-eval", verbose=False)
        self.host, self.port = host, self.server.get_port()
        self.commands: queue.SimpleQueue = queue.SimpleQueue()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.frames_shown = 0
        self._gui_time, self._gui_state = -1.0, None
        self._build_scene()
        self._build_gui()
        self.show(player.frame)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    # ----------------------------------------------------------------- scene
    def _build_scene(self) -> None:
        scene, m = self.server.scene, self.model
        self.server.initial_camera.position = (2.6, -2.6, 1.6)
        self.server.initial_camera.look_at = (0.0, 0.0, 0.7)
        scene.set_up_direction("+z")
        if not self.environment_map:  # image-based lighting costs ~10x per frame in software WebGL
            scene.configure_environment_map(None)
            scene.configure_default_lights(True, cast_shadow=False)
            scene.add_light_hemisphere("/light/sky", sky_color=(255, 255, 255), ground_color=(90, 90, 100),
                                       intensity=2.0)
        scene.add_grid("/ground", width=20.0, height=20.0, cell_size=0.5, plane="xy", shadow_opacity=0.0)
        names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, b) or f"body{b}" for b in range(m.nbody)]
        self.robot_frames, self.ghost_frames = {}, {}
        for b, (verts, faces) in body_meshes(m).items():
            self.robot_frames[b] = scene.add_frame(f"/robot/{names[b]}", show_axes=False)
            scene.add_mesh_simple(f"/robot/{names[b]}/mesh", verts, faces, color=ROBOT_COLOR, cast_shadow=False,
                                  receive_shadow=False)
            self.ghost_frames[b] = scene.add_frame(f"/ghost/{names[b]}", show_axes=False)
            scene.add_mesh_simple(f"/ghost/{names[b]}/mesh", verts, faces, color=GHOST_COLOR, opacity=GHOST_OPACITY,
                                  cast_shadow=False, receive_shadow=False)

    def show(self, frame: Frame) -> None:
        """Move the robot and ghost bodies to ``frame`` and refresh the status widgets."""
        with self.server.atomic():
            for b, handle in self.robot_frames.items():
                handle.position = frame.body_pos[b]
                handle.wxyz = frame.body_quat[b]
            ghost = self.player.show_ghost
            for b, handle in self.ghost_frames.items():
                handle.visible = ghost
                if ghost:
                    handle.position = frame.ref_body_pos[b - 1]
                    handle.wxyz = frame.ref_body_quat[b - 1]
            now = time.monotonic()
            state = (frame.motion_name, frame.play, self.player.paused, frame.failure)
            if now - self._gui_time >= GUI_PERIOD_S or state != self._gui_state:
                # widgets at ~10 Hz: a page re-laid out 50 times a second is slow to use (and to test)
                motion_changed = self._gui_state is None or frame.motion_name != self._gui_state[0]
                play_changed = self._gui_state is None or frame.play != self._gui_state[1]
                self._gui_time, self._gui_state = now, state
                self.status.content = self.status_text(frame, self.player.plays)
                self.time_slider.max = max(frame.length_s, 1e-3)
                self.time_slider.value = round(min(frame.time_s, frame.length_s), 2)
                # the selector follows the player only when the player's motion changed: a pick the stepping
                # thread has not applied yet must not be overwritten by the old motion (the pick would be lost)
                if motion_changed and self.motion.value != frame.motion_name:
                    self.motion.value = frame.motion_name
                if self.play_select is not None and play_changed and self.play_select.value != str(frame.play):
                    self.play_select.value = str(frame.play)
                self.play_button.label = "Play" if self.player.paused else "Pause"
        self.frames_shown += 1

    @staticmethod
    def status_text(frame: Frame, plays: int = 1) -> str:
        state = f"FAILED: {frame.failure}" if frame.failure else "tracking"
        play = f"**play:** {play_label(frame.play, plays)}  \n" if plays > 1 else ""
        return (f"**motion:** {frame.motion_name}  \n{play}**time:** {frame.time_s:.2f} / {frame.length_s:.2f} s  \n"
                f"**body error:** {1000.0 * frame.body_error_m:.0f} mm  \n**state:** {state}")

    # ------------------------------------------------------------------- GUI
    def _build_gui(self) -> None:
        gui, p = self.server.gui, self.player
        self.motion = gui.add_dropdown("Motion", options=tuple(p.motion_names),
                                       initial_value=p.motion_names[p.motion_id])
        # each play draws its own randomization and noise, numbered as in eval.csv and the video files
        self.play_select = (gui.add_dropdown("Play", options=tuple(str(k) for k in range(p.plays)),
                                             initial_value=str(p.play)) if p.plays > 1 else None)
        self.play_button = gui.add_button("Pause")
        self.reset_button = gui.add_button("Reset")
        self.time_slider = gui.add_slider("Time (s)", min=0.0, max=max(p.lengths[p.motion_id], 1e-3), step=0.01,
                                          initial_value=0.0)
        self.ghost_box = gui.add_checkbox("Ghost", initial_value=p.show_ghost)
        self.slow_box = gui.add_checkbox("Slow motion", initial_value=p.slow_motion)
        self.status = gui.add_markdown(self.status_text(p.frame, p.plays))

        def from_client(fn):
            def handler(event) -> None:
                if event.client is not None:  # ignore the echo of the server's own updates
                    fn(event)
            return handler

        self.motion.on_update(from_client(lambda e: self.commands.put(("select", self.motion.value))))
        if self.play_select is not None:
            self.play_select.on_update(from_client(lambda e: self.commands.put(("play", int(self.play_select.value)))))
        self.time_slider.on_update(from_client(lambda e: self.commands.put(("seek", float(self.time_slider.value)))))
        self.ghost_box.on_update(from_client(lambda e: self.commands.put(("ghost", bool(self.ghost_box.value)))))
        self.slow_box.on_update(from_client(lambda e: self.commands.put(("slow", bool(self.slow_box.value)))))
        self.play_button.on_click(lambda e: self.commands.put(("pause", None)))
        self.reset_button.on_click(lambda e: self.commands.put(("reset", None)))

    def apply_commands(self) -> None:
        p = self.player
        while True:
            try:
                cmd, arg = self.commands.get_nowait()
            except queue.Empty:
                return
            if cmd == "select":
                p.select(arg)
            elif cmd == "play":
                p.reset(p.motion_id, play=arg)
            elif cmd == "seek":
                p.reset(p.motion_id, arg)
            elif cmd == "ghost":
                p.show_ghost = arg
            elif cmd == "slow":
                p.slow_motion = arg
            elif cmd == "pause":
                p.toggle_pause()
            elif cmd == "reset":
                p.reset()

    # ------------------------------------------------------------------- loop
    def run(self, max_steps: int | None = None) -> None:
        """Step the player in real time (times the speed) and stream the poses until :meth:`stop`."""
        dt = float(self.player.env.dt)
        next_time = time.perf_counter()
        steps = 0
        while not self._stop.is_set() and (max_steps is None or steps < max_steps):
            self.apply_commands()
            self.show(self.player.step())
            steps += 1
            next_time += dt / (self.speed * self.player.speed)
            delay = next_time - time.perf_counter()
            if delay > 0:
                self._stop.wait(delay)
            else:
                next_time = time.perf_counter()

    def start(self) -> WebViewer:
        """Run the loop on a background thread."""
        self._thread = threading.Thread(target=self.run, name="simppo-web-viewer", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10.0)
        self.server.stop()
