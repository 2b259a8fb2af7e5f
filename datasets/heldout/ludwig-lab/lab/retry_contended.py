"""Re-run the lab runs that suffered CPU contention, keep the cleaner measurement.

Run with the Ludwig venv:  .venv-ludwig/bin/python retry_contended.py [THRESHOLD] [MAX_RETRIES]

Contention = runq_wait_s.train_call_fraction_of_wall (seconds the run's threads waited for a CPU
per second of train(), from /proc schedstat; see run_ludwig.py). A run above THRESHOLD (default
0.3) is run again (up to MAX_RETRIES times, default 1), after waiting up to 4 minutes for the
1-minute load average to fall below 3.5; the attempt with the lower fraction stays in runs/, the
other goes to runs_loaded/<name>.attemptN.json. Nothing is deleted.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent


def frac(p: Path) -> float:
    r = json.loads(p.read_text())
    return (r.get("runq_wait_s") or {}).get("train_call_fraction_of_wall", 9.9)


def overrides(r: dict) -> list[str]:
    import yaml

    orig = yaml.safe_load((ROOT / r["config"]).read_text())
    out = []
    for sect in ("trainer", "preprocessing"):
        for k, v in (r["config_used"].get(sect) or {}).items():
            if (orig.get(sect) or {}).get(k) != v:
                out += ["--set", f"{sect}.{k}={v}"]
    return out


def main() -> int:
    thr = float(sys.argv[1]) if len(sys.argv) > 1 else 0.3
    max_retries = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    (ROOT / "runs_loaded").mkdir(exist_ok=True)
    for attempt in range(1, max_retries + 1):
        todo = [p for p in sorted((ROOT / "runs").glob("*.json")) if frac(p) > thr]
        print(f"attempt {attempt}: {len(todo)} runs above {thr}: {[p.stem for p in todo]}", flush=True)
        for p in todo:
            r = json.loads(p.read_text())
            waited = 0
            while os.getloadavg()[0] >= 3.5 and waited < 240:
                time.sleep(10)
                waited += 10
            tmp_name = f"{p.stem}__retry"
            cmd = [sys.executable, "run_ludwig.py", "--config", r["config"], "--dataset", r["dataset"],
                   "--name", tmp_name, *overrides(r)]
            log = ROOT / "logs" / f"{tmp_name}.log"
            with open(log, "w") as fh:
                rc = subprocess.run(cmd, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT, timeout=900,
                                    check=False).returncode
            new = ROOT / "runs" / f"{tmp_name}.json"
            if rc != 0 or not new.exists():
                print(f"  {p.stem}: retry failed rc={rc}", flush=True)
                continue
            nr = json.loads(new.read_text())
            nr["name"] = p.stem
            nr["retry_of_contended"] = True
            f_old, f_new = frac(p), nr["runq_wait_s"]["train_call_fraction_of_wall"]
            n_prev = len(list((ROOT / "runs_loaded").glob(f"{p.stem}.attempt*.json")))
            if f_new < f_old:
                shutil.move(p, ROOT / "runs_loaded" / f"{p.stem}.attempt{n_prev + 1}.json")
                p.write_text(json.dumps(nr, indent=1))
                new.unlink()
            else:
                new.unlink()
                (ROOT / "runs_loaded" / f"{p.stem}.attempt{n_prev + 1}.json").write_text(json.dumps(nr, indent=1))
            print(f"  {p.stem}: contention {f_old:.2f} -> {f_new:.2f} (kept {'new' if f_new < f_old else 'old'}), "
                  f"load wait {waited}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
