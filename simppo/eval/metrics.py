"""Tracking metrics of a deterministic play from t = 0 (ProtoMotions-style), batched over envs.

Per motion: success (no termination and a mean body-position error under
:data:`SUCCESS_MAX_BODY_ERROR_M` at every step), survival time, MPJPE global and root-relative (mm),
mean absolute joint-angle error (rad), body velocity and acceleration errors (finite differences of the
body positions, as ProtoMotions computes them; m/s and m/s²), and the time and cause of the failure.

Errors are taken over every MuJoCo body but the world body (``B = nbody - 1``, the motion library's body
axis), robot bodies ``sim.xpos[:, 1:]`` against the reference ``ref.body_pos_w[:, 0]``, and averaged over
the steps an env played (until its failure step, included, or its clip end). The failure causes are the env's
own: its termination kernel (:mod:`simppo.kernels.imitation.terminations`) flags every cause in
``env.fail_bits``, and the evaluation env ends episodes only on unstable worlds (``terminations.end_causes``, see
:func:`simppo.eval.loading.eval_env_cfg`), so the failing state stays readable. ``body_error`` (mean global body
error above :data:`SUCCESS_MAX_BODY_ERROR_M`) is the evaluation's own criterion of failure.

Three body errors, one definition each (metres; reported in mm as ``mpjpe_*``):
- global MPJPE: mean over bodies of ``|p_robot - p_ref|`` in the world frame (:func:`body_position_errors`);
- root-relative MPJPE: the same with both sets relative to their own root body, without rotation;
- anchor-aligned body error: the reward's ``error/body_pos`` (tracked bodies, the reference moved onto the robot's
  anchor and heading), as the reward kernel writes it in ``env.errors``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields

import torch

from simppo.kernels.imitation.spec import CAUSE_BIT, ERROR_INDEX, TERMINATION_CAUSES

SUCCESS_MAX_BODY_ERROR_M = 0.5
#: Failure causes: the env's terminations (bit i = ``spec.CAUSE_BIT``), then the evaluation's body error.
FAILURE_CAUSES = (*TERMINATION_CAUSES, "body_error")
_UNSTABLE = CAUSE_BIT["unstable"]
_TRACKING_FAILURES = sum(CAUSE_BIT[c] for c in TERMINATION_CAUSES if c != "unstable")
_BODY_ERROR = 1 << len(TERMINATION_CAUSES)
_ANCHOR_BODY_POS = ERROR_INDEX["body_pos"]


# ----------------------------------------------------------------------------- pure functions
def body_position_errors(pos: torch.Tensor, ref_pos: torch.Tensor, root: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``pos`` / ``ref_pos [N, B, 3]`` → mean body-position error ``[N]`` (m): global, and root-relative
    (both sets expressed relative to their own body ``root``, without rotation)."""
    glob = (pos - ref_pos).norm(dim=-1).mean(-1)
    local = ((pos - pos[:, root:root + 1]) - (ref_pos - ref_pos[:, root:root + 1])).norm(dim=-1).mean(-1)
    return glob, local


def joint_angle_error(q: torch.Tensor, ref_q: torch.Tensor) -> torch.Tensor:
    """Mean absolute joint-angle error ``[N]`` (rad) of ``q`` / ``ref_q [N, J]``."""
    return (q - ref_q).abs().mean(-1)


def failure_mask(fail_bits: torch.Tensor, body_error: torch.Tensor,
                 max_body_error_m: float = SUCCESS_MAX_BODY_ERROR_M) -> torch.Tensor:
    """Bit masks ``[N]`` of :data:`FAILURE_CAUSES` from the env's ``fail_bits [N]`` (its termination causes)
    and the global body error ``[N]`` (m): the evaluation's ``body_error`` above ``max_body_error_m``
    (``math.inf``: the env's terminations alone)."""
    bits = fail_bits.long() & (_TRACKING_FAILURES | _UNSTABLE)
    return bits | torch.where(body_error > max_body_error_m, _BODY_ERROR, 0)


