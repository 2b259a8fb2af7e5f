"""Small synthetic datasets (CSV) for the Ludwig lab, and a tiny random Llama for the LLM run.

Run with the Ludwig venv:  .venv-ludwig/bin/python gen_data.py

Writes data/*.csv, data/images/*.png and models/tiny-llama/ (config, random weights, a word-level
tokenizer trained here on the synthetic corpus). No network.

Text: pseudo-words whose lengths in running text follow English word lengths (letters per word,
Brown-corpus-like distribution, mean ~4.7); within each length a Zipf-distributed vocabulary
(6,326 words in all); 15-60 words per review; the label is correlated with a few marker words so
the models can learn something.
"""

from __future__ import annotations

import json
import string
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent
DATA = ROOT / "data"
SEED = 1234

# English word-length distribution (share of running words of 1..12 letters; rounded from
# published Brown-corpus counts; normalised below).
WORD_LEN_P = np.array([0.032, 0.170, 0.210, 0.160, 0.110, 0.085, 0.080, 0.060, 0.045, 0.025, 0.013, 0.010])


def make_vocab(rng: np.random.Generator) -> dict[int, list[str]]:
    """Pseudo-words per length 1..12 (26 one-letter words, 300 two-letter, 600 of each longer)."""
    letters = np.array(list(string.ascii_lowercase))
    vocab: dict[int, list[str]] = {}
    for k in range(1, 13):
        want = 26 if k == 1 else (300 if k == 2 else 600)
        seen: set[str] = set()
        while len(seen) < want:
            seen.add("".join(rng.choice(letters, size=k)))
        vocab[k] = sorted(seen)
    return vocab


def zipf_probs(n: int, s: float = 1.07) -> np.ndarray:
    r = np.arange(1, n + 1, dtype=float)
    p = 1.0 / r**s
    return p / p.sum()


def text_column(rng: np.random.Generator, vocab: dict[int, list[str]], labels: np.ndarray, lo: int, hi: int) -> list[str]:
    """Running text whose word lengths follow WORD_LEN_P; within a length, words are Zipf-distributed."""
    len_p = WORD_LEN_P / WORD_LEN_P.sum()
    zipf = {k: zipf_probs(len(ws)) for k, ws in vocab.items()}
    markers = {0: ["bad", "awful"], 1: ["good", "great"], 2: ["okay", "fine"]}
    rows = []
    for y in labels:
        n_words = int(rng.integers(lo, hi + 1))
        lens = rng.choice(np.arange(1, 13), size=n_words, p=len_p)
        ws = [vocab[k][int(rng.choice(len(vocab[k]), p=zipf[k]))] for k in lens]
        m = markers[int(y) % 3]
        for _ in range(2):
            ws[int(rng.integers(0, n_words))] = m[int(rng.integers(0, 2))]
        rows.append(" ".join(ws))
    return rows


def tabular(rng: np.random.Generator, n: int) -> pd.DataFrame:
    df = pd.DataFrame(
        {
            "age": rng.integers(18, 90, n),
            "income": rng.lognormal(10, 1, n).round(2),
            "hours": rng.normal(40, 10, n).round(1),
            "score": rng.normal(0, 1, n).round(4),
            "workclass": rng.choice([f"w{i}" for i in range(8)], n),
            "education": rng.choice([f"e{i}" for i in range(16)], n),
            "region": rng.choice([f"r{i}" for i in range(40)], n),
            "flag": rng.choice(["yes", "no"], n),
        }
    )
    logit = 0.03 * (df.age - 50) + 0.5 * df.score + (df.flag == "yes") * 0.7
    df["label"] = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    return df


def images(rng: np.random.Generator, n: int, size: int = 28) -> pd.DataFrame:
    from PIL import Image

    img_dir = DATA / "images"
    img_dir.mkdir(parents=True, exist_ok=True)
    labels = rng.integers(0, 10, n)
    paths = []
    for i, y in enumerate(labels):
        a = (rng.random((size, size)) * 60).astype(np.uint8)
        r = 3 + int(y)  # a bright square whose size encodes the label
        a[4 : 4 + r, 4 : 4 + r] = 230
        p = img_dir / f"img_{i:05d}.png"
        if not p.exists():
            Image.fromarray(a, mode="L").save(p)
        paths.append(str(p))
    return pd.DataFrame({"image_path": paths, "label": [f"c{y}" for y in labels]})


def tiny_llama(corpus: list[str]) -> Path:
    """A random 2-layer Llama (hidden 64) with a word-level tokenizer trained on `corpus`."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    out = ROOT / "models" / "tiny-llama"
    out.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.WordLevelTrainer(vocab_size=2000, special_tokens=["<unk>", "<s>", "</s>", "<pad>"])
    tok.train_from_iterator(corpus, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>", pad_token="<pad>"
    )
    fast.save_pretrained(out)
    torch.manual_seed(SEED)
    cfg = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=512,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(cfg)
    model.save_pretrained(out)
    n_params = sum(p.numel() for p in model.parameters())
    (out / "lab_info.json").write_text(json.dumps({"params": n_params, "vocab_size": len(fast)}, indent=1))
    print(f"tiny llama: {n_params:,} params, vocab {len(fast)} -> {out}")
    return out


def main() -> None:
    rng = np.random.default_rng(SEED)
    DATA.mkdir(exist_ok=True)
    vocab = make_vocab(rng)
    for n in (2000, 4000):
        tabular(rng, n).to_csv(DATA / f"tabular_{n}.csv", index=False)
    img = images(rng, 4000)
    img.iloc[:2000].to_csv(DATA / "images_2000.csv", index=False)
    img.to_csv(DATA / "images_4000.csv", index=False)
    for n in (2000, 4000):
        y = rng.integers(0, 3, n)
        pd.DataFrame({"review": text_column(rng, vocab, y, 15, 60), "label": [f"l{v}" for v in y]}).to_csv(
            DATA / f"text_{n}.csv", index=False
        )
    llm_frames = {}
    for n in (500, 1000):
        y = rng.integers(0, 3, n)
        instr = text_column(rng, vocab, y, 10, 30)
        outp = text_column(rng, vocab, y, 5, 15)
        llm_frames[n] = pd.DataFrame({"instruction": instr, "output": outp})
        llm_frames[n].to_csv(DATA / f"llm_{n}.csv", index=False)
    corpus = list(llm_frames[1000]["instruction"]) + list(llm_frames[1000]["output"])
    tiny_llama(corpus)
    for p in sorted(DATA.glob("*.csv")):
        df = pd.read_csv(p)
        print(p.name, len(df), "rows")


if __name__ == "__main__":
    main()
