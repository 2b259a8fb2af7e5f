"""Config files -> a Workload: the native perfmodel YAML (native.py) or a Ludwig config (ludwig.py).

Precedence: defaults -> file -> flags. Flags are `--set section.key=value` overrides (native key
paths, values read as YAML scalars; `null` unsets a key), then `--gpu` / `--num-gpus`, then the data
size (`--tokens`, `--rows` or `--dataset`, at most one), which replaces the file's. Every default
applied because the config was silent is listed in `Workload.assumptions`.

    load_workload(path, overrides=..., gpu=..., num_gpus=..., tokens=..., rows=..., dataset=...)
    resolve_config(...)        -> the resolved native config as a dict (to record it)
    workload_to_native(w)      -> the same for a Workload already loaded
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from perfmodel.config.build import build_workload
from perfmodel.config.dataset_size import DatasetStats, measure_dataset
from perfmodel.config.ludwig import is_ludwig, translate_ludwig
from perfmodel.config.native import DataFlags, Draft, check_key, workload_to_native
from perfmodel.config.overrides import deep_copy, parse_override, read_config_file, set_path
from perfmodel.errors import ConfigError
from perfmodel.workload import Workload

__all__ = ["DatasetStats", "detect_format", "load_workload", "measure_dataset", "resolve_config", "workload_to_native"]


def detect_format(config: dict[str, Any]) -> str:
    """'ludwig' or 'native', from the keys of a config mapping."""
    return "ludwig" if is_ludwig(config) else "native"


def _data_flags(tokens: float | None, rows: int | None, dataset: str | Path | None) -> DataFlags:
    given = [name for name, v in (("--tokens", tokens), ("--rows", rows), ("--dataset", dataset)) if v is not None]
    if len(given) > 1:
        raise ConfigError(f"give only one of --tokens, --rows, --dataset (got {', '.join(given)})")
    if tokens is not None and not tokens > 0:
        raise ConfigError(f"--tokens must be > 0, got {tokens!r}")
    if rows is not None and (isinstance(rows, bool) or not isinstance(rows, int) or rows <= 0):
        raise ConfigError(f"--rows must be a whole number > 0, got {rows!r}")
    return DataFlags(tokens=tokens, rows=rows, dataset=Path(dataset).expanduser() if dataset is not None else None)


def _draft(path: str | Path | None, overrides: Sequence[str], gpu: str | None, num_gpus: int | None,
           data: DataFlags) -> tuple[Draft, DataFlags, Path | None]:
    parsed = []
    for text in overrides:
        parts, value = parse_override(text)
        check_key(parts, f"--set {text}")
        parsed.append((text, parts, value))
    base_dir: Path | None = None
    raw: dict[str, Any] = {}
    if path is not None:
        raw = read_config_file(path)
        base_dir = Path(path).expanduser().resolve().parent
    if is_ludwig(raw):
        draft, build_data = translate_ludwig(raw, data=data, base_dir=base_dir), DataFlags()
    else:
        draft, build_data = Draft(native=deep_copy(raw)), data
    for text, parts, value in parsed:
        set_path(draft.native, parts, value, origin=f"--set {text}")
        if value is None:
            draft.soft.pop(".".join(parts), None)
    if gpu is not None:
        set_path(draft.native, ("hardware", "gpu"), gpu)
    if num_gpus is not None:
        set_path(draft.native, ("hardware", "num_gpus"), num_gpus)
    return draft, build_data, base_dir


def load_workload(
    path: str | Path | None,
    *,
    overrides: Sequence[str] = (),
    gpu: str | None = None,
    num_gpus: int | None = None,
    tokens: float | None = None,
    rows: int | None = None,
    dataset: str | Path | None = None,
) -> Workload:
    """Read a native or Ludwig config (or none: overrides only) and resolve it into a Workload.

    `tokens` is the total number of training tokens (all epochs); `rows` the number of dataset rows
    (a Ludwig config applies its train split to them; a native config takes them as samples per
    epoch); `dataset` a CSV / Parquet / JSONL file whose rows are counted and tokens estimated.
    Raises ConfigError, CatalogError or UnsupportedError (all PerfModelError) with one-line messages.
    """
    data = _data_flags(tokens, rows, dataset)
    draft, build_data, base_dir = _draft(path, overrides, gpu, num_gpus, data)
    return build_workload(draft, data=build_data, base_dir=base_dir)


def resolve_config(path: str | Path | None, **kwargs: Any) -> dict[str, Any]:
    """The resolved native config (every key explicit) of what load_workload(path, **kwargs) gives."""
    return workload_to_native(load_workload(path, **kwargs))
