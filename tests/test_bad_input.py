"""Bad input through the real CLI entry point (`perfmodel.cli.main`, in this process, output
captured): each case exits with its code, says one line on stderr (a ConfigError listing several
problems: its first line and one line per problem), prints no traceback and nothing on stdout, and
the inputs that used to hang or exhaust memory finish in under a second.

To add a case, add a row to CASES: an id, the argv (a function of the case's temporary folder, so
it can write files first), the expected exit code and a phrase of the message.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from perfmodel.cli import main

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "llama2-7b-lora.yaml"
VALID = "model:\n  name: llama2-7b\ntraining:\n  tokens: 1.0e8\nhardware:\n  gpu: A100-80GB\n"
LUDWIG = (
    "model_type: ecd\ninput_features:\n  - {name: x, type: number}\noutput_features:\n  - {name: y, type: binary}\n"
    "combiner: {type: concat, num_fc_layers: 1000000000}\n"
)
HANG_LIMIT_S = 1.0
"""CPU seconds a case that used to hang (FIFO, /dev/zero, alias bomb, huge file) may take now.
CPU time of this process, not wall time, so a loaded CI host does not fail it; a case that
blocks (a FIFO) is caught by the 20 s alarm in `_no_hangs_and_no_hf_cache`."""


@dataclass(frozen=True)
class Case:
    """One bad input and what the CLI must answer."""

    id: str
    argv: Callable[[Path], list[str]]
    """The arguments after `perfmodel`, given the case's temporary folder."""
    expect: str
    """A phrase the message must contain."""
    code: int = 1
    """Exit code: 1 for bad input, 2 for usage errors."""
    lines: int = 1
    """Lines on stderr (a list of N problems is N + 1 lines)."""
    fast: bool = False
    """The input used to hang or exhaust memory: assert it now takes under HANG_LIMIT_S."""
    absent: tuple[str, ...] = ()
    """Phrases the message must not contain (content that must not be echoed)."""


def config(text: str | bytes, name: str = "run.yaml") -> Callable[[Path], Path]:
    def make(d: Path) -> Path:
        path = d / name
        path.write_bytes(text.encode() if isinstance(text, str) else text)
        return path

    return make


def predict(make: Callable[[Path], Path], *extra: str) -> Callable[[Path], list[str]]:
    return lambda d: ["predict", "--config", str(make(d)), *extra]


def with_valid(extra: str) -> str:
    """The valid config with `extra` lines added to a section (written as 'section:\\n  key: value')."""
    section, _, rest = extra.partition("\n")
    return VALID.replace(section + "\n", section + "\n" + rest + "\n", 1)


