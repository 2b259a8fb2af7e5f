"""Reading the kernel table (datasets/kernels/*.parquet, columns `perfmodel.schema.KERNEL_COLUMNS`):
each row back into the `KernelWork` it measured and the accelerator it ran on."""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Any

from perfmodel.catalog import get_gpu
from perfmodel.catalog.hardware import get_measured_host
from perfmodel.errors import DataError
from perfmodel.kernels.work import KernelWork
from perfmodel.paths import kernels_dir
from perfmodel.workload import GPUSpec


def load_kernel_table(folder: str | Path | None = None) -> Any:
    """Every parquet of the kernel table as one DataFrame (default: `perfmodel.paths.kernels_dir()`)."""
    import pandas as pd  # the kernel table is a DataFrame; pandas stays out of `perfmodel predict`


    path = Path(folder) if folder is not None else kernels_dir()
    files = sorted(path.glob("*.parquet"))
    if not files:
        raise DataError(f"no kernel table in {path}; build it with `perfmodel kernels build`")
    return pd.concat([pd.read_parquet(p) for p in files], ignore_index=True)


def work_of_row(row: dict[str, Any]) -> KernelWork:
    """The KernelWork a kernel-table row measured (its work columns as stored)."""
    shape = tuple(int(x) for x in str(row["shape"]).split("x")) if row.get("shape") else ()
    return KernelWork(
        kind=str(row["kernel_kind"]),
        impl=str(row["impl"]),
        variant=str(row["variant"]),
        dtype=str(row["dtype"]),
        phase=str(row["phase"]),
        flops=float(row["flops"]),
        bytes=float(row["bytes"]),
        bytes_moved=float(row["bytes_moved"]),
        launches=float(row["launches"]),
        shape=shape,
    )


@functools.cache
def _catalog_gpu(name: str) -> GPUSpec:
    return get_gpu(name)


@functools.cache
def _host(hardware_id: str) -> GPUSpec:
    return get_measured_host(hardware_id)


def spec_of_row(row: dict[str, Any], *, strip_measured: bool = False) -> GPUSpec:
    """The accelerator a row ran on: the catalog entry, or for 'cpu' rows the measured host. With
    `strip_measured`, a GPU's measured matmul ceilings are dropped (they are kernel data of that GPU)."""
    gpu = str(row["gpu"])
    if gpu == "cpu":
        return _host(str(row["hardware_id"]))
    spec = _catalog_gpu(gpu)
    return _stripped(gpu) if strip_measured and spec.measured else spec


@functools.cache
def _stripped(name: str) -> GPUSpec:
    return dataclasses.replace(_catalog_gpu(name), measured={})


def pairs_of_table(
    table: Any, *, strip_measured_for: tuple[str, ...] = ()
) -> list[tuple[KernelWork, GPUSpec]]:
    """(work, accelerator) of every row; the accelerators in `strip_measured_for` without their
    measured ceilings."""
    out = []
    for row in table.to_dict("records"):
        out.append((work_of_row(row), spec_of_row(row, strip_measured=str(row["gpu"]) in strip_measured_for)))
    return out
