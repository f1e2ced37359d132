#!/usr/bin/env bash
# One-shot GPU check of simppo (< 9 min on a fresh GPU machine, Warp kernel compile included):
#   1. install   pip install -e ".[dev]" with the machine's torch; offline machines: wheels carried in .whl/
#                (warp-lang, mujoco, mujoco-warp, hydra-core, omegaconf, antlr4-python3-runtime,
#                lightning-fabric, ... see docs of the device tool), then an editable install without deps
#   2. compile   builds every Warp / mujoco_warp kernel and captures the CUDA graphs, with progress messages
#   3. tests     pytest -m gpu tests/gpu (graphs of step and reset, sync-debug mode, resume on CUDA,
#                MJWarp-vs-MuJoCo-C parity, 8192 envs, the captured minibatch step vs the eager one, the whole
#                env step as one graph vs the eager step)
#   4. train     benchmarks/train_throughput.py --num-envs 4096 8192 --backends mjwarp (train/physics-in-env,
#                train/replay, solver iterations, steps/s)
#   5. gae       benchmarks/gae.py --sizes 8192x32 (speed-up over a torch loop)
#   6. solver    benchmarks/solver_study.py at 4096 worlds: MJWarp's iteration cap x tolerance against a converged
#                float64 reference, solver iterations per step and control steps/s
#   7. mjx       benchmarks/sim.py's sim=mjx rows at 4096 worlds (compile apart from steady state, step
#                mjx/mujoco); skipped with one line when JAX has no GPU here (the [mjx] extra with a CUDA jaxlib)
#   8. learn     (not run by default: it needs a motion set) benchmarks/learning.py on SIMPPO_GPU_PACK (a pack or
#                motion files inside the repo, e.g. a folder named in the device tool's carry) at 8192 envs, rows
#                at SIMPPO_GPU_LEARN_SAMPLES (default 25e6,50e6,100e6,200e6), and a last row and checkpoint where
#                SIMPPO_GPU_LEARN_S (whole) seconds of training end it (default 360); SIMPPO_GPU_LEARN_RESUME continues
#                a run from its checkpoint. curve.jsonl, config.yaml and the newest checkpoint in $OUT/learn.
#                SIMPPO_GPU_STAGES="install learn" SIMPPO_GPU_PACK=.gpu/pack bash benchmarks/gpu_check.sh
# Every figure goes to one results file: $OUT/gpu_results.txt when OUT is set, else ./gpu_results.txt.
# Stages run even when an earlier one failed (so the figures come back); the exit status is that of the
# first failed stage.
#
#   bash benchmarks/gpu_check.sh             # on a GPU machine
#   bash benchmarks/gpu_check.sh --dry-run   # every stage on the CPU at small sizes (no install: pip --dry-run)
#   SIMPPO_GPU_STAGES="install compile tests" bash benchmarks/gpu_check.sh   # some stages only
set -u
cd "$(dirname "$0")/.."

DRY=0
[ "${1:-}" = "--dry-run" ] && DRY=1
PY=${PYTHON:-$(command -v python || command -v python3)}
RESULTS=${OUT:+$OUT/gpu_results.txt}
RESULTS=${RESULTS:-$PWD/gpu_results.txt}
export DRY PY PYTHONUNBUFFERED=1 WANDB_MODE=disabled SIMPPO_GPU_RESULTS="$RESULTS"
: > "$RESULTS"
STATUS=0

note() { echo "$*" | tee -a "$RESULTS"; }

stage() {  # stage NAME TIMEOUT_S CMD...: run (a function or a command) under a time limit, append its output
    local name=$1 limit=$2 t0 rc
    shift 2
    note "=== $name: $*"
    t0=$(date +%s)
    if declare -F "$1" >/dev/null; then
        export -f "$1"
        timeout "$limit" bash -c "$1" 2>&1 | tee -a "$RESULTS"
    else
        timeout "$limit" "$@" 2>&1 | tee -a "$RESULTS"
    fi
    rc=${PIPESTATUS[0]}
    note "=== $name: $([ "$rc" = 0 ] && echo PASS || echo "FAIL (exit $rc)") in $(( $(date +%s) - t0 )) s"
    [ "$rc" != 0 ] && [ "$STATUS" = 0 ] && STATUS=$rc
    return 0
}

