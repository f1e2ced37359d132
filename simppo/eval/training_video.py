"""``video_every=K`` in ``simppo-train``: every K epochs a short clip of the first motion, played by the
current policy from t = 0, is written to ``<run_dir>/videos/epoch_<N>.mp4`` and logged to wandb
(offline runs included: ``wandb sync`` uploads it later)."""

from __future__ import annotations

from pathlib import Path

from simppo.eval.config import VideoCfg

TRAINING_VIDEO = VideoCfg(width=480, height=360, fps=25.0, seconds=4.0)


class TrainingVideo:
    """An epoch hook of :class:`~simppo.agent.runner.Runner` (``fn(runner) -> dict to log``). Builds its own
    one-env evaluation env on first use, so the training env's state is never touched."""

    def __init__(self, cfg, run_dir: str | Path, device: str, log_to_wandb: bool = True,
                 video: VideoCfg = TRAINING_VIDEO, motion_id: int = 0):
        self.cfg, self.run_dir, self.device = cfg, Path(run_dir), device
        self.log_to_wandb, self.video, self.motion_id = log_to_wandb, video, motion_id
        self._player = None
        self._renderer = None
        self._model = None

    def _setup(self, model) -> None:
        from simppo.eval.loading import build_eval_env
        from simppo.eval.player import Player
        from simppo.eval.video import FrameRenderer

        env = build_eval_env(self.cfg, 1, self.device)
        self._model = model
        self._player = Player(env, lambda obs: self._model.act_inference(obs), self.motion_id)
        self._renderer = FrameRenderer(env.sim.mj_model, self.video, root_body=int(env.sim.robot.root_body_id))

    def __call__(self, runner) -> dict | None:
        from simppo.eval.video import record, write_mp4

        model = runner.algorithm.model
        if self._player is None:
            self._setup(model)
        self._model = model
        was_training = model.training
        model.eval()
        try:
            self._player.reset(self.motion_id)
            images, fps = record(self._player, self._renderer, self.video.seconds)
        finally:
            model.train(was_training)
        path = write_mp4(self.run_dir / "videos" / f"epoch_{runner.epoch}.mp4", images, fps)
        if not self.log_to_wandb:
            return None
        import wandb

        return {"video/first_motion": wandb.Video(str(path), format="mp4")}
