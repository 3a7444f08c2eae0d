"""bench.md, the report of bench.py, from its results."""
from __future__ import annotations

import math


# ----------------------------------------------------------------------------- report

def f3(v, fmt="{:.3f}"):
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else fmt.format(v)


def rng_s(r, fmt="{:.3f}"):
    return f"[{f3(r[0], fmt)}–{f3(r[1], fmt)}]" if r and r[0] is not None else ""


def pct(v):
    return "–" if v is None else f"{v:+.1f} %"


def dataset_md(name, D, meta):
    cfg = meta["config"]
    info = D["info"]
    L = [f"## {name}", "",
         f"N_train = {info['n_train']}, N_test = {info['n_test']}, D = {info['n_features']}, "
         f"K = {info['n_classes']}" + (f" (subsampled from {info['n_train_file']}/{info['n_test_file']})"
                                        if info['n_train'] != info['n_train_file'] or info['n_test'] != info['n_test_file'] else "")
         + f"; load average before/after: {D.get('loadavg_before')} / {D.get('loadavg_after')}", ""]
    B = D.get("batch")
    if B:
        S = B["summary"]
        L += [f"### Batch: {cfg['trees']} trees, one thread",
              "",
              f"Medians over {cfg['reps']} interleaved repetitions [min–max]; scikit-learn: median of "
              f"{cfg['sklearn_reps']} fit(s).", "",
              "| method | accuracy | fit s | predict_proba s (test set) | minor page faults in fit |",
              "|---|---|---|---|---|"]
        rel = "heap released before" if cfg.get("release_heap") else "heap NOT released"
        rows = [(f"ours, Python `MondrianForestClassifier.fit` / `.predict_proba` ({rel})", S["python"]),
                ("ours, Python `ClassifierCore` directly (no sklearn validation; " + rel + ")", S["core"]),
                ("ours, Rust: CLI `eval --threads 1` (`train_seconds` / `predict_seconds`; fresh process)", S["cli"]),
                ("ours, Python estimator again right after, heap not released (\"warm heap\")", S["python_warm"])]
        for label, s in rows:
            flt = s.get("fit_faults_median")
            flt = "–" if flt is None else f"{flt:,.0f}" + (" (whole process)" if s is S["cli"] else "")
            L.append(f"| {label} | {'/'.join(f'{a:.4f}' for a in s['accuracies'])} | "
                     f"{f3(s['fit_median'])} {rng_s(s['fit_range'])} | {f3(s['predict_median'])} {rng_s(s['predict_range'])} | {flt} |")
        for key, s in (D.get("sklearn") or {}).items():
            L.append(f"| scikit-learn {s['label']}, n_jobs=1 | {s['accuracy']:.4f} | {f3(s['fit_median'])} | "
                     f"{f3(s['predict_median'])} | |")
        cl = B["runs"]["cli"][0]
        if cl.get("model_bytes"):
            L += ["", f"Forest size (CLI summary): {cl['n_nodes']:,} nodes, {cl['model_bytes'] / 2**20:,.0f} MiB."]
        L.append("")
        O = B["overhead"]
        L += ["#### Python overhead over the Rust library (batch)", "",
              "| | Python s | core s | Rust (CLI) s | **overhead** Python/Rust − 1 (medians) | "
              "median of paired per-rep ratios − 1 | core/Rust − 1 | Python/core − 1 | warm-heap Python/Rust − 1 |",
              "|---|---|---|---|---|---|---|---|---|"]
        for what, label in (("fit", "fit"), ("predict", "predict_proba")):
            o = O[what]
            L.append(f"| {label} | {f3(o['python_median'])} | {f3(o['core_median'])} | {f3(o['rust_median'])} | "
                     f"**{pct(o['overhead_pct_of_medians'])}** | {pct(o['overhead_pct_paired_median'])} | "
                     f"{pct(o['core_overhead_pct_of_medians'])} | {pct(o['wrapper_vs_core_pct_of_medians'])} | "
                     f"{pct(o['warm_overhead_pct_of_medians'])} |")
        c = B["same_model_check"]
        L += ["", ("Same-model check: **passed**, Python (estimator and core) and CLI give the same accuracy "
                   f"({'/'.join(f'{a:.4f}' for a in c['accuracies']['cli'])}) in every run, log losses within "
                   f"{c['log_loss_spread']:.1e}." if c["ok"] else
                   f"Same-model check: **FAILED**: {c}"), ""]
    St = D.get("streams")
    if St:
        S, P, A = St["summary"], St["per_point"], St.get("amf")
        n = info["n_train"]
        T = cfg["stream_trees"]
        L += [f"### Streams: {T} trees, one point at a time", "",
              f"Same stream for all: the training file order (shuffled once with seed {cfg['seed']}). "
              f"Ours: medians over {cfg['reps']} interleaved repetitions [min–max]; AMF: one run"
              + (f", time budget {cfg['amf_budget']:g} s" if cfg.get("amf_budget") else "") + ".", "",
              "| method | points learned | learn s | µs / point | throughput points×trees/s | test accuracy | minor page faults in learning |",
              "|---|---|---|---|---|---|---|"]
        if A:
            L.append(f"| river `AMFClassifier(n_estimators={T})` `learn_one` | {A['n_learned']}/{A['n_train']}"
                     f"{' (budget reached)' if A['capped'] else ''} | {A['learn_seconds']:.2f} | {A['us_per_point']:.1f} | "
                     f"{A['throughput']:.3g} | {A['accuracy']:.4f} | |")
        for key, label in (("python", f"ours, Python `learn_one` (dicts)"),
                           ("core", "ours, Python `ClassifierCore.partial_fit_one` (lists)"),
                           ("cli", "ours, Rust: CLI `eval --online --threads 1`")):
            s = S[key]
            L.append(f"| {label} | {n}/{n} | {f3(s['learn_median'])} {rng_s(s['learn_range'])} | "
                     f"{s['us_per_point']:.1f} | {s['throughput']:.3g} | {'/'.join(f'{a:.4f}' for a in s['accuracies'])} | "
                     f"{'–' if s.get('faults_median') is None else format(s['faults_median'], ',.0f')}"
                     f"{' (whole process)' if key == 'cli' else ''} |")
        L.append("")
        if A and A["throughput"]:
            L.append(f"Throughput ratio, ours (Python `learn_one`) / AMF: **{S['python']['throughput'] / A['throughput']:.0f}×**"
                     f" (ours via the CLI / AMF: {S['cli']['throughput'] / A['throughput']:.0f}×). "
                     f"Test prediction one point at a time (`predict_proba_one`): ours "
                     f"{S['python']['predict_one_us_per_point']:.1f} µs/point, AMF "
                     f"{1e6 * A['predict_one_seconds'] / info['n_test']:.0f} µs/point.")
            L.append("")
        L += ["#### Per-point `learn_one` overhead", "",
              "| Rust `partial_fit` per point (CLI `--online`) | Python `learn_one` | **difference** | "
              "median of paired per-rep differences | split: core `partial_fit_one` on a list − Rust | "
              "split: `learn_one` − core (dict → list, label lookup) |",
              "|---|---|---|---|---|---|",
              f"| {P['rust_us']:.1f} µs | {P['python_us']:.1f} µs | **{P['diff_us']:+.1f} µs ({P['diff_pct']:+.0f} %)** | "
              f"{P['paired_diff_us_median']:+.1f} µs | {P['core_diff_us']:+.1f} µs | {P['learn_one_wrapper_us']:+.1f} µs |", ""]
        c = St["same_model_check"]
        L += [("Streamed-model check: Python `learn_one`, the core and CLI `--online` give the same test accuracy "
               f"({'/'.join(f'{a:.4f}' for a in c['accuracies']['cli'])}); `predict_proba` on the array agrees."
               if c["ok"] else f"Streamed-model check: accuracies differ: {c['accuracies']}, array predict "
               f"{c['accuracy_array_predict']:.4f}"), ""]
    return L


