"""``simppo-eval checkpoint=PATH [motion.files=[...]] [num_envs=N] [viewer=none|native|web|video] [out=DIR]``

Plays every motion from t = 0 with the deterministic policy and writes ``eval.json``, ``eval.csv``, a
per-motion error chart and the failed-motions manifest to ``<run_dir>/eval/<timestamp>/`` (or ``out``);
``viewer=`` also shows the play (native window, web page, MP4 + contact sheet). ``sim=mujoco|mjwarp`` plays
on another simulator backend than the run's (sim-to-sim; ``sim=mujoco`` runs on the CPU), and
``randomization=deploy obs_noise=true`` with domain randomization and observation noise (sim-to-real);
``plays=K`` plays each motion K times under them (each play draws its own) and reports every play;
``viewer=video`` then records every play, and each viewer shows the evaluation's own draws of a play.
Many motions play in rounds of ``num_envs`` with a progress bar and the time left; with ``resume=true out=DIR``
an interrupted evaluation keeps the motions played so far (``.<DIR>.partial``) and the same command continues.
Every key is typed by :class:`simppo.eval.config.EvalCfg`. Bad input is one line,
``simppo-eval: error: ...``, exit status 2.
"""

from __future__ import annotations

import json
import os
import sys
import time

if not os.environ.get("DISPLAY"):  # headless rendering; must precede the first mujoco import
    os.environ.setdefault("MUJOCO_GL", "egl")

from pathlib import Path  # noqa: E402

from omegaconf import MissingMandatoryValue, OmegaConf  # noqa: E402

from simppo.cli.errors import UsageError, os_error_line, report  # noqa: E402

PROG = "simppo-eval"




def compose_cfg(schema: str, overrides: list[str]):
    """``overrides`` (Hydra syntax: ``a.b=1``, ``files=[x,y]``) applied to the ConfigStore node ``schema``
    → the typed dataclass. Raises :class:`UsageError` (Hydra's first lines) on unknown keys / bad values."""
    from hydra import compose, initialize
    from hydra.core.global_hydra import GlobalHydra

    from simppo.eval.config import register_eval_configs

    register_eval_configs()
    if GlobalHydra.instance().is_initialized():
        GlobalHydra.instance().clear()
    # simppo-train's ConfigStore groups (e.g. `sim`) would turn `sim=mujoco` into a group choice when both CLIs
    # run in one process: hide those that share a name with a key of this schema while composing
    from hydra.core.config_store import ConfigStore

    repo = ConfigStore.instance().repo
    keys = set(OmegaConf.structured(repo[f"{schema}.yaml"].node)) if f"{schema}.yaml" in repo else set()
    hidden = {k: repo.pop(k) for k in list(repo) if k in keys and isinstance(repo[k], dict)}
    try:
        with initialize(version_base=None, config_path=None):
            node = compose(config_name=schema, overrides=list(overrides))
        return OmegaConf.to_object(node)
    except MissingMandatoryValue as exc:
        raise UsageError(f"missing required key '{exc.full_key}' (e.g. {exc.full_key}=PATH)") from None
    except Exception as exc:  # Hydra / OmegaConf raise many types for bad overrides and unknown keys
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0].strip()
        cause = str(exc.__cause__ or "").strip().splitlines()
        raise UsageError(f"{first} ({cause[0].strip()})" if cause else first) from None
    finally:
        repo.update(hidden)
        GlobalHydra.instance().clear()


def _final_path(path, out_dir: Path, final_dir: Path | None) -> Path:
    """Where ``path``, written under the staging folder ``out_dir``, ends up (``final_dir``; ``None``: in place)."""
    return (final_dir or out_dir) / Path(path).relative_to(out_dir)


ROUNDS_FILE = "rounds.jsonl"  # the motions played so far, in the staging folder of a resumable evaluation


