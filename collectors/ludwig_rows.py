"""Measured Ludwig runs (records of collectors/ludwig_child.py) -> workloads and feature-table rows.

A record's workload is perfmodel's own translation of the config it ran (`perfmodel.config.
load_workload` with the run's dataset, on this CPU) at the batch size Ludwig actually used (the
tuner's choice for `batch_size: auto`): the row describes what ran. One row per run:
`step_time_s` is the median full batch after the first (Ludwig's steps are batches; the runs use
no gradient accumulation, so a batch is an optimizer step), `step_times_s` every full batch after
the first (each epoch's partial last batch is a smaller batch: left out; the record keeps every
batch), and `notes` holds the whole run as JSON (total wall time, its start-up parts, steps,
evaluations, contention, Ludwig's own parameter count).
"""

from __future__ import annotations

import hashlib
import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

from perfmodel import __version__
from perfmodel.codec import workload_to_row
from perfmodel.config import load_workload


def record_batch_size(rec: dict[str, Any]) -> int:
    """The batch size Ludwig trained with (after tuning)."""
    prog = rec.get("progress") or {}
    return int(prog.get("batch_size") or rec["config_used"]["trainer"]["batch_size"])


def full_batches(rec: dict[str, Any]) -> list[float]:
    """Times of the batches of `batch_size` samples after the first (warm-up) batch: the last batch
    of an epoch holds only the remainder (training rows mod batch size) and is left out; a remainder
    of 1 is dropped by Ludwig itself (RandomAccessBatcher.last_batch)."""
    steps = list(rec["steps"]["all_s"])
    prog = rec.get("progress") or {}
    spe, train = prog.get("steps_per_epoch"), (rec.get("rows") or {}).get("train")
    batch = record_batch_size(rec)
    partial = bool(spe and train and train % batch > 1)
    return [float(t) for i, t in enumerate(steps) if i > 0 and not (partial and i % spe == spe - 1)]


def record_workload(
    rec: dict[str, Any], *, dataset: Path | None = None, actual_batch: bool = True, gpu: str = "cpu"
) -> Any:
    """perfmodel's workload for a measured run (a temporary copy of its config, its dataset, on
    `gpu`: this machine's CPU by default, or the measured host it ran on, e.g. LAB_HARDWARE_ID).
    `actual_batch`: pin the batch size Ludwig used (rows); False: predict as a user would."""
    # PyYAML: only when YAML is read
    import yaml


    ds = dataset or Path(rec["dataset"])
    with tempfile.TemporaryDirectory(prefix="perfmodel-ludwig-") as tmp:
        cfg = Path(tmp) / "config.yaml"
        cfg.write_text(yaml.safe_dump(rec["config_used"]))
        overrides = [f"training.micro_batch_size={record_batch_size(rec)}"] if actual_batch else []
        return load_workload(cfg, dataset=ds, gpu=gpu, overrides=overrides)


def run_summary(rec: dict[str, Any]) -> dict[str, Any]:
    """The whole run, for the row's notes (seconds; Ludwig's counts)."""
    ph, st = rec["phases_s"], rec["steps"]
    return {
        "ludwig_run": rec["name"],
        "ludwig_version": rec.get("ludwig_version"),
        "total_wall_s": rec["total_wall_s"],
        "import_s": rec.get("import_total_s"),
        "ludwig_model_ctor_s": rec.get("ludwig_model_ctor_s"),
        "preprocess_s": ph.get("preprocess"),
        "create_model_s": ph.get("create_model"),
        "tune_batch_size_s": ph.get("tune_batch_size_total"),
        "train_call_to_first_step_s": ph.get("train_call_to_first_batch"),
        "steps_sum_s": ph.get("steps_sum"),
        "evals_sum_s": ph.get("evals_sum"),
        "after_last_step_s": ph.get("after_loop_to_return"),
        "steps": st["count"],
        "optimizer_steps": st.get("optimizer_steps"),
        "evaluations": len(rec.get("evals") or []),
        "rows": rec.get("rows"),
        "batch_size": record_batch_size(rec),
        "tuned": [[t["for_training"], t["chosen"]] for t in rec.get("tune") or []],
        "model_params_ludwig": rec.get("model_params"),
        "contention": (rec.get("runq_wait_s") or {}).get("train_call_fraction_of_wall"),
        "load_avg_start": rec.get("load_avg_start"),
        "load_avg_end": rec.get("load_avg_end"),
        "under_load": under_load(rec),
        "repeats": rec.get("repeats"),
    }


UNDER_LOAD = 2.0
"""1-minute load average above which a run on the 2-core host is flagged `under_load` in its row's
notes (other work shared the CPUs: its times are longer than a quiet host's)."""


def under_load(rec: dict[str, Any]) -> bool:
    """Whether the run, or any of its repeats, started or ended with a 1-minute load above UNDER_LOAD."""
    loads = [rec.get("load_avg_start"), rec.get("load_avg_end")]
    loads += [x.get(k) for x in rec.get("repeats") or [] for k in ("load_avg_start", "load_avg_end")]
    return any(float(v[0]) > UNDER_LOAD for v in loads if v)


def records_to_rows(records: list[dict[str, Any]], *, hardware_id: str) -> list[dict[str, Any]]:
    """One feature-table row per measured record."""
    rows = []
    for rec in records:
        steps = full_batches(rec)  # the first batch warms up (allocations, lazy init)
        if not steps:
            continue
        w = record_workload(rec)  # this machine: the host that just measured it
        batch = record_batch_size(rec)
        median = statistics.median(steps)
        key = json.dumps(
            {"hw": hardware_id, "name": rec["name"], "config": rec["config_used"], "rows": rec.get("rows")},
            sort_keys=True,
        )
        row_id = "ludwig-" + hashlib.sha256(key.encode()).hexdigest()[:20]
        rows.append(
            workload_to_row(
                w,
                row_id=row_id,
                source="perfmodel-collector",
                citation=f"collectors/ludwig_profile.py (ludwig {rec.get('ludwig_version')}, torch {rec.get('torch_version')})",
                source_kind="own",
                collected_at=rec.get("collected_at") or "",
                collector_version=__version__,
                hardware_id=hardware_id,
                status="ok",
                benchmark_kind="training_slice",
                notes=json.dumps(run_summary(rec), sort_keys=True),
                step_time_s=median,
                step_time_std_s=statistics.pstdev(steps) if len(steps) > 1 else 0.0,
                step_times_s=[float(s) for s in steps],
                warmup_steps=1,
                measured_steps=len(steps),
                samples_per_s=batch / median,
                includes_optimizer_step=True,
                torch_version=str(rec.get("torch_version") or ""),
                repeat_index=0,
            )
        )
    return rows
