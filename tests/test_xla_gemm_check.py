"""bench/xla_gemm_check.py on a header of our own: the tf32 / bf16 share ratio over the big GEMMs
and the model's predicted / measured FLOP/s per dtype and size band."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench_scripts import load_bench


def _entry(b: int, m: int, n: int, k: int, bf16: float, f32: float) -> str:
    return (
        f"      entries {{\n        b: {b}\n        m: {m}\n        n: {n}\n        k: {k}\n"
        f'        flops {{ key: "BF16xBF16->BF16" value: {int(bf16)} }}\n'
        f'        flops {{ key: "F32xF32->F32" value: {int(f32)} }}\n      }}\n'
    )


def test_the_ratio_is_taken_over_the_big_gemms_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    check = load_bench("xla_gemm_check")
    # two big GEMMs (2 x 4096^3 FLOP each): bf16 at 0.8 of 989 TFLOP/s, tf32 at 0.6 and 0.7 of 494.5;
    # a small one (2 x 256^3) at another ratio that must not count
    body = (
        _entry(1, 4096, 4096, 4096, 0.8 * 989e12, 0.6 * 494.5e12)
        + _entry(2, 4096, 4096, 2048, 0.8 * 989e12, 0.7 * 494.5e12)
        + _entry(1, 256, 256, 256, 0.1 * 989e12, 0.1 * 494.5e12)
    )
    header = tmp_path / "matmul_interpolator_data.h"
    header.write_text(f'R"pb(\n  entries {{\n    key: "sm_90"\n    value {{\n{body}    }}\n  }}\n)pb";\n')
    wide = check.gemm_frame(header)
    assert len(wide) == 3
    assert sorted(check.tf32_share_ratio(wide).round(6)) == [0.75, 0.875]
    ratios = check.model_ratios(wide)
    assert set(ratios["dtype"]) == {"bf16", "tf32"} and len(ratios) == 6 and (ratios["ratio"] > 0).all()
    assert check.main([str(header)]) == 0
    out = capsys.readouterr().out
    assert "over the 2 of 2^33 FLOP or more" in out and "median 0.81" in out
