"""The HTTP API and the web page: `create_app(settings)` builds the FastAPI application.

Routes (OpenAPI docs at /docs):
  POST /v1/predict   a config (+ gpu, num_gpus, tokens, rows, set, ...) -> the `predict --json` document
  POST /v1/sweep     the same over a grid (`vary`)               -> `perfmodel sweep --json`
  POST /v1/advise    settings that meet a deadline / budget       -> `perfmodel advise --json`
  POST /v1/compare   several configs side by side                 -> `perfmodel compare --json`
  GET  /v1/gpus, /v1/models   the catalogs;  GET /v1/model   the learned model being served
  GET  /healthz (the process answers), /readyz (a model is loaded);  GET /  the web page

Every answer is JSON. Errors are {"error": one line, "status": code}: a body that is not JSON or
YAML 400, a wrong content type 415, a body over `max_body_bytes` 413, a config or flag that is
wrong 422 with the CLI's message, a request over `request_timeout_s` 503; anything unexpected is
500 with a reference to the server log, never a traceback. A prediction with a small body is
computed on the event loop (a few ms of bounded work); sweeps, advice, comparisons and large
bodies run in at most `concurrency` worker threads under the time limit. Identical requests to
the same model are answered from a cache (keyed also by the calibration folder's files,
$PERFMODEL_CALIBRATION_DIR: a calibration, probe or ingest there is used by the next request).
`settings.calibrations` (`perfmodel serve --calibrations FOLDER|runs:/RUN_ID`) names that folder,
or the MLflow run whose calibration artifacts are downloaded into one when the app is made
(`perfmodel.calibration.tracked`; a run that does not exist is a ConfigError then, not a 500 later).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import hashlib
import json
import logging
import os
import threading
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

import anyio
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException

from perfmodel.api import model_catalog, predict_document
from perfmodel.calibration.record import store_stamp
from perfmodel.calibration.tracked import calibrations_folder
from perfmodel.catalog import get_gpu, gpu_names
from perfmodel.catalog.prices import default_price
from perfmodel.cli.render import (
    duration_unit,
    fmt_amount,
    fmt_duration,
    fmt_duration_range,
    fmt_number,
    fmt_usd,
)
from perfmodel.config import ludwig, native
from perfmodel.config.from_text import parse_config_text
from perfmodel.config.source import resolve_workload
from perfmodel.decide.advise import advise
from perfmodel.decide.compare import compare
from perfmodel.decide.sweep import parse_vary, sweep
from perfmodel.errors import ConfigError, PerfModelError, clip
from perfmodel.paths import CALIBRATION_DIR_VAR
from perfmodel.request import RunRequest
from perfmodel.service import requests as rq
from perfmodel.service.model_source import FixedModel, LoadedModel, RegistryFollower
from perfmodel.service.settings import ENV_VAR, ServiceSettings

STATIC_DIR = Path(__file__).parent / "static"
_log = logging.getLogger("perfmodel.service")


class ModelSource(Protocol):
    def start(self) -> None: ...
    def stop(self) -> None: ...
    def current(self) -> LoadedModel | None: ...
    def status(self) -> dict[str, Any]: ...


class ServiceError(Exception):
    """An answer that is not 200, with its one-line message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def model_source_for(settings: ServiceSettings) -> ModelSource:
    if settings.model_uri is not None:
        return RegistryFollower(
            settings.model_uri,
            tracking_uri=settings.tracking_uri,
            poll_interval_s=settings.poll_interval_s,
            grace_s=settings.request_timeout_s + 30,
        )
    return FixedModel(settings.model_dir)


# --- answers ----------------------------------------------------------------------------------


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message, "status": status}, status_code=status)


def error_message(exc: PerfModelError) -> str:
    """The CLI's message (first line, or every problem line), in the words of the HTTP API where
    the CLI's would name flags a request does not have."""
    text = str(exc)
    if text == ludwig.MISSING_AMOUNT:
        return (
            "the dataset size is required for a Ludwig config: pass rows (the dataset's rows, before Ludwig's "
            "train/validation/test split) or tokens (or set trainer.train_steps in the config)"
        )
    if text == native.MISSING_AMOUNT:
        return "training.tokens (or training.samples, or training.steps) is required: give it in the config, or pass tokens or rows"
    if isinstance(exc, ConfigError) and len(exc.problems) > 1:
        return text
    return text.splitlines()[0] if text else type(exc).__name__


