"""Small G1 motion packs from the shipped clips, for the per-motion exploration tests (built once per session).

``A``: stand_sway, squat · ``B``: walk · ``C``: arm_wave, turn — and changed versions of ``A``:
``A_renamed`` (squat packed as ``squat_deep``), ``A_reordered`` (squat, stand_sway), ``A_resized``
(stand_sway, squat, step_in_place).
"""

import shutil
from pathlib import Path

from simppo.motion.pack import pack_motions
from simppo.paths import MOTIONS_DIR

PACKS = {
    "A": ["stand_sway", "squat"],
    "B": ["walk"],
    "C": ["arm_wave", "turn"],
    "A_renamed": ["stand_sway", "squat_deep"],
    "A_reordered": ["squat", "stand_sway"],
    "A_resized": ["stand_sway", "squat", "step_in_place"],
}
ALIASES = {"squat_deep": "squat"}  # clip name -> shipped csv it copies


def build_packs(root: Path) -> dict[str, Path]:
    """``{pack name: pack directory}`` under ``root``."""
    clips = root / "clips"
    clips.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, motions in PACKS.items():
        csvs = []
        for m in motions:
            dst = clips / f"{m}.csv"
            if not dst.exists():
                shutil.copyfile(MOTIONS_DIR / f"{ALIASES.get(m, m)}.csv", dst)
            csvs.append(dst)
        out[name] = pack_motions(csvs, root / name, robot="g1").out_dir
    return out
