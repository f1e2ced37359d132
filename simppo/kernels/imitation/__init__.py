"""Warp kernels of the humanoid-imitation env, one module per stage (actions, observations, rewards,
terminations, resets); each exposes one entry point taking the typed buffers of :mod:`.buffers`."""
