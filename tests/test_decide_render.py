"""Memory in the sweep / compare / advise tables (the device total the fit verdict compares)
carries its interval, like time and cost:
'35.6/80 GB (24.9–53.3)', in GB, at 80 columns as on a wide terminal. Predicted numbers change
with every retrained model, so the oracle is the result object each table was rendered from."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "llama2-7b-lora.yaml"
MEMORY = re.compile(r"([\d.]+)/(\d+) GB(?: OOM)?\s+\(([\d.]+)–([\d.]+)\)")
"""'35.6/80 GB (24.9–53.3)': estimate / GPU memory, then the interval's ends, all in GB."""


def console(width: int):
    from rich.console import Console

    return Console(width=width, record=True, file=io.StringIO(), color_system=None, highlight=False)


def _lines(con) -> list[str]:
    return con.export_text().splitlines()


def _assert_shown(found: tuple[str, ...], outcome) -> None:
    est, cap, low, high = (float(x) for x in found)
    iv = outcome.device_memory_gb
    # printed with one decimal: within half a unit in the last place of the value
    assert est == pytest.approx(iv.estimate, abs=0.051)
    assert low == pytest.approx(iv.low, abs=0.051) and high == pytest.approx(iv.high, abs=0.051)
    assert cap == pytest.approx(outcome.memory_capacity_gb, abs=0.51)
    assert low <= est <= high and low < high  # a real interval, not the estimate three times


@pytest.fixture(scope="module")
def sweep():
    import perfmodel

    return perfmodel.sweep(
        EXAMPLE, {"hardware.gpu": ["A100-80GB", "L40S"], "training.micro_batch_size": [4, 32]}
    )


def test_sweep_rows_show_peak_memory_with_its_interval_on_a_wide_terminal(sweep):
    from perfmodel.cli.render_decide import render_sweep

    con = console(200)
    render_sweep(sweep, con)
    rows = [line for line in _lines(con) if line.startswith("│")]
    assert len(rows) == len(sweep.points) == 4
    for row, point in zip(rows, sweep.points, strict=True):
        assert point.values["hardware.gpu"] in row
        found = MEMORY.findall(row)
        assert len(found) == 1, row
        _assert_shown(found[0], point.outcome)


def test_sweep_at_80_columns_puts_the_memory_interval_below_its_estimate(sweep):
    from perfmodel.cli.render_decide import render_sweep

    con = console(80)
    render_sweep(sweep, con)
    lines = _lines(con)
    assert all(len(line.rstrip()) <= 80 for line in lines)
    assert "…" not in "\n".join(lines)
    rows = [i for i, line in enumerate(lines) if line.startswith(("A100-80GB", "L40S"))]
    assert len(rows) == 4
    for i, point in zip(rows, sweep.points, strict=True):
        iv = point.outcome.device_memory_gb
        cap = point.outcome.memory_capacity_gb
        assert f"{iv.estimate:.1f}/{cap:.0f} GB" in lines[i]
        assert f"({iv.low:.1f}–{iv.high:.1f})" in lines[i + 1]  # the ends on the line below


def test_compare_shows_each_runs_memory_interval_and_marks_oom_once_per_run():
    import perfmodel
    from perfmodel.cli.render_decide import render_compare

    result = perfmodel.compare(
        [EXAMPLE],
        variants=["hardware.gpu=H100-SXM", "training.micro_batch_size=32,training.grad_accum_steps=1"],
    )
    assert [r.outcome.fits_in_memory for r in result.runs] == [True, True, False]  # 7B LoRA, mb 32
    for width in (200, 80):
        con = console(width)
        render_compare(result, con)
        lines = _lines(con)
        assert all(len(line.rstrip()) <= width for line in lines)
        text = "\n".join(lines)
        for r in result.runs:
            iv = r.outcome.device_memory_gb
            assert f"({iv.low:.1f}–{iv.high:.1f})" in text, (width, r.label)
        (row,) = [line for line in lines if "Device memory" in line]
        assert row.count("OOM") == 1  # the one run that does not fit
        if width == 200:
            found = MEMORY.findall(row)
            assert len(found) == 3, row
            for f, r in zip(found, result.runs, strict=True):
                _assert_shown(f, r.outcome)


def test_advise_options_show_peak_memory_with_its_interval_and_no_field_is_split():
    import perfmodel
    from perfmodel.cli.render_decide import render_advice

    result = perfmodel.advise(EXAMPLE, deadline_s=24 * 3600, max_gpus=2, top=2)
    options = [*result.by_time, *result.by_cost]
    assert options
    for width in (80, 56):
        con = console(width)
        render_advice(result, con)
        lines = _lines(con)
        assert all(len(line.rstrip()) <= width for line in lines)
        peaks = [line for line in lines if re.search(r"(^|   )peak ", line)]
        assert len(peaks) == len(options), (width, peaks)  # one per option, each whole on its line
        for line, opt in zip(peaks, options, strict=True):
            found = MEMORY.findall(line)
            assert len(found) == 1, line
            _assert_shown(found[0], opt.outcome)
        now = result.current.outcome
        assert any(f"({now.device_memory_gb.low:.1f}–{now.device_memory_gb.high:.1f})" in line for line in lines)
