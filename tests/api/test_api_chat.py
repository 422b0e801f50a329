"""Chat requests, sessions (history, save/load), images and tool files: clear errors before sending."""

from __future__ import annotations

import base64
import json
import os
import stat
from pathlib import Path

import pytest

from cockpit.api.chat import (
    MAX_IMAGES_PER_MESSAGE,
    ChatInputError,
    ChatRequest,
    ChatSession,
    ChatSettings,
    FileInputError,
    image_part,
    load_tools,
    sniff_image,
)
from cockpit.api.stream import ChatResult, ToolCall, Usage

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + b"\x00" * 40
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 40
WEBP = b"RIFF\x24\x00\x00\x00WEBPVP8 " + b"\x00" * 40
GIF = b"GIF89a" + b"\x00" * 40
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def answer(content: str = "", reasoning: str = "", calls: tuple[ToolCall, ...] = ()) -> ChatResult:
    return ChatResult(content, reasoning, calls, "tool_calls" if calls else "stop", Usage(1, 2, 3))


# --- requests ---


def test_request_defaults_are_serving_defaults() -> None:
    body = ChatRequest([{"role": "user", "content": "hi"}]).to_body(stream=True)
    assert body["chat_template_kwargs"] == {"thinking": True}
    assert body["reasoning_effort"] == "xhigh" and body["temperature"] == 1.0 and body["top_p"] == 0.95
    assert body["stream_options"] == {"include_usage": True}
    assert "max_tokens" not in body and "tools" not in body


def test_request_thinking_off_drops_effort_and_keeps_card_shape() -> None:
    req = ChatRequest(
        [{"role": "user", "content": "x"}], thinking=False, max_tokens=128, temperature=0, top_p=None
    )
    body = req.to_body(stream=False)
    assert body == {
        "model": "deepseek-v4.1-flash",
        "messages": [{"role": "user", "content": "x"}],
        "stream": False,
        "chat_template_kwargs": {"thinking": False},
        "temperature": 0,
        "max_tokens": 128,
    }


@pytest.mark.parametrize("effort", ["low", "high", "xhigh", "max", 1, 100])
def test_effort_accepted(effort: str | int) -> None:
    assert (
        ChatRequest([{"role": "user", "content": "x"}], reasoning_effort=effort).to_body(stream=True)[
            "reasoning_effort"
        ]
        == effort
    )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"reasoning_effort": "medium"}, "reasoning_effort"),
        ({"reasoning_effort": 0}, "reasoning_effort"),
        ({"reasoning_effort": True}, "reasoning_effort"),
        ({"temperature": 3.0}, "temperature"),
        ({"top_p": 0.0}, "top_p"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"tool_choice": "auto"}, "needs tools"),
        ({"tool_choice": "sometimes", "tools": [WEATHER]}, "tool_choice"),
    ],
)
def test_request_validation(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ChatInputError, match=match):
        ChatRequest([{"role": "user", "content": "x"}], **kwargs)  # type: ignore[arg-type]


def test_request_needs_messages() -> None:
    with pytest.raises(ChatInputError, match="at least one"):
        ChatRequest([])


# --- images ---


@pytest.mark.parametrize(
    ("data", "mime"),
    [
        (PNG, "image/png"),
        (JPEG, "image/jpeg"),
        (WEBP, "image/webp"),
        (GIF, "image/gif"),
        (b"%PDF-1.7", None),
        (b"", None),
    ],
)
def test_sniff(data: bytes, mime: str | None) -> None:
    assert sniff_image(data[:16]) == mime


