"""simppo's envs and PPO from the libraries people already use.

``simppo.make_env`` (:mod:`simppo.integrations.factory`) builds any registered env as ``simppo-train`` does; the
adapters take what it returns: :mod:`simppo.integrations.gymnasium` (``GymVectorEnv``) and
:mod:`simppo.integrations.rsl_rl` (``RslRlVecEnv``) and :mod:`simppo.integrations.torchrl` (``TorchRLEnv``); the
other way, ``WrappedGymEnv`` gives simppo's PPO a gymnasium env, and :mod:`simppo.integrations.tensoraerospace` is
TensorAeroSpace's PPO interface on simppo's core. Each
library is an optional extra, imported only when its adapter is (``pip install -e '.[gymnasium]'``, ``'.[rsl_rl]'``,
``'.[torchrl]'``); a missing one is a one-line ImportError naming
the extra.
"""

from __future__ import annotations

import importlib


def require(module: str, extra: str):
    """``import module``, or an ImportError (one line) naming simppo's extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"simppo.integrations.{extra} needs {module!r}, which is not installed ({exc}): "
                          f"pip install -e '.[{extra}]'") from None
