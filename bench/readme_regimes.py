"""The README's per-regime table (scale x method x precision) from a run folder's out-of-fold predictions,
with the project's own weighted metrics (perfmodel.learn.metrics). Usage: python bench/readme_regimes.py runs/RUN"""
import sys

import pandas as pd

from perfmodel.learn.metrics import error_metrics, interval_metrics

o = pd.read_csv(sys.argv[1] + "/oof_predictions.csv")
splits = {"loso": "source held out", "loho": "GPU held out"}
rows = {}
for s in splits:
    d = o[o.split == s]
    for key, g in d.groupby(["scale", "method", "precision"]):
        e = error_metrics(g.y.values, g.pred_model.values, g.weight.values)
        i = interval_metrics(g.y.values, g.pred_model.values, g.half90.values, g.weight.values)
        rows.setdefault(key, {})[s] = (len(g), e["median_ape_pct"], i["coverage_pct"], i["median_width_ratio"])
for s in splits:  # check against the run's own summary
    d = o[o.split == s]
    print(s, error_metrics(d.y.values, d.pred_model.values, d.weight.values)["median_ape_pct"], file=sys.stderr)
order = {"cpu": 0, "1 device": 1, "1 node": 2, "multi-node": 3}
print("| scale | method | precision | rows | source held out: median APE | cov90 | width90 | GPU held out: median APE | cov90 | width90 |")
print("|---|---|---|---|---|---|---|---|---|---|")
for key in sorted(rows, key=lambda k: (order[k[0]], k[1], k[2])):
    r = rows[key]
    n = r["loho"][0]
    if n < 10:
        continue
    cells = []
    for s in splits:
        if s in r:
            _, m, c, w = r[s]
            cells += [f"{m:.1f}%", f"{c:.0f}%", f"x{w:.1f}"]
        else:
            cells += ["–", "–", "–"]
    print(f"| {key[0]} | {key[1]} | {key[2]} | {n:,} | " + " | ".join(cells) + " |")
