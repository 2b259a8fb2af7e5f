"""How right is the memory model, and does its verdict ever say "fits" for a run that runs out of
memory?

Three checks, each against a reference that is not the model itself:
  * measured peaks (`perfmodel.paths.peak_memory_path()`, datasets/public/memory/peak_memory.parquet,
    built by collectors.public.memory): each row's published number compared with the predicted
    number of the same kind (allocated, reserved or device total), its error per regime and
    whether it lies inside that number's interval;
  * the false-fit rate: every measured row posed on every catalog accelerator that can run its
    precision; a false fit is a verdict of "fits" or "tight" on a card whose memory the measured
    peak exceeds (counted over all cards, and near the boundary: within 25% of the measured peak);
  * the FakeTensor oracle (`perfmodel.paths.memory_oracle_path()`, datasets/memory/oracle_grid.csv,
    written by `python -m collectors.memory_grid`): the analytic allocated peak against
    the oracle's exact one on a grid of shapes.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfmodel.analytic.fit_verdict import verdict_of
from perfmodel.analytic.memory import MemoryBreakdown, estimate_memory
from perfmodel.catalog import get_gpu, get_model, gpu_names
from perfmodel.catalog.frameworks import recipe_of
from perfmodel.codec import is_missing, model_columns, workload_from_row
from perfmodel.config import load_workload
from perfmodel.errors import ConfigError
from perfmodel.paths import memory_oracle_path, peak_memory_path
from perfmodel.workload import Workload

KINDS = ("allocated", "reserved", "device")
"""What a measured peak is: torch.cuda.max_memory_allocated, max_memory_reserved, nvidia-smi."""
BOUNDARY = 0.25
"""'Near the boundary': a card whose memory is within this fraction of the measured peak."""


@dataclass(frozen=True, kw_only=True)
class FalseFits:
    """Verdicts on cards the measured peak exceeds."""

    posed: int
    """(row, card) pairs posed."""
    over: int
    """Pairs whose measured peak exceeds the card's memory."""
    false_fits: int
    """Of those, verdicts 'fits' or 'tight'."""
    near_over: int
    """Pairs over the capacity within BOUNDARY of it."""
    near_false_fits: int
    false_oom: int
    """Pairs the measured peak fits in but the verdict says 'does not fit' (the other mistake)."""
    under: int
    """Pairs whose measured peak fits in the card."""
    cases: tuple[dict[str, Any], ...] = ()
    """Every false fit: row, card, measured, predicted device total, verdict."""

    @property
    def rate_pct(self) -> float:
        return 100.0 * self.false_fits / self.over if self.over else 0.0

    @property
    def near_rate_pct(self) -> float:
        return 100.0 * self.near_false_fits / self.near_over if self.near_over else 0.0

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "rate_pct": self.rate_pct, "near_rate_pct": self.near_rate_pct}


@dataclass(frozen=True, kw_only=True)
class MemoryCheck:
    table: Any
    """One row per measurement: configuration, measured GB and its kind, the predicted number of
    that kind with its interval, error %."""
    median_abs_error_pct: float
    p90_abs_error_pct: float
    within_interval_pct: float
    """Share of measurements inside the interval of the predicted number of their kind."""
    by_regime: tuple[dict[str, Any], ...]
    false_fits: FalseFits
    """Rows whose peak is an allocated one (a run needs at least that much), posed on every card."""
    false_fits_upper: FalseFits
    """Rows whose peak is reserved or nvidia-smi's, posed on every card: those numbers grow toward
    the capacity of the card they were measured on (the allocator keeps freed blocks), so they
    overstate what a smaller card needs and count more false fits than runs would have."""


def workload_for(row: dict[str, Any]) -> Workload:
    """The workload of one peak-memory measurement: the catalog model named by model_name, the
    row's own training and parallel settings (perfmodel.codec reads them), its optimizer state
    format and checkpointing policy."""
    stated = {k: v for k, v in row.items() if not is_missing(v)}
    w = workload_from_row({**model_columns(get_model(str(row["model_name"]))), **stated})
    extra: dict[str, Any] = {k: str(stated[k]) for k in ("optimizer_state", "checkpointing_policy", "optimizer", "attention_kernel") if k in stated}
    if extra:
        w = dataclasses.replace(w, training=dataclasses.replace(w.training, **extra))
    if "framework_recipe" in stated:  # what the source says its stack changed (Liger's kernels, an older optimizer)
        fields = json.loads(str(stated["framework_recipe"]))
        fields = {k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()}
        w = dataclasses.replace(w, recipe=dataclasses.replace(recipe_of(w), **fields))
    return w


