"""Pin every runtime dependency of fastagg to the floor pyproject.toml allows.

`python tools/lowest_deps.py` prints one `name==floor` per line, for each of
`[project].dependencies` and of the `httpx`, `genai` and `vertex` extras, for
`pip install`: CI installs them into the oldest Python's venv, so the whole
suite runs on the oldest CPython with the oldest dependencies the package
claims to work with (spec/turn-loop.md H12). A floor that is never installed
is a guess: aiohttp below 3.12.4 hung on a broken body (H7), under a floor of
3.9 that nothing tested.

Each of them must have the form `name[extras]>=X.Y[.Z]`: one without a floor
is an error here, so the claim cannot go untested.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
_FLOOR = re.compile(
    r"([A-Za-z0-9][A-Za-z0-9._-]*(?:\[[A-Za-z0-9._,-]+\])?)\s*>=\s*([0-9][0-9A-Za-z.]*)"
)
EXTRAS = ("httpx", "genai", "vertex")


def floors(pyproject: str, extras: tuple[str, ...] = EXTRAS) -> list[str]:
    """`name==floor` for `[project].dependencies`, then each extra's, in their order."""
    project = tomllib.loads(pyproject)["project"]
    groups = [("[project].dependencies", project["dependencies"])]
    groups += [(f"extra {name!r}", project["optional-dependencies"][name]) for name in extras]
    pins = []
    for where, requirements in groups:
        for requirement in requirements:
            match = _FLOOR.fullmatch(requirement.strip())
            if match is None:
                raise ValueError(
                    f"pyproject.toml {where}: {requirement!r} is not `name>=floor`; give every"
                    " runtime dependency a floor (CI installs it, tools/lowest_deps.py)"
                )
            pins.append(f"{match[1]}=={match[2]}")
    return pins


if __name__ == "__main__":
    sys.stdout.write("".join(pin + "\n" for pin in floors(PYPROJECT.read_text(encoding="utf-8"))))
