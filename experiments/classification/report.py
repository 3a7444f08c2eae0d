"""summary.md and the two plots (accuracy against the fraction of training data and against
training time) of the classification experiment, from its results: run.py writes them at the
end of a run, and alone with --summarize-only."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from helpers import BASELINES, COLORS, LOG_EPS, PAPER_DEPTH, PAPER_N_TRAIN, SHORT


# ----------------------------------------------------------------------------- summary

def _ms(vals, fmt="{:.4f}"):
    vals = [v for v in vals if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if not vals:
        return "–"
    if len(vals) == 1:
        return fmt.format(vals[0])
    return f"{fmt.format(float(np.mean(vals)))} ± {fmt.format(float(np.std(vals, ddof=1)))}"


def _mean(vals):
    vals = [v for v in vals if v is not None]
    return float(np.mean(vals)) if vals else None


def _ratio(a, b, fmt="{:.2f}"):
    if a is None or b is None or b == 0:
        return "–"
    return fmt.format(a / b) + "×"


def _get(d, *keys):
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def _fmt_s(v):
    if v is None:
        return "–"
    return f"{v:.3g}" if v < 100 else f"{v:.0f}"


def dataset_summary(name: str, D: dict, meta: dict) -> list[str]:
    info = D["info"]
    seeds = D.get("seeds", {})
    S = list(seeds.values())
    L = [f"## {name}", ""]
    L.append(f"N_train = {info['n_train']}, N_test = {info['n_test']}, D = {info['n_features']}, "
             f"K = {info['n_classes']}; seeds: {', '.join(seeds)}"
             + ("; **subsampled (quick/debug run)**" if info.get("subsampled") else ""))
    if name == "satimage":
        L.append("")
        L.append(f"Note: our satimage training file has {info['n_train_file']} rows (LIBSVM tr+val), "
                 f"whereas the paper used the {PAPER_N_TRAIN['satimage']}-row `tr` subset.")
    L.append("")

    def mf(key, *path):
        return [_get(s, "mf", key, "result", *path) for s in S]

    curve_last = [(_get(s, "mf", "curve", "result", "steps") or [{}])[-1] for s in S]
    bl = lambda m, *p: [_get(s, "baselines", "methods", m, *p) for s in S]
    amf = lambda *p: [_get(s, "amf", *p) for s in S]
    amf_capped = any(a for a in amf("capped"))

    # --- accuracy table
    L += ["### Final test accuracy (100 % of the training data)", "",
          "| method | accuracy | log loss | train s | predict s (test set) |",
          "|---|---|---|---|---|"]
    rows = [
        (f"MF, {meta['config']['batches']} mini-batches (`curve`, last step)", [c.get("accuracy") for c in curve_last],
         [c.get("log_loss") for c in curve_last], [c.get("train_seconds") for c in curve_last],
         [c.get("predict_seconds") for c in curve_last]),
        ("MF online, one point at a time (`eval --online`)", mf("eval_online", "accuracy"),
         mf("eval_online", "log_loss"), mf("eval_online", "train_seconds"), mf("eval_online", "predict_seconds")),
        ("MF batch (`eval`, CLI default threads)", mf("eval_batch", "accuracy"), mf("eval_batch", "log_loss"),
         mf("eval_batch", "train_seconds"), mf("eval_batch", "predict_seconds")),
        ("MF batch, 1 thread (`eval --threads 1`)", mf("eval_batch_1thread", "accuracy"),
         mf("eval_batch_1thread", "log_loss"), mf("eval_batch_1thread", "train_seconds"),
         mf("eval_batch_1thread", "predict_seconds")),
    ]
    for m in BASELINES:
        rows.append((BASELINES[m] + ", n_jobs=1", bl(m, "final", "accuracy"), bl(m, "final", "log_loss"),
                     bl(m, "final", "fit_seconds"), bl(m, "final", "predict_seconds")))
    n_amf = _mean(amf("n_learned"))
    amf_label = f"AMF (river, {meta['config']['amf_trees']} trees, defaults)"
    if amf_capped:
        amf_label += f" — **stream capped at {n_amf:.0f} of {info['n_train']} points**"
    rows.append((amf_label, amf("final", "accuracy"), amf("final", "log_loss"), amf("learn_seconds"),
                 amf("predict_seconds_full_test")))
    for lab, a, ll, tr, pr in rows:
        L.append(f"| {lab} | {_ms(a)} | {_ms(ll, '{:.3f}')} | {_ms(tr, '{:.3g}')} | {_ms(pr, '{:.3g}')} |")
    L.append("")

    # --- speed table
    mf_on_tp = [(_get(s, "mf", "eval_online", "result", "n_train") or 0) *
                (_get(s, "mf", "eval_online", "result", "trees") or 0) /
                _get(s, "mf", "eval_online", "result", "train_seconds")
                if _get(s, "mf", "eval_online", "result", "train_seconds") else None for s in S]
    amf_tp = amf("throughput_points_trees_per_s")
    mf_proto = [c.get("train_seconds") for c in curve_last]
    rf_proto = bl("rf", "refit_protocol_total_seconds")
    rf_measured = all(bl("rf", "refit_protocol_total_measured") or [False])
    mf_b1 = mf("eval_batch_1thread", "train_seconds")
    et1_fit = bl("et_1", "final", "fit_seconds")
    mf_p1 = mf("eval_batch_1thread", "predict_seconds")
    et1_pred = bl("et_1", "final", "predict_seconds")
    rf_pred = bl("rf", "final", "predict_seconds")
    nb = meta["config"]["batches"]
    L += ["### Speed", "",
          "| comparison | MF | other | ratio |", "|---|---|---|---|",
          f"| learn throughput, points×trees/s: MF online (`eval --online`) vs AMF"
          f"{' (capped stream)' if amf_capped else ''} | {_ms(mf_on_tp, '{:.3g}')} | {_ms(amf_tp, '{:.3g}')} | "
          f"MF/AMF = {_ratio(_mean(mf_on_tp), _mean(amf_tp))} |",
          f"| {nb}-mini-batch protocol, total training s: MF (`curve`, cumulative) vs RF refitted from scratch "
          f"at all {nb} steps ({'measured' if rf_measured else '**estimated** by interpolating the refit times at the evaluated steps'}) "
          f"| {_ms(mf_proto, '{:.3g}')} | {_ms(rf_proto, '{:.3g}')} | RF/MF = {_ratio(_mean(rf_proto), _mean(mf_proto))} |",
          f"| batch fit on 100 % of the data, 1 thread, s: MF (`eval --threads 1`) vs ERT-1 (n_jobs=1) "
          f"| {_ms(mf_b1, '{:.3g}')} | {_ms(et1_fit, '{:.3g}')} | MF/ERT-1 = {_ratio(_mean(mf_b1), _mean(et1_fit))} |",
          f"| predict the test set, s: MF (`eval --threads 1`) vs ERT-1 `predict_proba` (n_jobs=1) "
          f"| {_ms(mf_p1, '{:.3g}')} | {_ms(et1_pred, '{:.3g}')} | MF/ERT-1 = {_ratio(_mean(mf_p1), _mean(et1_pred))} |",
          f"| predict the test set, s: MF (`eval --threads 1`) vs RF `predict_proba` (n_jobs=1) "
          f"| {_ms(mf_p1, '{:.3g}')} | {_ms(rf_pred, '{:.3g}')} | MF/RF = {_ratio(_mean(mf_p1), _mean(rf_pred))} |",
          ""]
    et_tot = {m: bl(m, "refit_protocol_total_seconds") for m in BASELINES}
    L.append("Refit-protocol totals (sum of the fit times of refitting at every one of the "
             f"{nb} steps): " + "; ".join(
                 f"{SHORT[m]} {_ms(v, '{:.3g}')} s ({'measured' if all(bl(m, 'refit_protocol_total_measured') or [False]) else 'estimated'})"
                 for m, v in et_tot.items()) + ".")
    L.append("")

    # --- tree statistics
    pd_ = PAPER_DEPTH.get(name)
    cr = lambda k: [_get(s, "mf", "curve", "result", k) for s in S]
    dm, dsd = cr("depth_mean"), cr("depth_std")
    L += ["### MF tree statistics (after 100 % of the data, `curve`)", "",
          "| quantity | ours | paper (Table 1) |", "|---|---|---|",
          f"| depth (CLI `depth_mean` ± `depth_std`) | {_fmt_depth(dm, dsd)} | "
          f"{f'{pd_[0]} ± {pd_[1]}' if pd_ else '–'}"
          f"{f' (N_train = {PAPER_N_TRAIN[name]})' if name == 'satimage' else ''} |",
          f"| nodes (whole forest) | {_ms(cr('n_nodes'), '{:.0f}')} | – |",
          f"| bytes per node | {_ms(cr('bytes_per_node'), '{:.1f}')} | – |",
          f"| model size | {_ms([v / 2**20 if v else None for v in cr('model_bytes')], '{:.1f}')} MiB | – |",
          ""]

    # --- accuracy vs fraction
    steps = D.get("_agg", {})
    if steps:
        L += ["### Test accuracy vs fraction of training data", "",
              "| fraction | n seen | " + " | ".join(SHORT[m] for m in steps["methods"]) + " |",
              "|---|---|" + "---|" * len(steps["methods"])]
        for row in steps["table"]:
            L.append(f"| {row['fraction']:.0%} | {row['n_seen']} | " +
                     " | ".join("–" if row.get(m) is None else f"{row[m]:.4f}" for m in steps["methods"]) + " |")
        L.append("")
        if any(s.get("amf") for s in S) and meta["config"]["amf_test_subsample"] < info["n_test"]:
            L.append(f"AMF at intermediate fractions is scored on a fixed random subsample of "
                     f"{meta['config']['amf_test_subsample']} test points; at the end on the full test set.")
            L.append("")

    errs = []
    for sd, s in seeds.items():
        for k, rec in (s.get("mf") or {}).items():
            if rec.get("error"):
                errs.append(f"seed {sd}, MF {k}: {rec['error']} (`{rec['command']}`)")
            if rec.get("warning"):
                errs.append(f"seed {sd}, MF {k}: warning: {rec['warning']}")
        if _get(s, "amf", "capped"):
            errs.append(f"seed {sd}: AMF stream capped at {s['amf']['n_learned']} of {s['amf']['n_train']} "
                        f"points ({s['amf']['cap_reason']}); its final accuracy and throughput refer to that prefix.")
    if errs:
        L += ["Problems:", ""] + [f"- {e}" for e in errs] + [""]
    return L


def _fmt_depth(m, s):
    m = [v for v in m if v is not None]
    s = [v for v in s if v is not None]
    if not m:
        return "–"
    return f"{np.mean(m):.1f} ± {np.mean(s):.1f}" + (f" (mean over {len(m)} seeds)" if len(m) > 1 else "")


def aggregate_curves(D: dict, n_batches: int) -> dict:
    """Mean over seeds of accuracy and cumulative training time at each evaluated step."""
    S = list(D.get("seeds", {}).values())
    curves = {}
    # MF: every step of `curve`
    pts = {}
    for s in S:
        for st in _get(s, "mf", "curve", "result", "steps") or []:
            pts.setdefault(st.get("n_seen"), []).append((st.get("fraction"), st.get("accuracy"),
                                                        st.get("train_seconds")))
    if pts:
        curves["mf"] = dict(est=False, pts=[(n, _mean([v[0] for v in vs]), _mean([v[1] for v in vs]),
                                             _mean([v[2] for v in vs])) for n, vs in sorted(pts.items())])
    for m in BASELINES:
        pts, est = {}, False
        for s in S:
            bm = _get(s, "baselines", "methods", m)
            if not bm:
                continue
            cum = bm["refit_protocol_cumulative_seconds"]
            est |= not bm["refit_protocol_total_measured"]
            for r in bm["records"]:
                pts.setdefault(r["n_seen"], []).append((r["fraction"], r["accuracy"], cum[r["step"] - 1]))
        if pts:
            curves[m] = dict(est=est, pts=[(n, _mean([v[0] for v in vs]), _mean([v[1] for v in vs]),
                                            _mean([v[2] for v in vs])) for n, vs in sorted(pts.items())])
    pts = {}
    for s in S:
        for r in _get(s, "amf", "records") or []:
            pts.setdefault(r["n_seen"], []).append((r["fraction"], r["accuracy"], r["learn_seconds"]))
    if pts:
        curves["amf"] = dict(est=False, pts=[(n, _mean([v[0] for v in vs]), _mean([v[1] for v in vs]),
                                              _mean([v[2] for v in vs])) for n, vs in sorted(pts.items())])
    # table at the fractions where the baselines were evaluated
    sub_ns = sorted({r["n_seen"] for s in S for m in BASELINES
                     for r in (_get(s, "baselines", "methods", m, "records") or []) if r.get("in_subset", True)})
    if not sub_ns and "mf" in curves:
        sub_ns = [p[0] for p in curves["mf"]["pts"]]
    amf_ns = {p[0] for p in curves.get("amf", {}).get("pts", [])}
    all_ns = sorted(set(sub_ns) | amf_ns)
    n_train = D["info"]["n_train"]
    table = []
    for n in all_ns:
        row = dict(n_seen=n, fraction=n / n_train)
        for m, c in curves.items():
            hit = [p for p in c["pts"] if p[0] == n]
            row[m] = hit[0][2] if hit else None
        table.append(row)
    return dict(curves=curves, methods=list(curves), table=table)


def make_plots(results: dict, out: Path) -> list[str]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [d for d in results["datasets"] if results["datasets"][d].get("_agg", {}).get("curves")]
    if not names:
        return []
    files = []
    for kind in ("fraction", "time"):
        fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.6), squeeze=False)
        for ax, name in zip(axes[0], names):
            curves = results["datasets"][name]["_agg"]["curves"]
            for m, c in curves.items():
                pts = c["pts"]
                xs = [p[1] if kind == "fraction" else p[3] for p in pts]
                ys = [p[2] for p in pts]
                keep = [(x, y) for x, y in zip(xs, ys) if x is not None and y is not None and
                        (kind == "fraction" or x > 0)]
                if not keep:
                    continue
                xs, ys = zip(*keep)
                label = SHORT[m]
                style = "-"
                if kind == "time" and c["est"]:
                    style, label = "--", label + " (est. time)"
                marker = None if len(xs) > 20 else "o"
                ax.plot(xs, ys, style, color=COLORS[m], marker=marker, ms=3.5, lw=1.6, label=label)
            ax.set_title(name)
            ax.set_ylabel("test accuracy")
            ax.grid(alpha=0.3)
            if kind == "fraction":
                ax.set_xlabel("fraction of training data")
                ax.set_xlim(0, 1.02)
            else:
                ax.set_xscale("log")
                ax.set_xlabel("cumulative training time (s, log scale)")
            ax.legend(fontsize=7, loc="lower right")
        mode = " (QUICK SMOKE RUN — not a result)" if results["meta"]["config"].get("quick") else ""
        fig.suptitle(("Test accuracy vs fraction of training data" if kind == "fraction" else
                      "Test accuracy vs cumulative training time") + mode, fontsize=10)
        fig.tight_layout()
        fname = "accuracy_vs_fraction.png" if kind == "fraction" else "accuracy_vs_time.png"
        fig.savefig(out / fname, dpi=120)
        plt.close(fig)
        files.append(fname)
    return files


def write_summary(results: dict, out: Path) -> None:
    meta = results["meta"]
    cfg = meta["config"]
    for name, D in results["datasets"].items():
        D["_agg"] = aggregate_curves(D, cfg["batches"])
    plots = make_plots(results, out)
    mach = meta["machine"]
    v = meta["versions"]
    L = ["# Mondrian forest classification experiment",
         "",
         "Reproduction of Lakshminarayanan, Roy & Teh (2014), *Mondrian Forests: Efficient Online Random "
         "Forests*, section 7 and Figure 3.",
         ""]
    if cfg.get("quick"):
        L += ["> **QUICK SMOKE RUN**: subsampled data, few trees and batches. The numbers below only show "
              "that the pipeline works; they are not results.", ""]
    L += ["Produced by:", "", "```", meta["command"], "```", "",
          f"- machine: {mach['cpu']}, {mach['logical_cores']} logical cores (2 cores, shared with other work), "
          f"{mach['memory']} RAM, {mach['platform']}",
          f"- software: Python {v['python']}, numpy {v['numpy']}, scikit-learn {v['scikit-learn']}, "
          f"river {v['river']}, matplotlib {v['matplotlib']}; mondrian binary `{cfg['mondrian']}`"
          f"{' (' + meta['mondrian_version'] + ')' if meta.get('mondrian_version') else ''}; repo {meta.get('git')}",
          f"- started {meta['started']}, finished {meta.get('finished', '(unfinished)')}, "
          f"wall time {meta.get('wall_seconds', float('nan')) / 60:.1f} min",
          "",
          "## Protocol", "",
          f"- Seeds 1..{cfg['seeds']} (numbers are mean ± sample std over seeds when there is more than one; "
          "the paper used 5).",
          f"- The training set is shuffled with the seed and split into {cfg['batches']} mini-batches of "
          f"floor(N/{cfg['batches']}) points, the last taking the remainder. MF shuffles inside the CLI with its own "
          "RNG (`--seed S`); the Python-side methods use `numpy.random.default_rng(S).permutation(N)`: same batch "
          "sizes, different order.",
          f"- MF: `mondrian curve ... --batches {cfg['batches']} --trees {cfg['trees']} --lifetime inf` trains on "
          "batch 1 and extends the forest online with each later batch, scoring the test set after each; "
          "`eval --online` feeds one point at a time through partial_fit; `eval` is a batch fit (CLI default "
          "threads) and `eval --threads 1` the single-thread batch fit"
          + (f"; `curve` was run with `--threads {cfg['curve_threads']}`" if cfg.get("curve_threads") else
             "; `curve` ran with the CLI's default thread count") + ".",
          f"- RF / ERT-sqrt / ERT-1: scikit-learn, {cfg['trees']} trees, default settings otherwise, `n_jobs=1`, "
          "`random_state=S`, refitted from scratch on the cumulative data. Evaluated at "
          f"{', '.join(f'{p:g}' for p in cfg['eval_percents'])} % of the training data; RF additionally at all "
          f"{cfg['batches']} steps on: {', '.join(sorted(cfg['full_rf_refit'])) or 'none'} (there the refit-protocol "
          "total is measured; elsewhere it is estimated by linear interpolation of the measured fit times in n).",
          f"- AMF: `river.forest.AMFClassifier(n_estimators={cfg['amf_trees']}, seed=S)`, default settings, "
          "`learn_one` over the shuffled stream (features as dicts, built outside the timed loop), "
          "`predict_proba_one` on the test set; intermediate accuracies on a fixed random "
          f"{cfg['amf_test_subsample']}-point test subsample, the final one on the full test set. Throughput = "
          "points × trees / cumulative learn_one seconds."
          + (f" Stream time budget {cfg['river_time_budget']:.0f} s." if cfg.get("river_time_budget") else ""),
          "- Features are min–max rescaled to [0, 1] per feature with training-set min/max, as in the paper, for "
          "all methods (the CLI reads the rescaled copies in `experiments/classification/.cache/`)."
          if cfg.get("rescale", True) else "- Features used as stored (no rescaling).",
          "- Times are wall-clock seconds (`time.perf_counter` on the Python side; MF's `train_seconds` / "
          "`predict_seconds` as reported by the CLI). Training time excludes evaluation. Log loss on the Python "
          f"side floors probabilities at {LOG_EPS:g}.",
          "- Accuracy vs time plot: MF and AMF use cumulative training time; the refitted baselines use the "
          "cumulative fit time of refitting at every mini-batch up to that point (dashed = interpolated estimate).",
          "- Data: usps 7291/2007, satimage 4435/2000 (paper: 3104 train), letter 15000/5000, dna 1400/1186 "
          "(`dna_val` unused, as in the paper).",
          ""]
    for name, D in results["datasets"].items():
        L += dataset_summary(name, D, meta)
    if plots:
        L += ["## Plots", ""] + [f"![{p}]({p})" for p in plots] + [""]
    (out / "summary.md").write_text("\n".join(L))
    for D in results["datasets"].values():
        D.pop("_agg", None)
