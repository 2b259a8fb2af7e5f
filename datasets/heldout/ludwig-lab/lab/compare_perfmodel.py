"""perfmodel's current prediction for each lab run vs what Ludwig did; writes the tables.

Run with any Python 3 (uses only the standard library; calls the perfmodel CLI of /work/main):
    python3 compare_perfmodel.py

For each runs/*.json: `perfmodel predict --config CFG --dataset DATA --gpu cpu --json` (the same
config and dataset the run used; a run with --set overrides gets them as a temporary config).
Writes predictions/<run>.json (perfmodel's full JSON), summary.csv (one row per run: measured
phases, Ludwig's steps, perfmodel's figures) and comparison.md (the table for FINDINGS.md).

Errors: APE = |predicted - measured| / measured; "inside" = measured within [low, high] of
perfmodel's interval (at its default confidence 0.9). Two measured totals are compared:
wall (process start -> train() returned; on this shared 2-core machine, load average 7-15) and
CPU (user+sys of the process, a quiet-machine proxy for single-threaded overhead).
"""

from __future__ import annotations

import csv
import json
import statistics
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent
PERFMODEL = "/work/main/.venv/bin/perfmodel"


def predict(cfg_path: Path, dataset: Path, overrides: dict) -> dict:
    cfg_use = cfg_path
    tmp = None
    if overrides:
        import yaml  # only when needed

        cfg = yaml.safe_load(cfg_path.read_text())
        for k, v in overrides.items():
            sect, key = k.split(".", 1)
            cfg.setdefault(sect, {})[key] = v
        tmp = tempfile.NamedTemporaryFile("w", suffix=".yaml", dir=cfg_path.parent, delete=False)
        yaml.safe_dump(cfg, tmp)
        tmp.close()
        cfg_use = Path(tmp.name)
    try:
        p = subprocess.run(
            [PERFMODEL, "predict", "--config", str(cfg_use), "--dataset", str(dataset), "--gpu", "cpu", "--json"],
            capture_output=True,
            text=True,
            timeout=300,
            cwd="/work/main",
            check=False,
        )
    finally:
        if tmp is not None:
            Path(tmp.name).unlink()
    if p.returncode != 0:
        return {"error": (p.stderr or p.stdout).strip()[-800:], "rc": p.returncode}
    return json.loads(p.stdout)


