"""Calibrations: what `perfmodel calibrate` measured on one machine, applied at once to every
prediction for that hardware (no retraining).

- `record`: the versioned calibration file (hardware fingerprint, ceilings, kernel factors, the
  measured runs) and the folder that keeps them (`perfmodel.paths.calibration_dir()`), with the
  rules that match a calibration to the hardware a prediction asks about.
- `apply`: the arithmetic: hierarchical shrinkage toward the uncalibrated model, the distance of a
  configuration from the measured ones, the narrowed (and widened back) interval.
- `run`: the measuring side (`perfmodel calibrate`): the collectors' micro-benchmarks, a launch
  latency and 3-5 small training slices, within a budget (it imports the collectors).

Imports nothing at module level (the layer test reads each submodule on its own layer).
"""
