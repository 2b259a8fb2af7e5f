"""Regimes: where a training job lives, for per-regime error reports and per-regime intervals.

A regime is (scale, kind, stack, method, precision, parameters bucket):
  scale      cpu (a host CPU) | 1 device | 1 node | multi-node (accelerators)
  kind       decoder (LLMs, encoder-decoders) | encoder (BERT, ViT) | cnn | other (MLPs, trees, ...)
             | approximate plan (a model family whose kernel plan leaves out costs it is known to have:
             `APPROXIMATE_PLANS`; its errors are the plan's, not a setup's)
  stack      eager (op by op, not compiled) | fused (hand-written fused kernels or torch.compile)
  method     full | LoRA | QLoRA
  precision  fp32 (fp32, tf32) | 16-bit (bf16, fp16 and their amp_ forms) | fp8
  parameters <100M | 100M-1B | 1B-10B | 10B-100B | >=100B (non-transformers by their own count)

A good average can hide a regime where users live and the model is wrong, so evaluation reports
error and coverage per regime, and intervals are calibrated per regime (Mondrian conformal): a
query uses the residuals of its own regime when that regime has enough measured runs, else those
of the nearest coarser regime (dropping parameters, then precision, method, stack, kind, scale),
widened because the evidence is thin. Everything is read from the learned model's feature row.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from perfmodel.analytic.step import APPROXIMATE_PLANS

SCALES = ("cpu", "1 device", "1 node", "multi-node")
METHODS = ("full", "LoRA", "QLoRA")
PRECISION_GROUPS = {"fp32": "fp32", "tf32": "fp32", "fp8": "fp8"}
"""Training precision -> group; everything else (bf16, fp16, amp_bf16, amp_fp16) is '16-bit'."""
PARAM_BUCKETS = ((1e8, "<100M"), (1e9, "100M-1B"), (1e10, "1B-10B"), (1e11, "10B-100B"), (math.inf, ">=100B"))
"""(upper bound, label) of each parameter bucket."""
LEVELS = ("scale", "kind", "stack", "method", "precision", "params")
"""Regime fields from coarsest to finest: backing off drops them from the end."""
MIN_RUNS_PER_CELL = 30
"""Measured runs (one vote per run) a regime needs before its own residuals set its interval."""
APPROXIMATE_KIND = "approximate plan"
"""The regime kind of `APPROXIMATE_PLANS` families."""
THIN_EVIDENCE_WIDENING = 1.25
"""Half-width multiplier when a query's own regime has fewer than MIN_RUNS_PER_CELL runs and a
coarser regime's residuals stand in for it."""


def _number(features: Mapping[str, Any], name: str, default: float = 0.0) -> float:
    value = features.get(name, default)
    try:
        value = float(value)
    except (TypeError, ValueError):
        return default
    return default if math.isnan(value) else value


REGIME_COLUMNS = (
    "num_gpus", "num_nodes", "vendor", "lora_r", "quantization_bits", "precision", "log_params_total", "arch",
    "recipe_fused_kinds", "torch_compile",
)  # fmt: skip
"""The feature columns `regime_of` reads."""


def regime_of(features: Mapping[str, Any], family: str | None = None) -> tuple[str, ...]:
    """(scale, kind, stack, method, precision, params) of one feature row (`perfmodel.features` names)
    of a model of `family` (the catalog's model family; None: not known, kind from the architecture)."""
    gpus = _number(features, "num_gpus", 1.0)
    nodes = _number(features, "num_nodes", 1.0)
    scale = "1 device" if gpus <= 1 else ("1 node" if nodes <= 1 else "multi-node")
    if str(features.get("vendor")) == "cpu":
        scale = "cpu"  # a CPU's errors say nothing about an accelerator's, and the other way round
    lora = _number(features, "lora_r") > 0
    method = ("QLoRA" if _number(features, "quantization_bits") > 0 else "LoRA") if lora else "full"
    precision = PRECISION_GROUPS.get(str(features.get("precision")), "16-bit")
    params = 10 ** _number(features, "log_params_total", 0.0)
    bucket = next(label for bound, label in PARAM_BUCKETS if params < bound)
    arch = str(features.get("arch"))
    kind = {"decoder": "decoder", "encoder-decoder": "decoder", "encoder": "encoder", "cnn": "cnn"}.get(arch, "other")
    if family in APPROXIMATE_PLANS:
        kind = APPROXIMATE_KIND
    eager = _number(features, "recipe_fused_kinds") == 0 and _number(features, "torch_compile") == 0
    return scale, kind, "eager" if eager else "fused", method, precision, bucket


ANY_KIND = "*"
"""The kind field of the eager stack cell ('1 device|*|eager'): every kind of model run eager."""


def cell_keys(regime: tuple[str, ...]) -> list[str]:
    """The regime's cell and every coarser one, finest first: 'a|b|c|d|e|f' ... 'a|b|c', then, for
    an eager job, the stack cell 'a|*|eager' (same scale, any kind, eager), then 'a|b', 'a', '*'.

    The eager stack cell comes before the kind alone: an eager job no measured run of its kind
    resembles (timm's CNNs with timm held out) is predicted like the other eager jobs - the kernel
    plan as PyTorch dispatches it, op by op - and errs like them, not like the fused CNN pipelines
    of DLE and Lambda, whose errors are their recipes' (what they fuse, DALI, channels-last); those
    made a held-out eager CNN's interval x6.6 wide for ~17% median error (docs/accuracy-history.md). A
    fused job has no such cell: what a fused stack fuses differs by kind, so its kind stays the
    closer stand-in (with a fused stack cell, held-out fused regimes widened)."""
    keys = ["|".join(regime[:k]) for k in range(len(regime), 0, -1)] + ["*"]
    stack = LEVELS.index("stack")
    if len(regime) > stack and regime[stack] == "eager":  # just before 'scale|kind'
        keys.insert(len(regime) - stack, "|".join((*regime[: LEVELS.index("kind")], ANY_KIND, regime[stack])))
    return keys


def pooled_keys(regime: tuple[str, ...]) -> list[str]:
    """The cells one measured run's residual joins: its own and every coarser one, except that a run
    of an approximate plan stays out of the pools above its kind (the stack cell, '1 device', '*'):
    a query of another kind that backs off that far must not take the plan's errors for a setup's."""
    keys = cell_keys(regime)
    kind = LEVELS.index("kind")
    if len(regime) > kind and regime[kind] == APPROXIMATE_KIND:
        # down to 'scale|approximate plan', never the stack cell
        return [k for k in keys if k.count("|") >= kind and ANY_KIND not in k.split("|")]
    return keys


def describe(key: str) -> str:
    """'1 device|QLoRA|16-bit' -> '1 device, QLoRA, 16-bit'; '1 device|*|eager' -> '1 device, any
    kind, eager'."""
    if key == "*":
        return "all regimes"
    return ", ".join("any kind" if part == ANY_KIND else part for part in key.split("|"))


def regime_frame(X: Any, families: Sequence[str] | None = None) -> Any:
    """A DataFrame with one column per regime field (and 'regime', all of them joined) for feature
    frame X, whose rows are models of `families` (None: not known)."""
    # pandas: 0.3-0.8 s of a cold start, not on the prediction path
    import pandas as pd

    fams = [None] * len(X) if families is None else [str(f) for f in families]
    regimes = [regime_of(row, fam) for row, fam in zip(X.to_dict("records"), fams, strict=True)]
    frame = pd.DataFrame(regimes, columns=list(LEVELS), index=X.index)
    frame["regime"] = ["|".join(r) for r in regimes]
    return frame
