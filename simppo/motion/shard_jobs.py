"""Write the shards of a pack in worker processes, with a progress bar, resumably.

:func:`run_shard_jobs` runs one job per shard: ``fn(tmp / job.file, *job.args, *shared)`` returns a dict of plain
types (the shard's index entry and messages). ``shared`` (the robot, the options) goes to each worker once. With
``resume``, every finished job's result is recorded with its ``signature`` (a digest of its inputs and options) in
``tmp/progress.json``, written atomically after each shard; a later run over the same folder skips the jobs whose
signature and shard file are still there.
"""

from __future__ import annotations

import json
import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

from simppo.motion.format import write_json_atomic

PROGRESS_FILE = "progress.json"

_shared: tuple = ()  # a worker's copy of ``shared``


@dataclass
class ShardJob:
    file: str  # the shard's file name inside the folder
    signature: str  # digest of everything the shard is made from
    args: tuple  # what ``fn`` needs besides the path and ``shared``


def default_workers() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _init_worker(shared: tuple) -> None:
    global _shared
    _shared = shared


def _run_in_worker(fn: Callable, path: Path, args: tuple) -> dict:
    return fn(path, *args, *_shared)


def read_progress(tmp: Path) -> dict[str, dict]:
    """The finished jobs recorded in ``tmp`` (``{}`` when there is no readable record)."""
    try:
        record = json.loads((tmp / PROGRESS_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return record.get("shards", {}) if isinstance(record, dict) else {}


def run_shard_jobs(tmp: Path, jobs: list[ShardJob], fn: Callable, shared: tuple, workers: int | None = None,
                   resume: bool = False, progress: bool = False) -> list[dict]:
    """Every job's result, in job order. Jobs run in ``workers`` processes (``None``: one per core; one job or
    one worker: in this process). The first error stops the rest and is raised."""
    from tqdm import tqdm

    done = read_progress(tmp) if resume else {}
    results: dict[int, dict] = {}
    for i, job in enumerate(jobs):
        rec = done.get(job.file)
        if isinstance(rec, dict) and rec.get("signature") == job.signature and (tmp / job.file).is_file():
            results[i] = rec["result"]
    finished = {jobs[i].file: {"signature": jobs[i].signature, "result": r} for i, r in results.items()}
    todo = [i for i in range(len(jobs)) if i not in results]
    bar = tqdm(total=len(jobs), initial=len(results), unit="shard", desc="simppo-pack", disable=not progress)

    def record(i: int, result: dict) -> None:
        results[i] = result
        bar.update(1)
        if resume:
            finished[jobs[i].file] = {"signature": jobs[i].signature, "result": result}
            write_json_atomic(tmp / PROGRESS_FILE, {"shards": finished})

    n = min(workers or default_workers(), len(todo))
    try:
        if n <= 1:
            for i in todo:
                record(i, fn(tmp / jobs[i].file, *jobs[i].args, *shared))
        else:  # spawn: the workers start clean (no copy of this process's threads or device state)
            ctx = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(n, mp_context=ctx, initializer=_init_worker, initargs=(shared,)) as pool:
                pending = {pool.submit(_run_in_worker, fn, tmp / jobs[i].file, jobs[i].args): i for i in todo}
                try:
                    while pending:
                        complete, _ = wait(pending, return_when=FIRST_COMPLETED)
                        for f in complete:
                            record(pending.pop(f), f.result())
                finally:
                    for f in pending:
                        f.cancel()
    finally:
        bar.close()
    return [results[i] for i in range(len(jobs))]
