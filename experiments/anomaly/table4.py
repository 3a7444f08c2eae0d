"""The paper's Table 4 (spec §10.4) in one run: ours (bMPF, sMPF) and the peers.

Every (data set, method, seed) run appends one JSON line to `results/runs*.jsonl` as soon as
it ends, and a rerun skips the runs already there, so an interrupted run resumes where it
stopped. `report.py` turns the lines into the tables and plots.

Methods (one thread each: OMP/MKL/OPENBLAS threads 1, n_jobs=1, --threads 1):

* bMPF  `mondrian anomaly eval --input F --seed S --threads 1 --json` (fit on all rows,
        score all rows, spec §9.1);
* sMPF  the same with `--stream --shuffle S`: rows inserted one at a time in the order
        `numpy.random.default_rng(S).permutation(n)` (spec D2), every row scored at the end;
* iforest  scikit-learn IsolationForest defaults (100 trees, max_samples=min(256, n)),
        score = -score_samples;
* isotree  isotree IsolationForest(ntrees=100, sample_size=min(256, n), ndim=1), score =
        predict (standardised depth score);
* pca, knn, lof  PyOD defaults, score = decision_scores_; deterministic, so run once
        (seed 0) and reported with std 0;
* rrcf  streaming robust random cut forest over the shuffled stream, sets of at most
        12,000 rows: 20 trees (half of the rrcf documentation's streaming example, for time), each a sliding
        window of the last 256 points; a point is inserted in every tree, then scored by
        its mean CoDisp (insert-then-score, as sMPF's window mode);
* hst  river HalfSpaceTrees(height=15, n_trees=10, window_size=256, seed=S) over the
        shuffled stream, features min-max scaled to [0, 1] with the data set's min and max
        (river's trees assume [0, 1]); score_one then learn_one per row. AUC over the whole
        stream and over the positions after its first window (spec D5).

Usage: see README.md. `--quick`: 2 seeds, sets of at most 2,000 rows, results-quick/.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

for _v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_v] = "1"

import numpy as np  # noqa: E402
from sklearn.metrics import average_precision_score, roc_auc_score  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import data  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.path.join(data.ROOT, "target", "release", "mondrian")
RRCF_MAX_ROWS = 12_000
RRCF_TREES = 20
WINDOW = 256
HST_HEIGHT = 15
HST_TREES = 10
DETERMINISTIC = {"pca", "knn", "lof"}
BATCH = ["bmpf", "iforest", "isotree", "pca", "knn", "lof"]
STREAM = ["smpf", "rrcf", "hst"]
ALL = ["bmpf", "smpf", "iforest", "isotree", "pca", "knn", "lof", "hst", "rrcf"]


def metrics(y, score):
    return float(roc_auc_score(y, score)), float(average_precision_score(y, score))


def scaled_copy(ds):
    """A min-max scaled copy of a set with d >= 50 (spec §9.1 scales those for MPF).

    The CLI's stream inserts the first row alone, so its first-batch scaler would be fixed
    on one row (a range of 0: no scaling); the copy gives the stream the paper's scaling.
    A batch fit scales from all rows, the same map, so bMPF is unchanged by it.
    """
    path = os.path.join(data.ROOT, "target", "scaled", os.path.basename(ds["path"]))
    path = path.replace(".csv.gz", ".csv")
    if not os.path.exists(path):
        x = ds["x"]
        lo, hi = x.min(axis=0), x.max(axis=0)
        data.write_csv(path, (x - lo) / np.where(hi > lo, hi - lo, 1.0), ds["y"])
    return path


def run_ours(ds, seed, stream):
    path = scaled_copy(ds) if stream and ds["x"].shape[1] >= 50 else ds["path"]
    cmd = [BIN, "anomaly", "eval", "--input", path, "--seed", str(seed),
           "--threads", "1", "--json"]
    if stream:
        cmd += ["--stream", "--shuffle", str(seed)]
    t = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {out.stderr.strip()}")
    res = json.loads(out.stdout.strip().splitlines()[-1])
    return {"auc": res["roc_auc"], "ap": res["average_precision"], "seconds": res["seconds"],
            "wall_seconds": wall, "n_out_of_domain": res.get("n_out_of_domain"),
            "command": " ".join(cmd[1:]).replace(data.ROOT + "/", "")}


def run_iforest(ds, seed):
    from sklearn.ensemble import IsolationForest
    x = ds["x"]
    t = time.perf_counter()
    m = IsolationForest(n_estimators=100, random_state=seed, n_jobs=1).fit(x)
    s = -m.score_samples(x)
    return {"seconds": time.perf_counter() - t, "score": s}


def run_isotree(ds, seed):
    from isotree import IsolationForest
    x = ds["x"]
    t = time.perf_counter()
    m = IsolationForest(ntrees=100, sample_size=min(256, len(x)), ndim=1, nthreads=1,
                        random_seed=seed).fit(x)
    s = m.predict(x)
    return {"seconds": time.perf_counter() - t, "score": s}


def run_pyod(kind):
    def run(ds, seed):
        from pyod.models.knn import KNN
        from pyod.models.lof import LOF
        from pyod.models.pca import PCA
        model = {"pca": PCA, "knn": KNN, "lof": LOF}[kind]()
        t = time.perf_counter()
        model.fit(ds["x"])
        s = np.asarray(model.decision_scores_, dtype=float)
        return {"seconds": time.perf_counter() - t, "score": s}
    return run


def run_rrcf(ds, seed):
    import rrcf
    x = ds["x"]
    n = len(x)
    order = np.random.default_rng(seed).permutation(n)
    np.random.seed(seed)  # rrcf draws its cuts from numpy's global generator
    forest = [rrcf.RCTree() for _ in range(RRCF_TREES)]
    score = np.zeros(n)
    t = time.perf_counter()
    for pos, i in enumerate(order):
        total = 0.0
        for tree in forest:
            if len(tree.leaves) >= WINDOW:
                tree.forget_point(order[pos - WINDOW])
            tree.insert_point(x[i], index=int(i))
            total += tree.codisp(int(i))
        score[i] = total / RRCF_TREES
    return {"seconds": time.perf_counter() - t, "score": score, "trees": RRCF_TREES,
            "window": WINDOW}


def run_hst(ds, seed):
    from river.anomaly import HalfSpaceTrees
    x = ds["x"]
    n = len(x)
    lo, hi = x.min(axis=0), x.max(axis=0)
    span = np.where(hi > lo, hi - lo, 1.0)
    xs = (x - lo) / span
    order = np.random.default_rng(seed).permutation(n)
    model = HalfSpaceTrees(n_trees=HST_TREES, height=HST_HEIGHT, window_size=WINDOW, seed=seed)
    score = np.zeros(n)
    t = time.perf_counter()
    for i in order:
        row = dict(enumerate(xs[i].tolist()))
        score[i] = model.score_one(row)
        model.learn_one(row)
    seconds = time.perf_counter() - t
    y = ds["y"]
    late = order[WINDOW:]
    auc_after = ap_after = None
    if len(late) and 0 < y[late].sum() < len(late):
        auc_after, ap_after = metrics(y[late], score[late])
    return {"seconds": seconds, "score": score, "auc_after_window": auc_after,
            "ap_after_window": ap_after, "trees": HST_TREES, "height": HST_HEIGHT,
            "window": WINDOW}


RUNNERS = {
    "bmpf": lambda ds, s: run_ours(ds, s, False),
    "smpf": lambda ds, s: run_ours(ds, s, True),
    "iforest": run_iforest, "isotree": run_isotree,
    "pca": run_pyod("pca"), "knn": run_pyod("knn"), "lof": run_pyod("lof"),
    "rrcf": run_rrcf, "hst": run_hst,
}


def load_done(out_dir):
    done = set()
    for f in os.listdir(out_dir):
        if f.startswith("runs") and f.endswith(".jsonl"):
            with open(os.path.join(out_dir, f)) as fh:
                for line in fh:
                    if line.strip():
                        r = json.loads(line)
                        done.add((r["dataset"], r["method"], r["seed"]))
    return done


def applies(method, ds):
    return not (method == "rrcf" and len(ds["y"]) > RRCF_MAX_ROWS)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="2 seeds, sets of <= 2000 rows")
    ap.add_argument("--sets", help="comma-separated data set names (file stems)")
    ap.add_argument("--methods", default=",".join(ALL), help="comma-separated, in run order")
    ap.add_argument("--seeds", type=int, default=None, help="number of seeds (default 5)")
    ap.add_argument("--seed-major", action="store_true",
                    help="run seed 0 on every set, then seed 1, ... (for the slow peers)")
    ap.add_argument("--tag", default="main", help="runs-TAG.jsonl: one file per process")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    seeds = args.seeds or (2 if args.quick else 5)
    out_dir = args.out or os.path.join(HERE, "results-quick" if args.quick else "results")
    os.makedirs(out_dir, exist_ok=True)
    names = set(args.sets.split(",")) if args.sets else None
    sets = data.datasets(names, max_rows=2000 if args.quick else None)
    nab = {name: ds["check"] for name, ds in sets if ds["check"]}
    if not names:  # a filtered run would drop the other series from the record
        with open(os.path.join(out_dir, "nab_check.json"), "w") as fh:
            json.dump(nab, fh, indent=1)
    methods = args.methods.split(",")
    done = load_done(out_dir)
    runs_path = os.path.join(out_dir, f"runs-{args.tag}.jsonl")

    jobs = []
    for method in methods:
        method_seeds = [0] if method in DETERMINISTIC else list(range(seeds))
        if args.seed_major:
            jobs += [(name, ds, method, s) for s in method_seeds for name, ds in sets]
        else:
            jobs += [(name, ds, method, s) for name, ds in sets for s in method_seeds]
    for name, ds, method, seed in jobs:
        if (name, method, seed) in done or not applies(method, ds):
            continue
        try:
            res = RUNNERS[method](ds, seed)
        except Exception as e:  # a peer failing on one set must not stop the run
            res = {"error": f"{type(e).__name__}: {e}"[:500]}
        if "score" in res:
            score = np.nan_to_num(np.asarray(res.pop("score"), dtype=float),
                                  nan=0.0, posinf=1e300, neginf=-1e300)
            res["auc"], res["ap"] = metrics(ds["y"], score)
        rec = {"dataset": name, "method": method, "seed": seed, "n": int(len(ds["y"])),
               "d": int(ds["x"].shape[1]), **res}
        with open(runs_path, "a") as fh:
            fh.write(json.dumps(rec) + "\n")
        print(f"{name:40s} {method:8s} seed {seed}  auc {rec.get('auc', float('nan')):.4f}  "
              f"{rec.get('seconds', float('nan')):.2f}s {rec.get('error', '')}", flush=True)


if __name__ == "__main__":
    main()
