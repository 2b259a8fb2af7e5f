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

import anyio
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from perfmodel.api import model_catalog, predict_document
from perfmodel.calibration.record import store_stamp
from perfmodel.catalog import get_gpu, gpu_names
from perfmodel.catalog.prices import default_price
from perfmodel.config import ludwig, native
from perfmodel.config.from_text import parse_config_text
from perfmodel.decide.advise import advise
from perfmodel.decide.compare import compare
from perfmodel.decide.sweep import parse_vary, sweep
from perfmodel.errors import ConfigError, PerfModelError, clip
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


def _changes(overrides: Mapping[str, Any] | list[str] | None) -> dict[str, Any]:
    if isinstance(overrides, Mapping):
        return dict(overrides)
    return {
        text.split("=", 1)[0].strip(): text.split("=", 1)[1].strip()
        for text in overrides or ()
        if "=" in text
    }


def run_request(
    req: rq.RunOptions, model: LoadedModel, config: Mapping[str, Any] | None, changes: Mapping[str, Any] | None = None
) -> RunRequest:
    """The run request of a body: its config (a mapping: server paths refused, with the body's
    `set` and a sweep's `changes`) and options, predicted with the model this server serves."""
    rq.refuse_server_paths(config, {**_changes(req.overrides), **(changes or {})})
    options = {**req.options(), "model_dir": model.model_dir}
    options["analytic"] = req.analytic or not model.use_learned
    return RunRequest.of(config, **options)


def predict_job(req: rq.RunRequest, model: LoadedModel) -> dict[str, Any]:
    return predict_document(run_request(req, model, _config(req.config)))


def sweep_job(req: rq.SweepRequest, model: LoadedModel, max_points: int) -> dict[str, Any]:
    vary = dict(req.vary) if isinstance(req.vary, Mapping) else dict(parse_vary(text) for text in req.vary)
    points = 1
    for values in vary.values():
        points *= max(len(values), 1)
    if points > max_points:
        raise ConfigError(
            f"the sweep has {points:,} points; this server answers at most {max_points:,} per request"
        )
    return dict(sweep(run_request(req, model, _config(req.config), vary), vary).to_json())


def advise_job(req: rq.AdviseRequest, model: LoadedModel) -> dict[str, Any]:
    search: dict[str, Any] = {
        "deadline_s": req.deadline_s,
        "budget_usd": req.budget_usd,
        "gpus": req.gpus,
        "max_gpus": req.max_gpus,
        "conservative": req.conservative,
        "top": req.top,
    }
    return dict(advise(run_request(req, model, _config(req.config)), **search).to_json())


def compare_job(req: rq.CompareRequest, model: LoadedModel, max_configs: int) -> dict[str, Any]:
    if len(req.configs) > max_configs:
        raise ConfigError(
            f"{len(req.configs)} configs; this server compares at most {max_configs} per request"
        )
    configs = [_config(c, f"configs[{i}]") or {} for i, c in enumerate(req.configs)]
    for config in configs:
        rq.refuse_server_paths(config, {})
    return dict(compare(configs, request=run_request(req, model, None)).to_json())


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


class BodyLimit:
    """ASGI middleware: a request body over `max_bytes` is answered 413, whether announced by
    Content-Length or found while reading a chunked body."""

    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.max_bytes
        message = f"the request body is over the limit of {limit:,} bytes"
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > limit):
            await _error(413, message)(scope, receive, send)
            return
        seen = 0

        async def limited() -> Any:
            nonlocal seen
            event = await receive()
            if event.get("type") == "http.request":
                seen += len(event.get("body", b""))
                if seen > limit:
                    raise StarletteHTTPException(413, message)
            return event

        await self.app(scope, limited, send)


def app_from_env() -> FastAPI:
    """The application of one worker process of `perfmodel serve --workers N` (uvicorn's factory):
    the settings the command put in $PERFMODEL_SERVE_SETTINGS."""
    text = os.environ.get(ENV_VAR)
    return create_app(ServiceSettings.from_json(text) if text else None)


