"""The ``fastagg`` command line: ``demo``, ``aggregate`` and ``replay-server``.

Exit codes of every subcommand: 0 success (``demo``: the turn completed);
1 the input or the turn failed (``aggregate``: malformed stream; ``demo``: the
turn ended without completing); 2 usage or I/O error (bad arguments, unreadable
file, missing API key).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:  # annotations only: the commands import what they run lazily
    from . import AggregatedResponse
    from .client import GeminiClient
    from .events import TurnEvent
    from .limits import TurnResult
    from .signatures import Origin
    from .testing import Step

__all__ = ["main"]

# K1: the exit codes
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report Ctrl-C

BUILTIN_SCENARIOS = ("demo", "runaway", "stalled")
DEFAULT_LIVE_MODEL = "gemini-3-flash-preview"


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``fastagg`` console script and ``python -m fastagg``."""
    parser = _parser()
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["bench"]:  # every later argument, options included, goes to the suite
        if {"-h", "--help"} & set(argv[1:]):
            return _bench_help(parser)
        return _run_bench(argv[1:])
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        code: int = args.run(args)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # K4: a closed pipe ends the command quietly
        # The reader went away (`fastagg aggregate x | head`): not an error of ours. Point
        # stdout at /dev/null so the interpreter's final flush does not complain again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    return code


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fastagg",
        description="Correct and fast Gemini streaming for agent frameworks.",
        epilog="Exit codes: 0 ok; 1 malformed stream (aggregate) or turn not completed (demo); "
        "2 usage or I/O error.",
    )
    parser.add_argument("--version", action="version", version=f"fastagg {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = sub.add_parser(
        "demo",
        help="run an agent turn with local tools against a fake Gemini server (no key needed)",
        description="Start FakeGemini with the built-in multi-step scenario and run one agent turn "
        "against it with local Python tools, streaming thoughts, answer text, tool calls and "
        "results as they happen. --live runs the same tools against the real service.",
    )
    demo.add_argument(
        "--live",
        action="store_true",
        help="use the real service: GEMINI_API_KEY / GOOGLE_API_KEY, or Vertex AI "
        "with GOOGLE_CLOUD_PROJECT (and GOOGLE_CLOUD_LOCATION)",
    )
    demo.add_argument(
        "--model", default=None, help=f"model for --live (default {DEFAULT_LIVE_MODEL})"
    )
    demo.add_argument(
        "--prompt",
        default=None,
        help="the user message for --live (the fake server's script always answers "
        "the picnic question)",
    )
    demo.add_argument(
        "--pace",
        type=float,
        default=0.15,
        metavar="SECONDS",
        help="fake server: seconds between streamed chunks (default 0.15)",
    )
    demo.add_argument("--no-color", action="store_true", help="plain output (also: env NO_COLOR)")
    demo.set_defaults(run=_cmd_demo)

    agg = sub.add_parser(
        "aggregate",
        help="aggregate a recorded streamGenerateContent body and print it as JSON",
        description="Read a recorded response body (SSE or JSON-array framing) from FILE or "
        "stdin ('-') and print the aggregated response as JSON. Exit codes: 0 ok; 1 the input "
        "is not one whole model response (empty, no stream, another provider's stream, "
        "malformed, cut off, an in-stream error, no finish reason: one line on stderr says "
        "which); 2 usage or I/O error.",
    )
    agg.add_argument("file", metavar="FILE|-", help="recorded body, or - for stdin")
    view = agg.add_mutually_exclusive_group()
    view.add_argument("--parts", action="store_true", help="print only the parts (replayable)")
    view.add_argument("--text", action="store_true", help="print only the answer text")
    view.add_argument(
        "--response", action="store_true", help="print a GenerateContentResponse-shaped object"
    )
    agg.add_argument(
        "--lenient",
        action="store_true",
        help="best effort: skip malformed events and print whatever was received, even an "
        "empty, cut-off or unfinished stream (warnings go to stderr; exit 0)",
    )
    agg.set_defaults(run=_cmd_aggregate)

    replay = sub.add_parser(
        "replay-server",
        help="serve a scripted or recorded scenario on loopback until Ctrl-C",
        description='Serve SCENARIO (a JSON script: a list of steps or {"steps": [...]}, '
        "a recorded .sse body, or one of the built-in names demo, runaway, stalled) with "
        "FakeGemini. Point GeminiClient(base_url=URL) or google-genai "
        "HttpOptions(base_url=URL) at the printed URL.",
    )
    replay.add_argument("scenario", metavar="SCENARIO", help="script file or built-in name")
    replay.add_argument("--port", type=int, default=8765, help="port (default 8765; 0 = any)")
    replay.add_argument("--host", default="127.0.0.1", help="address (default 127.0.0.1)")
    replay.add_argument(
        "--framing",
        choices=("sse", "array"),
        default="sse",
        help="sse: SSE when alt=sse is asked for, else array (default); array: always a JSON array",
    )
    replay.add_argument("--repeat", action="store_true", help="start over when the script runs out")
    replay.add_argument(
        "--no-validate",
        action="store_true",
        help="answer every request, even those the service would refuse",
    )
    replay.set_defaults(run=_cmd_replay)

    bench = sub.add_parser(
        "bench",
        help="run the benchmark suite (python -m benches) from a source checkout",
        description="Run the benchmark suite of a source checkout (benches/ is not installed "
        "with the package); arguments are passed on, e.g. --quick or --streams text.",
    )
    bench.add_argument("bench_args", nargs="*", help="arguments for python -m benches")
    return parser


