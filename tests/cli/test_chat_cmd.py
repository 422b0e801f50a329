"""`r37-cockpit chat` and `smoke` against the simulated engine over --api-url (no SSH needed)."""

from __future__ import annotations

import http.server
import json
import os
import select
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.request
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from cockpit.cli import main
from cockpit.constants import SERVED_MODEL

REPO = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def engine_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A simulated engine (already booted) on a free port, for the whole module."""
    port = _free_port()
    log = tmp_path_factory.mktemp("engine") / "engine.log"
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    with open(log, "wb") as out:
        argv = [sys.executable, "-m", "cockpit.sim.engine", "serve-ready", "--port", str(port),
                "--bind", "127.0.0.1", "--speed", "10"]
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(url + "/health", timeout=1) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def _png(path: Path) -> Path:
    width, height = 8, 8
    raw = b"".join(b"\x00" + bytes((200, 30, 30)) * width for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw))
                     + chunk(b"IEND", b""))
    return path


def test_chat_streams_answer_to_stdout_and_thinking_to_stderr(engine_url: str, capsys) -> None:
    rc = main(["chat", "Write two sentences about the ocean.", "--max-tokens", "300",
               "--api-url", engine_url])
    out, err = capsys.readouterr()
    assert rc == 0
    assert out.strip() and "thinking:" not in out
    assert "thinking: " in err
    assert "TTFT" in err and "tok/s" in err and "finish " in err


def test_chat_json_no_thinking(engine_url: str, capsys) -> None:
    rc = main(["chat", "Write two sentences about the ocean.", "--no-thinking", "--temperature", "0",
               "--max-tokens", "64", "--api-url", engine_url, "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert out["text"] and out["reasoning"] == ""
    assert 2 <= out["usage"]["completion_tokens"] <= 64 and out["finish_reason"] in ("stop", "length")
    assert out["ttft_s"] > 0 and out["decode_tps"] > 0
    # K3 speculation packs several tokens per chunk: tokens come from usage, not chunk counts.
    assert out["chunks"] < out["usage"]["completion_tokens"]


def test_chat_with_image_and_tools(engine_url: str, tmp_path: Path, capsys) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([{"name": "get_weather", "description": "weather for a city",
                                  "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                 "required": ["city"]}}]))
    rc = main(["chat", "What is the weather in Paris right now?", "--no-thinking", "--tools", str(tools),
               "--api-url", engine_url, "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["finish_reason"] == "tool_calls"
    assert out["tool_calls"][0]["name"] == "get_weather"
    assert out["tool_calls"][0]["arguments"]["city"].lower() == "paris"

    rc = main(["chat", "Describe this image.", "--no-thinking", "--image", str(_png(tmp_path / "red.png")),
               "--api-url", engine_url, "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["text"] and out["finish_reason"] == "stop"


def test_chat_bad_input_is_refused_before_sending(tmp_path: Path, capsys) -> None:
    not_image = tmp_path / "notes.txt"
    not_image.write_text("hello")
    # The URL is never contacted: the checks come first (exit 2, one sentence naming the file).
    assert main(["chat", "hi", "--image", str(not_image), "--api-url", "http://127.0.0.1:9"]) == 2
    assert "notes.txt" in capsys.readouterr().err
    missing = str(tmp_path / "missing.png")
    assert main(["chat", "hi", "--image", missing, "--api-url", "http://127.0.0.1:9"]) == 2
    assert "no such file" in capsys.readouterr().err
    images = [str(_png(tmp_path / f"p{i}.png")) for i in range(5)]
    argv = ["chat", "hi", *[a for p in images for a in ("--image", p)], "--api-url", "http://127.0.0.1:9"]
    assert main(argv) == 2
    assert "at most 4 images" in capsys.readouterr().err


def test_chat_api_down_is_a_clear_state(capsys) -> None:
    rc = main(["chat", "hi", "--api-url", f"http://127.0.0.1:{_free_port()}"])
    err = capsys.readouterr().err
    assert rc == 1
    assert "API not ready" in err and "remedy:" in err


def test_smoke_passes_with_timings(engine_url: str, capsys) -> None:
    rc = main(["smoke", "--api-url", engine_url, "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["passed"]
    assert [s["name"] for s in out["steps"]] == ["health", "models", "card request", "counting", "tool call"]
    assert all(s["ok"] and s["seconds"] >= 0 for s in out["steps"])


def test_smoke_fails_when_api_down(capsys) -> None:
    rc = main(["smoke", "--api-url", f"http://127.0.0.1:{_free_port()}"])
    out = capsys.readouterr().out
    assert rc == 1
    assert out.startswith("FAIL  health") and "remedy:" in out and "FAILED" in out


@pytest.mark.parametrize(("argv", "said"), [
    (["--top-p", "0"], "top_p must be within (0, 1], not 0"),
    (["--temperature", "2.5"], "temperature must be within 0-2, not 2.5"),
    (["--temperature", "warm"], "temperature needs a number, not 'warm'"),
])
def test_chat_sampling_out_of_range_is_a_usage_error(argv: list[str], said: str, capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(["chat", "hi", *argv, "--api-url", "http://127.0.0.1:9"])
    assert info.value.code == 2
    assert said in capsys.readouterr().err


def test_unknown_rank_is_a_usage_error(capsys) -> None:
    config = str(REPO / "tests" / "fixtures" / "cluster.toml")
    for command in (["preflight"], ["setup", "env"]):
        assert main(["--config", config, *command, "--rank", "9"]) == 2
        assert "no host has rank 9 (ranks: 0-3)" in capsys.readouterr().err


# --- deadlines: a hung engine (role chunk, then nothing) never holds chat or smoke --------------------


class _HungEngine(http.server.BaseHTTPRequestHandler):
    """/health and /v1/models answer; a chat request gets its role chunk (streamed) and nothing more."""

    protocol_version = "HTTP/1.1"
    closed: ClassVar[threading.Event]

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _send(self, body: bytes, ctype: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path == "/v1/models":
            self._send(json.dumps({"object": "list", "data": [{"id": SERVED_MODEL, "object": "model"}]})
                       .encode(), "application/json")
        else:
            self._send(b"", "text/plain")

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if body.get("stream"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()  # no length, no chunking: the body runs until the connection closes
            role = {"id": "chatcmpl-hung", "object": "chat.completion.chunk", "model": SERVED_MODEL,
                    "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
            self.wfile.write(b"data: " + json.dumps(role).encode() + b"\n\n")
            self.wfile.flush()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # until the client gives up (its FIN makes the socket readable)
            if select.select([self.connection], [], [], 0.05)[0] and not self.connection.recv(1):
                type(self).closed.set()
                break
        self.close_connection = True


@pytest.fixture
def hung_url() -> Iterator[tuple[str, threading.Event]]:
    handler = type("Handler", (_HungEngine,), {"closed": threading.Event()})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler.closed
    finally:
        server.shutdown()
        server.server_close()


def test_chat_timeout_gives_up_on_a_hung_engine(hung_url: tuple[str, threading.Event], capsys) -> None:
    url, closed = hung_url
    t0 = time.monotonic()
    rc = main(["chat", "hi", "--api-url", url, "--timeout", "1"])
    took = time.monotonic() - t0
    out, err = capsys.readouterr()
    assert rc == 1 and out == ""
    assert "stream failed (first_token_timeout): no first token within 1 s" in err
    assert "remedy: The engine may be hung: `r37-cockpit status`" in err  # --api-url: no --config to add
    assert "`r37-cockpit logs --rank 0 -n 200`" in err
    assert "finish ?" not in err
    assert took < 5
    assert closed.wait(5)  # the request's connection was closed: the server saw it go


def test_chat_timeout_json(hung_url: tuple[str, threading.Event], capsys) -> None:
    url, _closed = hung_url
    rc = main(["chat", "hi", "--api-url", url, "--timeout", "0.5", "--json"])
    cap = capsys.readouterr()
    out = json.loads(cap.out)
    assert rc == 1
    assert out["error"]["kind"] == "first_token_timeout"
    assert out["error"]["message"] == "no first token within 0.5 s" and "hung" in out["error"]["remedy"]
    assert out["ttft_s"] is None and out["total_s"] >= 0.5
    assert "no first token within 0.5 s" in cap.err


def test_smoke_timeout_stops_on_a_hung_engine(hung_url: tuple[str, threading.Event], capsys) -> None:
    url, _closed = hung_url
    t0 = time.monotonic()
    rc = main(["smoke", "--api-url", url, "--timeout", "1"])
    took = time.monotonic() - t0
    out, err = capsys.readouterr()
    assert rc == 1 and took < 5
    lines = out.splitlines()
    assert lines[0].startswith("PASS  health") and lines[1].startswith("PASS  models")
    assert lines[2].startswith("FAIL  card request") and "no answer within 1 s; later checks not run" in out
    assert "counting" not in out and "smoke test FAILED" in out
    assert "smoke test stopped (first_token_timeout): card request: no answer within 1 s" in err
    assert "remedy: The engine may be hung" in err

    rc = main(["smoke", "--api-url", url, "--timeout", "0.5", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 1 and not data["passed"]
    assert [s["name"] for s in data["steps"]] == ["health", "models", "card request"]
    assert data["steps"][2]["kind"] == "first_token_timeout"
    assert data["error"]["kind"] == "first_token_timeout" and data["error"]["remedy"]


@pytest.mark.parametrize("value", ["0", "-3", "soon", "inf"])
def test_timeout_must_be_positive_seconds(value: str, capsys) -> None:
    for command in ("chat", "smoke"):
        argv = [command, *(["hi"] if command == "chat" else []), "--timeout", value,
                "--api-url", "http://127.0.0.1:9"]
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 2
        assert "--timeout" in capsys.readouterr().err


def test_timeout_help_names_the_deadlines(capsys) -> None:
    for command in ("chat", "smoke"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        assert "no first token came within S s" in text and "first_token_timeout_s" in text
        assert "ssh.connect_timeout + 2 s" in text


# --- a hostile server (tests/api/hostile_server.py): bounded, typed, inert ----------------------------

sys.path.insert(0, str(REPO / "tests" / "api"))
from hostile_server import ERROR_ESCAPES, PARTIAL, HostileState, hostile_server  # noqa: E402

from cockpit.api.stream import MAX_ANSWER_CHARS  # noqa: E402
from cockpit.cli.chat_cmd import open_endpoint  # noqa: E402
from cockpit.cli.common import run_async  # noqa: E402

CONTROLS = "\x1b\x07\x9b"


@pytest.fixture(scope="module")
def hostile() -> Iterator[HostileState]:
    with hostile_server() as state:
        yield state


def test_chat_prints_escapes_inert(hostile: HostileState, capsys) -> None:
    rc = main(["chat", "hi", "--api-url", hostile.base + "/escapes"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert not any(c in out for c in CONTROLS) and not any(c in err for c in CONTROLS)
    assert "line one copy ␛]52;c;" in out and "\nline two" in out  # visible, line breaks kept
    assert "[bold red]not bold[/]" in out and "tool call get_␛[2Jweather" in out
    assert "thinking: thinking copy ␛]52" in err


def test_chat_json_keeps_the_model_text_as_it_came(hostile: HostileState, capsys) -> None:
    rc = main(["chat", "hi", "--api-url", hostile.base + "/escapes", "--json"])
    out = capsys.readouterr().out
    assert rc == 0 and "\x1b" not in out  # json escapes it …
    assert "\x1b]52;c;" in json.loads(out)["text"]  # … and keeps it


@pytest.mark.parametrize("mode", ["badusage/string", "badusage/types", "nested", "garbage"])
def test_chat_malformed_answer_prints_the_partial_and_the_error(hostile: HostileState, mode: str,
                                                                capsys) -> None:
    rc = main(["chat", "hi", "--no-thinking", "--api-url", f"{hostile.base}/{mode}"])
    out, err = capsys.readouterr()
    assert rc == 1, err
    assert out == PARTIAL + "\n"
    assert "r37-cockpit: stream failed (protocol_error): " in err and "remedy: " in err
    rc = main(["chat", "hi", "--api-url", f"{hostile.base}/{mode}", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 1 and data["text"] == PARTIAL
    assert data["error"]["kind"] == "protocol_error" and data["error"]["code"] == "api-protocol-error"


def test_chat_http_error_body_escapes_are_inert(hostile: HostileState, capsys) -> None:
    rc = main(["chat", "hi", "--api-url", hostile.base + "/status/500"])
    out, err = capsys.readouterr()
    assert rc == 1 and "\x1b" not in out + err
    assert "API not ready (http_error)" in err and "engine says ␛]52;c;" in err
    assert ERROR_ESCAPES.split()[0] == "engine"


def test_chat_comments_do_not_hold_it(hostile: HostileState, capsys) -> None:
    """SSE comments every 200 ms, end to end: the deadline still ends the chat (comments are no token)."""
    rc = main(["chat", "hi", "--api-url", hostile.base + "/comments/200", "--timeout", "1"])
    out, err = capsys.readouterr()
    assert rc == 1 and out == ""
    assert "stream failed (first_token_timeout): no first token within 1 s" in err
    rc = main(["chat", "hi", "--api-url", hostile.base + "/keepalive/200", "--timeout", "1"])
    out, err = capsys.readouterr()
    assert rc == 1 and out == PARTIAL + "\n"
    assert "stream failed (idle_timeout): no token for 1 s mid-answer" in err


def test_chat_endless_answer_is_cut_at_the_cap(hostile: HostileState, capsys) -> None:
    rc = main(["chat", "hi", "--api-url", hostile.base + "/flood", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 1 and data["error"]["code"] == "api-too-large"
    assert len(data["text"]) == MAX_ANSWER_CHARS and data["text"].startswith(PARTIAL)


@pytest.mark.parametrize(("mode", "said"), [
    ("endless", "FAIL  health"), ("trickle", "FAIL  health"), ("nested", "FAIL  models"),
    ("escmodels", "PASS  models")])
def test_smoke_ends_on_a_hostile_server(hostile: HostileState, mode: str, said: str, capsys) -> None:
    rc = main(["smoke", "--api-url", f"{hostile.base}/{mode}", "--timeout", "2"])
    out, err = capsys.readouterr()
    assert rc == 1 and said in out and "smoke test FAILED" in out
    assert not any(c in out + err for c in CONTROLS)
    if mode == "escmodels":  # a gateway's only model is the one asked; its name shows inert
        assert "serves evil␛]0;title␇␛[2J" in out


def test_read_timeout_reaches_the_endpoint(capsys) -> None:
    async def read_timeout(argv: list[str]) -> float:
        from cockpit.cli import build_parser
        args = build_parser().parse_args(argv)
        async with open_endpoint(args) as endpoint:
            return endpoint.read_timeout

    assert run_async(read_timeout(["chat", "hi", "--api-url", "http://127.0.0.1:9"])) == 600.0
    assert run_async(read_timeout(["smoke", "--read-timeout", "42", "--api-url", "http://127.0.0.1:9"])) == 42
    for value in ("0", "-1", "soon"):
        with pytest.raises(SystemExit) as info:
            main(["chat", "hi", "--read-timeout", value, "--api-url", "http://127.0.0.1:9"])
        assert info.value.code == 2 and "--read-timeout" in capsys.readouterr().err
