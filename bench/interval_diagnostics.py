"""How narrow could a 90% interval be, and what sets its width? Diagnostics on a run folder's
out-of-fold predictions (no fitting of the shipped model; a few small LightGBM fits for the
difficulty model).

    python bench/interval_diagnostics.py runs/RUN      # ~5 min on 2 cores (the cross-fitted difficulty model)

Three tables, each from the run's `oof_predictions.csv` and the feature table it was trained on:

1. **One width for every row.** The run-weighted 90% quantile of |log error| per split, as a width
   (high / low): the narrowest interval of one width that covers 90% of the held-out rows, which no
   method that knows the split's own errors beforehand could beat with a single width.
2. **A width per row (normalised conformal).** A LightGBM model of log |residual| from the feature
   row, cross-fitted by source twice over (the held-out source's widths come from a model and a
   quantile fitted on the other sources, whose own scores come from models that did not see them):
   its coverage and median width held out by source, against one width fitted the same way. If it
   is no narrower, a new lab's error is not predictable from the features.
3. **Where the error lives.** Variance components of the held-out-by-source residuals, one vote per
   measured run: sigma, the spread of one network's runs on one machine (a source on one
   accelerator) around their mean; tau_network, the spread of networks' means on a machine; and
   tau_machine, the spread of machines' means; each also with every source left out in turn (min
   and max), to show they do not hang on one source. `perfmodel.calibration.apply`'s priors
   (SIGMA_PRIOR, TAU_PRIOR) can be read against them.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from perfmodel.features import planned_rows
from perfmodel.learn.after_probe import network_of
from perfmodel.learn.data import load_training_data
from perfmodel.learn.metrics import weighted_quantile

SPLIT_NAMES = {"loso": "source held out", "unseen_gpu": "accelerator never seen", "lofw": "framework held out",
               "loho": "GPU held out", "lofo": "model family held out", "random": "random 5-fold"}  # fmt: skip
DIFFICULTY = {"n_estimators": 200, "learning_rate": 0.05, "num_leaves": 8, "min_child_samples": 50,
              "subsample": 0.8, "subsample_freq": 1, "colsample_bytree": 0.8, "verbose": -1, "random_state": 0}  # fmt: skip
"""The difficulty model's settings, fixed before it was run (small and regularised)."""


