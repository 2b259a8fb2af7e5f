"""Paired comparisons: how far apart two predictions of nearly the same job can be, from measured
pairs of the training data.

Two predictions by one model of two near configurations share most of their error (the same
source's software, the same model biases), so the error of their ratio is much smaller than either
error alone. With each prediction's log half-width h at the comparison's level,

    half-width of log(T_b / T_a) = sqrt(h_a^2 + h_b^2 - 2 rho h_a h_b)

(the interval of a difference of two correlated errors, var(a - b) = sa^2 + sb^2 - 2 rho sa sb).
`rho` is measured per *kind of change* (micro-batch, precision, optimizer, sequence length, GPU
count, method, ...) on held-out pairs: two measured rows of one source on one accelerator that
differ in exactly one kind of key, both predicted by the shipped model pipeline fitted without
their source (leave-one-source-out, `perfmodel.learn.evaluate`). For each pair, the correlation at
which the paired interval just covers the measured log ratio is

    rho* = (h_a^2 + h_b^2 - d^2) / (2 h_a h_b),    d = (log error of b) - (log error of a),

and the pair is covered whenever rho <= rho*. The stored rho of a kind and level is the weighted
(1 - level) quantile of rho* over the kind's pairs, each source one vote: a split-conformal
calibration of the paired interval, so that a share `level` of held-out pairs is covered. It is
measured, not chosen; `calibrate` recomputes it (`perfmodel compare --calibrate-pairs`) and
`evaluate` reports its coverage with each source's rho computed from the other sources only.

The result is a small versioned JSON file shipped beside this module (`pair_correlation.json`).
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from perfmodel.errors import ConfigError, DataError

ARTIFACT_FORMAT = 1
"""Version of the pair-correlation file's layout."""
ARTIFACT = Path(__file__).with_name("pair_correlation.json")
"""The shipped pair correlations."""
REGENERATE = "perfmodel compare --calibrate-pairs"
"""The command that rewrites `ARTIFACT` (about 4 CPU minutes: one leave-one-source-out pass)."""
LEVELS: tuple[float, ...] = (0.8, 0.9, 0.95)
"""Levels rho is calibrated at (`perfmodel.learn.conformal.CALIBRATION_LEVELS`); other levels use
the nearest one's rho, interpolated in between."""
MIN_PAIRS = 30
"""A kind with fewer measured pairs (or from one source only) uses the pooled rho of every
single-change pair."""
RHO_BOUNDS = (-1.0, 0.98)
"""rho is kept in this range (0.98: even a near-perfect correlation leaves some width)."""
SEVERAL = "several"
"""The kind of a change of two or more kinds of key."""
POOLED = "one change"
"""The pooled kind: every pair that differs in exactly one kind of key."""
SAME_STEP = "same step"
"""The kind of a change that leaves every step as it is (tokens, epochs, price): rho = 1."""
MAX_PAIRS_PER_SOURCE = 3000
"""Pairs kept per source and kind (a seeded sample beyond this): one source of image models has
millions, and each source is one vote anyway."""
NOISE_LOG = (0.10, 0.25)
"""Measured differences (|log ratio|) counted as "faster by more than noise" in the held-out check:
0.10 is above the 90th percentile (8.4%) of the step-time coefficient of variation of the
collector's measured runs (the only rows that record it); 0.25 as a second, coarser threshold."""

COLUMN_KIND: dict[str, str] = {
    "micro_batch_size": "micro_batch",
    "grad_accum_steps": "grad_accum",
    "precision": "precision",
    "optimizer": "optimizer",
    "seq_len": "seq_len",
    "num_gpus": "gpu_count",
    "num_nodes": "gpu_count",
    "gpu": "gpu",
    "strategy": "strategy",
    "tensor_parallel": "strategy",
    "pipeline_parallel": "strategy",
    "context_parallel": "strategy",
    "cpu_offload": "strategy",
    "activation_checkpointing": "checkpointing",
    "lora_r": "method",
    "lora_target_modules": "method",
    "quantization_bits": "method",
    "attention_kernel": "kernels",
    "fused_cross_entropy": "kernels",
    "torch_compile": "kernels",
    "channels_last": "kernels",
    "model_name": "model",
    "framework": "framework",
}
"""Feature-table column -> the kind of change it belongs to. Two rows of one source are a pair when
their columns differ in exactly one kind (`gpu` aside, on the same accelerator)."""
MUST_MATCH = ("source", "benchmark_kind", "includes_optimizer_step")
"""Columns a pair shares besides the identity columns."""
COMPANIONS = {"grad_accum": ("micro_batch", "gpu_count")}
"""A kind that may change along with these (accumulation keeping the global batch) without making
the change one of two kinds."""
KIND_TEXT = {
    "micro_batch": "micro-batch",
    "grad_accum": "gradient accumulation",
    "precision": "precision",
    "optimizer": "optimizer",
    "seq_len": "sequence length",
    "gpu_count": "GPU count",
    "gpu": "accelerator",
    "strategy": "parallel strategy",
    "checkpointing": "activation checkpointing",
    "method": "fine-tuning method (full, LoRA, quantized base)",
    "kernels": "kernels (attention, fused loss, compile)",
    "model": "model",
    "framework": "framework",
    SEVERAL: "two or more kinds at once",
    POOLED: "any one kind (pooled)",
    SAME_STEP: "nothing a step depends on",
}

