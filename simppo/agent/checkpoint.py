"""Atomic, ``weights_only``-safe checkpoint files, and the checks that a checkpoint fits the current run.

A checkpoint stores ``signature`` (:func:`env_signature`): the env class, observation widths, action count,
``num_envs`` and, for robot envs, the robot's name, joint names and digest. :func:`check_compatible`
compares it (and every tensor shape) with the current agent before anything is loaded, so a checkpoint
of another robot or layout is refused with one line naming the file and the mismatch.
"""

import hashlib
import re
import warnings
from pathlib import Path

import torch

from simppo.utils.files import atomic_write

CHECKPOINT_FORMAT = "simppo-ppo"
TMP_GLOB = ".*.ckpt.*.tmp"  # temp files of interrupted atomic writes (see simppo.utils.files.atomic_write)
CHECKSUM_KEY = "checksum"  # SHA-256 of everything else in the file (:func:`state_checksum`)


class CheckpointError(RuntimeError):
    """A checkpoint file is missing, truncated, corrupt, not a simppo checkpoint or does not fit this run."""


class DamagedCheckpointError(CheckpointError):
    """The file is truncated, corrupt, fails its checksum or holds non-finite parameters: an older checkpoint
    beside it may still be good (:func:`newest_good_checkpoint`)."""


class NonFiniteStateError(CheckpointError):
    """A state to be saved holds non-finite parameters: it must not replace a good checkpoint."""


def _digest_into(h, x) -> None:
    """Feed a canonical encoding of a nested state (dicts in key order, tensors as dtype, shape and bytes, plain
    values as their type and repr) into the hash ``h``."""
    if isinstance(x, torch.Tensor):
        t = x.detach().to("cpu").contiguous().reshape(-1)
        h.update(f"T{t.dtype}{tuple(x.shape)}".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    elif isinstance(x, dict):
        h.update(f"D{len(x)}".encode())
        for k in sorted(x, key=repr):
            h.update(f"K{k!r}".encode())
            _digest_into(h, x[k])
    elif isinstance(x, list | tuple):
        h.update(f"L{type(x).__name__}{len(x)}".encode())
        for v in x:
            _digest_into(h, v)
    else:
        h.update(f"V{type(x).__name__}:{x!r}".encode())


def state_checksum(state: dict) -> str:
    """SHA-256 hex digest of a checkpoint dict's contents, the ``checksum`` entry itself left out."""
    h = hashlib.sha256()
    _digest_into(h, {k: v for k, v in state.items() if k != CHECKSUM_KEY})
    return h.hexdigest()


def nonfinite_parameters(state: dict) -> list[str]:
    """Names of the model's floating-point tensors (``state["model"]``) that hold NaN or inf."""
    model = state.get("model")
    if not isinstance(model, dict):
        return []
    return [k for k, v in model.items()
            if isinstance(v, torch.Tensor) and v.is_floating_point() and not bool(torch.isfinite(v).all())]


def save_checkpoint(state: dict, path: str | Path) -> None:
    """Write ``state`` (with its :func:`state_checksum`) to ``path`` atomically, creating its folder.

    An interrupted save leaves the previous file at ``path`` untouched and removes the temp file. A state whose
    model holds non-finite parameters is refused (:class:`NonFiniteStateError`): nothing is written.
    """
    path = Path(path)
    bad = nonfinite_parameters(state)
    if bad:
        raise NonFiniteStateError(f"{path}: not written: the model's {', '.join(bad[:3])}"
                                  f"{' ...' if len(bad) > 3 else ''} hold non-finite values")
    state = {**state, CHECKSUM_KEY: state_checksum(state)}
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda f: torch.save(state, f))


def _epoch_of(path: Path) -> int:
    m = re.fullmatch(r"epoch_(\d+)\.ckpt", path.name)
    return int(m.group(1)) if m else -1


def newest_good_checkpoint(folder: str | Path, exclude: str | Path | None = None) -> Path | None:
    """The ``epoch_N.ckpt`` in ``folder`` with the largest N that loads and passes its checksum (``None``)."""
    excluded = Path(exclude).resolve() if exclude is not None else None
    for p in sorted(Path(folder).glob("epoch_*.ckpt"), key=_epoch_of, reverse=True):
        if _epoch_of(p) < 0 or p.resolve() == excluded:
            continue
        try:
            load_checkpoint(p)
        except CheckpointError:
            continue
        return p
    return None


def damaged_hint(exc: CheckpointError, path: str | Path) -> str:
    """``exc``'s message, and for a damaged file the newest good ``epoch_N.ckpt`` beside it and how to continue."""
    message = str(exc)
    if not isinstance(exc, DamagedCheckpointError):
        return message
    good = newest_good_checkpoint(Path(path).parent, exclude=path)
    if good is None:
        return f"{message}; no good epoch_N.ckpt beside it"
    return (f"{message}; the newest good checkpoint beside it is {good}: continue from it with resume=true "
            f"checkpoint={good}")


