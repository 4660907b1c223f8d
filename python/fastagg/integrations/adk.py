"""fastagg under Google ADK (extra ``fastagg[adk]``; rules A1-A4 in spec/integrations.md).

One line makes ADK's ``Gemini`` model aggregate its SSE streams with fastagg::

    from fastagg.integrations import adk; adk.install()

:class:`StreamingResponseAggregator` has the interface of
``google.adk.utils.streaming_utils.StreamingResponseAggregator``: each chunk
comes back from :meth:`~StreamingResponseAggregator.process_response` as a
partial ``LlmResponse`` (ADK shows partial events and never runs their
calls), and :meth:`~StreamingResponseAggregator.close` gives the final one,
built from fastagg's aggregate: streamed arguments assembled per call id,
signed parts never merged, signatures byte-exact.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any

from .._fastagg import StreamAggregator
from .._genai_convert import require_genai

types = require_genai("fastagg.integrations.adk")
try:
    from google.adk import __version__ as ADK_VERSION
    from google.adk.models import google_llm
    from google.adk.models.llm_response import LlmResponse
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "fastagg.integrations.adk needs Google ADK, which is not installed: "
        "pip install 'fastagg[adk]'"
    ) from exc

if TYPE_CHECKING:
    from google.genai.types import GenerateContentResponse

__all__ = ["TESTED_VERSIONS", "StreamingResponseAggregator", "install", "uninstall"]

# A4: install() replaces a module attribute of ADK (no public hook exists), so
# it refuses ADK releases it was not tested with.
TESTED_VERSIONS = ("2.13",)

# The name google_llm looks up for every streamed request.
_ATTR = "StreamingResponseAggregator"
_ORIGINAL = getattr(google_llm, _ATTR, None)


class StreamingResponseAggregator:
    """Drop-in for ADK's ``StreamingResponseAggregator`` on fastagg's Rust core (A1, A2)."""

    def __init__(self) -> None:
        self._agg = StreamAggregator()
        self._seen = False

    async def process_response(
        self, response: GenerateContentResponse
    ) -> AsyncGenerator[LlmResponse, None]:
        """Feed one chunk; yield it as a partial ``LlmResponse`` (A1)."""
        self._agg.feed_chunk(response)
        self._seen = True
        partial = LlmResponse.create(response)
        partial.partial = True
        yield partial

    def close(self) -> LlmResponse | None:
        """The aggregated, non-partial ``LlmResponse``; None when no chunk came (A2)."""
        if not self._seen:
            return None
        result = self._agg.close()
        response = result.to_genai()
        candidate = response.candidates[0] if response.candidates else None
        finish_reason = candidate.finish_reason if candidate else None
        error_code: Any = None
        error_message = None
        if finish_reason is not None and finish_reason != types.FinishReason.STOP:
            error_code = finish_reason
            error_message = candidate.finish_message if candidate else None
        elif candidate is None and response.prompt_feedback is not None:
            error_code = response.prompt_feedback.block_reason
            error_message = response.prompt_feedback.block_reason_message
        content = candidate.content if candidate is not None else None
        return LlmResponse(
            content=content if content is not None and content.parts else None,
            grounding_metadata=candidate.grounding_metadata if candidate else None,
            citation_metadata=candidate.citation_metadata if candidate else None,
            error_code=error_code,
            error_message=error_message,
            usage_metadata=response.usage_metadata,
            finish_reason=finish_reason,
            partial=False,
            model_version=response.model_version,
        )


def install(*, untested_ok: bool = False) -> None:
    """Make ADK's ``Gemini`` model aggregate its streams with fastagg (A3).

    Call it once, before running agents. Raises ``RuntimeError`` on an ADK
    release outside :data:`TESTED_VERSIONS` unless ``untested_ok``, and when
    ADK no longer has the attribute it replaces.
    """
    if _ORIGINAL is None:
        raise RuntimeError(
            f"google-adk {ADK_VERSION} has no google.adk.models.google_llm."
            "StreamingResponseAggregator; fastagg.integrations.adk cannot install itself "
            f"(tested with google-adk {', '.join(v + '.x' for v in TESTED_VERSIONS)})"
        )
    if not untested_ok and not ADK_VERSION.startswith(tuple(v + "." for v in TESTED_VERSIONS)):
        raise RuntimeError(
            f"fastagg.integrations.adk was tested with google-adk "
            f"{', '.join(v + '.x' for v in TESTED_VERSIONS)}, not {ADK_VERSION}; "
            "pin a tested release or call install(untested_ok=True)"
        )
    setattr(google_llm, _ATTR, StreamingResponseAggregator)


def uninstall() -> None:
    """Give ADK its own aggregator back."""
    if _ORIGINAL is not None:
        setattr(google_llm, _ATTR, _ORIGINAL)