def _json_bytes(data: Any) -> bytes:
    try:
        return json.dumps(data, allow_nan=False, default=_default).encode("utf-8")
    except ValueError:
        raise ServiceError(
            422,
            "the result has a non-finite number: the inputs are outside what the cost model "
            "can compute (check the config's sizes)",
        ) from None


def _default(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, (set, tuple)):
        return list(value)
    return str(value)


class ResponseCache:
    """Answers already computed, by request and model, least recently used out first."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[str, bytes] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: str) -> bytes | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: str, value: bytes) -> None:
        if len(value) > self.max_bytes // 8:
            return
        with self._lock:
            if key in self._items:
                return
            self._items[key] = value
            self._bytes += len(value)
            while self._bytes > self.max_bytes:
                _, old = self._items.popitem(last=False)
                self._bytes -= len(old)


# --- request bodies -> library calls --------------------------------------------------------------


PARSED_CACHE_ENTRIES = 256
"""Config texts whose parsed mapping is kept (a page or a scheduler sends the same config with
different flags; parsing is a fifth of a prediction)."""
PARSED_CACHE_MAX_CHARS = 64_000
"""Longer texts are parsed every time (bounds the cache to ~16 MB)."""


@functools.lru_cache(maxsize=PARSED_CACHE_ENTRIES)
def _parse_cached(text: str, source: str) -> dict[str, Any]:
    return parse_config_text(text, source=source)


def _config(value: Mapping[str, Any] | str | None, source: str = "the config") -> dict[str, Any] | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            if len(value) > PARSED_CACHE_MAX_CHARS:
                return parse_config_text(value, source=source)
            return copy.deepcopy(_parse_cached(value, source))  # callers may change their copy
        except ConfigError as exc:
            raise rq.BadRequest(str(exc).splitlines()[0]) from None
    return dict(value)


NO_FILES = rq.FileAccess()
"""A server with no --data-dir: no request reads a file."""


def run_request(
    req: rq.RunOptions,
    model: LoadedModel,
    config: Mapping[str, Any] | None,
    vary: Mapping[str, Any] | None = None,
    access: rq.FileAccess = NO_FILES,
) -> RunRequest:
    """The run request of a body: its config (a mapping) and `set` with every file they name
    refused or resolved inside the allowed folder (`access`), a sweep's `vary` keys checked, and
    the options, predicted with the model this server serves."""
    options = {**req.options(), "model_dir": model.model_dir}
    options.pop("dataset", None)  # only as `access` resolves it
    options["set"] = access.changes(options["set"])
    if vary:
        access.vary(vary)
    if req.dataset is not None:
        options["dataset"] = Path(access.dataset("dataset", req.dataset))
    options["analytic"] = req.analytic or not model.use_learned
    return RunRequest.of(access.config(config), **options)


def predict_job(req: rq.RunRequest, model: LoadedModel, access: rq.FileAccess = NO_FILES) -> dict[str, Any]:
    return with_display(predict_document(run_request(req, model, _config(req.config), access=access)))


def sweep_job(
    req: rq.SweepRequest, model: LoadedModel, max_points: int, access: rq.FileAccess = NO_FILES
) -> dict[str, Any]:
    vary = dict(req.vary) if isinstance(req.vary, Mapping) else dict(parse_vary(text) for text in req.vary)
    points = 1
    for values in vary.values():
        points *= max(len(values), 1)
    if points > max_points:
        raise ConfigError(
            f"the sweep has {points:,} points; this server answers at most {max_points:,} per request"
        )
    return dict(sweep(run_request(req, model, _config(req.config), vary, access), vary).to_json())


def advise_job(req: rq.AdviseRequest, model: LoadedModel, access: rq.FileAccess = NO_FILES) -> dict[str, Any]:
    search: dict[str, Any] = {
        "deadline_s": req.deadline_s,
        "budget_usd": req.budget_usd,
        "gpus": req.gpus,
        "max_gpus": req.max_gpus,
        "conservative": req.conservative,
        "top": req.top,
    }
    return dict(advise(run_request(req, model, _config(req.config), access=access), **search).to_json())


def compare_job(
    req: rq.CompareRequest, model: LoadedModel, max_configs: int, access: rq.FileAccess = NO_FILES
) -> dict[str, Any]:
    if len(req.configs) > max_configs:
        raise ConfigError(
            f"{len(req.configs)} configs; this server compares at most {max_configs} per request"
        )
    configs = [
        access.config(_config(c, f"configs[{i}]") or {}, f"in configs[{i}]") or {} for i, c in enumerate(req.configs)
    ]
    return dict(compare(configs, request=run_request(req, model, None, access=access)).to_json())


def reads_files(req: Any, access: rq.FileAccess) -> bool:
    """Whether a request may make the server read a file in its data folder (then it is computed
    in a worker thread, under the time limit, never on the event loop)."""
    if access.data_dir is None:
        return False  # every file is refused
    try:
        configs = [req.config] if hasattr(req, "config") else list(req.configs)
        parsed = [_config(c) for c in configs]
    except PerfModelError:
        return False  # the job's own one-line error, before any file
    overrides, dataset = getattr(req, "overrides", None), getattr(req, "dataset", None)
    return any(access.reads_files(c, overrides, dataset) for c in parsed or [None])


FORM_FIELDS = ("gpu", "num_gpus", "precision", "micro_batch_size", "seq_len", "tokens", "rows")
"""The run fields of the web page (what /v1/config reports for a config)."""


def config_fields(config: Mapping[str, Any]) -> dict[str, Any]:
    """What a config says for each of `FORM_FIELDS`, as perfmodel reads it (defaults applied when
    the config resolves; the keys it states when it does not, e.g. a Ludwig config without its
    dataset size), its dialect, and the one-line reason it cannot be predicted as it is."""
    dialect = "ludwig" if ludwig.is_ludwig(dict(config)) else "native"
    fields: dict[str, Any] = dict.fromkeys(FORM_FIELDS)
    missing = ""
    try:
        fields.update(_workload_fields(config))
    except PerfModelError as exc:
        missing = error_message(exc)
        try:  # a config without its dataset size: its other values, the size left blank
            fields.update({**_workload_fields(config, rows=1000), "tokens": None})
        except PerfModelError:
            pass
    shown = {k: (fmt_number(v) if k == "tokens" and isinstance(v, (int, float)) else v) for k, v in fields.items()}
    return {"dialect": dialect, "fields": fields, "shown": shown, "error": missing or None}


def _workload_fields(config: Mapping[str, Any], **options: Any) -> dict[str, Any]:
    w = resolve_workload(RunRequest.of(dict(config), **options))
    return {
        "gpu": w.gpu.name,
        "num_gpus": w.parallel.num_gpus,
        "precision": w.training.precision,
        "micro_batch_size": w.training.micro_batch_size,
        "seq_len": w.training.seq_len,
        "tokens": w.training.tokens,
    }


DISPLAY_KEY = "display"
"""The key /v1/predict adds to the `predict --json` document: its headline numbers as text, in
the CLI's formats (perfmodel.cli.render), for the web page and anyone who shows them to people."""


