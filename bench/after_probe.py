"""What k of a user's own measured runs do to predictions for a setup the model never saw, on the
public rows: perfmodel.learn.after_probe over a training run's leave-one-source-out predictions.

    python bench/after_probe.py runs/RUN [--probes 1 3] [--draws 5] [--markdown FILE]
    python bench/after_probe.py runs/RUN --by network     # probes of the network itself, other runs of it

Deterministic (the probes are drawn with seeded generators); ~1 min on 2 cores (planning the
feature table is most of it).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd

from perfmodel.features import planned_rows
from perfmodel.learn import after_probe
from perfmodel.learn.data import load_training_data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", help="a training run folder (runs/...): its oof_predictions.csv")
    parser.add_argument("--probes", type=int, nargs="+", default=list(after_probe.PROBES))
    parser.add_argument("--draws", type=int, default=after_probe.DRAWS)
    parser.add_argument("--split", default="loso", help="the out-of-fold split to score (default loso)")
    parser.add_argument(
        "--by", choices=after_probe.UNITS, default="machine",
        help="what one calibration covers: a source's runs on one accelerator (default), or one network's among them",
    )
    parser.add_argument("--markdown", help="also write the tables to this file")
    args = parser.parse_args(argv)
    start = time.monotonic()
    oof = pd.read_csv(Path(args.run) / "oof_predictions.csv")
    oof = oof[oof["split"] == args.split].copy()
    if oof.empty:
        print(f"error: no {args.split!r} rows in {args.run}/oof_predictions.csv", file=sys.stderr)
        return 2
    data = load_training_data()
    if "y" in oof and len(data.kept) <= int(oof["row"].max()):
        print("error: the feature table has changed since this run (fewer rows); retrain first", file=sys.stderr)
        return 2
    oof["run"] = data.kept["run_group"].astype(str).to_numpy()[oof["row"].to_numpy()]
    planned = planned_rows(data.table)
    scored = after_probe.scored_runs(oof, planned, probes=args.probes, draws=args.draws, unit=args.by)
    by = "" if args.by == "machine" else f" --by {args.by}"
    parts = [
        f"Scored by `python bench/after_probe.py {args.run}{by}` ({args.split} predictions; "
        f"probes {', '.join(map(str, args.probes))}, {args.draws} draws; {time.monotonic() - start:.0f} s).\n",
        after_probe.markdown(after_probe.summary(scored), unit=args.by),
        after_probe.markdown(after_probe.summary(scored, by=["scale", "kind"]), by=["scale", "kind"], unit=args.by),
        after_probe.markdown(after_probe.summary(scored, by=["source"]), by=["source"], unit=args.by),
    ]
    text = "\n".join(parts)
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
