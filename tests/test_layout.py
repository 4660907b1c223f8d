"""The layout of python/fastagg (spec/api.md L99, L100): no import circle, no two public classes
with one name, and the README's module map is the tree.

The import graph is read from the source with ``ast``, not by importing: an edge ``a -> b`` is an
import of ``b`` that runs (or that a type checker follows) when ``a`` is imported: the statements
at module level, including those in ``if TYPE_CHECKING:`` blocks (a type named in a signature is
a dependency of the design, and a circle there is still a circle for a reader and for mypy), in
``try``/``if``/``with`` blocks and class bodies, in every form (``import fastagg.x``, ``from . import
x``, ``from ..x import y``, ``from fastagg import y``). Imports inside a function are lazy (they
run when the function is called, after every module has loaded) and do not count: a lazy import
is how a module reaches an optional or heavier dependency on first use. The compiled core
``_fastagg`` is a node with no edges. Importing a submodule runs its package's ``__init__`` first;
that implicit parent edge is not counted (a package that re-exports its children is not a
circle), but an explicit ``from .. import name`` is.
"""

from __future__ import annotations

import ast
import importlib
import re
import typing
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

import fastagg
from fastagg import events

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "python" / "fastagg"
# The pure-Python twin repeats the core's class names on purpose (spec/contract/api.md: "same
# constructor, methods, deltas and results"): a user picks `fastagg` or `fastagg.reference`.
TWIN = ("fastagg.reference", "fastagg.reference_interactions")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    found = {_module_name(p): p for p in PKG.rglob("*.py")}
    found["fastagg._fastagg"] = PKG / "_fastagg.pyi"  # the Rust core: imports nothing of ours
    return found


