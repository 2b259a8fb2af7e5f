"""How much measured evidence stands near a query, and how far the learned residual is trusted there.

The learned residual corrects the kernel model where measured runs like the query exist. Far from
them (another kind of accelerator, another kind of stack, another scale), a residual learned on
other hardware or tuned frameworks transfers badly (issue 21: it made the tail worse on an H200 it
had barely seen), so it is shrunk toward zero - the kernel model alone - and the interval, which is
calibrated on the shrunk predictor's held-out errors, carries the uncertainty instead:

    y_hat = b(x) + a * s * (booster(x) - b(x)),   s = n / (n + SHRINK_RUNS)

where b(x) is the kernel model's step overhead: the weighted median residual of the training runs
of the query's device class (CPU or accelerator) and kind of stack (eager or fused/compiled) - four
numbers, no accelerator's name - what a whole step costs beyond the sum of its kernels as the
kernel measurements time them (autograd, allocator, Python between ops, the trainer's loop, and
what an approximate plan leaves out), except for an eager transformer on an accelerator: its plan is
every kernel PyTorch dispatches, so far from evidence it is the kernel model alone, b(x) = 0: the eager
overhead is set mostly by timm's CNNs, which the plan costs as representative convolutions, and it
made eager transformers of other sources too slow (docs/accuracy-history.md; issue 21's H200 check found
41 of 45 eager decoders predicted too slow);

where n is the number of measured runs (one vote per run) in the training data that share the
query's device class (vendor), scale (1 device / 1 node / multi-node), kind of stack (eager or
fused/compiled; a recipe's fused kinds are a transformer's, so a CNN or MLP is eager unless
compiled), kind of model (transformer, CNN, other), and whose accelerator is within
`SPEC_WINDOW_LOG10` decades of the query's in peak FLOP/s and in memory bandwidth. The accelerator
enters only through its specs, never its name.

and where a, the transfer share, is the part of the residual that carries over to a lab the model has
not seen: every user's setup is one, while the booster also learns each training lab's own habits
(its software, its harness), which do not carry over. It is fitted on the training rows' own
cross-validation holding out whole sources (`perfmodel.learn.conformal.transfer_share`: the share of
the out-of-fold residual with the smallest median error; a model keeps it in its metadata as
`evidence.transfer_share`),
never on an evaluation split, and the conformal scores are those of the shared prediction. A model
whose kernel plan is a stated approximation (Transformer-XL, NCF: feature `plan_approximate`) has a
share of its own, fitted on those rows: its residual is mostly what the plan leaves out, which does
carry over to another lab.

Training runs are kept as cells (the exact-match key plus rounded specs, with their run counts) so
the shipped metadata stays small. Pure Python over rows; numpy only to count many queries at once.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

SHRINK_RUNS = 10.0
"""Measured runs near a query at which its residual is trusted half (s = 0.5). Fixed before any
evaluation (not tuned on a split)."""
SPEC_WINDOW_LOG10 = 0.16
"""How far (decades, x1.45) an accelerator's peak FLOP/s and bandwidth may be from the query's for its
runs to count as evidence: H100 SXM for an H200 (same peaks, 1.43x the bandwidth), not a V100."""
SPEC_ROUND = 0.001
"""Rounding (decades) of the specs stored in the cells."""
TRANSFORMER_ARCHS = ("decoder", "encoder", "encoder-decoder")
EVIDENCE_COLUMNS = (
    "vendor", "num_gpus", "num_nodes", "recipe_fused_kinds", "torch_compile", "arch",
    "log_peak_tflops", "log_hbm_bandwidth_gb_per_s", "plan_approximate",
)  # fmt: skip
"""The feature columns this module reads (`evidence_rows`)."""


def evidence_rows(X: Any) -> list[dict[str, Any]]:
    """The records of a feature frame with only the columns this module reads (the same values as
    `X.to_dict("records")` for them, several times faster on a training frame)."""
    from perfmodel.features import frame_records  # pandas-free at import: the shipped model reads this module

    return frame_records(X, [c for c in EVIDENCE_COLUMNS if c in X.columns])


def _float(value: Any, default: float) -> float:
    """`value` as a float; `default` when it is missing, not a number or NaN."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        return default
    return default if math.isnan(value) else value


def _num(row: Mapping[str, Any], name: str, default: float = 0.0) -> float:
    return _float(row.get(name, default), default)


class _Classes(NamedTuple):
    """What a feature row's stack is, for the evidence cells and the step overhead."""

    key: str
    """vendor | scale | stack | model kind (`evidence_key`)."""
    base: str
    """device class | stack (`base_key`)."""
    eager_transformer: bool
    """`is_eager_transformer`."""


