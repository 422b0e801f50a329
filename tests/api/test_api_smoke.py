"""The smoke test against the fake engine over HTTP: all-pass, hard gates, and each check's verdicts."""

from __future__ import annotations

from apifakes import MODEL, FakeEngine, free_port

from cockpit.api.client import ApiClient
from cockpit.api.smoke import (
    CARD_PROMPT,
    SmokeStep,
    all_passed,
    check_counting,
    check_tool_call,
    run_smoke,
)
from cockpit.api.stream import ChatResult, StreamStats, ToolCall, Usage


async def steps_for(base: str) -> list[SmokeStep]:
    client = ApiClient(base)
    try:
        return [step async for step in run_smoke(client)]
    finally:
        await client.aclose()


def result(content: str = "", calls: tuple[ToolCall, ...] = (), finish: str = "stop") -> ChatResult:
    return ChatResult(
        content, "", calls, finish, Usage(5, 20, 25), StreamStats(0.0, 1.0, 2.0, 20, 5, 0.1, 0.1)
    )


async def test_all_pass(fake_engine: FakeEngine) -> None:
    steps = await steps_for(fake_engine.base + "/smoke")
    assert [s.name for s in steps] == ["health", "models", "card request", "counting", "tool call"]
    assert all(s.ok for s in steps), steps
    assert all_passed(steps)
    card, counting, tool = fake_engine.requests
    assert card["messages"] == [{"role": "user", "content": CARD_PROMPT}]
    assert card["max_tokens"] == 128 and card["temperature"] == 0 and card["stream"] is False
    assert card["chat_template_kwargs"] == {"thinking": False} and card["model"] == MODEL
    assert counting["stream"] is True and counting["chat_template_kwargs"] == {"thinking": False}
    assert tool["tools"][0]["function"]["name"] == "get_weather" and tool["tool_choice"] == "auto"
    assert "Paris" in steps[-1].detail


async def test_engine_dead_stops_at_health(fake_engine: FakeEngine) -> None:
    fake_engine.health_status = 503
    steps = await steps_for(fake_engine.base + "/smoke")
    assert len(steps) == 1 and not steps[0].ok and steps[0].remedy
    assert not all_passed(steps)
    assert fake_engine.requests == []


async def test_wrong_model_stops_at_models(fake_engine: FakeEngine) -> None:
    fake_engine.models = ["some-other-model"]
    steps = await steps_for(fake_engine.base + "/smoke")
    assert [s.ok for s in steps] == [True, False]
    assert "some-other-model" in steps[1].detail and steps[1].remedy


async def test_api_down() -> None:
    (step,) = await steps_for(f"http://127.0.0.1:{free_port()}")
    assert step.name == "health" and not step.ok and "booting or tunnel down" in step.detail


async def test_later_steps_report_each(fake_engine: FakeEngine) -> None:
    # The error-stream engine fails every request check, but each still reports.
    steps = await steps_for(fake_engine.base + "/status/500")
    assert [s.ok for s in steps] == [True, True, False, False, False]
    assert all("HTTP 500" in s.detail and s.remedy for s in steps[2:])


def test_counting_verdicts() -> None:
    assert check_counting(result(", ".join(map(str, range(1, 31)))))[0]
    ok, detail = check_counting(result("1, 2, 3, 4, 5, 6, 7"))
    assert not ok and "30" in detail
    assert not check_counting(result("Sure! 0, 1, 2, 3"))[0]


def test_tool_verdicts() -> None:
    paris = ToolCall("t", "get_weather", '{"city": "Paris"}')
    assert check_tool_call(result(calls=(paris,), finish="tool_calls"))[0]
    ok, detail = check_tool_call(result(calls=(paris,), finish="stop"))
    assert not ok and "finish_reason" in detail
    ok, detail = check_tool_call(
        result(calls=(ToolCall("t", "get_weather", '{"city": "Rome"}'),), finish="tool_calls")
    )
    assert not ok and "Paris" in detail
    ok, detail = check_tool_call(
        result(calls=(ToolCall("t", "get_weather", '{"city": '),), finish="tool_calls")
    )
    assert not ok and "not a JSON object" in detail
    assert not check_tool_call(result("It is sunny."))[0]
