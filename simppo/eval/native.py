"""``viewer=native``: MuJoCo's interactive viewer (``mujoco.viewer.launch_passive``) on a :class:`Player`.

:class:`NativeSession` holds everything but the window: it turns queued key presses into player actions,
steps the player at the playback speed, and draws the ghost and the text into a viewer handle (anything
with ``user_scn``, ``lock()``, ``set_texts()``, ``sync()``, ``is_running()``), so it is tested headless
with a stand-in handle. :func:`run_native` opens the real window.
"""

from __future__ import annotations

import queue
import time

import mujoco

from simppo.eval.player import Frame, Player
from simppo.eval.scene import add_ghost, handle_key, key_help, overlay_text, visual_geoms


class NativeSession:
    def __init__(self, player: Player, model: mujoco.MjModel, data: mujoco.MjData):
        self.player, self.model, self.data = player, model, data
        self.keys: queue.SimpleQueue[int] = queue.SimpleQueue()
        self.geoms = visual_geoms(model)
        self.frame: Frame = player.frame
        self.last_action: str | None = None
        self._sync_data()

    def key_callback(self, keycode: int) -> None:
        """Called on the viewer's thread: queue the key for the stepping thread."""
        self.keys.put(int(keycode))

    def process_keys(self) -> list[str]:
        done = []
        while True:
            try:
                key = self.keys.get_nowait()
            except queue.Empty:
                break
            name = handle_key(self.player, key)
            if name:
                done.append(name)
                self.last_action = name
                self.frame = self.player.frame
        if done:
            self._sync_data()
        return done

    def tick(self) -> Frame:
        """Apply queued keys, then one control step of the player."""
        self.process_keys()
        self.frame = self.player.step()
        self._sync_data()
        return self.frame

    def _sync_data(self) -> None:
        self.data.qpos[:] = self.frame.qpos
        self.data.qvel[:] = 0.0
        mujoco.mj_kinematics(self.model, self.data)

    def draw(self, handle) -> None:
        """Ghost geoms into ``handle.user_scn`` and the text overlay (call with the viewer unlocked)."""
        left, right = overlay_text(self.frame, self.player)
        with handle.lock():
            scn = handle.user_scn
            scn.ngeom = 0
            if self.player.show_ghost:
                add_ghost(scn, self.model, self.frame.ref_body_pos, self.frame.ref_body_quat, self.geoms)
        handle.set_texts([
            (mujoco.mjtFontScale.mjFONTSCALE_150, mujoco.mjtGridPos.mjGRID_TOPLEFT, left, right),
            (mujoco.mjtFontScale.mjFONTSCALE_100, mujoco.mjtGridPos.mjGRID_BOTTOMLEFT, key_help(self.player), ""),
        ])

    def run(self, handle, max_steps: int | None = None) -> None:
        """Step in real time (times the playback speed) until the window closes (or ``max_steps``)."""
        dt = float(self.player.env.dt)
        steps = 0
        next_time = time.perf_counter()
        while handle.is_running() and (max_steps is None or steps < max_steps):
            self.tick()
            self.draw(handle)
            handle.sync()
            steps += 1
            next_time += dt / self.player.speed
            delay = next_time - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            else:
                next_time = time.perf_counter()


def run_native(player: Player, model: mujoco.MjModel) -> None:
    """Open MuJoCo's viewer on ``player`` (needs a display) and play until the window is closed."""
    import mujoco.viewer

    data = mujoco.MjData(model)
    session = NativeSession(player, model, data)
    with mujoco.viewer.launch_passive(model, data, key_callback=session.key_callback, show_left_ui=False,
                                      show_right_ui=False) as handle:
        handle.cam.type = int(mujoco.mjtCamera.mjCAMERA_TRACKING)
        handle.cam.trackbodyid = int(player.env.sim.robot.root_body_id)
        handle.cam.distance = 3.2
        session.run(handle)