def fifo(d: Path) -> Path:
    path = d / "pipe.yaml"
    os.mkfifo(path)
    return path


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """The 'billion laughs' document: `levels` anchors, each `width` aliases of the one before."""
    lines = ["a0: &a0 [" + ", ".join(["lol"] * width) + "]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def nested_dataset_config(d: Path) -> Path:
    (d / "rows.csv").write_text("secret_column_a,secret_column_b\n1,2\n")
    return config(VALID.replace("  tokens: 1.0e8\n", "  dataset: rows.csv\n  text_columns: [body]\n"))(d)


def run_fifo(name: str) -> Callable[[Path], Path]:
    def make(d: Path) -> Path:
        path = d / name
        os.mkfifo(path)
        return path

    return make


def dev_zero_named(name: str) -> Callable[[Path], Path]:
    def make(d: Path) -> Path:
        path = d / name
        path.symlink_to("/dev/zero")
        return path

    return make


def monitor(make: Callable[[Path], Path], *extra: str) -> Callable[[Path], list[str]]:
    return lambda d: ["monitor", str(make(d)), *extra]


def ingest(make: Callable[[Path], Path], *extra: str) -> Callable[[Path], list[str]]:
    return lambda d: ["ingest", str(make(d)), "--config", str(EXAMPLE), "--out", str(d / "out"), *extra]


def closed_port() -> int:
    """A loopback port nothing listens on."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def dataset_fifo(d: Path) -> list[str]:
    path = d / "rows.csv"
    os.mkfifo(path)
    return ["predict", "--config", str(EXAMPLE), "--dataset", str(path)]


# fmt: off
CASES = [
    # --- files that used to hang, exhaust memory or be misread --------------------------------------
    Case("alias-bomb", predict(config(alias_bomb())), "aliases expand to more than", fast=True),
    Case("alias-bomb-two-per-level", predict(config(alias_bomb(levels=40, width=2))), "aliases expand to more than", fast=True),
    Case("alias-too-many", predict(config("a: &a 1\nb: [" + ", ".join(["*a"] * 150) + "]\n")), "more than 100 YAML aliases", fast=True),
    Case("alias-recursive", predict(config("a: &a [*a]\n")), "refers to itself", fast=True),
    Case("fifo-config", lambda d: ["predict", "--config", str(fifo(d))], "is a FIFO (named pipe), not a regular file", fast=True),
    Case("dev-zero-config", lambda d: ["predict", "--config", "/dev/zero"], "is a character device, not a regular file", fast=True),
    Case("oversize-config", predict(config(VALID + "#" * 1_500_000 + "\n")), "bytes; the limit is 1,000,000", fast=True),
    Case("deep-nesting", predict(config("a: " + "[" * 5000 + "]" * 5000 + "\n")), "nests deeper than 100 levels", fast=True),
    Case("control-character", predict(config("model:\n  name: llama2-7b\x1b\n")), "is not valid YAML: unacceptable character #x001b"),
    Case("fifo-dataset", dataset_fifo, "is not a regular file", fast=True),
    Case("ludwig-layer-count", predict(config(LUDWIG), "--rows", "100"), "num_fc_layers must be a whole number between 0 and 10,000", fast=True),
    Case("fifo-run-file-monitor", monitor(run_fifo("steps.csv")), "is a FIFO (named pipe), not a regular file", fast=True),
    Case("fifo-run-file-ingest", ingest(run_fifo("perfmodel_run.json")), "is a FIFO (named pipe), not a regular file", fast=True),
    Case("dev-zero-named-json", monitor(dev_zero_named("trainer_state.json")), "is a character device, not a regular file", fast=True),
    Case("dev-zero-named-csv", ingest(dev_zero_named("steps.csv")), "is a character device, not a regular file", fast=True),
    Case("ray-nothing-listening", lambda d: ["collect", "--ray", f"127.0.0.1:{closed_port()}", "--out", str(d / "out")],
         "Connection refused; start one (`ray start --head`)"),
    Case("huge-value-is-not-echoed", predict(config(VALID.replace("A100-80GB", "x" * 200_000))), "unknown GPU 'xxx"),
    # --- unreadable configs -------------------------------------------------------------------------
    Case("directory-config", lambda d: ["predict", "--config", str(d)], "is a directory"),
    Case("missing-config", lambda d: ["predict", "--config", str(d / "nope.yaml")], "nope.yaml does not exist"),
    Case("empty-config", predict(config("")), "is empty"),
    Case("comments-only-config", predict(config("# nothing\n")), "is empty"),
    Case("malformed-yaml", predict(config("model: [unclosed\n")), "is not valid YAML at line 2"),
    Case("tab-indented-yaml", predict(config("model:\n\tname: x\n")), "is not valid YAML at line"),
    Case("list-config", predict(config("- a\n- b\n")), "must hold a mapping"),
    Case("not-utf8", predict(config(b"model:\n  name: \xff\xfe\n")), "is not UTF-8 text"),
    Case("python-tag", predict(config("!!python/object/apply:os.system ['true']\n")), "could not determine a constructor"),
    Case("int-of-5000-digits", predict(config(with_valid("model:\n  vocab_size: 1" + "0" * 5000))), "cannot be read: Exceeds the limit"),
    # --- duplicate keys -----------------------------------------------------------------------------
    Case("duplicate-top-level", predict(config(VALID + "training:\n  seq_len: 128\n")), "duplicate key training at line 7 (first at line 3)"),
    Case("duplicate-nested", predict(config(with_valid("training:\n  seq_len: 128\n  seq_len: 256"))),
         "duplicate key training.seq_len at line 5 (first at line 4)"),
    Case("duplicate-in-ludwig", predict(config("trainer:\n  epochs: 1\n  epochs: 2\n"), "--rows", "10"), "duplicate key trainer.epochs at line 3"),
    # --- numbers ------------------------------------------------------------------------------------
    Case("nan", predict(config(with_valid("training:\n  micro_batch_size: .nan"))), "training.micro_batch_size must be a finite number"),
    Case("infinity", predict(config(with_valid("training:\n  seq_len: .inf"))), "training.seq_len must be a finite number"),
    Case("1e300-hidden-size", predict(config("model:\n  name: x\n  hidden_size: 1e300\n  num_layers: 2\n  num_heads: 2\n"
                                             + VALID.split("\n", 2)[2])), "model.hidden_size must be between 1 and 1,048,576"),
    Case("1e9-gpus-in-file", predict(config(with_valid("hardware:\n  num_gpus: 1.0e9"))), "hardware.num_gpus must be between 1 and 1,000,000"),
    Case("1e9-gpus-flag", predict(config(VALID), "--num-gpus", "1000000000"), "hardware.num_gpus must be between 1 and 1,000,000"),
    Case("negative", predict(config(with_valid("training:\n  micro_batch_size: -8"))), "training.micro_batch_size must be between 1 and"),
    Case("zero", predict(config(with_valid("training:\n  seq_len: 0"))), "training.seq_len must be between 1 and"),
    Case("string-for-number", predict(config(with_valid("training:\n  micro_batch_size: eight"))),
         "training.micro_batch_size must be a number, got 'eight'"),
    Case("fraction-for-whole", predict(config(with_valid("training:\n  micro_batch_size: 2.5"))), "training.micro_batch_size must be a whole number"),
    Case("string-for-bool", predict(config(with_valid("training:\n  activation_checkpointing: maybe"))), "must be true or false"),
    Case("gpus-beyond-one-node", predict(config(with_valid("hardware:\n  num_nodes: 1")), "--num-gpus", "64"),
         "hardware.num_gpus (64) does not fit on hardware.num_nodes (1): one A100-80GB server holds 8, so 64 GPUs need 8 nodes"),
    Case("million-gpus-one-node", predict(config(with_valid("hardware:\n  num_nodes: 1")), "--num-gpus", "1000000"),
         "set hardware.num_nodes to 125000 (--set hardware.num_nodes=125000) or leave it out"),
    Case("set-leading-zero", predict(config(VALID), "--set", "training.seq_len=017"), "017 is not a decimal number (YAML would read it in base 8)"),
    Case("set-hex", predict(config(VALID), "--set", "training.seq_len=0x100"), "0x100 is not a decimal number (YAML would read it in base 16)"),
    Case("set-binary", predict(config(VALID), "--set", "training.micro_batch_size=0b101"), "0b101 is not a decimal number (YAML would read it in base 2)"),
    Case("set-base-60", predict(config(VALID), "--set", "training.seq_len=1:30"), "1:30 is not a decimal number (YAML would read it in base 60)"),
    Case("vary-leading-zero", lambda d: ["sweep", "--config", str(config(VALID)(d)), "--vary", "training.seq_len=512,017"],
         "--vary 'training.seq_len=512,017': 017 is not a decimal number"),
    Case("monitor-no-usable-row", monitor(config("step,step_time_s\n1,nan\n2,-1\n", "steps.csv")),
         "has no row with a usable step and time; skipped 2 of 2 rows"),
    Case("tokens-flag-negative", predict(config(VALID), "--tokens", "-5"), "--tokens must be > 0"),
    Case("rows-flag-too-many", predict(config(VALID), "--rows", "100000000000000000000"), "--rows must be between 1 and"),
    # --- keys, names, enumerations ------------------------------------------------------------------
    Case("unknown-top-level-key", predict(config(VALID + "models: {}\n")), "unknown top-level key 'models'"),
    Case("unknown-nested-key", predict(config(with_valid("training:\n  lora_rank: 8"))), "unknown key training.lora_rank (did you mean lora_r?)"),
    Case("unknown-framework", predict(config(VALID + "framework: hf-eagr\n")), "got 'hf-eagr'; did you mean hf-eager"),
    Case("unknown-gpu-family", predict(config(VALID), "--gpu", "A100"), "did you mean A100-40GB, A100-80GB, A100-PCIe-40GB, A100-PCIe-80GB"),
    Case("unknown-gpu-typo", predict(config(VALID.replace("A100-80GB", "A100-80G"))), "unknown GPU 'A100-80G'; did you mean A100-80GB"),
    Case("unknown-model", predict(config(VALID.replace("llama2-7b", "lama2-7b"))), "unknown model 'lama2-7b'; did you mean llama2-7b"),
    Case("uncached-hf-id", predict(config(VALID.replace("llama2-7b", "microsoft/deberta-v3-base"))), "local Hugging Face cache"),
    Case("bad-precision", predict(config(with_valid("training:\n  precision: fp4"))), "training.precision must be one of"),
    Case("bad-strategy", predict(config(with_valid("hardware:\n  strategy: fsdp2"))), "hardware.strategy must be one of ddp, fsdp"),
    Case("precision-the-gpu-lacks", predict(config(with_valid("training:\n  precision: fp8"))), "A100-80GB has no fp8 support"),
    Case("model-path-without-config", lambda d: ["predict", "--config", str(config(VALID.replace("name: llama2-7b", "path: nowhere"))(d))],
         "does not exist (give a Hugging Face config.json"),
    Case("dataset-column-not-echoed", lambda d: ["predict", "--config", str(nested_dataset_config(d))],
         "has no column 'body' (named by training.text_columns)", absent=("secret_column_a", "secret_column_b")),
    Case("several-problems", predict(config(with_valid("training:\n  seq_len: 0\n  lora_rank: 8") + "framework: torchtun\n")), "3 problems in", lines=4),
    # --- Hugging Face keys --------------------------------------------------------------------------
    Case("hf-key-refused", predict(config(with_valid("training:\n  deepspeed: ds_config.json"))), "use hardware.strategy (zero1, zero2 or zero3)"),
    Case("hf-4bit-optimizer", predict(config(with_valid("training:\n  optim: adamw_torch_4bit"))), "4-bit optimizer state is not modelled"),
    Case("hf-and-native-precision", predict(config(with_valid("training:\n  bf16: true\n  precision: bf16"))),
         "training.bf16 and training.precision set the same thing"),
    # --- flags --------------------------------------------------------------------------------------
    Case("set-without-equals", predict(config(VALID), "--set", "training.micro_batch_size"), "must look like section.key=value"),
    Case("set-without-value", predict(config(VALID), "--set", "training.micro_batch_size="), "has no value"),
    Case("set-unknown-section", predict(config(VALID), "--set", "gpu=A100-80GB"), "unknown section 'gpu'"),
    Case("set-mapping-value", predict(config(VALID), "--set", "training.seq_len={a: 1}"), "the value must be a number, a word"),
    Case("set-empty-key-part", predict(config(VALID), "--set", "training..seq_len=5"), "the key must be a dotted path"),
    Case("tokens-and-rows", predict(config(VALID), "--tokens", "1e6", "--rows", "10"), "give only one of --tokens, --rows, --dataset"),
    Case("ludwig-without-size", predict(config(LUDWIG.replace("num_fc_layers: 1000000000", "num_fc_layers: 2"))), "the dataset size is required"),
    Case("usage-not-an-int", predict(config(VALID), "--num-gpus", "many"), "usage error", code=2),
    Case("usage-unknown-flag", lambda d: ["predict", "--no-such-flag"], "usage error", code=2),
]
# fmt: on


@pytest.fixture(autouse=True)
def _no_hangs_and_no_hf_cache(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """A case that hangs fails after 20 s instead of blocking the suite; the Hugging Face cache is an
    empty folder (so 'not cached' does not depend on this machine)."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path_factory.mktemp("hf-cache")))

    def timeout(signum: int, frame: object) -> None:
        raise TimeoutError("the CLI did not answer within 20 s")

    previous = signal.signal(signal.SIGALRM, timeout)
    signal.alarm(20)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture(scope="module", autouse=True)
def _warm() -> None:
    """Import what `predict` imports before timing anything (a cold import is not a hang)."""
    import perfmodel.config  # noqa: F401
    from perfmodel.safe_yaml import load_yaml_text

    load_yaml_text("a: 1", source="warm-up")


def cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str, float]:
    start = time.process_time()
    try:
        main(argv)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    elapsed = time.process_time() - start
    out, err = capsys.readouterr()
    return code, out, err, elapsed


