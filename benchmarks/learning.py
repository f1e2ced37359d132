"""Learning per sample: train ``env=humanoid_imitation`` with the shipped defaults on a motion set, and at fixed
sample counts play every motion from t = 0 with ``simppo-eval``'s evaluator.

    python benchmarks/learning.py MOTIONS... [--samples 0.5e6,1e6,2e6,5e6] [--num-envs 256] [--seed 0]
        [--out DIR] [--resume CKPT | --branch CKPT] [--max-train-s S] [-- HYDRA_OVERRIDES...]

``MOTIONS``: packs, motion files or YAML manifests (as ``simppo-pack`` takes them; not packs are packed into
``DIR/pack`` first), e.g. real clips you hold by path (never committed). Everything after ``--`` is passed to the
training config as ``simppo-train`` overrides: that is how an ablation differs from the shipped defaults, e.g.
``-- env.action_reference=0`` (the default-pose action map).

At each sample count (the first iteration that reaches it) the run prints and appends to ``DIR/curve.jsonl``: the
success rate (ProtoMotions' rule: no termination and a mean global body error under 0.5 m at every step), the survival
fraction of clip time, global and root-relative MPJPE (mean over motions, mm; root-relative also over the tracked
motions alone), the anchor-aligned body error, per motion success / survival / MPJPE and its share of the starts (the
sampler's, now) and of the training samples (since the last row), the training samples/s of this machine (named in the
first line), and PPO's own health since the last row (mean KL to the rollout policy, clip fraction, explained
variance, the actor's learning rate, σ), each motion's σ (its own row with ``agent.exploration=per_motion``) and
the reward σ of the terms that ``env.adaptive_sigma`` tightens (the mean over the motions, and each motion's own with
``env.adaptive_sigma.per_motion``).
``DIR/samples_<N>.ckpt`` is the checkpoint at that point (``simppo-eval checkpoint=DIR/samples_<N>.ckpt`` plays it;
``DIR/config.yaml`` is the run's config). The evaluation leaves the training's random stream untouched, so the curve
of one run is the curve of a run stopped at any of its sample counts, and ``--resume DIR/samples_<N>.ckpt`` continues
a run from one of them exactly (same command, larger ``--samples``; rows up to ``N`` are not repeated, samples/s
counts the continued part). ``--max-train-s S`` ends a run on a machine lent for a fixed time: after S seconds of
training it writes a last row and checkpoint at the samples reached (marked ``"stopped"``), which ``--resume``
continues. ``--branch RUN/samples_<N>.ckpt --out NEW -- OVERRIDES`` continues that checkpoint under other overrides
into a new folder: an ablation of what happens after ``N`` samples (e.g. a setting that only acts late), paired
with the run it branches from, for the cost of the samples after ``N``. Each of its rows records the checkpoint and
the settings that differ from that run's (``"branched_from"``).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

import torch
from omegaconf import OmegaConf

from simppo.agent.exploration import motion_rows
from simppo.cli.train import build_training, compose_training
from simppo.eval.loading import build_eval_env
from simppo.eval.metrics import summarize
from simppo.eval.periodic import evaluate_policy
from simppo.kernels.imitation.spec import REWARD_NAMES
from simppo.motion.pack import pack_motions


def machine_name() -> str:
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
        amx = "amx_tile" in Path("/proc/cpuinfo").read_text()
    except OSError:
        amx = False
    cores = len(__import__("os").sched_getaffinity(0))
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    return f"{cores} cores {model}{' (AMX)' if amx else ''}, {gpu}, {platform.python_version()}"


def motion_pack(inputs: list[str], out: Path) -> str:
    """One pack directory for ``inputs`` (an existing pack is used as it is)."""
    if len(inputs) == 1 and (Path(inputs[0]) / "index.json").is_file():
        return inputs[0]
    pack_motions(inputs, str(out / "pack"), robot="g1", force=True)
    return str(out / "pack")


# PPO's own health per row (means over the iterations since the last row): a clip fraction far above ~0.2 or a KL
# far above the target says the steps are too large for the batch; a low explained variance, a critic that lags
UPDATE_KEYS = ("actor/kl", "actor/clip_frac", "explained_variance", "actor/lr")


def _flat(tree, prefix: str = "") -> dict:
    """``{"a.b": value}`` for every leaf of a nested dict."""
    out = {}
    for k, v in tree.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def config_difference(checkpoint: Path, cfg, defaults=None) -> tuple[list[str], str | None]:
    """The settings in which ``cfg`` differs from the config of the run that wrote ``checkpoint`` (its folder's
    ``config.yaml``): their keys, and ``key=saved (now value), ...`` (``None`` when none differs). A key the saved
    config lacks (a setting simppo gained after the run) counts as unchanged where ``cfg`` holds its value in
    ``defaults`` (the config without the ablation's overrides): the run trained without it, which is what its
    default does. Exits with one line when that ``config.yaml`` is missing."""
    saved_path = checkpoint.parent / "config.yaml"
    if not saved_path.is_file():
        sys.exit(f"learning.py: {saved_path}: missing; --resume / --branch need the config of the run that wrote "
                 f"{checkpoint.name}")
    saved = _flat(OmegaConf.to_container(OmegaConf.load(saved_path), resolve=True))
    now = _flat(OmegaConf.to_container(OmegaConf.structured(cfg), resolve=True))
    if defaults is not None:
        default = _flat(OmegaConf.to_container(OmegaConf.structured(defaults), resolve=True))
        saved.update({k: v for k, v in now.items() if k not in saved and default.get(k, "<unset>") == v})
    diff = sorted(k for k in saved.keys() | now.keys() if saved.get(k, "<unset>") != now.get(k, "<unset>"))
    if not diff:
        return [], None
    shown = ", ".join(f"{k}={saved.get(k, '<unset>')} (now {now.get(k, '<unset>')})" for k in diff[:4])
    return diff, shown + (f" and {len(diff) - 4} more" if len(diff) > 4 else "")


RATES = ("actor_lr", "critic_lr")  # the algorithm's device tensors that its optimizers' groups read


def learning_rates(agent) -> dict[str, torch.Tensor]:
    return {name: getattr(agent.algorithm, name).clone() for name in RATES}


def set_learning_rates(agent, rates: dict[str, torch.Tensor]) -> None:
    for name, value in rates.items():
        getattr(agent.algorithm, name).copy_(value)
    agent.algorithm.sync_log_std_lr()


def train_overrides(overrides: list[str]) -> list[str]:
    return [*overrides, "logger=none", "progress_bar=false", "eval_every=0", "experiment_name=learning"]


def adapted_sigmas(env, motion_id: int | None = None) -> dict[str, float]:
    """The reward σ of each term ``env.adaptive_sigma`` tightens: the mean over σ's rows, or ``motion_id``'s row."""
    rows = env.reward_sigmas if motion_id is None else env.reward_sigmas[motion_id:motion_id + 1]
    return {name: round(float(rows[:, i].mean()), 4) for i, name in enumerate(REWARD_NAMES)
            if name in env.cfg.adaptive_sigma.terms}


def motion_sigmas(agent) -> list[float]:
    """σ (the mean over the joints) each motion id samples with: its row with per-motion exploration, else the
    shared σ."""
    sigma = agent.model.actor.effective_log_std().detach().exp().mean(-1).cpu()
    if sigma.dim() == 0:
        return [float(sigma)] * agent.motion_index.num_motions
    return sigma[motion_rows(agent.motion_index)].tolist()


class MotionSampleCounter:
    """Training samples each motion received: wraps ``env.step`` so that every control step adds one sample to the
    motion id each env plays (``env.motion_ids [N]``, read before the step's resets draw new ones), as a device
    ``index_add_`` (no host read in the rollout). The sampler's shares count starts; a clip whose episodes end
    early gets fewer samples per start, which this measures."""

    def __init__(self, env):
        self.counts = torch.zeros(env.motion_lib.num_motions, dtype=torch.int64, device=env.device)
        ones = torch.ones(env.num_envs, dtype=torch.int64, device=env.device)
        ids, step = env.motion_ids, env.step

        def counted_step(actions):
            self.counts.index_add_(0, ids.long(), ones)
            return step(actions)

        env.step = counted_step

    def take(self) -> list[int]:
        """Samples of each motion id ``[num_motions]`` since the last call (one host read)."""
        counts = self.counts.tolist()
        self.counts.zero_()
        return counts


def evaluate(model, eval_env) -> tuple[dict, list]:
    results = evaluate_policy(eval_env, model)
    return summarize(results), results


def main() -> None:
    argv = sys.argv[1:]
    overrides = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("motions", nargs="+")
    p.add_argument("--samples", default="0.5e6,1e6,2e6,5e6", help="comma-separated sample counts")
    p.add_argument("--num-envs", type=int, default=256)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu")
    p.add_argument("--eval-envs", type=int, default=16, help="motions played at a time")
    p.add_argument("--out", default=None, help="output folder (default: a new temporary folder)")
    p.add_argument("--resume", default=None, help="a samples_<N>.ckpt of this run to continue from")
    p.add_argument("--branch", default=None,
                   help="a samples_<N>.ckpt of another run to continue under these overrides, into --out")
    p.add_argument("--max-train-s", type=float, default=None,
                   help="stop once this many seconds of training have passed, with a last row and checkpoint at the "
                        "samples reached (a machine lent for a fixed time)")
    args = p.parse_args(argv)
    milestones = sorted(int(float(s)) for s in args.samples.split(","))
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="simppo_learning_"))
    out.mkdir(parents=True, exist_ok=True)
    pack = motion_pack(args.motions, out)
    base = [f"motion.files=[{pack}]", f"num_envs={args.num_envs}", f"seed={args.seed}"]
    overrides = [*base, *overrides]
    print(f"machine: {machine_name()}; overrides: {overrides}; out: {out}", flush=True)

    if args.resume and args.branch:
        sys.exit("learning.py: --resume continues this run, --branch another one: give one of them")
    start = args.resume or args.branch
    changed, difference = [], None
    if start:
        changed, difference = config_difference(Path(start), compose_training(train_overrides(overrides), args.device),
                                                compose_training(train_overrides(base), args.device))
    if args.resume and difference:  # a continued run must train what its first part trained (one config a curve)
        sys.exit(f"learning.py: {Path(start).parent / 'config.yaml'}: the run was trained with {difference}; pass "
                 "the same overrides to continue it (or --branch it into a new --out)")  # before the env is built
    if args.branch and Path(args.branch).resolve().parent == out.resolve():
        sys.exit(f"learning.py: --branch {args.branch}: give a new --out for the branch (its folder is the run's)")
    branched_from = {"checkpoint": str(Path(args.branch).resolve()),
                     "changed": difference or "no setting"} if args.branch else None
    if branched_from:
        print(f"branched from {branched_from['checkpoint']}: {branched_from['changed']}", flush=True)
    cfg, env, agent = build_training(train_overrides(overrides), args.device)
    num_motions = env.motion_lib.num_motions
    eval_env = build_eval_env(cfg, max(1, min(args.eval_envs, num_motions)), args.device)
    (out / "config.yaml").write_text(OmegaConf.to_yaml(OmegaConf.structured(cfg)))  # simppo-eval reads it
    runner = agent.loop(out, max_epochs=10 ** 9)
    motion_samples = MotionSampleCounter(env)
    if start:
        # a branch that changes the agent's settings starts at their rates, not at the checkpoint's
        rates = learning_rates(agent) if args.branch and any(k.startswith("agent.") for k in changed) else None
        runner.resume(start)  # weights, optimizers, normalizers, counters, random streams and the env
        if rates is not None:
            set_learning_rates(agent, rates)
    train_metrics: dict[str, float] = {}
    curve = out / "curve.jsonl"
    train_s, t_wall, first_step = 0.0, time.perf_counter(), runner.step_count
    out_of_time = False
    for target in (m for m in milestones if m > first_step):
        update_sums, iterations = dict.fromkeys(UPDATE_KEYS, 0.0), 0
        while runner.step_count < target and not out_of_time:
            t0 = time.perf_counter()
            train_metrics = runner.train_iteration()
            train_s += time.perf_counter() - t0
            for k in UPDATE_KEYS:
                update_sums[k] += float(train_metrics.get(k, float("nan")))
            iterations += 1
            out_of_time = args.max_train_s is not None and train_s >= args.max_train_s
        stopped_short = out_of_time and runner.step_count < target
        if stopped_short:  # the last row is where the time ran out, short of its sample count
            target = runner.step_count
        t0 = time.perf_counter()
        s, results = evaluate(agent.model, eval_env)
        eval_s = time.perf_counter() - t0
        tracked = [r.mpjpe_local_mm for r in results if r.success]
        start_share = env.sampler.motion_shares().tolist()
        # the root assist's share per motion (one for all with env.assist.fade=schedule; 0 without the assist)
        shares = env.assist_alpha.tolist() if env.assist is not None else [0.0]
        assist = [shares[min(i, len(shares) - 1)] for i in range(len(start_share))]
        sigmas = motion_sigmas(agent)
        samples = motion_samples.take()
        total_samples = max(sum(samples), 1)
        sample_share = [n / total_samples for n in samples]
        row = {"samples": runner.step_count, "iterations": runner.epoch,
               "train_samples_per_s": (runner.step_count - first_step) / train_s,
               "success_rate": s["success_rate"], "survival_fraction": s["survival_fraction"],
               "mpjpe_global_mm": s["mpjpe_global_mm"], "mpjpe_local_mm": s["mpjpe_local_mm"],
               "mpjpe_local_mm_tracked": sum(tracked) / len(tracked) if tracked else None,
               "anchor_body_error_m": s["anchor_body_error_m"], "failure_causes": s["failure_causes"],
               "train_episode_length_s": train_metrics.get("episode/length", float("nan")) * env.dt,
               "train_body_pos_error_m": train_metrics.get("error/body_pos"),
               "update": {k: v / max(iterations, 1) for k, v in update_sums.items()},
               "sigma_mean": float(agent.model.actor.effective_log_std().detach().exp().mean()),
               "termination_scale": float(env.termination_scale[0]),
               "reset_noise_scale": float(env.reset_noise_scale[0]) if env.reset_noise is not None else 0.0,
               "reward_sigmas": adapted_sigmas(env),
               "eval_s": eval_s, "wall_s": time.perf_counter() - t_wall, "overrides": overrides,
               "motions": {r.name: {"success": r.success, "survival_s": round(r.survival_s, 3),
                                    "length_s": round(r.length_s, 3), "mpjpe_global_mm": round(r.mpjpe_global_mm, 1),
                                    "mpjpe_local_mm": round(r.mpjpe_local_mm, 1),
                                    "failure": r.failure, "start_share": round(start_share[r.motion_id], 4),
                                    "train_samples": samples[r.motion_id],
                                    "sample_share": round(sample_share[r.motion_id], 4),
                                    "assist": round(assist[r.motion_id], 4),
                                    "sigma": round(sigmas[r.motion_id], 4),
                                    **({"reward_sigmas": adapted_sigmas(env, r.motion_id)}
                                       if env.reward_sigmas.shape[0] > 1 else {})}
                           for r in results}}
        if stopped_short:
            row["stopped"] = f"--max-train-s {args.max_train_s:g}"
        if branched_from:
            row["branched_from"] = branched_from
        with curve.open("a") as f:
            f.write(json.dumps(row) + "\n")
        runner.save(f"samples_{target}.ckpt")
        fmt = lambda v, spec: "n/a" if v is None else format(v, spec)  # noqa: E731
        print(f"samples {row['samples']:>9d} it {row['iterations']:5d} | success {fmt(row['success_rate'], '.2f')} "
              f"survival {fmt(row['survival_fraction'], '.3f')} | MPJPE global {fmt(row['mpjpe_global_mm'], '.1f')} "
              f"root-rel {fmt(row['mpjpe_local_mm'], '.1f')} (tracked {fmt(row['mpjpe_local_mm_tracked'], '.1f')}) mm"
              f" | {row['train_samples_per_s']:.0f} samples/s | causes {row['failure_causes']} | training episodes "
              f"{row['train_episode_length_s']:.2f} s", flush=True)
        u = row["update"]
        print(f"    update since the last row: KL {u['actor/kl']:.4f} clip fraction {u['actor/clip_frac']:.3f} "
              f"explained variance {u['explained_variance']:.3f} actor lr {u['actor/lr']:.2e}; sigma mean "
              f"{row['sigma_mean']:.3f}; termination thresholds x {row['termination_scale']:.3f}; reset noise x "
              f"{row['reset_noise_scale']:.2f}"
              + "".join(f"; reward sigma {k} {v:.3f}" for k, v in row["reward_sigmas"].items()), flush=True)
        for name, m in row["motions"].items():
            fail = f" failed at {m['failure']['time_s']:.2f} s ({m['failure']['cause']})" if m["failure"] else ""
            print(f"    {name:<24} {'ok  ' if m['success'] else 'FAIL'} {m['survival_s']:7.2f}/{m['length_s']:.2f} s "
                  f"global {m['mpjpe_global_mm']:6.1f} root-rel {m['mpjpe_local_mm']:6.1f} mm, "
                  f"{100 * m['start_share']:4.1f} % of the starts, {100 * m['sample_share']:4.1f} % of the samples, "
                  f"assist {m['assist']:.2f}, sigma {m['sigma']:.3f}"
                  f"{fail}", flush=True)
        if out_of_time:
            ckpt = out / f"samples_{target}.ckpt"
            print(f"stopped after {train_s:.0f} s of training (--max-train-s); --resume {ckpt} continues the run",
                  flush=True)
            break
    eval_env.close()
    env.close()


if __name__ == "__main__":
    main()