def _version() -> str:
    from . import __version__

    return __version__


# K5: bench --help always prints help
def _bench_help(parser: argparse.ArgumentParser) -> int:
    """`fastagg bench --help`: this command's help, then the suite's options when it is here."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    sub.choices["bench"].print_help()
    root = _checkout()
    if root is not None:
        sys.stdout.write("\noptions of the suite (python -m benches):\n")
        sys.stdout.flush()
        import subprocess

        subprocess.run([sys.executable, "-m", "benches", "--help"], cwd=root)
    return EXIT_OK


def _checkout() -> Path | None:
    """The source checkout this package runs from, when it has the benchmark suite."""
    root = Path(__file__).resolve().parent.parent.parent  # python/fastagg -> checkout
    return root if (root / "benches" / "__main__.py").is_file() else None


def _run_bench(bench_args: list[str]) -> int:
    import subprocess

    root = _checkout()
    if root is None:
        print(
            "fastagg bench: the benchmarks live in the source tree; from a checkout run "
            "'pip install -e . && python -m benches --quick'",
            file=sys.stderr,
        )
        return EXIT_USAGE
    return subprocess.run([sys.executable, "-m", "benches", *bench_args], cwd=root).returncode


# --- aggregate ---------------------------------------------------------------------------------


def _cmd_aggregate(args: argparse.Namespace) -> int:
    from . import MalformedStreamError, StreamAggregator

    name = "<stdin>" if args.file == "-" else args.file
    errors: list[Exception] = []
    aggregator = StreamAggregator(deltas=False, strict=not args.lenient)
    try:
        stream: IO[bytes] = sys.stdin.buffer if args.file == "-" else open(args.file, "rb")
        with stream:
            while block := stream.read(64 * 1024):
                try:
                    aggregator.feed(block)
                except MalformedStreamError as exc:
                    errors.extend(exc.errors)
    except OSError as exc:
        print(f"fastagg aggregate: cannot read {name}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    result = aggregator.close()
    if errors:
        for error in errors:
            print(f"fastagg aggregate: {name}: {error}", file=sys.stderr)
        print(
            # K2: no JSON for a stream that is not one whole response
            f"fastagg aggregate: {name}: {len(errors)} malformed event(s); no output written "
            "(--lenient skips them and prints the rest)",
            file=sys.stderr,
        )
        return EXIT_FAILED
    if args.lenient:
        for diagnostic in result.diagnostics:  # U6, X6: the message and its code, no rule id
            print(
                f"fastagg aggregate: {name}: warning: {diagnostic.message} [{diagnostic.code}]",
                file=sys.stderr,
            )
        for cut in result.unfinished_calls:  # K9: said out loud, never among function_calls
            print(f"fastagg aggregate: {name}: warning: {_cut_off(cut)}", file=sys.stderr)
    else:
        reason = _not_a_whole_stream(result, aggregator.events_seen, aggregator.bytes_seen)
        if reason is not None:
            print(
                f"fastagg aggregate: {name}: {reason}; no output written "
                "(--lenient prints what was received)",
                file=sys.stderr,
            )
            return EXIT_FAILED
    if args.text:
        sys.stdout.write(result.text + "\n")
    else:
        payload = _aggregate_payload(args, result)
        sys.stdout.buffer.write(orjson.dumps(payload, option=orjson.OPT_INDENT_2) + b"\n")
    sys.stdout.flush()
    return EXIT_OK


def _not_a_whole_stream(result: AggregatedResponse, events: int, size: int) -> str | None:
    """Why the input is not one whole model response, in words (K2), or None when it is."""
    if size == 0:
        return "the input is empty: there is no stream to aggregate"
    if events == 0:
        return (
            f"no stream event found in {size} bytes: expected a Gemini streamGenerateContent "
            "body (SSE 'data:' lines or a JSON array of responses)"
        )
    gemini = (
        result.parts
        or result.usage is not None
        or result.error is not None
        or result.prompt_feedback is not None
        or result.model_version is not None
        or result.response_id is not None
        or result.finish_reason is not None
    )
    if not gemini:
        return (
            f"{events} event(s) but none looks like a Gemini response (no candidates, "
            "usageMetadata or error): is this another provider's stream?"
        )
    if result.truncated:
        return "the body ends inside an unfinished event: the stream was cut off (truncated)"
    if result.error is not None:
        error = result.error
        label = " ".join(str(error[k]) for k in ("code", "status") if error.get(k) is not None)
        message = error.get("message") or "no message"
        return f"the stream carries an error ({label or 'no code'}): {message}"
    if result.unfinished_calls:  # K10: a call cut off is not a whole response
        return _cut_off(result.unfinished_calls[0])
    if result.finish_reason is None:
        return (
            "the stream ended before the model finished: no finish reason on candidate 0 "
            "(an incomplete stream)"
        )
    return None


def _cut_off(call: Mapping[str, Any]) -> str:
    """K9, K10: a call the model did not finish, in words."""
    return (
        f"the stream ended inside the function call {call['name']!r} (part {call['part']}): "
        "the model did not finish it, so its arguments may be cut off; it is listed in "
        "unfinished_calls, not function_calls"
    )


def _aggregate_payload(args: argparse.Namespace, result: AggregatedResponse) -> object:
    if args.parts:
        return result.parts
    if args.response:
        return result.to_dict()
    return {
        "text": result.text,
        "thought_text": result.thought_text,
        "parts": result.parts,
        "function_calls": result.function_calls,
        "unfinished_calls": result.unfinished_calls,  # K9: C13, for display; never run them
        "finish_reason": result.finish_reason,
        "finish_message": result.finish_message,
        "usage": result.usage,
        "model_version": result.model_version,
        "response_id": result.response_id,
        "prompt_feedback": result.prompt_feedback,
        "error": result.error,
        "complete": result.complete,
        "truncated": result.truncated,
        "warnings": list(result.warnings),
    }


# --- replay-server -------------------------------------------------------------------------------


def _load_scenario(name: str) -> list[Step]:
    from .testing import demo_scenario, load_script, runaway_scenario, stalled_scenario

    if name in BUILTIN_SCENARIOS and not Path(name).exists():
        builtin = {"demo": demo_scenario, "runaway": runaway_scenario, "stalled": stalled_scenario}
        return list(builtin[name]())
    return load_script(name)


def _cmd_replay(args: argparse.Namespace) -> int:
    try:
        steps = _load_scenario(args.scenario)
    except OSError as exc:
        print(
            f"fastagg replay-server: cannot read {args.scenario}: {exc.strerror or exc}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    except (ValueError, TypeError) as exc:
        print(
            f"fastagg replay-server: {args.scenario} is not a valid script: {exc}", file=sys.stderr
        )
        return EXIT_USAGE
    try:
        asyncio.run(_serve(args, steps))  # returns after Ctrl-C
    except KeyboardInterrupt:  # a second Ctrl-C, or a loop without signal handlers
        pass
    except OSError as exc:
        print(
            f"fastagg replay-server: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    print("fastagg replay-server: stopped", file=sys.stderr)
    return EXIT_OK


async def _serve(args: argparse.Namespace, steps: list[Step]) -> None:
    from .testing import FakeGemini, RecordedRequest

    def log(record: RecordedRequest) -> None:
        outcome = f"step {record.step + 1}" if record.step is not None else record.rejection
        print(f"{record.method} {record.path} -> {record.status} ({outcome})", flush=True)

    server = FakeGemini(
        steps,
        host=args.host,
        port=args.port,
        framing=args.framing,
        repeat=args.repeat,
        validate=not args.no_validate,
        on_request=log,
        name=str(args.scenario),
    )
    async with server:
        stop = asyncio.Event()
        restore = _abort_on_ctrl_c(stop)
        print(f"fake Gemini serving {len(steps)} step(s) at {server.url}", flush=True)
        print(
            f"  e.g. GeminiClient('gemini-3-flash-preview', base_url='{server.url}', "
            "api_key='fake'); Ctrl-C stops",
            flush=True,
        )
        try:
            await stop.wait()
        finally:
            restore()


# --- demo ------------------------------------------------------------------------------------------


def _cmd_demo(args: argparse.Namespace) -> int:
    if not args.live and (args.prompt is not None or args.model is not None):
        given = " and ".join(f"--{o}" for o in ("prompt", "model") if getattr(args, o) is not None)
        print(
            f"fastagg demo: {given} only apply with --live (the fake server's script always "
            "answers its own picnic question)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    color = not args.no_color and "NO_COLOR" not in os.environ and sys.stdout.isatty()
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="replace")
    try:
        return asyncio.run(_demo(args, _Printer(sys.stdout, color)))
    except _UsageError as exc:
        print(f"fastagg demo: {exc}", file=sys.stderr)
        return EXIT_USAGE


class _UsageError(Exception):
    pass


def _live_client(model: str) -> GeminiClient:
    from .client import GeminiClient

    if os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY"):
        return GeminiClient(model)
    if os.environ.get("GOOGLE_CLOUD_PROJECT"):
        return GeminiClient(model, vertex=True)
    raise _UsageError(
        "--live needs GEMINI_API_KEY (or GOOGLE_API_KEY), or GOOGLE_CLOUD_PROJECT "
        "with Vertex AI credentials; without --live the demo needs no key"
    )


async def _demo(args: argparse.Namespace, out: _Printer) -> int:
    from .client import GeminiClient
    from .events import TurnEnd
    from .limits import StopReason, TurnLimits
    from .loop import stream_turn
    from .testing import DEMO_PROMPT, FakeGemini, demo_history, demo_scenario, demo_tools

    prompt = args.prompt or DEMO_PROMPT
    contents = [{"role": "user", "parts": [{"text": prompt}]}]
    origins: list[Origin | None] | None = None
    config = {"generationConfig": {"thinkingConfig": {"includeThoughts": True}}}
    limits = TurnLimits(max_steps=10, turn_timeout=180.0, stall_timeout=60.0)
    server = None
    if args.live:
        client = _live_client(args.model or DEFAULT_LIVE_MODEL)
        where = f"one agent turn against the live Gemini API at {client.url}."
    else:
        server = FakeGemini(demo_scenario(pace=args.pace), name="demo")
        await server.start()
        client = GeminiClient("gemini-3-flash-preview", base_url=server.url, api_key="fake")
        # An earlier exchange with Gemini 2.5: its signature must not reach Gemini 3.
        contents, origins = demo_history(prompt)
        where = (
            "one agent turn (request, stream, tools, next request) against a fake Gemini "
            f"server at {server.url}: no key, no network.\nIts script shows, in order: a "
            "history from an earlier model (Gemini 2.5), the model's thoughts, two tool calls "
            "at once,\na server error inside the stream, a tool call cut off in its "
            "arguments, then the same call whole."
        )
    out.header(prompt, where)
    started = time.monotonic()
    stop_reason = None
    abort = asyncio.Event()
    interrupts = _abort_on_ctrl_c(abort)
    try:
        async with client:
            async for event in stream_turn(
                client,
                contents,
                tools=demo_tools(),
                limits=limits,
                config=config,
                history_origin=origins,
                abort=abort,
            ):
                out.event(event, time.monotonic() - started)
                if isinstance(event, TurnEnd):
                    stop_reason = event.result.stop_reason
    finally:
        interrupts()
        if server is not None:
            await server.stop()
    # K3: the first Ctrl-C aborts the turn honestly: exit 130 after the summary
    if stop_reason == StopReason.ABORTED and abort.is_set():
        return EXIT_INTERRUPTED
    return EXIT_OK if stop_reason == StopReason.COMPLETED else EXIT_FAILED


def _abort_on_ctrl_c(abort: asyncio.Event) -> Callable[[], None]:
    """Make the first Ctrl-C set ``abort`` (a turn then ends honestly, with its summary; the
    replay server stops serving); a second one interrupts at once. Through the loop's own
    signal handling, which wakes the loop whatever thread the signal lands on. Returns the
    function that restores the default handling (K3)."""
    loop = asyncio.get_running_loop()

    def first() -> None:
        abort.set()
        loop.remove_signal_handler(signal.SIGINT)

    try:
        loop.add_signal_handler(signal.SIGINT, first)
    except (NotImplementedError, RuntimeError):  # Windows, or not the main thread
        return lambda: None

    def restore() -> None:
        loop.remove_signal_handler(signal.SIGINT)

    return restore


class _Printer:
    """Renders turn events as a live transcript."""

    def __init__(self, stream: IO[str], color: bool) -> None:
        self.stream = stream
        self.color = color
        # "thought", "text", (step, part) of a streamed call, or "" at a line start
        self.mode: str | tuple[int, int] = ""
        self.path: str | None = None

    def _c(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color else text

    def write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()

    def line(self, text: str) -> None:
        self.end_run()
        self.write(text + "\n")

    def end_run(self) -> None:
        if self.mode:
            self.write("\n")
            self.mode = ""

    def header(self, prompt: str, where: str) -> None:
        self.line(self._c("1", "fastagg demo: ") + self._c("2", where))
        self.line(self._c("1", "user: ") + prompt)

    def event(self, event: TurnEvent, elapsed: float) -> None:
        from . import events as ev

        if isinstance(event, ev.StepStart):
            retry = f", attempt {event.attempt}" if event.attempt > 1 else ""
            kind = " final answer" if event.kind == "final-answer" else ""
            self.line(
                self._c(
                    "2", f"── step {event.step}/{event.max_steps}{kind}{retry} · {elapsed:.1f}s ──"
                )
            )
        elif isinstance(event, ev.ThoughtDelta):
            if self.mode != "thought":
                self.end_run()
                self.write(self._c("2;3", "thinking: "))
                self.mode = "thought"
            shown = event.text.replace("\n\n", "\n").replace("\n", "\n          ")
            self.write(self._c("2;3", shown))
        elif isinstance(event, ev.AnswerDelta):
            if self.mode != "text":
                self.end_run()
                self.write(self._c("1", "model: "))
                self.mode = "text"
            self.write(event.text)
        elif isinstance(event, ev.ToolCallDelta):
            # Streamed arguments (Vertex partialArgs) show as they arrive.
            if event.json_path is None:
                return
            key = (event.step, event.part)
            if self.mode != key:
                self.end_run()
                self.write(self._c("36", f"⋯ {event.name} arguments as they stream in:"))
                self.mode = key
                self.path = None
            if event.json_path != self.path:
                self.write(self._c("2", f" {event.json_path}="))
                self.path = event.json_path
            shown = event.value if isinstance(event.value, str) else json.dumps(event.value)
            self.write(self._c("36", shown.replace("\n", "⏎")))
        elif isinstance(event, ev.ToolCallStart):
            args = json.dumps(event.args, ensure_ascii=False)
            self.line(self._c("36", f"→ {event.name}") + self._c("36", f"({args})"))
        elif isinstance(event, ev.ToolCallEnd):
            shown = json.dumps(event.response, ensure_ascii=False)
            if len(shown) > 160:
                shown = shown[:157] + "..."
            status = self._c("32" if event.status == "ok" else "31", event.status)
            self.line(f"← {event.name} {status} {event.elapsed * 1000:.0f} ms: {shown}")
        elif isinstance(event, ev.StepEnd):
            # V6: the outcome in words; the finish reason as the service sent it, or none
            total = (event.usage or {}).get("totalTokenCount")
            facts = [f"finish reason {event.raw_finish_reason}"] if event.raw_finish_reason else []
            facts += [f"{total} tokens"] if total is not None else []
            said = _OUTCOMES.get(event.outcome, event.outcome)
            self.line(
                self._c(
                    "2",
                    f"   step {event.step} ended ({event.outcome}): {said}"
                    + (f"; {', '.join(facts)}" if facts else ""),
                )
            )
        elif isinstance(event, ev.Lifecycle):
            # V6: the phase, where, then what happened and what fastagg did, in words
            tool = f" ({event.tool_name})" if event.tool_name else ""
            where = f"in step {event.step}" if event.step else "before the first request"
            meaning = _PHASES.get(event.phase)
            self.line(
                self._c(
                    "33", f"!  {event.phase}{tool} {where}" + (f": {meaning}" if meaning else "")
                )
            )
            if event.detail:
                self.line(self._c("33", f"   {event.detail}"))
        elif isinstance(event, ev.TurnEnd):
            self.summary(event.result)

    def summary(self, result: TurnResult) -> None:
        usage = result.usage or {}
        reason = str(result.stop_reason)
        color = "32" if reason == "completed" else "31"
        self.line("")
        self.line(self._c("1", "summary"))
        self.line(
            f"  stop reason : {self._c(color, reason)}"
            + (f" ({_STOPS[reason]})" if reason in _STOPS else "")
        )
        # V6: the model's last finish reason, as the service sent it, once
        self.line(f"  finish      : {result.raw_finish_reason or 'none (no finish reason)'}")
        self.line(f"  steps       : {result.steps_used}")
        self.line(f"  tool calls  : {result.tool_call_count}")
        retries = ", ".join(f"{k} {v}" for k, v in sorted(result.retries.items()) if v) or "none"
        self.line(f"  retries     : {retries}")
        signatures = result.signatures or {}
        if any(signatures.values()):
            self.line(
                f"  signatures  : {signatures.get('stripped', 0)} stripped, "
                f"{signatures.get('sentinels', 0)} sentinels (history from another model)"
            )
        self.line(
            "  usage       : "
            + ", ".join(
                f"{label} {usage[key]}"
                for label, key in (
                    ("prompt", "promptTokenCount"),
                    ("output", "candidatesTokenCount"),
                    ("thoughts", "thoughtsTokenCount"),
                    ("total", "totalTokenCount"),
                )
                if key in usage
            )
        )
        self.line(f"  time        : {result.elapsed:.2f}s")
        if result.message:
            self.line(f"  message     : {result.message}")
        # V7: what to try next, the last line a command
        self.line("")
        self.line(
            "Next, a recorded Gemini stream aggregated into the parts a turn sends back (from "
            "this checkout);\nwith GEMINI_API_KEY set, `fastagg demo --live` runs this turn "
            "against Gemini itself."
        )
        self.line("try next: " + self._c("1", NEXT_COMMAND))


NEXT_COMMAND = "fastagg aggregate examples/data/weather.sse --parts"
"""The demo's last line (V7): the README's next command."""

# V6: the demo's plain words for step outcomes, Lifecycle phases and stop reasons.
_OUTCOMES = {
    "answer": "the model answered",
    "tool-calls": "the model asked for tools",
    "malformed": "the model's function call was malformed",
    "no-finish": "the stream ended without a finish reason",
    "error": "the service reported an error",
    "interrupted": "the request was interrupted",
    "final-answer": "the model gave its final answer",
}
_PHASES = {
    "signature-strip": "a thought signature was removed from the history, because it came "
    "from another model, which the model of this turn would reject",
    "signature-sentinel": "the placeholder signature the model requires was put on a call "
    "from the history, which came from another model",
    "no-finish-retry": "the step ended without a finish reason, so fastagg sends it again",
    "malformed-retry": "the model's function call was malformed, so fastagg sends the step again",
    "provider-retry": "the service failed in a way worth retrying, so fastagg sends the step again",
    "tool-timeout": "the tool ran past its time limit; the model gets an error as its result",
    "time-limit": "the turn ran out of time",
    "stalled": "the stream went silent for too long",
    "aborted": "the turn was stopped on request",
    "step-cap": "the turn reached its step limit",
    "context-cap": "the conversation reached its context limit",
    "provider-error": "the service failed and the turn ends",
    "wrapup": "little time is left: the model is asked to finish now",
    "stream-resume": "the stream broke off; fastagg resumes it",
    "continuation": "the answer goes on in another request (long decode)",
    "continuation-resume": "a long answer's stream broke off; fastagg resumes it",
}
_STOPS = {
    "completed": "the model gave its answer",
    "step-cap": "the step limit was reached",
    "time-limit": "the turn ran out of time",
    "stalled": "the stream went silent",
    "aborted": "stopped on request",
    "context-cap": "the context limit was reached",
    "provider-error": "the service failed",
}