_KEY_KIND: dict[str, str] = {
    "training.micro_batch_size": "micro_batch",
    "training.grad_accum_steps": "grad_accum",
    "training.precision": "precision",
    "training.optimizer": "optimizer",
    "training.optimizer_state": "optimizer",
    "training.optimizer_in_backward": "optimizer",
    "training.gradient_clipping": "optimizer",
    "training.seq_len": "seq_len",
    "hardware.num_gpus": "gpu_count",
    "hardware.num_nodes": "gpu_count",
    "hardware.gpu": "gpu",
    "hardware.strategy": "strategy",
    "hardware.tensor_parallel": "strategy",
    "hardware.pipeline_parallel": "strategy",
    "hardware.context_parallel": "strategy",
    "hardware.cpu_offload": "strategy",
    "training.activation_checkpointing": "checkpointing",
    "training.checkpointing_policy": "checkpointing",
    "training.lora_r": "method",
    "training.lora_target_modules": "method",
    "training.lora_dropout": "method",
    "training.quantization_bits": "method",
    "training.trainable_fraction": "method",
    "training.attention_kernel": "kernels",
    "training.fused_cross_entropy": "kernels",
    "training.torch_compile": "kernels",
    "training.channels_last": "kernels",
    "framework": "framework",
    "training.tokens": SAME_STEP,
    "training.samples": SAME_STEP,
    "training.epochs": SAME_STEP,
    "training.steps": SAME_STEP,
    "training.dataset": SAME_STEP,
    "training.text_columns": SAME_STEP,
    "hardware.price_per_gpu_hour": SAME_STEP,
}
"""Resolved native key (`perfmodel.config.native.workload_to_native`, flattened) -> kind."""


def kind_of_keys(keys: Iterable[str]) -> str:
    """The kind of change between two resolved configs that differ in `keys` (dotted native keys):
    one kind, `SEVERAL`, or `SAME_STEP` when no key a step depends on differs."""
    kinds = set()
    for key in keys:
        if key in _KEY_KIND:
            kinds.add(_KEY_KIND[key])
        elif key.startswith("model."):
            kinds.add("model")
        else:
            kinds.add(SEVERAL)  # a key no measured pair isolates: the several-kinds correlation
    kinds.discard(SAME_STEP)
    return _one_kind(kinds)


def _one_kind(kinds: set[str]) -> str:
    for companion, hosts in COMPANIONS.items():
        if companion in kinds and kinds & set(hosts):
            kinds = kinds - {companion}
    if not kinds:
        return SAME_STEP
    return next(iter(kinds)) if len(kinds) == 1 else SEVERAL