def _classes(row: Mapping[str, Any]) -> _Classes:
    """The classes of one feature row. Training classifies the same few stacks hundreds of thousands
    of times, so they are memoised on the raw values they read (a NaN is a new float each time: it
    only misses)."""
    return _classify(
        row.get("vendor"), row.get("num_gpus"), row.get("num_nodes"), row.get("recipe_fused_kinds"),
        row.get("torch_compile"), row.get("arch"),
    )  # fmt: skip


@functools.lru_cache(maxsize=4096)
def _classify(vendor: Any, gpus: Any, nodes: Any, fused: Any, compiled: Any, arch: Any) -> _Classes:
    """Eager = no fused kernels, no compile: the stack PyTorch runs op by op. A recipe's fused kinds
    are a transformer's (its norms, activations, rotary, loss over the vocabulary): a CNN's or an
    MLP's plan runs its batch norms, activations and adds op by op whatever the recipe
    (perfmodel.analytic.step `_cnn`, `_resnet`), so for those only compile makes the stack other than
    eager."""
    arch, vendor = str(arch), str(vendor)
    transformer = arch in TRANSFORMER_ARCHS
    eager = (_float(fused, 0.0) if transformer else 0.0) == 0 and _float(compiled, 0.0) == 0
    n_gpus, n_nodes = _float(gpus, 1.0), _float(nodes, 1.0)
    scale = "1 device" if n_gpus <= 1 else ("1 node" if n_nodes <= 1 else "multi-node")
    kind = "transformer" if transformer else ("cnn" if arch == "cnn" else "other")
    stack = "eager" if eager else "fused"
    return _Classes(
        key="|".join((vendor, scale, stack, kind)),
        base=f"{'cpu' if vendor == 'cpu' else 'accelerator'}|{stack}",
        eager_transformer=eager and transformer and vendor != "cpu",
    )


def evidence_key(row: Mapping[str, Any]) -> str:
    """The exact-match part of a feature row: vendor | scale | stack | model kind."""
    return _classes(row).key


def _specs(row: Mapping[str, Any]) -> tuple[float, float]:
    return _num(row, "log_peak_tflops"), _num(row, "log_hbm_bandwidth_gb_per_s")


def is_eager_transformer(row: Mapping[str, Any]) -> bool:
    """A transformer (planned kernel by kernel) on an eager stack (no fused kernels, no compile) on an
    accelerator (a CPU's overhead is set by this project's CPU slices of every kind, not by an
    approximate plan)."""
    return _classes(row).eager_transformer


def base_key(row: Mapping[str, Any]) -> str:
    """Device class | kind of stack of a feature row (the step overhead's cell)."""
    return _classes(row).base


def weighted_median(values: Sequence[float], weights: Sequence[float]) -> float:
    pairs = sorted(zip(values, weights, strict=True))
    total = sum(w for _, w in pairs)
    acc = 0.0
    for v, w in pairs:
        acc += w
        if acc >= total / 2:
            return float(v)
    return 0.0


