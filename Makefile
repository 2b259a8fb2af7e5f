# The Makefile is the contract. `make demo` and `make test` work on a fresh clone.
PY     ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
CONFIG ?= examples/llama2-7b-lora.yaml
PROFILE ?= quick

.PHONY: install demo test test-slow test-all lint format collect dataset train-model release-model evaluate ui bench clean
.PHONY: ludwig-env collect-ludwig timm-env timm-activations timm-census timm-catalog

install: $(STAMP)  ## virtual environment with CPU torch and every extra

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[all,dev]"
	touch $(STAMP)

demo: install  ## predict the bundled example with the shipped model
	$(BIN)/perfmodel predict --config $(CONFIG)

test: install  ## the test suite without the slow integration tests (CPU only, ~3 min on 2 cores)
	$(BIN)/python -m pytest -q -n 2 -m "not slow" -p no:schemathesis

test-slow: install  ## the slow ones: real processes, servers, Ray clusters, CPU training slices, model fits
	$(BIN)/python -m pytest -q -n 2 -m "slow and not timing"
	$(BIN)/python -m pytest -q -p no:xdist -m "slow and timing"  # wall-clock checks, one at a time on a quiet host

test-all: test test-slow  ## both (what CI runs)

lint: install
	$(BIN)/ruff check perfmodel collectors tests bench
	$(BIN)/mypy

format: install
	$(BIN)/ruff format perfmodel collectors tests bench

collect: install  ## measure this machine (PROFILE=quick|gpu|full) into datasets/raw/
	$(BIN)/python -m collectors --profile $(PROFILE)

dataset: install  ## merge own shards and public rows into datasets/features.parquet
	$(BIN)/perfmodel dataset build

timm-catalog: install  ## rewrite perfmodel/catalog/timm_models.csv (timm/<name>) from the imported timm rows
	$(BIN)/python -m collectors.public.timm_catalog

train-model: dataset  ## fit, evaluate, save under runs/, log to MLflow, register (models/ untouched)
	$(BIN)/perfmodel train

release-model: dataset  ## train-model, then write the champion into models/ if it beats the model there
	$(BIN)/perfmodel train --export

evaluate: install
	$(BIN)/perfmodel evaluate

ui: install  ## MLflow UI on the embedded store: one worker on 127.0.0.1:5000, no job runners, telemetry off
	@echo "MLflow UI, the perfmodel experiment's runs: $$(MLFLOW_TRACKING_URI=sqlite:///mlflow.db $(BIN)/python -c 'from perfmodel.tracking import experiment_url; print(experiment_url())' 2>/dev/null || echo http://127.0.0.1:5000)"
	MLFLOW_DISABLE_TELEMETRY=$${MLFLOW_DISABLE_TELEMETRY:-true} MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false \
		$(BIN)/mlflow ui --backend-store-uri sqlite:///mlflow.db --default-artifact-root ./mlartifacts \
		--host 127.0.0.1 --port 5000 --workers 1

bench: install  ## speed targets: train < 3 min on 2 cores, predict < 1.5 s cold, 200-point sweep < 5 s, monitor 10 M steps < 30 s and 500 MB
	$(BIN)/python bench/bench_predict.py
	$(BIN)/python bench/bench_sweep.py
	$(BIN)/python bench/bench_serve.py
	$(BIN)/python bench/bench_train.py
	$(BIN)/python bench/bench_kernels_fit.py
	$(BIN)/python bench/bench_monitor.py

# Opt-in, not part of install or CI: real Ludwig needs Python >= 3.12 and ~6 GB (torch 2.11 CUDA build from
# PyPI on x86_64). perfmodel finds this venv by itself (perfmodel/config/ludwig_venv.py); pins as measured in
# issue 16: torchaudio 2.11.1 does not load beside torch 2.11.0, so 2.11.0.
PY312      ?= $(or $(firstword $(wildcard $(HOME)/.pyenv/versions/3.12*/bin/python3.12)),python3.12)
LUDWIG_VENV ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/perfmodel/ludwig-0.17

ludwig-env:  ## opt-in: Python 3.12 venv with real Ludwig 0.17 (~6 GB, 2-5 min) for check-ludwig and collect-ludwig
	@command -v $(PY312) >/dev/null 2>&1 || { echo "error: $(PY312) not found: set PY312=/path/to/python3.12" >&2; exit 1; }
	$(PY312) -m venv $(LUDWIG_VENV)
	$(LUDWIG_VENV)/bin/python -m pip install -q --upgrade pip
	$(LUDWIG_VENV)/bin/python -m pip install -q 'ludwig==0.17.10' 'torch==2.11.0' 'torchaudio==2.11.0' \
		'torchvision==0.26.0' 'transformers==5.24.0' 'peft==0.21.2' 'accelerate==1.15.0'
	$(LUDWIG_VENV)/bin/python -c "import ludwig, ludwig.api; print('ludwig', ludwig.__version__, 'imports')"
	@echo "Ludwig venv: $(LUDWIG_VENV) (a non-default place: export LUDWIG_VENV=$(LUDWIG_VENV))"

collect-ludwig: install  ## real Ludwig trainings (ECD, tiny LLM LoRA) as rows in datasets/raw/ (needs make ludwig-env; ~6 min)
	LUDWIG_VENV=$(LUDWIG_VENV) $(BIN)/python -m collectors.ludwig_profile

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache build *.egg-info

.PHONY: transcripts
transcripts: install  ## re-run the command transcripts of docs/decide.md after a new model (bench/refresh_transcripts.py)
	$(BIN)/python bench/refresh_transcripts.py docs/decide.md

.PHONY: docs-check
docs-check: install  ## run README.md's runnable examples (```bash blocks after <!-- docs-check -->; bench/docs_check.py)
	$(BIN)/python bench/docs_check.py

timm-env:  ## the timm venv of the two targets below (opt-in: ~6 GB)
	test -x .venv-timm/bin/python || $(PY) -m venv .venv-timm
	.venv-timm/bin/pip install -q torch==2.14.1 torchvision==0.29.1 timm==0.9.16 pandas

timm-activations: timm-env  ## re-measure what each timm sweep model saves for backward (opt-in, ~40 min)
	.venv-timm/bin/python -m collectors.public.timm_activations

timm-census: timm-env  ## re-count the convolutions, matmuls and kernels of each timm sweep model (opt-in, ~15 min)
	.venv-timm/bin/python -W ignore -m collectors.public.timm_kernel_census
