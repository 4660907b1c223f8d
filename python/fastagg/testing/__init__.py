"""Testing kit: a fake Gemini server on loopback, chunk builders and ready-made scenarios.

```python
from fastagg.testing import FakeGemini, Step, chunk, text, final, signature

async with FakeGemini([Step([chunk(text("Hi")), final(signature("s"))])]) as server:
    ...  # GeminiClient(model, base_url=server.url, api_key="k"); server.requests
```
"""

from __future__ import annotations

from .agent_scenarios import (
    AGENT_PROMPT,
    INTERLEAVED_ANSWER,
    INTERLEAVED_CALLS,
    STREAMED_ANSWER,
    STREAMED_CALLS,
    interleaved_calls_scenario,
    streamed_args_scenario,
)
from .chunks import (
    call,
    chunk,
    error_chunk,
    final,
    malformed_call,
    signature,
    signature_part,
    streamed_call,
    text,
    thought,
    usage,
)
from .fake import FakeGemini, RecordedRequest, Script, Step, load_script
from .fake_interactions import FakeInteractions, InteractionTurn
from .scenarios import (
    DEMO_PROMPT,
    RUNAWAY_PROMPT,
    STALLED_PROMPT,
    demo_history,
    demo_scenario,
    demo_tools,
    runaway_scenario,
    stalled_scenario,
)
from .validate import Rejection, validate_request

__all__ = [
    "AGENT_PROMPT",
    "DEMO_PROMPT",
    "INTERLEAVED_ANSWER",
    "INTERLEAVED_CALLS",
    "RUNAWAY_PROMPT",
    "STALLED_PROMPT",
    "STREAMED_ANSWER",
    "STREAMED_CALLS",
    "FakeGemini",
    "FakeInteractions",
    "InteractionTurn",
    "RecordedRequest",
    "Rejection",
    "Script",
    "Step",
    "call",
    "chunk",
    "demo_history",
    "demo_scenario",
    "demo_tools",
    "error_chunk",
    "final",
    "interleaved_calls_scenario",
    "load_script",
    "malformed_call",
    "runaway_scenario",
    "signature",
    "signature_part",
    "stalled_scenario",
    "streamed_args_scenario",
    "streamed_call",
    "text",
    "thought",
    "usage",
    "validate_request",
]