def with_display(doc: dict[str, Any]) -> dict[str, Any]:
    """`doc` with `display` added (every value a string; absent numbers are absent keys)."""
    doc[DISPLAY_KEY] = display_strings(doc)
    return doc


def _duration_pair(iv: Mapping[str, float]) -> dict[str, str]:
    unit = duration_unit(iv["estimate"])
    return {"value": fmt_duration(iv["estimate"], unit), "range": fmt_duration_range(iv["low"], iv["high"], unit)}


def _config_value(value: Any) -> str:
    """A value as it is written in YAML (true/false, flow mappings), as the CLI's fit lines show it."""
    if isinstance(value, (bool, dict)):
        return json.dumps(value, separators=(", ", ": ")).replace('"', "")
    return str(value)


def display_strings(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The prediction's numbers as `perfmodel predict` prints them: durations in one unit per
    interval (`fmt_duration`), counts with separators, MFU in percent, fit suggestions as the
    config keys to set."""
    out: dict[str, Any] = {}
    for key, name in (("total_time_s", "total_time"), ("step_time_s", "step_time")):
        if doc.get(key):
            pair = _duration_pair(doc[key])
            out[name], out[f"{name}_range"] = pair["value"], pair["range"]
    if doc.get("total_steps") is not None:
        out["steps"] = f"{int(doc['total_steps']):,}"
    tokens, samples = doc.get("throughput_tokens_per_s"), doc.get("throughput_samples_per_s")
    if tokens:
        out["throughput"] = f"{tokens['estimate']:,.0f} tokens/s"
        out["throughput_range"] = f"{tokens['low']:,.0f} – {tokens['high']:,.0f}"
    elif samples:
        out["throughput"] = f"{fmt_amount(samples['estimate'])} samples/s"
        out["throughput_range"] = f"{fmt_amount(samples['low'])} – {fmt_amount(samples['high'])}"
    if doc.get("gpu_hours"):
        iv = doc["gpu_hours"]
        out["gpu_hours"] = fmt_amount(iv["estimate"])
        out["gpu_hours_range"] = f"{fmt_amount(iv['low'])} – {fmt_amount(iv['high'])}"
    if doc.get("cost_usd"):
        iv = doc["cost_usd"]
        out["cost"], out["cost_range"] = fmt_usd(iv["estimate"]), f"{fmt_usd(iv['low'])} – {fmt_usd(iv['high'])}"
    if doc.get("peak_memory_gb"):
        iv = doc["peak_memory_gb"]
        out["peak_memory"], out["peak_memory_range"] = f"{iv['estimate']:.1f} GB", f"{iv['low']:.1f} – {iv['high']:.1f} GB"
    verdict = doc.get("memory_verdict")
    if isinstance(verdict, Mapping) and verdict.get("verdict"):
        out["memory_verdict"] = (
            f"{verdict['verdict']}: {verdict.get('device_gb', 0):.1f} GB of {verdict.get('capacity_gb', 0):.0f} GB per GPU"
        )
    if doc.get("mfu"):
        iv = doc["mfu"]
        out["mfu"], out["mfu_range"] = f"{iv['estimate']:.0%}", f"{iv['low']:.0%} – {iv['high']:.0%}"
    if doc.get("bottleneck"):
        out["bottleneck"] = str(doc["bottleneck"])
    suggestions = []
    for s in doc.get("fit_suggestions") or ():
        keys = s.get("config_changes") if s.get("config_changes") is not None else s.get("changes") or {}
        line: dict[str, Any] = {
            "summary": str(s.get("summary", "")),
            "set": ", ".join(f"{k}={_config_value(v)}" for k, v in keys.items()),
        }
        if s.get("total_time_s"):
            pair = _duration_pair(s["total_time_s"])
            line["total_time"], line["total_time_range"] = pair["value"], pair["range"]
        if s.get("peak_memory_gb") and s.get("memory_capacity_gb"):
            line["peak_memory"] = f"{s['peak_memory_gb']['estimate']:.1f} of {s['memory_capacity_gb']:.0f} GB"
        suggestions.append(line)
    out["fit_suggestions"] = suggestions
    return out


def gpu_catalog() -> list[dict[str, Any]]:
    """Every accelerator with its list price (the `perfmodel gpus --json` records + price)."""
    out = []
    for name in gpu_names():
        price = default_price(name)
        out.append(
            {**dataclasses.asdict(get_gpu(name)), "price_per_gpu_hour": price.to_json() if price else None}
        )
    return out


# --- the application --------------------------------------------------------------------------


def host_name(header: str | None) -> str | None:
    """The name in a Host header: 'localhost:8000' -> 'localhost', '[::1]:8000' -> '::1'; None
    when missing or malformed."""
    text = (header or "").strip()
    if text.startswith("["):
        end = text.find("]")
        rest = text[end + 1 :] if end > 0 else "x"
        return text[1:end] if end > 1 and (not rest or (rest[0] == ":" and rest[1:].isdigit())) else None
    name, _, port = text.partition(":")
    if not name or (port and not port.isdigit()) or ":" in port:
        return None
    return name


class RequestGuard:
    """ASGI middleware, before any route: a `Host` not in `allowed_hosts` is answered 400 and an
    `Origin` naming another host 403 (a page elsewhere, or a DNS-rebound name, cannot drive the
    server); a body over `max_bytes` 413, whether announced by Content-Length or found while
    reading a chunked body; a body not complete `body_timeout_s` after the request came 408.

    The host patterns are those of Starlette's `TrustedHostMiddleware` ('name', '*.domain', '*');
    that middleware is not used as such because it answers in plain text, not this API's JSON."""

    def __init__(self, app: Any, *, allowed_hosts: tuple[str, ...], max_bytes: int, body_timeout_s: float) -> None:
        self.app = app
        self.patterns = [p.lower() for p in allowed_hosts]
        self.any_host = "*" in self.patterns
        self.max_bytes = max_bytes
        self.body_timeout_s = body_timeout_s

    def _allowed(self, host: str) -> bool:
        host = host.lower()
        return self.any_host or any(
            host == p or (p.startswith("*.") and host.endswith(p[1:])) for p in self.patterns
        )

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        host = host_name(headers.get("host"))
        if host is None or not self._allowed(host):
            shown = clip(headers.get("host") or "(none)", 80)
            await _error(
                400, f"Host {shown} is not served here (allowed: {', '.join(self.patterns)}; perfmodel serve --allowed-host)"
            )(scope, receive, send)
            return
        origin = headers.get("origin")
        if origin is not None:
            origin_host = urlsplit(origin).hostname if origin != "null" else None
            if origin_host is None or not self._allowed(origin_host):
                await _error(403, f"cross-site request from {clip(origin, 80)} refused")(scope, receive, send)
                return
        limit = self.max_bytes
        message = f"the request body is over the limit of {limit:,} bytes"
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > limit):
            await _error(413, message)(scope, receive, send)
            return
        seen = 0
        complete = False
        deadline = anyio.current_time() + self.body_timeout_s

        async def guarded() -> Any:
            nonlocal seen, complete
            if complete:  # after the body: a wait for the client's disconnect, not bounded here
                return await receive()
            event = None
            with anyio.move_on_after(max(deadline - anyio.current_time(), 0)):
                event = await receive()
            if event is None:
                raise StarletteHTTPException(
                    408, f"the request body was not received within {self.body_timeout_s:g} s"
                )
            if event.get("type") == "http.request":
                seen += len(event.get("body", b""))
                complete = not event.get("more_body", False)
                if seen > limit:
                    raise StarletteHTTPException(413, message)
            return event

        await self.app(scope, guarded, send)