def read_rounds(path: Path, signature: dict) -> dict:
    """``{(motion id, play): MotionResult}`` of the plays an interrupted evaluation of the same ``signature``
    (checkpoint, motions, settings; the file's first line) finished; a torn last line is dropped: that play is
    played again."""
    from simppo.eval.metrics import MotionResult

    out = {}
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return out
    try:
        if json.loads(lines[0]) != {"signature": signature}:
            print(f"{PROG}: {path} is from another evaluation (checkpoint, motions or settings); starting over",
                  flush=True)
            return out
    except (IndexError, ValueError):
        return out
    for line in lines[1:]:
        try:
            r = MotionResult.from_json(json.loads(line))
        except ValueError:
            continue
        out[r.motion_id, r.play] = r
    return out


def run_metrics(cfg, run, device: str, out_dir: Path, final_dir: Path | None = None) -> dict:
    """The batched evaluation; writes the outputs into ``out_dir`` (named as in ``final_dir``, where they end up)
    and prints the summary. Returns the report."""
    import torch
    from tqdm import tqdm

    from simppo.eval.curves import METRICS_CSV, plot_curves
    from simppo.eval.export import simppo_version
    from simppo.eval.loading import build_model, count_motions, make_eval_env, resolve_num_envs
    from simppo.eval.metrics import SUCCESS_MAX_BODY_ERROR_M, evaluate_motions, summarize
    from simppo.eval.report import summary_table, write_outputs

    num_motions = count_motions(run, cfg.motion.files)
    num_plays = num_motions * cfg.plays
    num_envs = resolve_num_envs(cfg.num_envs, num_plays, device)
    env = make_eval_env(run, num_envs, device, cfg.motion.files, cfg.sim, kinematic_replay=cfg.kinematic_replay or None,
                        randomization=cfg.randomization, obs_noise=cfg.obs_noise)
    model = build_model(run, device)
    if cfg.kinematic_replay:
        zeros = torch.zeros(num_envs, env.num_actions, device=device)

        def act(obs):
            return zeros
    else:
        act = model.act_inference
    rounds = -(-num_plays // num_envs)
    plays = f" x {cfg.plays} plays" if cfg.plays > 1 else ""
    print(f"{PROG}: {num_motions} motions{plays} on {num_envs} envs ({rounds} round{'s' * (rounds > 1)}), "
          f"device={device}, sim={type(env.sim).__name__}", flush=True)
    t0 = time.perf_counter()
    rounds_file = out_dir / ROUNDS_FILE
    signature = {"checkpoint": str(run.checkpoint), "checkpoint_mtime_ns": Path(run.checkpoint).stat().st_mtime_ns,
                 "motions": list(cfg.motion.files or []), "num_envs": num_envs, "sim": cfg.sim,
                 "randomization": cfg.randomization, "obs_noise": cfg.obs_noise,
                 "kinematic_replay": cfg.kinematic_replay, "plays": cfg.plays}
    finished = read_rounds(rounds_file, signature) if cfg.resume else {}
    if finished:
        print(f"{PROG}: resuming: {len(finished)} {'plays' if cfg.plays > 1 else 'motions'} already played",
              flush=True)
    elif cfg.resume:
        rounds_file.write_text(json.dumps({"signature": signature}) + "\n")
    bar = tqdm(total=num_plays, unit="play" if cfg.plays > 1 else "motion", desc=PROG, disable=rounds <= 1,
               file=sys.stdout)

    def progress(done: int, total: int) -> None:
        bar.update(done - bar.n)  # tqdm shows the rate and the time left

    def keep_round(new) -> None:
        if cfg.resume:  # one line per motion, appended and flushed: a cut-off last line is read as missing
            with open(rounds_file, "a") as fh:
                fh.writelines(json.dumps(r.to_json()) + "\n" for r in new)
                fh.flush()
                os.fsync(fh.fileno())

    try:
        results = evaluate_motions(env, act, progress=progress, done=finished, on_round=keep_round, plays=cfg.plays)
    finally:
        bar.close()
    rounds_file.unlink(missing_ok=True)
    runtime = time.perf_counter() - t0
    t = run.cfg.env.terminations
    report = {
        "checkpoint": str(run.checkpoint),
        "config": str(run.config_path),
        "epoch": int(run.state.get("epoch", 0)),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "simppo_version": simppo_version(),
        "device": device,
        "sim": type(env.sim).__name__,
        "trained_sim": run.cfg.sim.name,
        "randomization": cfg.randomization,
        "obs_noise": bool(cfg.obs_noise),
        "plays": cfg.plays,
        "num_envs": num_envs,
        "control_dt": float(env.dt),
        "motion_files": list(cfg.motion.files or run.cfg.motion.files),
        "kinematic_replay": bool(cfg.kinematic_replay),
        "runtime_s": runtime,
        "criteria": {
            "success": f"no termination and mean body-position error < {SUCCESS_MAX_BODY_ERROR_M} m at every step",
            "terminations": {"anchor_height": t.anchor_height, "anchor_ori": t.anchor_ori, "ee_height": t.ee_height},
            "bodies": "all bodies but the world body (MPJPE, velocity, acceleration)",
        },
        "summary": {**summarize(results), "runtime_s": runtime},
        "motions": [r.to_json() for r in results],
    }
    paths = write_outputs(out_dir, report, results, env.motion_lib, run.cfg.robot.name)
    if cfg.plot and (run.run_dir / METRICS_CSV).is_file():
        try:
            paths["curves"] = plot_curves(run.run_dir, out_dir / "curves.png")
        except (OSError, ValueError) as exc:
            print(f"{PROG}: warning: no learning curves ({exc})", file=sys.stderr)
    env.close()
    print(summary_table(report, results, cfg.worst))
    print(f"{PROG}: {runtime:.1f} s; wrote " + ", ".join(str(_final_path(p, out_dir, final_dir))
                                                         for p in paths.values()), flush=True)
    return report


def make_player(cfg, run, device: str):
    from simppo.eval.loading import build_model, make_eval_env
    from simppo.eval.player import Player

    env = make_eval_env(run, 1, device, cfg.motion.files, cfg.sim, kinematic_replay=cfg.kinematic_replay or None,
                        randomization=cfg.randomization, obs_noise=cfg.obs_noise)
    model = build_model(run, device)
    return Player(env, model.act_inference, plays=cfg.plays)


def run_video(cfg, run, device: str, out_dir: Path, final_dir: Path | None = None) -> list[dict[str, Path]]:
    from simppo.eval.loading import EvalInputError
    from simppo.eval.report import unique_stem
    from simppo.eval.video import FrameRenderer, record_motion

    player = make_player(cfg, run, device)
    names = player.motion_names
    if cfg.video.motions:
        missing = [n for n in cfg.video.motions if n not in names]
        if missing:
            raise EvalInputError(f"video.motions: unknown motion(s) {missing}; the set has {names[:10]}"
                                 f"{' ...' if len(names) > 10 else ''}")
        ids = [names.index(n) for n in cfg.video.motions]
    else:
        ids = list(range(min(len(names), cfg.video.max_motions)))
    try:
        renderer = FrameRenderer(player.env.sim.mj_model, cfg.video, root_body=int(player.env.sim.robot.root_body_id))
    except ValueError as exc:
        raise EvalInputError(str(exc)) from None
    written, used = [], set()
    for i, play in ((i, play) for i in ids for play in range(cfg.plays)):
        t0 = time.perf_counter()
        stem = unique_stem(names[i] + (f"_play{play}" if cfg.plays > 1 else ""), used)  # two names, two videos
        paths = record_motion(player, renderer, i, out_dir / "videos", cfg.video.seconds, stem, play)
        shown = {k: _final_path(p, out_dir, final_dir) for k, p in paths.items()}
        label = names[i] + (f" play {play}" if cfg.plays > 1 else "")
        print(f"{PROG}: {label}: {shown['video']} ({time.perf_counter() - t0:.1f} s), {shown['sheet']}", flush=True)
        written.append(shown)
    renderer.close()
    player.env.close()
    return written


def run_eval(cfg) -> int:
    from simppo.eval.config import VIEWERS
    from simppo.eval.loading import EvalInputError, load_run, torch_device
    from simppo.eval.outfiles import OutputFolderError, check_output_folder
    from simppo.utils.device import init_warp
    from simppo.utils.files import partial_directory, staged_directory

    if cfg.viewer not in VIEWERS:
        raise EvalInputError(f"viewer={cfg.viewer}: choose one of {', '.join(VIEWERS)}")
    if cfg.plays < 1:
        raise EvalInputError(f"plays={cfg.plays}: play each motion at least once")
    if cfg.plays > 1 and cfg.randomization == "none" and not cfg.obs_noise:
        raise EvalInputError(f"plays={cfg.plays}: the plays of a motion differ only under randomization=deploy or "
                             "obs_noise=true (without them every play is the same); add one or use plays=1")
    if cfg.viewer == "native" and not os.environ.get("DISPLAY") and sys.platform.startswith("linux"):
        raise EvalInputError("viewer=native needs a display (DISPLAY is not set); use viewer=web or viewer=video")
    # MuJoCo C steps on the CPU: a sim-to-sim check of a GPU run (sim=mujoco) picks the CPU by itself
    device = torch_device("cpu" if cfg.sim == "mujoco" and cfg.device == "auto" else cfg.device)
    init_warp()
    run = load_run(cfg.checkpoint, cfg.config, map_location=device)
    out_dir = Path(cfg.out).expanduser().resolve() if cfg.out else run.run_dir / "eval" / time.strftime(
        "%Y%m%d-%H%M%S")
    metrics = cfg.metrics if cfg.metrics is not None else cfg.viewer in ("none", "video")
    if metrics or cfg.viewer == "video":
        try:
            check_output_folder(out_dir, cfg.force)
        except OutputFolderError as exc:
            raise EvalInputError(str(exc)) from None
        # the whole set replaces the old one at the end, or nothing does
        if cfg.resume and not cfg.out:
            raise EvalInputError("resume=true needs out=DIR (the folder the interrupted evaluation was writing)")
        try:
            with staged_directory(out_dir, may_replace=out_dir.exists(), resumable=cfg.resume) as tmp:
                if metrics:
                    run_metrics(cfg, run, device, tmp, out_dir)
                if cfg.viewer == "video":
                    run_video(cfg, run, device, tmp, out_dir)
        except KeyboardInterrupt:
            if cfg.resume:
                print(f"{PROG}: interrupted; the motions played so far are kept in {partial_directory(out_dir)}: run "
                      "the same command again to continue", file=sys.stderr)
            raise
    if cfg.viewer == "native":
        from simppo.eval.native import run_native

        player = make_player(cfg, run, device)
        run_native(player, player.env.sim.mj_model)
    elif cfg.viewer == "web":
        from simppo.eval.web import WebViewer

        player = make_player(cfg, run, device)
        viewer = WebViewer(player, player.env.sim.mj_model, cfg.web.host, cfg.web.port, cfg.web.speed,
                           cfg.web.environment_map)
        print(f"{PROG}: web viewer at {viewer.url} (Ctrl-C to stop; from another machine: "
              f"ssh -L {viewer.port}:localhost:{viewer.port} HOST)", flush=True)
        try:
            viewer.run()
        except KeyboardInterrupt:
            pass
        finally:
            viewer.stop()
    return 0


def cli_main(prog: str, doc: str, schema: str, run, argv: list[str] | None) -> int:
    """Shared entry of the eval-side CLIs: ``--help`` prints ``doc``; ``argv`` composed on ``schema`` goes to
    ``run(cfg) -> exit status``; bad input is one line and exit status 2."""
    from simppo.eval.loading import EvalInputError

    argv = sys.argv[1:] if argv is None else list(argv)
    if any(a in ("-h", "--help") for a in argv):
        print(doc.strip().replace("``", ""))
        return 0
    cfg = None
    try:
        cfg = compose_cfg(schema, argv)
        return run(cfg)
    except (UsageError, EvalInputError) as exc:
        return report(prog, str(exc))
    except OSError as exc:  # an output that cannot be written (a file where a folder goes, no permission, disk full)
        if exc.filename is None:
            raise
        out = getattr(cfg, "out", None)  # the folder the command was making (the error may name a parent of it)
        return report(prog, os_error_line(exc, str(out) if out else os.fsdecode(exc.filename)))


def main(argv: list[str] | None = None) -> int:
    return cli_main(PROG, __doc__, "eval_schema", run_eval, argv)


if __name__ == "__main__":
    sys.exit(main())