def test_the_table_is_big_enough_and_ids_are_unique():
    assert len(CASES) >= 70
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_a_short_message_and_an_exit_code(
    case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = case.argv(tmp_path)
    code, out, err, elapsed = cli(argv, capsys)
    lines = err.strip().splitlines()
    assert code == case.code, (code, err)
    assert len(lines) == case.lines, err[:2000]
    assert case.expect in err, err[:2000]
    assert "Traceback" not in err and out == ""
    assert all(len(line) < 1200 for line in lines), "a message quoted too much of a value"
    for phrase in case.absent:
        assert phrase not in err
    if case.fast:
        assert elapsed < HANG_LIMIT_S, f"{case.id} took {elapsed:.2f} s"


def test_json_output_is_strict_json_on_a_valid_config(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err, _ = cli(["predict", "--config", str(EXAMPLE), "--json"], capsys)
    assert code == 0, err

    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} is not JSON")

    data = json.loads(out, parse_constant=refuse)  # NaN, Infinity and -Infinity would land here
    assert data["step_time_s"]["estimate"] > 0


def test_a_non_finite_result_is_an_error_not_nan(capsys: pytest.CaptureFixture[str]) -> None:
    from perfmodel.cli import _common
    from perfmodel.errors import NonFiniteError

    with pytest.raises(NonFiniteError, match=r"non-finite number at step_time_s\.low"):
        _common.print_json({"step_time_s": {"estimate": 1.0, "low": float("nan")}})
    assert capsys.readouterr().out == ""  # nothing half-printed


def test_hugging_face_keys_that_map_are_accepted_and_stated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = with_valid("training:\n  per_device_train_batch_size: 4\n  bf16: true\n  learning_rate: 2.0e-5")
    code, out, err, _ = cli(["predict", "--config", str(config(text)(tmp_path)), "--json"], capsys)
    assert code == 0, err
    data = json.loads(out)
    assert data["workload"]["training"]["micro_batch_size"] == 4
    assert data["workload"]["training"]["precision"] == "amp_bf16"
    assert any("read as training.precision = amp_bf16" in a for a in data["assumptions"])


def test_debug_shows_the_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from perfmodel.errors import CatalogError

    with pytest.raises(CatalogError):  # --debug re-raises: the interpreter prints the traceback
        main(["--debug", "predict", "--config", str(config(VALID.replace("A100-80GB", "nosuch"))(tmp_path))])
    code, _, err, _ = cli(
        ["predict", "--config", str(config(VALID.replace("A100-80GB", "nosuch"))(tmp_path))], capsys
    )
    assert code == 1 and "Traceback" not in err  # and the next run without --debug is back to one line


README = ROOT / "README.md"
TABLE_BEGIN, TABLE_END = "<!-- bad-input-table: tests/test_bad_input.py -->", "<!-- /bad-input-table -->"
UPDATE_README_ENV = "PERFMODEL_UPDATE_README_TABLE"


def readme_table() -> str:
    """The README's reliability table, one line per case of CASES."""
    lines = [
        "| case | exit | the one-line message says | used to hang or exhaust memory |",
        "|---|---|---|---|",
    ]
    for c in CASES:
        phrase = c.expect.replace("|", "\\|")
        lines.append(f"| `{c.id}` | {c.code} | {phrase} | {'yes: now < 1 s of CPU' if c.fast else ''} |")
    return "\n".join(lines)


def test_the_readme_lists_every_case():
    """README.md's reliability section is this table; regenerate it after changing CASES with
    PERFMODEL_UPDATE_README_TABLE=1 .venv/bin/python -m pytest -q tests/test_bad_input.py -k readme"""
    text = README.read_text(encoding="utf-8")
    assert TABLE_BEGIN in text and TABLE_END in text, "README.md lacks the bad-input table markers"
    head, rest = text.split(TABLE_BEGIN, 1)
    current, tail = rest.split(TABLE_END, 1)
    wanted = "\n" + readme_table() + "\n"
    if os.environ.get(UPDATE_README_ENV) == "1":
        README.write_text(head + TABLE_BEGIN + wanted + TABLE_END + tail, encoding="utf-8")
        return
    assert current == wanted, f"README.md's table is out of date: {UPDATE_README_ENV}=1 pytest -k readme"
