"""Request bodies of the HTTP API, read from JSON or from YAML text, and the rules that keep a
request from reaching the server's files.

A body is JSON (`Content-Type: application/json`): {"config": <mapping or YAML text>, "gpu": ...,
"set": {...}, ...}; or the config itself as YAML (`application/yaml`, `text/yaml`, `text/plain`)
with the other fields as query parameters (`?gpu=H100-SXM&num_gpus=8&set=training.seq_len=2048`).

A cross-site page can send `text/plain` and form bodies without asking first (a CORS "simple
request"), so those types are refused (415): JSON and YAML bodies must say so.

Files on the server are read only inside the folder the operator allowed (`--data-dir`), never
elsewhere, and with no such folder never at all. Every key is read the way the config parser reads
it before it is checked (`FileAccess`): `set` keys split on '.' with each part stripped
(`perfmodel.config.overrides.key_parts`), then compared in a canonical form (Unicode NFKC,
invisible characters removed, case folded, common Cyrillic/Greek look-alikes mapped to Latin), and
a `set` key that is not a plain dotted name of ASCII letters, digits and '_' is refused outright.
A key that names a file (`FILE_KEYS` at any depth: `training.dataset`, `model.path`, a Ludwig
dataset argument written into the config) and the `dataset` field are refused, or resolved inside
the allowed folder; so is a model name (`model.name`, Ludwig's `base_model`, an encoder's
`pretrained_model_name_or_path`) that is a path (absolute, `~`, `..`, `.json`) or names a folder
with a config.json. Catalog names and Hugging Face ids (read from the server's Hugging Face cache
when there) are fine.
"""

from __future__ import annotations

import json
import os
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from perfmodel.catalog import local_config_path
from perfmodel.config.overrides import key_parts, parse_value
from perfmodel.errors import ConfigError, PerfModelError, clip, quote
from perfmodel.request import BY_NAME

YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml")
"""Content types read as a YAML config (not `text/plain`: a cross-site page may send that
without a CORS preflight)."""
REPEATED_QUERY = ("set", "vary", "gpus")
"""Query parameters that may be given several times (lists)."""
NAME_KEYS = frozenset({"base_model", "pretrained_model_name_or_path", "pretrained_adapter_weights"})
"""Keys, at any depth (canonical form), whose value names a model (and so could name a path)."""
FILE_KEYS = frozenset({"dataset", "path", "training_set", "validation_set", "test_set", "data_dir", "dataset_path"})
"""Keys, at any depth (canonical form), whose value is a file or folder: native `training.dataset`
and `model.path`, and Ludwig's dataset arguments where a config carries them."""
NO_FILES = "files on the server are not read over HTTP (this server has no --data-dir)"
DATA_HINT = "pass rows (the dataset's rows) or tokens (training tokens) instead"
MODEL_HINT = "give model.name (a catalog name or Hugging Face id) or the model's dimensions"
MAX_DEPTH = 64
"""Deepest nesting of a request body or config (no config is deeper than a few levels)."""


class BadRequest(PerfModelError, ValueError):
    """A body that cannot be read at all (not JSON, not YAML, wrong content type): HTTP 400 / 415."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


SERVER_OPTIONS = ("config", "model_dir", "model_uri")
"""Run-request options (`perfmodel.request.OPTIONS`) a request body does not carry: the config is
its own field, and the server serves its own model. `dataset` is a field, refused unless the
server has a --data-dir and resolved inside it (`FileAccess`)."""


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
    dataset: str | None = Field(None, description=_help("dataset"))
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


class ConfigRequest(BaseModel):
    """A config whose values the web page shows as placeholders (nothing is predicted)."""

    model_config = ConfigDict(extra="forbid")

    config: dict[str, Any] | str = Field(..., description="A native or Ludwig config: a JSON object, or YAML text.")


ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["error", "status"],
    "properties": {"error": {"type": "string"}, "status": {"type": "integer"}},
}
"""Every answer that is not 200 (`{"error": one line, "status": code}`)."""
_ERROR_MEANINGS = {
    400: "the body is not JSON / YAML, nests too deeply, or the Host header is not allowed",
    403: "a cross-site request (Origin of another host)",
    408: "the body did not arrive in time",
    413: "the body is over the size limit",
    415: "not application/json or application/yaml",
    422: "the config or a field is wrong (the CLI's one-line message)",
    500: "a bug (a reference to the server log)",
    503: "no model loaded yet, or the request took longer than the time limit",
}


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` of the error answers `codes`."""
    return {
        code: {"description": _ERROR_MEANINGS[code], "content": {"application/json": {"schema": ERROR_SCHEMA}}}
        for code in codes
    }


