"""Motion data: shard format, ``simppo-pack``, :class:`MotionIndex`, device-resident :class:`MotionLib`.

Body index convention everywhere in this package: motion body ``b`` is MuJoCo body id ``b + 1``
(the world body 0 is excluded); dofs are in MuJoCo qpos order.
"""

from simppo.motion.config import DEFAULT_MOTIONS, MotionCfg
from simppo.motion.format import ShardFormatError, names_digest, open_shard, read_header
from simppo.motion.index import MotionIndex, MotionShard
from simppo.motion.motion_lib import MotionLib, MotionState
from simppo.motion.pack import MotionPackError, PackOptions, pack_motions

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