def predicted(m: MemoryBreakdown, kind: str) -> tuple[float, float, float]:
    """(low, estimate, high) of the predicted number a measurement of `kind` reports."""
    return m.ranges()["device" if kind == "device" else "reserved" if kind == "reserved" else "allocated"]


def _regime(row: dict[str, Any], w: Workload) -> str:
    scale = "1 GPU" if w.parallel.num_gpus == 1 else "1 node" if w.parallel.num_nodes == 1 else "multi-node"
    method = "QLoRA" if w.training.quantization_bits else "LoRA" if w.training.lora_r else "full"
    return f"{scale}, {method}, {row.get('source')}"


def check_memory(path: str | Path | None = None, *, cards: tuple[str, ...] | None = None) -> MemoryCheck:
    """Predicted vs measured peak memory per GPU for every row of `path` (default
    `perfmodel.paths.peak_memory_path()`), and the false-fit count over `cards` (default: every
    catalog accelerator)."""
    # numpy / pandas: the evaluation's own libraries, not on the prediction path
    import numpy as np
    import pandas as pd

    frame = pd.read_parquet(path or peak_memory_path())
    if "peak_memory_kind" not in frame:
        frame = frame.assign(peak_memory_kind="reserved")
    out_rows = []
    workloads = []
    for row in frame.to_dict("records"):
        w = workload_for(row)
        workloads.append(w)
        lo, est, hi = predicted(estimate_memory(w), str(row["peak_memory_kind"]))
        out_rows.append({"predicted_gb": est, "predicted_low_gb": lo, "predicted_high_gb": hi, "regime": _regime(row, w)})
    out = pd.concat([frame.reset_index(drop=True), pd.DataFrame(out_rows)], axis=1)
    out["error_pct"] = (out["predicted_gb"] / out["peak_memory_gb"] - 1) * 100
    inside = (out["predicted_low_gb"] <= out["peak_memory_gb"]) & (out["peak_memory_gb"] <= out["predicted_high_gb"])
    out["inside"] = inside
    ape = out["error_pct"].abs()
    allocated = out["peak_memory_kind"] == "allocated"
    regimes = []
    for name, group in out.groupby("regime", sort=True):
        regimes.append({
            "regime": name, "rows": len(group), "median_abs_error_pct": float(group["error_pct"].abs().median()),
            "median_error_pct": float(group["error_pct"].median()), "within_interval_pct": float(group["inside"].mean() * 100),
        })  # fmt: skip
    return MemoryCheck(
        table=out,
        median_abs_error_pct=float(np.median(ape)) if len(ape) else 0.0,
        p90_abs_error_pct=float(np.percentile(ape, 90)) if len(ape) else 0.0,
        within_interval_pct=float(inside.mean() * 100) if len(ape) else 0.0,
        by_regime=tuple(regimes),
        false_fits=count_false_fits(out[allocated], [w for w, a in zip(workloads, allocated, strict=True) if a], cards),
        false_fits_upper=count_false_fits(
            out[~allocated], [w for w, a in zip(workloads, allocated, strict=True) if not a], cards
        ),
    )


