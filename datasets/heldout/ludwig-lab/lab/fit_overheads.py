"""Fit Ludwig's start-up and per-step overhead terms from the lab runs: overheads_fit.json.

Run with any Python 3 with numpy:  /work/main/.venv/bin/python fit_overheads.py

Input: runs/*.json (run_ludwig.py). Only runs whose contention (runq wait / train() wall) is at most
MAX_CONTENTION enter the fits; the rest are listed. Terms (wall seconds on this 2-core CPU):
- import: `import torch` + `import ludwig.api` (and process start): mean, sd, min, max; CPU too,
- ctor: LudwigModel(config) (validation, backend),
- preprocess: per data kind, fitted a + b * rows (rows = whole dataset) by least squares over the
  runs of that kind (two sizes each),
- create_model, batch-size tuning (training and eval tuning separately), to-first-step total,
- per step: median step time; the floor (tiny models) is Ludwig's own per-step work,
- evaluation: seconds per evaluated row at each checkpoint, first checkpoint vs later ones, and as
  a multiple of the training cost per row,
- after the loop: final evaluation + calibration + model save.
"""

from __future__ import annotations

import json
import statistics as st
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent
MAX_CONTENTION = 0.35


def kind(name: str) -> str:
    for k in ("tab", "image", "text", "llm"):
        if k in name:
            return {"tab": "tabular", "image": "image", "text": "text", "llm": "llm"}[k]
    return "other"


def describe(xs: list[float]) -> dict:
    if not xs:
        return {}
    return {
        "n": len(xs),
        "mean": round(st.mean(xs), 4),
        "sd": round(st.pstdev(xs), 4),
        "min": round(min(xs), 4),
        "max": round(max(xs), 4),
    }


def main() -> None:
    runs = [json.loads(p.read_text()) for p in sorted((ROOT / "runs").glob("*.json"))]
    clean, dropped = [], []
    for r in runs:
        f = (r.get("runq_wait_s") or {}).get("train_call_fraction_of_wall", 9.9)
        (clean if f <= MAX_CONTENTION else dropped).append(r)
    out: dict = {
        "max_contention": MAX_CONTENTION,
        "runs_used": [r["name"] for r in clean],
        "runs_dropped_contended": {
            r["name"]: (r.get("runq_wait_s") or {}).get("train_call_fraction_of_wall") for r in dropped
        },
    }
    out["import_s"] = describe([r["import_total_s"] + r["process_start_to_script_s"] for r in clean])
    out["import_cpu_s"] = describe([r["import_cpu_s"] for r in runs])
    out["ludwig_model_ctor_s"] = {
        "ecd": describe([r["ludwig_model_ctor_s"] for r in clean if kind(r["name"]) != "llm"]),
        "llm": describe([r["ludwig_model_ctor_s"] for r in clean if kind(r["name"]) == "llm"]),
    }
    pre: dict = {}
    for k in ("tabular", "image", "text", "llm"):
        rs = [r for r in clean if kind(r["name"]) == k]
        if len({sum(r["rows"].values()) for r in rs}) >= 2:
            x = np.array([sum(r["rows"].values()) for r in rs], float)
            y = np.array([r["phases_s"]["preprocess"] for r in rs], float)
            b, a = np.polyfit(x, y, 1)
            resid = y - (a + b * x)
            pre[k] = {
                "fixed_s": round(float(a), 4),
                "per_1k_rows_s": round(float(b) * 1000, 4),
                "n_runs": len(rs),
                "resid_sd_s": round(float(resid.std()), 4),
                "points": [[int(xi), round(float(yi), 4)] for xi, yi in zip(x, y)],
            }
        elif rs:
            pre[k] = {"points": [[sum(r["rows"].values()), r["phases_s"]["preprocess"]] for r in rs]}
    out["preprocess"] = pre
    out["create_model_s"] = {r["name"]: r["phases_s"]["create_model"] for r in clean}
    out["tune_s"] = {
        "training": describe([t["s"] for r in clean for t in r["tune"] if t["for_training"]]),
        "eval": describe([t["s"] for r in clean for t in r["tune"] if not t["for_training"]]),
        "choices": {r["name"]: [(t["for_training"], t["chosen"]) for t in r["tune"]] for r in runs},
    }
    out["to_first_step_s"] = {r["name"]: r["phases_s"]["train_call_to_first_batch"] for r in clean}
    steps = {}
    for r in clean:
        s = r["steps"]
        bs = (r.get("progress") or {}).get("batch_size")
        steps[r["name"]] = {
            "median_s": s["median_s"],
            "p10_s": s["p10_s"],
            "p90_s": s["p90_s"],
            "first_s": s["first_s"],
            "batch_size": bs,
            "params": r.get("model_params"),
            "per_sample_ms": round(1000 * s["median_s"] / bs, 4) if bs else None,
        }
    out["steps"] = steps
    floor = [v["median_s"] for k, v in steps.items() if (v["params"] or 0) < 10_000]
    out["per_step_floor_s"] = describe(floor)
    ev: dict = {}
    for r in clean:
        rows_eval = r["rows"]["validation"] + r["rows"]["test"]
        bs = (r.get("progress") or {}).get("batch_size") or 1
        t_row_train = r["steps"]["median_s"] / bs
        e = r["evals"]
        if not e or not rows_eval:
            continue
        ev[r["name"]] = {
            "eval_rows": rows_eval,
            "first_s": e[0]["s"],
            "later_mean_s": round(st.mean(x["s"] for x in e[1:]), 4) if len(e) > 1 else None,
            "s_per_eval_row_ms": round(1000 * st.mean(x["s"] for x in e) / rows_eval, 4),
            "eval_row_vs_train_row": round((st.mean(x["s"] for x in e) / rows_eval) / t_row_train, 3),
            "checkpoint_gap_mean_s": round(
                st.mean(x.get("gap_to_next_batch_s", x.get("gap_to_teardown_s", 0.0)) for x in e), 4
            ),
        }
    out["evaluation"] = ev
    out["after_loop_s"] = {
        r["name"]: {
            "after_last_step_to_return": r["phases_s"]["after_loop_to_return"],
            "teardown_to_return": r["phases_s"]["teardown_to_return"],
        }
        for r in clean
    }
    fixed = []
    for r in clean:
        ph = r["phases_s"]
        fixed.append(
            {
                "run": r["name"],
                "outside_loop_s": round(
                    r["total_wall_s"] - ph["steps_sum"] - sum(x["s"] for x in r["evals"] if x.get("inside_loop")), 3
                ),
                "import_s": r["import_total_s"],
                "ctor_s": r["ludwig_model_ctor_s"],
                "to_first_step_s": ph["train_call_to_first_batch"],
                "after_loop_s": ph["after_loop_to_return"],
                "total_wall_s": r["total_wall_s"],
                "steps_share": round(ph["steps_sum"] / r["total_wall_s"], 3),
            }
        )
    out["outside_steps"] = fixed
    (ROOT / "overheads_fit.json").write_text(json.dumps(out, indent=1))
    print(json.dumps({k: out[k] for k in ("import_s", "import_cpu_s", "ludwig_model_ctor_s", "preprocess",
                                          "tune_s", "per_step_floor_s")}, indent=1)[:4000])
    for f in fixed:
        print(f)


if __name__ == "__main__":
    main()
