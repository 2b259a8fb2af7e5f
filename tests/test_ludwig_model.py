"""The model Ludwig builds from a config and its data, as perfmodel costs it, against what real
Ludwig 0.17.10 built.

Oracles are Ludwig's own parameter counts (sum of numel over LudwigModel.model.parameters(), per
module), measured by the `ludwig` collector on this project's CPU and committed with its records in
datasets/raw/ludwig_runs/cpu-2c-cba6f5/: e.g. tab_nocombiner_bs16_3000.json ("model_params": 417921;
combiner.projectors 19712, combiner.transformer_stack 395776, combiner.cls_token 256). Text models:
over three dataset sizes Ludwig's count was a fixed part + 256 x its vocabulary (parallel_cnn
1,575,427; rnn 132,355; transformer 412,419 at 62 padded positions; 3 output classes).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from perfmodel.config import load_workload
from perfmodel.config.ludwig_data import measure_ludwig_data, space_punct

NUMBERS = ["age", "income", "hours", "score"]
CATEGORIES = {"workclass": 8, "education": 16, "region": 40}  # distinct values, as in the measured runs


def lines(w, needle: str) -> list[str]:
    return [a for a in w.assumptions if needle in a]


def tabular(tmp_path: Path, rows: int = 400) -> Path:
    data = {n: [float(i % 13) for i in range(rows)] for n in NUMBERS}
    data.update({c: [f"{c[0]}{i % k}" for i in range(rows)] for c, k in CATEGORIES.items()})
    data["flag"] = ["yes" if i % 2 else "no" for i in range(rows)]
    data["label"] = [i % 2 for i in range(rows)]
    path = tmp_path / "tab.csv"
    pd.DataFrame(data).to_csv(path, index=False)
    return path


def config(tmp_path: Path, cfg: dict, name: str = "cfg.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(cfg))
    return path


TAB_INPUTS = (
    [{"name": n, "type": "number"} for n in NUMBERS]
    + [{"name": c, "type": "category"} for c in CATEGORIES]
    + [{"name": "flag", "type": "binary"}]
)


@pytest.mark.parametrize(
    "combiner,inputs,params",
    [
        ({"combiner": {"type": "concat"}}, TAB_INPUTS, 1_990),  # tab_concat_bs16_3000.json
        (
            {},
            TAB_INPUTS,
            417_921,
        ),  # no combiner, 8 inputs: Ludwig builds an FT-Transformer (tab_nocombiner_*.json)
        (
            {},
            [{"name": "age", "type": "number"}, {"name": "region", "type": "category"}],
            1_642,
        ),  # 2 inputs: concat
    ],
)
def test_tabular_models_have_ludwigs_parameter_count(tmp_path, combiner, inputs, params):
    cfg = {
        "input_features": inputs,
        "output_features": [{"name": "label", "type": "binary"}],
        "trainer": {"batch_size": 16, "epochs": 1},
        **combiner,
    }
    w = load_workload(config(tmp_path, cfg), dataset=tabular(tmp_path), gpu="cpu")
    assert w.model.params_total == params and w.framework == "ludwig"
    if not combiner:
        rule = (
            "ft_transformer (>= 3 input features"
            if len(inputs) >= 3
            else "concat (fewer than 3 input features"
        )
        assert lines(w, f"combiner not given: Ludwig 0.17.10 builds {rule}")
        assert lines(w, "perfmodel's table of Ludwig 0.17.10 defaults")


def test_without_data_the_category_vocabulary_is_an_assumption(tmp_path):
    cfg = {
        "input_features": TAB_INPUTS,
        "output_features": [{"name": "label", "type": "binary"}],
        "combiner": {"type": "concat"},
    }
    w = load_workload(config(tmp_path, cfg), rows=1000, gpu="cpu")
    assert lines(w, "category vocabularies assumed 1,000")
    assert (
        w.model.params_total > 1_990
    )  # 1,000 values embed in 50 dimensions each: larger than Ludwig's model


def text_data(tmp_path: Path) -> tuple[Path, int]:
    """60-token longest row (-> 62 padded positions, as in the measured runs), 3 classes; returns
    the file and its distinct tokens (counted here by splitting on spaces)."""
    rows = [" ".join(f"w{(i * 7 + j) % 97}" for j in range(60 if i == 0 else 10 + i % 20)) for i in range(90)]
    rows[1] += " Hello, world!"  # punctuation is a token of its own with space_punct
    distinct = {t for r in rows for t in r.replace(",", " , ").replace("!", " ! ").split()}
    path = tmp_path / "text.csv"
    pd.DataFrame({"review": rows, "label": [f"l{i % 3}" for i in range(90)]}).to_csv(path, index=False)
    return path, len(distinct)


@pytest.mark.parametrize(
    "encoder,fixed", [("parallel_cnn", 1_575_427), ("rnn", 132_355), ("transformer", 412_419)]
)
def test_text_models_have_ludwigs_parameter_count_from_the_data(tmp_path, encoder, fixed):
    path, distinct = text_data(tmp_path)
    cfg = {
        "input_features": [{"name": "review", "type": "text", "encoder": {"type": encoder}}],
        "output_features": [{"name": "label", "type": "category"}],
        "trainer": {"batch_size": 16, "epochs": 1},
    }
    w = load_workload(config(tmp_path, cfg), dataset=path, gpu="cpu")
    vocab = distinct + 4  # Ludwig's text vocabulary: distinct tokens + <PAD>, <UNK>, <SOS>, <EOS>
    assert w.model.params_total == fixed + 256 * vocab
    assert lines(w, f"vocabulary {vocab:,}") and lines(w, "sequences padded to 62")


def test_space_punct_tokenizes_like_ludwig():
    # ludwig/utils/tokenizers.py SpacePunctuationStringToListTokenizer: \\w runs and single punctuation marks
    assert space_punct("Hello, world! it's 3.5 e_mail") == [
        "Hello",
        ",",
        "world",
        "!",
        "it",
        "'",
        "s",
        "3",
        ".",
        "5",
        "e_mail",
    ]
    assert space_punct("  ") == []


def test_ludwig_data_reads_vocabularies_and_lengths(tmp_path):
    path, distinct = text_data(tmp_path)
    data = measure_ludwig_data(
        path, categories={"label": 10000, "absent": 10}, texts={"review": ("space_punct", 20000)}
    )
    assert data.rows == 90 and data.categories == {"label": 3}
    stats = data.texts["review"]
    assert (stats.vocab_size, stats.longest_tokens, stats.padded_length(256), stats.padded_length(32)) == (
        distinct + 4,
        60,
        62,
        32,
    )
    capped = measure_ludwig_data(path, categories={}, texts={"review": ("space_punct", 10)})
    assert capped.texts["review"].vocab_size == 10 + 4  # most_common caps the learned tokens


def test_llm_fine_tuning_defaults_batch_size_1(tmp_path):
    cfg = {
        "model_type": "llm",
        "base_model": "llama2-7b",
        "adapter": {"type": "lora"},
        "input_features": [{"name": "q", "type": "text"}],
        "output_features": [{"name": "a", "type": "text"}],
        "trainer": {"type": "finetune", "epochs": 1},
    }
    w = load_workload(config(tmp_path, cfg), rows=1000)
    assert w.training.micro_batch_size == 1 and lines(w, "trainer.batch_size not given: Ludwig's default 1")


def test_llm_sequence_length_from_the_base_models_own_tokenizer(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    model = tmp_path / "tiny"
    model.mkdir()
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel({"<unk>": 0, "a": 1, "b": 2}, unk_token="<unk>"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tok.save(str(model / "tokenizer.json"))
    (model / "config.json").write_text(
        '{"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, '
        '"num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 3}'
    )
    pd.DataFrame({"q": ["a b a b"] * 50, "a": ["b a"] * 50}).to_csv(tmp_path / "qa.csv", index=False)
    cfg = {
        "model_type": "llm",
        "base_model": str(model),
        "adapter": {"type": "lora"},
        "input_features": [{"name": "q", "type": "text"}],
        "output_features": [{"name": "a", "type": "text"}],
        "trainer": {"type": "finetune", "epochs": 1, "batch_size": 4},
    }
    w = load_workload(config(tmp_path, cfg), dataset=tmp_path / "qa.csv", gpu="cpu")
    assert w.training.seq_len == 4 + 2  # 4 + 2 word-level tokens per row; characters / 4 would say 4
    assert lines(w, "by the base model's own tokenizer")
