#!/usr/bin/env python3
"""What the recommended regression path costs: relevance weights with the power chosen by
cross-validation (`relevance:cv`) and CV calibration (`--calibration cv`), against a plain
fit of the same forest, for two builds of the `mondrian` CLI side by side (before and after a
change).

For each data set (split 0 of run.py's protocol) and each build, `mondrian train --task
regression --mode fast --trees 100 --min-samples-split 5 --threads 1` is timed with
  plain   --feature-weights uniform --calibration none
  rel     --feature-weights relevance      (one pilot forest)
  cal     --feature-weights uniform --calibration cv
  relcv   --feature-weights relevance:cv
  relcv+cal --feature-weights relevance:cv --calibration cv
reading the training seconds the CLI prints (they exclude reading the file). The builds and
settings alternate within each repetition, so a drift of the shared host's speed hits them
alike; the tables give medians over the repetitions and each median divided by the same
build's plain fit.

From the repository root:
    target/pyenv/bin/python experiments/regression/cv_cost.py --before OLD_BINARY --after target/release/mondrian
writes experiments/regression/results/cv_cost.{json,md}.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from helpers import (DEFAULT_DATA_DIR, SHORT_NAME, csv_list, load_dataset, log,  # noqa: E402
                     machine, split_indices, write_csv)

SETTINGS = {
    "plain": ["--feature-weights", "uniform", "--calibration", "none"],
    "rel": ["--feature-weights", "relevance", "--calibration", "none"],
    "cal": ["--feature-weights", "uniform", "--calibration", "cv"],
    "relcv": ["--feature-weights", "relevance:cv", "--calibration", "none"],
    "relcv+cal": ["--feature-weights", "relevance:cv", "--calibration", "cv"],
}


def train_seconds(binary: Path, train: Path, model: Path, extra: list[str]) -> float:
    args = [str(binary), "train", "--task", "regression", "--train", str(train), "--model", str(model),
            "--mode", "fast", "--trees", "100", "--min-samples-split", "5", "--threads", "1",
            "--seed", "0", *extra]
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {p.stderr}")
    return float(re.search(r" in ([0-9.]+)s", p.stderr)[1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", type=Path, required=True)
    ap.add_argument("--after", type=Path, required=True)
    ap.add_argument("--datasets", type=csv_list,
                    default=["boston_housing", "wine_quality_red", "kin8nm", "power_plant", "california_housing"])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", type=Path, default=HERE / "results")
    a = ap.parse_args()
    builds = {"before": a.before, "after": a.after}
    started = time.time()
    times: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.datasets:
            cols, X, y = load_dataset(DEFAULT_DATA_DIR, name)
            tr, _, _ = split_indices(DEFAULT_DATA_DIR, name, len(y), 0)
            train = Path(tmp) / f"{name}.csv"
            write_csv(train, cols, X[tr], y[tr])
            for rep in range(a.reps):
                for setting, extra in SETTINGS.items():
                    for build, binary in builds.items():
                        t = train_seconds(binary, train, Path(tmp) / "m.bin", extra)
                        times.setdefault(name, {}).setdefault(build, {}).setdefault(setting, []).append(t)
            log(f"{name}: " + "; ".join(
                f"{b} " + ", ".join(f"{s} {np.median(v):.3g}s" for s, v in times[name][b].items())
                for b in builds))
    report = {"command": " ".join(sys.argv), "machine": machine(), "reps": a.reps,
              "builds": {b: str(p) for b, p in builds.items()}, "seconds": times,
              "wall_seconds": time.time() - started}
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "cv_cost.json").write_text(json.dumps(report, indent=1))
    L = ["# The cost of relevance:cv and CV calibration, before and after", "",
         f"Command: `{report['command']}` ({report['wall_seconds'] / 60:.1f} min; load average at "
         f"start {', '.join(f'{x:.2f}' for x in report['machine']['loadavg_at_start'] or [])}). "
         "`mondrian train --task regression --mode fast --trees 100 --min-samples-split 5 --threads 1` "
         f"on split 0 of each set, median training seconds of {a.reps} alternating repetitions, "
         "and in brackets that median over the same build's plain fit.", "",
         "| data | build | plain | rel | cal | relcv | relcv+cal |", "|---|---|---|---|---|---|---|"]
    for name, per in times.items():
        for b in builds:
            plain = np.median(per[b]["plain"])
            cells = [f"{np.median(v):.3g} s" + ("" if s == "plain" else f" ({np.median(v) / plain:.1f}×)")
                     for s, v in per[b].items()]
            L.append(f"| {SHORT_NAME[name]} | {b} | " + " | ".join(cells) + " |")
    (a.out / "cv_cost.md").write_text("\n".join(L) + "\n")
    log(f"wrote {a.out / 'cv_cost.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
