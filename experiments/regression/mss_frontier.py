#!/usr/bin/env python3
"""How min_samples_split trades RMSE against NLPD for the best MF configuration (fast mode,
100 trees, relevance feature weights), against the issue's targets.

Same protocol, splits and CLI call as run.py (first --splits of the standard 90/10 splits;
california on seeded random splits; training rows in the same shuffled order). The
scikit-learn RF / ERT numbers are read from results/results.json, which run.py wrote for
the same splits with fixed random_state, so they are the numbers of the main table.

Run from the repository root after `cargo build --release`:
    target/pyenv/bin/python experiments/regression/mss_frontier.py
Writes experiments/regression/results/mss_frontier.md (and .json).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import helpers as R  # noqa: E402  (the main experiment's data and CLI helpers)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", type=Path, default=R.DEFAULT_BINARY)
    ap.add_argument("--data-dir", type=Path, default=R.DEFAULT_DATA_DIR)
    ap.add_argument("--splits", type=int, default=5)
    ap.add_argument("--mss", default="2,3,4,5")
    ap.add_argument("--weights", default="relevance")
    ap.add_argument("--trees", type=int, default=100)
    ap.add_argument("--out", type=Path, default=HERE / "results")
    a = ap.parse_args()
    base = json.loads((HERE / "results" / "results.json").read_text())["datasets"]
    mss_values = [int(m) for m in a.mss.split(",")]
    started = time.time()
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in R.ALL_DATASETS:
            cols, X, y = R.load_dataset(a.data_dir, name)
            for k in range(a.splits):
                tr, te, _ = R.split_indices(a.data_dir, name, len(y), k)
                d = Path(tmp) / f"{name}_{k}"
                d.mkdir()
                R.write_csv(d / "train.csv", cols, X[tr], y[tr])
                R.write_csv(d / "test.csv", cols, X[te], y[te])
                for m in mss_values:
                    r = R.mf_eval(a.binary, d / "train.csv", d / "test.csv", k, a.trees, "fast",
                                  False, "heuristic", m, a.weights)
                    rows.setdefault((name, m), []).append(r)
            R.log(f"{name} done")
    mean = lambda rs, key: float(np.mean([r[key] for r in rs]))  # noqa: E731
    report = {"command": " ".join(sys.argv), "splits": a.splits, "trees": a.trees,
              "weights": a.weights, "wall_seconds": time.time() - started, "results": {}}
    lines = ["# min_samples_split: RMSE against NLPD (MF fast, relevance weights)", "",
             f"Command: `target/pyenv/bin/python experiments/regression/mss_frontier.py` "
             f"({report['wall_seconds'] / 60:.1f} min). MF: `mondrian eval --task regression "
             f"--mode fast --trees {a.trees} --feature-weights {a.weights} "
             f"--min-samples-split M --seed k --threads 1`, means over the first {a.splits} "
             "splits of run.py's protocol. RF / ERT: results.json of run.py (same splits, same "
             "seeds). A cell is RMSE / ERT's, then NLPD with ✓ where it beats both scikit-learn "
             "forests, then 90 % coverage.", "",
             "| data | " + " | ".join(f"mss {m}" for m in mss_values) + " | ERT RMSE | best sklearn NLPD |",
             "|---|" + "---|" * (len(mss_values) + 2)]
    met = {m: [0, 0, 0] for m in mss_values}
    for name in R.ALL_DATASETS:
        splits = base[name]["splits"][: a.splits]
        ert = float(np.mean([s["methods"]["ert"]["rmse"] for s in splits]))
        best = min(float(np.mean([s["methods"][f]["nlpd"] for s in splits])) for f in ("rf", "ert"))
        cells = []
        for m in mss_values:
            rs = rows[(name, m)]
            ratio, nlpd, cov = mean(rs, "rmse") / ert, mean(rs, "nlpd"), mean(rs, "coverage_90")
            met[m][0] += nlpd < best
            met[m][1] += abs(cov - 0.9) <= 0.05
            met[m][2] += ratio <= 1.10
            report["results"][f"{name}/mss{m}"] = {"rmse_over_ert": ratio, "nlpd": nlpd,
                                                   "coverage_90": cov}
            cells.append(f"{ratio:.3f} / {nlpd:.3f}{' ✓' if nlpd < best else ''} / {cov:.3f}")
        lines.append(f"| {R.SHORT_NAME[name]} | " + " | ".join(cells) + f" | {ert:.4g} | {best:.3f} |")
    lines += ["", "Targets met (of 8): NLPD better than both forests / coverage within 0.05 of "
              "0.90 / RMSE within 10 % of ERT:", ""]
    for m in mss_values:
        lines.append(f"- mss {m}: {met[m][0]} / {met[m][1]} / {met[m][2]}")
    report["targets_met"] = {str(m): met[m] for m in mss_values}
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "mss_frontier.md").write_text("\n".join(lines) + "\n")
    (a.out / "mss_frontier.json").write_text(json.dumps(report, indent=1) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