@dataclass(frozen=True, kw_only=True)
class Evidence:
    """The training runs as cells: (key, log10 peak, log10 bandwidth, runs), and the step overhead
    per device class and kind of stack (`base`, log units)."""

    cells: tuple[tuple[str, float, float, float], ...]
    shrink_runs: float = SHRINK_RUNS
    window_log10: float = SPEC_WINDOW_LOG10
    base: Mapping[str, float] | None = None
    """base_key -> weighted median residual of its training runs (and '*': of all of them)."""
    eager_transformers_unshifted: bool = False
    """True: an eager transformer's b(x) is 0 (models fitted before 2026-12-06: False, b(x) for all)."""
    transfer: float = 1.0
    """The share of the residual beyond b(x) that carries over to a lab the model has not seen,
    fitted on the calibration's held-out-source predictions (`conformal.transfer_share`; 1.0:
    models before it)."""
    transfer_approximate: float | None = None
    """The same share for a model whose kernel plan is a stated approximation (feature
    `plan_approximate`): its residual is mostly what the plan leaves out, which carries over to any
    lab, so it is fitted on those rows apart (None: `transfer` for every row)."""

    @classmethod
    def fitted(cls, rows: Sequence[Mapping[str, Any]], y: Sequence[float], weights: Sequence[float],
               shrink_runs: float = SHRINK_RUNS) -> Evidence:
        """Cells and step overheads of training rows with residuals `y` (one vote per run: `weights`)."""
        cells = cls.from_rows(rows, weights).cells
        # the overhead of the runs it applies to: an eager transformer on an accelerator takes none, so
        # its residual does not set anyone's (with timm held out, NeuSight's GPT-2 runs had set the
        # eager CNNs' overhead); an approximate plan takes its stack's, but its residual is mostly
        # what the plan leaves out, so it sets no one's either (NCF's runs, measured 2-8x slower than
        # their plan, had raised the eager CNNs' overhead; README, "What changed from model 20")
        applies = [
            i for i, r in enumerate(rows) if not is_eager_transformer(r) and _num(r, "plan_approximate") <= 0
        ] or list(range(len(rows)))
        keys = {i: base_key(rows[i]) for i in applies}
        base = {"*": weighted_median([y[i] for i in applies], [weights[i] for i in applies])} if len(rows) else {}
        for key in sorted(set(keys.values())):
            sel = [i for i in applies if keys[i] == key]
            base[key] = weighted_median([y[i] for i in sel], [weights[i] for i in sel])
        return cls(cells=cells, shrink_runs=shrink_runs, base={k: round(v, 6) for k, v in base.items()},
                   eager_transformers_unshifted=True)  # fmt: skip

    def offset(self, row: Mapping[str, Any]) -> float:
        """b(x): the step overhead of the row's cell (0 without a base, and for an eager transformer)."""
        if not self.base:
            return 0.0
        if self.eager_transformers_unshifted and is_eager_transformer(row):
            return 0.0
        return float(self.base.get(base_key(row), self.base.get("*", 0.0)))

    def blend(self, raw: Sequence[float], rows: Sequence[Mapping[str, Any]]) -> list[float]:
        """b(x) + a(x) * s(x) * (raw - b(x)) for each row (a: `share`)."""
        return [
            b + self.share(x) * s * (r - b)
            for r, s, b, x in zip(raw, self.shrink(rows), (self.offset(x) for x in rows), rows, strict=True)
        ]

    def shared(self, transfer: float, approximate: float | None = None) -> Evidence:
        """This evidence with the transfer shares `transfer` and, for the approximate plans,
        `approximate` (None: `transfer` for them too)."""
        return dataclasses.replace(
            self, transfer=float(transfer), transfer_approximate=None if approximate is None else float(approximate)
        )

    def share(self, row: Mapping[str, Any]) -> float:
        """The transfer share of one feature row: `transfer_approximate` for an approximate plan."""
        if self.transfer_approximate is not None and _num(row, "plan_approximate") > 0:
            return self.transfer_approximate
        return self.transfer

    @classmethod
    def from_rows(cls, rows: Iterable[Mapping[str, Any]], weights: Sequence[float]) -> Evidence:
        cells: dict[tuple[str, float, float], float] = {}
        for row, w in zip(rows, weights, strict=True):
            peak, bw = _specs(row)
            key = (evidence_key(row), round(round(peak / SPEC_ROUND) * SPEC_ROUND, 4),
                   round(round(bw / SPEC_ROUND) * SPEC_ROUND, 4))  # fmt: skip
            cells[key] = cells.get(key, 0.0) + float(w)
        return cls(cells=tuple((k, p, b, round(n, 4)) for (k, p, b), n in sorted(cells.items())))

    def runs_near(self, row: Mapping[str, Any]) -> float:
        """Measured runs near one feature row."""
        key, (peak, bw) = evidence_key(row), _specs(row)
        return sum(
            n
            for k, p, b, n in self.cells
            if k == key and abs(p - peak) <= self.window_log10 + 1e-9 and abs(b - bw) <= self.window_log10 + 1e-9
        )

    def shrink(self, rows: Sequence[Mapping[str, Any]]) -> list[float]:
        """s = n / (n + shrink_runs) for each feature row."""
        out = []
        memo: dict[tuple[str, float, float], float] = {}
        for row in rows:
            k = (evidence_key(row), *_specs(row))
            if k not in memo:
                n = self.runs_near(row)
                memo[k] = n / (n + self.shrink_runs) if self.shrink_runs > 0 else 1.0
            out.append(memo[k])
        return out

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "shrink_runs": self.shrink_runs,
            "window_log10": self.window_log10,
            "cells": [list(c) for c in self.cells],
        }
        if self.base is not None:
            out["base"] = dict(self.base)
        if self.eager_transformers_unshifted:
            out["eager_transformers_unshifted"] = True
        if self.transfer != 1.0:
            out["transfer_share"] = self.transfer
        if self.transfer_approximate is not None:
            out["transfer_share_approximate_plans"] = self.transfer_approximate
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Evidence:
        return cls(
            cells=tuple((str(k), float(p), float(b), float(n)) for k, p, b, n in data["cells"]),
            shrink_runs=float(data.get("shrink_runs", SHRINK_RUNS)),
            window_log10=float(data.get("window_log10", SPEC_WINDOW_LOG10)),
            base=None if data.get("base") is None else {str(k): float(v) for k, v in data["base"].items()},
            eager_transformers_unshifted=bool(data.get("eager_transformers_unshifted", False)),
            transfer=float(data.get("transfer_share", 1.0)),
            transfer_approximate=None
            if data.get("transfer_share_approximate_plans") is None
            else float(data["transfer_share_approximate_plans"]),
        )