def main() -> None:
    (ROOT / "predictions").mkdir(exist_ok=True)
    rows = []
    for f in sorted((ROOT / "runs").glob("*.json")):
        r = json.loads(f.read_text())
        cfg_path = (ROOT / r["config"]).resolve()
        ds = (ROOT / r["dataset"]).resolve()
        overrides = {}
        used = r.get("config_used", {})
        # overrides given on the run's command line are the differences in config_used
        orig = _load_yaml(cfg_path)
        for sect in ("trainer", "preprocessing"):
            for k, v in (used.get(sect) or {}).items():
                if (orig.get(sect) or {}).get(k) != v:
                    overrides[f"{sect}.{k}"] = v
        pred_file = ROOT / "predictions" / f.name
        if pred_file.exists():
            pred = json.loads(pred_file.read_text())
        else:
            pred = predict(cfg_path, ds, overrides)
            pred_file.write_text(json.dumps(pred, indent=1))
        ph = r["phases_s"]
        st = r["steps"]
        prog = r.get("progress") or {}
        row = {
            "run": r["name"],
            "config": Path(r["config"]).name,
            "dataset_rows": sum(r["rows"].values()),
            "train_rows": r["rows"]["train"],
            "load_avg_1m_start": r["load_avg_start"][0],
            "load_avg_1m_end": r["load_avg_end"][0],
            "total_wall_s": r["total_wall_s"],
            "total_cpu_s": r["total_cpu_s"],
            "import_s": r["import_total_s"],
            "import_cpu_s": r["import_cpu_s"],
            "ctor_s": r["ludwig_model_ctor_s"],
            "train_call_s": r["train_call_s"],
            "to_first_step_s": ph["train_call_to_first_batch"],
            "preprocess_s": ph["preprocess"],
            "create_model_s": ph["create_model"],
            "tune_bs_s": ph["tune_batch_size_total"],
            "steps": st["count"],
            "optimizer_steps": st["optimizer_steps"],
            "epochs": prog.get("epoch"),
            "batch_size": prog.get("batch_size"),
            "eval_batch_size": prog.get("eval_batch_size"),
            "bs_tuned": next((t["chosen"] for t in r["tune"] if t["for_training"]), ""),
            "eval_bs_tuned": next((t["chosen"] for t in r["tune"] if not t["for_training"]), ""),
            "step_median_s": st["median_s"],
            "step_median_cpu_s": st["median_cpu_s"],
            "steps_sum_s": ph["steps_sum"],
            "evals": len(r["evals"]),
            "evals_sum_s": ph["evals_sum"],
            "after_loop_s": ph["after_loop_to_return"],
            "model_params": r.get("model_params"),
            "text_tokens_mean": "",
            "text_padded_len": "",
            "vocab_size": "",
        }
        for t in (r.get("text") or {}).values():
            row["text_tokens_mean"] = t.get("tokens_per_sample_mean")
            row["text_padded_len"] = t.get("padded_length")
            row["vocab_size"] = t.get("vocab_size")
            break
        if "error" in pred:
            row.update(pm_error=pred["error"].splitlines()[-1][:200])
        else:
            tt = pred["total_time_s"]
            row.update(
                pm_total_s=round(tt["estimate"], 2),
                pm_total_low_s=round(tt["low"], 2),
                pm_total_high_s=round(tt["high"], 2),
                pm_step_s=round(pred["step_time_s"]["estimate"], 5),
                pm_steps=pred["total_steps"],
                pm_startup_s=round((pred.get("analytic") or {}).get("startup_s") or 0.0, 2),
                pm_total_minus_startup_s=round(tt["estimate"] - ((pred.get("analytic") or {}).get("startup_s") or 0.0), 2),
                pm_model_kind=pred["model"]["kind"],
                pm_micro_batch=pred["workload"]["training"].get("micro_batch_size"),
                pm_seq_len=pred["workload"]["training"].get("seq_len"),
                pm_params=_params(pred),
                ape_wall=round(abs(tt["estimate"] - r["total_wall_s"]) / r["total_wall_s"], 3),
                ape_cpu=round(abs(tt["estimate"] - r["total_cpu_s"]) / r["total_cpu_s"], 3),
                ratio_wall=round(tt["estimate"] / r["total_wall_s"], 3),
                inside_wall=tt["low"] <= r["total_wall_s"] <= tt["high"],
                inside_cpu=tt["low"] <= r["total_cpu_s"] <= tt["high"],
                steps_equal=pred["total_steps"] == st["count"],
                step_ratio=round(pred["step_time_s"]["estimate"] / st["median_s"], 3) if st["median_s"] else "",
            )
        rows.append(row)
    keys: list[str] = []
    for row in rows:
        for k in row:
            if k not in keys:
                keys.append(k)
    with open(ROOT / "summary.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    ok = [r for r in rows if "pm_total_s" in r]
    lines = [
        (
            "| run | measured wall s (CPU s) | perfmodel total s [low, high] | APE wall | inside | "
            "steps Ludwig / perfmodel | step s measured / perfmodel |"
        ),
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "pm_total_s" in r:
            lines.append(
                f"| {r['run']} | {r['total_wall_s']:.1f} ({r['total_cpu_s']:.1f}) | {r['pm_total_s']:.1f} "
                f"[{r['pm_total_low_s']:.1f}, {r['pm_total_high_s']:.1f}] | {r['ape_wall']:.0%} | "
                f"{'yes' if r['inside_wall'] else 'no'} | {r['steps']} / {r['pm_steps']} | "
                f"{r['step_median_s']:.4f} / {r['pm_step_s']:.4f} |"
            )
        else:
            lines.append(f"| {r['run']} | {r['total_wall_s']:.1f} ({r['total_cpu_s']:.1f}) | error: "
                         f"{r.get('pm_error', '')[:120]} | | | {r['steps']} / - | |")
    if ok:
        lines.append("")
        lines.append(
            f"{len(ok)} runs predicted: median APE (wall) {statistics.median(r['ape_wall'] for r in ok):.0%}, "
            f"median APE (CPU) {statistics.median(r['ape_cpu'] for r in ok):.0%}, "
            f"inside interval (wall) {sum(r['inside_wall'] for r in ok)}/{len(ok)}, "
            f"steps equal {sum(r['steps_equal'] for r in ok)}/{len(ok)}"
        )
    (ROOT / "comparison.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def _load_yaml(p: Path) -> dict:
    import yaml

    return yaml.safe_load(p.read_text())


def _params(pred: dict):
    wl = pred.get("workload", {})
    m = wl.get("model", {})
    return m.get("params_total") or (pred.get("analytic") or {}).get("params_total") or m.get("name")


if __name__ == "__main__":
    main()