def one_width(o: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for split, g in o.groupby("split", sort=False):
        err = np.abs(g["y"] - g["pred_model"]).to_numpy()
        w = g["weight"].to_numpy(dtype=float)
        q = weighted_quantile(err, 0.9, w)
        shipped = weighted_quantile(np.exp(2 * g["half90"].to_numpy()), 0.5, w)
        rows.append({"split": SPLIT_NAMES.get(split, split), "rows": len(g), "one width at 90%": f"x{math.exp(2 * q):.2f}",
                     "shipped median width": f"x{shipped:.2f}"})  # fmt: skip
    return pd.DataFrame(rows)


def _difficulty(frame: pd.DataFrame, target: np.ndarray, weight: np.ndarray):  # type: ignore[no-untyped-def]
    import lightgbm as lgb  # training-side tool

    model = lgb.LGBMRegressor(**DIFFICULTY)
    model.fit(frame, target, sample_weight=weight)
    return model


def normalised(o: pd.DataFrame, X: pd.DataFrame) -> pd.DataFrame:
    d = o[o["split"] == "loso"].reset_index(drop=True)
    frame = X.iloc[d["row"].to_numpy()].reset_index(drop=True).copy()
    frame["pred_model"] = d["pred_model"].to_numpy()
    for c in frame.columns:
        if frame[c].dtype == object:
            frame[c] = frame[c].astype("category")
    err = np.abs(d["y"] - d["pred_model"]).to_numpy()
    target, w, src = np.log(err + 0.02), d["weight"].to_numpy(dtype=float), d["source"].astype(str).to_numpy()
    out = []
    for name in ("one width", "a width per row"):
        half = np.zeros(len(d))
        for s in np.unique(src):
            tr, te = src != s, src == s
            if name == "one width":
                scale_tr, scale_te = np.ones(tr.sum()), np.ones(te.sum())
            else:
                scale_te = np.exp(_difficulty(frame[tr], target[tr], w[tr]).predict(frame[te]))
                scale_tr = np.zeros(tr.sum())
                inner = src[tr]
                for s2 in np.unique(inner):  # the training sources' own scores: models that did not see them
                    keep = inner != s2
                    model = _difficulty(frame[tr][keep], target[tr][keep], w[tr][keep])
                    scale_tr[~keep] = np.exp(model.predict(frame[tr][~keep]))
            q = weighted_quantile(err[tr] / scale_tr, 0.9, w[tr])
            half[te] = q * scale_te
        out.append({"interval": name, "source held out: 90% covered": f"{np.average(err <= half, weights=w):.1%}",
                    "median width": f"x{weighted_quantile(np.exp(2 * half), 0.5, w):.2f}"})  # fmt: skip
    return pd.DataFrame(out)


def _components(runs: pd.DataFrame) -> tuple[float, float, float]:
    """(sigma, tau_network, tau_machine) by the method of moments (one vote per run)."""
    net = runs.groupby(["machine", "network"])["r"]
    n = net.size()
    var = net.var(ddof=1)
    many = n >= 2
    sigma2 = float((var[many] * (n[many] - 1)).sum() / (n[many] - 1).sum())
    means = net.mean().rename("m").reset_index()
    means["inv_n"] = (1.0 / n).to_numpy()
    by_machine = means.groupby("machine")
    k = by_machine.size()
    dev = means["m"] - by_machine["m"].transform("mean")
    several = means["machine"].map(k) >= 2
    between = (dev[several] ** 2).groupby(means["machine"][several]).sum() / (k[k >= 2] - 1)
    inv_n = means[several].groupby("machine")["inv_n"].mean()
    tau_n2 = max(0.0, float(between.mean() - sigma2 * inv_n.mean()))
    machine_mean = by_machine["m"].mean()
    noise = ((tau_n2 + sigma2 * by_machine["inv_n"].mean()) / k).mean()
    tau_m2 = max(0.0, float((machine_mean**2).mean() - noise))
    return math.sqrt(sigma2), math.sqrt(tau_n2), math.sqrt(tau_m2)


def components(o: pd.DataFrame, data) -> pd.DataFrame:  # type: ignore[no-untyped-def]
    d = o[o["split"] == "loso"].copy()
    planned = planned_rows(data.table)
    d["run"] = data.kept["run_group"].astype(str).to_numpy()[d["row"].to_numpy()]
    d["network"] = [network_of(*planned[int(r)]) for r in d["row"]]
    d["machine"] = d["source"].astype(str) + "|" + d["gpu"].astype(str)
    d["r"] = d["y"] - d["pred_model"]
    runs = d.groupby("run").agg(r=("r", "median"), machine=("machine", "first"), network=("network", "first"),
                                source=("source", "first"))  # fmt: skip
    whole = _components(runs)
    left = np.array([_components(runs[runs["source"] != s]) for s in sorted(runs["source"].unique())])
    names = ("sigma (a network's runs on one machine)", "tau_network (networks on one machine)",
             "tau_machine (machines)")  # fmt: skip
    return pd.DataFrame([{"component (log)": nm, "all sources": f"{whole[i]:.3f}",
                          "each source left out": f"{left[:, i].min():.3f}-{left[:, i].max():.3f}"}
                         for i, nm in enumerate(names)])  # fmt: skip


def markdown(table: pd.DataFrame) -> str:
    head = list(table.columns)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in table.itertuples(index=False)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", help="a training run folder (runs/...): its oof_predictions.csv")
    args = parser.parse_args(argv)
    path = Path(args.run) / "oof_predictions.csv"
    if not path.is_file():
        print(f"error: no {path}", file=sys.stderr)
        return 2
    o = pd.read_csv(path)
    data = load_training_data()
    if len(data.kept) <= int(o["row"].max()):
        print("error: the feature table has changed since this run (fewer rows); retrain first", file=sys.stderr)
        return 2
    sections = (("One width for every row", lambda: one_width(o)),
                ("Where the error lives (held out by source)", lambda: components(o, data)),
                ("A width per row, held out by source (~4 min)", lambda: normalised(o, data.X.reset_index(drop=True))))  # fmt: skip
    for title, make in sections:
        print(f"\n{title}\n\n{markdown(make())}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
