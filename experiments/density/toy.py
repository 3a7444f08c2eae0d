"""The 2-D toy sets of the paper's Table 9 (spec §9.3, §10.9): AUC and AUPRG of bMPF, sMPF
and scikit-learn's IsolationForest, and plots of the density and the scores over a grid.

Data (scikit-learn's "Comparing anomaly detection algorithms" example, as spec §9.3 says):
425 inliers and 75 outliers uniform on [-6, 6]^2 (numpy RandomState(42)), n = 500:
single blob (centre (0,0), std 0.5), two blobs tight (±(2,2), std 0.5), two blobs spread
(std [1.5, 0.3]), moons (4·(make_moons(noise=0.05) − (0.5, 0.25)), here 425 inlier points so
that n = 500; the example draws 500), and "moon & blob", which the paper does not define:
here 325 moon points and a blob of 100 (std 0.5) at (0, 3), informational only (A17).

Ours: the example `polya_grid` (crates/mondrian/examples/polya_grid.rs) fits a forest of
100 trees (depth 10, γ = 1, λ = ∞) on the 500 points and evaluates the points and a grid; the
streaming forest is fitted in one batch (its distribution is that of the stream, spec §7.2).
Anomaly score = −mean leaf mass (spec §5). 5 seeds, mean ± population std.
AUPRG: Flach & Kull's precision–recall gain with the anomalies as the positive class, the
area over recall gain in [0, 1] by trapezoids (the crossing at recall gain 0 interpolated),
which is pyprg's `calc_auprg` reading.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile

import numpy as np
from sklearn.datasets import make_blobs, make_moons
from sklearn.ensemble import IsolationForest
from sklearn.metrics import roc_auc_score

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
EXAMPLE = os.path.join(ROOT, "target", "release", "examples", "polya_grid")
PAPER = {  # spec §10.9: (AUC, AUPRG) for sMPF, bMPF, iForest
    "single_blob": {"smpf": (0.963, 0.994), "bmpf": (0.966, 0.993), "iforest": (0.964, 0.993)},
    "two_blobs_tight": {"smpf": (0.994, 0.999), "bmpf": (0.994, 0.998),
                        "iforest": (0.994, 0.999)},
    "two_blobs_spread": {"smpf": (0.948, 0.986), "bmpf": (0.956, 0.989),
                         "iforest": (0.953, 0.984)},
    "moons": {"smpf": (0.904, 0.971), "bmpf": (0.901, 0.978), "iforest": (0.840, 0.947)},
    "moon_and_blob": {"smpf": (0.977, 0.996), "bmpf": (0.964, 0.997),
                      "iforest": (0.955, 0.990)},
}


def toy_sets():
    n_in, n_out = 425, 75
    kw = dict(random_state=0, n_samples=n_in, n_features=2)
    moons = lambda n: 4.0 * (make_moons(n_samples=n, noise=0.05, random_state=0)[0]  # noqa
                             - np.array([0.5, 0.25]))
    inliers = {
        "single_blob": make_blobs(centers=[[0, 0], [0, 0]], cluster_std=0.5, **kw)[0],
        "two_blobs_tight": make_blobs(centers=[[2, 2], [-2, -2]], cluster_std=[0.5, 0.5],
                                      **kw)[0],
        "two_blobs_spread": make_blobs(centers=[[2, 2], [-2, -2]], cluster_std=[1.5, 0.3],
                                       **kw)[0],
        "moons": moons(n_in),
        "moon_and_blob": np.vstack([moons(325), make_blobs(
            n_samples=100, centers=[[0, 3]], cluster_std=0.5, random_state=1)[0]]),
    }
    out = {}
    for name, xin in inliers.items():
        rng = np.random.RandomState(42)
        x = np.vstack([xin, rng.uniform(low=-6, high=6, size=(n_out, 2))])
        y = np.r_[np.zeros(n_in, int), np.ones(n_out, int)]
        out[name] = (x, y)
    return out


def auprg(y, score):
    """Area under the precision-recall-gain curve (Flach & Kull 2015), positive = 1."""
    pi = y.mean()
    order = np.argsort(-score, kind="mergesort")
    s, yy = score[order], y[order]
    tp = np.cumsum(yy)
    fp = np.cumsum(1 - yy)
    last = np.r_[s[1:] != s[:-1], True]  # one point per distinct threshold
    tp, fp = tp[last], fp[last]
    prec, rec = tp / (tp + fp), tp / yy.sum()
    with np.errstate(divide="ignore", invalid="ignore"):
        pg = (prec - pi) / ((1 - pi) * prec)
        rg = (rec - pi) / ((1 - pi) * rec)
    area = 0.0
    for i in range(1, len(rg)):
        r0, r1, p0, p1 = rg[i - 1], rg[i], pg[i - 1], pg[i]
        if r1 <= 0 or not np.isfinite(r0 + p0):
            continue
        if r0 < 0:  # interpolate the crossing of recall gain 0
            p0 = p0 + (p1 - p0) * (0 - r0) / (r1 - r0)
            r0 = 0.0
        area += (r1 - r0) * (p0 + p1) / 2
    return float(area)


def write(path, x):
    np.savetxt(path, x, delimiter=",", header="x0,x1", comments="", fmt="%.17g")


def ours(variant, train, query, seed, tmp):
    a, b = os.path.join(tmp, "train.csv"), os.path.join(tmp, "query.csv")
    write(a, train)
    write(b, query)
    out = subprocess.run([EXAMPLE, variant, a, b, str(seed)], capture_output=True, text=True,
                         check=True).stdout
    r = np.loadtxt(out.splitlines()[1:], delimiter=",", ndmin=2)
    return r[:, 0], r[:, 1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--grid", type=int, default=150)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    sets = toy_sets()
    results, grids = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (x, y) in sets.items():
            lo, hi = x.min(axis=0), x.max(axis=0)
            g0, g1 = np.meshgrid(np.linspace(lo[0], hi[0], args.grid),
                                 np.linspace(lo[1], hi[1], args.grid))
            grid = np.c_[g0.ravel(), g1.ravel()]
            query = np.vstack([x, grid])
            res = {}
            for seed in range(args.seeds):
                for variant, key in (("batch", "bmpf"), ("streaming", "smpf")):
                    mass, logd = ours(variant, x, query, seed, tmp)
                    score = -mass[: len(x)]
                    res.setdefault(key, []).append((roc_auc_score(y, score), auprg(y, score)))
                    if seed == 0:
                        grids[(name, key)] = (mass[len(x):], logd[len(x):])
                forest = IsolationForest(random_state=seed).fit(x)
                score = -forest.score_samples(x)
                res.setdefault("iforest", []).append((roc_auc_score(y, score), auprg(y, score)))
                if seed == 0:
                    grids[(name, "iforest")] = (-forest.score_samples(grid), None)
            results[name] = {
                m: {"auc": float(np.mean([a for a, _ in v])), "auc_std": float(np.std(
                    [a for a, _ in v])), "auprg": float(np.mean([p for _, p in v])),
                    "auprg_std": float(np.std([p for _, p in v])), "seeds": len(v)}
                for m, v in res.items()}
            grids[(name, "axes")] = (g0, g1)
    with open(os.path.join(args.out, "toy.json"), "w") as fh:
        json.dump(results, fh, indent=1)
    lines = ["# Table 9 toy sets: AUC and AUPRG (mean ± std over 5 seeds; *paper*)", "",
             "| data set | bMPF AUC | *paper* | sMPF AUC | *paper* | iForest AUC | *paper* "
             "| bMPF AUPRG | *paper* | sMPF AUPRG | *paper* | iForest AUPRG | *paper* |",
             "|---|" + "---|" * 12]
    for name, r in results.items():
        p = PAPER[name]
        cells = []
        for k, idx in (("auc", 0), ("auprg", 1)):
            for m in ("bmpf", "smpf", "iforest"):
                cells += [f"{r[m][k]:.3f} ± {r[m][k + '_std']:.3f}", f"*{p[m][idx]:.3f}*"]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    with open(os.path.join(args.out, "toy.md"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    plot(sets, grids, os.path.join(args.out, "toy_density_scores.png"))


def plot(sets, grids, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    cols = [("bmpf", "density", "bMPF log-density"), ("smpf", "density", "sMPF log-density"),
            ("bmpf", "score", "bMPF score −log10 mass"),
            ("smpf", "score", "sMPF score −log10 mass"), ("iforest", "score", "iForest score")]
    fig, axes = plt.subplots(len(sets), len(cols), figsize=(4 * len(cols), 3.6 * len(sets)))
    for r, (name, (x, y)) in enumerate(sets.items()):
        g0, g1 = grids[(name, "axes")]
        for c, (m, what, title) in enumerate(cols):
            ax = axes[r, c]
            mass, logd = grids[(name, m)]
            if m == "iforest":
                z = mass
            elif what == "density":
                z = logd
            else:
                z = -np.log10(mass)
            z = np.where(np.isfinite(z), z, np.nan).reshape(g0.shape)
            im = ax.pcolormesh(g0, g1, z, shading="auto", cmap="viridis")
            fig.colorbar(im, ax=ax, fraction=0.046)
            ax.scatter(x[y == 0, 0], x[y == 0, 1], s=2, c="white", alpha=0.6)
            ax.scatter(x[y == 1, 0], x[y == 1, 1], s=6, c="red", marker="x")
            ax.set_title(f"{name}: {title}", fontsize=8)
            ax.set_xticks([])
            ax.set_yticks([])
    fig.tight_layout()
    fig.savefig(path, dpi=80)


if __name__ == "__main__":
    main()