def cause_names(mask: int) -> str:
    """Bit mask of :data:`FAILURE_CAUSES` → ``"anchor_height+ee_height"``."""
    return "+".join(name for i, name in enumerate(FAILURE_CAUSES) if mask >> i & 1)


# ----------------------------------------------------------------------------- accumulation
class TrackingAccumulator:
    """Per-env running sums of one round of plays (device tensors; no host sync per step).

    ``start(pos0, ref_pos0, num_steps)`` with the poses at t = 0 and each env's number of control steps,
    then ``update(...)`` after every control step, then ``finish()`` (one host transfer).
    """

    def __init__(self, num_envs: int, device: str | torch.device, dt: float,
                 max_body_error_m: float = SUCCESS_MAX_BODY_ERROR_M):
        self.num_envs, self.device, self.dt = num_envs, torch.device(device), float(dt)
        self.max_body_error_m = float(max_body_error_m)
        f32 = {"dtype": torch.float32, "device": self.device}
        self.step = 0
        self.num_steps = torch.zeros(num_envs, dtype=torch.int64, device=self.device)
        self.alive = torch.zeros(num_envs, dtype=torch.bool, device=self.device)
        self.fail_step = torch.zeros(num_envs, dtype=torch.int64, device=self.device)
        self.fail_mask = torch.zeros(num_envs, dtype=torch.int64, device=self.device)
        self.sums = {k: torch.zeros(num_envs, **f32) for k in ("global", "local", "anchor", "joint", "vel", "acc")}
        self.counts = {k: torch.zeros(num_envs, **f32) for k in ("pos", "vel", "acc")}
        self.max_error = torch.zeros(num_envs, **f32)
        self._prev: tuple[torch.Tensor, ...] | None = None

    def start(self, pos0: torch.Tensor, ref_pos0: torch.Tensor, num_steps: torch.Tensor) -> None:
        self.step = 0
        self.num_steps.copy_(num_steps)
        self.alive.fill_(True)
        self.fail_step.zero_()
        self.fail_mask.zero_()
        for t in (*self.sums.values(), *self.counts.values(), self.max_error):
            t.zero_()
        self._prev = (pos0.clone(), ref_pos0.clone(), None, None)

    @property
    def playing(self) -> torch.Tensor:
        """``[N]`` bool: envs still inside their clip and not failed (before the next update)."""
        return self.alive & (self.step < self.num_steps)

    def update(self, pos: torch.Tensor, ref_pos: torch.Tensor, q: torch.Tensor, ref_q: torch.Tensor,
               fail_bits: torch.Tensor, anchor_error: torch.Tensor | None = None) -> None:
        """One control step: body positions ``[N, B, 3]``, joint angles ``[N, J]``, the env's ``fail_bits [N]``
        (``spec.CAUSE_BIT`` of every end cause that held; an ``unstable`` world was reset by the env: this step's
        state is not used) and the reward's anchor-aligned body error ``anchor_error [N]`` (m)."""
        self.step += 1
        valid = self.alive & (self.step <= self.num_steps)
        fail_bits = fail_bits.long()
        unstable = (fail_bits & _UNSTABLE) != 0
        measured = valid & ~unstable
        w = measured.float()
        glob, local = body_position_errors(pos, ref_pos)
        self.sums["global"] += w * glob
        self.sums["local"] += w * local
        self.sums["joint"] += w * joint_angle_error(q, ref_q)
        if anchor_error is not None:
            self.sums["anchor"] += w * anchor_error
        self.counts["pos"] += w
        self.max_error = torch.maximum(self.max_error, torch.where(measured, glob, torch.zeros_like(glob)))
        prev_pos, prev_ref, prev_vel, prev_ref_vel = self._prev
        vel, ref_vel = (pos - prev_pos) / self.dt, (ref_pos - prev_ref) / self.dt
        self.sums["vel"] += w * (vel - ref_vel).norm(dim=-1).mean(-1)
        self.counts["vel"] += w
        if prev_vel is not None:
            acc, ref_acc = (vel - prev_vel) / self.dt, (ref_vel - prev_ref_vel) / self.dt
            self.sums["acc"] += w * (acc - ref_acc).norm(dim=-1).mean(-1)
            self.counts["acc"] += w
        self._prev = (pos.clone(), ref_pos.clone(), vel, ref_vel)
        mask = torch.where(measured, failure_mask(fail_bits, glob, self.max_body_error_m),
                           torch.where(unstable, _UNSTABLE, 0))
        failed = valid & (mask != 0)
        self.fail_mask = torch.where(failed, mask, self.fail_mask)
        self.fail_step = torch.where(failed, torch.full_like(self.fail_step, self.step), self.fail_step)
        self.alive &= ~failed

    def finish(self) -> dict[str, list]:
        """Host lists per env: ``success``, ``survival_steps``, ``fail_step``, ``fail_mask``, and the mean
        errors ``mpjpe_global_m``, ``mpjpe_local_m``, ``joint_rad``, ``vel_mps``, ``acc_mps2``, ``max_error_m``."""
        def mean(key: str, count: str) -> torch.Tensor:
            c = self.counts[count]
            return torch.where(c > 0, self.sums[key] / c.clamp_min(1.0), torch.full_like(c, float("nan")))

        failed = self.fail_mask != 0
        survival = torch.where(failed, self.fail_step, self.num_steps)
        rows = torch.stack([(~failed).double(), survival.double(), self.fail_step.double(),
                            self.fail_mask.double(), mean("global", "pos").double(), mean("local", "pos").double(),
                            mean("anchor", "pos").double(), mean("joint", "pos").double(),
                            mean("vel", "vel").double(), mean("acc", "acc").double(), self.max_error.double()])
        host = rows.cpu().tolist()  # the one host transfer of a round
        keys = ("success", "survival_steps", "fail_step", "fail_mask", "mpjpe_global_m", "mpjpe_local_m",
                "anchor_body_error_m", "joint_rad", "vel_mps", "acc_mps2", "max_error_m")
        out = dict(zip(keys, host, strict=True))
        for k in ("success",):
            out[k] = [bool(v) for v in out[k]]
        for k in ("survival_steps", "fail_step", "fail_mask"):
            out[k] = [int(v) for v in out[k]]
        return out


