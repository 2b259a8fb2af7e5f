"""Time a cold `perfmodel predict --config examples/llama2-7b-lora.yaml --json` (a fresh
subprocess each time: interpreter start, imports, model load, prediction).

Target: < 1.5 s cold. Prints one JSON line; skips (exit 0) if the example or the command is absent.

    python bench/bench_predict.py [--repeats 3]
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
TARGET_S = 1.5


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if not EXAMPLE.is_file():
        print(json.dumps({"bench": "predict", "skipped": f"{EXAMPLE} not found", "target_s": TARGET_S}))
        return 0
    cmd = [sys.executable, "-m", "perfmodel", "predict", "--config", str(EXAMPLE), "--json"]
    times, model_kind = [], None
    for _ in range(max(args.repeats, 1)):
        start = time.perf_counter()
        res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        times.append(time.perf_counter() - start)
        if res.returncode != 0:
            reason = (res.stderr.strip().splitlines() or ["no output"])[-1]
            print(
                json.dumps(
                    {
                        "bench": "predict",
                        "skipped": f"perfmodel predict failed: {reason}",
                        "target_s": TARGET_S,
                    }
                )
            )
            return 0
        try:
            model_kind = json.loads(res.stdout).get("model", {}).get("kind")
        except json.JSONDecodeError:
            model_kind = None
    print(
        json.dumps(
            {
                "bench": "predict",
                "seconds": round(times[0], 3),
                "median_seconds": round(statistics.median(times), 3),
                "target_s": TARGET_S,
                "ok": times[0] < TARGET_S,
                "model_kind": model_kind,
                "repeats": len(times),
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
