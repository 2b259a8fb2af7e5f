"""The registered MLflow pyfunc and the service agree on step time for the same workloads.

The pyfunc takes feature-table rows and returns step time only; the service takes configs. The
rows are built from each resolved workload with the public feature code (`codec.workload_to_row`),
the pyfunc is loaded back from a local registry (`models:/perfmodel-throughput/1`), and the
service answers through HTTP with the same model folder. The pyfunc's step is the optimizer step
(the feature table's unit); the service's step is the config's own (Ludwig: one batch, so an
optimizer step over gradient accumulation).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from perfmodel.analytic import estimate
from perfmodel.analytic.totals import plan_run
from perfmodel.api import resolve_workload
from perfmodel.codec import workload_to_row
from perfmodel.service.app import create_app
from perfmodel.service.settings import ServiceSettings
from perfmodel.tracking import MlflowTracker

ROOT = Path(__file__).resolve().parents[1]
MODEL_DIR = ROOT / "models"
REQUESTS = [
    {"config": (ROOT / "examples" / "llama2-7b-lora.yaml").read_text()},
    {
        "config": (ROOT / "examples" / "llama3-8b-pretrain-fsdp.yaml").read_text(),
        "gpu": "H100-SXM",
        "num_gpus": 16,
    },
    {"config": (ROOT / "examples" / "custom-dims-qlora.yaml").read_text(), "set": {"training.seq_len": 4096}},
    {"config": (ROOT / "examples" / "ludwig-llama2-7b-qlora.yaml").read_text(), "rows": 20000, "gpu": "L4"},
    {
        "config": {
            "model": {"name": "bert-base"},
            "training": {"seq_len": 128, "micro_batch_size": 32, "precision": "amp_fp16", "samples": 1e6},
            "hardware": {"gpu": "V100-SXM2-32GB"},
        }
    },
]


@pytest.mark.slow
def test_the_registered_pyfunc_and_the_service_agree_on_step_time(tmp_path):
    import mlflow
    import pandas as pd

    tracker = MlflowTracker(f"sqlite:///{tmp_path / 'mlflow.db'}")
    with tracker.run("pyfunc-agreement"):
        version = tracker.log_model(MODEL_DIR, register=True)
    pyfunc = mlflow.pyfunc.load_model(f"models:/{tracker.model_name}/{version}")

    with TestClient(create_app(ServiceSettings(model_dir=MODEL_DIR)), base_url="http://127.0.0.1") as client:
        answers = [client.post("/v1/predict", json=body) for body in REQUESTS]
    assert all(a.status_code == 200 for a in answers), [a.text for a in answers if a.status_code != 200]
    assert all(a.json()["model"]["kind"] == "learned" for a in answers)

    workloads = [
        resolve_workload(body["config"], **{k: v for k, v in body.items() if k != "config"})
        for body in REQUESTS
    ]
    rows = pd.DataFrame([workload_to_row(w) for w in workloads])
    out = pyfunc.predict(rows)
    assert len(out) == len(REQUESTS)
    per = [plan_run(w, estimate(w)).batches_per_optimizer_step for w in workloads]
    assert per[3] == 16  # the Ludwig config accumulates 16 batches: its steps are batches
    for i, answer in enumerate(answers):
        step = answer.json()["step_time_s"]
        assert out["step_time_s"][i] / per[i] == pytest.approx(step["estimate"], rel=1e-9), REQUESTS[i]
        assert out["step_time_low_s"][i] / per[i] == pytest.approx(step["low"], rel=1e-9)
        assert out["step_time_high_s"][i] / per[i] == pytest.approx(step["high"], rel=1e-9)
