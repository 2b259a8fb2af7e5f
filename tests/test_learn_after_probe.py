"""perfmodel.learn.after_probe: a held-out machine whose runs all sit one offset off the model is
pulled back by its probe runs, the same runs are scored at every k, and the probes never score."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from perfmodel.analytic import estimate
from perfmodel.config import resolve_workload
from perfmodel.learn import after_probe
from perfmodel.request import RunRequest

OFFSET = 0.5
"""Every run of machine "a" is measured e^0.5 = 1.65x slower than predicted."""


def _workload(mb: int, hidden: int = 256):
    return resolve_workload(
        RunRequest.of(None, set={"model.name": "llama2-7b", "model.hidden_size": hidden, "model.num_layers": 2,
                                 "model.num_heads": 4, "model.ffn_hidden_size": 688, "model.vocab_size": 8000,
                                 "training.seq_len": 128, "training.micro_batch_size": mb, "training.tokens": 1e6,
                                 "hardware.gpu": "A100-80GB"})  # fmt: skip
    )


@pytest.fixture(scope="module")
def scored():
    planned = [(w, estimate(w)) for w in (_workload(1 + i % 4) for i in range(12))]
    rows = []
    for i in range(12):
        machine = "a" if i < 8 else "b"
        noise = 0.02 * ((i % 3) - 1)
        y = (OFFSET if machine == "a" else 0.0) + noise
        rows.append({"row": i, "y": y, "pred_model": 0.0, "half90": 0.3, "source": machine, "gpu": "A100-80GB",
                     "weight": 1.0, "run": f"run{i // 2}", "scale": "1 device", "kind": "decoder"})  # fmt: skip
    return after_probe.scored_runs(pd.DataFrame(rows), planned, probes=(1, 3), draws=3)


def test_probes_pull_an_offset_machine_back_and_the_same_runs_are_scored_at_every_k(scored) -> None:
    a = scored[scored["source"] == "a"]
    # machine a has 4 runs of 2 rows: the 3 largest-k probes never score, 1 run (2 rows) per draw does
    counts = a.groupby(["k", "draw"]).size()
    assert set(counts) == {2}
    assert (a.groupby("draw")["row"].apply(lambda r: r.nunique()) == 2).all()
    table = after_probe.summary(scored, by=["source"]).set_index(["source", "k"])
    uncal, one, three = (table.loc[("a", k), "median_ape_pct"] for k in (0, 1, 3))
    assert uncal == pytest.approx((math.exp(OFFSET) - 1) * 100, abs=3)  # 65%: the offset, nothing else
    assert one < 0.5 * uncal and three < one  # shrinkage: one run trusted < 80%, three more
    assert table.loc[("a", 0), "coverage90_pct"] == 0.0 and table.loc[("a", 3), "coverage90_pct"] == 100.0
    # machine b (2 runs) has no run left once the largest k (3) could probe it: not scored
    assert "b" not in set(scored["source"])


def test_the_markdown_names_every_k() -> None:
    table = pd.DataFrame([{"k": 0, "machines": 2, "rows": 10, "median_ape_pct": 20.0, "p90_ape_pct": 50.0,
                           "coverage90_pct": 90.0, "width90_ratio": 3.0},
                          {"k": 1, "machines": 2, "rows": 10, "median_ape_pct": 12.0, "p90_ape_pct": 40.0,
                           "coverage90_pct": 91.0, "width90_ratio": 2.9}])  # fmt: skip
    text = after_probe.markdown(table)
    assert "| 0 (uncalibrated) | 2 | 10 | 20.0% | 50% | 90.0% | x3.00 |" in text
    assert "| 1 | 2 | 10 | 12.0% |" in text
    with pytest.raises(ValueError, match="k > 0"):
        after_probe.scored_runs(pd.DataFrame(), [], probes=(0,))


def test_a_network_is_the_same_at_every_batch_size_precision_and_lora_rank_and_another_model_is_another():
    def net(name: str, **training: object) -> str:
        options = {"model.name": name, "training.seq_len": 512, "training.tokens": 1e6, "hardware.gpu": "A100-80GB"}
        w = resolve_workload(RunRequest.of(None, set={**options, **{f"training.{k}": v for k, v in training.items()}}))
        return after_probe.network_of(w, estimate(w))

    seven = net("llama2-7b", micro_batch_size=1)
    assert seven == "decoder:6.74e+09"  # `perfmodel models`: llama2-7b, 6.74 B parameters
    assert net("llama2-7b", micro_batch_size=8, precision="fp32") == seven
    assert net("llama2-7b", micro_batch_size=2, lora_r=16) == seven
    assert net("llama3.2-1b", micro_batch_size=1) == "decoder:1.24e+09" != seven


def test_by_network_each_network_of_a_machine_is_calibrated_on_its_own_runs() -> None:
    """One machine, two networks off the model in opposite directions (+0.5 and -0.5): probes of the
    machine mix them, probes of the network itself pull each back to its own offset."""
    planned, rows = [], []
    for i in range(16):
        hidden, offset = (256, OFFSET) if i < 8 else (512, -OFFSET)
        w = _workload(1 + i % 4, hidden)
        planned.append((w, estimate(w)))
        rows.append({"row": i, "y": offset + 0.01 * ((i % 3) - 1), "pred_model": 0.0, "half90": 0.3, "source": "a",
                     "gpu": "A100-80GB", "weight": 1.0, "run": f"run{i}", "scale": "1 device", "kind": "decoder"})  # fmt: skip
    oof = pd.DataFrame(rows)
    by_machine = after_probe.scored_runs(oof, planned, probes=(3,), draws=4)
    by_network = after_probe.scored_runs(oof, planned, probes=(3,), draws=4, unit="network")
    assert set(by_machine["network"]) == {""} and by_network["network"].nunique() == 2
    machine = after_probe.summary(by_machine).set_index("k")
    network = after_probe.summary(by_network).set_index("k")
    assert machine.loc[0, "machines"] == 1 and network.loc[0, "machines"] == 2
    assert network.loc[3, "median_ape_pct"] < 0.5 * machine.loc[3, "median_ape_pct"]
    assert network.loc[3, "median_ape_pct"] < 0.5 * network.loc[0, "median_ape_pct"]
    with pytest.raises(ValueError, match="unit must be one of"):
        after_probe.scored_runs(oof, planned, probes=(1,), unit="lab")
