#!/usr/bin/env bash
# Build the sdist, then a manylinux2014 wheel *from that sdist* (so the sdist is proven to
# build), with maturin's --zig linker: no Docker, only PyPI (maturin, ziglang) and the local
# Rust toolchain. Output: dist/fastagg-X.Y.Z.tar.gz and dist/fastagg-X.Y.Z-cpXY-...-manylinux2014_*.whl
# for the python3 on PATH (or $PYTHON). The release workflow builds the other platforms.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
out=$(pwd)/dist
tools=$(pwd)/.venv-build
rm -rf "$out" && mkdir -p "$out"
if [ ! -x "$tools/bin/maturin" ] || [ ! -d "$tools/lib" ]; then
    "$python" -m venv "$tools"
    "$tools/bin/pip" install -q "maturin>=1.9.4,<2" "ziglang>=0.13"
fi
"$tools/bin/maturin" sdist --out "$out"
sdist=$(ls "$out"/fastagg-*.tar.gz)
# What the code and its docs cite must be in the sdist (issue: the repository stands alone).
listing=$(tar -tzf "$sdist")
for need in spec/contract/aggregation.md spec/aggregation.md tests/conformance/scenarios.json \
    LICENSE Cargo.lock rust/core/src/lib.rs python/fastagg/__init__.py; do
    grep -q "^fastagg-[^/]*/$need\$" <<<"$listing" || { echo "sdist lacks $need" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -xzf "$sdist" -C "$work"
# The cargo target dir is kept in the checkout so a second build reuses it.
(cd "$work"/fastagg-* && PATH="$tools/bin:$PATH" CARGO_TARGET_DIR="$(cd - >/dev/null && pwd)/target" \
    "$tools/bin/maturin" build --release --zig --compatibility manylinux2014 \
    --interpreter "$(command -v "$python")" --out "$out")
ls -l "$out"
