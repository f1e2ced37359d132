"""Typed configuration of every simulator backend (``configs/sim/*.yaml`` only pick ``name``)."""

from __future__ import annotations

from dataclasses import dataclass

SIM_NAMES = ("auto", "mjwarp", "mujoco", "mjx")
MJX_IMPLS = ("jax", "warp")
JACOBIANS = ("auto", "dense", "sparse")
MJWARP_SPARSE_ABOVE_NV = 32  # mujoco_warp's io.is_sparse for opt.jacobian=auto
SELF_CONTACT_SLOTS = 32  # extra contacts per world reserved for self-collision


@dataclass
class SimCfg:
    """Settings shared by the backends, then backend-specific ones (ignored by the other backend).

    Buffer sizing for the G1 (per world): a capsule-plane pair yields at most 2 contacts and a
    sphere-plane pair 1, so the 31 capsules + 2 spheres give at most ``31*2 + 2 = 64`` floor contacts →
    ``nconmax = 64`` (MJWarp 4.0: per world; the shared pool is ``naconmax = nconmax * num_envs``).
    Constraint rows (``njmax``, a hard per-world limit): every contact is condim 3 with elliptic cones
    (3 rows each): 64 × 3 = 192; joint limits ≤ 29 → 221 rows worst case → ``njmax = 224``.
    ``self_collision`` adds ``SELF_CONTACT_SLOTS`` contacts (none occur in the shipped clips; a tangled,
    fallen robot rarely has more than a dozen) and 3 rows each: see :meth:`contact_capacity`.
    Other robots: size these the same way (or set them to ``None`` for MJWarp's defaults).
    """

    name: str = "auto"
    """``auto`` (mjwarp on CUDA, mujoco on CPU) | ``mjwarp`` | ``mujoco`` | ``mjx`` (extra ``[mjx]``)."""
    decimation: int = 4
    """Physics steps per control step (200 Hz physics → 50 Hz control for the G1)."""
    timestep: float | None = None
    """Override the MJCF physics timestep (seconds)."""
    solver_iterations: int | None = None
    solver_ls_iterations: int | None = None
    solver_tolerance: float | None = None
    """Override the MJCF's ``opt.iterations`` / ``opt.ls_iterations`` / ``opt.tolerance`` (the Newton solver stops when
    its relative improvement falls below the tolerance or at the cap; MJWarp's loop runs until the slowest world
    stops). ``benchmarks/solver_study.py`` measures what they change."""
    jacobian: str = "auto"
    """Layout of the constraint Jacobian, both backends: ``auto`` (MJWarp's rule: sparse above 32 dofs; MuJoCo C's
    own ``auto`` stays dense up to 59 dofs, which on the G1 makes its Newton solve 2.2x slower, with results equal
    to 1e-12) | ``dense`` | ``sparse``. The same physics either way; it sets the model's ``opt.jacobian``."""
    instability_max_qvel: float = 200.0
    """A world with any ``|qvel|`` above this (rad/s or m/s) is flagged unstable."""
    instability_min_height: float = -0.5
    instability_max_height: float = 5.0
    """Root (freejoint) height range outside of which a world is flagged unstable."""
    foot_contact: bool = True
    """Compute per-foot contact flags / normal forces after every control step."""
    self_collision: bool = False
    """Robot collision geoms also collide with each other (MuJoCo's parent-child filter, plus body pairs
    that touch by construction excluded; see ``simppo.robot.model.load_mj_model``); its contacts feed the
    ``self_collisions`` penalty. Off by default: on the G1 it costs ~1% of MJWarp's physics throughput but
    10-20% of MuJoCo C's (broadphase over every body pair), above the 10% budget of the CPU default."""
    # --- mjwarp (the mujoco backend sizes its per-world contact copy buffers with nconmax/njmax too)
    nconmax: int | None = 64
    njmax: int | None = 224
    use_cuda_graph: bool = True
    """On CUDA devices with Warp's memory pool: capture the decimated step, the masked reset, ``forward`` and
    ``kinematics`` as CUDA graphs (ignored on CPU; without the pool, a warning and eager launches)."""
    # --- mjx
    mjx_impl: str = "jax"
    """MJX's implementation: ``jax`` (its own JAX physics, any JAX device) | ``warp`` (MuJoCo Warp behind MJX's API,
    CUDA only)."""
    # --- mujoco
    threads: int | None = None
    """Worker threads stepping the worlds with MuJoCo C; ``None`` → ``os.cpu_count()``."""

    def __post_init__(self) -> None:
        if self.jacobian not in JACOBIANS:
            raise ValueError(f"sim.jacobian: unknown layout {self.jacobian!r}; choose one of {JACOBIANS}")

    def contact_capacity(self) -> tuple[int | None, int | None]:
        """Per-world ``(nconmax, njmax)``, grown by ``SELF_CONTACT_SLOTS`` contacts with self-collision."""
        if not self.self_collision or self.nconmax is None or self.njmax is None:
            return self.nconmax, self.njmax
        return self.nconmax + SELF_CONTACT_SLOTS, self.njmax + 3 * SELF_CONTACT_SLOTS

