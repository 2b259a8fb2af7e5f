"""The web page in a real headless Chromium, driven over the Chrome DevTools protocol.

The browser talks CDP over a pipe (`--remote-debugging-pipe`: JSON messages, NUL-terminated, on
file descriptors 3 and 4), so no driver binary and no websocket library are needed. The server is
a real uvicorn on a free local port. Skipped when no Chromium is installed (`apt-get install -y
chromium`); CI installs it. Set PERFMODEL_E2E_SCREENSHOT=PATH to keep the page's screenshot.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import queue
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # a real headless Chromium and server: integration tests

ROOT = Path(__file__).resolve().parents[1]
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
BROWSER = next((found for name in BROWSERS if (found := shutil.which(name))), None)
BASH = shutil.which("bash") or "/bin/bash"  # dash cannot redirect descriptors above 9
LUDWIG_WITHOUT_DATA = (ROOT / "examples" / "ludwig-llama2-7b-qlora.yaml").read_text()

if BROWSER is None:
    pytest.skip("no Chromium installed (apt-get install -y chromium)", allow_module_level=True)


class Browser:
    """Headless Chromium with one page, driven over CDP on a pipe."""

    def __init__(self, profile: Path, width: int = 1280, height: int = 900) -> None:
        to_browser_r, to_browser_w = os.pipe()
        from_browser_r, from_browser_w = os.pipe()
        # Above 10 so the shell's `3<&N 4>&M` cannot clobber one with the other.
        child_in, child_out = (fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_browser_r, from_browser_w))
        os.close(to_browser_r)
        os.close(from_browser_w)
        flags = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--remote-debugging-pipe",
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            "about:blank",
        ]
        self.proc = subprocess.Popen(
            [BASH, "-c", f'exec "$0" "$@" 3<&{child_in} 4>&{child_out}', BROWSER, *flags],
            pass_fds=(child_in, child_out),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(child_in)
        os.close(child_out)
        self._out = os.fdopen(to_browser_w, "wb", buffering=0)
        self._in = from_browser_r
        self._replies: dict[int, queue.Queue[dict[str, Any]]] = {}
        self.events: list[dict[str, Any]] = []
        self._next = 0
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()
        targets = self.send("Target.getTargets")["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        self.session = self.send("Target.attachToTarget", targetId=page["targetId"], flatten=True)[
            "sessionId"
        ]
        for method in ("Page.enable", "Runtime.enable", "Network.enable"):
            self.send(method, session=True)
        self.send(
            "Emulation.setDeviceMetricsOverride",
            session=True,
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )

    def _read(self) -> None:
        buffer = b""
        while True:
            chunk = os.read(self._in, 65536)
            if not chunk:
                return
            buffer += chunk
            while b"\0" in buffer:
                raw, buffer = buffer.split(b"\0", 1)
                message = json.loads(raw)
                if "id" in message:
                    self._replies.setdefault(message["id"], queue.Queue()).put(message)
                else:
                    self.events.append(message)

    def send(
        self, method: str, *, session: bool = False, timeout: float = 30, **params: Any
    ) -> dict[str, Any]:
        with self._lock:
            self._next += 1
            ident = self._next
            self._replies.setdefault(ident, queue.Queue())
        message: dict[str, Any] = {"id": ident, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        self._out.write(json.dumps(message).encode() + b"\0")
        reply = self._replies[ident].get(timeout=timeout)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return dict(reply.get("result", {}))

    def js(self, expression: str) -> Any:
        result = self.send(
            "Runtime.evaluate", session=True, expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]}: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 60) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.js(expression)
            if value:
                return value
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {expression}")

    def click(self, element_id: str) -> None:
        """A real mouse click at the element's centre."""
        box = self.js(
            f"(() => {{ const e = document.getElementById({json.dumps(element_id)}); e.scrollIntoView();"
            f" const r = e.getBoundingClientRect();"
            f" return [r.x + r.width / 2, r.y + r.height / 2]; }})()"
        )
        for kind in ("mousePressed", "mouseReleased"):
            self.send(
                "Input.dispatchMouseEvent",
                session=True,
                type=kind,
                x=box[0],
                y=box[1],
                button="left",
                clickCount=1,
            )

    def screenshot(self) -> bytes:
        height = int(self.js("document.documentElement.scrollHeight"))
        self.send(
            "Emulation.setDeviceMetricsOverride",
            session=True,
            width=1280,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )
        return base64.b64decode(self.send("Page.captureScreenshot", session=True, format="png")["data"])

    def posted(self, url_part: str) -> list[dict[str, Any]]:
        """JSON bodies of the POST requests the page sent to URLs containing `url_part`."""
        out = []
        for event in self.events:
            if event.get("method") == "Network.requestWillBeSent":
                request = event["params"]["request"]
                if request["method"] == "POST" and url_part in request["url"] and "postData" in request:
                    out.append(json.loads(request["postData"]))
        return out

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._out.close()


