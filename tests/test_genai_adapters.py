"""google-genai adapters without a framework: to_genai (G1, G2), feed_chunk of SDK
objects (G4), SDK objects in run_turn (G5) and GenaiClient (G6)."""

from __future__ import annotations

import base64
import datetime
import subprocess
import sys
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

import orjson
import pytest

import fastagg
from conftest import FASTAGG_PATH
from fastagg import StopReason, run_turn
from fastagg._chunks import _GENAI_LOCAL_FIELDS, _model_of, _plain, chunk_to_mapping
from fastagg.testing import (
    AGENT_PROMPT,
    STREAMED_ANSWER,
    STREAMED_CALLS,
    FakeGemini,
    Step,
    chunk,
    error_chunk,
    final,
    signature,
    streamed_args_scenario,
    text,
)
from fastagg.testing.scenarios import save_note

types = pytest.importorskip("google.genai.types")
genai = pytest.importorskip("google.genai")
fastagg_genai = pytest.importorskip("fastagg.genai")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benches import corpus  # noqa: E402

# ---------------------------------------------------------------- G1, G2


def test_g1_to_genai_leaves_out_the_error_and_unknown_keys_and_warns(impl: ModuleType) -> None:
    agg = impl.StreamAggregator()
    agg.feed_chunk({"candidates": [{"content": {"parts": [{"text": "hi", "futureThing": 1}]}}]})
    agg.feed_chunk({"error": {"code": 500, "message": "boom", "status": "INTERNAL"}})
    result = agg.close()
    with pytest.warns(fastagg_genai.GenaiConversionWarning) as caught:
        response = result.to_genai()
    assert isinstance(response, types.GenerateContentResponse)
    assert response.candidates[0].content.parts == [types.Part(text="hi")]
    (warning,) = caught
    assert str(warning.message) == (
        f"to_genai(): left out what google-genai {genai.__version__} cannot hold: error (the "
        "in-stream error {'code': 500, 'message': 'boom', 'status': 'INTERNAL'}); "
        "candidates[0].content.parts[0].futureThing. The AggregatedResponse keeps it "
        "(.error, .to_dict())."
    )
    assert warning.filename == __file__
    assert result.error == {"code": 500, "message": "boom", "status": "INTERNAL"}
    assert result.parts == [{"text": "hi", "futureThing": 1}]


def test_g1_a_number_or_a_list_where_an_enum_goes_is_left_out_and_named(
    impl: ModuleType,
) -> None:
    # The SDK's enums call value.upper(): these raised AttributeError out of to_genai().
    agg = impl.StreamAggregator()
    agg.feed_chunk(
        {
            "candidates": [{"content": {"parts": [{"text": "hi"}]}}],
            "promptFeedback": {"blockReason": False},
            "usageMetadata": {"promptTokensDetails": [{"modality": ["TEXT"], "tokenCount": 2}]},
        }
    )
    with pytest.warns(fastagg_genai.GenaiConversionWarning) as caught:
        response = agg.close().to_genai()
    assert response.candidates[0].content.parts == [types.Part(text="hi")]
    assert response.prompt_feedback == types.GenerateContentResponsePromptFeedback()
    assert response.usage_metadata.prompt_tokens_details == [
        types.ModalityTokenCount(token_count=2)
    ]
    (warning,) = caught
    assert str(warning.message) == (
        f"to_genai(): left out what google-genai {genai.__version__} cannot hold: "
        "promptFeedback.blockReason; usageMetadata.promptTokensDetails[0].modality. "
        "The AggregatedResponse keeps it "
        "(.error, .to_dict())."
    )


