"""The benchmark's vision and tool checks and its idle probe: against the simulated engine served alone,
against small misbehaving servers, and the verdicts and PNG images on their own."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator

import pytest
from aiohttp import web

from cockpit.api.client import ApiClient
from cockpit.api.stream import ChatResult, StreamDeadlines, ToolCall, Usage
from cockpit.bench import images
from cockpit.bench.checks import (
    ProbeRecord,
    check_auto,
    check_forced,
    check_grid,
    check_parallel,
    check_stripes,
    check_two_images,
    idle_probe,
    run_checks,
    score,
)
from cockpit.constants import SERVED_MODEL
from cockpit.sim.engine.images import analyse, decode_png, parse_data_url
from cockpit.sim.engine.spawn import free_port, ready_engine

SPEED = 5.0
IDLE_AFTER = 1.0  # nominal seconds; at SPEED 5 the engine's idle effect starts after 0.2 s real


@pytest.fixture(scope="module")
def engine_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The simulated engine alone (`serve-ready`), fast, with a short idle threshold."""
    log = tmp_path_factory.mktemp("engine") / "engine.log"
    with ready_engine(log, "--speed", str(SPEED), "--idle-after", str(IDLE_AFTER)) as url:
        yield url


@pytest.fixture
async def engine(engine_url: str) -> AsyncIterator[ApiClient]:
    async with ApiClient(engine_url) as client:
        yield client


# --- against the simulated engine -----------------------------------------------------------------


async def test_sim_scores_six_of_seven_with_the_forced_tool_failing(engine: ApiClient) -> None:
    records = await run_checks(engine, SERVED_MODEL)
    by_name = {r.name: r for r in records}
    assert [r.name for r in records] == ["stripes", "two_images", "grid_2x2", "tool_auto", "tool_round_trip",
                                         "tool_parallel", "tool_forced"]
    assert score(records) == (6, 7)
    forced = by_name["tool_forced"]
    assert not forced.passed and forced.reason == "extra tool returned: get_weather"
    assert [c["name"] for c in forced.response["tool_calls"]] == ["get_weather", "get_time"]
    assert forced.request["tool_choice"] == {"type": "function", "function": {"name": "get_time"}}
    for r in records:
        assert r.request["temperature"] == 0.0 and r.request["chat_template_kwargs"] == {"thinking": False}
        assert json.loads(json.dumps(r.to_dict()))["name"] == r.name  # records are plain JSON
    # the round trip's last request holds the model's call and the tool's answer
    rt = by_name["tool_round_trip"]
    roles = [m["role"] for m in rt.request["messages"]]
    assert rt.passed and roles == ["user", "assistant", "tool"]
    assert "17" in rt.response["content"]


async def test_sim_passes_all_three_vision_checks(engine: ApiClient) -> None:
    records = await run_checks(engine, SERVED_MODEL, tools=False)
    assert [(r.group, r.passed) for r in records] == [("vision", True)] * 3, [r.reason for r in records]
    two = records[1].request["messages"][0]["content"]
    assert [p["type"] for p in two] == ["text", "image_url", "image_url"]


async def test_wrong_model_fails_every_check_with_the_servers_message(engine: ApiClient) -> None:
    records = await run_checks(engine, "no-such-model")
    assert score(records) == (0, 7)
    assert all("does not exist" in r.reason and "error" in r.response for r in records)


@pytest.mark.timing
async def test_idle_probe_after_a_short_idle_is_faster_than_back_to_back(engine_url: str) -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        await asyncio.sleep(seconds)

    # Unpaced reads: a paced client sees [DONE] up to a frame (0.3 s) late, longer than this test's
    # idle threshold, so "back-to-back" would count as idle here (not with the real 45 s).
    async with ApiClient(engine_url, stream_interval=0) as client:
        records = await idle_probe(client, SERVED_MODEL, idle_s=0.5, sleep=sleep)
    assert slept == [0.5, 0.5]
    assert [(r.name, r.back_to_back, r.idle_s) for r in records] == [
        ("counting", False, 0.5), ("coding", False, 0.5), ("counting", True, 0.0), ("coding", True, 0.0)]
    for r in records:
        assert not r.error and not r.estimated and r.completion_tokens and r.completion_tokens > 100
        assert r.ttft_s is not None and r.decode_tps is not None
    idle = {r.name: r.decode_tps for r in records if not r.back_to_back}
    busy = {r.name: r.decode_tps for r in records if r.back_to_back}
    for name in ("counting", "coding"):
        ratio = (idle[name] or 0) / (busy[name] or 1)
        assert 1.04 < ratio < 1.12, (name, ratio)  # the sim's idle effect is 1.08
    assert json.loads(json.dumps(records[0].to_dict()))["name"] == "counting"


# --- against misbehaving servers ------------------------------------------------------------------


def _sse(*chunks: dict[str, object]) -> bytes:
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)


_ROLE = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}