def _imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of fastagg that module ``name`` imports at module level."""
    if path.suffix != ".py":
        return set()
    is_package = path.name == "__init__.py"
    package = name.split(".") if is_package else name.split(".")[:-1]
    found: set[str] = set()

    def add(target: str, names: list[str]) -> None:
        for imported in names:  # `from pkg import sub` imports the submodule pkg.sub
            if f"{target}.{imported}" in known:
                found.add(f"{target}.{imported}")
            elif target in known:
                found.add(target)

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in known:
                        found.add(alias.name)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package[: len(package) - node.level + 1]
                    target = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    target = node.module or ""
                add(target, [alias.name for alias in node.names])
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue  # lazy: runs on call
            elif isinstance(node, ast.ClassDef):
                visit(node.body)
            elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
                for field in ("body", "orelse", "finalbody"):
                    visit(getattr(node, field, []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    found.discard(name)
    return found


def import_graph() -> dict[str, set[str]]:
    known = _modules()
    return {name: _imports(name, path, known) for name, path in known.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One shortest circle through each strongly connected group of modules (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            connect(node)
    found = []
    for group in groups:
        start = min(group)
        paths = {start: [start]}
        queue = [start]
        while queue:  # breadth first inside the group: the shortest way back to start
            node = queue.pop(0)
            for nxt in sorted(graph[node] & group):
                if nxt == start:
                    queue = []
                    found.append([*paths[node], start])
                    break
                if nxt not in paths:
                    paths[nxt] = [*paths[node], nxt]
                    queue.append(nxt)
    return sorted(found)


def test_l100_no_import_circle_in_python_fastagg() -> None:
    found = [" -> ".join(circle) for circle in circles(import_graph())]
    assert found == [], "import circles:\n" + "\n".join(found)


def test_l100_the_circle_finder_finds_the_forms_of_import() -> None:
    # Each form of import makes an edge; a lazy one does not.
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"d"}, "e": set()}
    assert circles(graph) == [["a", "b", "c", "a"]]
    known = _modules()
    emit = _imports("fastagg.loop.emit", known["fastagg.loop.emit"], known)
    assert {"fastagg._fastagg", "fastagg.events", "fastagg.loop.clock"} <= emit
    root = _imports("fastagg", known["fastagg"], known)  # TYPE_CHECKING imports count
    assert {"fastagg.loop", "fastagg.client", "fastagg.errors"} <= root
    cli = _imports("fastagg.cli", known["fastagg.cli"], known)  # cli imports the loop lazily
    assert "fastagg.loop" not in cli


# -- the README's module map ---------------------------------------------------------------------


def _module_map() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = re.search(r"^## Layout\n(.*?)(?=^## )", readme, re.M | re.S)
    assert section is not None, "README.md has no '## Layout' section"
    block = re.search(r"```text\npython/fastagg/\n(.*?)```", section.group(1), re.S)
    assert block is not None, "the Layout section has no python/fastagg/ map"
    return [line.split()[0] for line in block.group(1).splitlines() if line.strip()]


def test_l100_every_module_is_in_the_readme_module_map() -> None:
    tree = sorted(str(p.relative_to(PKG)) for p in PKG.rglob("*.py"))
    listed = _module_map()
    assert [m for m in tree if m not in listed] == []


def test_l100_every_module_in_the_readme_module_map_exists() -> None:
    listed = _module_map()
    assert len(listed) == len(set(listed))
    assert [m for m in listed if not (PKG / m).is_file()] == []


# -- public names --------------------------------------------------------------------------------


def _public_modules() -> Iterator[str]:
    for name in sorted(_modules()):
        if any(part.startswith("_") for part in name.split(".")[1:]):
            continue
        if name.startswith(TWIN):
            continue
        yield name


def _public_classes() -> dict[str, dict[int, str]]:
    """Public class name -> {id of the class: where it is reached}, over every public module."""
    seen: dict[str, dict[int, str]] = {}
    for name in _public_modules():
        try:
            module = importlib.import_module(name)
        except ImportError as exc:  # a drop-in whose framework is not installed here
            assert "pip install 'fastagg[" in str(exc), exc
            continue
        public = getattr(module, "__all__", None)
        if public is None:
            public = [n for n in vars(module) if not n.startswith("_")]
        for attr in public:
            value = getattr(module, attr)
            if isinstance(value, type) and value.__module__.startswith("fastagg"):
                seen.setdefault(attr, {}).setdefault(id(value), f"{name}.{attr}")
    return seen


def test_l99_no_two_public_classes_share_a_name() -> None:
    clashes = {
        n: sorted(where.values()) for n, where in _public_classes().items() if len(where) > 1
    }
    assert clashes == {}


def test_l99_the_name_check_sees_the_aggregator_delta_and_the_events() -> None:
    seen = _public_classes()
    assert set(seen["TextDelta"].values()) == {"fastagg.TextDelta"}
    assert set(seen["AnswerDelta"].values()) == {"fastagg.AnswerDelta"}


def test_l99_every_text_event_of_stream_turn_is_a_fastagg_answer_delta() -> None:
    import asyncio

    from scripted_model import ScriptedModel, answer

    async def main() -> list[object]:
        model = ScriptedModel(answer("Sunny and warm today."))
        question = [{"role": "user", "parts": [{"text": "Weather?"}]}]
        return [event async for event in fastagg.stream_turn(model, question)]

    seen = asyncio.run(main())
    texts = [e for e in seen if type(e).__name__ in ("AnswerDelta", "TextDelta")]
    assert [isinstance(e, fastagg.AnswerDelta) for e in texts] == [True, True]
    assert [e.text for e in texts] == ["Sunny ", "and warm today."]  # type: ignore[attr-defined]
    assert not any(isinstance(e, fastagg.TextDelta) for e in seen)  # the aggregator's delta
    assert typing.get_args(fastagg.TurnEvent).count(fastagg.AnswerDelta) == 1


def test_l99_the_contract_event_name_still_works_without_a_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from fastagg.events import TextDelta  # type: ignore[attr-defined]

        assert TextDelta is events.AnswerDelta is fastagg.AnswerDelta
        assert "TextDelta" not in events.__all__
        with pytest.raises(AttributeError, match="has no attribute 'NoSuch'"):
            events.NoSuch  # type: ignore[attr-defined]  # noqa: B018
