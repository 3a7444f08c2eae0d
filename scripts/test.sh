#!/usr/bin/env bash
# Runs every test of the project. Usage: bash scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -j 2 -- -D warnings
cargo test --workspace -j 2 2>&1
