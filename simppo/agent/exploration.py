"""Per-motion Gaussian exploration (API of ProtoMotions' ``ppo.utils.per_motion_exploration``).

With ``agent.exploration=per_motion`` the actor's log-std is a table ``[num_rows, A]``; motion ``j`` of shard
``s`` of the env's :class:`~simppo.motion.index.MotionIndex` owns row ``s.offset + j``, so appending shards
never moves a row. A checkpoint stores the index it was trained on (:func:`exploration_state`: each shard's
``names_digest``, offset, count and motion names). :func:`prepare_checkpoint` validates those rows against
the motions loaded now before the agent loads anything, and returns a checkpoint whose log-std fits the
actor (rows of appended shards, or a shared log-std of a weights-only start, expanded). :func:`save_snapshot`
writes the human-readable σ sidecar; resume always uses the full checkpoint.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from simppo.agent.checkpoint import CheckpointError
from simppo.utils.files import atomic_write_text

EXPLORATION_MODES = ("shared", "per_motion")
SNAPSHOT_FILE = "exploration.json"
SNAPSHOT_FORMAT = "simppo-exploration"
LOG_STD_KEY = "actor.log_std"  # in a PPOModel state dict

__all__ = ["EXPLORATION_MODES", "SNAPSHOT_FILE", "ExplorationConfigError", "MotionSetError", "exploration_state",
           "joint_groups", "motion_index_state", "motion_rows", "num_rows", "prepare_checkpoint", "row_lr_factor",
           "save_snapshot", "sigma_metrics"]


class MotionSetError(CheckpointError):
    """The checkpoint's per-motion rows do not fit the motions loaded now (message without the file name)."""


class ExplorationConfigError(ValueError):
    """``agent.exploration`` is unknown, or ``per_motion`` with an env that tracks no motions."""


# ----------------------------------------------------------------------------- rows of a MotionIndex


def num_rows(motion_index) -> int:
    """Rows of the log-std table for ``motion_index``: the end of its last shard."""
    return max((s.offset + s.count for s in motion_index.shards), default=0)


def motion_rows(motion_index) -> torch.Tensor:
    """int64 ``[num_motions]``: the row of each motion id of a MotionLib that loaded ``motion_index`` (the lib
    numbers its motions shard by shard, in index order)."""
    parts = [torch.arange(s.offset, s.offset + s.count, dtype=torch.int64) for s in motion_index.shards]
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.int64)


def motion_index_state(motion_index) -> dict:
    """Plain-type identity of every row: ``{"num_rows", "shards": [{path, offset, count, names_digest,
    names}]}`` (``names`` read from the cached shard headers)."""
    shards = []
    for i, s in enumerate(motion_index.shards):
        shards.append({"path": str(s.path), "offset": int(s.offset), "count": int(s.count),
                       "names_digest": str(s.names_digest), "names": list(motion_index.header(i).motion_names)})
    return {"num_rows": num_rows(motion_index), "shards": shards}


def exploration_state(mode: str, motion_index) -> dict:
    """What a checkpoint stores under ``"exploration"``: the mode and, for per-motion, the row identity."""
    state = {"mode": mode}
    if mode == "per_motion":
        state["motion_index"] = motion_index_state(motion_index)
    return state


# ----------------------------------------------------------------------------- validation


def _rows(s: dict) -> str:
    return f"rows {s['offset']}..{s['offset'] + s['count'] - 1}"


def _label(i: int, s: dict) -> str:
    return f"shard {i} ({s['path']}, {s['count']} motion{'' if s['count'] == 1 else 's'}, {_rows(s)})"


def _now(index, j: int) -> dict:
    s = index.shards[j]
    return {"path": str(s.path), "offset": s.offset, "count": s.count, "names_digest": s.names_digest}


def _names_now(index, j: int) -> list[str] | None:
    try:
        return list(index.header(j).motion_names)
    except Exception:  # header unreadable: fall back to the digest-only message
        return None


def _first_difference(old: list[str], new: list[str]) -> str:
    for r, (a, b) in enumerate(zip(old, new, strict=False)):
        if a != b:
            return f"motion {r} is '{a}' in the checkpoint, '{b}' now"
    return "same names"


