#!/usr/bin/env python3
"""Windowed MF settings on the drift streams of run.py: does any simple setting close the
gap to ARF? Prequential accuracy (test-then-train, one row at a time, 20,000 rows, seed 1,
10 trees), MF only; ARF's and AMF's accuracies on the same rows are in results/summary.md.

Usage (from the repository root, with mondrian_ml and river installed):
    target/pyenv/bin/python experiments/drift/settings_probe.py
Prints one line per stream: the accuracy of each setting.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run  # noqa: E402  (the streams, drawn exactly as run.py draws them)

from mondrian_ml import MondrianForestClassifier  # noqa: E402

STREAMS = ["sea_abrupt", "sea_gradual", "agrawal", "hyperplane", "rbf_drift", "led_drift"]
SETTINGS = {
    "W1000": dict(window=1000),
    "W1000 mss5": dict(window=1000, min_samples_split=5),
    "W1000 mss20": dict(window=1000, min_samples_split=20),
    "W1000 df1": dict(window=1000, discount_factor=1.0),
    "W1000 df100": dict(window=1000, discount_factor=100.0),
    "W1000 L10": dict(window=1000, lifetime=10.0),
    "W1000 L30": dict(window=1000, lifetime=30.0),
    "W2000": dict(window=2000),
    "W2000 mss10": dict(window=2000, min_samples_split=10),
    "W500": dict(window=500),
}


def main():
    for stream in STREAMS:
        rows, *_ = run.draw(stream, 20000, 1)
        dims = len(rows[0][0])
        accuracy = {}
        for name, kw in SETTINGS.items():
            model = MondrianForestClassifier(
                n_estimators=10, feature_ranges=[(0.0, 1.0)] * dims, random_state=1, **kw)
            ok, _, _ = run.prequential(model, rows)
            accuracy[name] = ok.mean()
        print(stream, " ".join(f"{k}:{v:.3f}" for k, v in accuracy.items()), flush=True)


if __name__ == "__main__":
    main()