# --- the shipped correlations ------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class PairCorrelations:
    """rho per kind of change and level, read from the shipped file."""

    rho: dict[str, dict[float, float]]
    """kind -> {level: rho}."""
    pairs: dict[str, int]
    """kind -> measured pairs it was calibrated on."""
    fallback: dict[str, str]
    """kind -> the kind whose rho it uses (too few pairs of its own)."""
    meta: dict[str, Any]
    """How the file was made (dataset, model, command, date)."""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PairCorrelations:
        if data.get("format") != ARTIFACT_FORMAT:
            raise DataError(f"pair correlations: format {data.get('format')!r}, expected {ARTIFACT_FORMAT}")
        rho, pairs, fallback = {}, {}, {}
        for kind, entry in data["kinds"].items():
            rho[kind] = {float(k): float(v) for k, v in entry["rho"].items()}
            pairs[kind] = int(entry["pairs"])
            if entry.get("uses"):
                fallback[kind] = str(entry["uses"])
        if POOLED not in rho:
            raise DataError("pair correlations: no pooled entry")
        return cls(rho=rho, pairs=pairs, fallback=fallback,
                   meta={k: v for k, v in data.items() if k != "kinds"})

    def kind_used(self, kind: str) -> str:
        """The kind whose rho answers for `kind` (itself, or the pooled one when it has too few pairs)."""
        if kind == SAME_STEP:
            return kind
        if kind in self.fallback:
            return self.fallback[kind]
        return kind if kind in self.rho else (SEVERAL if SEVERAL in self.rho and kind == SEVERAL else POOLED)

    def rho_for(self, kind: str, level: float) -> float:
        """rho of `kind` at confidence `level` (1 for `SAME_STEP`)."""
        if kind == SAME_STEP:
            return 1.0
        by_level = self.rho[self.kind_used(kind)]
        return _interpolate(by_level, level)


def _interpolate(by_level: Mapping[float, float], level: float) -> float:
    levels = sorted(by_level)
    if level <= levels[0]:
        return by_level[levels[0]]
    if level >= levels[-1]:
        return by_level[levels[-1]]
    for lo, hi in zip(levels, levels[1:], strict=False):
        if lo <= level <= hi:
            t = (level - lo) / (hi - lo)
            return by_level[lo] + t * (by_level[hi] - by_level[lo])
    return by_level[levels[-1]]  # pragma: no cover - levels cover the range


@lru_cache(maxsize=4)
def load_correlations(path: str | None = None) -> PairCorrelations:
    """The pair correlations at `path` (default: the shipped `ARTIFACT`)."""
    where = Path(path) if path else ARTIFACT
    try:
        data = json.loads(where.read_text())
    except (OSError, ValueError) as exc:
        raise DataError(f"cannot read pair correlations {where}: {exc}; regenerate with `{REGENERATE}`") from exc
    return PairCorrelations.from_json(data)


def paired_half_width(h_a: float, h_b: float, rho: float) -> float:
    """Log half-width of a ratio of two predictions with log half-widths h_a, h_b whose errors
    correlate with `rho`: sqrt(h_a^2 + h_b^2 - 2 rho h_a h_b)."""
    return math.sqrt(max(h_a * h_a + h_b * h_b - 2.0 * rho * h_a * h_b, 0.0))


# --- calibration from the training data -----------------------------------------------------------

Progress = Callable[[str], None]


def held_out_predictions(data: Any, progress: Progress | None = None, n_jobs: int = 1) -> Any:
    """Leave-one-source-out predictions of the training data by the shipped pipeline
    (`perfmodel.learn.evaluate.run_splits`, split `loso`): one row per held-out single-node row
    with `row` (its position in `data.kept`), `y`, `pred_model` and `half80/90/95`."""
    # numpy, pandas, the evaluation: only the calibration needs them (compare loads this module)
    import numpy as np

    from perfmodel.learn.evaluate import EvalConfig, run_splits

    config = EvalConfig(splits=("loso",), n_jobs=n_jobs)
    parts, skipped, _ = run_splits(("loso",), data.X, np.asarray(data.y, float), data.kept, config, progress,
                                data.kernel_table)
    if not parts:
        raise DataError("leave-one-source-out could not run: " + "; ".join(skipped.values()))
    return parts[0]


def _codes(column: Any) -> Any:
    # numpy, pandas, the evaluation: only the calibration needs them (compare loads this module)
    import pandas as pd

    values = column.astype(object).where(column.notna(), "<missing>").astype(str)
    return pd.factorize(values)[0]


