"""A short GPU check of the memory model (run it when a session has a CUDA device): this project's
training slices of the issue-28 shapes run for real, their torch.cuda.max_memory_allocated /
max_memory_reserved after warm-up beside the analytic model's allocated peak and the FakeTensor
oracle's, and, for the shape the two disagree on most, the CUDA caching allocator's snapshot at
its peak (torch.cuda.memory._record_memory_history) summarised by the frames that allocated the
most, written to $OUT (or ./memory_device_check/) for a closer look.

    python bench/memory_device_check.py            # ~2-4 minutes on an H100/H200
    python bench/memory_device_check.py --dry-run  # no GPU: prints what it would run

Exit status 0 always (it reports; it does not judge); the table goes to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
from collections import Counter
from pathlib import Path

from perfmodel.analytic.memory import estimate_memory
from perfmodel.codec import workload_from_row
from perfmodel.measure.configs import SliceConfig, row_fields
from perfmodel.measure.memory_oracle import oracle_memory

L7B = dict(kind="llama", hidden_size=4096, num_layers=32, num_heads=32, num_kv_heads=32, ffn_hidden_size=11008, vocab_size=32000)
L160M = dict(kind="llama", hidden_size=768, num_layers=12, num_heads=12, num_kv_heads=12, ffn_hidden_size=2048, vocab_size=32000)
SHAPES = (
    ("160M bf16 8x1024", SliceConfig(**L160M, seq_len=1024, micro_batch_size=8, precision="bf16", warmup_steps=3)),
    ("160M amp 8x1024", SliceConfig(**L160M, seq_len=1024, micro_batch_size=8, precision="amp_bf16", warmup_steps=3)),
    ("7B LoRA bf16 8x512", SliceConfig(**L7B, seq_len=512, micro_batch_size=8, precision="bf16", lora_r=16, warmup_steps=3)),
    ("7B LoRA bf16 4x2048", SliceConfig(**L7B, seq_len=2048, micro_batch_size=4, precision="bf16", lora_r=16, warmup_steps=3)),
    ("7B LoRA amp 4x2048", SliceConfig(**L7B, seq_len=2048, micro_batch_size=4, precision="amp_bf16", lora_r=16, warmup_steps=3)),
)  # fmt: skip


def predicted(config: SliceConfig) -> tuple[float, float]:
    """(analytic allocated GB, oracle allocated GB) of a slice, as perfmodel reads its row."""
    w = workload_from_row({**row_fields(config), "gpu": "H200"})
    return estimate_memory(w).allocated_gb, oracle_memory(w).peak_allocated_gb


def measure(config: SliceConfig, snapshot_to: Path | None) -> tuple[float, float]:
    """(max_memory_allocated GB, max_memory_reserved GB) over 3 steps after warm-up."""
    import torch  # the check's own runtime

    from perfmodel.measure.device import CudaDevice
    from perfmodel.measure.slices import prepare_slice

    device = CudaDevice(0)
    device.begin_memory()
    prepared = prepare_slice(config, device)
    for _ in range(config.warmup_steps):
        prepared.step()
    device.synchronize()
    torch.cuda.reset_peak_memory_stats()
    if snapshot_to is not None:
        torch.cuda.memory._record_memory_history(max_entries=200_000)
    for _ in range(3):
        prepared.step()
    device.synchronize()
    allocated, reserved = torch.cuda.max_memory_allocated() / 1e9, torch.cuda.max_memory_reserved() / 1e9
    if snapshot_to is not None:
        snap = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        snapshot_to.write_bytes(pickle.dumps(snap))
        _summarise(snap, snapshot_to.with_suffix(".top.json"))
    device.release()
    return allocated, reserved


def _summarise(snap: dict, out: Path) -> None:
    """Bytes still allocated at the end by the innermost perfmodel/torch frame that allocated them."""
    sites: Counter[str] = Counter()
    for segment in snap.get("segments", []):
        for block in segment.get("blocks", []):
            if block.get("state") != "active_allocated":
                continue
            frames = block.get("frames") or []
            where = next((f"{f['filename']}:{f['line']} {f['name']}" for f in frames if "perfmodel" in f["filename"]), "?")
            sites[where] += int(block.get("size", 0))
    out.write_text(json.dumps(sites.most_common(40), indent=1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="print the shapes and predictions only")
    args = parser.parse_args(argv)
    out = Path(os.environ.get("OUT", "memory_device_check"))
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name, config in SHAPES:
        analytic, oracle = predicted(config)
        row = {"shape": name, "analytic_gb": round(analytic, 2), "oracle_gb": round(oracle, 2)}
        if not args.dry_run:
            snapshot = out / f"{name.replace(' ', '_')}.pickle" if "4x2048" in name and "bf16" in name else None
            row["allocated_gb"], row["reserved_gb"] = (round(x, 2) for x in measure(config, snapshot))
            row["oracle_vs_measured_pct"] = round((oracle / row["allocated_gb"] - 1) * 100, 1)
        rows.append(row)
        print(json.dumps(row), flush=True)
    (out / "memory_device_check.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())



