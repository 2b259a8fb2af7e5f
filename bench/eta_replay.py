"""Coverage of the live ETA's 90% remaining-time interval on the committed real step-time traces
(docs/run.md, "Is the interval honest?"): every trace of datasets/raw replayed report by report
(`perfmodel.monitor.eta.replay_coverage`), the collectors' traces (their harness cut the warm-up)
and the real Ludwig runs' (every batch after the first: Ludwig's warm-up ramps and the shared
host's level changes left in), with and without the monitor's warm-up / stable-phase rules and a
prior 1.6x off. One JSON line per case.

    python bench/eta_replay.py
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from perfmodel.monitor.eta import replay_coverage

ROOT = Path(__file__).resolve().parents[1]


def real_traces(ludwig: bool) -> list[list[float]]:
    """Step times (>= 10) of the own collectors' ok rows in datasets/raw: Ludwig's or the others'."""
    frames = [pd.read_parquet(p) for p in sorted((ROOT / "datasets" / "raw").glob("*.parquet")) if not p.name.startswith("microbench")]
    table = pd.concat(frames, ignore_index=True)
    table = table[(table["status"] == "ok") & (table["source_kind"] == "own")]
    table = table[(table["framework"] == "ludwig") == ludwig]
    return [[float(t) for t in x] for x in table["step_times_s"] if x is not None and len(x) >= 10]


def main() -> int:
    for name, ludwig in (("collectors", False), ("ludwig", True)):
        traces = real_traces(ludwig)
        for rules in (False, True):
            for prior in (None, 1.6):
                r = replay_coverage(traces, rules=rules, prior_factor=prior)
                print(
                    json.dumps(
                        {
                            "traces": name,
                            "rules": rules,
                            "prior_factor": prior,
                            "n_traces": r.traces,
                            "reports": r.cases,
                            "unanswered": r.unanswered,
                            "coverage": round(r.coverage, 4),
                            "median_log_width": round(r.median_log_width, 4),
                        }
                    )
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
