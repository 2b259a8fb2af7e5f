"""Time a cold 200-point `perfmodel sweep` of the bundled example (a fresh subprocess each time:
interpreter start, imports, one model load, 200 config resolutions and predictions, JSON out):
micro-batch 1..25 x 8 accelerators.

Target: < 5 s. Prints one JSON line; skips (exit 0) if the example or the command is absent.

    python bench/bench_sweep.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "llama2-7b-lora.yaml"
TARGET_S = 5.0
MICRO_BATCHES = ",".join(str(b) for b in range(1, 26))
GPUS = "A100-80GB,A100-40GB,H100-SXM,H100-PCIe,L40S,A10G,L4,RTX-A6000"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if not EXAMPLE.is_file():
        print(json.dumps({"bench": "sweep", "skipped": f"{EXAMPLE} not found", "target_s": TARGET_S}))
        return 0
    cmd = [
        sys.executable,
        "-m",
        "perfmodel",
        "sweep",
        "--config",
        str(EXAMPLE),
        "--vary",
        f"training.micro_batch_size={MICRO_BATCHES}",
        "--vary",
        f"hardware.gpu={GPUS}",
        "--json",
    ]
    times, points, model_kind = [], 0, None
    for _ in range(max(args.repeats, 1)):
        start = time.perf_counter()
        res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        times.append(time.perf_counter() - start)
        if res.returncode != 0:
            reason = (res.stderr.strip().splitlines() or ["no output"])[-1]
            print(
                json.dumps(
                    {"bench": "sweep", "skipped": f"perfmodel sweep failed: {reason}", "target_s": TARGET_S}
                )
            )
            return 0
        data = json.loads(res.stdout)
        points = len(data["points"])
        model_kind = data["model"]["kind"]
    print(
        json.dumps(
            {
                "bench": "sweep",
                "points": points,
                "seconds": round(times[0], 3),
                "median_seconds": round(statistics.median(times), 3),
                "target_s": TARGET_S,
                "ok": statistics.median(times) < TARGET_S,
                "model_kind": model_kind,
                "repeats": len(times),
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
