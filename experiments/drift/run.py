#!/usr/bin/env python3
"""Drift (issue 19): prequential accuracy and per-row speed of windowed Mondrian forests on
river's synthetic drifting streams, against river's ARF and AMF, in one process.

Protocol
--------
* Streams (river.datasets.synth, fixed seeds, ``--rows`` rows each):
    sea_abrupt    ConceptDriftStream chain SEA variant 0 -> 1 -> 2 -> 3, 10 % label noise,
                  drifts at 1/4, 1/2, 3/4 of the stream, width 50 (abrupt; wider
                  only if river would overflow, see abrupt_width)
    sea_gradual   the same concepts and positions, width rows/8 (gradual)
    agrawal       ConceptDriftStream chain Agrawal function 0 -> 2 -> 5 -> 8 (functions whose
                  minority class is >= 25 %), drifts at 1/4, 1/2, 3/4, abrupt width
    hyperplane    rotating Hyperplane: 10 features, 5 drifting, mag_change 0.001, sigma 0.1,
                  5 % noise (continuous drift, no drift points)
    rbf_drift     RandomRBFDrift: 10 features, 5 classes, 50 centroids all moving at speed
                  0.001 (continuous drift)
    led_drift     ConceptDriftStream LEDDrift(7 drifting attributes, seed a) -> LEDDrift(7,
                  seed b), 10 % noise, 24 features; one abrupt drift at 1/2 (width 58 at 20000 rows) (the two seeds
                  swap different attributes)
  A stream is drawn once, then every feature is mapped to [0, 1] by the range the generator
  draws it from (its definition, not the data), so every model gets the SAME list of dicts.
  (river's AMF assumes features in [0, 1]; ARF's Hoeffding trees do not care.)
* Models, all with 10 trees and seed ``--seed``:
    MF W=w      mondrian_ml.MondrianForestClassifier(n_estimators=10, window=w,
                feature_ranges=[(0, 1)] * D, random_state=seed), for every w in ``--windows``
                (default 1000 and 5000, both reported on every stream, fixed in advance)
    MF          the same without a window
    ARF         river.forest.ARFClassifier(n_models=10, seed=seed), defaults otherwise
    AMF         river.forest.AMFClassifier(n_estimators=10, seed=seed), defaults otherwise
* Prequential, one row at a time, the same loop for every model:
      ok.append(model.predict_one(x) == y); model.learn_one(x, y)
  timed with time.perf_counter (wall) and time.process_time (CPU) around the whole loop.
  A model's first prediction (None) counts as an error.
* Timing on a shared 2-core machine: ARF and AMF run once per stream (their cost dominates);
  every MF model runs ``--mf-reps`` times, spread before, between and after ARF and AMF, and
  its MEDIAN time is reported (the reps give identical predictions, which is checked). The
  order ARF/AMF alternates between streams.
* Extra, not the headline: "MF W=w batch" uses the numpy API, test-then-train by chunks of
  ``--chunk`` rows (predict the chunk with the model before it, then partial_fit it); same
  window and seed as the first window in ``--windows``.
* Reported: final prequential accuracy, accuracy over the last 20 % of rows, wall µs per row
  (learn + predict), rows/s, CPU µs per row, and MF rows/s / ARF rows/s.

Outputs (``--out``, default experiments/drift/results): summary.md, results.json,
accuracy.png (rolling accuracy over ``--rolling`` rows, drift points marked).

  target/pyenv/bin/python experiments/drift/run.py                 # full run
  target/pyenv/bin/python experiments/drift/run.py --quick         # smoke test, 2000 rows
"""
from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import datetime as _dt
import gc
import json
import platform
import shlex
import statistics as st
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent.parent
TREES = 10
ALL_STREAMS = ["sea_abrupt", "sea_gradual", "agrawal", "hyperplane", "rbf_drift", "led_drift"]


