#!/usr/bin/env bash
# Runs every test of the project. Usage: bash scripts/test.sh
#
# 1. Rust: format check, clippy with warnings as errors, every crate's tests.
# 2. Python: a virtual environment in target/pyenv with the pinned test requirements,
#    the package built from source by `pip install ./crates/mondrian-py`, then its pytest
#    suite.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -j 2 -- -D warnings
cargo test --workspace -j 2 2>&1

PYTHON="${PYTHON:-python3}"
VENV=target/pyenv
if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    -r crates/mondrian-py/requirements-test.txt
# Uninstall first so the package is always rebuilt from the current sources.
"$VENV/bin/python" -m pip uninstall --quiet --yes mondrian-ml 2>/dev/null || true
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check ./crates/mondrian-py
# Tests that compare with the CLI use the binary `cargo test` has just built.
MONDRIAN_BIN="$(pwd)/target/debug/mondrian" "$VENV/bin/python" -m pytest -q crates/mondrian-py/tests