def test_g1_to_genai_of_a_clean_result_does_not_warn(impl: ModuleType) -> None:
    agg = impl.StreamAggregator()
    agg.feed_chunk(chunk(text("fine"), finish_reason="STOP"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert agg.close().to_genai().text == "fine"


def test_g2_missing_google_genai_names_the_extra(tmp_path: Path) -> None:
    # A google package without genai shadows the installed SDK for this child only.
    (tmp_path / "google").mkdir()
    (tmp_path / "google" / "__init__.py").write_text("")
    code = (
        "import fastagg\n"
        "try:\n    fastagg.StreamAggregator().close().to_genai()\n"
        "except ImportError as e:\n    print(e)\n"
        "try:\n    import fastagg.genai\n"
        "except ImportError as e:\n    print(e)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": f"{tmp_path}:{FASTAGG_PATH}", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.stdout.splitlines() == [
        "to_genai() needs the google-genai package, which is not installed: "
        "pip install 'fastagg[genai]'",
        "fastagg.genai needs the google-genai package, which is not installed: "
        "pip install 'fastagg[genai]'",
    ], done.stderr


# ---------------------------------------------------------------- G4


def _dump_path(obj: Any) -> Any:
    return _plain(
        obj.model_dump(by_alias=True, exclude_none=True, exclude=_GENAI_LOCAL_FIELDS), "$", 1
    )


@pytest.mark.parametrize("name", corpus.STREAMS)
def test_g4_fields_read_directly_equal_the_model_dump_path(name: str) -> None:
    stream = corpus.build(name, scale=0.05, giant_mb=0.1)
    for payload in stream.payloads:
        response = types.GenerateContentResponse.model_validate(orjson.loads(payload))
        fast = chunk_to_mapping(response)
        assert orjson.dumps(fast) == orjson.dumps(_dump_path(response))


def test_g4_fields_set_after_construction_and_odd_values_are_read() -> None:
    part = types.Part(text="x")
    part.thought_signature = b"\xfb\xff\xbf"  # assigned later: still read
    call = types.FunctionCall(name="f", args={"n": None, "big": 2**70, "when": "now"})
    response = types.GenerateContentResponse(
        candidates=[
            types.Candidate(
                content=types.Content(role="model", parts=[part, types.Part(function_call=call)]),
                finish_reason=types.FinishReason.STOP,
            )
        ],
        create_time=datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc),
    )
    fast = chunk_to_mapping(response)
    assert orjson.dumps(fast) == orjson.dumps(_dump_path(response))
    assert fast["candidates"][0]["content"]["parts"][0] == {
        "text": "x",
        "thoughtSignature": base64.b64encode(b"\xfb\xff\xbf").decode(),
    }
    assert fast["createTime"] == "2026-01-02T03:04:05Z"
    assert fast["candidates"][0]["content"]["parts"][1]["functionCall"]["args"]["big"] == 2.0**70


def test_g4_a_value_the_fast_path_does_not_know_takes_the_model_dump_path() -> None:
    class Named(str):
        pass

    response = types.GenerateContentResponse(model_version=Named("m"))
    assert chunk_to_mapping(response) == {"modelVersion": "m"}
    assert type(chunk_to_mapping(response)["modelVersion"]) is str


def test_g8_chunks_with_many_different_field_sets_stay_exact_and_bounded() -> None:
    fields = [
        "cached_content_token_count",
        "candidates_token_count",
        "prompt_token_count",
        "thoughts_token_count",
        "tool_use_prompt_token_count",
        "total_token_count",
        "prompt_tokens_details",
        "traffic_type",
        "cache_tokens_details",
    ]
    values: dict[str, Any] = {
        "prompt_tokens_details": [types.ModalityTokenCount(modality="TEXT", token_count=3)],
        "cache_tokens_details": [],
        "traffic_type": types.TrafficType.ON_DEMAND,
    }
    usage_class = types.GenerateContentResponseUsageMetadata
    for mask in range(1, 2 ** len(fields)):  # 511 different sets of set fields
        chosen = {f: values.get(f, i) for i, f in enumerate(fields) if mask >> i & 1}
        response = types.GenerateContentResponse(usage_metadata=usage_class(**chosen))
        assert orjson.dumps(chunk_to_mapping(response)) == orjson.dumps(_dump_path(response))
    assert len(_model_of(usage_class).layouts) == 256  # type: ignore[union-attr]


# ---------------------------------------------------------------- G5


async def test_g5_run_turn_takes_sdk_contents_config_and_system_instruction() -> None:
    async with FakeGemini(streamed_args_scenario()) as server:
        async with fastagg.GeminiClient(
            "gemini-3-flash-preview", vertex=True, api_key="k", base_url=server.url
        ) as model:
            result = await run_turn(
                model,
                [types.Content(role="user", parts=[types.Part(text=AGENT_PROMPT)])],
                tools=[save_note],
                system_instruction=types.Content(parts=[types.Part(text="Be brief.")]),
                config=types.GenerateContentConfig(
                    temperature=0.5,
                    thinking_config=types.ThinkingConfig(include_thoughts=True),
                    tool_config=types.ToolConfig(
                        function_calling_config=types.FunctionCallingConfig(mode="AUTO")
                    ),
                ),
            )
    assert (result.stop_reason, result.text) == (StopReason.COMPLETED, STREAMED_ANSWER)
    first = server.requests[0]
    assert first["contents"] == [{"role": "user", "parts": [{"text": AGENT_PROMPT}]}]
    assert first["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert first["generationConfig"] == {
        "temperature": 0.5,
        "thinkingConfig": {"includeThoughts": True},
    }
    assert first["toolConfig"] == {"functionCallingConfig": {"mode": "AUTO"}}
    assert (
        server.requests[1]["contents"][1]["parts"][1]["functionCall"]["args"]
        == (STREAMED_CALLS[0][1])
    )


async def test_g5_sdk_function_declarations_are_refused_with_what_to_pass() -> None:
    declaration = types.FunctionDeclaration(name="save_note", description="Save a note.")
    with pytest.raises(TypeError, match=r"google-genai FunctionDeclaration, which has no code"):
        await run_turn(
            _NoModel(), [{"role": "user", "parts": [{"text": "hi"}]}], tools=[declaration]
        )


async def test_g5_sdk_client_settings_in_the_config_are_refused() -> None:
    config = types.GenerateContentConfig(http_options=types.HttpOptions(timeout=5))
    with pytest.raises(ValueError, match=r"httpOptions is a setting of the google-genai client"):
        await run_turn(_NoModel(), [{"role": "user", "parts": [{"text": "hi"}]}], config=config)


class _NoModel:
    model = "gemini-3-flash-preview"

    def stream(self, request: dict[str, Any], *, timeout: float | None) -> Any:
        raise AssertionError("nothing may be sent")


# ---------------------------------------------------------------- G6


def _vertex_client(server: FakeGemini) -> Any:
    return genai.Client(
        vertexai=True, api_key="k", http_options=types.HttpOptions(base_url=server.url)
    )


async def test_g6_genai_client_runs_a_turn_through_the_users_client() -> None:
    async with FakeGemini(streamed_args_scenario()) as server:
        client = _vertex_client(server)
        model = fastagg_genai.GenaiClient(client, "gemini-3-flash-preview")
        result = await run_turn(
            model, [{"role": "user", "parts": [{"text": AGENT_PROMPT}]}], tools=[save_note]
        )
    assert (result.stop_reason, result.text) == (StopReason.COMPLETED, STREAMED_ANSWER)
    assert [r.path for r in server.records] == [
        "/v1beta1/publishers/google/models/gemini-3-flash-preview:streamGenerateContent"
    ] * 2
    assert server.requests[1]["contents"][1]["parts"][1]["functionCall"] == {
        "id": "fc_note",
        "name": "save_note",
        "args": STREAMED_CALLS[0][1],
    }


async def test_g6_http_error_is_a_provider_error_with_retry_after() -> None:
    steps = [Step(http_error=429, retry_delay="3s")] * 3
    async with FakeGemini(steps) as server:
        model = fastagg_genai.GenaiClient(_vertex_client(server), "gemini-3-flash-preview")
        with pytest.raises(fastagg.ProviderError) as info:
            async with model.stream(
                {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}, timeout=None
            ) as body:
                async for _ in body:
                    pass
    assert (info.value.status, info.value.code, info.value.kind) == (
        429,
        "RESOURCE_EXHAUSTED",
        "http",
    )
    assert info.value.retry_after == 3.0
    assert info.value.retryable


async def test_g6_error_after_a_chunk_is_an_in_stream_error_event() -> None:
    async with FakeGemini([[chunk(text("Half")), error_chunk()]]) as server:
        model = fastagg_genai.GenaiClient(_vertex_client(server), "gemini-3-flash-preview")
        agg = fastagg.StreamAggregator()
        async with model.stream(
            {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}, timeout=None
        ) as body:
            async for piece in body:
                agg.feed(piece)
    result = agg.close()
    assert result.text == "Half"
    assert result.error is not None
    assert (result.error["code"], result.error["status"]) == (500, "INTERNAL")


def _httpx2_client(server: FakeGemini) -> Any:
    """A google-genai client on httpx2, as pydantic-ai's GoogleProvider makes one."""
    httpx2 = pytest.importorskip("httpx2")
    options = types.HttpOptions(base_url=server.url, httpx_async_client=httpx2.AsyncClient())
    return genai.Client(api_key="k", http_options=options)


@pytest.mark.parametrize(
    ("drop_after", "pieces"), [(0, 0), (1, 1)], ids=["before-a-chunk", "after-a-chunk"]
)
async def test_g6_an_httpx2_transport_error_is_a_connection_provider_error(
    drop_after: int, pieces: int
) -> None:
    # google-genai 2.x/3.x run on httpx2 as well as httpx and aiohttp: its errors are
    # transport errors too, retryable, not an exception the turn loop does not know.
    async with FakeGemini(
        [Step([chunk(text("Half")), final(signature("h"))], drop_after=drop_after)]
    ) as server:
        model = fastagg_genai.GenaiClient(_httpx2_client(server), "gemini-3-flash-preview")
        got: list[bytes] = []
        with pytest.raises(fastagg.ProviderError) as info:
            async with model.stream(
                {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}, timeout=None
            ) as body:
                async for piece in body:
                    got.append(piece)
    assert len(got) == pieces
    assert (info.value.kind, info.value.code, info.value.retryable) == (
        "connection",
        "CONNECTION",
        True,
    )
    assert info.value.message.startswith("connection failed: RemoteProtocolError: ")


def test_g6_a_request_field_the_sdk_cannot_express_is_refused_before_sending() -> None:
    model = fastagg_genai.GenaiClient(genai.Client(api_key="k"), "gemini-3-flash-preview")
    with pytest.raises(ValueError, match=r"'futureField' has no GenerateContentConfig counterpart"):
        model.stream({"contents": [], "futureField": 1}, timeout=None)


def test_g6_the_genai_helpers_work_where_httpx_is_not_installed() -> None:
    # google-genai 3.x runs on httpx2 and no longer installs httpx, an optional extra of
    # fastagg's too: fastagg.genai must import and map the stacks that are there.
    code = (
        "import sys\n"
        "sys.modules['httpx'] = None  # as if not installed: importing it raises ImportError\n"
        "try:\n"
        "    import google.genai\n"
        "except ImportError:  # google-genai 1.x and 2.x need httpx themselves\n"
        "    print('the SDK needs httpx'); raise SystemExit\n"
        "import aiohttp, fastagg.genai as g\n"
        "failures, timeouts = g._transport_errors()\n"
        "print(aiohttp.ClientError in failures, aiohttp.ServerTimeoutError in timeouts,\n"
        "      any(e.__module__.split('.')[0] == 'httpx' for e in failures))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    if out.stdout == "the SDK needs httpx\n":
        pytest.skip("this google-genai imports httpx itself, so it is installed wherever it is")
    assert out.stdout == "True True False\n"
