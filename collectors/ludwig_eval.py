"""perfmodel's prediction for measured Ludwig runs, as a user would ask it, against what Ludwig did.

    python -m collectors.ludwig_profile --evaluate RUNS_DIR [--model-dir DIR] [--analytic]

For each record in RUNS_DIR (collectors/ludwig_child.py, or the lab's run_ludwig.py: the same
format): `perfmodel predict` of the config it ran (`config_used`) with its dataset on this CPU,
the batch size as the config says (`auto` stays auto). Measured total = process start -> train()
returned. Metrics: absolute percentage error of the total (APE), whether the measured total lies in
the 90% interval, and whether perfmodel's step count equals Ludwig's (batches).
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collectors.ludwig_rows import full_batches, record_workload, under_load
from perfmodel.prediction import predict


@dataclass(frozen=True, kw_only=True)
class RunComparison:
    """One measured run next to perfmodel's prediction."""

    name: str
    measured_s: float
    predicted_s: float
    low_s: float
    high_s: float
    steps_ludwig: int
    steps_perfmodel: int
    step_measured_s: float
    step_predicted_s: float
    contention: float
    kind: str = ""
    """ECD tabular | ECD text | ECD image | LLM (`model_kind`)."""
    under_load: bool = False
    """The run started or ended with a 1-minute load average above 2 (collectors.ludwig_rows.under_load)."""
    step_cpu_s: float | None = None
    """Median on-CPU seconds of Ludwig's main thread per full batch (records that have it): on a
    loaded host, where wall times are not a quiet host's, the step time's proxy."""

    @property
    def ape(self) -> float:
        return abs(self.predicted_s - self.measured_s) / self.measured_s

    @property
    def inside(self) -> bool:
        return self.low_s <= self.measured_s <= self.high_s


KINDS = ("ECD tabular", "ECD text", "ECD image", "LLM")


def model_kind(config: dict[str, Any]) -> str:
    """The run's model type: LLM, or an ECD model by its input features (image > text > tabular)."""
    if str(config.get("model_type", "ecd")).lower() == "llm":
        return "LLM"
    types = {str(f.get("type", "")).lower() for f in config.get("input_features") or []}
    if "image" in types:
        return "ECD image"
    if types & {"text", "sequence", "timeseries"}:
        return "ECD text"
    return "ECD tabular"


def _step_cpu_s(rec: dict[str, Any]) -> float | None:
    cpu = (rec.get("steps") or {}).get("main_thread_cpu_s")
    if not cpu:
        return None
    walls = set(full_batches(rec))
    kept = [c for c, t in zip(cpu, rec["steps"]["all_s"], strict=False) if t in walls] or list(cpu)
    return float(statistics.median(kept))


def _dataset(rec: dict[str, Any], runs_dir: Path) -> Path:
    ds = Path(rec["dataset"])
    if ds.is_absolute():
        return ds
    return (runs_dir.parent / ds).resolve()


def _with_local_paths(rec: dict[str, Any], runs_dir: Path) -> dict[str, Any]:
    """A relative local `base_model` (a model folder committed beside the runs) made absolute, so
    the prediction reads its config and tokenizer wherever the records are."""
    base = rec["config_used"].get("base_model")
    if isinstance(base, str) and not Path(base).is_absolute() and (runs_dir.parent / base).is_dir():
        rec = {**rec, "config_used": {**rec["config_used"], "base_model": str((runs_dir.parent / base).resolve())}}
    return rec


LAB_HARDWARE_ID = "cpu-2c-cba6f5"
"""The host the lab's runs were measured on (this project's 2-core machine, datasets/raw/fingerprint__cpu-2c-cba6f5.json):
predictions are made for it by name, so the evaluation does not depend on the machine running it."""