_CODE_IN_PICKLE = re.compile(r"(?:unsupported|Unsupported) (?:GLOBAL|global):? ([A-Za-z_][\w.]*)")
# what torch's safe unpickler stops at in bytes that are no torch checkpoint: random bytes, or a plain pickle (its
# byte codes are only read inside a torch zip archive)
_NOT_A_TORCH_FILE = re.compile(r"Unsupported operand (\d+)")


def remove_partial_writes(folder: str | Path) -> list[Path]:
    """Delete the temp files that a killed process left behind while writing checkpoints in ``folder``."""
    removed = []
    for p in Path(folder).glob(TMP_GLOB):
        if p.is_file():
            p.unlink(missing_ok=True)
            removed.append(p)
    return removed


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict:
    """Load a checkpoint with ``weights_only=True``; raise :class:`CheckpointError` with a one-line reason.

    The ``checksum`` written by :func:`save_checkpoint` is verified (checkpoints of simppo versions that wrote
    none are read without it), and a model holding NaN or inf is refused. A file whose pickle would import or
    call anything is reported as such, never with torch's advice to turn ``weights_only`` off.

    The file is read to the CPU; every tensor but the RNG states then moves to ``map_location``. The RNG
    states stay CPU byte tensors: ``torch.set_rng_state`` and ``torch.cuda.set_rng_state_all`` take nothing
    else (a GPU ``map_location`` would otherwise make resuming on CUDA raise a ``TypeError``)."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: checkpoint file not found")
    try:
        with warnings.catch_warnings():  # torch's multi-line note on a plain pickle's protocol: the error says it
            warnings.filterwarnings("ignore", message="Detected pickle protocol")
            state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for truncated/corrupt zips
        text = str(exc).strip()
        operand = _NOT_A_TORCH_FILE.search(text)
        if operand:
            raise DamagedCheckpointError(f"{path}: corrupt checkpoint, or a plain pickle rather than a torch file "
                                         f"(the safe unpickler stopped at byte code {operand.group(1)})") from None
        if "Weights only load failed" in text or type(exc).__name__ == "UnpicklingError":
            found = _CODE_IN_PICKLE.search(text)
            what = f" (it names {found.group(1)})" if found else ""
            raise CheckpointError(f"{path}: the file holds pickled objects that would run code when loaded{what}; "
                                  "simppo will not load it (a simppo checkpoint holds only tensors and plain "
                                  "values)") from None
        reason = text.splitlines()[0] if text else type(exc).__name__
        raise DamagedCheckpointError(f"{path}: corrupt or truncated checkpoint ({reason})") from None
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{path}: not a simppo checkpoint (missing format '{CHECKPOINT_FORMAT}')")
    for key in ("model", "epoch"):
        if key not in state:
            raise CheckpointError(f"{path}: checkpoint lacks '{key}'")
    wrong = field_type_problem(state)
    if wrong:
        raise CheckpointError(f"{path}: {wrong}")
    stored = state.get(CHECKSUM_KEY)
    if stored is not None and stored != state_checksum(state):
        raise DamagedCheckpointError(f"{path}: checksum mismatch: its tensors changed after simppo wrote it "
                                     "(damaged or edited)")
    bad = nonfinite_parameters(state)
    if bad:
        raise DamagedCheckpointError(f"{path}: the model's {', '.join(bad[:3])}{' ...' if len(bad) > 3 else ''} "
                                     "hold non-finite values")
    state = migrate_old_checkpoint(state)
    if torch.device(map_location).type != "cpu":
        state = {k: v if k == "rng" else to_device(v, map_location, keep_cpu=("rng",) if k == "ranks" else ())
                 for k, v in state.items()}
    return state


#: the types of the top-level fields a reader uses before anything else checks them
FIELD_TYPES = {"epoch": int, "step_count": int, "config": dict, "signature": dict, "exploration": dict, "env": dict,
               "actor_optimizer": dict, "critic_optimizer": dict}


def field_type_problem(state: dict) -> str | None:
    """What is wrong with the types of ``state``'s fields (one line), or ``None``: ``model`` a dict of tensors
    (a :class:`~simppo.agent.models.PPOModel` state dict), the :data:`FIELD_TYPES` fields their types."""
    model = state["model"]
    if not isinstance(model, dict) or not all(isinstance(v, torch.Tensor) for v in model.values()):
        return f"'model' is a {type(model).__name__}, not a dict of tensors (a model's state dict)"
    for key, kind in FIELD_TYPES.items():
        value = state.get(key)
        if value is not None and (not isinstance(value, kind) or (kind is int and isinstance(value, bool))):
            return f"'{key}' is a {type(value).__name__}, not a {kind.__name__}"
    return None


def migrate_old_checkpoint(state: dict) -> dict:
    """The one place that reads checkpoints of older simppo versions: those written before the run counters were
    saved get ``best_evaluated_score=None`` and no ``run_start_time`` (the run's own start time stays); those
    written before checksums have no ``checksum`` and load unverified. Everything else must be as
    :meth:`~simppo.agent.runner.Runner.get_state_dict` writes it."""
    return {"best_evaluated_score": None, **state}


def to_device(x, device, keep_cpu: tuple[str, ...] = ()):
    """``x`` with every tensor of its nested dicts / lists / tuples on ``device``; dict entries named in
    ``keep_cpu`` (at any depth) are left as they are (the RNG states of the per-rank ``ranks`` entries)."""
    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, dict):
        return {k: v if k in keep_cpu else to_device(v, device, keep_cpu) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return type(x)(to_device(v, device, keep_cpu) for v in x)
    return x


# ----------------------------------------------------------------------------- compatibility


def env_signature(env) -> dict:
    """Plain-type description of what a checkpoint must match: ``env`` (class name), ``obs_dims``,
    ``num_actions``, ``num_envs`` and, for envs that simulate a robot (``env.robot_cfg`` and
    ``env.sim.robot``), ``robot``: ``{name, digest, joint_names}`` (digest of the joint and body names)."""
    from simppo.motion.format import robot_digest

    sig = {
        "env": type(env).__name__,
        "obs_dims": {k: int(v) for k, v in env.obs_dims.items()},
        "num_actions": int(env.num_actions),
        "num_envs": int(env.num_envs),
    }
    robot_cfg, sim = getattr(env, "robot_cfg", None), getattr(env, "sim", None)
    if robot_cfg is not None and getattr(sim, "robot", None) is not None:
        joints = list(robot_cfg.joint_names)
        sig["robot"] = {"name": str(robot_cfg.name), "joint_names": joints,
                        "digest": robot_digest(joints, list(sim.robot.body_names)[1:])}
    index = getattr(getattr(env, "motion_lib", None), "index", None)
    if index is not None:
        sig["motion_chunk"] = index.chunk_state()
    return sig


def _describe_chunk(chunk: dict) -> str:
    if chunk.get("mode") != "rank":
        return "motion.chunk=all (every rank loads every motion)"
    per_rank = "; ".join(f"rank {r}: shards {s}" for r, s in enumerate(chunk.get("rank_shards") or []))
    return f"motion.chunk=rank over {chunk.get('world_size')} ranks ({per_rank})"


def _structure(x) -> object:
    """Shapes/dtypes of the tensors of a nested state (plain values: their type)."""
    if isinstance(x, torch.Tensor):
        return ("tensor", tuple(x.shape), str(x.dtype))
    if isinstance(x, dict):
        return {k: _structure(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_structure(v) for v in x]
    return type(x).__name__ if not isinstance(x, int | float) or isinstance(x, bool) else "number"


def structure_mismatch(stored, current, where: str) -> str | None:
    """The first difference between two nested states (keys, tensor shapes and dtypes), as text; ``None``."""
    a, b = _structure(stored), _structure(current)
    return _first_difference(a, b, where)


def _first_difference(a, b, where: str) -> str | None:
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            extra, missing = sorted(map(str, set(a) - set(b))), sorted(map(str, set(b) - set(a)))
            return f"{where}: keys differ (only in the checkpoint: {extra}, only in this run: {missing})"
        for k in a:
            d = _first_difference(a[k], b[k], f"{where}.{k}")
            if d:
                return d
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{where}: {len(a)} entries in the checkpoint, {len(b)} in this run"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            d = _first_difference(x, y, f"{where}[{i}]")
            if d:
                return d
        return None
    if a != b and not _grown(a, b, where):
        return f"{where}: {_show(a)} in the checkpoint, {_show(b)} in this run"
    return None


# State with an axis that follows the motion set (key → that axis) and may grow when shards are appended (the
# motion-set check has verified the old motions are unchanged; the owner's load_state_dict keeps the old entries).
GROWS_WITH_MOTIONS = {"env.sampler.failure_ema": 0, "env.sampler.motion_visits": 0, "env.assist_alpha": 0,
                      "env.assist_rate": 0, "env.adaptive_sigma": 1}


def _grown(a, b, where: str) -> bool:
    if where not in GROWS_WITH_MOTIONS or not (isinstance(a, tuple) and isinstance(b, tuple)):
        return False
    axis, (kind_a, shape_a, dtype_a), (kind_b, shape_b, dtype_b) = GROWS_WITH_MOTIONS[where], a, b
    return (kind_a == kind_b == "tensor" and dtype_a == dtype_b and len(shape_a) == len(shape_b) > axis
            and all(x == y for i, (x, y) in enumerate(zip(shape_a, shape_b, strict=True)) if i != axis)
            and shape_a[axis] <= shape_b[axis])


def _show(s) -> str:
    return f"{list(s[1])} {s[2].replace('torch.', '')}" if isinstance(s, tuple) else str(s)


TRAINING_KEYS = ("actor_optimizer", "critic_optimizer", "running_reward_norm", "rng", "env", "step_count")


def check_compatible(state: dict, signature: dict, model_state: dict, source: str,
                     training_state: dict | None = None) -> None:
    """Raise :class:`CheckpointError` (one line naming ``source``) unless ``state`` fits this run.

    ``signature``: :func:`env_signature` of the current env; ``model_state``: the current model's state
    dict (tensor shapes are compared); ``training_state`` (resume only): the current ``env`` and
    ``running_reward_norm`` states, compared key by key and shape by shape. Reads nothing but the dicts.
    """
    old = state.get("signature")
    if isinstance(old, dict):
        r_old, r_new = old.get("robot"), signature.get("robot")
        if r_old is not None and r_new is not None and r_old.get("digest") != r_new.get("digest"):
            detail = ""
            if r_old.get("joint_names") != r_new.get("joint_names"):
                detail = (f", {len(r_old.get('joint_names') or [])} vs {len(r_new['joint_names'])} joints")
            raise CheckpointError(
                f"{source}: checkpoint is for robot {r_old.get('name')!r} (digest {str(r_old.get('digest'))[:12]}), "
                f"this run uses robot {r_new['name']!r} (digest {r_new['digest'][:12]}) with other joint/body "
                f"names{detail}")
        if old.get("env") != signature["env"]:
            raise CheckpointError(f"{source}: checkpoint was trained on env {old.get('env')}, this run uses "
                                  f"{signature['env']}")
        if old.get("obs_dims") != signature["obs_dims"]:
            raise CheckpointError(f"{source}: observation widths differ: checkpoint {old.get('obs_dims')}, this run "
                                  f"{signature['obs_dims']}")
        if old.get("num_actions") != signature["num_actions"]:
            raise CheckpointError(f"{source}: action widths differ: checkpoint {old.get('num_actions')}, this run "
                                  f"{signature['num_actions']}")
    if not isinstance(state.get("model"), dict):
        raise CheckpointError(f"{source}: checkpoint 'model' is not a state dict")
    diff = structure_mismatch(state["model"], model_state, "model")
    if diff:
        raise CheckpointError(f"{source}: model does not fit this run ({diff})")
    if training_state is None:
        return
    missing = [k for k in TRAINING_KEYS if k not in state]
    if missing:
        raise CheckpointError(f"{source}: checkpoint lacks the training state {missing} needed to resume")
    if isinstance(old, dict) and old.get("num_envs") != signature["num_envs"]:
        raise CheckpointError(f"{source}: checkpoint has num_envs={old.get('num_envs')}, this run "
                              f"{signature['num_envs']}; resume with the same num_envs (or warm-start the weights "
                              "with checkpoint=...)")
    if isinstance(old, dict) and "motion_chunk" in signature:
        before, now = old.get("motion_chunk", {"mode": "all"}), signature["motion_chunk"]
        if before != now:  # each rank's env state (sampler, motion ids) belongs to the motions it loaded
            raise CheckpointError(f"{source}: checkpoint was trained with {_describe_chunk(before)}, this run loads "
                                  f"{_describe_chunk(now)}; resume with the same motion.chunk, motions and ranks "
                                  "(or warm-start the weights with checkpoint=...)")
    for key, current in training_state.items():
        diff = structure_mismatch(state[key], current, key)
        if diff:
            raise CheckpointError(f"{source}: training state does not fit this run ({diff}); resume with the "
                                  "options it was trained with (its run's config.yaml), or warm-start the weights "
                                  "with checkpoint=...")


def raise_on_any_rank(fabric, message: str | None) -> None:
    """Distributed validation: if any rank has an error ``message``, every rank raises
    :class:`CheckpointError` with the message of the lowest failing rank (one all-gather; with one process
    it just raises ``message``). Call it on every rank, after the checks and before anything loads."""
    import torch.distributed as dist

    flag = torch.tensor([message is not None], dtype=torch.int32, device=fabric.device)
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        from simppo.agent.distributed import all_gather_tensor, broadcast_object

        gather, broadcast = all_gather_tensor, broadcast_object
    else:  # one process, or a stand-in fabric
        gather, broadcast = fabric.all_gather, fabric.broadcast
    failed = gather(flag).reshape(-1).cpu()  # load time, not a rollout step: the host read is fine
    if not bool(failed.any()):
        return
    src = int(failed.nonzero()[0, 0])
    raise CheckpointError(broadcast(message, src=src))
