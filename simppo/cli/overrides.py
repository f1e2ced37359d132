"""Command-line overrides checked before Hydra runs: one line naming the key, the value and what is expected
(and the nearest valid key for a typo), instead of Hydra's multi-line block and exit status 1."""

from __future__ import annotations

import difflib
import re
from pathlib import Path

_FULL_KEY = re.compile(r"full_key: (\S+)")


def _groups(config_dir: Path) -> set[str]:
    """Config group paths (``env``, ``env/randomization``, ...) of the config dir and Hydra's ConfigStore."""
    from hydra.core.config_store import ConfigStore

    found = {str(p.relative_to(config_dir)) for p in config_dir.rglob("*") if p.is_dir()}

    def walk(node: dict, prefix: str) -> None:
        for name, sub in node.items():
            if isinstance(sub, dict):
                found.add(prefix + name)
                walk(sub, prefix + name + "/")

    walk(ConfigStore.instance().repo, "")
    return found


def _keys(node, prefix: str = "") -> list[str]:
    out = []
    for k, v in node.items():
        if k == "hydra":
            continue
        out.append(prefix + str(k))
        if isinstance(v, dict):
            out += _keys(v, f"{prefix}{k}.")
    return out


def _valid_keys(config_dir: Path, config_name: str, overrides: list[str], groups: set[str]) -> list[str]:
    """Every key of the config composed with the group choices among ``overrides`` (``[]`` if that fails)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    choices = [o for o in overrides if "=" in o and o.split("=", 1)[0].lstrip("+~") in groups]
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(config_dir), version_base=None):
            node = compose(config_name, overrides=choices)
        return _keys(OmegaConf.to_container(node, resolve=False))
    except Exception:  # the choices themselves are wrong: that error is reported instead
        return []
    finally:
        GlobalHydra.instance().clear()


def _override_of(key: str, overrides: list[str]) -> str:
    root = key.split("[", 1)[0]
    return next((o for o in reversed(overrides) if o.split("=", 1)[0].lstrip("+~") == root), key)  # the last wins


def override_problem(argv: list[str], config_dir: str | Path, config_name: str) -> str | None:
    """Compose ``config_name`` with the overrides in ``argv``; ``None`` when Hydra accepts them, else one line.

    Arguments starting with ``-`` (Hydra's own flags) and ``hydra.*`` overrides leave the check to Hydra."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    if any(a.startswith("-") for a in argv):
        return None
    overrides = [a for a in argv if not a.lstrip("+~").startswith(("hydra.", "hydra/"))]
    config_dir = Path(config_dir)
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(config_dir), version_base=None):
            compose(config_name, overrides=overrides)
        return None
    except Exception as exc:
        return _describe(exc, overrides, config_dir, config_name)
    finally:
        GlobalHydra.instance().clear()


def _describe(exc: Exception, overrides: list[str], config_dir: Path, config_name: str) -> str:
    text = str(exc).strip()
    cause = str(exc.__cause__ or "").strip()
    first = (text.splitlines() or [type(exc).__name__])[0].strip()
    found = _FULL_KEY.search(cause)
    key = found.group(1) if found else None
    groups = _groups(config_dir)
    kind = type(exc.__cause__).__name__ if exc.__cause__ is not None else type(exc).__name__
    if kind == "ConfigAttributeError" and key:
        hint = ""
        if key.replace(".", "/") in groups:
            return f"{_override_of(key, overrides)}: '{key}' is a config group; choose an option with " \
                   f"{key.replace('.', '/')}=<option>"
        near = difflib.get_close_matches(key, _valid_keys(config_dir, config_name, overrides, groups), n=1, cutoff=0.6)
        if near:
            hint = f"; did you mean '{near[0]}'?"
        return f"{_override_of(key, overrides)}: unknown key '{key}'{hint}"
    if kind == "ValidationError" and key:
        override = _override_of(key, overrides)
        if key.replace(".", "/") in groups:
            value = override.split("=", 1)[1] if "=" in override else "<option>"
            return f"{override}: '{key}' is a config group; choose an option with {key.replace('.', '/')}={value}"
        reason = cause.splitlines()[0].strip()
        return f"{override}: {reason} (key '{key}')"
    if kind == "MissingConfigException":
        missing = re.search(r"Could not find '([^']+)'", text)
        options = re.search(r"Available options in '([^']+)':\n((?:\t.*\n?)+)", text)
        if missing and options:
            names = [n for n in (x.strip() for x in options.group(2).splitlines()) if n and not n.endswith("_schema")]
            group, _, option = missing.group(1).rpartition("/")
            return f"{group}={option}: no such option in group '{group}'; choose one of {', '.join(names)}"
    if kind == "OverrideParseException" and len(text.splitlines()) > 1:
        return f"{first}: {text.splitlines()[1].strip()} (write key=value)"
    return f"{first} ({cause.splitlines()[0].strip()})" if cause else first
