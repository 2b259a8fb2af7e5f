"""A Markdown summary of what the collectors' folder (datasets/raw/) holds: hosts, shards, rows by
hardware, family and status (`perfmodel collect --summary`), for datasets/README.md."""

from __future__ import annotations

import json
from pathlib import Path

from perfmodel import paths
from perfmodel.measure.storage import list_shards, parse_shard_name, read_rows


def _table(header: list[str], rows: list[list[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def summarize(out_dir: str | Path | None = None) -> str:
    """The summary of `out_dir` (default perfmodel.paths.raw_dir()). DataError on a damaged shard."""
    out = Path(out_dir) if out_dir is not None else paths.raw_dir()
    parts: list[str] = []
    hosts = []
    for path in sorted(out.glob("fingerprint__*.json")):
        fp = json.loads(path.read_text())
        device = f"{fp['gpu_count']} x {fp['gpu_name']}" if fp["kind"] == "cuda" else "none (CPU)"
        hosts.append(
            [
                fp["hardware_id"],
                device,
                f"{fp['cpu_model']}, {fp['cpu_cores']} cores",
                f"{fp['host_memory_gb']} GB",
                fp["torch_version"],
                fp.get("driver_version") or "-",
            ]
        )
    if hosts:
        parts.append(
            "Hosts:\n\n" + _table(["hardware_id", "accelerator", "CPU", "RAM", "torch", "driver"], hosts)
        )
    shard_rows = []
    for path in [*list_shards(out, microbench=True), *list_shards(out)]:
        info = parse_shard_name(path) or {}
        shard_rows.append([info.get("prefix"), info.get("hw"), info.get("date"), path.name])
    if shard_rows:
        by_key: dict[tuple[object, ...], int] = {}
        for prefix, hw, date, _ in shard_rows:
            by_key[(prefix, hw, date)] = by_key.get((prefix, hw, date), 0) + 1
        parts.append(
            "Shards (profile or microbench, host, UTC date):\n\n"
            + _table(
                ["profile", "hardware_id", "date", "shards"], [[*k, v] for k, v in sorted(by_key.items())]
            )
        )
    rows = read_rows(out)
    if len(rows):
        grouped = rows.groupby(
            ["source", "hardware_id", "gpu", "model_family", "status"], dropna=False
        ).size()
        parts.append(
            f"Training-slice rows: {len(rows)}\n\n"
            + _table(
                ["source", "hardware_id", "gpu", "model_family", "status", "rows"],
                [[*k, v] for k, v in grouped.items()],
            )
        )
        when = rows["collected_at"].dropna()
        if len(when):
            parts.append(f"Collected between {when.min()} and {when.max()} (UTC).")
    mb = read_rows(out, microbench=True)
    if len(mb):
        grouped = mb.groupby(["hardware_id", "bench", "status"], dropna=False).size()
        parts.append(
            f"Micro-benchmark rows: {len(mb)}\n\n"
            + _table(["hardware_id", "bench", "status", "rows"], [[*k, v] for k, v in grouped.items()])
        )
    return "\n\n".join(parts) if parts else f"No shards in {out}."
