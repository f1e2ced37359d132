"""Where simppo's own files live (the package is installed editable from the repository)."""

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parent
CONFIG_DIR = REPO_ROOT / "configs"
MOTIONS_DIR = REPO_ROOT / "motions"
ASSETS_DIR = PACKAGE_DIR / "assets"
