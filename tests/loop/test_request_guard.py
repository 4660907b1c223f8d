"""L2's guard as the turn loop runs it: one ``RequestGuard`` per turn, extended by each
step's new contents. Growing the list step by step must say exactly what checking the
whole list at once says: the same error (type, text, location) or the same state.
"""

from __future__ import annotations

import random
import types
from typing import Any

import pytest

from fastagg.errors import InvalidRequestError
from fastagg.request import RequestGuard


class Text(str):
    """A ``str`` subclass: equal to its value (a caller's own string type)."""


SIG = "c2lnbmF0dXJl"


def _name(rng: random.Random) -> Any:
    if rng.random() < 0.95:
        return rng.choice(["get", "put"])
    return rng.choice([None, 5, Text("get"), "g\ud800"])


def _id(rng: random.Random) -> Any:
    if rng.random() < 0.95:
        return rng.choice(["c1", "c2", None])
    return rng.choice([7, Text("c1")])


def _maybe_mapping(rng: random.Random, value: dict[str, Any]) -> Any:
    """Mostly the dict itself; sometimes a read-only Mapping view, or not a mapping."""
    roll = rng.random()
    if roll < 0.03:
        return types.MappingProxyType(value)
    if roll < 0.04:
        return rng.choice([5, "x", None, [value]])
    return value


def _call_part(rng: random.Random, name: Any, call_id: Any) -> dict[str, Any]:
    call: dict[str, Any] = {"name": name, "args": {"k": 1}}
    if call_id is not None:
        call["id"] = call_id
    part: dict[str, Any] = {"functionCall": _maybe_mapping(rng, call)}
    roll = rng.random()
    if roll < 0.85:
        part["thoughtSignature"] = SIG
    elif roll < 0.9:
        part["thoughtSignature"] = rng.choice(["", Text(SIG), 5, None])
    return part


ABSENT = object()


def _response_part(rng: random.Random, name: Any, call_id: Any) -> dict[str, Any]:
    """The response to a call, now and then with another name or id (or none)."""
    if rng.random() < 0.04:
        name = rng.choice(["get", "put", None, 5, Text("get"), ABSENT])
    if rng.random() < 0.04:
        call_id = rng.choice(["c1", "c2", 7, Text("c1"), ABSENT])
    response: dict[str, Any] = {"name": name, "response": {"output": 1}}
    if name is ABSENT:
        del response["name"]
    if call_id is not None and call_id is not ABSENT:
        response["id"] = call_id
    return {"functionResponse": _maybe_mapping(rng, response)}


def _odd_part(rng: random.Random) -> Any:
    return rng.choice(
        [
            {"text": "hm"},
            {"text": "", "thoughtSignature": SIG},
            {"functionCall": None},
            {"functionResponse": None},
            {"functionCall": None, "functionResponse": {"name": "get"}},
            {"functionResponse": {"name": "get", "response": {}}},
            types.MappingProxyType({"text": "view"}),
            5,
        ]
    )


def _content(rng: random.Random, role: Any, parts: list[Any]) -> Any:
    roll = rng.random()
    if roll < 0.02:
        role = rng.choice(["system", None, 5, Text(role or "user")])
    elif roll < 0.03:
        parts = rng.choice([[], (), None, "parts"])  # type: ignore[assignment]
    content: dict[str, Any] = {"role": role, "parts": parts}
    if rng.random() < 0.01:
        del content["role"]
    return types.MappingProxyType(content) if rng.random() < 0.02 else content


def hostile_turn(rng: random.Random) -> list[Any]:
    """A turn of tool steps as the loop appends them, with rare damage anywhere."""
    contents = [_content(rng, "user", [{"text": "Q"}])]
    for _ in range(rng.randint(0, 6)):
        calls = [(_name(rng), _id(rng)) for _ in range(rng.choice([1, 1, 2, 3]))]
        parts: list[Any] = []
        if rng.random() < 0.5:
            parts.append({"text": "thinking", "thought": True})
        parts += [_call_part(rng, name, call_id) for name, call_id in calls]
        if rng.random() < 0.05:
            parts.insert(rng.randrange(len(parts) + 1), _odd_part(rng))
        contents.append(_content(rng, "model", parts))
        answers = [_response_part(rng, name, call_id) for name, call_id in calls]
        if rng.random() < 0.03:
            answers = answers[:-1] if rng.random() < 0.5 else answers + answers[:1]
        if rng.random() < 0.2:
            answers.append({"text": "a new turn"})
        if rng.random() < 0.05:
            answers.insert(rng.randrange(len(answers) + 1), _odd_part(rng))
        contents.append(_content(rng, "user", answers))
    if rng.random() < 0.2:
        contents.append(_content(rng, "model", [{"text": "done"}]))
    return contents


def _state(guard: RequestGuard) -> tuple[Any, ...]:
    return (
        guard._seen,
        guard._pending,
        guard._pending_at,
        guard._last_role,
        list(guard._unsigned),
    )


def outcome(contents: list[Any], cuts: list[int], require: bool) -> list[Any]:
    """The guard's state after each ``extend`` of the list grown to each cut, then what
    ``check_end`` says of the whole list ("ok", or the error)."""
    guard = RequestGuard(require_signatures=require)
    seen: list[Any] = []
    try:
        for cut in [*cuts, len(contents)]:
            guard.extend(contents[:cut])
            seen.append(_state(guard))
        guard.check_end()
        seen.append("ok")
    except InvalidRequestError as exc:
        seen.append((type(exc), str(exc), exc.where))
    return seen


def test_l2_a_guard_grown_step_by_step_says_what_one_check_of_the_whole_says() -> None:
    rng = random.Random(2)
    turns = 0
    for _ in range(3000):
        contents = hostile_turn(rng)
        cuts = sorted(rng.sample(range(len(contents) + 1), min(2, len(contents) + 1)))
        require = rng.random() < 0.8
        grown = outcome(contents, cuts, require)
        whole = outcome(contents, [], require)
        assert grown[-1] == whole[-1], contents  # "ok", or the same error
        if grown[-1] == "ok":
            assert grown[-2] == whole[-2], contents  # and the same state
        turns += grown[-1] == "ok"
    assert turns == 1105  # of 3,000: accepted and rejected turns were both compared


def test_l2_a_plain_tool_step_leaves_the_guard_ready_for_the_next() -> None:
    contents = [
        {"role": "user", "parts": [{"text": "Q"}]},
        {
            "role": "model",
            "parts": [
                {"text": "hm", "thought": True},
                {"functionCall": {"id": "c1", "name": "get", "args": {}}, "thoughtSignature": SIG},
                {"functionCall": {"id": "c2", "name": "put", "args": {}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"id": "c1", "name": "get", "response": {}}},
                {"functionResponse": {"name": "put", "response": {}}},
            ],
        },
    ]
    guard = RequestGuard()
    guard.extend(contents)
    guard.check_end()
    assert _state(guard) == (3, None, 1, "user", [])


def test_l2_an_unsigned_call_is_refused_at_check_end_with_its_place() -> None:
    contents = [
        {"role": "user", "parts": [{"text": "Q"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "get", "args": {}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "get", "response": {}}}]},
    ]
    guard = RequestGuard()
    guard.extend(contents)
    assert guard._unsigned == ["contents[1].parts[0]"]
    with pytest.raises(InvalidRequestError, match="missing a thought_signature") as info:
        guard.check_end()
    assert info.value.where == "contents[1].parts[0]"
