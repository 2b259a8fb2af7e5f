"""bench/xla_collective_check.py on a header of our own: all-reduces only, XLA's time and the model's."""

from __future__ import annotations

import pytest

from tests.bench_scripts import load_bench


def _entry(op: str, elements: int, group: int, bytes_per_s: int) -> str:
    return (
        f'      entries {{\n        instruction {{\n          opcode: "{op}"\n          shape {{\n'
        f"            element_type: F32\n            dimensions: {elements}\n          }}\n"
        f"          collective_device_list {{\n            iota_replica_group_list {{\n"
        f"              num_replica_groups: {8 // group}\n              num_devices_per_group: {group}\n"
        f"            }}\n          }}\n        }}\n        network_throughput_bytes_per_sec: {bytes_per_s}\n      }}\n"
    )


def test_only_all_reduces_are_compared_and_the_model_is_the_datasheet_ring() -> None:
    check = load_bench("xla_collective_check")
    text = _entry("all-reduce", 2**28, 8, 200_000_000_000) + _entry("all-gather", 2**28, 8, 300_000_000_000)
    table = check.read_collectives(text)
    assert list(table["op"]) == ["all-reduce", "all-gather"] and list(table["bytes"]) == [2**30, 2**30]
    rows = check.compare(table)
    assert len(rows) == 1
    r = rows.iloc[0]
    assert r["xla_s"] == pytest.approx(2**30 / 200e9)
    # a reduce-scatter and an all-gather over 8 GPUs of an H100-SXM node: 2 x (7/8) x 1 GiB at the
    # datasheet NVLink 4 bandwidth, 450 GB/s each way (catalog H100-SXM.yaml)
    assert r["model_s"] == pytest.approx(2 * 7 / 8 * 2**30 / 450e9)
    assert r["ratio"] == pytest.approx(r["model_s"] / r["xla_s"])


def test_the_latency_bandwidth_fit_recovers_a_table_made_from_one() -> None:
    check = load_bench("xla_collective_check")
    alpha, busbw = 30e-6, 300e9  # 8 ranks: 2 x 7/8 of the buffer crosses each GPU's links
    text = "".join(
        _entry("all-reduce", n, 8, round(4 * n / (alpha + 4 * n * 2 * 7 / 8 / busbw))) for n in (2**10, 2**16, 2**22, 2**28)
    )
    fit = check.alpha_beta(check.compare(check.read_collectives(text)))
    assert list(fit["group"]) == [8]
    assert fit["alpha_s"].iloc[0] == pytest.approx(alpha, rel=1e-3)
    assert fit["busbw_bytes_per_s"].iloc[0] == pytest.approx(busbw, rel=1e-3)
    assert fit["max_miss"].iloc[0] < 1e-3
