"""A config read once and resolved many times with changes: the variants that sweep, advise and
compare predict.

A change is a dotted key and a value. Native keys (`training.micro_batch_size`, `hardware.gpu`,
`hardware.num_gpus`, ... every key the native config accepts) are applied the way `--set` applies
them, on top of the file, after a Ludwig config is translated; for a Ludwig config, any other key
(`trainer.batch_size`, `backend.trainer.num_workers`, `quantization.bits`, ...) is applied to the
Ludwig YAML itself before it is translated, exactly as if the user had edited the file.

When a change sets the GPU count but not `hardware.num_nodes`, the nodes follow the count: as many
servers as the accelerator's catalog `gpus_per_server` needs (say 16 GPUs of 8 per server = 2
nodes), not the config's node count.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfmodel.errors import ConfigError
from perfmodel.workload import Workload

NODES_KEY = "hardware.num_nodes"
GPUS_KEY = "hardware.num_gpus"
PRICE_KEY = "hardware.price_per_gpu_hour"


def is_native_key(dotted: str) -> bool:
    """True when `dotted` is a key of the native config (what `--set` accepts)."""
    from perfmodel.config.native import check_key

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


@dataclass(frozen=True)
class ConfigSource:
    """A native or Ludwig config with the flags that apply to every variant."""

    raw: dict[str, Any]
    """The config mapping as read."""
    base_dir: Path | None = None
    """Folder of the config file (relative paths in it are relative to this)."""
    label: str = "config"
    """Name for display (the file name)."""
    overrides: tuple[str, ...] = ()
    """`--set key=value` overrides applied to every variant (native keys)."""
    tokens: float | None = None
    """--tokens for every variant."""
    rows: int | None = None
    """--rows for every variant."""
    dataset: Path | None = None
    """--dataset for every variant."""
    price_per_gpu_hour: float | None = None
    """--price (USD per GPU-hour) for every variant."""
    _base: list[Workload] = field(default_factory=list, compare=False, repr=False)

    @classmethod
    def load(
        cls,
        config: str | Path | Mapping[str, Any] | None,
        *,
        overrides: Sequence[str] = (),
        gpu: str | None = None,
        num_gpus: int | None = None,
        tokens: float | None = None,
        rows: int | None = None,
        dataset: str | Path | None = None,
        price_per_gpu_hour: float | None = None,
    ) -> ConfigSource:
        """Read `config` (a YAML file, a mapping, or None for overrides only) once."""
        from perfmodel.config.native import check_key
        from perfmodel.config.overrides import parse_override, read_config_file
        from perfmodel.decide.cost import check_price

        if config is None:
            raw: dict[str, Any] = {}
            base_dir, label = None, "overrides"
        elif isinstance(config, Mapping):
            raw, base_dir, label = copy.deepcopy(dict(config)), None, "config"
        else:
            raw = read_config_file(config)
            base_dir, label = Path(config).expanduser().resolve().parent, Path(config).name
        extra = list(overrides)
        for text in extra:
            check_key(parse_override(text)[0], f"--set {text}")
        if gpu is not None:
            extra.append(f"hardware.gpu={gpu}")
        if num_gpus is not None:
            extra.append(f"hardware.num_gpus={num_gpus}")
        return cls(
            raw=raw,
            base_dir=base_dir,
            label=label,
            overrides=tuple(extra),
            tokens=tokens,
            rows=rows,
            dataset=Path(dataset).expanduser() if dataset is not None else None,
            price_per_gpu_hour=check_price(price_per_gpu_hour),
        )

    @property
    def dialect(self) -> str:
        """'ludwig' or 'native'."""
        from perfmodel.config import detect_format

        return detect_format(self.raw)

    def check_change_key(self, dotted: str) -> None:
        """ConfigError unless `dotted` can be changed in this config."""
        if is_native_key(dotted):
            return
        if self.dialect == "native":
            from perfmodel.config.native import check_key

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
        from perfmodel.config.build import build_workload
        from perfmodel.config.ludwig import is_ludwig, translate_ludwig
        from perfmodel.config.native import DataFlags, Draft
        from perfmodel.config.overrides import parse_override, set_path
        from perfmodel.decide.cost import with_price

        native_changes = {k: v for k, v in changes.items() if is_native_key(k)}
        raw = copy.deepcopy(self.raw)
        for key, value in changes.items():
            if key not in native_changes:
                self.check_change_key(key)
                set_dotted(raw, key, value)
        data = DataFlags(tokens=self.tokens, rows=self.rows, dataset=self.dataset)
        if is_ludwig(raw):
            draft, build_data = translate_ludwig(raw, data=data, base_dir=self.base_dir), DataFlags()
        else:
            draft, build_data = Draft(native=raw), data
        sets = [(parse_override(text), text) for text in self.overrides]
        sets += [((tuple(k.split(".")), v), f"{k}={v}") for k, v in native_changes.items()]
        for (parts, value), origin in sets:
            set_path(draft.native, parts, value, origin=origin)
            if value is None:
                draft.soft.pop(".".join(parts), None)
        if NODES_KEY not in changes and self._nodes_follow(native_changes, draft.native.get("hardware", {})):
            draft.native.get("hardware", {}).pop("num_nodes", None)
            draft.soft.pop(NODES_KEY, None)
        w = build_workload(draft, data=build_data, base_dir=self.base_dir)
        if PRICE_KEY not in native_changes:  # a swept price wins over --price
            w = with_price(w, self.price_per_gpu_hour)
        return w

    def _nodes_follow(self, changes: Mapping[str, Any], hardware: Mapping[str, Any]) -> bool:
        """The config's num_nodes gives way to the derived one: the change sets another GPU count,
        or another accelerator whose servers cannot hold the config's GPUs per node."""
        from perfmodel.catalog import get_gpu
        from perfmodel.errors import PerfModelError

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

    def _base_or_none(self) -> Workload | None:
        from perfmodel.errors import PerfModelError

        try:
            return self.base()
        except PerfModelError:
            return None