def count_false_fits(table: Any, workloads: list[Workload], cards: tuple[str, ...] | None = None) -> FalseFits:
    """Pose every measured row on every card (module docstring)."""
    names = cards if cards is not None else tuple(gpu_names())
    specs = [get_gpu(n) for n in names]
    specs = [g for g in specs if g.memory_gb and g.vendor != "cpu"]
    counts = dict.fromkeys(("posed", "over", "false_fits", "near_over", "near_false_fits", "false_oom", "under"), 0)
    cases = []
    for row, w in zip(table.to_dict("records"), workloads, strict=True):
        measured = float(row["peak_memory_gb"])
        for gpu in specs:
            if not gpu.supports(w.training.compute_dtype):
                continue
            try:
                posed = dataclasses.replace(w, gpu=gpu)
            except ConfigError:
                continue
            v = verdict_of(posed)
            counts["posed"] += 1
            over = measured > gpu.memory_gb
            near = abs(measured - gpu.memory_gb) <= BOUNDARY * measured
            if over:
                counts["over"] += 1
                counts["near_over"] += near
                if v.fits:
                    counts["false_fits"] += 1
                    counts["near_false_fits"] += near
                    cases.append({
                        "source": row.get("source"), "model": row.get("model_name"), "card": gpu.name,
                        "capacity_gb": gpu.memory_gb, "measured_gb": measured, "kind": row.get("peak_memory_kind"),
                        "predicted_device_gb": v.device_gb, "verdict": v.verdict,
                    })  # fmt: skip
            else:
                counts["under"] += 1
                counts["false_oom"] += not v.fits
    return FalseFits(**counts, cases=tuple(cases))


@dataclass(frozen=True, kw_only=True)
class OracleCheck:
    table: Any
    """One row per grid shape: case, regime, oracle GB, analytic GB, error %."""
    median_abs_error_pct: float
    p90_abs_error_pct: float
    max_abs_error_pct: float
    by_regime: tuple[dict[str, Any], ...]
    false_fits: FalseFits
    """Every shape posed on every card with the oracle's allocated peak as what a run needs."""


def check_oracle_grid(path: str | Path | None = None, *, cards: tuple[str, ...] | None = None) -> OracleCheck:
    """The analytic allocated peak against the FakeTensor oracle's on the stored grid (default
    `perfmodel.paths.memory_oracle_path()`)."""
    # numpy / pandas: the evaluation's own libraries, not on the prediction path
    import numpy as np
    import pandas as pd

    frame = pd.read_csv(path or memory_oracle_path())
    analytic = []
    workloads = []
    for row in frame.to_dict("records"):
        w = load_workload(json.loads(row["config"]))
        workloads.append(w)
        analytic.append(estimate_memory(w).allocated_gb)
    out = frame.assign(analytic_gb=analytic)
    out["error_pct"] = (out["analytic_gb"] / out["oracle_allocated_gb"] - 1) * 100
    ape = out["error_pct"].abs()
    regimes = []
    for name, group in out.groupby("regime", sort=True):
        regimes.append({"regime": name, "rows": len(group), "median_abs_error_pct": float(group["error_pct"].abs().median()),
                        "max_abs_error_pct": float(group["error_pct"].abs().max())})  # fmt: skip
    return OracleCheck(
        table=out,
        median_abs_error_pct=float(np.median(ape)),
        p90_abs_error_pct=float(np.percentile(ape, 90)),
        max_abs_error_pct=float(ape.max()),
        by_regime=tuple(regimes),
        false_fits=count_false_fits(
            out.assign(peak_memory_gb=out["oracle_allocated_gb"], peak_memory_kind="allocated (oracle)",
                       model_name=out["case"], source="oracle grid"),
            workloads, cards,
        ),  # fmt: skip
    )


GRID_TABLE_BEGIN = "<!-- oracle-grid-table: perfmodel.memcheck.grid_markdown -->"
GRID_TABLE_END = "<!-- /oracle-grid-table -->"


def grid_markdown(grid: OracleCheck) -> str:
    """The oracle grid as docs/memory.md shows it: one row per shape, then one per regime."""
    lines = ["| shape | regime | oracle GB | analytic GB | error |", "|---|---|---|---|---|"]
    for r in grid.table.to_dict("records"):
        lines.append(
            f"| {r['case']} | {r['regime']} | {r['oracle_allocated_gb']:.2f} | {r['analytic_gb']:.2f} | {r['error_pct']:+.2f}% |"
        )
    lines += ["", "| regime | shapes | median abs error | worst |", "|---|---|---|---|"]
    for r in grid.by_regime:
        lines.append(f"| {r['regime']} | {r['rows']} | {r['median_abs_error_pct']:.2f}% | {r['max_abs_error_pct']:.2f}% |")
    lines.append(
        f"| **all** | {len(grid.table)} | **{grid.median_abs_error_pct:.2f}%** (p90 {grid.p90_abs_error_pct:.2f}%) | "
        f"{grid.max_abs_error_pct:.2f}% |"
    )
    return "\n".join(lines)