def _describe_change(i: int, old: list[dict], index) -> str:
    """The precise change that makes checkpoint shard ``i`` differ from the loaded shard ``i``."""
    o, new = old[i], index.shards
    keep = "keep every shard of the checkpoint, unchanged and in order; new shards may only be appended"
    moved = [j for j, s in enumerate(new) if j != i and s.names_digest == o["names_digest"] and s.count == o["count"]]
    if moved:
        j = moved[0]
        return (f"motion shards reordered: checkpoint {_label(i, o)} is loaded as shard {j} "
                f"({new[j].path}, {_rows(_now(index, j))}); {keep}")
    nxt = old[i + 1] if i + 1 < len(old) else None
    if i >= len(new) or (nxt is not None and new[i].names_digest == nxt["names_digest"]):
        names = o.get("names") or []
        shown = f" (motions {names[:5]}{' ...' if len(names) > 5 else ''})" if names else ""
        return f"motion shard removed: checkpoint {_label(i, o)}{shown} is not among the loaded motions; {keep}"
    n = _now(index, i)
    old_names, new_names = o.get("names"), _names_now(index, i)
    if n["count"] != o["count"]:
        detail = ""
        if old_names is not None and new_names is not None:
            added = [x for x in new_names if x not in set(old_names)]
            gone = [x for x in old_names if x not in set(new_names)]
            detail = f" (added {added[:5]}, removed {gone[:5]})"
        return (f"motion shard resized: checkpoint {_label(i, o)} has {n['count']} motions now ({n['path']})"
                f"{detail}; the rows after it would shift; {keep}")
    if n["names_digest"] != o["names_digest"]:
        if old_names is not None and new_names is not None:
            if sorted(old_names) == sorted(new_names):
                return (f"motions reordered inside checkpoint {_label(i, o)} (loaded from {n['path']}): "
                        f"{_first_difference(old_names, new_names)}; {keep}")
            gone = [x for x in old_names if x not in set(new_names)]
            return (f"motions renamed in checkpoint {_label(i, o)} (loaded from {n['path']}): "
                    f"{_first_difference(old_names, new_names)} ({len(gone)} of {o['count']} names differ); {keep}")
        return (f"motion names changed in checkpoint {_label(i, o)} (names digest {o['names_digest'][:12]} in the "
                f"checkpoint, {n['names_digest'][:12]} now in {n['path']}); {keep}")
    return (f"motion shard moved: checkpoint {_label(i, o)} starts at row {n['offset']} now ({n['path']}); {keep}")


def check_motion_set(stored: dict, motion_index, table_rows: int) -> None:
    """Raise :class:`MotionSetError` unless the checkpoint's rows (``stored``: :func:`motion_index_state`) are
    in bounds of its ``table_rows``-row log-std table and every stored shard is loaded now, unchanged, at the
    same rows. Shards appended after the stored ones are allowed."""
    shards = stored.get("shards") if isinstance(stored, dict) else None
    if not isinstance(shards, list) or not all(isinstance(s, dict) for s in shards):
        raise MotionSetError("checkpoint's motion index is unreadable ('exploration.motion_index.shards')")
    end = 0
    for i, s in enumerate(shards):
        try:
            offset, count = int(s["offset"]), int(s["count"])
        except (KeyError, TypeError, ValueError):
            offset = count = None
        if offset is None or not isinstance(s.get("names_digest"), str) or "path" not in s:
            raise MotionSetError(f"checkpoint's motion index shard {i} lacks path/offset/count/names_digest")
        if offset != end or count < 0:
            raise MotionSetError(f"checkpoint's motion index shard {i} covers rows {offset}..{offset + count - 1}, "
                                 f"expected to start at row {end}")
        end = offset + count
    if end != table_rows:
        raise MotionSetError(f"checkpoint's per-motion log-std has {table_rows} rows but its motion index covers "
                             f"{end}")
    new = motion_index.shards
    for i, o in enumerate(shards):
        if i < len(new) and (new[i].names_digest, new[i].count, new[i].offset) == (
                o["names_digest"], int(o["count"]), int(o["offset"])):
            continue
        raise MotionSetError(_describe_change(i, shards, motion_index))


# ----------------------------------------------------------------------------- prepare_checkpoint


def _log_std_param_index(actor) -> int | None:
    names = [n for n, _ in actor.named_parameters()]
    return names.index("log_std") if "log_std" in names else None


def _expand_optimizer_rows(opt_state: dict, param_index: int, old_rows: int, new_rows: int) -> dict:
    """A copy of an Adam state dict whose per-row moments of param ``param_index`` get zero rows appended."""
    state = opt_state.get("state", {})
    key = param_index if param_index in state else str(param_index)
    entry = state.get(key)
    if not isinstance(entry, dict):
        return opt_state
    grown = {}
    for k, v in entry.items():
        if isinstance(v, torch.Tensor) and v.dim() == 2 and v.shape[0] == old_rows:
            v = torch.cat([v, v.new_zeros(new_rows - old_rows, v.shape[1])])
        grown[k] = v
    return {**opt_state, "state": {**state, key: grown}}


