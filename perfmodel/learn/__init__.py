"""The learned correction: a LightGBM regressor on y = log(measured step time / roofline bound),
with conformal intervals calibrated on grouped (held-out hardware) cross-validation.

Modules, one job each, in pipeline order:
  data             - the feature table as (X, y) and its dataset hash
  regressor        - the LightGBM estimator (sklearn API, internal early stopping)
  conformal        - the conformal quantile and grouped calibration (MAPIE)
  fit              - `fit_learned_model`: point predictor + calibrations + training domain
  metrics          - errors and coverage of out-of-fold predictions, metric names with units
  evaluate         - the evaluation protocol: folds, worker processes, holdouts
  spread           - seed-to-seed spread of the metrics
  champion         - `decide_champion`: when a new model may replace the champion (pure)
  report           - an evaluation's tables for people: column specs, cells, Markdown
  run_record       - what a run records: name, description, params, tags, artifacts
  plots            - evaluation figures (matplotlib, Agg)
  train            - `fit_and_log(data, tracker=...)`: fit, save locally, log, register, export
  export           - write a registered champion into models/ when it beats the model there
  interval_policy  - the interval of one query: calibration, domain checks, widening
  model_files      - model folders on disk: verified reads, atomic writes
  metadata         - `ModelMetadata`: metadata.json as a typed record (read, stamp, write)
  lean_import      - LightGBM without its optional integrations (CLI cold start)
  shipped          - `load_shipped_model()` and `LearnedModel.correct()`, what predict calls
                     (the predictor holds it as a `Corrector`)
  pyfunc           - the registered MLflow model (imports mlflow)
  synthetic        - seeded synthetic feature tables with a known answer (tests, development)

Nothing heavy is imported here; `shipped`, `interval_policy`, `metadata`, `model_files` and `lean_import`
never import mlflow, torch or scikit-learn.
"""