def test_image_part_data_url(tmp_path: Path) -> None:
    f = tmp_path / "a.bin"
    f.write_bytes(JPEG)
    part = image_part(f)
    url = part["image_url"]["url"]
    assert part["type"] == "image_url" and url.startswith("data:image/jpeg;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == JPEG


def test_image_errors(tmp_path: Path) -> None:
    with pytest.raises(FileInputError, match="no such file") as info:
        image_part(tmp_path / "missing.png")
    assert info.value.path.endswith("missing.png")
    text = tmp_path / "notes.png"
    text.write_text("hello, not an image")
    with pytest.raises(FileInputError, match="not a PNG, JPEG, WebP or GIF"):
        image_part(text)
    big = tmp_path / "big.png"
    big.write_bytes(PNG + b"\x00" * 2048)
    with pytest.raises(FileInputError, match="limit"):
        image_part(big, max_bytes=1024)
    empty = tmp_path / "empty.png"
    empty.write_bytes(b"")
    with pytest.raises(FileInputError, match="empty"):
        image_part(empty)
    with pytest.raises(FileInputError, match="not a regular file"):
        image_part(tmp_path)
    if os.geteuid() != 0:
        locked = tmp_path / "locked.png"
        locked.write_bytes(PNG)
        locked.chmod(0)
        with pytest.raises(FileInputError, match="cannot read"):
            image_part(locked)


def test_session_images_at_most_four(tmp_path: Path) -> None:
    f = tmp_path / "i.png"
    f.write_bytes(PNG)
    s = ChatSession()
    for _ in range(MAX_IMAGES_PER_MESSAGE):
        s.attach_image(f)
    with pytest.raises(ChatInputError, match="at most 4"):
        s.attach_image(f)
    msg = s.add_user("what is in these?")
    assert msg["content"][0] == {"type": "text", "text": "what is in these?"}
    assert [p["type"] for p in msg["content"][1:]] == ["image_url"] * 4
    assert s.pending_images == 0
    assert s.add_user("and now?")["content"] == "and now?"


# --- tools ---


def test_load_tools_ok_and_wrapping(tmp_path: Path) -> None:
    f = tmp_path / "tools.json"
    f.write_text(
        json.dumps(
            [
                WEATHER,
                {
                    "name": "get_time",
                    "description": "now",
                    "parameters": {"type": "object", "properties": {}},
                },
            ]
        )
    )
    tools = load_tools(f)
    assert [t["function"]["name"] for t in tools] == ["get_weather", "get_time"]
    assert all(t["type"] == "function" for t in tools)
    f.write_text(json.dumps({"tools": [WEATHER]}))
    assert load_tools(f)[0]["function"]["name"] == "get_weather"


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("{not json", "invalid JSON at line 1"),
        ("[]", "non-empty JSON list"),
        ('{"a": 1}', "non-empty JSON list"),
        ('["x"]', "tool #1: expected an object"),
        ('[{"name": "bad name!"}]', "'name' must be"),
        ('[{"name": "f"}, {"name": "f"}]', "defined twice"),
        ('[{"type": "code", "function": {"name": "f"}}]', "type must be 'function'"),
        ('[{"name": "f", "parameters": {"type": "array"}}]', "parameters.type"),
        (
            '[{"name": "f", "parameters": {"type": "object", "properties": {}, "required": ["x"]}}]',
            "required",
        ),
        ('[{"name": "f", "params": {}}]', "unknown keys"),
    ],
)
def test_load_tools_errors(tmp_path: Path, content: str, match: str) -> None:
    f = tmp_path / "tools.json"
    f.write_text(content)
    with pytest.raises(FileInputError, match=match) as info:
        load_tools(f)
    assert str(f) in str(info.value)


def test_load_tools_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileInputError, match="no such file"):
        load_tools(tmp_path / "nope.json")


# --- session ---


