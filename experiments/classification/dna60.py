#!/usr/bin/env python3
"""dna restricted to its 60 relevant attributes (A61-A120, 0-based columns 60..119): the
paper's MF-dagger / ERT-1-dagger experiment (spec mf-classification.md section 8.1).

Run from the repository root after `cargo build --release`:
    python3 experiments/classification/dna60.py
Writes experiments/classification/results/dna60.md.
"""
import json
import subprocess
import tempfile
from pathlib import Path

import pandas as pd
from sklearn.ensemble import ExtraTreesClassifier, RandomForestClassifier

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / ".." / "shared" / "data" / "classification"
BIN = ROOT / "target" / "release" / "mondrian"
OUT = Path(__file__).resolve().parent / "results" / "dna60.md"
SEEDS = [1, 2]


def main():
    train = pd.read_csv(DATA / "dna_train.csv")
    test = pd.read_csv(DATA / "dna_test.csv")
    relevant = [f"x{i}" for i in range(60, 120)] + ["label"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, cols in [("dna (180 attributes)", list(train.columns)), ("dna† (60 attributes)", relevant)]:
            tr, te = Path(tmp) / "train.csv", Path(tmp) / "test.csv"
            train[cols].to_csv(tr, index=False)
            test[cols].to_csv(te, index=False)
            x, y = train[cols].values[:, :-1], train[cols].values[:, -1].astype(int)
            xt, yt = test[cols].values[:, :-1], test[cols].values[:, -1].astype(int)
            acc = {"MF online": [], "ERT-1": [], "RF": []}
            for s in SEEDS:
                out = subprocess.run([str(BIN), "eval", "--online", "--json", "--seed", str(s),
                                      "--train", str(tr), "--test", str(te)],
                                     capture_output=True, text=True, check=True)
                acc["MF online"].append(json.loads(out.stdout)["accuracy"])
                for label, est in [("ERT-1", ExtraTreesClassifier(100, max_features=1, random_state=s)),
                                   ("RF", RandomForestClassifier(100, random_state=s))]:
                    acc[label].append(float((est.fit(x, y).predict(xt) == yt).mean()))
            rows.append((name, {k: sum(v) / len(v) for k, v in acc.items()}))
    lines = ["# dna with all attributes and with the 60 relevant ones", "",
             "Command: `python3 experiments/classification/dna60.py` "
             f"(100 trees, seeds {SEEDS}, mean test accuracy; MF streams one point at a time).", "",
             "| data | MF online | ERT-1 | RF |", "|---|---|---|---|"]
    for name, a in rows:
        lines.append(f"| {name} | {a['MF online']:.4f} | {a['ERT-1']:.4f} | {a['RF']:.4f} |")
    OUT.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