# ----------------------------------------------------------------------------- batched evaluation
@dataclass
class MotionResult:
    """Metrics of one motion (JSON / CSV row)."""

    name: str
    motion_id: int
    success: bool
    survival_s: float
    length_s: float
    mpjpe_global_mm: float
    mpjpe_local_mm: float
    anchor_body_error_m: float  # the reward's anchor-aligned tracked-body error (error/body_pos)
    joint_angle_error_rad: float
    velocity_error_mps: float
    acceleration_error_mps2: float
    max_body_error_m: float
    failure: dict | None  # {"time_s", "cause"} (cause: FAILURE_CAUSES names joined by "+")
    play: int = 0  # which play of the motion (0 .. plays - 1; each draws its own randomization and noise)

    def to_json(self) -> dict:
        """Plain types; floats rounded to 6 decimals, NaN (nothing measured) → ``None``."""
        out = asdict(self)
        for k, v in out.items():
            if isinstance(v, float):
                out[k] = round(v, 6) if math.isfinite(v) else None
        if out["failure"]:
            out["failure"]["time_s"] = round(out["failure"]["time_s"], 6)
        return out

    @classmethod
    def from_json(cls, d: dict) -> MotionResult:
        """The inverse of :meth:`to_json` (``None`` → NaN); ``ValueError`` when ``d`` is not such a row. A row
        written before plays were counted (no ``play``) is play 0."""
        names = [f.name for f in fields(cls)]
        if isinstance(d, dict) and "play" not in d:
            d = {**d, "play": 0}
        if not isinstance(d, dict) or sorted(d) != sorted(names):
            raise ValueError("not a motion result row")
        return cls(**{k: (math.nan if d[k] is None and k not in ("failure",) else d[k]) for k in names})


