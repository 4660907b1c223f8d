#!/usr/bin/env bash
# CI smoke run of the fuzz targets (rust/fuzz/README.md): a debug build
# without sanitizer (fast to build, overflow checks on), seeded from the
# conformance scenarios and the benchmark corpus, SECONDS_PER_TARGET each.
set -euo pipefail
cd "$(dirname "$0")/../.."
export RUSTC_BOOTSTRAP=1  # cargo-fuzz needs nightly flags; the stable toolchain accepts them so
seconds="${SECONDS_PER_TARGET:-25}"
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked --quiet
fi
python3 rust/fuzz/seed.py rust/fuzz/corpus
cargo fuzz build --fuzz-dir rust/fuzz --dev --sanitizer none
for target in framing json_path aggregate_splits structured; do
    echo "-- fuzz $target for ${seconds}s"
    # pipefail: a crash (libFuzzer's non-zero exit) fails the run; its input is in rust/fuzz/artifacts/.
    cargo fuzz run --fuzz-dir rust/fuzz --dev --sanitizer none "$target" -- \
        -max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=1 2>&1 |
        { grep -E '^(Done|SUMMARY)|stat::number_of_executed_units|panicked|assert' || true; }
done