def measured_pairs(kept: Any, oof: Any, max_kinds: int = 2, seed: int = 0) -> Any:
    """Pairs of held-out rows of one source that differ in one kind of key (and, as kind `several`,
    in two, the model not among them; at most `MAX_PAIRS_PER_SOURCE` per source and kind, sampled
    with `seed`): a frame with the two rows' held-out log errors, half-widths, measured and predicted
    log ratios (time per token, or per sample where there are no tokens) and the pair's kind."""
    # numpy, pandas, the evaluation: only the calibration needs them (compare loads this module)
    import numpy as np
    import pandas as pd

    kept = kept.reset_index(drop=True)
    rows = oof["row"].to_numpy()
    sub = kept.iloc[rows].reset_index(drop=True)
    err = (oof["y"] - oof["pred_model"]).to_numpy(dtype=float)
    halves = {lv: oof[f"half{round(lv * 100)}"].to_numpy(dtype=float) for lv in LEVELS}
    step = sub["step_time_s"].astype(float).to_numpy()
    per = _work_per_step(sub)
    log_measured = np.log(step / per)
    log_pred = log_measured - err  # predicted step = measured / exp(err)
    kinds = sorted(set(COLUMN_KIND.values()))
    kind_codes = {
        k: np.stack([_codes(sub[c]) for c, kk in COLUMN_KIND.items() if kk == k and c in sub]
                    or [np.zeros(len(sub), int)], axis=1)
        for k in kinds
    }
    match = np.stack([_codes(sub[c]) for c in MUST_MATCH if c in sub], axis=1)
    run = np.asarray(_codes(sub["run_group"].astype(object).where(sub["run_group"].notna(), sub["row_id"])))
    out = []
    for _, idx in pd.Series(range(len(sub))).groupby([match[:, j] for j in range(match.shape[1])]):
        idx = idx.to_numpy()
        if len(idx) < 2:
            continue
        a, b = np.triu_indices(len(idx), k=1)
        a, b = idx[a], idx[b]
        keep = run[a] != run[b]
        a, b = a[keep], b[keep]
        changed = {k: (kind_codes[k][a] != kind_codes[k][b]).any(axis=1) for k in kinds}
        host = changed["micro_batch"] | changed["gpu_count"]
        changed["grad_accum"] = changed["grad_accum"] & ~host  # a companion (COMPANIONS)
        count = sum(v.astype(int) for v in changed.values())
        for n_changed in range(1, max_kinds + 1):
            sel = count == n_changed
            if n_changed > 1:
                sel &= ~changed["model"]  # a different model and more is not a near configuration
            if not sel.any():
                continue
            if n_changed == 1:
                names = np.full(sel.sum(), "", dtype=object)
                for k in kinds:
                    names[changed[k][sel]] = k
            else:
                names = np.full(sel.sum(), SEVERAL, dtype=object)
            part = {
                "kind": names,
                "source": sub["source"].to_numpy()[a[sel]],
                "row_a": rows[a[sel]],
                "row_b": rows[b[sel]],
                "err_a": err[a[sel]],
                "err_b": err[b[sel]],
                "log_measured": log_measured[b[sel]] - log_measured[a[sel]],
                "log_predicted": log_pred[b[sel]] - log_pred[a[sel]],
            }
            for lv, h in halves.items():
                part[f"half_a{round(lv * 100)}"] = h[a[sel]]
                part[f"half_b{round(lv * 100)}"] = h[b[sel]]
            out.append(pd.DataFrame(part))
    if not out:
        raise DataError("no measured pairs: no two held-out rows of one source differ in one kind of key")
    frame = pd.concat(out, ignore_index=True)
    capped = [
        part if len(part) <= MAX_PAIRS_PER_SOURCE else part.sample(MAX_PAIRS_PER_SOURCE, random_state=seed)
        for _, part in frame.groupby(["source", "kind"], sort=True)
    ]
    return pd.concat(capped, ignore_index=True)


def _work_per_step(sub: Any) -> Any:
    """Tokens per optimizer step (samples x seq_len), samples where seq_len is not known."""
    # numpy, pandas, the evaluation: only the calibration needs them (compare loads this module)
    import numpy as np

    def num(name: str, default: float) -> Any:
        if name not in sub:
            return np.full(len(sub), default)
        v = sub[name].astype(float).to_numpy()
        return np.where(np.isfinite(v) & (v > 0), v, default)

    samples = num("micro_batch_size", 1) * num("grad_accum_steps", 1) * num("num_gpus", 1) / (
        num("tensor_parallel", 1) * num("pipeline_parallel", 1) * num("context_parallel", 1)
    )
    glob = num("global_batch_size", 0)
    samples = np.where(glob > 0, glob, samples)
    return samples * num("seq_len", 1)


def _source_weights(sources: Any) -> Any:
    """One vote per source: each pair weighs 1 / (pairs of its source)."""
    # numpy, pandas, the evaluation: only the calibration needs them (compare loads this module)
    import numpy as np

    _, inverse, counts = np.unique(sources, return_inverse=True, return_counts=True)
    return 1.0 / counts[inverse]


