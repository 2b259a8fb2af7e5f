"""XLA's measured GEMM table: openxla/xla xla/service/gpu/model/matmul_interpolator_data.h.

XLA's GPU cost model interpolates matmul times from a table its authors measured with
`//xla/tools:matmul_perf_table_gen` (a text proto in a C++ header: per compute capability, entries
of batch b, m, n, k and the FLOP/s reached per operand types). The version read here ships in the
tensorflow 2.20.0 wheel on PyPI (tensorflow/include/tensorflow/compiler/xla/service/gpu/model/
matmul_interpolator_data.h, `pip download tensorflow==2.20.0 --no-deps`), the same bytes as
tensorflow/tensorflow@9bebee8e third_party/xla/xla/service/gpu/model/: one
accelerator, sm_90, 375 shapes (b 1-4; m, n, k 256-4096) in two dtypes:

- "BF16xBF16->BF16": bf16 tensor-core GEMMs;
- "F32xF32->F32": f32 operands, which XLA runs on TF32 tensor cores by default (its default
  precision config): the table reaches 404 TFLOP/s at 4096^3, six times an H100's 67 TFLOP/s fp32
  SIMT peak and 0.82 of its 494.5 TFLOP/s TF32 peak. Read as tf32 (`DTYPES`).

sm_90 is any Hopper; 404 TFLOP/s of TF32 is more than an H100 PCIe's 378 TFLOP/s peak, so the
table comes from an SXM-class part (H100 SXM, H200 and GH200 share its clocks and compute peaks):
read as H100-SXM, the catalog's H100 at those peaks (bench/xla_gemm_check.py). A row is one call of
C[b, m, n] = A[b, m, k] @ B[b, k, n] in the forward phase (batch 1: a GEMM, else a batched one), its
time 2 b m n k / FLOP/s. The tool's timing protocol is not stated in the header.

A reference, not part of the kernel table: XLA autotunes each GEMM (cuBLAS, cuBLASLt or Triton), and
the kernel model fitted on eager PyTorch's calls prices its smaller GEMMs at 2-3x the time XLA
measured (bench/xla_gemm_check.py). Fitted with the table (`perfmodel kernels evaluate`, each
accelerator held out), it moved the shared GEMM shape terms and made the other sources worse: matmul
14.4% -> 15.9%, the H100's GEMMs 10% -> 26%, the A100's eager attention 16.7% -> 29.9%. What it
says about tf32 (its share of its peak is a median 0.85 of bf16's on the same big shapes, where the
kernel model prices tf32 at 0.94 of peak on an H100, beside 0.78 for bf16) was tried as a kernel
term and not kept: the kernel model alone got better on the fp32 / tf32 training rows, the learned
model worse held out (docs/accuracy-history.md, model 29).
"""

from __future__ import annotations

import re
from typing import Any

from perfmodel.errors import DataError

HEADER = "xla/service/gpu/model/matmul_interpolator_data.h"
DTYPES = {"BF16xBF16->BF16": "bf16", "F32xF32->F32": "tf32"}
"""The table's operand types -> the dtype a row is priced in (f32 runs as TF32: module docstring)."""

_BLOCK = re.compile(r'key:\s*"(sm_\d+)"')
_ENTRY = re.compile(r"b:\s*(\d+)\s+m:\s*(\d+)\s+n:\s*(\d+)\s+k:\s*(\d+)((?:\s*flops\s*\{[^}]*\})+)")
_FLOPS = re.compile(r'key:\s*"([^"]+)"\s*value:\s*(\d+)')


def read_matmul_table(text: str) -> list[dict[str, Any]]:
    """Every (compute capability, b, m, n, k, operand types, FLOP/s) of the header's table."""
    marks = list(_BLOCK.finditer(text))
    if not marks:
        raise DataError(f"{HEADER}: no 'key: \"sm_..\"' block in the text")
    out = []
    for i, mark in enumerate(marks):
        block = text[mark.end() : marks[i + 1].start() if i + 1 < len(marks) else len(text)]
        for e in _ENTRY.finditer(block):
            b, m, n, k = (int(v) for v in e.groups()[:4])
            for types, value in _FLOPS.findall(e.group(5)):
                out.append({"sm": mark.group(1), "b": b, "m": m, "n": n, "k": k, "types": types, "flops_per_s": float(value)})
    if not out:
        raise DataError(f"{HEADER}: no b/m/n/k entries with flops in the table")
    return out
