#!/usr/bin/env bash
# Runs every test of the project. Usage: bash scripts/test.sh
#
# 1. Rust: format check, clippy with warnings as errors, every crate's tests.
# 2. Python: a virtual environment in target/pyenv with the pinned test requirements,
#    the package built from source by `pip install ./crates/mondrian-py`, then its pytest
#    suite.
# 3. The wheel users carry to other machines: `maturin build --release` (maturin pinned in
#    the test requirements), installed into a fresh virtual environment (target/wheelenv,
#    made anew each run) and imported there for a tiny fit and predict.
set -euo pipefail
cd "$(dirname "$0")/.."
# The machine's cores are shared: every cargo build here, maturin's included, uses two.
export CARGO_BUILD_JOBS=2
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -j 2 -- -D warnings
cargo test --workspace -j 2 2>&1
# The experimental online boosting (Cargo feature `experimental`) and its tests.
cargo clippy -p mondrian --all-targets --features experimental -j 2 -- -D warnings
cargo test -p mondrian --features experimental -j 2 --test boost
cargo test -p mondrian --features experimental -j 2 --lib forest::boost

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

WHEELS=target/wheels-test
rm -rf "$WHEELS"
"$VENV/bin/maturin" build --release --quiet -m crates/mondrian-py/Cargo.toml \
    --interpreter "$VENV/bin/python" -o "$WHEELS"
WHEELENV=target/wheelenv
rm -rf "$WHEELENV"
"$PYTHON" -m venv "$WHEELENV"
"$WHEELENV/bin/python" -m pip install --quiet --disable-pip-version-check "$WHEELS"/*.whl
# From outside the repository, so that only the installed wheel can be imported.
(cd "$WHEELENV" && bin/python -c '
import numpy as np
import mondrian_ml
from mondrian_ml import MondrianForestClassifier, MondrianForestRegressor, MondrianPolyaForest
x = np.random.default_rng(0).random((60, 3))
y = (x[:, 0] > 0.5).astype(int)
p = MondrianForestClassifier(n_estimators=5, random_state=0).fit(x, y).predict_proba(x)
assert p.shape == (60, 2) and np.allclose(p.sum(axis=1), 1.0)
m = MondrianForestRegressor(n_estimators=5, random_state=0).fit(x, x[:, 1]).predict(x)
assert m.shape == (60,) and np.isfinite(m).all()
s = MondrianPolyaForest(n_estimators=5, random_state=0).fit(x).score_samples(x)
assert s.shape == (60,) and np.isfinite(s).all()
print("wheel", mondrian_ml.__version__, "imports, fits and predicts")
')
