"""What a few of the user's own measured runs do to a prediction for a setup the model never saw.

A user's first prediction is for a lab setup the model has not seen (its framework build, data
path, clocks, drivers): leave-one-source-out is that case, and its error and interval are the
headline. Then the user runs `perfmodel probe` (or `calibrate`, or `ingest`s a finished run) on
their machine, and every later prediction there is moved by those runs
(`perfmodel.calibration.apply.adjust`: hierarchical shrinkage toward the uncalibrated model, with
an interval that narrows near the measured runs and widens back far from them).

This module measures that on the public rows, without fitting anything new: for each held-out
source and accelerator ("a user's machine": one lab's setup on one kind of GPU; with
`unit="network"`, one network on that machine: the user who probes their own model and then asks
about other batch sizes, sequence lengths or precisions of it), it draws `k` of its measured runs
as the probes, builds the calibration `predict` would build from them (their
residuals against the leave-one-source-out prediction, which never saw the source), and scores
the machine's other runs with `adjust`, as `predict` serves them. Every machine with more than the
largest `k` runs is scored at every `k` (and uncalibrated, k = 0) on the same runs, `draws` times
with other probes.

Pure numpy/pandas over the out-of-fold predictions of one evaluation and the planned rows
(`perfmodel.features.planned_rows`).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from perfmodel.analytic import AnalyticEstimate
from perfmodel.calibration.apply import FittedCalibration, adjust, point_of
from perfmodel.calibration.record import Calibration
from perfmodel.learn.metrics import ape_pct, weighted_quantile
from perfmodel.workload import Workload

PROBES: tuple[int, ...] = (1, 3)
"""Measured runs per machine scored (0, uncalibrated, is always scored too)."""
DRAWS = 5
"""Draws of the probe runs per machine and k."""
CONFIDENCE = 0.9
UNITS = ("machine", "network")
"""What one calibration covers: a source's runs on one accelerator, or one network's among them."""


def network_of(w: Workload, est: Any) -> str:
    """The network a run trains: its architecture and parameter count without LoRA adapters, to 3
    significant digits ('decoder:6.74e+09'); the same at every batch size, sequence length,
    precision and LoRA rank, another for another model (`scored_runs(..., unit="network")`)."""
    counts = getattr(est, "params", None)
    params = float(getattr(counts, "total", 0.0) or 0.0) - float(getattr(counts, "lora", 0.0) or 0.0)
    return f"{w.model.arch}:{params:.3g}"


def _machine(name: str, gpu: str) -> Calibration:
    return Calibration(
        hardware_id=name, accelerator_kind=gpu, device=gpu, fingerprint={}, created_at="", origin="probe"
    )


def scored_runs(
    oof: Any,
    planned: Sequence[tuple[Workload, AnalyticEstimate]],
    *,
    probes: Sequence[int] = PROBES,
    draws: int = DRAWS,
    seed: int = 0,
    unit: str = "machine",
) -> Any:
    """One row per (k, draw, scored row): y, the uncalibrated prediction and interval, the
    calibrated ones (log units; y = log(step / bound)), source, gpu, regime columns, weight.

    `oof`: the out-of-fold predictions of one split (columns row, y, pred_model, half90, source,
    gpu, weight, run); `planned[row]`: that row's workload and estimate. Machines are (source, gpu);
    a run is the `run` column (the rows of one measured run score and probe together); `unit`
    "network" makes each network on a machine (`network_of`) a unit of its own. Intervals
    are at CONFIDENCE (the half90 column's level)."""
    ks = sorted({int(k) for k in probes if int(k) > 0})
    if not ks:
        raise ValueError("probes needs at least one k > 0")
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {', '.join(UNITS)}; got {unit!r}")
    oof = oof.assign(run=oof["run"].astype(str))
    oof["network"] = [network_of(*planned[int(r)]) if unit == "network" else "" for r in oof["row"]]
    parts = []
    for (source, gpu, network), machine in oof.groupby(["source", "gpu", "network"], sort=True):
        runs = sorted(machine["run"].unique())
        if len(runs) <= ks[-1]:
            continue
        rows = machine.to_dict("records")
        residual: dict[str, list[float]] = {}
        first: dict[str, dict[str, Any]] = {}  # a run's first row: its workload stands for the run
        for r in rows:
            residual.setdefault(r["run"], []).append(float(r["y"]) - float(r["pred_model"]))
            first.setdefault(r["run"], r)
        for draw in range(draws):
            rng = random.Random(f"{seed}|{source}|{gpu}|{draw}" + (f"|{network}" if network else ""))
            order = rng.sample(runs, len(runs))
            probed = set(order[: ks[-1]])
            for k in (0, *ks):
                fitted = None
                if k:
                    points = []
                    for run in order[:k]:
                        w, est = planned[int(first[run]["row"])]
                        points.append(point_of(w, est, float(np.median(residual[run]))))
                    fitted = FittedCalibration.of(_machine(f"{source}|{gpu}{network and '|' + network}", gpu), points)
                for r in rows:
                    if r["run"] in probed:
                        continue  # every k scores the same runs: none the largest k could probe
                    pred, half = float(r["pred_model"]), float(r["half90"])
                    low, high = pred - half, pred + half
                    if fitted is not None:
                        w, est = planned[int(r["row"])]
                        adj = adjust(log_ratio=pred, log_low=low, log_high=high, host=fitted, kind=(),
                                     workload=w, est=est, confidence=CONFIDENCE)  # fmt: skip
                        pred, low, high = adj.log_ratio, adj.log_low, adj.log_high
                    parts.append((k, draw, r["row"], source, gpu, network, r.get("scale", ""), r.get("kind", ""),
                                  float(r["y"]), pred, low, high, float(r["weight"])))  # fmt: skip
    columns = ["k", "draw", "row", "source", "gpu", "network", "scale", "kind", "y", "pred", "low", "high", "weight"]
    return pd.DataFrame(parts, columns=columns)


def summary(scored: Any, by: Sequence[str] = ()) -> Any:
    """Per k (and `by`): scored rows, machines, median and p90 APE of throughput (%), 90% coverage
    (%), median width high / low of the interval; each row weighs its run's weight / draws."""
    out = []
    keys = ["k", *by]
    for key, g in scored.groupby(keys, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        w = g["weight"].to_numpy(dtype=float)
        ape = ape_pct(g["y"].to_numpy(dtype=float), g["pred"].to_numpy(dtype=float))
        covered = (g["low"] <= g["y"]) & (g["y"] <= g["high"])
        width = np.exp(g["high"].to_numpy(dtype=float) - g["low"].to_numpy(dtype=float))
        out.append({
            **dict(zip(keys, key, strict=True)),
            "rows": int(len(g) / max(1, g["draw"].nunique())),
            "machines": int(g[["source", "gpu", "network"]].drop_duplicates().shape[0]),
            "median_ape_pct": weighted_quantile(ape, 0.5, w),
            "p90_ape_pct": weighted_quantile(ape, 0.9, w),
            "coverage90_pct": float(np.average(covered, weights=w) * 100.0),
            "width90_ratio": weighted_quantile(width, 0.5, w),
        })  # fmt: skip
    return pd.DataFrame(out)


def markdown(table: Any, by: Sequence[str] = (), unit: str = "machine") -> str:
    """`summary`'s table as Markdown: one line per (by, k); `unit` names what its calibrations cover."""
    units = "machines" if unit == "machine" else "networks on a machine"
    head = [*by, "runs measured", units, "rows scored", "median error", "p90 error", "90% covered", "median width"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for _, r in table.sort_values([*by, "k"]).iterrows():
        cells = [str(r[b]) for b in by] + [
            "0 (uncalibrated)" if r["k"] == 0 else str(int(r["k"])),
            f"{int(r['machines'])}",
            f"{int(r['rows']):,}",
            f"{r['median_ape_pct']:.1f}%",
            f"{r['p90_ape_pct']:.0f}%",
            f"{r['coverage90_pct']:.1f}%",
            f"x{r['width90_ratio']:.2f}" if math.isfinite(r["width90_ratio"]) else "-",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
