"""The one way from a run request to a Workload: a config read once (`ConfigSource.of(request)`)
and resolved, as it is or with changes, by `ConfigSource.workload`. `resolve_workload(request)`
is the config as it is; sweep, advise and compare resolve the variants they predict.

Order (the precedence of `perfmodel.config`): the config (a Ludwig config translated to native
keys), then the request's `--set` overrides, then `--gpu` / `--num-gpus`, then a variant's native
changes; the data size (`--tokens`, `--rows` or `--dataset`) replaces the config's; `--price`
prices every variant unless a variant changes the price itself.

A change is a dotted key and a value. Native keys (`training.micro_batch_size`, `hardware.gpu`,
... every key the native config accepts) are applied the way `--set` applies them, after a Ludwig
config is translated; for a Ludwig config, any other key (`trainer.batch_size`,
`backend.trainer.num_workers`, `quantization.bits`, ...) is applied to the Ludwig YAML itself
before it is translated, exactly as if the user had edited the file.

When a change sets the GPU count but not `hardware.num_nodes`, the nodes follow the count: as many
servers as the accelerator's catalog `gpus_per_server` needs (say 16 GPUs of 8 per server = 2
nodes), not the config's node count.

Paths follow `perfmodel.request`'s rule: in options and changes, relative to the current
directory (made absolute here, so a config's folder never applies to them); in a config file,
relative to its folder.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfmodel.catalog import get_gpu
from perfmodel.catalog.prices import check_price, with_price
from perfmodel.config import hf_args
from perfmodel.config.build import build_workload
from perfmodel.config.from_text import parse_config_text
from perfmodel.config.ludwig import is_ludwig, translate_ludwig
from perfmodel.config.native import DataFlags, Draft, check_key
from perfmodel.config.overrides import parse_override, read_config_file, set_path
from perfmodel.errors import ConfigError, PerfModelError, clip, quote
from perfmodel.request import PATH_KEYS, ConfigInput, RunRequest, flag_path, names_a_file
from perfmodel.workload import Workload, field_problem

NODES_KEY = "hardware.num_nodes"
GPUS_KEY = "hardware.num_gpus"
PRICE_KEY = "hardware.price_per_gpu_hour"


@dataclass(frozen=True)
class Setting:
    """One native key set by an option: --set, --gpu, --num-gpus, or a variant's change."""

    parts: tuple[str, ...]
    value: Any
    origin: str
    """How the user gave it (for messages): "--set 'training.seq_len=1024'", "--gpu"."""


def is_native_key(dotted: str) -> bool:
    """True when `dotted` is a key of the native config (what `--set` accepts)."""
    try:
        check_key(tuple(dotted.split(".")), dotted)
    except ConfigError:
        return False
    return True


def set_dotted(config: dict[str, Any], dotted: str, value: Any) -> None:
    """config[a][b]... = value, creating sections. A string met on the way becomes {'type': it}
    (Ludwig's shorthand: `backend: ray` is `backend: {type: ray}`); None removes the key."""
    parts = dotted.split(".")
    node = config
    for part in parts[:-1]:
        child = node.get(part)
        if isinstance(child, str):
            child = {"type": child}
        elif not isinstance(child, dict):
            child = {}
        node[part] = child
        node = child
    if value is None:
        node.pop(parts[-1], None)
    else:
        node[parts[-1]] = copy.deepcopy(value)


def get_dotted(config: Mapping[str, Any], dotted: str) -> Any:
    node: Any = config
    for part in dotted.split("."):
        if isinstance(node, str) and part == "type":
            return node
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def data_flags(tokens: float | None, rows: int | None, dataset: str | os.PathLike[str] | None) -> DataFlags:
    """--tokens / --rows / --dataset, checked (at most one; in range)."""
    given = [
        name for name, v in (("--tokens", tokens), ("--rows", rows), ("--dataset", dataset)) if v is not None
    ]
    if len(given) > 1:
        raise ConfigError(f"give only one of --tokens, --rows, --dataset (got {', '.join(given)})")
    if tokens is not None:
        if isinstance(tokens, bool) or not isinstance(tokens, (int, float)) or not tokens > 0:
            raise ConfigError(f"--tokens must be > 0, got {quote(tokens)}")
        problem = field_problem("training.tokens", float(tokens))
        if problem:
            raise ConfigError(problem.replace("training.tokens", "--tokens", 1))
    if rows is not None:
        if isinstance(rows, bool) or not isinstance(rows, int) or rows <= 0:
            raise ConfigError(f"--rows must be a whole number > 0, got {quote(rows)}")
        problem = field_problem("training.samples", rows)
        if problem:
            raise ConfigError(problem.replace("training.samples", "--rows", 1))
    return DataFlags(
        tokens=tokens, rows=rows, dataset=Path(dataset).expanduser() if dataset is not None else None
    )


