"""One policy-driven robot playing a motion from t = 0, for the viewers (native window, web page, video).

:class:`Player` steps a one-env evaluation env (:func:`simppo.eval.loading.make_eval_env`) with the
deterministic policy and hands out :class:`Frame` snapshots (numpy): the robot's pose, the reference
body poses (the ghost), time, body error and failure. It knows nothing of any window; the viewers
call its ``next_motion`` / ``toggle_pause`` / ... from their keys or widgets.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from simppo.eval.metrics import body_position_errors, body_state, cause_names, failure_mask

SLOW_MOTION = 0.25  # playback speed factor of slow motion


def play_label(play: int, plays: int) -> str:
    """How the viewers name play ``play`` of ``plays``: numbered from 0, as ``eval.csv`` and the video files are."""
    return f"{play} (0-{plays - 1})"


@dataclass
class Frame:
    """One control step of env 0. Robot ``qpos [nq]``, ``body_pos [nbody, 3]`` / ``body_quat [nbody, 4]``
    (MuJoCo body ids, 0 = world); reference ``ref_body_pos [B, 3]`` / ``ref_body_quat [B, 4]`` (body
    ``b`` = MuJoCo body ``b + 1``)."""

    motion_id: int
    motion_name: str
    time_s: float
    length_s: float
    qpos: np.ndarray
    body_pos: np.ndarray
    body_quat: np.ndarray
    ref_body_pos: np.ndarray
    ref_body_quat: np.ndarray
    body_error_m: float
    failure: str | None  # "anchor_height @ 1.24 s" once the play has failed (it keeps playing)
    play: int = 0  # which play of the motion (its draws under randomization or noise)


class Player:
    """Plays motion ``motion_id`` of ``env`` (one env) with ``act(obs) -> actions``; loops at the clip end.

    Under randomization or observation noise each start draws as play ``play`` of the motion draws in
    :func:`simppo.eval.metrics.evaluate_motions` (keyed by (motion id, play), :meth:`seed_episodes`), so the
    viewers show the very plays that ``eval.json`` reports; a loop restart replays the same draws. ``plays`` is
    how many plays of each motion the viewer steps through (``simppo-eval plays=K``)."""

    def __init__(self, env, act: Callable, motion_id: int = 0, plays: int = 1):
        if env.num_envs != 1:
            raise ValueError(f"Player needs a one-env env, got num_envs={env.num_envs}")
        if plays < 1:
            raise ValueError(f"Player needs plays >= 1, got {plays}")
        self.plays = int(plays)
        self.env, self.act = env, act
        self.motion_names = list(env.motion_lib.motion_names)
        self.lengths = env.motion_lib.motion_lengths.cpu().tolist()
        self.paused = False
        self.slow_motion = False
        self.show_ghost = True
        self.motion_id = int(motion_id) % len(self.motion_names)
        self.play = 0
        self.reset()

    # ----------------------------------------------------------------- controls
    @property
    def speed(self) -> float:
        return SLOW_MOTION if self.slow_motion else 1.0

    def reset(self, motion_id: int | None = None, time_s: float = 0.0, play: int | None = None) -> Frame:
        """Put the robot on the reference of ``motion_id`` (default: the current one) at ``time_s``, drawing as
        play ``play`` (default: the current one; one of ``0 .. plays - 1``) of that motion."""
        if play is not None and not 0 <= int(play) < self.plays:
            raise ValueError(f"Player.reset: play {play} is not one of the {self.plays} plays (0-{self.plays - 1})")
        if motion_id is not None:
            self.motion_id = int(motion_id) % len(self.motion_names)
        if play is not None:
            self.play = int(play)
        time_s = float(min(max(time_s, 0.0), self.lengths[self.motion_id]))
        dev = self.env.device
        self.env.seed_episodes([(self.motion_id, self.play)])
        self.obs = self.env.reset_to(torch.tensor([self.motion_id], dtype=torch.int32, device=dev),
                                     torch.tensor([time_s], device=dev))
        self.failure: str | None = None
        self.frame = self._snapshot()
        return self.frame

    def select(self, name_or_id: str | int) -> Frame:
        mid = self.motion_names.index(name_or_id) if isinstance(name_or_id, str) else int(name_or_id)
        return self.reset(mid)

    def next_motion(self) -> Frame:
        return self.reset(self.motion_id + 1)

    def prev_motion(self) -> Frame:
        return self.reset(self.motion_id - 1)

    def next_play(self) -> Frame:
        """The motion's next play (its own draws) from t = 0; wraps around after play ``plays - 1``."""
        return self.reset(self.motion_id, play=(self.play + 1) % self.plays)

    def prev_play(self) -> Frame:
        return self.reset(self.motion_id, play=(self.play - 1) % self.plays)

    def toggle_pause(self) -> bool:
        self.paused = not self.paused
        return self.paused

    def toggle_ghost(self) -> bool:
        self.show_ghost = not self.show_ghost
        return self.show_ghost

    def toggle_slow_motion(self) -> bool:
        self.slow_motion = not self.slow_motion
        return self.slow_motion

    # ------------------------------------------------------------------- stepping
    @torch.no_grad()
    def step(self) -> Frame:
        """One control step (none while paused); restarts the motion after its end."""
        if self.paused:
            return self.frame
        if self.frame.time_s >= self.lengths[self.motion_id] - 1e-6:
            return self.reset()
        self.obs, _, _, _, _ = self.env.step(self.act(self.obs))
        self.frame = self._snapshot()
        return self.frame

    def _snapshot(self) -> Frame:
        env = self.env
        s = body_state(env)
        glob, _ = body_position_errors(s["pos"][:1], s["ref_pos"][:1])
        err = float(glob[0])
        t = float(env.times[0])
        if self.failure is None:  # the env's failure flags of this step, and the evaluation's body error
            mask = int(failure_mask(s["fail_bits"][:1], glob)[0])
            if mask:
                self.failure = f"{cause_names(mask)} @ {t:.2f} s"
        return Frame(
            motion_id=self.motion_id, motion_name=self.motion_names[self.motion_id], time_s=t,
            length_s=self.lengths[self.motion_id], qpos=env.sim.qpos[0].cpu().numpy().astype(np.float64),
            body_pos=env.sim.xpos[0].cpu().numpy().astype(np.float64),
            body_quat=env.sim.xquat[0].cpu().numpy().astype(np.float64),
            ref_body_pos=env.ref.body_pos_w[0, 0].cpu().numpy().astype(np.float64),
            ref_body_quat=env.ref.body_quat_w[0, 0].cpu().numpy().astype(np.float64),
            body_error_m=err, failure=self.failure, play=self.play,
        )