def test_session_history_tool_round_trip() -> None:
    s = ChatSession(ChatSettings(system="Be brief."), tools=[WEATHER])
    s.add_user("Weather in Paris?")
    call = ToolCall("chatcmpl-tool-1", "get_weather", '{"city": "Paris"}')
    s.add_result(answer(reasoning="need the tool", calls=(call,)))
    assert [c.id for c in s.pending_tool_calls()] == ["chatcmpl-tool-1"]
    with pytest.raises(ChatInputError, match="no pending tool call"):
        s.add_tool_result("chatcmpl-tool-9", "x")
    s.add_tool_result("chatcmpl-tool-1", {"temp_c": 18})
    assert s.pending_tool_calls() == []
    req = s.request(max_tokens=64)
    msgs = req.messages
    assert msgs[0] == {"role": "system", "content": "Be brief."}
    assert msgs[2]["role"] == "assistant" and "reasoning" not in msgs[2]
    assert msgs[2]["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    assert msgs[3] == {"role": "tool", "tool_call_id": "chatcmpl-tool-1", "content": '{"temp_c": 18}'}
    assert s.messages[1]["reasoning"] == "need the tool"
    assert req.tools is not None and req.max_tokens == 64
    assert s.last_answer() == ""
    s.add_result(answer("18 °C in Paris."))
    assert s.last_answer() == "18 °C in Paris."
    s.clear()
    assert s.messages == [] and s.last_answer() is None and s.tools is not None


def test_session_save_load_round_trip(tmp_path: Path) -> None:
    s = ChatSession(ChatSettings(thinking=False, reasoning_effort=40, temperature=0.0))
    s.add_user("hi")
    s.add_result(answer("hello", reasoning="greet back"))
    path = tmp_path / "chat.json"
    assert s.save(path) == path
    loaded = ChatSession.load(path)
    assert loaded.messages == s.messages and loaded.settings == s.settings
    assert loaded.last_answer() == "hello"
    with pytest.raises(FileInputError, match="file exists"):
        s.save(path)
    s.add_user("again")
    s.save(path, overwrite=True)
    assert len(ChatSession.load(path).messages) == 3
    assert [p.name for p in tmp_path.iterdir()] == ["chat.json"]  # no temp files left behind


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_session_save_respects_the_umask(tmp_path: Path, umask: int) -> None:
    """A saved session gets 0666 less the umask (as any new file), new or replaced; never overwritten."""
    s = ChatSession()
    s.add_user("hi")
    old = os.umask(umask)
    try:
        path = s.save(tmp_path / "chat.json")
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask
        s.save(path, overwrite=True)
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask
        path.write_text("theirs")
        with pytest.raises(FileInputError, match="file exists"):
            s.save(path)
        assert path.read_text() == "theirs"
    finally:
        os.umask(old)
    assert [p.name for p in tmp_path.iterdir()] == ["chat.json"]


def test_save_into_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(FileInputError, match="does not exist"):
        ChatSession().save(tmp_path / "no" / "chat.json")


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("", "invalid JSON"),
        ("[1, 2]", "not a chat session file"),
        ('{"format": "r37-cockpit.chat", "version": 9}', "unsupported session version 9"),
        ('{"format": "r37-cockpit.chat", "version": 1, "settings": {"colour": 1}}', "unknown settings"),
        ('{"format": "r37-cockpit.chat", "version": 1, "settings": {"temperature": 9}}', "temperature"),
        (
            '{"format": "r37-cockpit.chat", "version": 1, "messages": [{"role": "robot"}]}',
            "message #1: unknown role",
        ),
        (
            '{"format": "r37-cockpit.chat", "version": 1, "messages": [{"role": "tool", "content": "x"}]}',
            "tool_call_id",
        ),
        ('{"format": "r37-cockpit.chat", "version": 1, "tools": [{"name": "a b"}]}', "'name' must be"),
    ],
)
def test_load_bad_files(tmp_path: Path, content: str, match: str) -> None:
    f = tmp_path / "bad.json"
    f.write_text(content)
    with pytest.raises(FileInputError, match=match) as info:
        ChatSession.load(f)
    assert info.value.path == str(f)


def test_load_missing_and_binary(tmp_path: Path) -> None:
    with pytest.raises(FileInputError, match="no such file"):
        ChatSession.load(tmp_path / "none.json")
    f = tmp_path / "bin.json"
    f.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(FileInputError, match="UTF-8"):
        ChatSession.load(f)


def test_empty_user_message_refused() -> None:
    with pytest.raises(ChatInputError, match="empty"):
        ChatSession().add_user("   ")
