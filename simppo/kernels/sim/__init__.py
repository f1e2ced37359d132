"""Warp kernels of the simulator backends, one module and one entry point per stage.

``body_vel.body_velocities``, ``contact.contacts``, ``guard.guard``, ``reset.reset``,
``overflow.collect_overflow``, ``solver_stats.accumulate_solver_stats`` (MJWarp only): each takes one
typed buffer struct (``wp.struct``) bound once by the backend, so a kernel signature is written once.
"""