def create_app(settings: ServiceSettings | None = None, *, source: ModelSource | None = None) -> FastAPI:
    """The application; `source` replaces the model source `settings` describe (tests)."""
    settings = settings or ServiceSettings()
    model_source = source if source is not None else model_source_for(settings)
    cache = ResponseCache(settings.cache_bytes) if settings.cache_bytes else None
    limiter: list[anyio.CapacityLimiter] = []

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        limiter.append(anyio.CapacityLimiter(settings.concurrency))
        await anyio.to_thread.run_sync(model_source.start)
        try:
            yield
        finally:
            model_source.stop()

    app = FastAPI(
        title="perfmodel",
        summary="How long will this training run take, will it fit in memory, and how sure are we?",
        description="Predictions of training time, throughput, cost and memory with calibrated intervals. "
        "Bodies are JSON, or a YAML config with the other fields as query parameters.",
        lifespan=lifespan,
    )
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
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
                if bounded and len(body) <= settings.inline_max_body_bytes:
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

    @app.post("/v1/predict", openapi_extra=rq.body_schema(rq.RunRequest), tags=["predict"])
    async def predict(request: Request) -> Response:
        """Predict one run: the `perfmodel predict --json` document (time, throughput, GPU-hours,
        cost and peak memory, each {estimate, low, high}; fits_in_memory; model; workload; warnings)."""
        return await answer(request, rq.RunRequest, predict_job, bounded=True)

    @app.post("/v1/sweep", openapi_extra=rq.body_schema(rq.SweepRequest), tags=["decide"])
    async def sweep(request: Request) -> Response:
        """Predict a run at every combination of `vary` (the `perfmodel sweep --json` document)."""
        return await answer(
            request, rq.SweepRequest, lambda req, model: sweep_job(req, model, settings.max_sweep_points)
        )

    @app.post("/v1/advise", openapi_extra=rq.body_schema(rq.AdviseRequest), tags=["decide"])
    async def advise(request: Request) -> Response:
        """Options that fit and meet `deadline_s` / `budget_usd` (the `perfmodel advise --json` document)."""
        return await answer(request, rq.AdviseRequest, advise_job)

    @app.post("/v1/compare", openapi_extra=rq.body_schema(rq.CompareRequest), tags=["decide"])
    async def compare(request: Request) -> Response:
        """Configs side by side with time and cost ratios (the `perfmodel compare --json` document)."""
        return await answer(
            request,
            rq.CompareRequest,
            lambda req, model: compare_job(req, model, settings.max_compare_configs),
        )

    catalogs: dict[str, bytes] = {}

    async def catalog(name: str, build: Callable[[], list[dict[str, Any]]]) -> Response:
        if name not in catalogs:
            catalogs[name] = _json_bytes(await anyio.to_thread.run_sync(build))
        return Response(catalogs[name], media_type="application/json")

    @app.get("/v1/gpus", tags=["catalog"])
    async def gpus() -> Response:
        """Every accelerator: dense peak TFLOP/s per precision, memory, bandwidth, list price."""
        return await catalog("gpus", gpu_catalog)

    @app.get("/v1/models", tags=["catalog"])
    async def models() -> Response:
        """Every catalog model architecture (Hugging Face ids and dimensions are accepted too)."""
        return await catalog("models", model_catalog)

    @app.get("/v1/model", tags=["service"])
    async def model() -> JSONResponse:
        """The learned model answering now: version, MLflow run id, trained rows, dataset hash, source."""
        current = model_source.current()
        body = {"model": current.to_json() if current else None, "registry": model_source.status()}
        return JSONResponse(body, status_code=200 if current else 503)

    @app.get("/healthz", tags=["service"])
    async def healthz() -> dict[str, str]:
        """The process answers."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["service"])
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
