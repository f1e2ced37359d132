"""Motion data: shard format, ``simppo-pack``, :class:`MotionIndex`, device-resident :class:`MotionLib`.

Body index convention everywhere in this package: motion body ``b`` is MuJoCo body id ``b + 1``
(the world body 0 is excluded); dofs are in MuJoCo qpos order.

``MotionLib`` and ``MotionState`` are imported on first use: they need torch and Warp, which packing motions
(``simppo-pack`` and its worker processes) does not.
"""

from simppo.motion.config import DEFAULT_MOTIONS, MotionCfg
from simppo.motion.format import ShardFormatError, names_digest, open_shard, read_header
from simppo.motion.index import MotionIndex, MotionShard
from simppo.motion.pack import MotionPackError, PackOptions, pack_motions

_DEVICE_RESIDENT = ("MotionLib", "MotionState")


def __getattr__(name: str):
    if name in _DEVICE_RESIDENT:
        from simppo.motion import motion_lib

        return getattr(motion_lib, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_MOTIONS",
    "MotionCfg",
    "MotionIndex",
    "MotionLib",
    "MotionPackError",
    "MotionShard",
    "MotionState",
    "PackOptions",
    "ShardFormatError",
    "names_digest",
    "open_shard",
    "pack_motions",
    "read_header",
]