def clip_steps(length_s: float, dt: float) -> int:
    """Control steps that cover a clip of ``length_s`` from t = 0 (at least one)."""
    return max(1, math.ceil(length_s / dt - 1e-6))


def body_state(env) -> dict[str, torch.Tensor]:
    """The robot and reference quantities the metrics read from a humanoid-imitation env (views)."""
    r = env.sim.robot
    j0 = env.joint_qpos_start
    anchor, ee = int(r.anchor_body_id), torch.as_tensor(r.end_effector_ids, dtype=torch.long, device=env.device)
    ref = env.ref
    return {
        "pos": env.sim.xpos[:, 1:], "ref_pos": ref.body_pos_w[:, 0],
        "q": env.sim.qpos[:, j0:j0 + env.num_actions], "ref_q": ref.dof_pos[:, 0],
        "anchor_pos": env.sim.xpos[:, anchor], "ref_anchor_pos": ref.body_pos_w[:, 0, anchor - 1],
        "ee_pos": env.sim.xpos[:, ee], "ref_ee_pos": ref.body_pos_w[:, 0, ee - 1],
        "fail_bits": env.fail_bits, "anchor_error": env.errors[:, _ANCHOR_BODY_POS],
    }


@torch.no_grad()
def evaluate_motions(env, act: Callable, motion_ids: list[int] | None = None,
                     progress: Callable[[int, int], None] | None = None, check_every: int = 25,
                     max_body_error_m: float = SUCCESS_MAX_BODY_ERROR_M,
                     done: dict[tuple[int, int], MotionResult] | None = None,
                     on_round: Callable[[list[MotionResult]], None] | None = None,
                     plays: int = 1) -> list[MotionResult]:
    """Play every motion (or ``motion_ids``) ``plays`` times from t = 0 with ``act(obs) -> actions`` (e.g.
    :meth:`PPOModel.act_inference`), ``env.num_envs`` plays at a time; returns one result per play, motion by
    motion (``MotionResult.play`` counts the plays of a motion). Plays of one motion differ only where the env
    draws per episode (domain randomization, observation noise); a clean env plays them alike.

    ``env``: a humanoid-imitation env built by :func:`simppo.eval.loading.make_eval_env` (it flags every failure
    cause and ends episodes only on unstable worlds). ``progress(done, total)`` is called after each round.
    ``max_body_error_m``: the global body error that fails a play (ProtoMotions' 0.5 m; ``math.inf`` judges the
    env's terminations alone, the pose tracked wherever the robot is). ``done``: results already measured (by motion
    id and play; an interrupted evaluation), not played again; ``on_round(results)`` receives each round's new
    results.
    """
    if plays < 1:
        raise ValueError(f"plays={plays}: at least one play per motion")
    lib = env.motion_lib
    all_jobs = [(i, p) for i in (range(lib.num_motions) if motion_ids is None else motion_ids) for p in range(plays)]
    done = dict(done or {})
    jobs = [job for job in all_jobs if job not in done]
    lengths = lib.motion_lengths.cpu().tolist()
    n, dt = env.num_envs, float(env.dt)
    acc = TrackingAccumulator(n, env.device, dt, max_body_error_m)
    results: list[MotionResult] = []
    if progress is not None and done:
        progress(len(all_jobs) - len(jobs), len(all_jobs))
    for first in range(0, len(jobs), n):
        round_jobs = jobs[first:first + n]
        chunk = [i for i, _ in round_jobs]
        slots = round_jobs + [round_jobs[0]] * (n - len(round_jobs))  # idle envs replay the round's first play
        padded = [i for i, _ in slots]
        steps = [clip_steps(lengths[i], dt) for i in padded]
        id_t = torch.tensor(padded, dtype=torch.int32, device=env.device)
        env.seed_episodes(slots)  # a play's randomization and noise follow (motion, play), not its env slot
        obs = env.reset_to(id_t, torch.zeros(n, device=env.device))
        s = body_state(env)
        acc.start(s["pos"], s["ref_pos"], torch.tensor(steps, dtype=torch.int64, device=env.device))
        for k in range(max(steps[:len(chunk)])):
            obs, _, _, _, _ = env.step(act(obs))
            s = body_state(env)
            acc.update(s["pos"], s["ref_pos"], s["q"], s["ref_q"], s["fail_bits"], s["anchor_error"])
            if check_every and (k + 1) % check_every == 0 and not bool(acc.playing[:len(chunk)].any()):
                break  # every motion of the round has failed (an untrained policy): stop early
        out = acc.finish()
        new = len(results)
        for j, (mid, play) in enumerate(round_jobs):
            failed = out["fail_mask"][j] != 0
            results.append(MotionResult(
                name=lib.motion_names[mid], motion_id=mid, success=out["success"][j],
                survival_s=min(out["survival_steps"][j] * dt, lengths[mid]), length_s=lengths[mid],
                mpjpe_global_mm=1000.0 * out["mpjpe_global_m"][j], mpjpe_local_mm=1000.0 * out["mpjpe_local_m"][j],
                anchor_body_error_m=out["anchor_body_error_m"][j],
                joint_angle_error_rad=out["joint_rad"][j], velocity_error_mps=out["vel_mps"][j],
                acceleration_error_mps2=out["acc_mps2"][j], max_body_error_m=out["max_error_m"][j],
                failure={"time_s": min(out["fail_step"][j] * dt, lengths[mid]),
                         "cause": cause_names(out["fail_mask"][j])} if failed else None,
                play=play,
            ))
        if on_round is not None:
            on_round(results[new:])
        if progress is not None:
            progress(len(all_jobs) - len(jobs) + len(results), len(all_jobs))
    played = iter(results)  # in the order of ``jobs`` (repeats of a motion in ``motion_ids`` included)
    return [done[job] if job in done else next(played) for job in all_jobs]