async def _event_stream(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    return resp


async def _http_500(_: web.Request) -> web.Response:
    return web.json_response({"error": {"message": "boom: engine core died", "code": 500}}, status=500)


async def _bad_stream(request: web.Request) -> web.StreamResponse:
    resp = await _event_stream(request)
    await resp.write(_sse(_ROLE) + b"data: {not json\n\n")
    return resp


async def _hang(request: web.Request) -> web.StreamResponse:
    resp = await _event_stream(request)
    await resp.write(_sse(_ROLE))
    await asyncio.sleep(30)
    return resp


async def _endless(request: web.Request) -> web.StreamResponse:
    resp = await _event_stream(request)
    await resp.write(_sse(_ROLE))
    while True:
        await resp.write(_sse({"choices": [{"index": 0, "delta": {"content": "word "}}]}))
        await asyncio.sleep(0.02)


async def _no_usage(request: web.Request) -> web.StreamResponse:
    resp = await _event_stream(request)
    await resp.write(_sse(_ROLE))
    for _ in range(20):
        await asyncio.sleep(0.01)
        await resp.write(_sse({"choices": [{"index": 0, "delta": {"content": "1, 2, 3, 4, "}}]}))
    end = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    await resp.write(_sse(end) + b"data: [DONE]\n\n")
    return resp


@pytest.fixture
async def odd_server() -> AsyncIterator[str]:
    """Chat answers that go wrong in one way each, chosen by the base URL's prefix."""
    app = web.Application()
    for prefix, handler in (("500", _http_500), ("bad", _bad_stream), ("hang", _hang),
                            ("endless", _endless), ("nousage", _no_usage)):
        app.router.add_post(f"/{prefix}/v1/chat/completions", handler)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def test_http_500_makes_failed_checks_with_the_error(odd_server: str) -> None:
    async with ApiClient(odd_server + "/500") as client:
        records = await run_checks(client, SERVED_MODEL)
    assert score(records) == (0, 7)
    assert all("boom: engine core died" in r.reason for r in records), [r.reason for r in records]
    assert records[0].response["error"]["status"] == 500
    assert records[4].reason.startswith("first turn: ")  # the round trip failed on its first request


async def test_a_broken_stream_is_a_failed_check(odd_server: str) -> None:
    async with ApiClient(odd_server + "/bad") as client:
        records = await run_checks(client, SERVED_MODEL, tools=False)
    assert [r.passed for r in records] == [False] * 3
    assert all("not JSON" in r.reason and r.response["error"]["kind"] == "protocol_error" for r in records)


async def test_a_hung_server_costs_one_deadline_then_nothing_is_sent(odd_server: str) -> None:
    t0 = time.perf_counter()
    async with ApiClient(odd_server + "/hang") as client:
        records = await run_checks(client, SERVED_MODEL, deadlines=StreamDeadlines(0.3, 0.3))
    assert time.perf_counter() - t0 < 5
    assert score(records) == (0, 7)
    assert records[0].response["error"]["kind"] == "first_token_timeout"
    assert all("not sent: an earlier request failed" in r.reason for r in records[1:])


async def test_an_endless_answer_ends_at_the_request_timeout(odd_server: str) -> None:
    async with ApiClient(odd_server + "/endless") as client:
        records = await run_checks(client, SERVED_MODEL, tools=False, timeout_s=0.4)
    assert records[0].reason == "no complete answer within 0.4 s"
    assert all(not r.passed for r in records)


async def test_idle_probe_without_usage_is_marked_estimated(odd_server: str) -> None:
    async def no_sleep(_: float) -> None:
        return None

    async with ApiClient(odd_server + "/nousage") as client:
        records = await idle_probe(client, SERVED_MODEL, idle_s=45.0, sleep=no_sleep)
    assert len(records) == 4
    for r in records:
        assert r.estimated and not r.error
        assert r.completion_tokens == round(20 * len("1, 2, 3, 4, ") / 4)
        assert r.decode_tps is not None and r.decode_tps > 0


async def test_idle_probe_failures_are_records_not_exceptions(odd_server: str) -> None:
    async with ApiClient(odd_server + "/500") as client:
        records = await idle_probe(client, SERVED_MODEL, idle_s=0.0)
    assert [r.error != "" and r.decode_tps is None for r in records] == [True] * 4
    assert all(isinstance(r, ProbeRecord) and "boom" in r.error for r in records)


# --- verdicts -------------------------------------------------------------------------------------


def _result(content: str = "", calls: tuple[ToolCall, ...] = (), finish: str | None = "stop") -> ChatResult:
    return ChatResult(content, "", calls, finish, Usage(10, 5, 15))


def _call(name: str, args: str = '{"city": "Tokyo"}', i: int = 0) -> ToolCall:
    return ToolCall(f"call-{i}", name, args, i)


def test_forced_tool_passes_only_alone() -> None:
    alone = check_forced(_result(calls=(_call("get_time"),)))
    assert alone == (True, 'only the forced tool: get_time({"city": "Tokyo"})')
    extra = check_forced(_result(calls=(_call("get_time"), _call("get_weather", i=1))))
    assert extra == (False, "extra tool returned: get_weather")
    assert not check_forced(_result("It is noon."))[0]
    assert not check_forced(_result(calls=(_call("get_time", "[1]"),)))[0]


def test_auto_tool_needs_the_finish_reason_the_tool_and_the_city() -> None:
    assert check_auto(_result(calls=(_call("get_weather"),), finish="tool_calls"))[0]
    assert "finish_reason 'stop'" in check_auto(_result(calls=(_call("get_weather"),)))[1]
    assert not check_auto(_result(calls=(_call("get_time"),), finish="tool_calls"))[0]
    assert "do not name Tokyo" in check_auto(
        _result(calls=(_call("get_weather", '{"city": "Oslo"}'),), finish="tool_calls"))[1]


def test_parallel_needs_one_call_per_city() -> None:
    paris, london = _call("get_weather", '{"city": "Paris"}'), _call("get_weather", '{"city": "London"}', 1)
    assert check_parallel(_result(calls=(paris, london), finish="tool_calls"))[0]
    one = check_parallel(_result(calls=(paris,), finish="tool_calls"))
    assert "expected 2 get_weather calls, got 1" in one[1]
    twice = check_parallel(_result(calls=(paris, paris), finish="tool_calls"))
    assert twice == (False, 'no call for London (arguments: {"city": "Paris"}; {"city": "Paris"})')


def test_vision_verdicts_name_what_was_expected_and_what_came() -> None:
    assert check_stripes(_result("Four stripes, left to right: red, yellow, green and blue."))[0]
    wrong_count = check_stripes(_result("Three stripes: red, yellow, green, blue."))
    assert not wrong_count[0] and "does not say four" in wrong_count[1]
    assert "another order" in check_stripes(_result("4 stripes: blue, green, yellow, red"))[1]
    assert "yellow not named" in check_stripes(_result("4 stripes: red, orange, green, blue"))[1]
    assert check_two_images(_result("first: blue, second: red"))[0]
    assert check_two_images(_result("Image 1 is blue and image 2 is red."))[0]
    assert check_two_images(_result("They are blue and red."))[0]  # no labels: order of mention
    swapped = check_two_images(_result("first: red, second: blue"))
    assert swapped[1].startswith("expected first blue, second red; got first red, second blue")
    assert check_grid(_result("top-left: red, top-right: green, bottom-left: blue, bottom-right: yellow"))[0]
    assert check_grid(_result("Upper right green; upper left red; lower right yellow; lower left blue."))[0]
    three = check_grid(_result("top-left: red, top-right: green, bottom-left: blue"))
    assert "bottom-right not named" in three[1]
    assert "names no quadrant" in check_grid(_result("red, green, blue, yellow"))[1]
    assert "empty answer" in check_grid(_result(""))[1]


# --- PNG images -----------------------------------------------------------------------------------

RED, GREEN, BLUE, YELLOW = (images.COLOURS[c] for c in ("red", "green", "blue", "yellow"))


def test_png_pixels_round_trip_through_the_sims_decoder() -> None:
    width, height, rows = decode_png(images.encode_png(5, 3, lambda x, y: (x * 50, y * 100, 7)))
    assert (width, height) == (5, 3)
    assert rows == [[(x * 50, y * 100, 7) for x in range(5)] for y in range(3)]


def test_stripes_grid_and_solid_draw_what_they_say() -> None:
    _w, _h, rows = decode_png(images.stripes([RED, YELLOW, GREEN, BLUE], width=8, height=2))
    assert rows[0] == rows[1] == [RED, RED, YELLOW, YELLOW, GREEN, GREEN, BLUE, BLUE]
    _w, _h, rows = decode_png(images.grid(RED, GREEN, BLUE, YELLOW, side=4))
    assert [rows[0][0], rows[0][3], rows[3][0], rows[3][3]] == [RED, GREEN, BLUE, YELLOW]
    assert rows[1][1] == RED and rows[2][2] == YELLOW
    _w, _h, rows = decode_png(images.solid(BLUE, side=3))
    assert {px for row in rows for px in row} == {BLUE}


def test_image_part_is_a_png_data_url_the_sim_reads() -> None:
    part = images.image_part(images.stripes([RED, YELLOW, GREEN, BLUE]))
    img = parse_data_url(part["image_url"]["url"])
    assert (img.mime, img.width, img.height) == ("image/png", 256, 128)
    assert analyse(img) == {"kind": "stripes", "orientation": "vertical",
                            "colours": ["red", "yellow", "green", "blue"]}


def test_png_size_is_bounded() -> None:
    with pytest.raises(ValueError, match="1-4096 pixels"):
        images.encode_png(0, 10, lambda _x, _y: RED)
    with pytest.raises(ValueError, match="1-4096 pixels"):
        images.encode_png(10, 5000, lambda _x, _y: RED)
    with pytest.raises(ValueError, match="stripe colours"):
        images.stripes([])
