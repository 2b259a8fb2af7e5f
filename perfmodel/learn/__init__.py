"""The learned correction: a LightGBM regressor on y = log(measured step time / roofline bound),
with conformal intervals calibrated on grouped (held-out hardware) cross-validation.

Modules, in pipeline order:
  regressor  - the LightGBM estimator (sklearn API, internal early stopping)
  conformal  - grouped cross-conformal calibration (MAPIE) and the conformal quantile
  evaluate   - the evaluation protocol: splits, metrics, baselines, breakdowns, holdouts
  plots      - evaluation figures (matplotlib, Agg)
  train      - `fit_and_log`: fit, evaluate, calibrate, log to MLflow, register, export
  shipped    - the exported model in models/ and the interface the predictor calls
  synthetic  - seeded synthetic feature tables with a known answer (tests, development)

Nothing heavy is imported here; `shipped` never imports mlflow or torch.
"""