POST_ERRORS = error_responses(400, 403, 408, 413, 415, 422, 500, 503)
GET_ERRORS = error_responses(400, 403, 500)


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
    if kind == "application/json" or (kind.startswith("application/") and kind.endswith("+json")):
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
    if nesting(data) > MAX_DEPTH:
        raise BadRequest(f"the body is nested more than {MAX_DEPTH} levels deep")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(validation_message(exc)) from None


def nesting(data: Any) -> int:
    """How deeply mappings and lists nest in `data` (a scalar: 0), without recursion."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, Mapping):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        deepest = max(deepest, depth)
        if deepest > MAX_DEPTH:
            return deepest
        stack.extend((child, depth + 1) for child in children)
    return deepest


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
    for model in (RunRequest, SweepRequest, AdviseRequest, CompareRequest, ConfigRequest):
        if model.__name__ == title:
            return [f.alias or name for name, f in model.model_fields.items()]
    return []


# --- files on the server ----------------------------------------------------------------------

_SET_PART = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_LOOK_ALIKES = str.maketrans(
    "аеорсхуіјѕԁһӏԛԝαεοριτυνκχΑΒΕΖΗΙΚΜΝΟΡΤΥΧАВЕКМНОРСТХ",
    "aeopcxyijsdhlqwaeopitvvkxABEZHIKMNOPTYXABEKMHOPCTX",
)
"""Cyrillic and Greek letters that look like Latin ones (a key spelled with them is compared as
the Latin key it imitates)."""


def canonical(key: Any) -> str:
    """A key part as it is compared: NFKC, invisible (format) characters dropped, look-alikes
    mapped to Latin, case folded, whitespace stripped."""
    text = unicodedata.normalize("NFKC", str(key))
    text = "".join(ch for ch in text if unicodedata.category(ch) != "Cf")
    return text.translate(_LOOK_ALIKES).casefold().strip()


def _set_key(key: Any, where: str) -> tuple[str, ...]:
    """The parts of a `set` / `vary` key as the override parser reads them; ConfigError for a key
    that is not a plain dotted name (no config key has spaces inside, non-ASCII letters or
    invisible characters)."""
    parts = key_parts(key) if isinstance(key, str) else ()
    if not parts or not all(_SET_PART.fullmatch(p) for p in parts):
        raise ConfigError(
            f"{where} key {quote(key, 60)} is not a config key: write a dotted name of letters, digits "
            f"and _ such as training.micro_batch_size"
        )
    return parts


def _dotted(parts: Sequence[str]) -> str:
    return ".".join(canonical(p) for p in parts)


@dataclass(frozen=True)
class FileAccess:
    """Which files a request may make the server read: none (`data_dir` None), or those inside
    `data_dir` (the operator's --data-dir; symlinks resolved, `~` and escapes refused)."""

    data_dir: Path | None = None
    max_bytes: int = 256_000_000
    """Largest dataset file read on a request's behalf, bytes."""

    def resolve(self, where: str, value: Any) -> str:
        """The absolute path of `value` inside the allowed folder; ConfigError if there is no such
        folder or the path leaves it. Nothing outside the folder is touched to decide."""
        if self.data_dir is None:
            hint = MODEL_HINT if where.split(" ", 1)[0].rsplit(".", 1)[-1].strip().casefold() == "path" else DATA_HINT
            raise ConfigError(f"{where} names a file on the server: {NO_FILES}; {hint}")
        if not isinstance(value, str) or not value.strip() or "\x00" in value:
            raise ConfigError(f"{where} must be a file name in the server's data folder, got {quote(value, 80)}")
        text = value.strip()
        if text.startswith("~"):
            raise ConfigError(f"{where} {quote(text, 80)}: give a path inside the server's data folder, not ~")
        root = os.path.realpath(self.data_dir)
        lexical = os.path.normpath(os.path.join(root, text))  # an absolute text replaces the root
        real = os.path.realpath(lexical) if _inside(lexical, root) else ""
        if not real or not _inside(real, root):
            raise ConfigError(
                f"{where} {quote(text, 80)} is outside the server's data folder: give a path inside it "
                f"(relative to it)"
            )
        return real

    def dataset(self, where: str, value: Any) -> str:
        """`resolve`, and the file is a regular file under `max_bytes`."""
        path = self.resolve(where, value)
        try:
            size = os.stat(path).st_size
        except OSError:
            raise ConfigError(f"{where} {quote(value, 80)} does not exist in the server's data folder") from None
        if size > self.max_bytes:
            raise ConfigError(
                f"{where} {quote(value, 80)} is {size:,} bytes; this server reads datasets up to {self.max_bytes:,}"
            )
        return path

    def config(self, config: Mapping[str, Any] | None, where: str = "in the config") -> dict[str, Any] | None:
        """A copy of `config` with every file it names checked (refused, or made absolute inside
        the allowed folder)."""
        if config is None:
            return None
        return dict(self._node(config, (), where))

    def changes(self, overrides: Mapping[str, Any] | Sequence[str] | None, where: str = "set") -> Any:
        """The body's `set` (a mapping or KEY=VALUE strings) with its keys checked and every file it
        names resolved, in the same form (list items rewritten as KEY=<JSON string>)."""
        if overrides is None:
            return None
        if isinstance(overrides, Mapping):
            out: dict[str, Any] = {}
            for key, value in overrides.items():
                parts = _set_key(key, where)
                out[key] = self._node(value, parts, f"in {where}")
            return out
        texts = []
        for text in overrides:
            if not isinstance(text, str) or "=" not in text:
                texts.append(text)  # the override parser's own error
                continue
            key, raw = text.split("=", 1)
            parts = _set_key(key, where)
            if canonical(parts[-1]) in FILE_KEYS | NAME_KEYS or _dotted(parts) == "model.name":
                value = parse_value(raw, source=f"{where} {quote(text, 60)}")
                checked = self._node(value, parts, f"in {where}")
                if checked != value:
                    text = f"{key}={json.dumps(checked)}"
            texts.append(text)
        return texts

    def vary(self, vary: Mapping[str, Any]) -> None:
        """ConfigError when a sweep varies a key that names a file (never served)."""
        for key, values in vary.items():
            parts = _set_key(key, "vary")
            if self._names_any(values, parts):
                raise ConfigError(f"vary {quote(key, 60)}: a sweep over files is not served over HTTP")

    def reads_files(self, config: Mapping[str, Any] | None, overrides: Any, dataset: str | None) -> bool:
        """Whether a request may make the server read a file (then it is computed off the event
        loop). Keys are not checked here (`config` and `changes` do that)."""
        if dataset is not None or self._names_any(config, ()):
            return True
        if isinstance(overrides, Mapping):
            return any(self._names_any(v, tuple(key_parts(str(k)))) for k, v in overrides.items())
        for text in overrides or ():
            if isinstance(text, str) and "=" in text:
                key, raw = text.split("=", 1)
                if self._names_any(raw.strip().strip("\"'"), key_parts(key)):
                    return True
        return False

    def _names_any(self, node: Any, parts: tuple[str, ...]) -> bool:
        try:
            self._node(node, parts, "", detect=True)
        except _NamesFile:
            return True
        return False

    # --- the walk -----------------------------------------------------------------------------

    def _node(self, node: Any, parts: tuple[str, ...], where: str, *, detect: bool = False) -> Any:
        if isinstance(node, Mapping):
            return {k: self._node(v, (*parts, str(k)), where, detect=detect) for k, v in node.items()}
        if isinstance(node, list):
            return [self._node(v, parts, where, detect=detect) for v in node]
        shown = f"{'.'.join(str(p).strip() for p in parts)} {where}"
        if self._names_file(parts, node):
            if detect:
                raise _NamesFile
            return self.dataset(shown, node) if canonical(parts[-1]) != "path" else self.resolve(shown, node)
        last = canonical(parts[-1]) if parts else ""
        if (last in NAME_KEYS or _dotted(parts[-2:]) == "model.name") and isinstance(node, str) and self._is_path(node):
            if detect:
                raise _NamesFile
            if self.data_dir is None:
                raise ConfigError(
                    f"{shown} is a path ({quote(node, 80)}): files on the server are not read over HTTP; "
                    f"give a catalog name (GET /v1/models), a Hugging Face id, or the model's dimensions"
                )
            return self.resolve(shown, node)
        return node

    @staticmethod
    def _names_file(parts: Sequence[str], value: Any) -> bool:
        return bool(parts) and canonical(parts[-1]) in FILE_KEYS and value is not None and value != ""

    def _is_path(self, name: str) -> bool:
        text = name.strip()
        if not text or "\x00" in text:
            return False
        if text.startswith(("/", "~", "\\")) or text.lower().endswith(".json") or ":" in text[:3]:
            return True
        if ".." in PurePosixPath(text.replace("\\", "/")).parts:
            return True
        if self.data_dir is not None and local_config_path(text, self.data_dir) is not None:
            return True
        return local_config_path(text) is not None


class _NamesFile(Exception):
    """A value names a file (`FileAccess._names_any`)."""


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)