def prepare_checkpoint(checkpoint: dict, motion_index, actor, load_training_state: bool) -> dict:
    """Validate row identity/bounds or expand a shared std for a weights-only start.

    Returns a checkpoint whose ``model['actor.log_std']`` fits ``actor`` (an :class:`~simppo.agent.models.Actor`):
    - per-motion checkpoint, per-motion actor: every stored shard must be loaded now, unchanged and in order
      (:func:`check_motion_set`); rows of appended shards start from the mean of the stored rows (their Adam
      moments from zero when ``load_training_state``);
    - shared checkpoint, per-motion actor: weights-only (``load_training_state=False``) only; the shared
      log-std is copied to every row;
    - shared actor: a shared checkpoint passes unchanged; a per-motion one is refused.
    Raises :class:`MotionSetError` (one line, without the file name). Neither ``checkpoint`` nor ``actor``
    is modified; nothing is loaded. Shape mismatches of other kinds are left to
    :func:`~simppo.agent.checkpoint.check_compatible`.
    """
    model = checkpoint.get("model")
    stored = model.get(LOG_STD_KEY) if isinstance(model, dict) else None
    if not isinstance(stored, torch.Tensor) or stored.dim() not in (1, 2):
        return checkpoint
    per_motion_ckpt = stored.dim() == 2
    if actor.log_std.dim() == 1:
        if per_motion_ckpt:
            raise MotionSetError(f"checkpoint was trained with agent.exploration=per_motion ({stored.shape[0]} "
                                 "motion rows); this run uses agent.exploration=shared; set "
                                 "agent.exploration=per_motion")
        return checkpoint
    if motion_index is None:
        raise MotionSetError("agent.exploration=per_motion needs an env with motions")
    rows, num_actions = actor.log_std.shape
    if num_rows(motion_index) != rows:
        raise MotionSetError(f"the actor has {rows} log-std rows but the loaded motions need {num_rows(motion_index)}")
    if stored.shape[-1] != num_actions:
        return checkpoint  # another action width: check_compatible names it
    if not per_motion_ckpt:
        if load_training_state:
            raise MotionSetError("checkpoint was trained with agent.exploration=shared; it cannot be resumed with "
                                 "per_motion (start from its weights with checkpoint=..., which copies its shared "
                                 "σ to every motion, or resume with agent.exploration=shared)")
        table = stored.detach().expand(rows, num_actions).clone()
        return {**checkpoint, "model": {**model, LOG_STD_KEY: table}}
    info = checkpoint.get("exploration")
    if not isinstance(info, dict) or "motion_index" not in info:
        raise MotionSetError(f"checkpoint has a per-motion log-std table ({stored.shape[0]} rows) but no motion "
                             "index to validate its rows ('exploration.motion_index')")
    old_rows = int(stored.shape[0])
    check_motion_set(info["motion_index"], motion_index, old_rows)
    if old_rows == rows:
        return dict(checkpoint)
    fill = stored.detach().mean(0, keepdim=True).expand(rows - old_rows, num_actions)
    out = {**checkpoint, "model": {**model, LOG_STD_KEY: torch.cat([stored.detach(), fill])}}
    param_index = _log_std_param_index(actor)
    if load_training_state and param_index is not None and isinstance(checkpoint.get("actor_optimizer"), dict):
        out["actor_optimizer"] = _expand_optimizer_rows(checkpoint["actor_optimizer"], param_index, old_rows, rows)
    return out


# ----------------------------------------------------------------------------- logs and sidecar

_LIMBS = (("leg", ("hip", "knee", "ankle", "foot", "toe")), ("arm", ("shoulder", "elbow", "wrist", "hand")),
          ("waist", ("waist", "torso", "spine")), ("head", ("neck", "head")))


def joint_groups(joint_names: list[str]) -> dict[str, list[int]]:
    """Joint names → ``{group: [action indices]}``: ``left_leg``, ``right_leg``, ``waist``, ``left_arm``,
    ``right_arm`` ... (side prefix + limb keyword); a joint matching no keyword is its own group."""
    groups: dict[str, list[int]] = {}
    for i, name in enumerate(joint_names):
        low = name.lower()
        side = "left_" if low.startswith(("left", "l_")) else "right_" if low.startswith(("right", "r_")) else ""
        limb = next((g for g, keys in _LIMBS if any(k in low for k in keys)), None)
        groups.setdefault(f"{side}{limb}" if limb else name, []).append(i)
    return groups