# ----------------------------------------------------------------------------- arguments

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--rows", type=int, default=None, help="rows per stream (default 20000; 2000 with --quick)")
    p.add_argument("--seed", type=int, default=1, help="seed of the models; stream seeds derive from it")
    p.add_argument("--windows", default="1000,5000", help="comma-separated MF window sizes W")
    p.add_argument("--streams", default=",".join(ALL_STREAMS), help="comma-separated, from " + ",".join(ALL_STREAMS))
    p.add_argument("--mf-reps", type=int, default=3, help="timed runs of each MF model (median reported)")
    p.add_argument("--chunk", type=int, default=100, help="chunk of the numpy batch variant (0: skip it)")
    p.add_argument("--rolling", type=int, default=1000, help="rows of the rolling accuracy in the plot")
    p.add_argument("--quick", action="store_true", help="smoke test: 2000 rows, results-quick/")
    p.add_argument("--out", type=Path, default=None, help="output directory (default results/ or results-quick/)")
    a = p.parse_args(argv)
    a.rows = a.rows or (2000 if a.quick else 20000)
    a.windows = [int(w) for w in a.windows.split(",") if w.strip()]
    a.streams = [s.strip() for s in a.streams.split(",") if s.strip()]
    bad = [s for s in a.streams if s not in ALL_STREAMS]
    if bad:
        p.error(f"unknown stream(s) {bad}")
    if a.mf_reps < 1:
        p.error("--mf-reps must be >= 1")
    a.out = (a.out or (HERE / ("results-quick" if a.quick else "results"))).resolve()
    return a


# ----------------------------------------------------------------------------- streams

def chain(concepts, positions, width, seed):
    """Nested ConceptDriftStream: concepts[i] -> concepts[i + 1] around positions[i] (global
    row numbers). The inner stream is only drawn from once the outer one switches to it, and
    the sigmoid is symmetric, so its own position counts from the previous drift point."""
    from river.datasets import synth
    stream = concepts[-1]
    for i in reversed(range(len(concepts) - 1)):
        start = positions[i - 1] if i > 0 else 0
        stream = synth.ConceptDriftStream(stream=concepts[i], drift_stream=stream,
                                          position=positions[i] - start, width=width,
                                          seed=seed + i)
    return stream