@pytest.fixture(scope="module")
def server():
    import uvicorn

    from perfmodel.service.app import create_app

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    instance = uvicorn.Server(uvicorn.Config(create_app(), log_level="warning", access_log=False))
    thread = threading.Thread(target=instance.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not instance.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert instance.started, "the server did not start"
    yield f"http://127.0.0.1:{port}"
    instance.should_exit = True
    thread.join(timeout=10)
    sock.close()


@pytest.fixture
def browser(tmp_path):
    instance = Browser(tmp_path / "profile")
    yield instance
    instance.close()


def test_the_page_predicts_a_catalog_model_and_draws_intervals_and_a_sweep(server, browser, tmp_path):
    import httpx

    browser.send("Page.navigate", session=True, url=server + "/")
    browser.wait_for("document.body && document.body.dataset.ready === 'true'")
    assert browser.js("document.getElementById('model').options.length") > 10
    browser.js("""(() => {
        const set = (id, v) => { const e = document.getElementById(id); e.value = v; };
        set('model', 'llama2-7b'); set('method', 'lora'); set('gpu', 'H100-SXM'); set('num_gpus', '2');
        set('precision', 'bf16'); set('micro_batch_size', '8'); set('seq_len', '1024'); set('tokens', '2B');
    })()""")
    browser.click("go")
    state = browser.wait_for(
        "['done', 'error'].includes(document.getElementById('results').dataset.state) && "
        "document.getElementById('results').dataset.state"
    )
    assert state == "done", browser.js("document.getElementById('error').textContent")

    # The page sent what the form says ...
    sent = browser.posted("/v1/predict")[-1]
    config = sent["config"]
    assert config["model"]["name"] == "llama2-7b"
    assert config["hardware"] == {"gpu": "H100-SXM", "num_gpus": 2, "strategy": "fsdp"}
    assert config["training"]["tokens"] == 2e9 and config["training"]["seq_len"] == 1024
    assert config["training"]["lora_r"] == 16 and config["training"]["lora_target_modules"] == 2  # "on q and v"
    # ... and shows what the API answers to that request.
    answer = httpx.post(server + "/v1/predict", json=sent, timeout=60).json()
    cards = browser.js("""[...document.querySelectorAll('#cards .card')].map(c => ({
        metric: c.dataset.metric, estimate: +c.dataset.estimate, low: +c.dataset.low, high: +c.dataset.high,
        bands: c.querySelectorAll('svg rect.band').length, ticks: c.querySelectorAll('svg rect.tick').length,
        text: c.textContent}))""")
    by_metric = {c["metric"]: c for c in cards}
    assert {"total_time_s", "gpu_hours", "cost_usd", "peak_memory_gb", "throughput"} <= set(by_metric)
    for key in ("total_time_s", "gpu_hours", "cost_usd", "peak_memory_gb"):
        shown = by_metric[key]
        assert shown["estimate"] == pytest.approx(answer[key]["estimate"], rel=1e-12)
        assert shown["low"] == pytest.approx(answer[key]["low"], rel=1e-12)
        assert shown["high"] == pytest.approx(answer[key]["high"], rel=1e-12)
        assert shown["bands"] == 1 and shown["ticks"] == 1, key
    band = browser.js("""(() => { const c = document.querySelector('.card[data-metric=total_time_s] svg');
        const b = c.querySelector('rect.band'), t = c.querySelector('rect.tick');
        return [+b.getAttribute('x'), +b.getAttribute('width'), +t.getAttribute('x') + 1.5]; })()""")
    assert band[0] <= band[2] <= band[0] + band[1] + 1e-6, "the estimate tick lies inside the interval bar"
    assert browser.js("document.querySelector('.card[data-metric=peak_memory_gb] svg line.limit') !== null")
    # the memory card says the one fit verdict, as the Memory line does (this one is "tight")
    verdict = answer["memory_verdict"]["verdict"]
    assert by_metric["peak_memory_gb"]["text"].count(f"({verdict})") == 1, by_metric["peak_memory_gb"]["text"]

    # The batch-size sweep chart: one point per micro-batch, from the sweep the page asked for.
    swept = browser.posted("/v1/sweep")[-1]
    assert swept["vary"] == {"training.micro_batch_size": [1, 2, 4, 8, 16, 32, 64]}
    points = browser.js("document.querySelectorAll('#sweep-chart circle.sweep-point').length")
    assert points == 7
    assert browser.js("document.querySelector('#sweep-chart polygon.sweep-band') !== null")
    # points the sweep moved onto its physics lines say why under the chart, as many as the API moved
    moved = [p for p in httpx.post(server + "/v1/sweep", json=swept, timeout=60).json()["points"] if p.get("adjusted")]
    assert browser.js("document.querySelectorAll('#sweep-notes li').length") == len(moved)
    assert browser.js("document.querySelectorAll('#sweep-chart circle.adjusted').length") == len(moved)

    png = browser.screenshot()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    (tmp_path / "service.png").write_bytes(png)
    # a moved point (the page's own renderer, fed one): its reason is its tooltip and a note line
    browser.js("""renderSweep([{batch: 1, rate: {estimate: 10, low: 8, high: 12}, unit: 'tokens/s', fits: true, adjusted: ''},
        {batch: 2, rate: {estimate: 12, low: 9, high: 15}, unit: 'tokens/s', fits: true,
         adjusted: 'micro-batch 2 predicted slower than micro-batch 1'}])""")
    assert browser.js("[...document.querySelectorAll('#sweep-notes li')].map(li => li.textContent)") == [
        "micro-batch 2: micro-batch 2 predicted slower than micro-batch 1"
    ]
    assert browser.js("document.querySelector('#sweep-chart circle.adjusted title').textContent").startswith("micro-batch 2")
    keep = os.environ.get("PERFMODEL_E2E_SCREENSHOT")
    if keep:
        Path(keep).write_bytes(png)


FSDP_EXAMPLE = (ROOT / "examples" / "llama3-8b-pretrain-fsdp.yaml").read_text()
RUN_FIELDS = ("gpu", "num_gpus", "precision", "micro_batch_size", "seq_len", "tokens", "rows", "dataset")


def open_page(browser: Browser, server: str) -> None:
    browser.send("Page.navigate", session=True, url=server + "/")
    browser.wait_for("document.body && document.body.dataset.ready === 'true'")


def predict_on_page(browser: Browser) -> str:
    """Click Predict and wait for this run's answer or error: its final state."""
    before = browser.js("+(document.getElementById('results').dataset.finished || 0)")
    browser.click("go")
    browser.wait_for(f"+(document.getElementById('results').dataset.finished || 0) > {before}")
    return str(browser.js("document.getElementById('results').dataset.state"))


def paste_yaml(browser: Browser, text: str) -> None:
    """YAML mode, `text` typed into the box (an input event), and the config's values read."""
    if not browser.js("document.querySelector('input[name=mode][value=yaml]').checked"):
        browser.js("document.querySelector('input[name=mode][value=yaml]').click()")
    before = browser.js("+(document.body.dataset.configRead || 0)")
    browser.js(f"""(() => {{ const box = document.getElementById('yaml'); box.value = {json.dumps(text)};
        box.dispatchEvent(new Event('input')); }})()""")
    browser.wait_for(f"+(document.body.dataset.configRead || 0) > {before}")


def shown(browser: Browser) -> dict[str, Any]:
    """What the page shows: facts by key, cards' value and range by metric, fit suggestions, error."""
    return browser.js("""({
        facts: Object.fromEntries([...document.querySelectorAll('#facts dd')].map(d => [d.dataset.key, d.textContent])),
        cards: Object.fromEntries([...document.querySelectorAll('#cards .card')].map(c => [c.dataset.metric,
            [c.querySelector('.value').textContent, c.querySelector('.range').textContent]])),
        fits: [...document.querySelectorAll('#fit-suggestions li')].map(li => li.querySelector('code').textContent),
        fitHidden: document.getElementById('fit').hidden,
        sweepPoints: document.querySelectorAll('#sweep circle').length,
        warnings: document.querySelectorAll('#warnings li').length,
        error: document.getElementById('error').hidden ? null : document.getElementById('error').textContent,
    })""")


def test_the_default_form_fits_and_shows_steps_step_time_mfu_and_bottleneck_as_the_cli_formats_them(
    server, browser
):
    import httpx

    from perfmodel.cli.render import duration_unit, fmt_duration, fmt_duration_range

    open_page(browser, server)
    assert predict_on_page(browser) == "done"
    sent = browser.posted("/v1/predict")[-1]
    answer = httpx.post(server + "/v1/predict", json=sent, timeout=60).json()
    assert answer["fits_in_memory"] and answer["memory_verdict"]["verdict"] == "fits"  # the default example fits
    page = shown(browser)
    assert page["cards"]["peak_memory_gb"][0].endswith("(fits)")
    assert page["fitHidden"] and page["fits"] == []
    # Durations in the CLI's formats (perfmodel.cli.render), whatever the numbers are.
    for key, name in (("total_time_s", "total_time"), ("step_time_s", "step_time")):
        iv = answer[key]
        unit = duration_unit(iv["estimate"])
        assert answer["display"][name] == fmt_duration(iv["estimate"], unit)
        assert answer["display"][f"{name}_range"] == fmt_duration_range(iv["low"], iv["high"], unit)
    d = answer["display"]
    assert page["cards"]["total_time_s"] == [d["total_time"], d["total_time_range"]]
    assert page["facts"]["steps"] == f"{answer['total_steps']:,}"
    assert page["facts"]["step_time"] == f"{d['step_time']} ({d['step_time_range']})"
    mfu = answer["mfu"]
    assert page["facts"]["mfu"] == f"{mfu['estimate']:.0%} ({mfu['low']:.0%} – {mfu['high']:.0%})"
    assert page["facts"]["bottleneck"] == answer["bottleneck"]


def test_yaml_mode_starts_empty_shows_the_configs_values_and_sends_only_what_changed(server, browser):
    import httpx

    open_page(browser, server)
    paste_yaml(browser, FSDP_EXAMPLE)
    values = browser.js(f"{json.dumps(RUN_FIELDS)}.map(id => document.getElementById(id).value)")
    assert values == [""] * len(RUN_FIELDS), "the fields start empty"
    placeholders = browser.js("""({
        num_gpus: document.getElementById('num_gpus').placeholder,
        micro_batch_size: document.getElementById('micro_batch_size').placeholder,
        seq_len: document.getElementById('seq_len').placeholder,
        tokens: document.getElementById('tokens').placeholder,
        gpu: document.getElementById('gpu').options[0].text,
        precision: document.getElementById('precision').options[0].text})""")
    assert placeholders == {
        "num_gpus": "16",
        "micro_batch_size": "1",
        "seq_len": "8192",
        "tokens": "10 B",
        "gpu": "(config's: H100-SXM)",
        "precision": "(config's: amp_bf16)",
    }
    # The repository's own example, pasted as it is: predicted as the CLI predicts the file.
    assert predict_on_page(browser) == "done", shown(browser)["error"]
    assert browser.posted("/v1/predict")[-1] == {"config": FSDP_EXAMPLE}
    answer = httpx.post(server + "/v1/predict", json={"config": FSDP_EXAMPLE}, timeout=60).json()
    assert answer["workload"]["parallel"]["num_gpus"] == 16 and answer["workload"]["parallel"]["num_nodes"] == 2
    assert shown(browser)["facts"]["steps"] == answer["display"]["steps"]
    # One field changed: only that is sent.
    browser.js("document.getElementById('micro_batch_size').value = '2'")
    assert predict_on_page(browser) == "done", shown(browser)["error"]
    assert browser.posted("/v1/predict")[-1] == {"config": FSDP_EXAMPLE, "set": {"training.micro_batch_size": 2}}


def test_a_new_answer_or_error_replaces_the_old_one(server, browser):
    open_page(browser, server)
    assert predict_on_page(browser) == "done"
    first = shown(browser)
    assert first["cards"] and first["facts"] and first["sweepPoints"] == 7 and first["error"] is None
    paste_yaml(browser, "model: [1, 2")
    assert predict_on_page(browser) == "error"
    failed = shown(browser)
    assert "not valid YAML" in failed["error"]
    assert failed["cards"] == {} and failed["facts"] == {} and failed["sweepPoints"] == 0 and failed["warnings"] == 0
    paste_yaml(browser, FSDP_EXAMPLE)
    assert predict_on_page(browser) == "done"
    again = shown(browser)
    assert again["error"] is None and len(again["cards"]) == len(first["cards"])
    assert browser.js("document.querySelectorAll('#cards .card').length") == len(first["cards"])  # not added twice


def test_fit_suggestions_are_shown_as_the_config_keys_to_set(server, browser):
    import httpx

    open_page(browser, server)
    browser.js("document.getElementById('micro_batch_size').value = '16'")  # 7B LoRA, 2048 tokens: too much
    assert predict_on_page(browser) == "done"
    sent = browser.posted("/v1/predict")[-1]
    answer = httpx.post(server + "/v1/predict", json=sent, timeout=60).json()
    assert not answer["fits_in_memory"] and answer["fit_suggestions"]
    page = shown(browser)
    assert page["cards"]["peak_memory_gb"][0].endswith("(does not fit)")
    assert not page["fitHidden"]
    expected = [
        ", ".join(
            f"{k}={json.dumps(v).replace(chr(34), '') if isinstance(v, (bool, dict)) else v}"
            for k, v in (s["config_changes"] if s["config_changes"] is not None else s["changes"]).items()
        )
        for s in answer["fit_suggestions"]
    ]
    assert page["fits"] == expected
    assert any("training.micro_batch_size=" in line for line in page["fits"])


def test_a_ludwig_config_is_sized_with_the_rows_field(server, browser):
    import httpx

    open_page(browser, server)
    paste_yaml(browser, LUDWIG_WITHOUT_DATA)
    assert browser.js("document.getElementById('data-fields').hidden") is False
    assert browser.js("document.getElementById('data-fields').dataset.dialect") == "ludwig"
    assert browser.js("document.getElementById('rows').placeholder") == "required (or tokens)"
    assert browser.js("document.getElementById('dataset').disabled") is True  # this server has no --data-dir
    assert "rows" in browser.js("document.getElementById('config-note').textContent")
    browser.js("document.getElementById('rows').value = '50000'")
    assert predict_on_page(browser) == "done", shown(browser)["error"]
    sent = browser.posted("/v1/predict")[-1]
    assert sent == {"config": LUDWIG_WITHOUT_DATA, "rows": 50000}
    answer = httpx.post(server + "/v1/predict", json=sent, timeout=60).json()
    assert shown(browser)["facts"]["steps"] == answer["display"]["steps"]


def test_a_pasted_ludwig_config_without_data_shows_the_one_line_error(server, browser):
    browser.send("Page.navigate", session=True, url=server + "/")
    browser.wait_for("document.body && document.body.dataset.ready === 'true'")
    paste_yaml(browser, LUDWIG_WITHOUT_DATA)
    assert browser.js("document.getElementById('yaml-fields').hidden") is False
    assert predict_on_page(browser) == "error"
    message = browser.js("document.getElementById('error').textContent")
    assert "rows" in message and "tokens" in message and "Traceback" not in message
    assert browser.posted("/v1/predict")[-1]["config"] == LUDWIG_WITHOUT_DATA