def _weighted_quantile(values: Any, q: float, weights: Any) -> float:
    # numpy, pandas, the evaluation: only the calibration needs them (compare loads this module)
    import numpy as np

    order = np.argsort(values)
    v, w = np.asarray(values)[order], np.asarray(weights)[order]
    cum = np.cumsum(w) / w.sum()
    at = min(int(np.searchsorted(cum, q)), len(v) - 1)
    return float(v[at])


def rho_star(pairs: Any, level: float) -> Any:
    """Per pair, the largest rho whose paired interval at `level` still covers its measured ratio."""
    # numpy, pandas, the evaluation: only the calibration needs them (compare loads this module)
    import numpy as np

    tag = round(level * 100)
    ha, hb = pairs[f"half_a{tag}"].to_numpy(float), pairs[f"half_b{tag}"].to_numpy(float)
    d = (pairs["err_b"] - pairs["err_a"]).to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = (ha * ha + hb * hb - d * d) / (2.0 * ha * hb)
    return np.clip(np.nan_to_num(r, nan=RHO_BOUNDS[0]), *RHO_BOUNDS)


def fit_rho(pairs: Any, level: float) -> float:
    """rho at `level`: the (1 - level) quantile of rho* over `pairs`, one vote per source, with the
    split-conformal finite-sample step (the quantile at (1 - level)(1 + 1/n))."""
    n_sources = pairs["source"].nunique()
    q = max((1.0 - level) * (1.0 - 1.0 / (n_sources + 1)), 0.0)
    return _weighted_quantile(rho_star(pairs, level), q, _source_weights(pairs["source"].to_numpy()))


def _rhos(pairs: Any, levels: tuple[float, ...] = LEVELS) -> dict[str, dict[float, float]]:
    """kind -> {level: rho} for every kind with enough pairs, plus the pooled one-change kind."""
    out: dict[str, dict[float, float]] = {}
    single = pairs[pairs["kind"] != SEVERAL]
    if len(single):
        out[POOLED] = {lv: fit_rho(single, lv) for lv in levels}
    for kind, part in pairs.groupby("kind"):
        if len(part) >= MIN_PAIRS and part["source"].nunique() >= 2:
            out[str(kind)] = {lv: fit_rho(part, lv) for lv in levels}
    return out


def _rho_of(rhos: Mapping[str, Mapping[float, float]], kind: str, level: float) -> float:
    table = rhos.get(kind) or rhos.get(POOLED)
    if table is None:
        return 0.0
    return _interpolate(table, level)


def evaluate(pairs: Any, level: float = 0.9, noise: tuple[float, ...] = NOISE_LOG) -> dict[str, Any]:
    """Held-out check of the paired interval at `level`: each source's pairs judged with rho fitted
    on the other sources' pairs only. Per kind and overall: coverage (share of pairs whose measured
    ratio lies in the paired interval; raw and one vote per source), and, of the pairs whose
    measured ratio differs from 1 by more than each `noise` (log), the share where the paired
    interval excludes 1 on the measured side ("says so"), on the wrong side, and where the
    independent interval (rho = 0) says so."""
    # numpy, pandas, the evaluation: only the calibration needs them (compare loads this module)
    import numpy as np

    tag = round(level * 100)
    n = len(pairs)
    covered, says, wrong, says_indep = (np.zeros(n, bool) for _ in range(4))
    kinds = pairs["kind"].astype(str).to_numpy()
    sources = pairs["source"].astype(str).to_numpy()
    ha, hb = pairs[f"half_a{tag}"].to_numpy(float), pairs[f"half_b{tag}"].to_numpy(float)
    pred = pairs["log_predicted"].to_numpy(float)
    meas = pairs["log_measured"].to_numpy(float)
    sign = np.sign(meas)
    indep = np.sqrt(ha * ha + hb * hb)
    for source in np.unique(sources):
        mine = sources == source
        rhos = _rhos(pairs[~mine], levels=(level,))
        rho = np.zeros(n)
        for kind in np.unique(kinds[mine]):
            rho[mine & (kinds == kind)] = _rho_of(rhos, str(kind), level)
        half = np.sqrt(np.maximum(ha * ha + hb * hb - 2 * rho * ha * hb, 0.0))
        covered[mine] = (np.abs(meas - pred) <= half)[mine]
        says[mine] = (sign * pred - half > 0)[mine]
        wrong[mine] = (-sign * pred - half > 0)[mine]
        says_indep[mine] = (sign * pred - indep > 0)[mine]
    weights = _source_weights(sources)

    def summary(sel: Any) -> dict[str, Any]:
        w = weights[sel]
        out: dict[str, Any] = {
            "pairs": int(sel.sum()),
            "sources": int(len(np.unique(sources[sel]))),
            "coverage": round(float(covered[sel].mean()), 4),
            "coverage_by_source": round(float((covered[sel] * w).sum() / w.sum()), 4),
        }
        for threshold in noise:
            real = sel & (np.abs(meas) > threshold)
            tag = f"{threshold:g}"
            out[f"differ_by_more_than_{tag}"] = int(real.sum())
            for name, flag in (("says_so", says), ("wrong_way", wrong), ("says_so_independent", says_indep)):
                out[f"{name}_{tag}"] = round(float(flag[real].mean()), 4) if real.any() else None
        return out

    by_kind = {str(k): summary(kinds == k) for k in sorted(np.unique(kinds))}
    return {"level": level, "noise_log": list(noise), "all": summary(np.ones(n, bool)),
            POOLED: summary(kinds != SEVERAL), "kinds": by_kind}


