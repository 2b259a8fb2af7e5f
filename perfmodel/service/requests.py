"""Request bodies of the HTTP API, read from JSON or from YAML text, and the rules that keep a
request from reaching the server's files.

A body is JSON (`Content-Type: application/json`): {"config": <mapping or YAML text>, "gpu": ...,
"set": {...}, ...}; or the config itself as YAML (`application/yaml`, `text/yaml`, `text/plain`)
with the other fields as query parameters (`?gpu=H100-SXM&num_gpus=8&set=training.seq_len=2048`).

Paths are never read on a request's behalf: `dataset`, `training.dataset` and `model.path` are
refused, and so is a model name (`model.name`, Ludwig's `base_model`, an encoder's
`pretrained_model_name_or_path`) that is a path (absolute, `~`, `..`, `.json`) or names a
folder with a config.json under the server's working directory. Catalog names and Hugging Face
ids (read from the server's Hugging Face cache when there) are fine.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from perfmodel.catalog import local_config_path
from perfmodel.errors import ConfigError, PerfModelError, clip, quote
from perfmodel.request import BY_NAME

YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml", "text/plain")
"""Content types read as a YAML config."""
REPEATED_QUERY = ("set", "vary", "gpus")
"""Query parameters that may be given several times (lists)."""
NAME_KEYS = ("base_model", "pretrained_model_name_or_path")
"""Keys, at any depth, whose value names a model (and so could name a path)."""
DATASET_REFUSED = (
    "dataset: files on the server are not read over HTTP; pass rows (the dataset's rows) "
    "or tokens (training tokens) instead"
)


class BadRequest(PerfModelError, ValueError):
    """A body that cannot be read at all (not JSON, not YAML, wrong content type): HTTP 400 / 415."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


SERVER_OPTIONS = ("config", "dataset", "model_dir", "model_uri")
"""Run-request options (`perfmodel.request.OPTIONS`) a request body does not carry: the config is
its own field, files on the server are not read, and the server serves its own model."""


def _help(name: str) -> str:
    return BY_NAME[name].help


class RunOptions(BaseModel):
    """The options of a run (`perfmodel.request.OPTIONS`, but the server's own: `SERVER_OPTIONS`)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    gpu: str | None = Field(None, description=_help("gpu"))
    num_gpus: int | None = Field(None, description=_help("num_gpus"))
    tokens: float | None = Field(None, description=_help("tokens"))
    rows: int | None = Field(None, description=_help("rows"))
    overrides: dict[str, Any] | list[str] | None = Field(
        None,
        alias="set",
        description='Native keys to change: {"training.micro_batch_size": 16} or ["key=value"].',
    )
    price_per_gpu_hour: float | None = Field(None, description=_help("price_per_gpu_hour"))
    confidence: float = Field(0.9, description=_help("confidence"))
    analytic: bool = Field(False, description=_help("analytic"))
    no_calibration: bool = Field(False, description=_help("no_calibration"))

    def options(self) -> dict[str, Any]:
        """The options as `perfmodel.request.RunRequest.of` takes them."""
        values = {n: getattr(self, n) for n in type(self).model_fields if n in BY_NAME and n not in SERVER_OPTIONS}
        values["set"] = values.pop("overrides")
        return values


class RunRequest(RunOptions):
    """One run: a config and the options `perfmodel predict` takes (except --dataset and the model)."""

    config: dict[str, Any] | str | None = Field(
        None,
        description="A native or Ludwig config: a JSON object, or YAML text.",
        examples=[
            {
                "model": {"name": "llama2-7b"},
                "training": {"seq_len": 512, "micro_batch_size": 8, "tokens": 5e8, "lora_r": 16},
                "hardware": {"gpu": "A100-80GB", "num_gpus": 1},
            }
        ],
    )


class SweepRequest(RunRequest):
    """A run predicted over a grid of config values."""

    vary: dict[str, list[Any]] | list[str] = Field(
        ..., description='Key -> values, e.g. {"training.micro_batch_size": [1, 2, 4, 8]}, or ["KEY=V1,V2"].'
    )


class AdviseRequest(RunRequest):
    """A run to find better settings for, under a deadline and/or a budget."""

    deadline_s: float | None = Field(None, description="Longest acceptable total time, s.")
    budget_usd: float | None = Field(None, description="Largest acceptable cost, USD.")
    gpus: list[str] | None = Field(
        None, description="Accelerators to consider (default: the config's and common ones)."
    )
    max_gpus: int = Field(64, description="Most GPUs to consider.")
    conservative: bool = Field(False, description="Apply the constraints to the intervals' high ends.")
    top: int = Field(5, description="Options to return per ranking.")


class CompareRequest(RunOptions):
    """Several configs predicted with the same options, compared with the first."""

    configs: list[dict[str, Any] | str] = Field(
        ..., description="Two or more configs (JSON objects or YAML text)."
    )


def body_schema(model: type[BaseModel]) -> dict[str, Any]:
    """OpenAPI request body of an endpoint that reads its body itself (JSON, or a YAML config)."""
    return {
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": model.model_json_schema(by_alias=True)},
                "application/yaml": {
                    "schema": {
                        "type": "string",
                        "description": "The config as YAML; the other fields as query parameters",
                    }
                },
            },
        }
    }


def parse_request(
    model: type[BaseModel], body: bytes, content_type: str, query: Sequence[tuple[str, str]]
) -> Any:
    """The validated request from a JSON body, or a YAML body plus query parameters."""
    kind = content_type.split(";")[0].strip().lower()
    if kind in ("application/json", "") or kind.endswith("+json"):
        try:
            data = json.loads(body.decode("utf-8-sig") if body else "null")
        except (UnicodeDecodeError, ValueError) as exc:
            raise BadRequest(f"the body is not valid JSON: {clip(str(exc), 200)}") from None
        except RecursionError:
            raise BadRequest("the body is not valid JSON: nested too deeply") from None
        if not isinstance(data, dict):
            raise BadRequest(f"the body must be a JSON object, got {type(data).__name__}")
    elif kind in YAML_TYPES:
        try:
            text = body.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise BadRequest(f"the body is not UTF-8 text (byte {exc.start})") from None
        data = _query_fields(query)
        data["config"] = text
    else:
        raise BadRequest(
            f"Content-Type {clip(kind, 80)!r} is not read: send application/json or application/yaml", 415
        )
    if "dataset" in data:
        raise ConfigError(DATASET_REFUSED)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(validation_message(exc)) from None


def _query_fields(query: Sequence[tuple[str, str]]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for key, value in query:
        if key in REPEATED_QUERY:
            data.setdefault(key, []).append(value)
        elif key in data:
            raise ConfigError(f"query parameter {clip(key, 60)} is given twice")
        else:
            data[key] = value
    return data


def validation_message(exc: ValidationError) -> str:
    """The first problem of a pydantic error, as one line: 'num_gpus: Input should be a valid integer'."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ())) or "the body"
    if first.get("type") == "extra_forbidden":
        return f"{where} is not a field of this request; the fields are: {', '.join(_fields(exc.title))}"
    more = f" (and {len(exc.errors()) - 1} more problems)" if len(exc.errors()) > 1 else ""
    return f"{where}: {first.get('msg', 'invalid')}{more}"


