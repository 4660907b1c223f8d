"""Thought signatures across models and backends (turn-loop addendum L33-L35).

A thought signature is bound to the model family and the backend that issued
it: Gemini 3 answers "Corrupted thought signature." for one issued by another
family or by the other backend (Gemini API vs Vertex AI), yet it requires a
signature on the first function call of every step of the current turn. The
turn loop therefore prepares the history it is given once per turn, before the
first request (every later request only adds contents the target model itself
produced): :func:`prepare_history` keeps the signatures the target accepts,
strips those it cannot, and puts the documented sentinel where the target
requires a signature. Every change is reported, never silent.

Origins: the loop cannot know who produced the contents it is given, so the
caller declares it (``run_turn(..., history_origin=...)``: one :class:`Origin`
for all of them or one per content, ``None`` for unknown); contents of unknown
origin are sent as given. ``TurnResult.content_origins`` tags the transcript
the turn returns (the contents the loop appended are the target's), ready to
be passed as ``history_origin`` of the next turn.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal, get_args

from ._json import Content
from ._phases import Phase
from .request import SENTINEL_SIGNATURE

__all__ = [
    "Backend",
    "Origin",
    "SignatureChange",
    "SignaturePolicy",
    "first_unsigned_call",
    "model_family",
    "prepare_history",
    "requires_signatures",
]

Backend = Literal["gemini", "vertex"]
"""Where a model runs: ``"gemini"`` (Gemini API) or ``"vertex"`` (Vertex AI)."""

_BACKENDS = get_args(Backend)
_FAMILY = re.compile(r"^(gemini-\d+(?:\.\d+)?)(?:[.-]|$)")
_PRE_SIGNATURE = re.compile(r"^gemini-[12](?:\.\d+)?$")


def model_family(model: str) -> str:
    """The family of a model name: ``gemini-3-flash-preview`` -> ``gemini-3``,
    ``models/gemini-2.5-pro`` -> ``gemini-2.5``; other names are their own family."""
    name = model.rsplit("/", 1)[-1].lower()
    match = _FAMILY.match(name)
    return match.group(1) if match else name


def requires_signatures(model: str) -> bool:
    """Whether the model rejects a current-turn function call without a signature.

    Gemini 3 and later do; Gemini 1.x and 2.x never required them (2.5 signs
    calls only when thinking, and accepts history without them).
    """
    return not _PRE_SIGNATURE.match(model_family(model))


@dataclass(frozen=True, slots=True)
class Origin:
    """Which model, on which backend (``"gemini"``: Gemini API, ``"vertex"``), produced a content."""

    model: str
    backend: Backend = "gemini"

    def __post_init__(self) -> None:
        if self.backend not in _BACKENDS:
            raise ValueError(f"Origin.backend must be 'gemini' or 'vertex', not {self.backend!r}")

    @property
    def family(self) -> str:
        """The model family (:func:`model_family`)."""
        # L34: signatures are bound to the family and the backend
        return model_family(self.model)

    def accepts(self, other: Origin) -> bool:
        """Whether this target accepts signatures issued by ``other`` (same family and backend)."""
        return self.backend == other.backend and self.family == other.family

    @classmethod
    def of(cls, model: Any) -> Origin:
        """The origin of what a ``ModelClient`` produces (``GeminiClient.vertex`` picks the backend)."""
        return cls(str(getattr(model, "model", "") or ""), _backend(model))

    def __str__(self) -> str:
        return f"{self.model} ({'Vertex AI' if self.backend == 'vertex' else 'Gemini API'})"


def _backend(model: Any) -> Backend:
    return "vertex" if getattr(model, "vertex", False) is True else "gemini"


class SignaturePolicy(str, Enum):
    """What the loop does with signatures of contents from another origin (L33).

    ``AUTO``: strip them; put the sentinel on the first call of each step of
    the current turn when the target requires signatures. ``SENTINEL``: the
    same, with the sentinel whatever the target. ``STRIP``: strip them, never
    a sentinel. ``KEEP``: send every content as given.
    """

    AUTO = "auto"
    KEEP = "keep"
    STRIP = "strip"
    SENTINEL = "sentinel"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class SignatureChange:
    """One change :func:`prepare_history` made; ``where`` names the content as given."""

    action: Literal["strip", "sentinel"]
    where: str
    count: int
    origin: Origin
    target: Origin

    @property
    def phase(self) -> Phase:
        """The ``Lifecycle.phase`` that reports this change (L33)."""
        return "signature-strip" if self.action == "strip" else "signature-sentinel"

    @property
    def detail(self) -> str:
        """One sentence for the lifecycle event."""
        if self.action == "strip":
            n = "1 thought signature" if self.count == 1 else f"{self.count} thought signatures"
            return (
                f"removed {n} from {self.where}: issued by {self.origin}, which {self.target} "
                "does not accept"
            )
        return (
            f"put the sentinel signature on {self.where}: its signature from {self.origin} "
            f"cannot be sent to {self.target}, which requires one there"
        )


def prepare_history(
    contents: Sequence[Content],
    origins: Origin | Sequence[Origin | None] | None,
    target: Origin,
    policy: SignaturePolicy | str = SignaturePolicy.AUTO,
    *,
    interactions: bool = False,
) -> tuple[list[Content], list[Origin | None], list[SignatureChange]]:
    """Apply the signature policy to ``contents`` for ``target`` (L33, L34, L83).

    Returns the contents to send (unchanged ones shared, not copied), their
    origins (same length) and the changes made, in order. A model content of
    a foreign origin (another family or backend) loses its signatures, on its
    parts and on the Interactions steps it carries (``content["interaction"]``,
    which then loses its ``id`` too); a part or thought step left empty is
    dropped, and so is a content left without parts. Then, for ``AUTO`` when
    the target requires signatures, or ``SENTINEL``, the first function call of
    each such content in the current turn gets
    ``"skip_thought_signature_validator"``. ``interactions``: the target is
    reached over the Interactions API, where a content is sent as its steps
    (counted there) and no sentinel is ever sent (so none is put, L83).
    """
    policy = SignaturePolicy(policy)
    tags = _origins(contents, origins)
    if policy is SignaturePolicy.KEEP:
        return list(contents), tags, []
    out: list[Content] = []
    out_tags: list[Origin | None] = []
    foreign: list[int] = []  # input index of each foreign content kept in out, else -1
    changes: list[SignatureChange] = []
    for i, (content, origin) in enumerate(zip(contents, tags, strict=True)):
        if origin is None or not _is_model(content) or target.accepts(origin):
            out.append(content)
            out_tags.append(origin)
            foreign.append(-1)
            continue
        stripped, count = _strip(content, interactions)
        if count:
            changes.append(SignatureChange("strip", f"contents[{i}]", count, origin, target))
        if stripped is not None:
            out.append(stripped)
            out_tags.append(origin)
            foreign.append(i)
    # L83: the Interactions API carries no signature on a function call step: a sentinel
    # would be reported and never sent.
    wants_sentinel = not interactions and (
        policy is SignaturePolicy.SENTINEL
        or (policy is SignaturePolicy.AUTO and requires_signatures(target.model))
    )
    if wants_sentinel:
        for k in range(turn_start(out), len(out)):
            origin = out_tags[k]
            if foreign[k] < 0 or origin is None:
                continue
            name = _sentinel(out, k)
            if name is not None:
                where = f"the first function call of contents[{foreign[k]}] ({name!r})"
                changes.append(SignatureChange("sentinel", where, 1, origin, target))
    return out, out_tags, changes


def first_unsigned_call(contents: Sequence[Any]) -> str | None:
    """Where the first current-turn step whose first function call has no signature is,
    as ``contents[i].parts[j] (function call 'name')``; None when every one is signed."""
    for i in range(turn_start(contents), len(contents)):
        content = contents[i]
        if not isinstance(content, Mapping) or content.get("role") != "model":
            continue
        for j, part in enumerate(content.get("parts") or ()):
            if isinstance(part, Mapping) and isinstance(part.get("functionCall"), Mapping):
                if not part.get("thoughtSignature"):
                    name = part["functionCall"].get("name")
                    return f"contents[{i}].parts[{j}] (function call {name!r})"
                break
    return None


def _origins(
    contents: Sequence[Any], origins: Origin | Sequence[Origin | None] | None
) -> list[Origin | None]:
    if origins is None:
        return [None] * len(contents)
    if isinstance(origins, Origin):  # it produced the model contents; users are no one's
        return [origins if _is_model(c) else None for c in contents]
    tags = list(origins)
    if len(tags) != len(contents):
        raise ValueError(
            f"history_origin has {len(tags)} entries but contents has {len(contents)}; give one "
            "Origin (or None) per content, or a single Origin for all of them"
        )
    for n, tag in enumerate(tags):
        if tag is not None and not isinstance(tag, Origin):
            raise TypeError(f"history_origin[{n}] is {type(tag).__name__}, not an Origin or None")
    return tags


def _is_model(content: Any) -> bool:
    return isinstance(content, Mapping) and content.get("role") == "model"


def _strip(content: Content, interactions: bool = False) -> tuple[Content | None, int]:
    """The content without signatures (None when nothing is left) and how many were removed
    from what is sent: its Interactions steps when it has them and ``interactions``, else
    its parts (L83: both lose them, so the transcript says one thing)."""
    parts = content.get("parts")
    if not isinstance(parts, list):
        return content, 0
    count = 0
    kept: list[Any] = []
    for part in parts:
        if isinstance(part, Mapping) and "thoughtSignature" in part:
            count += 1
            part = {k: v for k, v in part.items() if k != "thoughtSignature"}
            if not part or part == {"text": ""}:
                continue
        kept.append(part)
    stored, in_steps = strip_steps(content.get("interaction"))
    if stored is not None and interactions:
        count = in_steps
    if not count and not in_steps:
        return content, 0
    if not kept:
        return None, count
    out = {**content, "parts": kept}
    if stored is not None:
        out["interaction"] = stored
    return out, count


def strip_steps(stored: Any) -> tuple[Any, int]:
    """``content["interaction"]`` without the steps' signatures, and how many were removed
    (L83). What lost any also loses its ``id``: chained to by ``previous_interaction_id``,
    the service's stored copy would bring the signatures back. A thought step left without
    a summary is dropped. ``(None, 0)`` when ``stored`` holds no list of steps."""
    if not isinstance(stored, Mapping) or not isinstance(stored.get("steps"), list):
        return None, 0
    count = 0
    steps: list[Any] = []
    for step in stored["steps"]:
        if isinstance(step, Mapping) and "signature" in step:
            count += 1
            step = {k: v for k, v in step.items() if k != "signature"}
            if step.get("type") == "thought" and not step.get("summary"):
                continue
        steps.append(step)
    if not count:
        return stored, 0
    return {**{k: v for k, v in stored.items() if k != "id"}, "steps": steps}, count


def _sentinel(contents: list[Content], k: int) -> str | None:
    """Put the sentinel on the first function call of ``contents[k]`` if it has no
    signature; the call's name when it did."""
    contents[k], name = sentinel_on_first_call(contents[k])
    return name


def sentinel_on_first_call(content: Content) -> tuple[Content, str | None]:
    """``content`` with the sentinel on its first function call when that call has no
    signature (a new content; the given one is not changed), and the call's name; else
    ``content`` itself and None (L33, L33a)."""
    parts = content.get("parts") or []
    for j, part in enumerate(parts):
        # Exact dicts (the aggregated contents) skip the ABC checks.
        if type(part) is not dict and not isinstance(part, Mapping):
            continue
        call = part.get("functionCall")
        if call is not None and (type(call) is dict or isinstance(call, Mapping)):
            if part.get("thoughtSignature"):
                return content, None
            new_parts = list(parts)
            new_parts[j] = {**part, "thoughtSignature": SENTINEL_SIGNATURE}
            return {**content, "parts": new_parts}, str(call.get("name"))
    return content, None


def turn_start(contents: Sequence[Any]) -> int:
    """The index after the last user content that is not only function responses (L2)."""
    start = 0
    for i, content in enumerate(contents):
        if not isinstance(content, Mapping) or content.get("role") != "user":
            continue
        parts = content.get("parts") or ()
        if any(not (isinstance(p, Mapping) and "functionResponse" in p) for p in parts):
            start = i + 1
    return start
