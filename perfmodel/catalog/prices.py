"""What a GPU-hour costs: on-demand list prices per GPU-hour (prices.yaml, beside this module) and
the price a run is costed at.

    cost_usd = gpu_hours x usd_per_gpu_hour

The price is taken as known exactly (the user's own, or the catalog default), so the cost
interval is the GPU-hours interval scaled by it. Precedence: `--price` > `hardware.price_per_gpu_hour`
> the catalog default, which is the median of the accelerator's listed on-demand prices (rule and
sources in prices.yaml). An accelerator without a listed price gets no cost and a warning that
says how to give one.
"""

from __future__ import annotations

import dataclasses
import functools
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfmodel.catalog.hardware import resolve_gpu_key
from perfmodel.errors import CatalogError, ConfigError
from perfmodel.workload import Workload

PRICES_FILE = Path(__file__).resolve().parent / "prices.yaml"
DEFAULT_RULE = "median"
"""How the default price of an accelerator is chosen from its listed prices (see prices.yaml)."""


@dataclass(frozen=True, kw_only=True)
class ListedPrice:
    """One published on-demand list price of a cloud instance."""

    cloud: str
    """Provider: aws, gcp, azure, lambda, coreweave."""
    instance: str
    """Instance type (or GPU offering) as the provider names it."""
    gpus_per_instance: int
    """Accelerators in the instance."""
    usd_per_instance_hour: float
    """On-demand price of the whole instance, USD per hour."""
    usd_per_gpu_hour: float
    """usd_per_instance_hour / gpus_per_instance, USD per GPU-hour."""
    source: str
    """The provider's pricing page."""
    as_of: str
    """When the price is known to have held (year or year-month)."""
    region: str = ""
    """Region of the price, where the provider prices by region."""
    includes_host: bool = True
    """False for a GPU-only price whose VM is billed on top."""
    note: str = ""
    """Caveat, e.g. a later price change."""

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True, kw_only=True)
class PriceQuote:
    """The price per GPU-hour a cost is computed with, and where it comes from."""

    usd_per_gpu_hour: float
    """USD per accelerator-hour."""
    rule: str
    """'given' (--price or hardware.price_per_gpu_hour) or the default rule ('median')."""
    source: str
    """One line: who gave the price, or which list prices it is the median of."""
    listed: tuple[ListedPrice, ...] = ()
    """The list prices the default was taken from (empty for a given price)."""

    @property
    def listed_range_usd(self) -> tuple[float, float] | None:
        """(cheapest, dearest) listed USD per GPU-hour, or None."""
        if not self.listed:
            return None
        values = [p.usd_per_gpu_hour for p in self.listed]
        return min(values), max(values)

    def to_json(self) -> dict[str, Any]:
        rng = self.listed_range_usd
        return {
            "usd": self.usd_per_gpu_hour,
            "rule": self.rule,
            "source": self.source,
            "listed_min_usd": rng[0] if rng else None,
            "listed_max_usd": rng[1] if rng else None,
            "listed": [p.to_json() for p in self.listed],
        }


@functools.cache
def _price_table() -> dict[str, tuple[ListedPrice, ...]]:
    # PyYAML: only when YAML is read
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with PRICES_FILE.open(encoding="utf-8") as fh:
        data = yaml.load(fh, Loader=loader)  # noqa: S506 - a safe loader
    fields = {f.name for f in dataclasses.fields(ListedPrice)}
    table: dict[str, tuple[ListedPrice, ...]] = {}
    for gpu, entries in (data.get("gpus") or {}).items():
        rows = []
        for entry in entries:
            unknown = set(entry) - fields
            if unknown:
                raise CatalogError(
                    f"{PRICES_FILE.name}: {gpu}: unknown price keys {', '.join(sorted(unknown))}"
                )
            values: dict[str, Any] = {
                k: (str(v) if k in ("as_of", "instance") else v) for k, v in entry.items()
            }
            rows.append(ListedPrice(**values))
        table[str(gpu)] = tuple(rows)
    return table


def listed_prices(gpu: str) -> tuple[ListedPrice, ...]:
    """The list prices of an accelerator (catalog key or alias); empty when none is listed."""
    key = resolve_gpu_key(gpu) or gpu
    return _price_table().get(key, ())


def priced_gpus() -> list[str]:
    """Catalog keys of the accelerators with at least one listed price."""
    return [k for k, v in _price_table().items() if v]


def default_price(gpu: str) -> PriceQuote | None:
    """The median of the accelerator's listed on-demand prices per GPU-hour, or None."""
    listed = listed_prices(gpu)
    if not listed:
        return None
    value = float(statistics.median(p.usd_per_gpu_hour for p in listed))
    where = ", ".join(f"{p.cloud} {p.instance} ({p.as_of})" for p in listed)
    what = (
        "the listed on-demand price"
        if len(listed) == 1
        else f"median of {len(listed)} listed on-demand prices"
    )
    return PriceQuote(usd_per_gpu_hour=value, rule=DEFAULT_RULE, source=f"{what}: {where}", listed=listed)


def given_price(usd_per_gpu_hour: float, origin: str = "hardware.price_per_gpu_hour") -> PriceQuote:
    return PriceQuote(usd_per_gpu_hour=float(usd_per_gpu_hour), rule="given", source=f"given ({origin})")


def price_for(workload: Workload) -> PriceQuote | None:
    """The price a run of `workload` is costed at: its own hardware.price_per_gpu_hour, else the
    catalog default for its accelerator, else None."""
    given = workload.parallel.price_per_gpu_hour
    if given is not None:
        return given_price(given)
    return default_price(workload.gpu.name)


def no_price_warning(workload: Workload) -> str:
    return (
        f"no price known for {workload.gpu.name}: cost not computed; give one with --price USD_PER_GPU_HOUR "
        f"or hardware.price_per_gpu_hour in the config"
    )


def check_price(value: float | None, origin: str = "--price") -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ConfigError(f"{origin} must be a price in USD per GPU-hour >= 0, got {value!r}")
    return float(value)


def with_price(workload: Workload, usd_per_gpu_hour: float | None) -> Workload:
    """The workload priced at `usd_per_gpu_hour` (unchanged when None)."""
    if usd_per_gpu_hour is None:
        return workload
    parallel = dataclasses.replace(workload.parallel, price_per_gpu_hour=check_price(usd_per_gpu_hour))
    return dataclasses.replace(workload, parallel=parallel)
