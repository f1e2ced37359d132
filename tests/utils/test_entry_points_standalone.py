"""Issue 13, defect 4: every public entry point works standalone, in a fresh process where nothing else
has initialised Warp (``PendulumEnv`` used to fail with ``'NoneType' object has no attribute 'cpu_device'``).
``discount_values`` has its own test in ``tests/kernels/test_gae.py``."""

import os
import subprocess
import sys

from simppo.paths import MOTIONS_DIR

SNIPPETS = {
    "PendulumEnv": "from simppo.envs.pendulum import PendulumEnv, PendulumEnvCfg\n"
                   "e = PendulumEnv(PendulumEnvCfg(), 4); e.reset(); e.step(torch.zeros(4, 1)); print('ok')",
    "MotionLib": "from simppo.motion import MotionLib, DEFAULT_MOTIONS\n"
                 "lib = MotionLib([str(DEFAULT_MOTIONS)]); ids = lib.sample_motions(3)\n"
                 "lib.get_motion_state(ids, lib.sample_times(ids)); print('ok')",
    "make_sim(mjwarp)": "from simppo.sim import make_sim, SimCfg\n"
                        "s = make_sim('g1', SimCfg(name='mjwarp'), 2, 'cpu'); s.step(); print('ok')",
    "MuJoCoSim": "from simppo.sim import MuJoCoSim, SimCfg\n"
                 "s = MuJoCoSim('g1', SimCfg(), num_envs=2, device='cpu'); s.step(); print('ok')",
    "HumanoidImitationEnv": "from simppo.envs import make_env\n"
                            "from simppo.envs.imitation import HumanoidImitationEnvCfg\n"
                            "from simppo.sim.config import SimCfg\n"
                            "e = make_env(HumanoidImitationEnvCfg(), 2, 'cpu', 0, sim_cfg=SimCfg(name='mujoco'))\n"
                            "e.reset(); e.step(torch.zeros(2, e.num_actions)); print('ok')",
    "simppo-pack": "from simppo.cli.pack import main\n"
                   f"rc = main([{str(MOTIONS_DIR / 'walk.csv')!r}, '--out', OUT, '-q'])\n"
                   "print('ok' if rc == 0 else rc)",
}


def test_public_entry_points_work_in_a_fresh_process(tmp_path):
    procs = {}
    for name, code in SNIPPETS.items():  # all at once: each pays its own imports
        out = tmp_path / name.replace("(", "_").replace(")", "")
        src = f"import torch\nOUT = {str(out)!r}\n{code}\n"
        procs[name] = subprocess.Popen([sys.executable, "-c", src], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       text=True, cwd=tmp_path, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    failures = {}
    for name, p in procs.items():
        out, err = p.communicate(timeout=300)
        if p.returncode != 0 or out.strip().splitlines()[-1:] != ["ok"]:
            failures[name] = err.strip().splitlines()[-1:] or out
    assert not failures, failures
