"""The Python API: `perfmodel.predict(config, **overrides)`, a training config in, a prediction out.

    import perfmodel

    run = perfmodel.predict("examples/llama2-7b-lora.yaml", gpu="H100-SXM", num_gpus=4)
    run = perfmodel.predict({"model": {"name": "llama2-7b"}, "training": {...}, "hardware": {...}})
    run = perfmodel.predict(yaml_text, tokens=2e9, set={"training.micro_batch_size": 16})
    run = perfmodel.predict(cfg, training__micro_batch_size=16, **{"hardware.strategy": "fsdp"})
    run.total_time_s.estimate, run.total_time_s.low, run.total_time_s.high   # seconds
    run.to_json()                                   # the `perfmodel predict --json` contract

`config` is a mapping (a native or Ludwig config already read), YAML text, or a path (`str` or
`os.PathLike`). A `str` is a path when it has no line break and names an existing file or ends in
.yaml, .yml or .json; any other `str` is YAML text. Precedence is the CLI's: the config, then the
`set` / dotted-keyword changes (native keys, as `--set`), then `gpu` / `num_gpus`, then the amount
of data (`tokens`, `rows` or `dataset`, at most one). Errors are `perfmodel.errors.PerfModelError`
subclasses with the CLI's one-line messages.

Nothing heavy is imported here (the prediction imports LightGBM and pandas on first use).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfmodel.errors import ConfigError, quote

if TYPE_CHECKING:
    from perfmodel.prediction import PredictedRun
    from perfmodel.workload import Workload

ConfigInput = Mapping[str, Any] | str | os.PathLike[str] | None
"""What `config` may be: a mapping, YAML text, a path, or None (describe the run with `set`)."""
Changes = Mapping[str, Any] | Sequence[str] | None
"""`set=`: {"training.micro_batch_size": 16} or ["training.micro_batch_size=16"]."""

_PATH_SUFFIXES = (".yaml", ".yml", ".json")


def read_config(config: ConfigInput) -> Mapping[str, Any] | Path | None:
    """`config` as the config layer takes it: a mapping (YAML text parsed through the bounded
    loader), a Path, or None."""
    from perfmodel.config.from_text import parse_config_text

    if config is None or isinstance(config, Mapping):
        return config
    if isinstance(config, os.PathLike):
        return Path(config)
    if not isinstance(config, str):
        raise ConfigError(f"config must be a mapping, YAML text or a path, got a {type(config).__name__}")
    if "\n" not in config and (config.strip().lower().endswith(_PATH_SUFFIXES) or _is_file(config)):
        return Path(config)
    return parse_config_text(config)


def _is_file(text: str) -> bool:
    try:
        return Path(text).expanduser().is_file()
    except (OSError, ValueError):  # too long for a path, or a NUL byte
        return False


def _override_value(key: str, value: Any) -> str:
    """A value as `--set` reads it (a YAML scalar): JSON text, so strings stay strings."""
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()  # numpy scalars
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{key} must be a finite number, got {value!r}")
    try:
        return json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        raise ConfigError(
            f"{key}: the value must be a number, a word, true/false, null or a list of those; got {quote(value)}"
        ) from None


def overrides_from(
    set: Changes = None,
    changes: Mapping[str, Any] | None = None,
    *,
    gpu: str | None = None,
    num_gpus: int | None = None,
) -> list[str]:
    """`--set` strings from `set` (a mapping or KEY=VALUE strings), dotted-keyword `changes`
    (`training__micro_batch_size` or "training.micro_batch_size"), and optionally `gpu` /
    `num_gpus` (as hardware.gpu / hardware.num_gpus, for functions that take no such flags)."""
    out: list[str] = []
    seen: dict[str, str] = {}

    def add(key: str, value: Any, origin: str) -> None:
        if not isinstance(key, str) or not key:
            raise ConfigError(
                f"{origin}: a key must be a dotted name such as training.micro_batch_size, got {quote(key)}"
            )
        if key in seen:
            raise ConfigError(f"{key} is given twice ({seen[key]} and {origin}); give it once")
        seen[key] = origin
        out.append(f"{key}={_override_value(key, value)}")

    if isinstance(set, Mapping):
        for key, value in set.items():
            add(key, value, "set=")
    elif set is not None:
        if isinstance(set, str):
            raise ConfigError("set= takes a mapping or a list of KEY=VALUE strings, not one string")
        for text in set:
            if not isinstance(text, str):
                raise ConfigError(f"set= items must be KEY=VALUE strings, got {quote(text)}")
            key = text.split("=", 1)[0].strip()
            if key in seen:
                raise ConfigError(f"{key} is given twice ({seen[key]} and set=); give it once")
            seen[key] = "set="
            out.append(text)
    for key, value in (changes or {}).items():
        add(key.replace("__", "."), value, f"keyword {key}")
    if gpu is not None:
        out.append(f"hardware.gpu={_override_value('gpu', gpu)}")
    if num_gpus is not None:
        out.append(f"hardware.num_gpus={_override_value('num_gpus', num_gpus)}")
    return out


_RUN_OPTIONS = ("gpu", "num_gpus", "tokens", "rows", "dataset", "set", "price_per_gpu_hour")
_PREDICT_OPTIONS = ("confidence", "model_dir", "use_learned")


def resolve_workload(config: ConfigInput = None, /, **options: Any) -> Workload:
    """The resolved Workload that `predict(config, **options)` would predict (the same arguments;
    `confidence`, `model_dir` and `use_learned` are ignored)."""
    return _prepare(config, options)[1]


def _prepare(config: ConfigInput, options: Mapping[str, Any]) -> tuple[Any, Workload, dict[str, Any]]:
    """(the config as read, its Workload, the predictor's options) from `predict`'s arguments."""
    rest = dict(options)
    run = {k: rest.pop(k) for k in _RUN_OPTIONS if k in rest}
    predictor = {k: rest.pop(k) for k in _PREDICT_OPTIONS if k in rest}
    source = read_config(config)
    w = _resolve(
        source,
        run.get("gpu"),
        run.get("num_gpus"),
        run.get("tokens"),
        run.get("rows"),
        run.get("dataset"),
        overrides_from(run.get("set"), rest),
        run.get("price_per_gpu_hour"),
    )
    return source, w, predictor


def _resolve(
    source: Mapping[str, Any] | Path | None,
    gpu: str | None,
    num_gpus: int | None,
    tokens: float | None,
    rows: int | None,
    dataset: str | Path | None,
    overrides: list[str],
    price: float | None,
) -> Workload:
    from perfmodel.catalog.prices import check_price, with_price
    from perfmodel.config import load_workload

    if source is None and not overrides:
        raise ConfigError("give a config (a mapping, YAML text or a file), or describe the run with set=")
    w = load_workload(
        source, overrides=overrides, gpu=gpu, num_gpus=num_gpus, tokens=tokens, rows=rows, dataset=dataset
    )
    return with_price(w, check_price(price, "price_per_gpu_hour"))


def predict(
    config: ConfigInput = None,
    /,
    *,
    gpu: str | None = None,
    num_gpus: int | None = None,
    tokens: float | None = None,
    rows: int | None = None,
    dataset: str | Path | None = None,
    set: Changes = None,
    price_per_gpu_hour: float | None = None,
    confidence: float = 0.9,
    model_dir: str | Path | None = None,
    use_learned: bool = True,
    **changes: Any,
) -> PredictedRun:
    """Predict a training run: throughput, step time, total time, GPU-hours, cost and peak memory,
    each an `Interval` (estimate, low, high) at `confidence`, plus the fits-in-memory verdict.

    config: a native or Ludwig config as a mapping, YAML text or a path (see the module doc).
    gpu, num_gpus: the accelerator (`perfmodel gpus` lists them) and its count, over the config's.
    tokens: training tokens (all epochs); rows: dataset rows (before a Ludwig split); dataset: a
        CSV / Parquet / JSONL file to size the data from. At most one of the three.
    set: native-key changes, {"training.micro_batch_size": 16} or ["training.micro_batch_size=16"];
        **changes: the same as keywords, `training__micro_batch_size=16` or **{"training.seq_len": 2048}.
    price_per_gpu_hour: USD per GPU-hour (default: the config's, else the catalog's list price).
    confidence: interval level in [0.5, 1). model_dir: a learned model folder (default: the
        shipped models/); use_learned=False: the analytic model only.

    Returns `perfmodel.prediction.PredictedRun`; `.to_json()` is the `predict --json` contract.
    """
    from perfmodel.prediction import predict as predict_workload

    w = _resolve(
        read_config(config),
        gpu,
        num_gpus,
        tokens,
        rows,
        dataset,
        overrides_from(set, changes),
        price_per_gpu_hour,
    )
    return predict_workload(w, confidence=confidence, model_dir=model_dir, use_learned=use_learned)


def predict_document(config: ConfigInput = None, /, **options: Any) -> dict[str, Any]:
    """Exactly what `perfmodel predict --json` prints for the same inputs (the arguments of
    `predict`): `predict(...).to_json()` plus `fit_suggestions` (what would fit, each with its
    prediction; empty when the run fits)."""
    from perfmodel.decide.fit import suggest_fits
    from perfmodel.prediction import predict as predict_workload

    source, w, predictor = _prepare(config, options)
    run = predict_workload(w, **predictor)
    fit: list[dict[str, Any]] = []
    if not run.fits_in_memory:
        dialect_of: Any = source  # a mapping works too: suggestions then speak a Ludwig config's keys
        fit = suggest_fits(w, config=dialect_of, **predictor).to_json()
    return {**run.to_json(), "fit_suggestions": fit}