def option_value(parts: tuple[str, ...], value: Any) -> Any:
    """A value given as an option for native key `parts`: a relative path made absolute against
    the current directory (the one rule, `perfmodel.request`); anything else as it is."""
    if parts in PATH_KEYS and isinstance(value, str) and value:
        return str(flag_path(value))
    return value


def _read(config: ConfigInput) -> tuple[dict[str, Any], Path | None, str, str]:
    """(mapping, its folder, name for display, name for error messages) of a config input."""
    if config is None:
        return {}, None, "overrides", "the --set overrides"
    if isinstance(config, Mapping):
        return copy.deepcopy(dict(config)), None, "config", "the config"
    if isinstance(config, str) and not names_a_file(config):
        return parse_config_text(config), None, "config", "the config"
    if not isinstance(config, (str, os.PathLike)):
        raise ConfigError(f"config must be a mapping, YAML text or a path, got a {type(config).__name__}")
    path = Path(config)
    return read_config_file(path), path.expanduser().resolve().parent, path.name, clip(str(path))


@dataclass(frozen=True)
class ConfigSource:
    """A native or Ludwig config read once, with the options that apply to every variant."""

    raw: dict[str, Any]
    """The config mapping as read."""
    base_dir: Path | None = None
    """Folder of the config file (relative paths in it are relative to this)."""
    label: str = "config"
    """Name for display (the file name)."""
    origin: str = "the config"
    """Name in error messages ("N problems in ORIGIN")."""
    settings: tuple[Setting, ...] = ()
    """--set, --gpu and --num-gpus, in the order they apply."""
    data: DataFlags = field(default_factory=DataFlags)
    """--tokens / --rows / --dataset for every variant."""
    price_per_gpu_hour: float | None = None
    """--price (USD per GPU-hour) for every variant."""
    _base: list[Workload] = field(default_factory=list, compare=False, repr=False)

    @classmethod
    def of(cls, request: RunRequest) -> ConfigSource:
        """Read the request's config once and check its options (unknown keys, data size, price)."""
        data = data_flags(request.tokens, request.rows, request.dataset)
        settings = []
        for text in request.overrides:
            parts, value = parse_override(text)
            where = f"--set {quote(text)}"
            check_key(parts, where)
            settings.append(Setting(parts, option_value(parts, value), where))
        price = check_price(request.price_per_gpu_hour)
        raw, base_dir, label, origin = _read(request.config)
        if request.gpu is not None:
            settings.append(Setting(("hardware", "gpu"), request.gpu, "--gpu"))
        if request.num_gpus is not None:
            settings.append(Setting(("hardware", "num_gpus"), request.num_gpus, "--num-gpus"))
        return cls(
            raw=raw,
            base_dir=base_dir,
            label=label,
            origin=origin,
            settings=tuple(settings),
            data=data,
            price_per_gpu_hour=price,
        )

    @classmethod
    def load(cls, config: ConfigInput, **options: Any) -> ConfigSource:
        """`ConfigSource.of(RunRequest.of(config, **options))`."""
        return cls.of(RunRequest.of(config, **options))

    @property
    def dialect(self) -> str:
        """'ludwig' or 'native'."""
        return "ludwig" if is_ludwig(self.raw) else "native"

    def check_change_key(self, dotted: str) -> None:
        """ConfigError unless `dotted` can be changed in this config."""
        if is_native_key(dotted):
            return
        if self.dialect == "native":
            check_key(tuple(dotted.split(".")), dotted)  # raises, naming the allowed keys
        top = dotted.split(".")[0]
        if not top or top in ("model", "hardware", "framework"):
            raise ConfigError(f"{dotted} is neither a native key nor a Ludwig key")

    def base(self) -> Workload:
        """The workload without changes (resolved once)."""
        if not self._base:
            self._base.append(self.workload({}))
        return self._base[0]

    def workload(self, changes: Mapping[str, Any]) -> Workload:
        """Resolve the config with `changes` (dotted key -> value) applied."""
        native_changes = {k: v for k, v in changes.items() if is_native_key(k)}
        raw = copy.deepcopy(self.raw)
        for key, value in changes.items():
            if key not in native_changes:
                self.check_change_key(key)
                set_dotted(raw, key, value)
        draft, build_data = self._draft(raw)
        settings = [*self.settings]
        for key, value in native_changes.items():
            parts = tuple(key.split("."))
            settings.append(Setting(parts, option_value(parts, value), f"{key}={value}"))
        for s in settings:
            set_path(draft.native, s.parts, s.value, origin=s.origin)
            if s.value is None:
                draft.soft.pop(".".join(s.parts), None)
            if (
                s.parts[0] == "training" and len(s.parts) == 2
            ):  # the option replaces the file's other spelling
                for alternate in hf_args.replaced_by(s.parts[1]):
                    draft.native.get("training", {}).pop(alternate, None)
        if NODES_KEY not in changes and self._nodes_follow(native_changes, draft.native.get("hardware", {})):
            draft.native.get("hardware", {}).pop("num_nodes", None)
            draft.soft.pop(NODES_KEY, None)
        w = build_workload(draft, data=build_data, base_dir=self.base_dir)
        if PRICE_KEY not in native_changes:  # a swept price wins over --price
            w = with_price(w, self.price_per_gpu_hour)
        return w

    def _nodes_follow(self, changes: Mapping[str, Any], hardware: Mapping[str, Any]) -> bool:
        """The config's num_nodes gives way to the derived one (the one node rule, GPUSpec.servers_for):
        the change sets another GPU count, or another accelerator whose servers cannot hold the
        config's GPUs per node."""
        if GPUS_KEY in changes:
            base = self._base_or_none()
            if base is None or changes[GPUS_KEY] != base.parallel.num_gpus:
                return True
        if "hardware.gpu" in changes and "num_nodes" in hardware:
            try:
                get_gpu(str(changes["hardware.gpu"])).check_nodes(
                    int(hardware.get("num_gpus", 1)), int(hardware["num_nodes"])
                )
            except (PerfModelError, TypeError, ValueError):
                return True
        return False

    def _draft(self, raw: dict[str, Any]) -> tuple[Draft, DataFlags]:
        """The native Draft of `raw` (a Ludwig config translated), and the data flags left for the
        build (a Ludwig translation consumes them)."""
        if is_ludwig(raw):
            try:
                draft, build_data = translate_ludwig(raw, data=self.data, base_dir=self.base_dir), DataFlags()
            except PerfModelError:
                raise
            except (ValueError, TypeError, KeyError, AttributeError, IndexError, OverflowError) as exc:
                # A value of the wrong kind somewhere in a Ludwig section (e.g. a list where a number goes).
                raise ConfigError(
                    f"{self.origin}: cannot read the Ludwig config: {clip(str(exc) or type(exc).__name__)}"
                ) from exc
        else:
            draft, build_data = Draft(native=raw), self.data
        draft.source, draft.base_dir = self.origin, self.base_dir
        return draft, build_data

    def _base_or_none(self) -> Workload | None:
        try:
            return self.base()
        except PerfModelError:
            return None


def resolve_workload(request: RunRequest) -> Workload:
    """The Workload of a run request: its config with its options applied (the module's order)."""
    return ConfigSource.of(request).workload({})


def named_paths(request: RunRequest, cwd: Path | None = None) -> list[tuple[str, Path]]:
    """(where, absolute path) of every file a request names outside its config: the config file
    itself, `dataset`, and path keys in its overrides (relative ones against `cwd`, default the
    current directory). Paths written inside a config are the config's to resolve."""
    out: list[tuple[str, Path]] = []
    config = request.config
    if isinstance(config, os.PathLike) or (isinstance(config, str) and names_a_file(config)):
        out.append(("config", flag_path(config, cwd)))
    if request.dataset is not None:
        out.append(("dataset", flag_path(request.dataset, cwd)))
    for text in request.overrides:
        parts, value = parse_override(text)
        if parts in PATH_KEYS and isinstance(value, str) and value:
            out.append((".".join(parts), flag_path(value, cwd)))
    return out