def calibrate(data: Any, oof: Any, *, model: str = "") -> tuple[dict[str, Any], Any]:
    """The pair-correlation file's content from training data and its held-out predictions
    (`held_out_predictions`), and the pairs it was computed from."""
    # numpy, pandas, the evaluation: only the calibration needs them (compare loads this module)
    import numpy as np

    pairs = measured_pairs(data.kept, oof)
    rhos = _rhos(pairs)
    if POOLED not in rhos:
        raise DataError("no single-change pairs: cannot calibrate paired comparisons")
    check = {f"{round(lv * 100)}": evaluate(pairs, lv) for lv in LEVELS}
    kinds: dict[str, Any] = {}
    for kind in [POOLED, *sorted(set(pairs["kind"]))]:
        part = pairs if kind == POOLED else pairs[pairs["kind"] == kind]
        if kind == POOLED:
            part = pairs[pairs["kind"] != SEVERAL]
        uses = kind if kind in rhos else POOLED
        e_a, e_b = part["err_a"].to_numpy(float), part["err_b"].to_numpy(float)
        kinds[kind] = {
            "description": KIND_TEXT.get(kind, kind),
            "pairs": int(len(part)),
            "sources": int(part["source"].nunique()),
            "rho": {f"{lv:g}": round(float(rhos[uses][lv]), 4) for lv in LEVELS},
            "uses": None if uses == kind else uses,
            "error_correlation": round(float(np.sum(e_a * e_b) / math.sqrt(np.sum(e_a**2) * np.sum(e_b**2))), 4),
            "median_abs_log_ratio_error": round(float(np.median(np.abs(e_b - e_a))), 4),
            "median_half90": round(float(np.median(np.r_[part["half_a90"], part["half_b90"]])), 4),
            "heldout_90": check["90"]["kinds"].get(kind) if kind != POOLED else check["90"][POOLED],
        }
    artifact = {
        "format": ARTIFACT_FORMAT,
        "created": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": REGENERATE,
        "dataset_sha256": data.sha256,
        "model": model,
        "method": (
            "leave-one-source-out predictions of the training rows by the shipped pipeline "
            "(perfmodel.learn.evaluate, split loso); pairs: two held-out rows of one source, benchmark kind "
            "and optimizer-step setting that differ in exactly one kind of key (several: two kinds, the "
            f"model not among them), different runs, at most {MAX_PAIRS_PER_SOURCE} per source and kind; rho per kind and level: the (1 - level) quantile of each pair's covering "
            "rho* = (h_a^2 + h_b^2 - d^2) / (2 h_a h_b), one vote per source (split conformal); a kind with "
            f"fewer than {MIN_PAIRS} pairs or one source uses the pooled rho"
        ),
        "heldout": check,
        "kinds": kinds,
    }
    return artifact, pairs


def write_artifact(artifact: Mapping[str, Any], path: str | Path | None = None) -> Path:
    where = Path(path) if path else ARTIFACT
    if where.suffix != ".json":
        raise ConfigError(f"the pair-correlation file must be .json, got {where}")
    where.write_text(json.dumps(artifact, indent=1, sort_keys=False) + "\n")
    load_correlations.cache_clear()
    return where
