"""Write examples/data/instructions.csv: 300 synthetic instruction/output pairs for the Ludwig
example (examples/ludwig-llama2-7b-qlora.yaml reads the columns `instruction` and `output`).

The text is generated from templates with a fixed seed: no real data, no model outputs. It exists
so that `perfmodel predict --config examples/ludwig-llama2-7b-qlora.yaml --dataset
examples/data/instructions.csv` runs as written (rows counted, tokens estimated from characters).

    python examples/data/make_instructions.py   # rewrites the CSV, byte for byte the same
"""

from __future__ import annotations

import csv
import random
from pathlib import Path

ROWS = 300
SEED = 13
OUT = Path(__file__).with_name("instructions.csv")

TOPICS = (
    "gradient accumulation",
    "mixed precision",
    "activation checkpointing",
    "data parallelism",
    "a learning-rate warm-up",
    "LoRA adapters",
    "4-bit quantization",
    "early stopping",
    "a validation split",
    "tokenization",
    "sequence packing",
    "weight decay",
    "a cosine schedule",
    "checkpoint averaging",
    "label smoothing",
    "gradient clipping",
    "a held-out test set",
)
VERBS = ("Explain", "Summarize", "Describe", "List the trade-offs of", "Give an example of", "Compare")
AUDIENCES = ("a new engineer", "a product manager", "a student", "an on-call SRE", "a researcher")
CLAIMS = (
    "it changes how much memory a training step needs",
    "it trades compute for memory",
    "it affects how many samples the model sees per optimizer step",
    "it can make training more stable",
    "it shortens the time to a usable model",
    "it interacts with the batch size",
    "it is cheap to try and easy to undo",
    "its benefit depends on the hardware",
)
ADVICE = (
    "Measure a few steps before committing to a long run.",
    "Change one setting at a time and record the result.",
    "Keep the evaluation set fixed while comparing settings.",
    "Watch the loss curve for the first few hundred steps.",
    "Prefer the simplest setting that meets the deadline.",
)


def make_rows(rows: int = ROWS, seed: int = SEED) -> list[dict[str, str]]:
    rng = random.Random(seed)
    out = []
    for _ in range(rows):
        topic = rng.choice(TOPICS)
        instruction = f"{rng.choice(VERBS)} {topic} for {rng.choice(AUDIENCES)}."
        if rng.random() < 0.4:
            instruction += f" Keep it under {rng.choice((50, 80, 120))} words."
        claims = rng.sample(CLAIMS, k=rng.randint(1, 4))
        sentences = [f"{topic[0].upper()}{topic[1:]} matters because {claims[0]}."]
        sentences += [f"Also, {c}." for c in claims[1:]]
        sentences.append(rng.choice(ADVICE))
        out.append({"instruction": instruction, "output": " ".join(sentences)})
    return out


def main() -> None:
    with OUT.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["instruction", "output"], lineterminator="\n")
        writer.writeheader()
        writer.writerows(make_rows())
    print(f"wrote {OUT} ({ROWS} rows)")


if __name__ == "__main__":
    main()