def app_from_env() -> FastAPI:
    """The application of one worker process of `perfmodel serve --workers N` (uvicorn's factory):
    the settings the command put in $PERFMODEL_SERVE_SETTINGS."""
    text = os.environ.get(ENV_VAR)
    return create_app(ServiceSettings.from_json(text) if text else None)


def create_app(settings: ServiceSettings | None = None, *, source: ModelSource | None = None) -> FastAPI:
    """The application; `source` replaces the model source `settings` describe (tests)."""
    settings = settings or ServiceSettings()
    calibrations = (
        calibrations_folder(settings.calibrations, tracking_uri=settings.tracking_uri)
        if settings.calibrations is not None
        else None
    )
    model_source = source if source is not None else model_source_for(settings)
    cache = ResponseCache(settings.cache_bytes) if settings.cache_bytes else None
    limiter: list[anyio.CapacityLimiter] = []
    access = rq.FileAccess(settings.data_dir, settings.max_dataset_bytes)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        limiter.append(anyio.CapacityLimiter(settings.concurrency))
        before = os.environ.get(CALIBRATION_DIR_VAR)
        if calibrations is not None:  # every prediction of this process reads it (perfmodel.paths)
            os.environ[CALIBRATION_DIR_VAR] = str(calibrations)
        await anyio.to_thread.run_sync(model_source.start)
        try:
            yield
        finally:
            model_source.stop()
            if calibrations is not None:
                if before is None:
                    os.environ.pop(CALIBRATION_DIR_VAR, None)
                else:
                    os.environ[CALIBRATION_DIR_VAR] = before

    app = FastAPI(
        title="perfmodel",
        summary="How long will this training run take, will it fit in memory, and how sure are we?",
        description="Predictions of training time, throughput, cost and memory with calibrated intervals. "
        "Bodies are JSON, or a YAML config with the other fields as query parameters.",
        lifespan=lifespan,
    )
    app.add_middleware(
        RequestGuard,
        allowed_hosts=settings.allowed_hosts,
        max_bytes=settings.max_body_bytes,
        body_timeout_s=settings.body_timeout_s,
    )
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _error(exc.status_code, str(exc.detail))

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p not in ("query", "body"))
        return _error(422, f"{where or 'the request'}: {first.get('msg', 'invalid')}")

    def serving() -> LoadedModel:
        model = model_source.current()
        if model is None:
            status = model_source.status()
            raise ServiceError(
                503, "no model loaded yet" + (f": {status['last_error']}" if status.get("last_error") else "")
            )
        return model

    async def answer(
        request: Request,
        schema: type[Any],
        job: Callable[[Any, LoadedModel], dict[str, Any]],
        *,
        bounded: bool = False,
    ) -> Response:
        """`job`'s answer to the request. A `bounded` job (one prediction: its work does not grow
        with the request) with a body under `inline_max_body_bytes` is computed right here, on the
        event loop; any other runs in a worker thread under the time limit. A hop to a thread
        costs more than a prediction's work on a small host (measured: 4.0 against 2.9 ms of
        server CPU per prediction on 2 cores, bench/bench_serve.py)."""
        try:
            model = serving()
            body = await request.body()
            req = rq.parse_request(
                schema,
                body,
                request.headers.get("content-type", ""),
                list(request.query_params.multi_items()),
            )
            key = hashlib.sha256(
                f"{request.url.path}\0{model.source}\0{model.version}\0{model.loaded_at}\0"
                f"{store_stamp()}\0{req.model_dump_json(by_alias=True)}".encode()
            ).hexdigest()
            cached = cache.get(key) if cache is not None else None
            if cached is not None:
                return Response(cached, media_type="application/json", headers={"X-Perfmodel-Cache": "hit"})
            try:
                if bounded and len(body) <= settings.inline_max_body_bytes and not reads_files(req, access):
                    payload = _json_bytes(job(req, model))
                else:
                    with anyio.fail_after(settings.request_timeout_s):
                        payload = await anyio.to_thread.run_sync(
                            lambda: _json_bytes(job(req, model)), limiter=limiter[0], abandon_on_cancel=True
                        )
            except TimeoutError:
                raise ServiceError(
                    503,
                    f"the request took longer than {settings.request_timeout_s:g} s, this "
                    f"server's limit per request: ask for less (fewer sweep points or GPUs)",
                ) from None
            if cache is not None:
                cache.put(key, payload)
            return Response(payload, media_type="application/json", headers={"X-Perfmodel-Cache": "miss"})
        except ServiceError as exc:
            return _error(exc.status, exc.message)
        except rq.BadRequest as exc:
            return _error(exc.status, error_message(exc))
        except PerfModelError as exc:
            return _error(422, error_message(exc))
        except StarletteHTTPException:
            raise
        except Exception:
            ref = uuid.uuid4().hex[:12]
            _log.exception("request %s %s failed (reference %s)", request.method, request.url.path, ref)
            return _error(500, f"internal error (reference {ref}; the server log has the details)")

    @app.post("/v1/predict", openapi_extra=rq.body_schema(rq.RunRequest), tags=["predict"], responses=rq.POST_ERRORS)
    async def predict(request: Request) -> Response:
        """Predict one run: the `perfmodel predict --json` document (time, throughput, GPU-hours,
        cost and peak memory, each {estimate, low, high}; fits_in_memory; model; workload; warnings)."""
        return await answer(
            request, rq.RunRequest, lambda req, model: predict_job(req, model, access), bounded=True
        )

    @app.post("/v1/sweep", openapi_extra=rq.body_schema(rq.SweepRequest), tags=["decide"], responses=rq.POST_ERRORS)
    async def sweep(request: Request) -> Response:
        """Predict a run at every combination of `vary` (the `perfmodel sweep --json` document)."""
        return await answer(
            request,
            rq.SweepRequest,
            lambda req, model: sweep_job(req, model, settings.max_sweep_points, access),
        )

    @app.post("/v1/advise", openapi_extra=rq.body_schema(rq.AdviseRequest), tags=["decide"], responses=rq.POST_ERRORS)
    async def advise(request: Request) -> Response:
        """Options that fit and meet `deadline_s` / `budget_usd` (the `perfmodel advise --json` document)."""
        return await answer(request, rq.AdviseRequest, lambda req, model: advise_job(req, model, access))

    @app.post("/v1/compare", openapi_extra=rq.body_schema(rq.CompareRequest), tags=["decide"], responses=rq.POST_ERRORS)
    async def compare(request: Request) -> Response:
        """Configs side by side with time and cost ratios (the `perfmodel compare --json` document)."""
        return await answer(
            request,
            rq.CompareRequest,
            lambda req, model: compare_job(req, model, settings.max_compare_configs, access),
        )

    @app.post("/v1/config", openapi_extra=rq.body_schema(rq.ConfigRequest), tags=["predict"], responses=rq.POST_ERRORS)
    async def config(request: Request) -> Response:
        """What a config says for the run fields (gpu, num_gpus, precision, micro_batch_size, seq_len,
        tokens, rows), its dialect, and why it cannot be predicted as it is (the web page's
        placeholders)."""
        return await answer(
            request,
            rq.ConfigRequest,
            lambda req, model: config_fields(access.config(_config(req.config)) or {}),
            bounded=True,
        )

    catalogs: dict[str, bytes] = {}

    async def catalog(name: str, build: Callable[[], list[dict[str, Any]]]) -> Response:
        if name not in catalogs:
            catalogs[name] = _json_bytes(await anyio.to_thread.run_sync(build))
        return Response(catalogs[name], media_type="application/json")

    @app.get("/v1/gpus", tags=["catalog"], responses=rq.GET_ERRORS)
    async def gpus() -> Response:
        """Every accelerator: dense peak TFLOP/s per precision, memory, bandwidth, list price."""
        return await catalog("gpus", gpu_catalog)

    @app.get("/v1/models", tags=["catalog"], responses=rq.GET_ERRORS)
    async def models() -> Response:
        """Every catalog model architecture (Hugging Face ids and dimensions are accepted too)."""
        return await catalog("models", model_catalog)

    @app.get("/v1/model", tags=["service"], responses={**rq.GET_ERRORS, **rq.error_responses(503)})
    async def model() -> JSONResponse:
        """The learned model answering now: version, MLflow run id, trained rows, dataset hash, source;
        and whether this server sizes datasets from its data folder (`reads_datasets`)."""
        current = model_source.current()
        body = {
            "model": current.to_json() if current else None,
            "registry": model_source.status(),
            "reads_datasets": settings.data_dir is not None,
            "calibrations": {
                "source": settings.calibration_source or settings.calibrations or "$" + CALIBRATION_DIR_VAR,
                "folder": str(calibrations) if calibrations is not None else None,
            },
        }
        return JSONResponse(body, status_code=200 if current else 503)

    @app.get("/healthz", tags=["service"], responses=rq.GET_ERRORS)
    async def healthz() -> dict[str, str]:
        """The process answers."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["service"], responses={**rq.GET_ERRORS, **rq.error_responses(503)})
    async def readyz() -> JSONResponse:
        """200 once a model is loaded and predictions can be answered; 503 before."""
        current = model_source.current()
        if current is None:
            return JSONResponse(
                {
                    "ready": False,
                    "error": clip(str(model_source.status().get("last_error") or "loading the model")),
                },
                status_code=503,
            )
        return JSONResponse({"ready": True, "model": current.to_json()})

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html", media_type="text/html")

    return app
