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

from fastagg.testing import chunk, final, signature, text, thought, usage

ROOT = Path(__file__).resolve().parent.parent
WEATHER = ROOT / "examples" / "data" / "weather.sse"
WEATHER_SIG = signature("weather example")


def env() -> dict[str, str]:
    out = dict(os.environ)
    out["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "python"), out.get("PYTHONPATH")]))
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


def test_aggregate_malformed_event_exits_1_naming_the_byte_offset() -> None:
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


def test_usage_errors_exit_2() -> None:
    assert fastagg().returncode == 2
    assert fastagg("aggregate").returncode == 2
    assert fastagg("aggregate", "--parts", "--text", str(WEATHER)).returncode == 2


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
        _, stderr = proc.communicate(timeout=10)
    assert proc.returncode == 0
    assert b"fastagg replay-server: stopped" in stderr


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
    assert "!  signature-strip at step 0/10" in out
    assert "   removed 1 thought signature from contents[1]: issued by gemini-2.5-flash" in out
    assert "   L32: the stream ended inside the call 'save_note' (part 1); it was not run" in out
    assert out.count("→ save_note(") == 1
    assert "signatures  : 1 stripped, 0 sentinels" in out


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


def test_bench_runs_the_suite_from_the_checkout() -> None:
    done = fastagg("bench", "--quick", "--no-extras", "--streams", "text", timeout=300)
    assert done.returncode == 0, done.stderr
    assert b"| text | fastagg |" in done.stdout
