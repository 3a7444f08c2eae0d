#!/usr/bin/env python3
"""Windowed MF with relevance weights re-learnt on the window, on the drift streams of run.py.

A wrapper over the library's public API, per row (test-then-train): it keeps the last W
rows; every R rows it trains a fresh `MondrianForestClassifier(window=W,
feature_weights="relevance", ...)` on them (the weights come from a pilot forest on those
rows) and then feeds it the following rows one at a time with `partial_fit`. Between two
re-learnings the model is a windowed forest with fixed weights, so it stays distributed as
a batch forest on the last W rows with those weights.

Accuracy only: the per-row numpy calls (`predict`, `partial_fit` on one row) carry the
scikit-learn API's per-call checks, so this script's speed says nothing about the library's.

Usage (from the repository root, with mondrian_ml and river installed):
    target/pyenv/bin/python experiments/drift/relevance_probe.py
"""
import sys
from collections import deque
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run  # noqa: E402  (the streams, drawn exactly as run.py draws them)

from mondrian_ml import MondrianForestClassifier  # noqa: E402

STREAMS = ["sea_abrupt", "sea_gradual", "agrawal", "hyperplane", "rbf_drift", "led_drift"]
WINDOW = 1000
SETTINGS = {
    "R1000": dict(every=1000),
    "R500": dict(every=500),
    "R1000 mss5": dict(every=1000, min_samples_split=5),
    "R250 mss5": dict(every=250, min_samples_split=5),
}


class RelearnedWindow:
    """Per-row windowed MF whose relevance weights are re-learnt every `every` rows."""

    def __init__(self, dims, classes, every, **params):
        self.dims, self.classes, self.every, self.params = dims, classes, every, params
        self.rows = deque(maxlen=WINDOW)
        self.model = None
        self.since = 0

    def predict_one(self, x):
        if self.model is None:
            return None
        return self.model.predict(np.array([list(x.values())]))[0]

    def learn_one(self, x, y):
        self.rows.append((list(x.values()), y))
        self.since += 1
        labels = {label for _, label in self.rows}
        # A pilot forest needs a few rows of two labels to split.
        if (self.model is None or self.since >= self.every) and len(labels) >= 2 and len(self.rows) >= 20:
            model = MondrianForestClassifier(
                n_estimators=10, window=WINDOW, feature_ranges=[(0.0, 1.0)] * self.dims,
                random_state=1, feature_weights="relevance", **self.params)
            X = np.array([r for r, _ in self.rows])
            model.partial_fit(X, np.array([label for _, label in self.rows]), classes=self.classes)
            self.model, self.since = model, 0
        elif self.model is not None:
            self.model.partial_fit(np.array([list(x.values())]), np.array([y]))


def main():
    for stream in STREAMS:
        rows, *_ = run.draw(stream, 20000, 1)
        dims = len(rows[0][0])
        classes = np.array(sorted({y for _, y in rows}))
        accuracy = {}
        for name, kw in SETTINGS.items():
            ok, _, _ = run.prequential(RelearnedWindow(dims, classes, **kw), rows)
            accuracy[name] = ok.mean()
        print(stream, " ".join(f"{k}:{v:.3f}" for k, v in accuracy.items()), flush=True)


if __name__ == "__main__":
    main()
