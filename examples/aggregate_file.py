"""Aggregate a recorded ``streamGenerateContent`` body and print what a caller needs.

    python examples/aggregate_file.py [FILE]      # default: examples/data/weather.sse

The file is fed in 64 KiB blocks, as bytes would arrive from the network; the
result's ``content`` can be appended to the conversation as is (signatures
byte-exact).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from fastagg import StreamAggregator

DEFAULT = Path(__file__).parent / "data" / "weather.sse"


def main(path: Path) -> None:
    aggregator = StreamAggregator(deltas=False)
    with path.open("rb") as body:
        while block := body.read(64 * 1024):
            aggregator.feed(block)
    result = aggregator.close()

    print("thoughts:", result.thought_text)
    print("text:    ", result.text)
    for fc in result.function_calls:
        print(f"call:     {fc['name']}({json.dumps(fc['args'])}) id={fc['id']}")
    print("finish:  ", result.finish_reason, "complete" if result.complete else "INCOMPLETE")
    print("usage:   ", result.usage)
    print("history: ", json.dumps(result.content, ensure_ascii=False))


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT)
