"""Time and memory of `perfmodel monitor` on long runs (a fresh subprocess each: interpreter
start, imports, streaming the file, replaying every interval through the monitor core, JSON out):

- a CSV of 10 million steps (`step,step_time_s`, 169 MB): 5 slow warm-up steps, then
  0.1 s steps with 5% log-normal noise and a 1.3x level shift at step 6 million, plus a row with a
  NaN time and one with step 10^23 (both skipped with a counted note); with `--config` (the
  bundled example, so the prediction is the prior that every due report checks);
- a Hugging Face trainer_state.json of 40,000 log entries (perfmodel_elapsed_s every step).

Targets: the CSV in < 30 s and < 500 MB peak resident memory; the trainer state in < 5 s.
Prints one JSON line per case (wall s and peak RSS MB of each repeat; the median is judged) and
exits 1 when a target is missed.

    python bench/bench_monitor.py [--repeats 2] [--steps 10000000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "llama2-7b-lora.yaml"
CSV_TARGET_S, CSV_TARGET_MB = 30.0, 500.0
STATE_TARGET_S = 5.0
STATE_ENTRIES = 40_000


def write_steps_csv(path: Path, steps: int, seed: int = 0) -> None:
    """The CSV of the module docstring, written in chunks."""
    rng = np.random.default_rng(seed)
    with path.open("w") as fh:
        fh.write("step,step_time_s\n")
        for lo in range(0, steps, 1_000_000):
            idx = np.arange(lo + 1, min(steps, lo + 1_000_000) + 1)
            times = 0.1 * rng.lognormal(0.0, 0.05, len(idx)) * np.where(idx > 6_000_000, 1.3, 1.0)
            times[idx <= 5] = 2.0
            lines = [f"{s},{t:.6f}" for s, t in zip(idx.tolist(), times.tolist(), strict=True)]
            if lo == 0:
                lines[100] = "101,nan"  # skipped, counted; the rows after it still count
                lines[200] = "100000000000000000000000,0.1"  # an absurd step number: skipped, counted
            fh.write("\n".join(lines) + "\n")


def write_trainer_state(path: Path, entries: int) -> None:
    history, t = [], 0.0
    for step in range(1, entries + 1):
        t += 2.0 if step <= 3 else 0.25
        history.append({"loss": 1.0, "learning_rate": 1e-4, "step": step, "perfmodel_elapsed_s": round(t, 6)})
    path.write_text(json.dumps({"global_step": entries, "max_steps": 2 * entries, "log_history": history}))


def run(cmd: list[str]) -> tuple[float, float, dict]:
    """(wall s, peak RSS MB, the JSON printed) of one run of `cmd`, measured by wait4 on the child."""
    start = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd[3:])} failed: {(err.read().strip().splitlines() or ['no output'])[-1]}")
        return wall, usage.ru_maxrss / 1024, json.loads(out.read())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--steps", type=int, default=10_000_000)
    parser.add_argument("--write", nargs=2, metavar=("FOLDER", "STEPS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write:  # in a child process, so this one stays small (a fork's RSS counts in its child's peak)
        write_steps_csv(Path(args.write[0]) / "steps.csv", int(args.write[1]))
        write_trainer_state(Path(args.write[0]) / "trainer_state.json", STATE_ENTRIES)
        return 0
    ok = True
    with tempfile.TemporaryDirectory(prefix="perfmodel-bench-monitor-") as tmp:
        subprocess.run([sys.executable, __file__, "--write", tmp, str(args.steps)], check=True)
        csv, state = Path(tmp) / "steps.csv", Path(tmp) / "trainer_state.json"
        monitor = [sys.executable, "-m", "perfmodel", "monitor"]
        cases = [
            ("monitor_csv", [*monitor, str(csv), "--config", str(EXAMPLE), "--json"], CSV_TARGET_S, CSV_TARGET_MB),
            ("monitor_trainer_state", [*monitor, str(state), "--json"], STATE_TARGET_S, None),
        ]
        for name, cmd, target_s, target_mb in cases:
            walls, rss = [], []
            for _ in range(max(args.repeats, 1)):
                wall, mb, data = run(cmd)
                walls.append(round(wall, 2))
                rss.append(round(mb, 1))
            wall_s, peak_mb = statistics.median(walls), statistics.median(rss)
            met = wall_s < target_s and (target_mb is None or peak_mb < target_mb)
            ok &= met
            size = csv.stat().st_size if name == "monitor_csv" else state.stat().st_size
            print(
                json.dumps(
                    {
                        "bench": name,
                        "file_mb": round(size / 1e6, 1),
                        "global_step": data["global_step"],
                        "stable_from_step": data["stable_from_step"],
                        "notes": data["notes"],
                        "wall_s": walls,
                        "peak_rss_mb": rss,
                        "target_s": target_s,
                        "target_mb": target_mb,
                        "met": met,
                        "load_1min": round(os.getloadavg()[0], 2),
                    }
                ),
                flush=True,
            )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