def evaluate_runs(
    runs_dir: Path, *, model_dir: str | None = None, use_learned: bool = True
) -> list[RunComparison]:
    """Predict every record in `runs_dir` (sorted by name) and compare."""
    out = []
    for p in sorted(runs_dir.glob("*.json")):
        if p.name.endswith(".contended.json"):
            continue
        rec = _with_local_paths(json.loads(p.read_text()), runs_dir)
        w = record_workload(rec, dataset=_dataset(rec, runs_dir), actual_batch=False, gpu=LAB_HARDWARE_ID)
        pred = predict(w, model_dir=model_dir, use_learned=use_learned)
        st = rec["steps"]
        out.append(
            RunComparison(
                name=str(rec["name"]),
                measured_s=float(rec["total_wall_s"]),
                predicted_s=pred.total_time_s.estimate,
                low_s=pred.total_time_s.low,
                high_s=pred.total_time_s.high,
                steps_ludwig=int(st["count"]),
                steps_perfmodel=int(pred.total_steps),
                step_measured_s=float(st["median_s"]),
                step_predicted_s=pred.step_time_s.estimate,
                contention=float((rec.get("runq_wait_s") or {}).get("train_call_fraction_of_wall", 0.0)),
                kind=model_kind(rec["config_used"]),
                under_load=under_load(rec),
                step_cpu_s=_step_cpu_s(rec),
            )
        )
    return out


def summary(rows: list[RunComparison]) -> dict[str, float]:
    return {
        "runs": float(len(rows)),
        "median_ape": statistics.median(r.ape for r in rows) if rows else float("nan"),
        "coverage": sum(r.inside for r in rows) / len(rows) if rows else float("nan"),
        "median_width": statistics.median(r.high_s / r.low_s for r in rows) if rows else float("nan"),
        "steps_equal": sum(r.steps_ludwig == r.steps_perfmodel for r in rows) / len(rows)
        if rows
        else float("nan"),
    }


def summary_by_kind(rows: list[RunComparison]) -> dict[str, dict[str, float]]:
    """`summary` per model type (the types with runs)."""
    return {k: summary([r for r in rows if r.kind == k]) for k in KINDS if any(r.kind == k for r in rows)}


def evaluation_table(rows: list[RunComparison]) -> str:
    """A Markdown table (one line per run) and the three headline numbers."""
    lines = [
        "| run | measured s | perfmodel s [90% interval] | APE | inside | steps Ludwig / perfmodel | "
        "step s measured / perfmodel |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.name} | {r.measured_s:.1f} | {r.predicted_s:.1f} [{r.low_s:.1f}, {r.high_s:.1f}] | {r.ape:.0%} | "
            f"{'yes' if r.inside else 'no'} | {r.steps_ludwig} / {r.steps_perfmodel} | "
            f"{r.step_measured_s:.4f} / {r.step_predicted_s:.4f} |"
        )
    s = summary(rows)
    lines.append("")
    lines.append(
        f"{int(s['runs'])} runs: total-time median APE {s['median_ape']:.0%}, measured total inside the 90% "
        f"interval {s['coverage']:.0%} (median width x{s['median_width']:.2f}, high / low), step count equal to "
        f"Ludwig's {s['steps_equal']:.0%}"
    )
    for kind, k in summary_by_kind(rows).items():
        lines.append(
            f"- {kind}: {int(k['runs'])} runs, median APE {k['median_ape']:.0%}, inside {k['coverage']:.0%}"
        )
    loaded = [r for r in rows if r.under_load]
    if loaded:
        lines.append(f"{len(loaded)} run(s) started or ended with a 1-minute load average above 2")
    proxied = [r for r in loaded if r.step_cpu_s is not None]
    if proxied:
        lines.append(
            "step times of those with per-batch CPU times: "
            + ", ".join(
                f"{r.name} (step {r.step_measured_s:.3f} s wall"
                + (f", {r.step_cpu_s:.3f} s main-thread CPU" if r.step_cpu_s is not None else "")
                + f" / {r.step_predicted_s:.3f} s predicted)"
                for r in proxied
            )
        )
    return "\n".join(lines)
