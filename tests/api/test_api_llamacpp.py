"""llama.cpp's `llama-server` as the cockpit reads it without the server (its bodies, verbatim from the
llama.cpp that llama-cpp-python 0.3.36 vendors; tests/real_llama reads the live server): the context length
in /v1/models' `meta.n_ctx`, and the remedies for its error bodies."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from cockpit.api.client import ApiClient
from cockpit.api.errors import REMEDY_SERVER_FAILED, from_status

# GET /v1/models of `llama-server -m tiny.gguf --alias tiny-llama -c 8192 -np 2` (tests/real_llama's)
LLAMA_MODELS = {
    "models": [{"name": "tiny-llama", "model": "tiny-llama", "modified_at": "", "size": "", "digest": "",
                "type": "model", "description": "", "tags": [""], "capabilities": ["completion"],
                "parameters": "", "details": {"parent_model": "", "format": "gguf", "family": "",
                                              "families": [""], "parameter_size": "",
                                              "quantization_level": ""}}],
    "object": "list",
    "data": [{"id": "tiny-llama", "aliases": ["tiny-llama"], "tags": [], "object": "model",
              "created": 1796389515, "owned_by": "llamacpp",
              "meta": {"vocab_type": 1, "n_vocab": 361, "n_ctx": 4096, "n_ctx_train": 4096, "n_embd": 64,
                       "n_params": 120256, "size": 481024, "ftype": "all F32"}}],
}
NOT_FOUND = b'{"error":{"message":"File Not Found","type":"not_found_error","code":404}}'
# POST /v1/chat/completions with the body `{not json`
BAD_JSON = (b'{"error":{"code":500,"message":"[json.exception.parse_error.101] parse error at line 1, '
            b"column 3: syntax error while parsing object key - invalid literal; last read: '{no'; "
            b'expected string literal","type":"server_error"}}')


@pytest.fixture
async def models_url() -> AsyncIterator[tuple[dict[str, object], str]]:
    answer: dict[str, object] = {"body": LLAMA_MODELS}
    app = web.Application()

    async def models(request: web.Request) -> web.Response:
        return web.json_response(answer["body"])

    app.router.add_get("/v1/models", models)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield answer, f"http://127.0.0.1:{port}"
    await runner.cleanup()


async def test_the_context_length_is_llamacpp_meta_n_ctx(models_url: tuple[dict[str, object], str]) -> None:
    answer, url = models_url
    async with ApiClient(url) as client:
        (model,) = await client.models()
        assert model.id == "tiny-llama" and model.owned_by == "llamacpp" and model.max_model_len == 4096
        both = json.loads(json.dumps(LLAMA_MODELS))
        both["data"][0]["max_model_len"] = 2048          # vLLM's own field wins where both are there
        answer["body"] = both
        assert (await client.models())[0].max_model_len == 2048
        for odd in (0, -1, "4096", True, None):           # not a context length: unknown, not guessed
            bad = json.loads(json.dumps(LLAMA_MODELS))
            bad["data"][0]["meta"]["n_ctx"] = odd
            answer["body"] = bad
            assert (await client.models())[0].max_model_len is None, odd


def test_llamacpp_unknown_path_is_a_wrong_path() -> None:
    err = from_status(404, NOT_FOUND, "http://h/v1/nowhere")
    assert err.message == "HTTP 404 from http://h/v1/nowhere: File Not Found"
    assert err.remedy.startswith("Wrong path: the server has no such route")


def test_llamacpp_body_that_is_not_json_is_not_a_server_failure() -> None:
    err = from_status(500, BAD_JSON, "http://h/v1/chat/completions")
    assert err.status == 500 and "parse error" in err.message and "\n" not in err.message
    assert err.remedy != REMEDY_SERVER_FAILED and "could not read the request body" in err.remedy
    # any other 500 keeps the remedy for a failure
    other = from_status(500, b'{"error":{"code":500,"message":"boom","type":"server_error"}}', "http://h")
    assert other.remedy == REMEDY_SERVER_FAILED


# verbatim llama-server bodies: a prompt past the slot's context, a request without messages, an image
# for a model without a projector
OVER_CONTEXT = (b'{"error":{"code":400,"message":"request (25023 tokens) exceeds the available context '
                b'size (4096 tokens), try increasing it","type":"exceed_context_size_error",'
                b'"n_prompt_tokens":25023,"n_ctx":4096}}')
NO_MESSAGES = b'{"error":{"code":400,"message":"\'messages\' is required","type":"invalid_request_error"}}'
NO_VISION = (b'{"error":{"code":500,"message":"image input is not supported - hint: if this is unexpected, '
             b'you may need to provide the mmproj","type":"server_error"}}')


@pytest.mark.parametrize(("status", "body", "remedy_says", "not_says"), [
    (400, OVER_CONTEXT, "exceed the served context", "model name"),
    (400, NO_MESSAGES, "could not read the request body", "max_tokens"),
    (500, NO_VISION, "takes no images", "model name"),
])
def test_llamacpp_request_errors_get_the_remedy_of_their_cause(status: int, body: bytes, remedy_says: str,
                                                               not_says: str) -> None:
    err = from_status(status, body, "http://h/v1/chat/completions")
    assert err.status == status and err.remedy != REMEDY_SERVER_FAILED
    assert remedy_says in err.remedy and not_says not in err.remedy, err.remedy
    assert "-c" in err.remedy or status != 400 or body is NO_MESSAGES
