"""The Python API: `perfmodel.predict(config, **options)`, a training config in, a prediction out;
and `predict_document`, the `perfmodel predict --json` document, composed here once for the CLI,
the HTTP API and Python alike.

    import perfmodel

    run = perfmodel.predict("examples/llama2-7b-lora.yaml", gpu="H100-SXM", num_gpus=4)
    run = perfmodel.predict({"model": {"name": "llama2-7b"}, "training": {...}, "hardware": {...}})
    run = perfmodel.predict(yaml_text, tokens=2e9, set={"training.micro_batch_size": 16})
    run = perfmodel.predict(cfg, training__micro_batch_size=16, **{"hardware.strategy": "fsdp"})
    run.total_time_s.estimate, run.total_time_s.low, run.total_time_s.high   # seconds
    run.to_json()                                   # the `perfmodel predict --json` contract

`config` is a mapping (a native or Ludwig config already read), YAML text, a path (`str` or
`os.PathLike`), or a `perfmodel.request.RunRequest`. A `str` is a path when it has no line break
and names an existing file or ends in .yaml, .yml or .json; any other `str` is YAML text. The
options are the CLI's (`perfmodel.request.OPTIONS`: gpu, num_gpus, tokens, rows, dataset, set,
price_per_gpu_hour, confidence, analytic or use_learned, model_dir, model_uri; `predict` also
memory="exact": the FakeTensor oracle's peak memory, docs/memory.md) and dotted-keyword
changes; precedence is the CLI's: the config, then the `set` / dotted-keyword changes (native
keys, as `--set`), then `gpu` / `num_gpus`, then the amount of data (`tokens`, `rows` or
`dataset`, at most one). Relative paths in options are relative to the current directory.
Errors are `perfmodel.errors.PerfModelError` subclasses with the CLI's one-line messages.

Nothing heavy is imported here (the prediction imports LightGBM on first use).
"""

from __future__ import annotations

from typing import Any

from perfmodel.analytic.params import count_params
from perfmodel.catalog import get_model, model_entry, model_names
from perfmodel.catalog.models import TIMM_PREFIX, timm_models
from perfmodel.config.source import ConfigSource
from perfmodel.decide.fit import FitReport, suggest_fits
from perfmodel.errors import ConfigError
from perfmodel.measure.memory_exact import Progress
from perfmodel.prediction import PredictedRun, predict_request, predictor_options
from perfmodel.prediction import predict as predict_workload
from perfmodel.request import ConfigInput, RunRequest
from perfmodel.workload import Workload


def request_of(config: ConfigInput | RunRequest = None, /, **options: Any) -> RunRequest:
    """The run request of `predict`'s arguments (`RunRequest.of`), which must describe a run."""
    request = RunRequest.of(config, **options)
    if request.config is None and not request.overrides:
        raise ConfigError("give a config (a mapping, YAML text or a file), or describe the run with set=")
    return request


def resolve_workload(config: ConfigInput | RunRequest = None, /, **options: Any) -> Workload:
    """The resolved Workload that `predict(config, **options)` would predict (the predictor's
    options are ignored)."""
    return ConfigSource.of(request_of(config, **options)).base()


def predict(config: ConfigInput | RunRequest = None, /, **options: Any) -> PredictedRun:
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
        shipped models/), or model_uri: a registered one; use_learned=False (or analytic=True):
        the analytic model only.
    memory: "analytic" (default) or "exact": the allocated peak counted by running one training
        step under PyTorch's FakeTensorMode on the CPU (seconds; UnsupportedError where it cannot).

    Returns `perfmodel.prediction.PredictedRun`; `.to_json()` is the `predict --json` contract
    without `fit_suggestions` (`predict_document` adds them).
    """
    return predict_request(request_of(config, **options))


def predict_with_fits(
    request: RunRequest, progress: Progress | None = None
) -> tuple[PredictedRun, FitReport | None]:
    """The prediction of a request and, when it does not fit in memory, what would (each
    suggestion predicted, and written in a Ludwig config's own keys for a Ludwig config).
    With `request.memory == "exact"` the verdict is the oracle's (`progress` gets its lines) and
    the suggestions are sized by the analytic model anchored to it (`suggest_fits(memory_scale=)`)."""
    source = ConfigSource.of(request)
    workload = source.base()
    options = predictor_options(request, memory_ok=True)
    run = predict_workload(workload, **options, memory=request.memory, progress=progress)
    scale = run.memory_exact.scale if run.memory_exact is not None else 1.0
    fits = None if run.fits_in_memory else suggest_fits(workload, source=source, memory_scale=scale, **options)
    return run, fits


def document(run: PredictedRun, fits: FitReport | None) -> dict[str, Any]:
    """The `perfmodel predict --json` document: the prediction's contract plus `fit_suggestions`."""
    return {**run.to_json(), "fit_suggestions": fits.to_json() if fits is not None else []}


def predict_document(config: ConfigInput | RunRequest = None, /, **options: Any) -> dict[str, Any]:
    """Exactly what `perfmodel predict --json` prints for the same inputs (the arguments of
    `predict`): `predict(...).to_json()` plus `fit_suggestions` (what would fit, each with its
    prediction; empty when the run fits)."""
    return document(*predict_with_fits(request_of(config, **options)))


def timm_catalog() -> list[dict[str, Any]]:
    """Every model of perfmodel's timm table (`timm/<name>`), as `perfmodel models --timm --json`
    gives it: name, family, arch, parameters, forward GFLOPs per image and the image side."""
    return [
        {
            "name": f"{TIMM_PREFIX}{name}",
            "family": row["family"],
            "arch": row["arch"],
            "params_total": row["params_total"],
            "forward_gflops_per_sample": row["forward_gflops_per_sample"],
            "img_size": row["img_size"],
        }
        for name, row in timm_models().items()
    ]


def model_catalog() -> list[dict[str, Any]]:
    """Every catalog architecture as `perfmodel models --json` and `GET /v1/models` give it."""
    out = []
    for name in model_names():
        spec = get_model(name)
        out.append(
            {
                "name": name,
                "hf_id": model_entry(name).get("hf_id"),
                "family": spec.family,
                "arch": spec.arch,
                "params_total": count_params(spec).total,
                "hidden_size": spec.hidden_size,
                "num_layers": spec.num_layers,
                "num_heads": spec.num_heads,
                "num_experts": spec.num_experts,
                "source": spec.source,
            }
        )
    return out
