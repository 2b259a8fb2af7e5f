"""One run request: a config and the options every front door takes, defined once.

    request = RunRequest.of("examples/llama2-7b-lora.yaml", gpu="H100-SXM", set={"training.seq_len": 1024})
    workload = perfmodel.config.resolve_workload(request)     # the one way to a Workload

`perfmodel predict / sweep / compare / advise / probe` build their flags from `OPTIONS`
(`perfmodel.cli._common.run_options`), the HTTP API's request bodies name the same fields
(`perfmodel.service.requests`, checked against `OPTIONS` by a test), and `perfmodel.predict`,
`sweep`, `compare` and `advise` take the same names as keywords. All of them hand a `RunRequest`
to `perfmodel.config.resolve_workload` (through `perfmodel.config.source.ConfigSource` when a
config is resolved several times with changes), so the same request gives the same Workload
wherever it comes from.

Paths, one rule everywhere: a path given as an option (`--dataset`, or `training.dataset` /
`model.path` in `--set`, `--vary`, `--variant`, `set=`) is relative to the current directory; a
path written in a config file is relative to that file's folder; a config given as a mapping or
YAML text has no folder, so its paths are relative to the current directory too.
`perfmodel.config.source.named_paths(request)` lists every file a request names outside its
config, made absolute by that rule, for callers that must check what would be read.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfmodel.errors import ConfigError, quote

ConfigInput = Mapping[str, Any] | str | os.PathLike[str] | None
"""A config: a mapping (a native or Ludwig config already read), YAML text, a path (`str` or
`os.PathLike`), or None (the run described by overrides only). A `str` is a path when it has no
line break and names an existing file or ends in .yaml, .yml or .json; any other `str` is YAML."""
Changes = Mapping[str, Any] | Sequence[str] | None
"""`set=`: {"training.micro_batch_size": 16} or ["training.micro_batch_size=16"]."""

MEMORY_METHODS = ("analytic", "exact")
"""`--memory`: the analytic memory model, or the FakeTensor oracle's count (perfmodel.measure.memory_exact)."""
PATH_KEYS: tuple[tuple[str, ...], ...] = (("training", "dataset"), ("model", "path"))
"""Native keys whose value is a file (relative: see the module docstring)."""


@dataclass(frozen=True, kw_only=True)
class Option:
    """One request option: its field, its command-line flag and its help, the same everywhere."""

    name: str
    """The `RunRequest` field (and the Python keyword)."""
    flags: tuple[str, ...]
    """Command-line spellings, e.g. ('--config', '-c')."""
    help: str
    """One line of help (CLI and HTTP API alike)."""
    kind: Any
    """What the command line parses it as: str, int, float, bool (a flag), Path, or list (repeatable)."""
    default: Any = None
    json_name: str = ""
    """Its name in an HTTP request body, where that differs from `name`."""
    choices: tuple[str, ...] = ()
    """The values it takes (a `str` option; empty: any)."""
    shared: bool = True
    """Whether every command with run options takes it; False: only those that ask for it
    (`perfmodel.cli._common.run_options(include=...)`), and no HTTP request body."""

    @property
    def key(self) -> str:
        """The name a request body uses."""
        return self.json_name or self.name


OPTIONS: tuple[Option, ...] = (
    Option(name="config", flags=("--config", "-c"), kind=Path,
           help="Native perfmodel YAML or a Ludwig config."),
    Option(name="gpu", flags=("--gpu",), kind=str,
           help="Accelerator name (`perfmodel gpus`); overrides the config's."),
    Option(name="num_gpus", flags=("--num-gpus",), kind=int, help="Number of GPUs; overrides the config's."),
    Option(name="tokens", flags=("--tokens",), kind=float, help="Training tokens (all epochs)."),
    Option(name="rows", flags=("--rows",), kind=int,
           help="Training samples (dataset rows before a Ludwig config's split)."),
    Option(name="dataset", flags=("--dataset",), kind=Path,
           help="CSV, parquet or JSONL file to size the data from (relative to the current directory)."),
    Option(name="overrides", flags=("--set",), kind=list, default=(), json_name="set",
           help="Change a native key: --set training.micro_batch_size=16 (repeatable; null unsets a key; "
           "a relative path is relative to the current directory)."),
    Option(name="price_per_gpu_hour", flags=("--price",), kind=float,
           help="USD per GPU-hour (over hardware.price_per_gpu_hour and the catalog's list price)."),
    Option(name="confidence", flags=("--confidence",), kind=float, default=0.9,
           help="Interval confidence level, in [0.5, 1)."),
    Option(name="analytic", flags=("--analytic",), kind=bool, default=False,
           help="Ignore the learned model: the analytic bound only."),
    Option(name="no_calibration", flags=("--no-calibration",), kind=bool, default=False,
           help="Ignore calibrations of the hardware (`perfmodel calibrate`): the uncalibrated prediction."),
    Option(name="model_dir", flags=("--model-dir",), kind=Path,
           help="Learned model folder (default: the shipped models/)."),
    Option(name="model_uri", flags=("--model-uri",), kind=str,
           help="A registered model instead of --model-dir: models:/perfmodel-throughput@champion or "
           "models:/NAME/VERSION (registry: $MLFLOW_TRACKING_URI; each version is downloaded once into "
           "~/.cache/perfmodel/registry)."),
    Option(name="memory", flags=("--memory",), kind=str, default="analytic", choices=MEMORY_METHODS, shared=False,
           help="Peak memory from the analytic model, or exact: counted by running one training step under "
           "PyTorch's FakeTensorMode on the CPU (seconds; needs torch; one GPU, eager PyTorch)."),
)  # fmt: skip
"""Every option of a run request, in the order `--help` lists them."""
BY_NAME: dict[str, Option] = {o.name: o for o in OPTIONS}
PREDICTOR_OPTIONS = ("confidence", "analytic", "no_calibration", "model_dir", "model_uri")
"""Options of the predictor, not of the workload."""


