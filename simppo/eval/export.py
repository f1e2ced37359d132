"""``simppo-export``: the deterministic policy as ``policy.onnx`` plus ``policy.json`` for deployment.

``policy.onnx`` is :meth:`PPOModel.act_inference` exported with ``torch.export`` (observation normalizer
with its clip, then the actor mean): input ``obs [batch, obs_dim]`` float32, output
``actions [batch, num_actions]``, dynamic batch. ``policy.json`` holds what a controller needs around it:
joint order, default pose, action scale and clip, PD gains, control dt, the observation layout with its
column slices and the future-frame offsets.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np
import torch

from simppo.agent.models import PPOModel
from simppo.eval.loading import LoadedRun
from simppo.eval.outfiles import temp_output
from simppo.kernels.imitation import spec
from simppo.robot.model import servo_gains

POLICY_FORMAT = "simppo-policy"
_CONVENTIONS = {
    "default": "quaternions wxyz; body terms relative to the root in its heading frame; future terms: the "
               "reference relative to the robot's anchor body (see simppo/kernels/imitation/spec.py)",
    "deploy": "quaternions wxyz; IMU (gravity_b, root_ang_vel_b in the root frame) and encoder terms; per future "
              "frame: ref_anchor_pos = reference anchor at k - reference anchor now in the reference's heading "
              "frame now, anchor_rot6d = reference anchor at k relative to the robot's anchor (torso), "
              "ref_joint_pos, ref_body_pos = reference bodies - reference anchor at k in its heading frame "
              "(see simppo/kernels/imitation/spec.py)",
}


def simppo_version() -> str:
    try:
        return version("simppo")
    except PackageNotFoundError:
        return "unknown"


class InferencePolicy(torch.nn.Module):
    """``obs [B, obs_dim]`` → mean action ``[B, A]``: exactly :meth:`PPOModel.act_inference`."""

    def __init__(self, model: PPOModel):
        super().__init__()
        self.model = model

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.model.act_inference(obs)


def export_onnx(model: PPOModel, obs_dim: int, path: str | Path, opset: int = 18) -> Path:
    """Write ``policy.onnx`` (atomically) with a dynamic batch dimension."""
    import logging
    import warnings

    path = Path(path)
    policy = InferencePolicy(model.cpu().eval()).eval()
    example = torch.zeros(4, obs_dim)
    quiet = logging.getLogger("torch.onnx")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        with temp_output(path) as tmp, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(policy, (example,), tmp, input_names=["obs"], output_names=["actions"],
                              dynamic_shapes={"obs": {0: torch.export.Dim("batch")}}, opset_version=opset,
                              external_data=False, dynamo=True, verbose=False)
    finally:
        quiet.setLevel(level)
    return path


def onnx_parity(model: PPOModel, onnx_path: str | Path, obs_dim: int, num: int = 1000, seed: int = 0,
                scale: float = 3.0) -> float:
    """Max |onnxruntime - torch| over ``num`` random observations (``N(0, scale²)``, so the clip is hit too)."""
    import onnxruntime as ort

    gen = torch.Generator().manual_seed(seed)
    obs = scale * torch.randn(num, obs_dim, generator=gen)
    with torch.no_grad():
        ref = model.cpu().eval().act_inference(obs).numpy()
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    out = session.run(["actions"], {"obs": obs.numpy()})[0]
    return float(np.abs(out - ref).max())


def pd_gains(mj_model, actuator_ids) -> dict[str, list[float]]:
    """kp, kd and effort limit per joint from MuJoCo position actuators (``kp*(target - q) - kd*qdot``)."""
    ids = np.asarray(actuator_ids)
    kp, kd = servo_gains(mj_model, ids)
    limited = mj_model.actuator_forcelimited[ids].astype(bool)
    effort = np.where(limited, np.abs(mj_model.actuator_forcerange[ids]).max(-1), np.inf)
    return {"kp": kp.tolist(), "kd": kd.tolist(),
            "effort_limit": [None if not np.isfinite(e) else float(e) for e in effort]}


def policy_metadata(run: LoadedRun, onnx_file: str = "policy.onnx", opset: int = 18,
                    parity: float | None = None) -> dict:
    """The ``policy.json`` document of a loaded run."""
    from simppo.robot.model import build_robot_model

    cfg = run.cfg
    robot = build_robot_model(cfg.robot)
    m = robot.mj_model
    physics_dt = float(cfg.sim.timestep or m.opt.timestep)
    control_dt = physics_dt * cfg.sim.decimation
    nj, nt = len(cfg.robot.joint_names), len(cfg.robot.tracked_bodies)
    future = list(cfg.env.future_steps)
    lead = int(getattr(cfg.env, "action_reference_lead", 1))
    velocity = float(getattr(cfg.env, "action_reference_velocity", 0.0))
    observations = cfg.env.observations  # default | deploy: the layout the policy was trained on
    history_length = int(getattr(cfg.env, "history_length", 0))
    slices = spec.actor_obs_slices(nj, nt, future, observations, history_length)
    agent = run.state.get("config") or {}
    return {
        "format": POLICY_FORMAT,
        "version": 1,
        "simppo_version": simppo_version(),
        "checkpoint": str(run.checkpoint),
        "epoch": int(run.state.get("epoch", 0)),
        "onnx": {"file": onnx_file, "input": "obs", "output": "actions", "opset": opset,
                 "batch": "dynamic", "dtype": "float32",
                 "contains": "observation normalizer (running mean/std, clipped) + actor mean (deterministic)"},
        "robot": cfg.robot.name,
        "joint_names": list(cfg.robot.joint_names),
        "default_joint_pos": list(cfg.robot.default_joint_pos),
        "action_scale": list(cfg.robot.action_scale),
        "action_clip": float(cfg.env.action_clip),
        "action_reference": float(getattr(cfg.env, "action_reference", 0.0)),
        "action_reference_lead": lead,
        "action_reference_velocity": velocity,
        "joint_target": ("default_joint_pos + action_reference * (reference_joint_pos - default_joint_pos) "
                         "+ action_scale * clip(action, -action_clip, action_clip), where reference_joint_pos are "
                         f"the reference motion's joint angles at t + action_reference_lead * control_dt (t + "
                         f"{lead} * control_dt: the observation's future frame {lead})"),
        "joint_velocity_target": ("action_reference_velocity * reference_joint_vel, the reference motion's joint "
                                  "velocities at the same time: the servo's torque is kp * (joint_target - q) + kd * "
                                  "(joint_velocity_target - qdot), clipped to effort_limit (in simulation the "
                                  "position target carries it as + kd / kp * joint_velocity_target)"),
        "pd_gains": pd_gains(m, robot.actuator_ids),
        "control_dt": control_dt,
        "physics_dt": physics_dt,
        "decimation": int(cfg.sim.decimation),
        "observation": {
            "dim": run.layout.obs_dim,
            "obs_clip": float(agent.get("obs_clip", cfg.agent.obs_clip)),
            "set": observations,
            "layout": [{"name": k, "start": s.start, "stop": s.stop} for k, s in slices.items()],
            "conventions": _CONVENTIONS[observations],
            "history_length": history_length,
            "history": ("none" if history_length < 2 else
                        f"prev<h>_<term> (h = 1 .. {history_length - 1}) is <term> as the policy was fed it h control "
                        "steps before (the noisy reading where there is noise); at an episode's first step every "
                        "prev<h>_<term> equals <term>"),
        },
        "training": {"randomization": cfg.env.randomization.name, "obs_noise": bool(cfg.env.obs_noise)},
        "future_steps": future,
        "future_offsets_s": [k * control_dt for k in future],
        "root_body": cfg.robot.root_body,
        "anchor_body": cfg.robot.anchor_body,
        "tracked_bodies": list(cfg.robot.tracked_bodies),
        "num_actions": nj,
        "onnx_max_abs_diff": parity,
    }