def abrupt_width(positions):
    """50 rows, or more when a drift point is so far from the previous one that river's
    ConceptDriftStream would overflow math.exp(4 * position / width) at its first row."""
    gaps = [b - a for a, b in zip([0] + positions[:-1], positions)]
    return max(50, -(-4 * max(gaps) // 700))


def make_stream(name, n, seed):
    """(river dataset, feature domains {name: (lo, hi)}, drift positions, width, description)."""
    from river.datasets import synth
    s = 1000 * seed  # stream seeds derive from the model seed
    quarters = [n // 4, n // 2, 3 * n // 4]
    if name in ("sea_abrupt", "sea_gradual"):
        width = abrupt_width(quarters) if name == "sea_abrupt" else max(n // 8, 1)
        concepts = [synth.SEA(variant=v, noise=0.1, seed=s + 10 + v) for v in range(4)]
        return (chain(concepts, quarters, width, s + 1), {i: (0.0, 10.0) for i in range(3)},
                quarters, width,
                f"SEA variants 0→1→2→3 (thresholds 8, 9, 7, 9.5), 10 % noise, ConceptDriftStream "
                f"width {width}")
    if name == "agrawal":
        functions = [0, 2, 5, 8]
        concepts = [synth.Agrawal(classification_function=f, seed=s + 20 + f) for f in functions]
        domains = {"salary": (20000.0, 150000.0), "commission": (0.0, 85000.0), "age": (20.0, 80.0),
                   "elevel": (0.0, 4.0), "car": (1.0, 20.0), "zipcode": (0.0, 8.0),
                   "hvalue": (0.0, 1200000.0), "hyears": (1.0, 30.0), "loan": (0.0, 500000.0)}
        width = abrupt_width(quarters)
        return (chain(concepts, quarters, width, s + 2), domains, quarters, width,
                f"Agrawal functions 0→2→5→8, ConceptDriftStream width {width}")
    if name == "hyperplane":
        ds = synth.Hyperplane(seed=s + 3, n_features=10, n_drift_features=5, mag_change=0.001,
                              noise_percentage=0.05, sigma=0.1)
        return (ds, {i: (0.0, 1.0) for i in range(10)}, [], 0,
                "rotating Hyperplane, 10 features (5 drifting), mag_change 0.001, sigma 0.1, 5 % noise")
    if name == "rbf_drift":
        ds = synth.RandomRBFDrift(seed_model=s + 4, seed_sample=s + 5, n_classes=5, n_features=10,
                                  n_centroids=50, change_speed=0.001, n_drift_centroids=50)
        return (ds, {i: (0.0, 1.0) for i in range(10)}, [], 0,
                "RandomRBFDrift, 10 features, 5 classes, 50 centroids all moving at speed 0.001")
    if name == "led_drift":
        a = synth.LEDDrift(seed=s + 6, noise_percentage=0.1, irrelevant_features=True, n_drift_features=7)
        b = synth.LEDDrift(seed=s + 7, noise_percentage=0.1, irrelevant_features=True, n_drift_features=7)
        width = abrupt_width([n // 2])
        return (chain([a, b], [n // 2], width, s + 8), {i: (0.0, 1.0) for i in range(24)}, [n // 2], width,
                "LEDDrift (24 features, 7 attributes swapped, 10 % noise) → LEDDrift with other swaps, "
                f"10 classes, ConceptDriftStream width {width}")
    raise ValueError(name)


def draw(name, n, seed):
    ds, domains, drifts, width, desc = make_stream(name, n, seed)
    rows = []
    for x, y in ds.take(n):
        z = {}
        for k, v in x.items():
            lo, hi = domains[k]
            z[k] = (float(v) - lo) / (hi - lo)
        rows.append((z, y))
    if len(rows) != n:
        raise RuntimeError(f"{name}: drew {len(rows)} rows, wanted {n}")
    return rows, drifts, width, desc


# ----------------------------------------------------------------------------- models

def model_factories(windows, dims, seed):
    from mondrian_ml import MondrianForestClassifier
    from river import forest
    ranges = [(0.0, 1.0)] * dims
    f = {}
    for w in windows:
        f[f"MF W={w}"] = (lambda w=w: MondrianForestClassifier(
            n_estimators=TREES, window=w, feature_ranges=ranges, random_state=seed))
    f["MF"] = lambda: MondrianForestClassifier(n_estimators=TREES, feature_ranges=ranges, random_state=seed)
    f["ARF"] = lambda: forest.ARFClassifier(n_models=TREES, seed=seed)
    f["AMF"] = lambda: forest.AMFClassifier(n_estimators=TREES, seed=seed)
    return f


def prequential(model, rows):
    """Test-then-train one row at a time. Returns (ok bool array, wall s, cpu s)."""
    ok = []
    push = ok.append
    gc.collect()
    c0, t0 = time.process_time(), time.perf_counter()
    for x, y in rows:
        push(model.predict_one(x) == y)
        model.learn_one(x, y)
    t1, c1 = time.perf_counter(), time.process_time()
    return np.array(ok, dtype=bool), t1 - t0, c1 - c0


def prequential_batch(make, X, y, chunk):
    """Test-then-train by chunks with the numpy API (predict the chunk, then partial_fit it)."""
    model = make()
    ok = np.zeros(len(y), dtype=bool)
    gc.collect()
    c0, t0 = time.process_time(), time.perf_counter()
    for a in range(0, len(y), chunk):
        b = min(a + chunk, len(y))
        if a > 0:
            ok[a:b] = model.predict(X[a:b]) == y[a:b]
        model.partial_fit(X[a:b], y[a:b])
    t1, c1 = time.perf_counter(), time.process_time()
    return ok, t1 - t0, c1 - c0


# ----------------------------------------------------------------------------- bookkeeping

def git_rev():
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT,
                             capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "crates"], cwd=REPO_ROOT,
                               capture_output=True, text=True).stdout.strip()
        return rev + (" (crates/ modified in the working tree)" if dirty else "")
    except OSError:
        return "unknown"


def versions():
    import matplotlib
    import mondrian_ml
    import river
    core = Path(mondrian_ml._core.__file__)
    built = _dt.datetime.fromtimestamp(core.stat().st_mtime).isoformat(timespec="seconds")
    return {"python": platform.python_version(), "mondrian_ml": getattr(mondrian_ml, "__version__", "?"),
            "mondrian_ml_core_built": built, "river": river.__version__, "numpy": np.__version__,
            "matplotlib": matplotlib.__version__}


def command_line():
    exe = Path(sys.executable)
    try:
        exe = exe.relative_to(REPO_ROOT)
    except ValueError:
        pass
    script = Path(sys.argv[0]).resolve()
    try:
        script = script.relative_to(REPO_ROOT)
    except ValueError:
        pass
    return " ".join([str(exe), str(script)] + [shlex.quote(a) for a in sys.argv[1:]])


def rolling(ok, k):
    c = np.concatenate([[0], np.cumsum(ok, dtype=np.int64)])
    idx = np.arange(1, len(ok) + 1)
    lo = np.maximum(idx - k, 0)
    return (c[idx] - c[lo]) / (idx - lo)


def log(*a):
    print(*a, flush=True)


# ----------------------------------------------------------------------------- one stream

def run_stream(name, k, args):
    rows, drifts, width, desc = draw(name, args.rows, args.seed)
    dims = len(rows[0][0])
    labels = sorted({y for _, y in rows}, key=str)
    factories = model_factories(args.windows, dims, args.seed)
    mf_names = [m for m in factories if m.startswith("MF")]
    heavy = ["ARF", "AMF"] if k % 2 == 0 else ["AMF", "ARF"]
    batch_name = f"MF W={args.windows[0]} batch" if args.chunk > 0 else None
    if batch_name:
        keys = list(rows[0][0])
        X = np.array([[x[c] for c in keys] for x, _ in rows], dtype=np.float64)
        y = np.array([yy for _, yy in rows])
        make_batch = factories[f"MF W={args.windows[0]}"]
    # The MF runs (and the batch variant) in blocks around the river models:
    # MF block, heavy[0], MF block, heavy[1], MF block, ... (order reversed every other block).
    schedule = []
    for r in range(args.mf_reps):
        block = [(m, r) for m in mf_names] + ([(batch_name, r)] if batch_name else [])
        schedule += block if r % 2 == 0 else block[::-1]
        if r < len(heavy):
            schedule.append((heavy[r], 0))
    schedule += [(h, 0) for h in heavy[args.mf_reps:]]
    runs = {}
    oks = {}
    for m, r in schedule:
        if m == batch_name:
            ok, wall, cpu = prequential_batch(make_batch, X, y, args.chunk)
        else:
            ok, wall, cpu = prequential(factories[m](), rows)
        if m in oks and not np.array_equal(oks[m], ok):
            raise RuntimeError(f"{name}/{m}: repetition {r} predicted differently")
        oks.setdefault(m, ok)
        runs.setdefault(m, []).append((wall, cpu))
        log(f"  {name:12s} {m:18s} rep {r}: acc {ok.mean():.4f}  {wall:7.2f} s  "
            f"{len(rows) / wall:9.0f} rows/s")
    n = len(rows)
    tail = n - n // 5
    res = {"description": desc, "rows": n, "features": dims, "classes": len(labels),
           "drift_positions": drifts, "drift_width": width, "models": {}}
    order = mf_names[:-1] + ["MF", "ARF", "AMF"] + ([batch_name] if batch_name else [])
    for m in order:
        walls = [w for w, _ in runs[m]]
        cpus = [c for _, c in runs[m]]
        wall, cpu = st.median(walls), st.median(cpus)
        ok = oks[m]
        res["models"][m] = {
            "accuracy": float(ok.mean()), "accuracy_last20": float(ok[tail:].mean()),
            "wall_seconds": wall, "wall_seconds_all": walls, "cpu_seconds": cpu, "cpu_seconds_all": cpus,
            "us_per_row": 1e6 * wall / n, "cpu_us_per_row": 1e6 * cpu / n, "rows_per_s": n / wall,
            "rolling_every_100": [round(float(v), 4) for v in rolling(ok, args.rolling)[99::100]],
        }
    arf = res["models"]["ARF"]
    for m in res["models"].values():
        m["throughput_vs_arf"] = m["rows_per_s"] / arf["rows_per_s"]
        m["cpu_throughput_vs_arf"] = arf["cpu_seconds"] / m["cpu_seconds"]
    return res


# ----------------------------------------------------------------------------- report

def fmt_rate(v):
    return f"{v:,.0f}"


def write_summary(out, results, meta, args):
    L = ["# Drift: windowed Mondrian forests vs river ARF and AMF, prequential", "",
         "Produced by:", "", "```", meta["command"], "```", "",
         f"- date: started {meta['started']}, finished {meta['finished']} "
         f"({meta['runtime_seconds'] / 60:.1f} min in total)",
         f"- machine: {meta['cores']} logical cores, shared with other work (timings ±20 %); "
         f"load average before/after {meta['load_before']} / {meta['load_after']}",
         f"- software: Python {meta['versions']['python']}, mondrian-ml {meta['versions']['mondrian_ml']} "
         f"(`_core` built {meta['versions']['mondrian_ml_core_built']}), river {meta['versions']['river']}, "
         f"numpy {meta['versions']['numpy']}; repo {meta['git']}",
         "",
         "Protocol (details in `run.py`'s docstring):", "",
         f"- {args.rows:,} rows per stream; prequential (test-then-train) one row at a time, the same loop for every "
         "model: `predict_one(x) == y`, then `learn_one(x, y)` on a dict; the first prediction "
         "(None) counts as an error.",
         "- Every feature mapped to [0, 1] by the range its generator draws it from (fixed by the "
         "generator's definition, not the data), the same dicts for every model.",
         f"- {TREES} trees everywhere, seed {args.seed}. MF = `mondrian_ml.MondrianForestClassifier(n_estimators=10, "
         "feature_ranges=[(0, 1)] * D, random_state=seed)`, `window=W` for the MF W rows. "
         f"Window rule, fixed before any run: W = {' and '.join(map(str, args.windows))} on every stream, both reported; "
         "no W was chosen after seeing results. ARF = `river.forest.ARFClassifier(n_models=10, seed=seed)`, "
         "AMF = `river.forest.AMFClassifier(n_estimators=10, seed=seed)`, defaults otherwise.",
         f"- Accuracy = over all rows; last 20 % = over the last {args.rows // 5:,} rows (after the last "
         "drift point of the streams with drift points; for the continuous-drift streams, the "
         "most drifted part).",
         f"- Time = wall time of the whole predict+learn loop (`time.perf_counter`); ARF and AMF run once, "
         f"each MF model {args.mf_reps} times interleaved with them (median; identical predictions checked); "
         "CPU µs/row from `time.process_time`. × ARF = rows/s ÷ ARF's rows/s on the same stream (wall "
         "time); × ARF (CPU) = the same with CPU time, less sensitive to the other work on the machine.",
    ]
    if args.chunk > 0:
        L.append(f"- `MF W={args.windows[0]} batch` (extra, not the headline): the numpy API, test-then-train by "
                 f"chunks of {args.chunk} rows (`predict` on the chunk, then `partial_fit`); its "
                 "predictions lag up to a chunk behind, so its accuracy is not quite prequential per row.")
    L += ["", "## Results", ""]
    for name, r in results.items():
        drift = (f"drift points {', '.join(f'{p:,}' for p in r['drift_positions'])} (width {r['drift_width']})"
                 if r["drift_positions"] else "continuous drift")
        L += [f"### {name}", "",
              f"{r['description']}; D = {r['features']}, {r['classes']} classes; {drift}.", "",
              "| model | accuracy | last 20 % | µs/row | rows/s | CPU µs/row | × ARF | × ARF (CPU) |",
              "|---|---|---|---|---|---|---|---|"]
        best = max(m["accuracy"] for k, m in r["models"].items() if not k.endswith("batch"))
        best20 = max(m["accuracy_last20"] for k, m in r["models"].items() if not k.endswith("batch"))
        for m, v in r["models"].items():
            acc = f"{v['accuracy']:.4f}"
            acc20 = f"{v['accuracy_last20']:.4f}"
            if not m.endswith("batch"):
                acc = f"**{acc}**" if v["accuracy"] == best else acc
                acc20 = f"**{acc20}**" if v["accuracy_last20"] == best20 else acc20
            L.append(f"| {m} | {acc} | {acc20} | {v['us_per_row']:.0f} | {fmt_rate(v['rows_per_s'])} | "
                     f"{v['cpu_us_per_row']:.0f} | {v['throughput_vs_arf']:.1f} | {v['cpu_throughput_vs_arf']:.1f} |")
        L.append("")
    # Overview
    L += ["## Overview", "",
          "Accuracy (all rows / last 20 %) and throughput ratio to ARF; bold = best of the five per-row models.", "",
          "| stream | " + " | ".join(f"MF W={w}" for w in args.windows) + " | MF | ARF | AMF | "
          + " | ".join(f"MF W={w} × ARF" for w in args.windows) + " |",
          "|---" * (len(args.windows) * 2 + 4) + "|"]
    for name, r in results.items():
        cells = []
        keys = [f"MF W={w}" for w in args.windows] + ["MF", "ARF", "AMF"]
        best = max(r["models"][k]["accuracy"] for k in keys)
        for k in keys:
            v = r["models"][k]
            a = f"{v['accuracy']:.3f}"
            cells.append((f"**{a}**" if v["accuracy"] == best else a) + f" / {v['accuracy_last20']:.3f}")
        ratios = [f"{r['models'][f'MF W={w}']['throughput_vs_arf']:.0f}×" for w in args.windows]
        L.append(f"| {name} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
    L.append("")
    # Automatic facts
    L += ["## Counts", ""]
    for w in args.windows:
        k = f"MF W={w}"
        both = sum(1 for r in results.values()
                   if r["models"][k]["accuracy"] > max(r["models"]["ARF"]["accuracy"], r["models"]["AMF"]["accuracy"]))
        both20 = sum(1 for r in results.values()
                     if r["models"][k]["accuracy_last20"] > max(r["models"]["ARF"]["accuracy_last20"],
                                                                r["models"]["AMF"]["accuracy_last20"]))
        vs_mf = sum(1 for r in results.values() if r["models"][k]["accuracy"] > r["models"]["MF"]["accuracy"])
        ratios = [r["models"][k]["throughput_vs_arf"] for r in results.values()]
        L.append(f"- {k}: ahead of both ARF and AMF in accuracy on {both} of {len(results)} streams "
                 f"({both20} of {len(results)} over the last 20 %); ahead of MF without a window on "
                 f"{vs_mf} of {len(results)}; throughput {min(ratios):.0f}–{max(ratios):.0f}× ARF's "
                 f"(median {st.median(ratios):.0f}×).")
    L.append("")
    out.write_text("\n".join(L))


def plot(out, results, args):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    n = len(results)
    cols = 2 if n > 1 else 1
    nrows = (n + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(7 * cols, 3.3 * nrows), squeeze=False)
    colors = {"ARF": "tab:red", "AMF": "tab:green", "MF": "tab:gray"}
    blues = ["tab:blue", "tab:purple", "tab:cyan", "tab:olive"]
    for i, w in enumerate(args.windows):
        colors[f"MF W={w}"] = blues[i % len(blues)]
    for ax, (name, r) in zip(axes.flat, results.items()):
        for m, v in r["models"].items():
            if m.endswith("batch"):
                continue
            yv = np.array(v["rolling_every_100"])
            xv = np.arange(1, len(yv) + 1) * 100
            ax.plot(xv, yv, label=m, color=colors.get(m), lw=1.1 if m.startswith("MF W") else 0.9,
                    ls="--" if m == "MF" else "-")
        for p in r["drift_positions"]:
            ax.axvline(p, color="k", lw=0.8, ls=":")
            if r["drift_width"] > 100:
                ax.axvspan(p - r["drift_width"] / 2, p + r["drift_width"] / 2, color="k", alpha=0.06)
        ax.set_title(f"{name}" + ("" if r["drift_positions"] else " (continuous drift)"), fontsize=10)
        ax.set_xlabel("row")
        ax.set_ylabel(f"accuracy, last {args.rolling} rows")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=8, loc="lower right")
    fig.suptitle(f"Prequential rolling accuracy ({TREES} trees each; dotted lines: drift points)", fontsize=11)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv=None):
    args = parse_args(argv)
    started = _dt.datetime.now()
    t_start = time.perf_counter()
    load_before = [round(v, 2) for v in os.getloadavg()]
    meta = {"command": command_line(), "started": started.isoformat(timespec="seconds"),
            "git": git_rev(), "versions": versions(), "cores": os.cpu_count(), "load_before": load_before,
            "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}}
    log(f"{meta['command']}\n{meta['versions']}")
    results = {}
    for k, name in enumerate(args.streams):
        t = time.perf_counter()
        results[name] = run_stream(name, k, args)
        log(f"{name}: {time.perf_counter() - t:.0f} s (total {time.perf_counter() - t_start:.0f} s)")
        args.out.mkdir(parents=True, exist_ok=True)  # partial results, in case a later stream fails
        (args.out / "results.partial.json").write_text(json.dumps({"meta": meta, "streams": results}) + "\n")
    meta["finished"] = _dt.datetime.now().isoformat(timespec="seconds")
    meta["runtime_seconds"] = time.perf_counter() - t_start
    meta["load_after"] = [round(v, 2) for v in os.getloadavg()]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps({"meta": meta, "streams": results}, indent=1) + "\n")
    (args.out / "results.partial.json").unlink(missing_ok=True)
    write_summary(args.out / "summary.md", results, meta, args)
    plot(args.out / "accuracy.png", results, args)
    log((args.out / "summary.md").read_text())
    log(f"runtime {meta['runtime_seconds']:.0f} s")


if __name__ == "__main__":
    main()
