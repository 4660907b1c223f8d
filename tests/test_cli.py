"""The ``fastagg`` command line (``python -m fastagg``): aggregate, replay-server, demo; and the examples."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import FASTAGG_PATH
from fastagg.testing import call, chunk, final, signature, streamed_call, text, thought, usage

ROOT = Path(__file__).resolve().parent.parent
WEATHER = ROOT / "examples" / "data" / "weather.sse"
WEATHER_SIG = signature("weather example")


def env() -> dict[str, str]:
    out = dict(os.environ)
    out["PYTHONPATH"] = os.pathsep.join(filter(None, [FASTAGG_PATH, out.get("PYTHONPATH")]))
    out.pop("GEMINI_API_KEY", None)
    out.pop("GOOGLE_API_KEY", None)
    out["NO_COLOR"] = "1"
    return out


def fastagg(
    *args: str, stdin: bytes | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "fastagg", *args],
        input=stdin,
        capture_output=True,
        env=env(),
        timeout=timeout,
        cwd=ROOT,
        check=False,
    )


def sse(*chunks: dict[str, Any]) -> bytes:
    return b"".join(
        b"data: " + json.dumps(c, separators=(",", ": ")).encode() + b"\r\n\r\n" for c in chunks
    )


# --- aggregate --------------------------------------------------------------------------------


def test_aggregate_prints_the_aggregated_response_as_json() -> None:
    done = fastagg("aggregate", str(WEATHER))
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["text"] == "Let me check the weather in Paris."
    assert out["thought_text"] == (
        "**Checking the forecast**\n\nThe user wants the weather in Paris, so I'll call get_weather."
    )
    assert out["function_calls"] == [
        {"id": "t8k2m1qz", "name": "get_weather", "args": {"city": "Paris", "unit": "celsius"}}
    ]
    assert (out["finish_reason"], out["complete"], out["truncated"], out["error"]) == (
        "STOP",
        True,
        False,
        None,
    )
    assert out["usage"] == {
        "promptTokenCount": 61,
        "candidatesTokenCount": 17,
        "thoughtsTokenCount": 90,
        "totalTokenCount": 168,
    }


def test_aggregate_parts_view_keeps_the_signature_byte_exact() -> None:
    done = fastagg("aggregate", "--parts", str(WEATHER))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [
        {
            "text": "**Checking the forecast**\n\nThe user wants the weather in Paris, so I'll call "
            "get_weather.",
            "thought": True,
        },
        {"text": "Let me check the weather in Paris."},
        {
            "functionCall": {
                "id": "t8k2m1qz",
                "name": "get_weather",
                "args": {"city": "Paris", "unit": "celsius"},
            },
            "thoughtSignature": WEATHER_SIG,
        },
    ]


def test_aggregate_text_view_reads_stdin() -> None:
    body = sse(chunk(text("Hello")), chunk(text(" world."), finish_reason="STOP"))
    done = fastagg("aggregate", "--text", "-", stdin=body)
    assert (done.returncode, done.stdout) == (0, b"Hello world.\n")


def test_aggregate_accepts_json_array_framing() -> None:
    chunks = [chunk(text("Hi")), final(signature("a"), usage=usage(2, 1))]
    done = fastagg("aggregate", "--text", "-", stdin=json.dumps(chunks, indent=2).encode())
    assert (done.returncode, done.stdout) == (0, b"Hi\n")


def test_k1_aggregate_malformed_event_exits_1_naming_the_byte_offset() -> None:
    good = sse(chunk(thought("hm")))
    body = good + b'data: {"candidates": [\r\n\r\n' + sse(chunk(text("x"), finish_reason="STOP"))
    done = fastagg("aggregate", "-", stdin=body)
    assert done.returncode == 1
    assert done.stdout == b""
    stderr = done.stderr.decode()
    assert f"fastagg aggregate: <stdin>: event 1 at byte {len(good)} is not valid JSON" in stderr
    assert "1 malformed event(s); no output written" in stderr


def test_aggregate_unreadable_file_exits_2() -> None:
    done = fastagg("aggregate", "no/such/file.sse")
    assert done.returncode == 2
    assert done.stderr.decode().startswith("fastagg aggregate: cannot read no/such/file.sse: ")


def test_k1_usage_errors_exit_2() -> None:
    assert fastagg().returncode == 2
    assert fastagg("aggregate").returncode == 2
    assert fastagg("aggregate", "--parts", "--text", str(WEATHER)).returncode == 2


OPENAI_STREAM = (
    b'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"delta":{"content":"hi"}}]}'
    b"\n\ndata: [DONE]\n\n"
)
WHOLE = sse(chunk(text("Hello")), chunk(text(" world."), finish_reason="STOP"))


@pytest.mark.parametrize(
    ("label", "body", "reason"),
    [
        ("empty", b"", "the input is empty: there is no stream to aggregate"),
        (
            "random bytes",
            bytes(range(256)) * 3,
            "no stream event found in 768 bytes: expected a Gemini streamGenerateContent body",
        ),
        (
            "plain text",
            b"hello\nworld\n",
            "no stream event found in 12 bytes",
        ),
        (
            "a JSON object that is no response",
            b'{"foo": 1, "bar": [1, 2]}',
            "1 event(s) but none looks like a Gemini response (no candidates, usageMetadata or "
            "error): is this another provider's stream?",
        ),
        ("an OpenAI-style stream", OPENAI_STREAM, "is this another provider's stream?"),
        (
            "a truncated body",
            WHOLE[:-20],
            "the body ends inside an unfinished event: the stream was cut off (truncated)",
        ),
        (
            "no finish reason",
            sse(chunk(text("Hello"))),
            "the stream ended before the model finished: no finish reason on candidate 0",
        ),
        (
            "an in-stream error",
            sse(
                chunk(text("Hel")),
                {"error": {"code": 503, "status": "UNAVAILABLE", "message": "busy"}},
            ),
            "the stream carries an error (503 UNAVAILABLE): busy",
        ),
    ],
)
def test_k2_aggregate_exits_1_with_one_plain_line_when_the_input_is_no_whole_response(
    label: str, body: bytes, reason: str
) -> None:
    done = fastagg("aggregate", "-", stdin=body)
    assert done.returncode == 1, label
    assert done.stdout == b""
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("fastagg aggregate: <stdin>: ")
    assert reason in lines[0]
    assert lines[0].endswith("; no output written (--lenient prints what was received)")
    assert not any(f"{code}:" in lines[0] for code in ("F2", "F6", "E6"))  # no bare rule codes


def test_k2_lenient_prints_the_best_effort_aggregate_and_exits_0() -> None:
    done = fastagg("aggregate", "--lenient", "--text", "-", stdin=WHOLE[:-20])
    assert (done.returncode, done.stdout) == (0, b"Hello\n")
    # U6: the warning's text and its diagnostic code, no rule id
    assert done.stderr.decode() == (
        "fastagg aggregate: <stdin>: warning: the stream ended inside an incomplete event at "
        "byte 139; it was dropped and the result is marked truncated [incomplete_event_dropped]\n"
    )


def test_k2_lenient_skips_malformed_events() -> None:
    body = (
        sse(chunk(text("a"))) + b"data: {nope\r\n\r\n" + sse(chunk(text("b"), finish_reason="STOP"))
    )
    done = fastagg("aggregate", "--lenient", "--text", "-", stdin=body)
    assert (done.returncode, done.stdout) == (0, b"ab\n")


CUT_BODY = "Your refund of 40 EUR was "
CUT_REASON = (
    "the stream ended inside the function call 'send_email' (part 1): the model did not "
    "finish it, so its arguments may be cut off; it is listed in unfinished_calls, not "
    "function_calls"
)


def cut_inside_a_call(*tail: dict[str, Any]) -> bytes:
    """A finished call, then a streamed call whose stream ends inside its argument."""
    return sse(
        chunk(call("lookup", {"q": "refund"}, id="a", signature=signature("s"))),
        *streamed_call("send_email", {"body": CUT_BODY + "sent."}, id="b", piece=13)[:-2],
        *tail,
    )


def test_k9_aggregate_json_lists_unfinished_calls_apart_from_function_calls() -> None:
    done = fastagg("aggregate", "--lenient", "-", stdin=cut_inside_a_call())
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["function_calls"] == [{"id": "a", "name": "lookup", "args": {"q": "refund"}}]
    assert out["unfinished_calls"] == [
        {"id": "b", "name": "send_email", "args": {"body": CUT_BODY}, "part": 1}
    ]
    assert done.stderr.decode().splitlines() == [
        f"fastagg aggregate: <stdin>: warning: {CUT_REASON}"
    ]


def test_k9_whole_streams_show_no_unfinished_calls() -> None:
    done = fastagg("aggregate", str(WEATHER))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["unfinished_calls"] == []


@pytest.mark.parametrize("finish", [None, "STOP"])
def test_k10_aggregate_refuses_a_stream_that_ended_inside_a_call(finish: str | None) -> None:
    tail = [final(finish_reason=finish)] if finish else []
    done = fastagg("aggregate", "-", stdin=cut_inside_a_call(*tail))
    assert (done.returncode, done.stdout) == (1, b"")
    assert done.stderr.decode().splitlines() == [
        f"fastagg aggregate: <stdin>: {CUT_REASON}; no output written "
        "(--lenient prints what was received)"
    ]


def test_k4_output_to_a_closed_pipe_exits_quietly() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "fastagg", "aggregate", str(WEATHER)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env(),
        cwd=ROOT,
    )
    assert proc.stdout is not None
    proc.stdout.close()  # the reader is gone before anything is written
    _, stderr = proc.communicate(timeout=60)
    assert (proc.returncode, stderr) == (0, b"")


def test_k4_version() -> None:
    import fastagg as package

    done = fastagg("--version")
    assert (done.returncode, done.stdout.decode()) == (0, f"fastagg {package.__version__}\n")


# fastagg runs from this checkout (the dev venv), not from a wheel installed elsewhere.
FROM_CHECKOUT = Path(FASTAGG_PATH) == ROOT / "python"
needs_checkout = pytest.mark.skipif(
    not FROM_CHECKOUT,
    reason="fastagg is installed from a wheel here; `fastagg bench` needs a checkout",
)


def test_k5_bench_help_always_prints_help() -> None:
    done = fastagg("bench", "--help")
    out = done.stdout.decode()
    assert done.returncode == 0
    assert out.startswith("usage: fastagg bench")
    # The suite's own options where a checkout holds it.
    assert ("usage: python -m benches" in out) is FROM_CHECKOUT


# --- replay-server ------------------------------------------------------------------------------


def test_replay_server_serves_a_json_script_until_interrupted(tmp_path: Path) -> None:
    script = tmp_path / "scenario.json"
    steps = [[chunk(text("Bonjour"), finish_reason="STOP")]]
    script.write_text(json.dumps({"steps": steps}))
    proc = subprocess.Popen(
        [sys.executable, "-m", "fastagg", "replay-server", str(script), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env(),
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline().decode()
        assert first.startswith("fake Gemini serving 1 step(s) at http://127.0.0.1:")
        url = first.rsplit(" ", 1)[1].strip()
        proc.stdout.readline()
        response = httpx.post(
            f"{url}/v1beta/models/m:streamGenerateContent?alt=sse",
            json={"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
            headers={"x-goog-api-key": "k"},
            timeout=10,
        )
        assert response.content == sse(steps[0][0])
        assert proc.stdout.readline().decode() == (
            "POST /v1beta/models/m:streamGenerateContent -> 200 (step 1)\n"
        )
    finally:
        proc.send_signal(signal.SIGINT)
        stderr = _stopped(proc)
    assert proc.returncode == 0
    assert b"fastagg replay-server: stopped" in stderr


def _stopped(proc: subprocess.Popen[bytes]) -> bytes:
    """The stderr of ``proc`` once it has exited after Ctrl-C. A guard against a hang,
    not a timing (the stop takes well under a second): on a loaded CI machine it once
    did not finish within 10 s, so it gets 60, and if it still has not stopped, what it
    wrote is in the failure."""
    try:
        return proc.communicate(timeout=60)[1]
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(
            f"replay-server did not stop within 60 s of SIGINT; stdout {out!r}, stderr {err!r}"
        ) from None


def test_replay_server_bad_script_exits_2(tmp_path: Path) -> None:
    script = tmp_path / "bad.json"
    script.write_text('{"steps": [{"delay": 1}]}')
    done = fastagg("replay-server", str(script))
    assert done.returncode == 2
    assert b"is not a valid script: unknown step keys ['delay']" in done.stderr


# --- demo and examples (need the turn loop) -----------------------------------------------------


def test_demo_runs_the_scenario_to_a_completed_turn() -> None:
    done = fastagg("demo", "--no-color", "--pace", "0")
    out = done.stdout.decode()
    assert done.returncode == 0, out + done.stderr.decode()
    assert "thinking: **Planning the comparison**" in out
    assert '→ get_weather({"city": "Paris"})' in out
    assert '→ get_weather({"city": "London"})' in out
    assert "← get_weather ok" in out
    assert "→ save_note(" in out
    assert "model: Paris is the better pick: 24 °C and sunny" in out
    assert "stop reason : completed" in out
    assert "tool calls  : 3" in out
    # L33: the Gemini 2.5 history lost its signature; L32: the cut-off call never ran
    assert (
        "!  signature-strip before the first request: a thought signature was removed from the "
        "history, because it came from another model, which the model of this turn would reject\n"
        "   removed 1 thought signature from contents[1]: issued by gemini-2.5-flash"
    ) in out
    assert "the stream ended inside the call 'save_note' (part 1); it was not run\n" in out
    assert out.count("→ save_note(") == 1
    assert "signatures  : 1 stripped, 0 sentinels" in out


def test_k3_demo_shows_the_in_stream_error_it_injects() -> None:
    done = fastagg("demo", "--no-color", "--pace", "0")
    out = done.stdout.decode()
    assert (
        "!  no-finish-retry in step 2: the step ended without a finish reason, so fastagg sends "
        "it again\n   500 INTERNAL: An internal error has occurred."
    ) in out


def test_v6_demo_says_what_it_shows_and_each_finish_reason_one_way() -> None:
    done = fastagg("demo", "--no-color", "--pace", "0")
    out = done.stdout.decode()
    assert out.startswith(
        "fastagg demo: one agent turn (request, stream, tools, next request) against a fake "
        "Gemini server at http://127.0.0.1:"
    )
    assert (
        ": no key, no network.\nIts script shows, in order: a history from an earlier model "
        "(Gemini 2.5), the model's thoughts, two tool calls at once,\na server error inside the "
        "stream, a tool call cut off in its arguments, then the same call whole.\nuser: "
    ) in out
    ends = [line for line in out.splitlines() if line.startswith("   step ")]
    assert ends == [
        "   step 1 ended (tool-calls): the model asked for tools; finish reason STOP, 165 tokens",
        "   step 2 ended (no-finish): the stream ended without a finish reason; 261 tokens",
        "   step 2 ended (no-finish): the stream ended without a finish reason; 261 tokens",
        "   step 2 ended (tool-calls): the model asked for tools; finish reason STOP, 327 tokens",
        "   step 3 ended (answer): the model answered; finish reason STOP, 369 tokens",
    ]
    assert "⋯ save_note arguments as they stream in: $.title=Picnic packing list" in out
    assert ("  stop reason : completed (the model gave its answer)\n  finish      : STOP\n") in out
    assert "None" not in out
    assert "finish none" not in out


def test_v7_demo_ends_with_the_next_command_to_try() -> None:
    done = fastagg("demo", "--no-color", "--pace", "0")
    out = done.stdout.decode()
    assert done.returncode == 0, out + done.stderr.decode()
    assert out.endswith(
        "\n\nNext, a recorded Gemini stream aggregated into the parts a turn sends back (from "
        "this checkout);\nwith GEMINI_API_KEY set, `fastagg demo --live` runs this turn against "
        "Gemini itself.\ntry next: fastagg aggregate examples/data/weather.sse --parts\n"
    )
    command = out.splitlines()[-1].removeprefix("try next: ").split()
    assert fastagg(*command[1:]).returncode == 0


@pytest.mark.parametrize("option", [["--prompt", "hi"], ["--model", "gemini-2.5-pro"]])
def test_k3_demo_rejects_live_only_options_without_live(option: list[str]) -> None:
    done = fastagg("demo", *option)
    assert done.returncode == 2
    assert done.stderr.decode() == (
        f"fastagg demo: {option[0]} only apply with --live (the fake server's script always "
        "answers its own picnic question)\n"
    )


def test_k3_demo_ctrl_c_ends_the_turn_honestly_with_exit_130() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "fastagg", "demo", "--no-color", "--pace", "0.5"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env(),
        cwd=ROOT,
    )
    assert proc.stdout is not None
    seen = b""
    while b"step 1/10" not in seen:  # the turn is under way: the handler is installed
        line = proc.stdout.readline()
        assert line, proc.stderr.read() if proc.stderr else b""
        seen += line
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=60)
    out = (seen + rest).decode()
    assert proc.returncode == 130, out
    assert "stop reason : aborted" in out
    assert "model: Paris is the better pick" not in out


def test_demo_live_without_key_exits_2_with_a_hint() -> None:
    environment = env()
    environment.pop("GOOGLE_CLOUD_PROJECT", None)
    done = subprocess.run(
        [sys.executable, "-m", "fastagg", "demo", "--live"],
        capture_output=True,
        env=environment,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 2
    assert b"--live needs GEMINI_API_KEY" in done.stderr


@pytest.mark.parametrize(
    "example", ["aggregate_file.py", "turn_with_fake.py", "ui_deltas.py", "turn_live.py"]
)
def test_example_runs(example: str) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / example)],
        capture_output=True,
        env=env(),
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stdout.decode() + done.stderr.decode()
    expected = {
        "aggregate_file.py": b"call:     get_weather",
        "turn_with_fake.py": b"-- completed: ",
        "ui_deltas.py": b"ready: {",
        "turn_live.py": b"skipping.",
    }[example]
    assert expected in done.stdout


@needs_checkout
def test_bench_runs_the_suite_from_the_checkout() -> None:
    done = fastagg("bench", "--quick", "--no-extras", "--streams", "text", timeout=300)
    assert done.returncode == 0, done.stderr
    assert b"| text | fastagg |" in done.stdout
