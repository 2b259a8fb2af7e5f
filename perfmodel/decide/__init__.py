"""Decisions over predictions: what would fit, what-if sweeps, side-by-side comparison and advice
("what should I run?"). Prices per GPU-hour are catalog data (`perfmodel.catalog.prices`).

Modules:
  outcome  - the part of a prediction that decisions compare (time, cost, memory, MFU, fits)
  source   - a config read once and resolved with changes (native or Ludwig keys)
  fit      - the largest micro-batch that fits, the fewest GPUs that fit (`suggest_fits`)
  sweep    - `sweep`: a grid over config keys; `plot` draws it (matplotlib, Agg)
  compare  - `compare`: configs side by side, ratios of time with their uncertainty
  advise   - `advise`: search precision, micro-batch, checkpointing, strategy, GPU type and count

Nothing heavy is imported here. The functions are `perfmodel.sweep`, `perfmodel.compare` and
`perfmodel.advise` (loaded on first use), defined in the modules of the same names.
"""
