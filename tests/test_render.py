"""Terminal output at 80 columns (Rich Console(width=80, record=True)): titles on one line, no
GPU or model name cut short, evaluation tables one line per row, interval ends in the unit of
their estimate. Predicted numbers change with every retrained model, so nothing here pins one:
rendered numbers are checked against the prediction object they came from."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "llama2-7b-lora.yaml"
UNIT_S = {"ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0, "days": 86400.0}


def console(width: int = 80):
    from rich.console import Console

    return Console(width=width, record=True, file=io.StringIO(), color_system=None, highlight=False)


def text_of(con) -> list[str]:
    return con.export_text().splitlines()


def interval(estimate: float, low: float, high: float):
    from perfmodel.prediction import Interval

    return Interval(estimate=estimate, low=low, high=high)


# --- durations ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.85, "850 ms"),
        (3.94, "3.9 s"),
        (90.0, "90.0 s"),
        (45 * 60.0, "45.0 min"),
        (30.8 * 3600, "30.8 h"),
        (31.2 * 3600, "31.2 h"),
        (3.5 * 86400, "3.5 days"),
        (123.4 * 86400, "123 days"),
    ],
)
def test_durations_read_in_one_unit(seconds, text):
    from perfmodel.cli.render import fmt_duration

    assert fmt_duration(seconds) == text


@pytest.mark.parametrize(
    ("hours", "text"),
    [
        ((30.8, 20.1, 48.0), "30.8 h  (20.1 – 48.0 h)"),  # the high end would be '2.0 days' on its own
        ((2.5 * 24, 1.5 * 24, 4.0 * 24), "2.5 days  (1.5 – 4.0 days)"),  # the low end would be '36.0 h'
        ((0.5, 0.25, 3.0), "30.0 min  (15.0 – 180 min)"),
    ],
)
def test_interval_ends_are_in_the_unit_of_the_estimate(hours, text):
    from perfmodel.cli.render import fmt_duration_interval

    est, low, high = (h * 3600 for h in hours)
    assert fmt_duration_interval(interval(est, low, high), markup=False) == text


# --- predict ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def prediction():
    import perfmodel

    return perfmodel.predict(EXAMPLE)


def _parse_interval(line: str, label: str) -> tuple[float, float, float]:
    m = re.search(rf"{label}\s+([\d.,]+) (\w+)\s+\(([\d.,]+) – ([\d.,]+) (\w+)\)", line)
    assert m, line
    value, unit, low, high, unit2 = m.groups()
    assert unit == unit2, f"interval ends in {unit2}, estimate in {unit}: {line}"
    scale = UNIT_S[unit]
    return tuple(float(x.replace(",", "")) * scale for x in (value, low, high))  # type: ignore[return-value]


def test_prediction_reads_at_80_columns(prediction):
    from perfmodel.cli.render import render_prediction

    con = console(80)
    render_prediction(prediction, con)
    lines = text_of(con)
    assert lines[0] == "perfmodel prediction — intervals at 90%"  # the title, whole, on one line
    assert lines[1].startswith(f"{prediction.model_kind} model {prediction.model_version}")
    assert all(len(line.rstrip()) <= 80 for line in lines)
    assert "…" not in "\n".join(lines)
    for label, iv in (("Step time", prediction.step_time_s), ("Total time", prediction.total_time_s)):
        (line,) = [line for line in lines if line.startswith(label)]
        shown = _parse_interval(line, label)
        for got, want in zip(shown, (iv.estimate, iv.low, iv.high), strict=True):
            assert got == pytest.approx(want, rel=0.06, abs=0.006 * max(shown)), (label, line)
    assert any(f"1 x {prediction.workload.gpu.name}" in line for line in lines)


def test_prediction_title_stays_one_line_on_a_wide_terminal(prediction):
    from perfmodel.cli.render import render_prediction

    con = console(200)
    render_prediction(prediction, con)
    lines = text_of(con)
    assert lines[0] == "perfmodel prediction — intervals at 90%"
    assert lines[2].startswith("Model")


# --- catalogs -----------------------------------------------------------------------------------------


@pytest.fixture
def catalog_console(monkeypatch):
    from perfmodel.cli import _common

    con = console(80)
    monkeypatch.setattr(_common, "stdout_console", lambda: con)
    return con


def test_gpus_table_names_every_accelerator_whole_at_80_columns(catalog_console):
    from perfmodel.catalog import gpu_names
    from perfmodel.cli.commands_catalog import gpus_command

    gpus_command(json_out=False)
    lines = text_of(catalog_console)
    text = "\n".join(lines)
    assert "…" not in text
    assert lines[0] == f"{len(gpu_names())} accelerators"
    first_words = {line.split()[0] for line in lines[2:] if line.strip()}
    missing = [name for name in gpu_names() if name not in first_words]
    assert not missing, f"GPU names not shown whole: {missing}"
    for a, b in (("A100-40GB", "A100-PCIe-40GB"), ("H100-SXM", "H100-PCIe")):
        assert a in first_words and b in first_words  # variants can be told apart
    assert all(len(line.rstrip()) <= 80 for line in lines)
    header = " ".join(lines[2:5])
    for col in ("bf16", "fp16", "fp8", "memory"):
        assert col in header


def test_gpus_table_keeps_every_column_when_there_is_room(monkeypatch):
    from perfmodel.cli import _common
    from perfmodel.cli.commands_catalog import gpus_command

    con = console(200)
    monkeypatch.setattr(_common, "stdout_console", lambda: con)
    gpus_command(json_out=False)
    header = " ".join(text_of(con)[2:5])
    for col in ("generation", "tf32", "TDP", "link"):
        assert col in header


def test_models_table_names_every_architecture_whole_at_80_columns(catalog_console):
    from perfmodel.catalog import model_names
    from perfmodel.cli.commands_catalog import models_command

    models_command(json_out=False, timm=False)
    lines = text_of(catalog_console)
    assert "…" not in "\n".join(lines)
    first_words = {line.split()[0] for line in lines[2:] if line.strip()}
    assert not [name for name in model_names() if name not in first_words]


# --- train / evaluate tables --------------------------------------------------------------------------

LONG_SOURCE = "nvidia_nemo_megatron_bridge_perf_summary"


def _summary_frame():
    import pandas as pd

    rows = []
    for split in ("loso", "loho", "random", "lofo"):
        for method, ape in (("model", 12.3), ("const", 51.2), ("bound", 1173.0)):
            model = method == "model"
            rows.append(
                {
                    "split": split,
                    "method": method,
                    "n_rows": 5558,
                    "n_folds": 32,
                    "median_ape_pct": ape,
                    "p90_ape_pct": ape * 10,
                    "mean_ape_pct": ape * 2,
                    "coverage80_pct": 83.6 if model else float("nan"),
                    "coverage90_pct": 91.9 if model else float("nan"),
                    "coverage95_pct": 95.4 if model else float("nan"),
                    "median_rel_width90_pct": 106.9 if model else float("nan"),
                    "width90_ratio": 1.62 if model else float("nan"),
                }
            )
    return pd.DataFrame(rows)


def _row_lines(lines: list[str], marker: str) -> list[str]:
    return [line for line in lines if marker in line]


def test_evaluation_summary_fits_80_columns_one_line_per_row():
    from perfmodel.cli.render_eval import SHORT_SPLITS, summary_table
    from perfmodel.learn.metrics import SPLITS

    con = console(80)
    con.print(summary_table(_summary_frame(), "5,558 rows trained of 5,600"))
    lines = text_of(con)
    text = "\n".join(lines)
    assert all(len(line.rstrip()) <= 80 for line in lines)
    assert "…" not in text
    for long in SPLITS.values():
        assert long not in text  # the long descriptions stay in Markdown
    for split in ("loso", "loho", "random", "lofo"):
        rows = _row_lines(lines, SHORT_SPLITS[split])
        assert len(rows) == 3, (split, rows)  # model, const, bound: each on one line
        model = [r for r in rows if " model " in r]
        assert model and "12.3" in model[0] and "91.9" in model[0] and "x1.62" in model[0]
    assert len(lines) == 1 + 3 + 12  # title, two header lines and the rule, 12 rows: nothing wrapped


def test_evaluation_summary_shows_every_column_on_a_wide_terminal():
    from perfmodel.cli.render_eval import summary_table

    con = console(200)
    con.print(summary_table(_summary_frame(), "evaluation"))
    text = con.export_text()
    for label in ("cov80", "cov95", "mean", "folds", "83.6", "95.4"):
        assert label in text


def test_breakdown_and_regime_tables_fit_80_columns():
    import pandas as pd

    from perfmodel.cli.render_eval import breakdown_table, regime_tables

    breakdown = pd.DataFrame(
        [
            {
                "split": "loho",
                "by": by,
                "key": key,
                "n_rows": 40,
                "model_median_ape_pct": 12.3,
                "const_median_ape_pct": 51.2,
                "bound_median_ape_pct": 1173.0,
                "coverage90_pct": 91.9,
                "width90_ratio": 1.62,
            }
            for by, key in (("gpu", "Quadro-RTX-8000"), ("gpu", "A100-PCIe-80GB"), ("source", LONG_SOURCE))
        ]
    )
    regimes = pd.DataFrame(
        [
            {
                "split": split,
                "scale": "multi-node",
                "kind": "decoder",
                "stack": "fused",
                "method": "QLoRA",
                "precision": "16-bit",
                "params": "10B-100B",
                "n_rows": 1234,
                "n_runs": 1336.0,
                "model_median_ape_pct": 22.9,
                "const_median_ape_pct": 53.1,
                "bound_median_ape_pct": 60.2,
                "coverage90_pct": 91.9,
                "width90_pct": 106.9,
                "width90_ratio": 1.62,
            }
            for split in ("loso", "loho")
        ]
    )
    con = console(80)
    con.print(breakdown_table(breakdown))
    for table in regime_tables(regimes):
        con.print(table)
    lines = text_of(con)
    assert all(len(line.rstrip()) <= 80 for line in lines)
    assert "…" not in "\n".join(lines)
    for key in ("Quadro-RTX-8000", "A100-PCIe-80GB", LONG_SOURCE):
        (row,) = _row_lines(lines, key)
        assert "12.3" in row and "91.9" in row
    assert len(_row_lines(lines, "multi-node")) == 2
    assert any(line.startswith("source held out by regime") for line in lines)
    assert all("22.9" in row and "1336.0" in row for row in _row_lines(lines, "multi-node"))


# --- sweep / compare / advise -----------------------------------------------------------------------


def test_sweep_reads_at_80_columns():
    import perfmodel
    from perfmodel.cli.render_decide import render_sweep

    result = perfmodel.sweep(
        EXAMPLE, {"hardware.gpu": ["A100-80GB", "H100-SXM"], "training.micro_batch_size": [4, 16]}
    )
    con = console(80)
    render_sweep(result, con)
    lines = text_of(con)
    text = "\n".join(lines)
    assert lines[0] == "perfmodel sweep — llama2-7b-lora.yaml"
    assert all(len(line.rstrip()) <= 80 for line in lines)
    assert "…" not in text
    assert "Total time" in text
    verdict = next(i for i, line in enumerate(lines) if line.startswith("fastest that fits: "))
    lines = lines[:verdict]  # the table (the verdict below it names a point too)
    assert len(_row_lines(lines, "A100-80GB")) == 2 and len(_row_lines(lines, "H100-SXM")) == 2
    for p in result.points:
        unit = re.search(r"\d (ms|s|min|h|days)\b", _row_lines(lines, p.values["hardware.gpu"])[0])
        assert unit, text


@pytest.mark.slow
def test_compare_and_advise_read_at_80_columns():
    import perfmodel
    from perfmodel.cli.render_decide import render_advice, render_compare

    con = console(80)
    render_compare(perfmodel.compare([EXAMPLE], variants=["hardware.gpu=H100-SXM"]), con)
    lines = text_of(con)
    assert lines[0] == "perfmodel compare"
    assert "…" not in "\n".join(lines)
    assert any("gpu=H100-SXM" in line for line in lines[:4])  # the run's label, whole, in the header

    con = console(80)
    render_advice(perfmodel.advise(EXAMPLE, deadline_s=24 * 3600, max_gpus=2, top=2), con)
    lines = text_of(con)
    assert lines[0] == "perfmodel advise — llama2-7b-lora.yaml"
    assert lines[2].startswith("goal: finish within 24.0 h")
    assert "…" not in "\n".join(lines)
    for line in lines:
        m = re.search(r"time [\d.,]+ (\w+) \(", line)
        if m:
            assert m.group(1) in UNIT_S


def test_prediction_notes_are_one_summary_line_and_explain_lists_them(prediction):
    from perfmodel.cli.render import notes_summary, render_prediction

    con = console(80)
    render_prediction(prediction, con)
    lines = text_of(con)
    assert not any(line.startswith(("assumed:", "warning:")) for line in lines)
    notes = [line for line in lines if "--explain lists them" in line]
    w = prediction.workload
    if prediction.warnings or w.assumptions:
        assert len(notes) == 1 and len(notes[0]) <= 80
    full = console(80)
    render_prediction(prediction, full, explain=True)
    text = " ".join(" ".join(text_of(full)).split())
    for line in prediction.warnings:
        assert " ".join(line.split()) in text
    # where the kernel model's time goes, largest kind first, its shares of the device time
    kinds = re.search(r"kernel model: (.*?) device time a step", text)
    assert kinds is not None and "matmul" in kinds.group(1)
    assert "kernel model:" not in " ".join(text_of(con))  # explain only
    # the summary fits any width it is given, names the count, and puts memory first
    warnings = ["few measured runs like this one (3 in regime x): widened x1.25", "does not fit: needs 9 GB"]
    for width in (40, 60, 80, 120):
        from rich.text import Text

        line = notes_summary(warnings, ["framework assumed"], width)
        plain = Text.from_markup(line).plain
        assert plain.startswith("2 warnings") and "1 assumption" in plain
        assert len(plain) <= width or plain == "2 warnings · 1 assumption · --explain lists them"
        if ": " in plain:
            assert plain.index("does not fit") < plain.find("few measured") or "few measured" not in plain
    assert notes_summary([], [], 80) == ""


def test_timm_models_table_names_every_model_whole_at_80_columns(catalog_console):
    from perfmodel.catalog.models import timm_models
    from perfmodel.cli.commands_catalog import models_command

    models_command(json_out=False, timm=True)
    lines = text_of(catalog_console)
    assert "…" not in "\n".join(lines)
    first_words = {line.split()[0] for line in lines[2:] if line.strip()}
    assert not [name for name in timm_models() if f"timm/{name}" not in first_words]


def test_the_kernel_time_line_lists_kinds_largest_first_with_their_shares():
    from perfmodel.cli.render import kernel_time_line

    line = kernel_time_line((("norm", 0.25), ("matmul", 0.5), ("embedding", 0.0), ("loss", 0.125)))
    assert line == "matmul 500 ms (57%), norm 250 ms (29%), loss 125 ms (14%) of 875 ms device time a step"
    assert kernel_time_line((("gbm", 2.5),), "boosting round").endswith("of 2.5 s device time a boosting round")
    assert kernel_time_line(()) == ""
    # what the L2 saves is named from 1% of the device time (875 ms: 8.75 ms) up
    saved = kernel_time_line((("norm", 0.25), ("matmul", 0.5)), l2_saved_s=0.1, l2_mb=96)
    assert saved.endswith("of 750 ms device time a step; 100 ms more without the 96 MB L2 (the kernels small enough to stay in it)")
    assert "L2" not in kernel_time_line((("norm", 0.25), ("matmul", 0.5)), l2_saved_s=0.007, l2_mb=96)
