"""The README's per-regime table (scale x method x precision) from a run folder's out-of-fold predictions,
with the project's own weighted metrics (perfmodel.learn.metrics).

    python bench/readme_regimes.py runs/RUN                       # the README's table
    python bench/readme_regimes.py runs/RUN --by kind              # any columns of oof_predictions.csv
    python bench/readme_regimes.py runs/RUN --by source,model_family --min-rows 20

`--by` groups by other columns (kind, source, model_family, gpu, stack, ...); `--min-rows` drops groups
with fewer rows held out by GPU (default 10)."""

from __future__ import annotations

import argparse
import sys

import pandas as pd

from perfmodel.learn.metrics import error_metrics, interval_metrics

SPLITS = {"loso": "source held out", "loho": "GPU held out"}
ORDER = {"cpu": 0, "1 device": 1, "1 node": 2, "multi-node": 3}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", help="a training run folder (runs/...)")
    parser.add_argument("--by", default="scale,method,precision", help="comma-separated columns to group by")
    parser.add_argument("--min-rows", type=int, default=10)
    args = parser.parse_args(argv)
    o = pd.read_csv(args.run + "/oof_predictions.csv")
    by = [c.strip() for c in args.by.split(",") if c.strip()]
    missing = [c for c in by if c not in o.columns]
    if missing:
        print(f"error: no column {missing[0]!r} in oof_predictions.csv", file=sys.stderr)
        return 2
    rows: dict[tuple, dict] = {}
    for s in SPLITS:
        d = o[o.split == s]
        for key, g in d.groupby(by):
            key = key if isinstance(key, tuple) else (key,)
            e = error_metrics(g.y.values, g.pred_model.values, g.weight.values)
            i = interval_metrics(g.y.values, g.pred_model.values, g.half90.values, g.weight.values)
            rows.setdefault(key, {})[s] = (
                len(g),
                e["median_ape_pct"],
                i["coverage_pct"],
                i["median_width_ratio"],
            )
    for s in SPLITS:  # check against the run's own summary
        d = o[o.split == s]
        print(
            s,
            error_metrics(d.y.values, d.pred_model.values, d.weight.values)["median_ape_pct"],
            file=sys.stderr,
        )
    head = [*by, "rows"] + [
        f"{SPLITS[s]}: {m}" if m == "median APE" else m
        for s in SPLITS
        for m in ("median APE", "cov90", "width90")
    ]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for key in sorted(
        rows,
        key=lambda k: tuple(
            ORDER.get(str(v), 9) if b == "scale" else str(v) for b, v in zip(by, k, strict=True)
        ),
    ):
        r = rows[key]
        n = r.get("loho", (0,))[0]
        if n < args.min_rows:
            continue
        cells = []
        for s in SPLITS:
            if s in r:
                _, m, c, w = r[s]
                cells += [f"{m:.1f}%", f"{c:.0f}%", f"x{w:.1f}"]
            else:
                cells += ["–", "–", "–"]
        print("| " + " | ".join(str(v) for v in key) + f" | {n:,} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
