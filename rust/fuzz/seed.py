"""Write the seed corpora of the fuzz targets (rust/fuzz/README.md).

Seeds: every conformance scenario (tests/conformance/scenarios.json) framed as
SSE, and the benchmark corpus streams at a small scale, each with the bytes
the target reads first (max_event_bytes / split / strict choices).
Usage: python rust/fuzz/seed.py OUTDIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benches import corpus  # noqa: E402


def bodies() -> list[bytes]:
    scenarios = json.loads((ROOT / "tests" / "conformance" / "scenarios.json").read_text())
    out = [
        b"".join(
            b"data: " + json.dumps(c, ensure_ascii=False).encode() + b"\r\n\r\n"
            for c in case["chunks"]
        )
        for case in scenarios
    ]
    for name in corpus.STREAMS:
        body = corpus.build(name, scale=0.002, giant_mb=0.01).body
        out.append(body[:16384])
    return out


def main(outdir: str) -> None:
    base = Path(outdir)
    for target, prefixes in (
        ("framing", [b"\xff\x03", b"\x10\x00"]),
        ("aggregate_splits", [b"\x06\x01", b"\x01\x00"]),
    ):
        folder = base / target
        folder.mkdir(parents=True, exist_ok=True)
        for i, body in enumerate(bodies()):
            for j, prefix in enumerate(prefixes):
                (folder / f"seed-{i:02d}-{j}").write_bytes(prefix + body)


if __name__ == "__main__":
    main(sys.argv[1])
