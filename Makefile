# The Makefile is the contract. `make demo` and `make test` work on a fresh clone.
PY     ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
CONFIG ?= examples/llama2-7b-lora.yaml
PROFILE ?= quick

.PHONY: install demo test test-fast lint format collect dataset train-model evaluate ui bench clean

install: $(STAMP)  ## virtual environment with CPU torch and every extra

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[all,dev]"
	touch $(STAMP)

demo: install  ## predict the bundled example with the shipped model
	$(BIN)/perfmodel predict --config $(CONFIG)

test: install  ## the full test suite (CPU only)
	$(BIN)/python -m pytest -q -n 2

test-fast: install
	$(BIN)/python -m pytest -q -n 2 -m "not slow"

lint: install
	$(BIN)/ruff check perfmodel collectors tests bench
	$(BIN)/mypy

format: install
	$(BIN)/ruff format perfmodel collectors tests bench

collect: install  ## measure this machine (PROFILE=quick|gpu|full) into datasets/raw/
	$(BIN)/python -m collectors --profile $(PROFILE)

dataset: install  ## merge own shards and public rows into datasets/features.parquet
	$(BIN)/perfmodel dataset build

train-model: dataset  ## fit, evaluate, log to MLflow, register, export models/
	$(BIN)/perfmodel train

evaluate: install
	$(BIN)/perfmodel evaluate

ui: install  ## MLflow UI on the embedded store
	$(BIN)/mlflow ui --backend-store-uri sqlite:///mlflow.db --default-artifact-root ./mlartifacts

bench: install  ## speed targets: train < 3 min on 2 cores, predict < 1.5 s cold
	$(BIN)/python bench/bench_predict.py
	$(BIN)/python bench/bench_train.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache build *.egg-info