@dataclass(frozen=True, kw_only=True)
class RunRequest:
    """A config and the options of one run (`OPTIONS` has each field's help)."""

    config: ConfigInput = None
    """The config: a mapping, YAML text, a path, or None (overrides only)."""
    gpu: str | None = None
    """Accelerator, over the config's (applied after `overrides`)."""
    num_gpus: int | None = None
    """GPU count, over the config's (applied after `overrides`)."""
    tokens: float | None = None
    """Training tokens, all epochs (at most one of tokens, rows, dataset)."""
    rows: int | None = None
    """Dataset rows, before a Ludwig config's split."""
    dataset: str | os.PathLike[str] | None = None
    """A CSV / Parquet / JSONL file to size the data from."""
    overrides: tuple[str, ...] = ()
    """Native-key changes as `--set` takes them: 'training.micro_batch_size=16' (YAML scalars)."""
    price_per_gpu_hour: float | None = None
    """USD per GPU-hour, over the config's and the catalog's."""
    confidence: float = 0.9
    """Interval confidence level."""
    analytic: bool = False
    """The analytic model only (no learned correction)."""
    no_calibration: bool = False
    """Ignore calibrations of the hardware (perfmodel.calibration)."""
    model_dir: str | os.PathLike[str] | None = None
    """Learned model folder (None: the shipped models/)."""
    model_uri: str | None = None
    """A registered model (models:/NAME@ALIAS or models:/NAME/VERSION) instead of `model_dir`."""
    memory: str = "analytic"
    """Peak memory from the analytic model or 'exact' (the FakeTensor oracle; `predict` only)."""

    @classmethod
    def of(cls, config: ConfigInput | RunRequest = None, /, **options: Any) -> RunRequest:
        """A request from a config and keyword options: `RunRequest` fields; `set=` (a mapping or
        KEY=VALUE strings) or `overrides=` (KEY=VALUE strings); `use_learned=False` for
        `analytic=True`; `use_calibration=False` for `no_calibration=True`; any other keyword is a native-key change written `training__seq_len=2048`
        or `**{"training.seq_len": 2048}`, as `set=` would give it. A request as `config` is
        copied with the options applied (its overrides first)."""
        base = config if isinstance(config, RunRequest) else cls(config=config)
        rest = dict(options)
        fields = {f.name for f in dataclasses.fields(cls)} - {"config", "overrides"}
        given = {k: rest.pop(k) for k in list(rest) if k in fields}
        if "use_learned" in rest:
            given["analytic"] = not rest.pop("use_learned")
        if "use_calibration" in rest:
            given["no_calibration"] = not rest.pop("use_calibration")
        sets = rest.pop("set", None)
        listed = rest.pop("overrides", None)
        if sets is not None and listed is not None:
            raise ConfigError("give set= or overrides=, not both")
        changes = overrides_from(sets if sets is not None else listed, rest)
        if "model_dir" in given and "model_uri" in given and given["model_dir"] and given["model_uri"]:
            raise ConfigError("give model_dir or model_uri, not both")
        return dataclasses.replace(base, **given, overrides=(*base.overrides, *changes))

    def replace(self, **changes: Any) -> RunRequest:
        """A copy with `changes` (field names) applied."""
        return dataclasses.replace(self, **changes)

    @property
    def use_learned(self) -> bool:
        return not self.analytic


def flag_path(value: str | os.PathLike[str], cwd: Path | None = None) -> Path:
    """A path given as an option, made absolute: relative to `cwd` (default: the current directory)."""
    path = Path(value).expanduser()
    return path if path.is_absolute() else (cwd or Path.cwd()) / path


_PATH_SUFFIXES = (".yaml", ".yml", ".json")


def names_a_file(text: str) -> bool:
    """Whether a config `str` is a path (no line break, and a .yaml/.yml/.json name or an existing
    file) rather than YAML text."""
    if "\n" in text:
        return False
    if text.strip().lower().endswith(_PATH_SUFFIXES):
        return True
    try:
        return Path(text).expanduser().is_file()
    except (OSError, ValueError):  # too long for a path, or a NUL byte
        return False


def override_value(key: str, value: Any) -> str:
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


def overrides_from(set: Changes = None, changes: Mapping[str, Any] | None = None) -> list[str]:
    """`--set` strings from `set` (a mapping or KEY=VALUE strings) and dotted-keyword `changes`
    (`training__micro_batch_size` or "training.micro_batch_size"); a key given twice is an error."""
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
        out.append(f"{key}={override_value(key, value)}")

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
    return out