def _fields(title: str) -> list[str]:
    for model in (RunRequest, SweepRequest, AdviseRequest, CompareRequest):
        if model.__name__ == title:
            return [f.alias or name for name, f in model.model_fields.items()]
    return []


# --- server-side paths ------------------------------------------------------------------------


def refuse_server_paths(config: Mapping[str, Any] | None, changes: Mapping[str, Any]) -> None:
    """ConfigError when a config (mapping) or a change (dotted key -> value) would make the server
    read a file named by the request."""
    if config is not None:
        for dotted, value in _walk(config):
            _check(dotted, value, "in the config")
    for dotted, value in changes.items():
        values = value if isinstance(value, list) else [value]
        for v in values:
            _check(str(dotted), v, "in the request")


def _walk(node: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(node, Mapping):
        for key, value in node.items():
            dotted = f"{prefix}.{key}" if prefix else str(key)
            yield dotted, value
            yield from _walk(value, dotted)
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from _walk(item, f"{prefix}[{i}]")


def _check(dotted: str, value: Any, where: str) -> None:
    if dotted in ("training.dataset", "model.path"):
        raise ConfigError(
            f"{dotted} {where} names a file on the server, which is not read over HTTP; "
            + (
                "pass rows or tokens instead"
                if dotted == "training.dataset"
                else "give model.name (a catalog name or Hugging Face id) or the dimensions"
            )
        )
    last = dotted.rsplit(".", 1)[-1]
    if (dotted == "model.name" or last in NAME_KEYS) and isinstance(value, str) and _is_path(value):
        raise ConfigError(
            f"{dotted} {where} is a path ({quote(value, 80)}): files on the server are not read over "
            f"HTTP; give a catalog name (GET /v1/models), a Hugging Face id, or the model's dimensions"
        )


def _is_path(name: str) -> bool:
    text = name.strip()
    if not text or "\x00" in text:
        return False
    if text.startswith(("/", "~", "\\")) or text.lower().endswith(".json") or ":" in text[:3]:
        return True
    if ".." in PurePosixPath(text.replace("\\", "/")).parts:
        return True
    return local_config_path(text) is not None