def sigma_metrics(log_std: torch.Tensor, row_steps: torch.Tensor, row_terminations: torch.Tensor,
                  num_hardest: int = 3) -> dict[str, torch.Tensor]:
    """Device scalars: spread of the per-motion σ (mean over action dims) across rows — ``exploration/sigma_min``,
    ``sigma_median``, ``sigma_max`` — and ``exploration/sigma_hardest``, the mean σ of the ``num_hardest``
    motions with the highest termination rate (``row_terminations / row_steps``, both ``[R]``, from the
    rollouts; unvisited rows rank last), with that rate as ``exploration/hardest_term_rate``. No host sync."""
    sigma = log_std.detach().exp().mean(-1)
    rate = torch.where(row_steps > 0, row_terminations / row_steps.clamp_min(1.0), -1.0)
    top = torch.topk(rate, min(num_hardest, rate.shape[0])).indices
    return {"exploration/sigma_min": sigma.min(), "exploration/sigma_median": sigma.median(),
            "exploration/sigma_max": sigma.max(), "exploration/sigma_hardest": sigma[top].mean(),
            "exploration/hardest_term_rate": rate[top].clamp_min(0.0).mean()}


def row_lr_factor(row_counts: torch.Tensor) -> torch.Tensor:
    """0-dim ``sqrt(1 / Σ p²)`` of the sample shares ``p = row_counts / Σ row_counts`` (``row_counts [R]``): the
    square root of the effective number of rows the samples fed (``sqrt(R)`` when ``R`` rows share them equally,
    1 for one row). Adam moves an entry by ~lr x its gradient's mean over its noise; a row fed a share ``p`` has
    that ratio ``sqrt(p)`` times the shared log-std's, so its rate times this factor moves each row as the shared
    σ would move on its motion alone (at 1x, two rows fell at ~0.6x the shared σ, 10x drove them far below it).
    No samples at all: 1."""
    total = row_counts.sum()
    p = row_counts / total.clamp_min(1.0)
    return torch.where(total > 0, p.square().sum().clamp_min(1e-12).rsqrt(), 1.0)


def save_snapshot(path: str | Path, motion_index, logstd: torch.Tensor, epoch: int, step_count: int) -> Path:
    """Atomically replace the inspection sidecar ``path`` (JSON); resume uses the full checkpoint.

    Holds ``epoch``, ``step_count``, ``joint_groups`` (group → joint names) and, per motion row, its name,
    shard and σ per joint group (mean of ``exp(logstd)`` over the group's joints). ``logstd``: ``[R, A]``
    (a shared ``[A]`` is reported for every motion). Rank selection is the caller's.
    """
    path = Path(path)
    table = logstd.detach().float().cpu()
    rows = num_rows(motion_index)
    if table.dim() == 1:
        table = table.expand(rows, -1)
    if table.shape[0] != rows:
        raise ValueError(f"{path}: log-std has {table.shape[0]} rows, the motion index {rows}")
    joints = list(motion_index.header(0).joint_names) if motion_index.shards else []
    if len(joints) != table.shape[1]:
        joints = [f"action_{i}" for i in range(table.shape[1])]
    groups = joint_groups(joints)
    sigma = table.exp()
    group_sigma = {g: sigma[:, idx].mean(-1).tolist() for g, idx in groups.items()}
    mean_sigma = sigma.mean(-1).tolist()
    motions = []
    for i, s in enumerate(motion_index.shards):
        for j, name in enumerate(motion_index.header(i).motion_names):
            r = s.offset + j
            motions.append({"row": r, "name": name, "shard": str(s.path), "sigma_mean": round(mean_sigma[r], 6),
                            "sigma": {g: round(v[r], 6) for g, v in group_sigma.items()}})
    spread = torch.tensor(mean_sigma)
    doc = {"format": SNAPSHOT_FORMAT, "version": 1, "epoch": int(epoch), "step_count": int(step_count),
           "sigma_spread": {k: round(float(v), 6) for k, v in
                            (("min", spread.min()), ("median", spread.median()), ("max", spread.max()))},
           "joint_groups": {g: [joints[k] for k in idx] for g, idx in groups.items()}, "motions": motions}
    path.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write_text(path, _dumps(doc))


def _dumps(doc: dict) -> str:
    """JSON with one line per joint group and per motion (easy to read, grep and diff)."""
    parts = []
    for k, v in doc.items():
        if isinstance(v, dict) and v:
            inner = ",\n".join(f"  {json.dumps(a)}: {json.dumps(b)}" for a, b in v.items())
            parts.append(f" {json.dumps(k)}: {{\n{inner}\n }}")
        elif isinstance(v, list) and v:
            inner = ",\n".join(f"  {json.dumps(x)}" for x in v)
            parts.append(f" {json.dumps(k)}: [\n{inner}\n ]")
        else:
            parts.append(f" {json.dumps(k)}: {json.dumps(v)}")
    return "{\n" + ",\n".join(parts) + "\n}\n"
