"""Kernel costs: what one kernel call is (`work`), what it costs on an accelerator (`efficiency`),
and how well that transfers to accelerators the fit never saw (`evaluate`).

Layer: beside `perfmodel.analytic`, below config/learn. Imports at module level only the standard
library, numpy and `perfmodel.workload` / `perfmodel.errors` / `perfmodel.schema`: no torch, pandas
or lightgbm (`perfmodel predict` stays fast); the fit and the evaluation import pandas and scipy
inside their functions.
"""

from __future__ import annotations

from perfmodel.kernels.work import (
    IMPLS,
    KERNEL_KINDS,
    KernelWork,
    activation_work,
    attention_work,
    conv_work,
    dequant_work,
    elementwise_work,
    embedding_work,
    loss_work,
    matmul_work,
    norm_work,
    optimizer_work,
    rotary_work,
)

__all__ = [
    "IMPLS",
    "KERNEL_KINDS",
    "KernelWork",
    "activation_work",
    "attention_work",
    "conv_work",
    "dequant_work",
    "elementwise_work",
    "embedding_work",
    "loss_work",
    "matmul_work",
    "norm_work",
    "optimizer_work",
    "rotary_work",
]
