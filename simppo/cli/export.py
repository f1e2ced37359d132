"""``simppo-export checkpoint=PATH out=DIR [config=PATH] [force=true]``

Writes ``DIR/policy.onnx`` (observation normalizer + actor mean, dynamic batch; the model's
``act_inference``) and ``DIR/policy.json`` (joint order, default pose, action scale, PD gains, control dt,
observation layout, future-frame offsets, simppo version), and checks onnxruntime against torch on 1,000
random observations. Keys are typed by :class:`simppo.eval.config.ExportCfg`. Bad input is one line,
``simppo-export: error: ...``, exit status 2; existing files are kept unless ``force=true``. Both files are written
into a staging folder in DIR and moved into place only once both are complete, so a failed export leaves DIR as it
was.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from simppo.cli.eval import cli_main

PROG = "simppo-export"
PARITY_TOL = 1e-5


def run_export(cfg) -> int:
    from simppo.eval.export import export_onnx, onnx_parity, policy_metadata
    from simppo.eval.loading import EvalInputError, build_model, load_run
    from simppo.utils.files import atomic_write_text

    run = load_run(cfg.checkpoint, cfg.config)
    out = Path(cfg.out).expanduser().resolve()
    targets = (out / "policy.onnx", out / "policy.json")
    existing = [str(p) for p in targets if p.exists()]
    if existing and not cfg.force:
        raise EvalInputError(f"{existing[0]} exists (pass force=true to replace it)")
    if out.exists() and not out.is_dir():
        raise EvalInputError(f"{out}: exists and is not a directory")
    model = build_model(run, "cpu")
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    stage = Path(tempfile.mkdtemp(prefix=".export-", dir=out))  # the pair is replaced together or not at all
    try:
        onnx_path = export_onnx(model, run.layout.obs_dim, stage / targets[0].name, cfg.opset)
        parity = onnx_parity(model, onnx_path, run.layout.obs_dim)
        meta = policy_metadata(run, onnx_path.name, cfg.opset, parity)
        atomic_write_text(stage / targets[1].name, json.dumps(meta, indent=1) + "\n")
        for target in targets:
            os.replace(stage / target.name, target)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    onnx_path = targets[0]
    print(f"{PROG}: {onnx_path} (obs {run.layout.obs_dim} -> actions {run.layout.num_actions}, dynamic batch), "
          f"{targets[1]}; onnxruntime vs torch on 1000 random observations: max |diff| = {parity:.2e} "
          f"({time.perf_counter() - t0:.1f} s)", flush=True)
    if parity > PARITY_TOL:
        print(f"{PROG}: warning: ONNX parity {parity:.2e} exceeds {PARITY_TOL:g}", file=sys.stderr, flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    return cli_main(PROG, __doc__, "export_schema", run_export, argv)


if __name__ == "__main__":
    sys.exit(main())