def summarize(results: list[MotionResult]) -> dict:
    """Aggregates over the plays (one per motion unless ``plays`` > 1): success rate and ``num_success`` count
    plays, the errors are means / medians over plays; ``num_motions`` counts motions and
    ``num_motions_every_play_success`` the motions none of whose plays failed (``results`` motion by motion, each
    motion's plays in order, as :func:`evaluate_motions` returns them)."""
    import statistics

    def finite(key: str) -> list[float]:
        return [v for v in (getattr(r, key) for r in results) if v is not None and math.isfinite(v)]

    def mean(key: str) -> float | None:
        vals = finite(key)
        return sum(vals) / len(vals) if vals else None

    def median(key: str) -> float | None:
        vals = finite(key)
        return statistics.median(vals) if vals else None

    n = len(results)
    motions: list[list[MotionResult]] = []  # each motion's plays: a run from its play 0 (ids repeat across ranks)
    for r in results:
        if r.play == 0 or not motions:
            motions.append([])
        motions[-1].append(r)
    causes: dict[str, int] = {}
    for r in results:
        if r.failure:
            c = r.failure["cause"].split("+")[0]
            causes[c] = causes.get(c, 0) + 1
    total_len = sum(r.length_s for r in results)
    return {
        "num_motions": len(motions),
        "num_plays": n,
        "num_success": sum(r.success for r in results),
        "num_motions_every_play_success": sum(all(r.success for r in plays) for plays in motions),
        "success_rate": sum(r.success for r in results) / n if n else None,
        "mpjpe_global_mm": mean("mpjpe_global_mm"),
        "mpjpe_global_mm_median": median("mpjpe_global_mm"),
        "mpjpe_local_mm": mean("mpjpe_local_mm"),
        "mpjpe_local_mm_median": median("mpjpe_local_mm"),
        "anchor_body_error_m": mean("anchor_body_error_m"),
        "joint_angle_error_rad": mean("joint_angle_error_rad"),
        "velocity_error_mps": mean("velocity_error_mps"),
        "acceleration_error_mps2": mean("acceleration_error_mps2"),
        "survival_s": mean("survival_s"),
        "survival_fraction": sum(r.survival_s for r in results) / total_len if total_len > 0 else None,
        "failure_causes": causes,
    }
