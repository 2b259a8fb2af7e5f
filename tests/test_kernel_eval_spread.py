"""bench/kernel_eval_spread.py: which rows a perturbation drops, and what each fold is fitted on."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd

from tests.bench_scripts import load_bench

ROOT = Path(__file__).resolve().parents[1]


def test_a_perturbation_drops_every_nth_row_from_its_offset() -> None:
    check = load_bench("kernel_eval_spread")
    table = pd.DataFrame({"row": range(10)})
    assert list(check.perturbed(table, 4, 1)["row"]) == [0, 2, 3, 4, 6, 7, 8]
    assert list(check.perturbed(table, 4, 9)["row"]) == [0, 2, 3, 4, 6, 7, 8]  # offsets wrap
    assert check.perturbed(table, 4, 1).index.tolist() == list(range(7))


def test_the_perturbed_folds_are_fitted_on_the_smaller_table_and_predict_every_row(monkeypatch) -> None:
    check = load_bench("kernel_eval_spread")
    from perfmodel.kernels import evaluate, fitting
    from perfmodel.kernels.efficiency import load_efficiency
    from perfmodel.kernels.table import load_kernel_table

    table = load_kernel_table(ROOT / "datasets" / "kernels")
    table = table[table["gpu"].isin(["T4", "P4"])].reset_index(drop=True)
    shipped = load_efficiency()
    seen: list[tuple[int, tuple[str, ...]]] = []

    def fake_fit(t, *, exclude_gpus=()):  # the fit takes seconds: which rows it got is what matters here
        seen.append((len(t), tuple(exclude_gpus)))
        if len(t) == len(table):
            return shipped
        return dataclasses.replace(shipped, values={k: v * (1.0 + 0.05 * ("launch" in k)) for k, v in shipped.values.items()})

    monkeypatch.setattr(evaluate, "fit_efficiency", fake_fit)
    monkeypatch.setattr(fitting, "fit_efficiency", fake_fit)
    out = check.spread(table, perturbations=2, every=5, gpus=["T4"])
    # offsets 7 and 20 of every 5th row: rows 2, 7, 12, ... and 0, 5, 10, ... go
    smaller = [sum(1 for i in range(len(table)) if i % 5 != off) for off in (2, 0)]
    assert seen == [(len(table), ("T4",)), (smaller[0], ("T4",)), (smaller[1], ("T4",))]
    t4 = table[table["gpu"] == "T4"]
    assert dict(zip(out["kernel_kind"], out["rows"], strict=True)) == t4.groupby("kernel_kind").size().to_dict()
    assert (out["perturbed_low"] <= out["perturbed_high"]).all()
    moved = (out["perturbed_low"] - out["median_error"]).abs()
    assert (moved > 1e-6).any()  # the slower launches moved them