def write_md(results, path):
    meta = results["meta"]
    cfg, m, v = meta["config"], meta["machine"], meta["versions"]
    L = ["# `mondrian_ml` (Python) speed: against the Rust CLI, scikit-learn and river", ""]
    if cfg["quick"]:
        L += ["> **QUICK SMOKE RUN** (subsampled data, 2 repetitions, short AMF budget): not a result.", ""]
    L += ["Produced by:", "", "```", meta["command"], "```", "",
          f"- date: started {meta['started']}, finished {meta.get('finished', '(unfinished)')} "
          f"({meta.get('wall_seconds', float('nan')) / 60:.1f} min)",
          f"- machine: {m.get('cpu')}, {m.get('logical_cores')} logical cores ({m.get('affinity_cores')} usable), "
          f"{m.get('memory')} RAM, {m.get('platform')}; shared with other work, so timings are noisy (±20 %)",
          f"- software: Python {v['python']}, mondrian-ml {v['mondrian-ml']} (`_core` built {v['mondrian_ml_core_mtime']}), "
          f"numpy {v['numpy']}, scikit-learn {v['scikit-learn']}, river {v['river']}, pandas {v['pandas']}; "
          f"CLI `{cfg['mondrian']}` ({v['mondrian_cli']}, built {v['mondrian_cli_mtime']}); repo {meta['git']}",
          "",
          "Protocol:", "",
          "- Features min–max rescaled to [0, 1] with training-set min/max; training rows shuffled once with "
          f"`numpy.random.default_rng({cfg['seed']})`; both written as CSV (9 significant digits) to "
          "`experiments/python_api/.cache/` and read back, so Python and the CLI use identical values in the same order.",
          f"- Seed {cfg['seed']} everywhere (`random_state`, `--seed`, `seed`). All single-threaded "
          "(`n_jobs=1`, `--threads 1`, OMP/BLAS threads 1).",
          "- Heap: " + ("before every timed Python run the process calls `gc.collect()` and glibc `malloc_trim(0)`, "
          "so the new forest's pages are faulted in afresh, as in the CLI's fresh process (a forest that reuses "
          "pages freed by the previous one skips most page faults; the \"warm heap\" row shows that case)."
          if cfg.get("release_heap") else "NOT released between runs (`--no-release-heap`)."),
          "- Python times: `time.perf_counter` around the call in this process, after one untimed warm-up. "
          "Rust times: the CLI's own `train_seconds` / `predict_seconds` (around `fit`/`partial_fit` and "
          "`predict_proba` in the binary; CSV reading excluded).",
          f"- Python, core and CLI runs are interleaved; each repetition rotates their order; {cfg['reps']} repetitions; "
          "medians. Overhead = Python time / Rust time − 1. \"core\" = `mondrian_ml._core.ClassifierCore` called "
          "directly (private; skips sklearn's `validate_data` etc. and `learn_one`'s dict handling): "
          "core/Rust − 1 is the cost of the binding and of running inside the Python process, "
          "Python/core − 1 that of the Python wrapper.",
          "- Streams: ours `MondrianForestClassifier(n_estimators=T, feature_ranges=[(0.0, 1.0)] * D, "
          "random_state=S)`; AMF `river.forest.AMFClassifier(n_estimators=T, seed=S)` with defaults. "
          "Dicts are built before the timed loops. Throughput = points × trees / learn seconds. Test accuracy "
          "from `predict_proba_one` on every test point (both).",
          ""]
    for name, D in results["datasets"].items():
        L += dataset_md(name, D, meta)
    if results.get("warnings"):
        L += ["## Warnings", ""] + [f"- {w}" for w in results["warnings"]] + [""]
    path.write_text("\n".join(L))

