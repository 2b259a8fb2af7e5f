"""The one formatter (perfmodel.cli.render): counts, durations, dollars and intervals read back to
the numbers they show, every number carries its own suffix, and a table column of durations uses
one unit. Parametrized grids (property tests without hypothesis)."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from perfmodel.cli.render import (
    DURATION_UNITS,
    common_duration_unit,
    duration_unit,
    fmt_amount,
    fmt_count,
    fmt_count_interval,
    fmt_duration,
    fmt_duration_ends,
    fmt_usd_interval,
)
from perfmodel.prediction import Interval

SUFFIX = {"": 1.0, "k": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}
UNIT_S = {name: size for name, size, _ in DURATION_UNITS}
VALUES = [float(v) for v in np.geomspace(1e-3, 3e14, 97)] + [999.4, 999.5, 999.7, 999_499.0, 999_500.0, 1e3, 1e6]


def read_count(text: str) -> float:
    m = re.fullmatch(r"(-?[\d,]+(?:\.\d+)?)([kMBT]?)", text)
    assert m, f"not a count: {text!r}"
    return float(m.group(1).replace(",", "")) * SUFFIX[m.group(2)]


@pytest.mark.parametrize("value", VALUES)
def test_a_count_reads_back_to_its_value_in_three_significant_digits(value):
    text = fmt_count(value)
    assert "e" not in text and " " not in text
    assert read_count(text) == pytest.approx(value, rel=5e-3)
    digits = re.sub(r"[^\d]", "", text.split(".")[0] + (text.split(".")[1] if "." in text else ""))
    assert len(digits.lstrip("0")) <= 4  # never more than 3 significant digits (4 for '1,000T'-style ends)
    mantissa = read_count(text) / SUFFIX[text[-1]] if text[-1] in "kMBT" else abs(value)
    if text[-1] in "kMB":
        assert 0.9995 <= mantissa < 1000  # the suffix is the largest that keeps the mantissa >= 1


@pytest.mark.parametrize("value", VALUES)
def test_an_amount_has_no_exponent_and_reads_back_to_its_value(value):
    text = fmt_amount(value)
    assert "e" not in text
    number = float(text.replace(",", ""))
    assert number == pytest.approx(value, rel=5e-3, abs=0.5)  # whole from 100 up, 3 digits below


@pytest.mark.parametrize(
    "value,text", [(2213.4, "2,213"), (11.8, "11.8"), (0.1774, "0.177"), (99.96, "100"), (99.94, "99.9"), (1.234e-5, "0.000012")]
)
def test_amounts_as_the_prediction_table_prints_them(value, text):
    assert fmt_amount(value) == text


@pytest.mark.parametrize("low,est,high", [(201, 1010, 2570), (0.2, 0.7, 1.99), (5e4, 9.9e5, 2.2e6), (1, 1, 1)])
def test_each_end_of_a_count_interval_has_its_own_suffix(low, est, high):
    text = fmt_count_interval(Interval(estimate=est, low=low, high=high))
    m = re.fullmatch(r"(\S+) \((\S+)–(\S+)\)", text)
    assert m, text
    for part, value in zip(m.groups(), (est, low, high), strict=True):
        assert read_count(part) == pytest.approx(value, rel=5e-3)


@pytest.mark.parametrize("seconds", [float(v) for v in np.geomspace(1e-3, 1e8, 89)])
def test_a_duration_reads_back_in_its_unit(seconds):
    text = fmt_duration(seconds)
    number, unit = text.rsplit(" ", 1)
    assert unit == duration_unit(seconds)
    value = float(number.replace(",", "")) * UNIT_S[unit]
    assert value == pytest.approx(seconds, rel=0.05)  # one decimal from 1 to 100, 2 digits below 1


@pytest.mark.parametrize("seed", range(12))
def test_a_column_of_durations_has_one_unit_and_reads_back(seed):
    rng = np.random.default_rng(seed)
    values = list(np.exp(rng.uniform(math.log(30), math.log(5e6), size=rng.integers(2, 9))))
    unit = common_duration_unit(values)
    assert unit == duration_unit(sorted(values)[(len(values) - 1) // 2])
    for v in values:
        text = fmt_duration(v, unit)
        assert text.endswith(f" {unit}")
        shown = float(text.rsplit(" ", 1)[0].replace(",", "")) * UNIT_S[unit]
        assert shown == pytest.approx(v, abs=0.051 * UNIT_S[unit], rel=0.05)
        ends = fmt_duration_ends(Interval(estimate=v, low=v / 2, high=v * 3), unit)
        lo, hi = (float(x.replace(",", "")) * UNIT_S[unit] for x in ends.strip("()").split("–"))
        assert lo == pytest.approx(v / 2, abs=0.051 * UNIT_S[unit], rel=0.05)
        assert hi == pytest.approx(3 * v, abs=0.051 * UNIT_S[unit], rel=0.05)


def test_dollars_keep_cents_below_ten():
    assert fmt_usd_interval(Interval(estimate=116.2, low=50.1, high=543.0)) == "$116 (50–543)"
    assert fmt_usd_interval(Interval(estimate=4.1, low=2.05, high=8.2)) == "$4.10 (2.05–8.20)"


def test_a_sweep_table_never_mixes_duration_units_in_its_time_column():
    import io

    from rich.console import Console

    import perfmodel
    from perfmodel.cli.render_decide import render_sweep

    result = perfmodel.sweep(
        "examples/llama2-7b-lora.yaml", {"hardware.num_gpus": [1, 2, 4, 8, 16, 32], "hardware.gpu": ["A100-80GB"]}
    )
    out = io.StringIO()
    render_sweep(result, Console(file=out, width=160, no_color=True))
    units = set(re.findall(r"\d [.\d]* ?(ms|s|min|h|days) ?†?\s", out.getvalue()))
    times = [p.outcome.total_time_s.estimate for p in result.points if p.outcome]
    assert max(times) / min(times) > 10  # the column spans more than one natural unit
    assert units == {common_duration_unit(times)}, out.getvalue()
