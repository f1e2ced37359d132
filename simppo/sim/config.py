"""Configuration of the MuJoCo Warp simulation backend (mirrors ``configs/sim/mjwarp.yaml``)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import yaml

from simppo.paths import CONFIG_DIR


@dataclass
class MJWarpSimCfg:
    """MuJoCo Warp backend settings.

    Buffer sizing for the G1 (per world; robot collides with the floor only, see the MJCF):
    a capsule-plane pair yields at most 2 contacts and a sphere-plane pair 1, so the 31 capsules +
    2 spheres give at most ``31*2 + 2 = 64`` contacts → ``nconmax = 64`` (MJWarp 4.0: per world;
    the shared pool is ``naconmax = nconmax * num_envs``, so with floor-only collision it cannot
    overflow). Constraint rows (``njmax``, a hard per-world limit): foot contacts are condim 3 with
    elliptic cones (3 rows each): 14 foot capsules × 2 × 3 = 84; the other contacts are condim 1
    (1 row): 17 × 2 + 2 = 36; joint limits ≤ 29 → 149 rows worst case → ``njmax = 160``.
    Other robots: size these the same way (or set them to ``None`` for MJWarp's defaults).
    """

    name: str = "mjwarp"
    decimation: int = 4
    """Physics steps per control step (200 Hz physics → 50 Hz control for the G1)."""
    nconmax: int | None = 64
    njmax: int | None = 160
    use_cuda_graph: bool = True
    """Capture the decimated step as a CUDA graph on CUDA devices (ignored on CPU)."""
    timestep: float | None = None
    """Override the MJCF physics timestep (seconds)."""
    solver_iterations: int | None = None
    solver_ls_iterations: int | None = None
    instability_max_qvel: float = 200.0
    """A world with any ``|qvel|`` above this (rad/s or m/s) is flagged unstable."""
    instability_min_height: float = -0.5
    instability_max_height: float = 5.0
    """Root (freejoint) height range outside of which a world is flagged unstable."""
    foot_contact: bool = True
    """Compute per-foot contact flags / normal forces after every control step."""

    @property
    def physics_dt_override(self) -> float | None:
        return self.timestep


def sim_cfg_from_dict(data: dict, source: str = "sim config") -> MJWarpSimCfg:
    known = {f.name for f in dataclasses.fields(MJWarpSimCfg)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"{source}: unknown key(s) {unknown}; allowed: {sorted(known)}")
    if data.get("name", "mjwarp") != "mjwarp":
        raise ValueError(f"{source}: name must be 'mjwarp', got {data['name']!r}")
    return MJWarpSimCfg(**data)


def load_sim_cfg(name_or_path: str | Path = "mjwarp") -> MJWarpSimCfg:
    """``'mjwarp'`` → ``configs/sim/mjwarp.yaml``; or a path to a yaml file."""
    p = Path(name_or_path)
    path = p if p.suffix in (".yaml", ".yml") else CONFIG_DIR / "sim" / f"{name_or_path}.yaml"
    data = yaml.safe_load(path.read_text()) or {}
    return sim_cfg_from_dict(data, source=str(path))