install_simppo() {
    if [ "$DRY" = 1 ]; then
        "$PY" -m pip install --dry-run --no-index --no-deps --no-build-isolation -q -e . && echo "install: dry run ok"
        return
    fi
    if "$PY" -c "import warp, mujoco, mujoco_warp, hydra, omegaconf, lightning_fabric" 2>/dev/null; then
        # dependencies already importable (e.g. carried wheels unpacked on PYTHONPATH): simppo itself only
        "$PY" -m pip install -q --no-index --no-deps --no-build-isolation -e . && echo "install: simppo only"
        return
    fi
    if [ -d .whl ]; then  # offline machine: carried wheels, then simppo itself without dependencies
        "$PY" -m pip install -q --no-index --no-deps --no-compile .whl/*.whl || return
        "$PY" -m pip install -q --no-index --no-deps --no-build-isolation -e . || return
    else
        "$PY" -m pip install -q --retries 1 --timeout 20 -e ".[dev]" || return
    fi
}

show_versions() {
    "$PY" - <<'EOF'
import importlib.metadata as md
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "gpu",
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none")
for name in ("warp-lang", "mujoco", "mujoco-warp", "lightning-fabric", "hydra-core"):
    try:
        print(name, md.version(name))
    except md.PackageNotFoundError:
        print(name, "MISSING")
import simppo, warp, mujoco_warp  # noqa: E401,F401  (fails here, clearly, when something is missing)
EOF
}

compile_kernels() {
    "$PY" - "$DEVICE" "$NENVS_SMALL" <<'EOF'
import os
import sys
import time

import torch

from simppo.envs.imitation import HumanoidImitationEnv, HumanoidImitationEnvCfg
from simppo.kernels.gae import discount_values
from simppo.sim import SimCfg
from simppo.utils.device import init_warp

device, n = sys.argv[1], int(sys.argv[2])
init_warp()
t0 = time.perf_counter()
print(f"compiling kernels for {device} (first run on this machine; later runs load Warp's cache) ...", flush=True)
env = HumanoidImitationEnv(HumanoidImitationEnvCfg(), num_envs=n, device=device, sim_cfg=SimCfg(name="mjwarp"))
workers = os.cpu_count() or 1
print(f"  env built in {time.perf_counter() - t0:.1f} s; compiling every module loaded so far on {workers} "
      "threads ...", flush=True)
import warp as wp  # noqa: E402

try:  # every module imported so far, most of them unused: a failure here is reported, the lazy loads go on
    wp.force_load(device=device, max_workers=workers)
except Exception as e:  # noqa: BLE001
    print(f"  force_load failed ({type(e).__name__}: {e}); modules load one by one on first use", flush=True)
print(f"  modules loaded in {time.perf_counter() - t0:.1f} s; warming up (CUDA: capturing graphs) ...", flush=True)
env.sim.warm_up()
env.reset()
env.step(torch.zeros(n, env.num_actions, device=device))
x = torch.rand(8, n, device=device)
discount_values((x > 0.9).float(), x, x, x, 0.99, 0.95)
if device.startswith("cuda"):
    torch.cuda.synchronize()
print(f"compile: kernels ready in {time.perf_counter() - t0:.1f} s (graphs: {env.sim.use_graph})", flush=True)
EOF
}

learn_rows() {
    local pack=${SIMPPO_GPU_PACK:-$LEARN_DEFAULT_PACK} dir=${OUT:+$OUT/learn} rc
    if [ -z "$pack" ]; then
        echo "learn: SIMPPO_GPU_PACK is not set: name a motion pack (or motion files) inside the repo"
        return 2
    fi
    dir=${dir:-$PWD/gpu_learn}
    # shellcheck disable=SC2086  # the pack may be several motion files, the overrides several words
    "$PY" benchmarks/learning.py $pack --device "$DEVICE" --num-envs "$LEARN_ENVS" \
        --samples "${SIMPPO_GPU_LEARN_SAMPLES:-$LEARN_SAMPLES}" --max-train-s "$LEARN_S" \
        --out "$dir" ${SIMPPO_GPU_LEARN_RESUME:+--resume "$SIMPPO_GPU_LEARN_RESUME"} -- $LEARN_OVERRIDES
    rc=$?
    # a lent machine sends back at most 8 files: keep the newest checkpoint alone
    ls -1t "$dir"/samples_*.ckpt 2>/dev/null | tail -n +2 | xargs -r rm -f
    ls -l "$dir"
    return $rc
}

if [ "$DRY" = 1 ]; then
    export LEARN_ENVS=8 LEARN_SAMPLES=64,128 LEARN_S=600 LEARN_OVERRIDES="agent.num_steps=8"
    export LEARN_DEFAULT_PACK="motions/squat.csv motions/walk.csv"
    export DEVICE=cpu NENVS_SMALL=4
    TRAIN_ARGS=(--num-envs 8 --iterations 1 --device cpu)
    GAE_ARGS=(--sizes 64x8 --repeats 2 --device cpu)
    SIM_ARGS=(--nworld 4 --steps 2 --device cpu)
    SOLVER_ARGS=(--worlds 8 --steps 2 --iterations 5,10 --tolerances 1e-8 --device cpu)
    TESTS=(tests/gpu tests/sim/test_mjwarp_graphs.py tests/sim/test_env_hot_path.py tests/utils/test_device.py
           tests/utils/test_resume_rng.py tests/envs/test_step_graph.py)
    PYTEST_MARK=()
else
    export LEARN_ENVS=8192 LEARN_SAMPLES=25e6,50e6,100e6,200e6 LEARN_S=360 LEARN_OVERRIDES="" LEARN_DEFAULT_PACK=""
    export DEVICE=cuda:0 NENVS_SMALL=64
    TRAIN_ARGS=(--num-envs 4096 8192 --iterations 2 --device cuda:0)
    GAE_ARGS=(--sizes 8192x32 --device cuda:0)
    SIM_ARGS=(--nworld 4096 --steps 10 --device cuda:0)
    SOLVER_ARGS=(--worlds 4096 --steps 25 --iterations 5,10 --tolerances 1e-8,1e-4 --device cuda:0)
    TESTS=(tests/gpu)
    PYTEST_MARK=(-m gpu)
fi
export LEARN_S=${SIMPPO_GPU_LEARN_S:-$LEARN_S}  # the learn stage's seconds: its limit and learning.py's --max-train-s

note "simppo gpu_check $( [ "$DRY" = 1 ] && echo '--dry-run (CPU, small sizes)' ) $(date -u +%FT%TZ) \
rev $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
STAGES=" ${SIMPPO_GPU_STAGES:-install versions compile tests train gae solver mjx} "
want() { [[ "$STAGES" == *" $1 "* ]]; }
want install && stage install 240 install_simppo
want versions && stage versions 60 show_versions
want compile && stage compile 200 compile_kernels
want tests && stage tests 240 "$PY" -m pytest -q -rs -p no:cacheprovider ${PYTEST_MARK[@]+"${PYTEST_MARK[@]}"} \
    "${TESTS[@]}"
want train && stage train 220 "$PY" benchmarks/train_throughput.py --backends mjwarp "${TRAIN_ARGS[@]}"
want gae && stage gae 60 "$PY" benchmarks/gae.py "${GAE_ARGS[@]}"
want solver && stage solver 150 "$PY" benchmarks/solver_study.py "${SOLVER_ARGS[@]}"
mjx_rows() {
    local platform=gpu
    [ "$DEVICE" = cpu ] && platform=cpu
    if ! "$PY" -c "import jax, sys; jax.devices('$platform')" >/dev/null 2>&1; then
        echo "mjx: skipped, JAX has no $platform device here (pip install -e '.[mjx]' with a CUDA jaxlib)"
        return 0
    fi
    # shellcheck disable=SC2086  # word splitting of the exported argument string is intended
    "$PY" benchmarks/sim.py $SIM_ARGS_STR
}
export SIM_ARGS_STR="${SIM_ARGS[*]}"
want mjx && stage mjx 300 mjx_rows
if want learn; then
    if [[ "$LEARN_S" =~ ^[0-9]+$ ]]; then  # the stage's time limit is shell arithmetic: whole seconds
        stage learn $(( LEARN_S + 240 )) learn_rows
    else
        note "=== learn: FAIL: SIMPPO_GPU_LEARN_S='$LEARN_S' is not a whole number of seconds"
        [ "$STATUS" = 0 ] && STATUS=2
    fi
fi
note "=== gpu_check: $([ "$STATUS" = 0 ] && echo PASS || echo "FAIL (first failing exit $STATUS)"); results in $RESULTS"
exit "$STATUS"
