"""Typed robot description (mirrors ``configs/robot/<name>.yaml``)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from simppo.paths import ASSETS_DIR, CONFIG_DIR


@dataclass
class RobotCfg:
    """A robot for simppo: an MJCF plus the names the env/motion code needs.

    All per-joint lists are in ``joint_names`` order (the policy's action order).
    """

    name: str
    mjcf: str
    """MJCF path, relative to ``simppo/assets`` or absolute."""
    joint_names: list[str]
    default_joint_pos: list[float]
    action_scale: list[float]
    anchor_body: str
    tracked_bodies: list[str]
    end_effectors: list[str] = field(default_factory=list)
    feet: list[str] = field(default_factory=list)
    foot_sites: list[str] = field(default_factory=list)
    root_body: str = "pelvis"
    mirror_pairs: list[list[str]] = field(default_factory=list)
    """Left-right mirror map (``simppo-pack --mirror``): ``[left, right]`` joint pairs; joints in no pair mirror
    onto themselves."""
    mirror_negate: list[str] = field(default_factory=list)
    """Joints whose angle changes sign in the mirror image (rotations about the x and z axes of a symmetric
    robot: roll and yaw; pitch keeps its sign)."""
    source: str = ""
    """The yaml file this config was read from (filled in by ``load_robot_cfg``; for error messages)."""

    @property
    def num_joints(self) -> int:
        return len(self.joint_names)

    @property
    def mjcf_path(self) -> Path:
        p = Path(self.mjcf)
        return p if p.is_absolute() else ASSETS_DIR / p

    def __post_init__(self) -> None:
        where = self.source or f"robot '{self.name}'"
        n = len(self.joint_names)
        for key in ("default_joint_pos", "action_scale"):
            val = getattr(self, key)
            if len(val) != n:
                raise ValueError(f"{where}: {key} has {len(val)} entries, expected {n} (one per joint)")
            setattr(self, key, [float(x) for x in val])
        if len(set(self.joint_names)) != n:
            raise ValueError(f"{where}: joint_names contains duplicates")
        paired = [j for pair in self.mirror_pairs for j in pair]
        if any(len(pair) != 2 for pair in self.mirror_pairs) or len(set(paired)) != len(paired):
            raise ValueError(f"{where}: mirror_pairs must be [left, right] pairs naming each joint at most once")
        unknown = sorted(set(paired + list(self.mirror_negate)) - set(self.joint_names))
        if unknown:
            raise ValueError(f"{where}: mirror_pairs / mirror_negate name unknown joints {unknown}")

    def mirror_map(self) -> tuple[list[int], list[float]] | None:
        """``(partner, sign)`` per joint (``joint_names`` order): the mirror image of a pose ``q`` has
        ``q'[partner[j]] = sign[j] * q[j]``; ``None`` when the config has no mirror map."""
        if not self.mirror_pairs:
            return None
        index = {name: i for i, name in enumerate(self.joint_names)}
        partner = list(range(self.num_joints))
        for left, right in self.mirror_pairs:
            partner[index[left]], partner[index[right]] = index[right], index[left]
        negate = set(self.mirror_negate)
        return partner, [-1.0 if name in negate else 1.0 for name in self.joint_names]


def robot_cfg_from_dict(data: dict, source: str = "") -> RobotCfg:
    """Build a ``RobotCfg`` from a mapping; unknown keys are an error naming ``source``."""
    known = {f.name for f in dataclasses.fields(RobotCfg)}
    unknown = sorted(set(data) - known)
    where = source or "robot config"
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(known - {'source'})}")
    required = [
        f.name
        for f in dataclasses.fields(RobotCfg)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    missing = [k for k in required if k not in data]
    if missing:
        raise ValueError(f"{where}: missing key(s) {missing}")
    kwargs = dict(data)
    kwargs.setdefault("source", source)
    return RobotCfg(**kwargs)


def load_robot_cfg(name_or_path: str | Path | RobotCfg) -> RobotCfg:
    """``'g1'`` → ``configs/robot/g1.yaml``; a path to a ``.yaml`` file → that file; a ``RobotCfg`` passes."""
    if isinstance(name_or_path, RobotCfg):
        return name_or_path
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml"):
        path = p
    else:
        path = CONFIG_DIR / "robot" / f"{name_or_path}.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"robot config not found: {path}")
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping at top level")
    return robot_cfg_from_dict(data, source=str(path))
