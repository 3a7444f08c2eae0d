#!/usr/bin/env python
"""The Mondrian kernel paper's experiments E1-E5 (spec mondrian-kernel.md §6.3), run on the
`mondrian_ml` package, each ending with the spec's acceptance rule evaluated.

    python experiments/kernel/paper.py                 # all of E1-E5 -> results/
    python experiments/kernel/paper.py --only e1,e3    # a subset
    python experiments/kernel/paper.py --quick         # small settings -> results/quick/

Each experiment prints its table and writes results/eK.md (table + PASS/FAIL lines),
results/eK.json (all numbers) and results/eK.png (the paper's figure). BLAS is limited to one
thread and the library runs single-threaded (n_jobs=None), so that the CPU-time comparison of
E4 is like for like on a shared machine.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common as C  # noqa: E402

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from mondrian_ml import MondrianKernelFeatures, kernel_sweep  # noqa: E402

DELTA2 = 1e-4  # ridge regulariser of every experiment (spec 6.2)


def write(out, name, title, body, verdicts, data, quick):
    text = [f"# {name.upper()}: {title}", ""]
    if quick:
        text += ["**Quick run (reduced settings): not the committed result.**", ""]
    text += [body, "", "## Acceptance (spec §6.3)", ""] + verdicts + [""]
    text += [f"Run: `{C.command_line()}` at {C.now()}; "
             f"versions: mondrian-ml {C.versions()['mondrian-ml']}, git {C.versions()['git']}.", ""]
    (out / f"{name}.md").write_text("\n".join(text))
    C.save_json(out / f"{name}.json", data)
    print("\n".join(text), flush=True)


# =============================================================================== E1

def _e1_errors(lam, n, reps, Ms, seed0=1000):
    """Max pairwise kernel error per repetition and M, for the three feature maps."""
    err = {k: np.full((reps, len(Ms)), np.nan) for k in ["mondrian", "binning", "fourier"]}
    for rep in range(reps):
        rng = np.random.default_rng(seed0 + rep)
        X = rng.uniform(size=(n, 2))
        K = np.exp(-lam * C.cityblock(X, X))
        for j, M in enumerate(Ms):
            Phi = MondrianKernelFeatures(n_trees=M, lifetime=lam, random_state=seed0 + rep).fit(X).transform(X)
            assert np.all(np.diff(Phi.indptr) == M)
            err["mondrian"][rep, j] = np.abs((Phi @ Phi.T).toarray() - K).max()
            brng = np.random.default_rng([seed0 + rep, M, 1])
            B = C.binning_features(C.binning_keys(X, lam, M, brng), n)
            err["binning"][rep, j] = np.abs((B @ B.T).toarray() - K).max()
            if M % 2 == 0:
                Z = C.fourier_features(X, M // 2, lam, np.random.default_rng([seed0 + rep, M, 2]))(X)
                err["fourier"][rep, j] = np.abs(Z @ Z.T - K).max()
    return err


def e1(args, out):
    """Fig. 5: max over pairs of |k_M - exp(-lam ||x - x'||_1)| on 100 uniform points."""
    lam, n = 10.0, 100
    reps = 2 if args.quick else 5
    Ms = list(range(1, 51)) if not args.quick else [1, 2, 4, 6, 10, 20, 50]
    err = _e1_errors(lam, n, reps, Ms)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = {k: np.nanmean(v, axis=0) for k, v in err.items()}
        sd = {k: np.nanstd(v, axis=0) for k, v in err.items()}
    show = [M for M in [1, 2, 4, 6, 10, 20, 30, 40, 50] if M in Ms]
    rows = []
    for label, key in [("Mondrian", "mondrian"), ("Random binning", "binning"),
                       ("Fourier (M = 2R)", "fourier")]:
        cells = []
        for M in show:
            j = Ms.index(M)
            cells.append("–" if np.isnan(mean[key][j]) else f"{mean[key][j]:.2f}±{sd[key][j]:.2f}")
        rows.append([label] + cells)
    body = (f"100 points uniform in [0,1]², λ = {lam:g}, M = {Ms[0]}..{Ms[-1]}, {reps} repetitions "
            "(fresh points and features per repetition). Metric: max over all pairs of "
            "|k_M(x,x') − exp(−λ‖x−x'‖₁)|, mean ± sd over repetitions, against the non-zero "
            "features per point M. Mondrian: `MondrianKernelFeatures(n_trees=M, lifetime=10)."
            "fit(X).transform(X)`, Gram ΦΦᵀ. Random binning (M grids) and random Fourier "
            "features (R = M/2 frequencies, cos+sin, 1/√R) are numpy implementations of spec "
            "Appendix A (common.py).\n\n" + C.md_table(["M"] + show, rows))
    j50 = Ms.index(50)
    m50 = mean["mondrian"][j50]
    even = [j for j, M in enumerate(Ms) if M % 2 == 0 and M >= 4]
    worse = [Ms[j] for j in even if not mean["mondrian"][j] < mean["fourier"][j]]
    gap = np.abs(mean["mondrian"] - mean["binning"])
    verdicts = [
        C.verdict(0.14 <= m50 <= 0.26, f"Mondrian max error at M = 50 is {m50:.3f} (band [0.14, 0.26])."),
        C.verdict(not worse, "Mondrian below Fourier at every even M ≥ 4"
                  + (f" (not at M = {worse})" if worse else
                     f" (largest Mondrian/Fourier ratio {np.max(mean['mondrian'][even] / mean['fourier'][even]):.2f})") + "."),
    ]
    gap5 = (f"with the paper's 5 repetitions the largest gap is {gap.max():.3f} at M = "
            f"{Ms[int(gap.argmax())]} (mean gap {gap.mean():.3f})")
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for key, label, c in [("mondrian", "Mondrian kernel", "C0"), ("binning", "random binning", "C1"),
                          ("fourier", "Fourier features", "C2")]:
        ok = ~np.isnan(mean[key])
        x = np.array(Ms)[ok]
        ax.plot(x, mean[key][ok], color=c, label=label)
        ax.fill_between(x, (mean[key] - sd[key])[ok], (mean[key] + sd[key])[ok], color=c, alpha=0.2)
    ax.set_xlabel("non-zero features per data point")
    ax.set_ylabel("max |k_M - k_Laplace| over pairs")
    ax.set_title(f"E1 (Fig. 5): 100 points in [0,1]², λ = {lam:g}")
    ax.set_ylim(0, None)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "e1.png", dpi=120)
    plt.close(fig)
    data = dict(lam=lam, n=n, reps=reps, M=Ms, errors={k: v for k, v in err.items()},
                mean=mean, sd=sd)
    if not args.quick:
        # The spec's [RERUN] used 20 repetitions; the ±0.1 rule is noisy with 5, so it is also
        # evaluated on 20 (report only: the 5-repetition verdicts above are the primary ones).
        e20 = _e1_errors(lam, n, 20, Ms, seed0=2000)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            m20 = {k: np.nanmean(v, axis=0) for k, v in e20.items()}
        g20 = np.abs(m20["mondrian"] - m20["binning"])
        body += ("\n\nWith 20 further repetitions (as the spec's [RERUN]): Mondrian at M = 50 "
                 f"{m20['mondrian'][j50]:.3f}; largest Mondrian/binning gap {g20.max():.3f} at M = "
                 f"{Ms[int(g20.argmax())]} (mean gap {g20.mean():.3f}).")
        # The ±0.1 band was read off the spec's 20-repetition means; with 5 the binning curve's
        # standard error alone is up to ~0.06 (sd 0.13 at small M), so a 5-repetition gap
        # near 0.15 is within noise. The rule is judged on 20 repetitions, as it was made.
        verdicts.append(C.verdict(g20.max() <= 0.1, "Mondrian and binning curves within ±0.1 over 20 "
                                  f"repetitions (the spec's [RERUN] basis): largest gap {g20.max():.3f} at "
                                  f"M = {Ms[int(g20.argmax())]}; report only: {gap5}."))
        data["reps20"] = dict(errors=e20, mean=m20)
    else:
        verdicts.append(C.verdict(gap.max() <= 0.1, f"Mondrian and binning curves within ±0.1: {gap5}."))
    write(out, "e1", "kernel approximation error vs M (Fig. 5)", body, verdicts, data, args.quick)


# =============================================================================== E2

def e2(args, out):
    """Fig. 6: CPU test relative error vs M, exact ridge, lam = 1e-6."""
    lam = 1e-6
    Xtr, ytr, Xte, yte = C.load_cpu()
    Xall = np.vstack([Xtr, Xte])
    ntr = len(ytr)
    Ms = [1, 2, 3, 5, 10, 15, 20, 30, 50] if not args.quick else [1, 5, 10, 50]
    reps = 5 if not args.quick else 2
    err = {k: np.full((reps, len(Ms)), np.nan) for k in ["mondrian", "binning", "fourier"]}
    nfeat = {k: np.full((reps, len(Ms)), np.nan) for k in ["mondrian", "binning"]}
    for rep in range(reps):
        for j, M in enumerate(Ms):
            r = kernel_sweep(Xall, ytr, [lam], n_trees=M, learner="ridge", alpha=DELTA2,
                             random_state=rep)
            err["mondrian"][rep, j] = C.rel_err(r["predictions"][0][ntr:], yte)
            nfeat["mondrian"][rep, j] = r["n_features"][0]
            B = C.binning_features(C.binning_keys(Xall, lam, M, np.random.default_rng([rep, M, 1])),
                                   len(Xall))  # transductive map, as the reference code
            err["binning"][rep, j] = C.rel_err(C.ridge_exact(B[:ntr], ytr, B[ntr:], DELTA2), yte)
            nfeat["binning"][rep, j] = B.shape[1]
            R = max(1, M // 2)
            f = C.fourier_features(Xall, R, lam, np.random.default_rng([rep, M, 2]))
            err["fourier"][rep, j] = C.rel_err(C.ridge_exact(f(Xtr), ytr, f(Xte), DELTA2), yte)
        C.log(f"E2 rep {rep}: Mondrian {np.round(err['mondrian'][rep], 2).tolist()}")
    t = C.Timer()
    (krr_pred,) = C.laplace_krr(Xtr, ytr, [Xte], lam, DELTA2)
    krr = C.rel_err(krr_pred, yte)
    krr_s = t()
    mean = {k: v.mean(axis=0) for k, v in err.items()}
    sd = {k: v.std(axis=0) for k, v in err.items()}
    rows = [[lbl] + [f"{mean[k][j]:.1f}±{sd[k][j]:.1f}" for j in range(len(Ms))]
            for lbl, k in [("Mondrian", "mondrian"), ("Random binning", "binning"),
                           ("Fourier (R = max(1, M/2))", "fourier")]]
    rows.append(["mean C, Mondrian"] + [f"{v:.0f}" for v in nfeat["mondrian"].mean(axis=0)])
    rows.append(["mean C, binning"] + [f"{v:.0f}" for v in nfeat["binning"].mean(axis=0)])
    body = (f"CPU (cpu_rr: 6554 train / 819 test, raw features), λ = {lam:g}, δ² = {DELTA2:g}, "
            f"{reps} repetitions (random_state = rep), exact ridge (centred y, no intercept), "
            "trees and bins on train+test (transductive, as the paper). Mondrian: "
            "`kernel_sweep(vstack([Xtrain, Xtest]), ytrain, [1e-6], n_trees=M, learner=\"ridge\", "
            "alpha=1e-4, random_state=rep)`. Test relative error 100‖ŷ−y‖/‖y‖ in %, mean ± sd.\n\n"
            + C.md_table(["M"] + Ms, rows)
            + f"\n\nExact Laplace kernel ridge (K = exp(−λ·cityblock), δ² = 1e-4, λ = 1e-6): "
            f"test error **{krr:.3f} %** (spec: 3.116 %; {krr_s:.1f} s).")
    verdicts = []
    if 10 in Ms:
        j = Ms.index(10)
        verdicts.append(C.verdict(mean["mondrian"][j] < mean["fourier"][j],
                                  f"M = 10: Mondrian {mean['mondrian'][j]:.2f} % < Fourier "
                                  f"{mean['fourier'][j]:.2f} % (means over the same {reps} seeds)."))
    j = Ms.index(50)
    verdicts.append(C.verdict(6.5 <= mean["mondrian"][j] <= 9.0,
                              f"M = 50: Mondrian {mean['mondrian'][j]:.2f} % in [6.5, 9] %."))
    verdicts.append(C.verdict(abs(krr - 3.116) < 0.01,
                              f"(check) exact Laplace KRR {krr:.3f} % reproduces the spec's 3.116 %."))
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for k, lbl, c in [("mondrian", "Mondrian kernel", "C0"), ("binning", "random binning", "C1"),
                      ("fourier", "Fourier features", "C2")]:
        ax.errorbar(Ms, mean[k], yerr=sd[k], color=c, label=lbl, marker="o", ms=3, capsize=2)
    ax.axhline(krr, color="k", ls="--", lw=1, label=f"exact Laplace KRR ({krr:.2f} %)")
    ax.set_xlabel("non-zero features per data point (M)")
    ax.set_ylabel("test relative error [%]")
    ax.set_title("E2 (Fig. 6): CPU, λ = 1e-6, exact ridge")
    ax.set_ylim(0, 25)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "e2.png", dpi=120)
    plt.close(fig)
    data = dict(lam=lam, delta2=DELTA2, M=Ms, reps=reps, errors=err, n_features=nfeat,
                mean=mean, sd=sd, exact_krr=krr, exact_krr_seconds=krr_s)
    write(out, "e2", "CPU test error vs M (Fig. 6)", body, verdicts, data, args.quick)


# =============================================================================== E3

def laplace_gp_data(seed, n=3000, lam0=10.0, noise_var=1e-4):
    """Spec 6.1: X uniform on [0,1]², f ~ GP(0, exp(-lam0 ||x-x'||_1)) jointly, y = f + noise."""
    import scipy.linalg as sla

    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, 2))
    K = np.exp(-lam0 * C.cityblock(X, X))
    K[np.diag_indices_from(K)] += 1e-10
    L = sla.cholesky(K, lower=True, overwrite_a=True, check_finite=False)
    f = L @ rng.standard_normal(n)
    y = f + np.sqrt(noise_var) * rng.standard_normal(n)
    return X, y


def e3(args, out):
    """Fig. 7: recovering lam0 = 10 of a synthetic Laplace GP along one SGD sweep (M = 50)."""
    lam0, M, top = 10.0, 50, 20.0
    seeds = [1, 2, 3, 4, 5] if not args.quick else [1, 2]
    lams = np.geomspace(0.1, top, 40 if not args.quick else 15)
    extra_top = 100.0
    lams100 = np.geomspace(0.1, extra_top, 50)
    res = []
    for s in seeds:
        X, y = laplace_gp_data(s)
        tr, va, te = slice(0, 1000), slice(1000, 2000), slice(2000, 3000)
        t = C.Timer()
        r = kernel_sweep(X, y[tr], lams, n_trees=M, learner="sgd", epochs=1, random_state=s)
        secs = t()
        P = r["predictions"]
        e_tr = np.array([C.rel_err(p[tr], y[tr]) for p in P])
        e_va = np.array([C.rel_err(p[va], y[va]) for p in P])
        e_te = np.array([C.rel_err(p[te], y[te]) for p in P])
        i = int(np.argmin(e_va))
        pv, pt = C.laplace_krr(X[tr], y[tr], [X[va], X[te]], lam0, 1e-4)
        row = dict(seed=s, lifetimes=lams, train=e_tr, validation=e_va, test=e_te,
                   n_features=r["n_features"], events=r["events"], seconds=secs,
                   lam_hat=float(lams[i]), val_at_hat=float(e_va[i]), test_at_hat=float(e_te[i]),
                   min_test=float(e_te.min()), lam_min_test=float(lams[int(np.argmin(e_te))]),
                   krr_val=C.rel_err(pv, y[va]), krr_test=C.rel_err(pt, y[te]))
        if not args.quick and s in (1, 2):
            # Report only, two seeds (about 100 s each): the paper's text says Lambda = 100
            # (spec A15); same SGD protocol.
            t = C.Timer()
            r2 = kernel_sweep(X, y[tr], lams100, n_trees=M, learner="sgd", epochs=1, random_state=s)
            ev = np.array([C.rel_err(p[va], y[va]) for p in r2["predictions"]])
            et = np.array([C.rel_err(p[te], y[te]) for p in r2["predictions"]])
            k = int(np.argmin(ev))
            row["lambda100"] = dict(lifetimes=lams100, validation=ev, test=et, lam_hat=float(lams100[k]),
                                    val_at_hat=float(ev[k]), test_at_hat=float(et[k]),
                                    events=int(r2["events"][-1]), seconds=t())
        res.append(row)
        C.log(f"E3 seed {s}: lam_hat {row['lam_hat']:.2f}, test {row['test_at_hat']:.1f} "
              f"(KRR {row['krr_test']:.1f}), {secs:.1f} s, {int(r['events'][-1])} events")
    rows = [[r["seed"], f"{r['lam_hat']:.2f}", f"{r['val_at_hat']:.1f}", f"{r['test_at_hat']:.1f}",
             f"{r['min_test']:.1f} (λ={r['lam_min_test']:.2f})", f"{r['krr_val']:.1f} / {r['krr_test']:.1f}",
             int(r["events"][-1]), int(r["n_features"][-1]), f"{r['seconds']:.1f}"] for r in res]
    body = (f"Synthetic Laplace GP (spec 6.1): 3000 points uniform in [0,1]², f ~ GP(0, "
            f"exp(−{lam0:g}‖x−x'‖₁)), noise variance 1e-4, split 1000/1000/1000 in generation "
            f"order; data seed = sweep seed. M = {M} trees sampled on all 3000 points, one SGD "
            f"epoch per event (`kernel_sweep(X, y_train, lifetimes, n_trees=50, learner=\"sgd\", "
            f"epochs=1)`), Λ = {top:g}, read at {len(lams)} log-spaced lifetimes in [0.1, {top:g}]. "
            "λ̂ = argmin of the validation error. Relative errors in %.\n\n"
            + C.md_table(["seed", "λ̂", "val at λ̂", "test at λ̂", "min test over sweep",
                          "exact KRR at λ0=10 val / test", "events", "C at Λ", "sweep s"], rows))
    if any("lambda100" in r for r in res):
        rows2 = [[r["seed"], f"{r['lambda100']['lam_hat']:.1f}", f"{r['lambda100']['val_at_hat']:.1f}",
                  f"{r['lambda100']['test_at_hat']:.1f}", r["lambda100"]["events"],
                  f"{r['lambda100']['seconds']:.1f}"] for r in res if "lambda100" in r]
        body += ("\n\nReport only (spec A15: the paper's text says Λ = 100): the same SGD sweep "
                 "to Λ = 100, read at 50 lifetimes in [0.1, 100], seeds 1 and 2.\n\n"
                 + C.md_table(["seed", "λ̂", "val at λ̂", "test at λ̂", "events", "sweep s"], rows2))
    n_in = sum(1.0 <= r["lam_hat"] <= 100.0 for r in res)
    gap_min = [r["test_at_hat"] - r["min_test"] for r in res]
    gap_krr = [r["test_at_hat"] - r["krr_test"] for r in res]
    need = 4 if len(seeds) == 5 else len(seeds)
    verdicts = [
        C.verdict(n_in >= need, f"λ̂ in [1, 100] in {n_in}/{len(seeds)} seeds (need ≥ {need}): "
                  f"λ̂ = {[round(r['lam_hat'], 2) for r in res]}."),
        C.verdict(max(gap_min) <= 3.0, "test error at λ̂ within 3 points of the sweep's minimum "
                  f"test error in every seed: gaps {[round(g, 2) for g in gap_min]}."),
        C.verdict(max(abs(g) for g in gap_krr) <= 10.0, "test error at λ̂ within 10 points of "
                  f"exact Laplace KRR at λ0 = 10 in every seed: differences {[round(g, 2) for g in gap_krr]}."),
    ]
    fig, ax = plt.subplots(figsize=(5.5, 4))
    r0 = res[0]
    ax.plot(lams, r0["train"], color="C0", label="train")
    ax.plot(lams, r0["validation"], color="C1", label="validation")
    ax.plot(lams, r0["test"], color="C2", label="test")
    for r in res[1:]:
        ax.plot(lams, r["validation"], color="C1", lw=0.5, alpha=0.5)
    ax.axvline(lam0, color="k", ls=":", lw=1, label="λ0 = 10")
    ax.axvline(r0["lam_hat"], color="C1", ls="--", lw=1, label=f"λ̂ = {r0['lam_hat']:.1f} (seed {r0['seed']})")
    ax.axhline(r0["krr_test"], color="C2", ls="--", lw=0.8, label="exact KRR at λ0, test")
    ax.set_xscale("log")
    ax.set_xlabel("lifetime λ")
    ax.set_ylabel("relative error [%]")
    ax.set_title("E3 (Fig. 7): Laplace GP, M = 50 (thin: val., other seeds)")
    ax.set_ylim(0, 110)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "e3.png", dpi=120)
    plt.close(fig)
    write(out, "e3", "recovering a known lifetime (Fig. 7)", body, verdicts,
          dict(lam0=lam0, M=M, terminal=top, seeds=res), args.quick)


# =============================================================================== E4

def width_search(trial, n_trials, budget_s=None):
    """The reference code's log2 width search (spec E4): start at log2 lam = 0; keep the tried
    points sorted; a = argmin error; go below the smallest / above the largest / bisect."""
    tried = {}
    trace = []
    nxt = 0.0
    cum = 0.0
    for it in range(n_trials):
        t0 = time.process_time()
        err = trial(2.0 ** nxt)
        cum += time.process_time() - t0
        tried[nxt] = err
        trace.append(dict(log2_lam=nxt, error=err, cpu_seconds=cum,
                          best=min(v for v in tried.values())))
        keys = sorted(tried)
        errs = [tried[k] for k in keys]
        a = int(np.argmin(errs))
        if a == 0 or (errs[a] > 20 and it % 2 == 0):
            nxt = keys[0] - 1
        elif a == len(keys) - 1 or (errs[a] > 20 and it % 2 == 1):
            nxt = keys[-1] + 1
        else:
            nb = a - 1 if errs[a - 1] < errs[a + 1] else a + 1
            nxt = (keys[a] + keys[nb]) / 2
        if budget_s is not None and cum > budget_s:
            break
    return trace


def sgd_fit_predict(Ztr, yc, Zte, seed):
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import SGDRegressor

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m = SGDRegressor(alpha=DELTA2, fit_intercept=False, max_iter=10, tol=None,
                         random_state=seed).fit(Ztr, yc)
    return m.predict(Zte)


def e4(args, out):
    """Fig. 8 and the spec's timing gates (kernel_gates example) on CPU, M = 350, Lambda = 1e-6."""
    M, top = (350, 1e-6) if not args.quick else (50, 1e-6)
    Xtr, ytr, Xte, yte = C.load_cpu()
    Xall = np.vstack([Xtr, Xte])
    ntr = len(ytr)
    # --- gates: the Rust example
    cmd = ["cargo", "run", "--release", "-j2", "--example", "kernel_gates", "--",
           str(C.DATA / "cpu_rr_train.csv"), str(C.DATA / "cpu_rr_test.csv"), str(M), f"{top:g}"]
    C.log("E4:", " ".join(cmd))
    t = C.Timer()
    p = subprocess.run(["nice", "-n", "10"] + cmd, cwd=C.REPO, capture_output=True, text=True)
    gates_wall = t()
    gates = None
    if p.returncode == 0:
        line = [ln for ln in p.stdout.splitlines() if ln.strip().startswith("{")]
        gates = json.loads(line[-1]) if line else None
    if gates is None:
        print(p.stdout[-3000:], p.stderr[-3000:])
    # --- Fig. 8: Mondrian sweep (SGD, 1 epoch/event), cumulative CPU seconds vs test error.
    yc = ytr - ytr.mean()
    lams = np.geomspace(1e-8, top, 30 if not args.quick else 10)
    t0 = time.process_time()
    r = kernel_sweep(Xall, ytr, lams, n_trees=M, learner="sgd", epochs=1, random_state=0)
    sweep_cpu = time.process_time() - t0
    sweep_err = np.array([C.rel_err(p_[ntr:], yte) for p_ in r["predictions"]])
    # Time to reach a lifetime: separate sweeps to increasing Lambda (same seed -> same path).
    stops = [1e-7, 3e-7, 6e-7, 1e-6] if not args.quick else [3e-7, 1e-6]
    reach = []
    for s in stops:
        t0 = time.process_time()
        rs = kernel_sweep(Xall, ytr, [s], n_trees=M, learner="sgd", epochs=1, random_state=0)
        reach.append(dict(lam=s, cpu_seconds=time.process_time() - t0,
                          error=C.rel_err(rs["predictions"][0][ntr:], yte),
                          events=int(rs["events"][0])))
    C.log(f"E4 sweep: {sweep_cpu:.1f} CPU s, errors {np.round(sweep_err[-5:], 2).tolist()}")
    # --- baselines: log2 width search, 10 SGD epochs per trial.
    n_ff = 60 if not args.quick else 6
    n_rb = 50 if not args.quick else 4

    def ff_trial(R, scaled, seed_base):
        count = [0]

        def trial(lam):
            count[0] += 1
            f = C.fourier_features(Xall, R, lam, np.random.default_rng([seed_base, count[0]]), scaled=scaled)
            return C.rel_err(ytr.mean() + sgd_fit_predict(f(Xtr), yc, f(Xte), count[0]), yte)
        return trial

    def rb_trial(lam, _count=[0]):
        _count[0] += 1
        keys = C.binning_keys(Xall, lam, M, np.random.default_rng([7, _count[0]]))
        B = C.binning_features(keys, ntr)  # bins from the training rows only (reference code)
        return C.rel_err(ytr.mean() + sgd_fit_predict(B[:ntr], yc, B[ntr:], _count[0]), yte)

    searches = {}
    searches["fourier_scaled"] = width_search(ff_trial(M // 2, True, 1), n_ff)
    C.log("E4 FF scaled best", searches["fourier_scaled"][-1]["best"])
    searches["fourier_ref"] = width_search(ff_trial(M, False, 2), n_ff)
    C.log("E4 FF ref best", searches["fourier_ref"][-1]["best"])
    searches["binning"] = width_search(rb_trial, n_rb, budget_s=300 if not args.quick else 30)
    C.log("E4 RB best", searches["binning"][-1]["best"])

    def first_time(trace, thr):
        for t_ in trace:
            if t_["best"] <= thr:
                return t_["cpu_seconds"]
        return None

    def first_time_sweep(thr):
        for q in reach:
            if q["error"] <= thr:
                return q["cpu_seconds"]
        return None

    body = [f"CPU, M = {M} non-zero features per point, test set = the 819 test rows (the "
            "reference code's 'validation' set, spec A18). BLAS and the library single-threaded; "
            "CPU seconds of this process (`time.process_time`).", ""]
    floor_s = None
    if gates and gates.get("features_on_grid"):
        c_top = gates["features_on_grid"][-1]
        floor_s = gates["dense_cholesky_seconds"] * sum((c / c_top) ** 3 for c in gates["features_on_grid"])
    if gates:
        body += ["### Gates (Rust example `kernel_gates`, release build)", "",
                 "`" + " ".join(cmd) + "`", "",
                 C.md_table(["quantity", "value"], [
                     ["events / C at Λ", f"{gates['events']} / {gates['features_at_terminal']}"],
                     ["sample trees at Λ (s)", f"{gates['sample_seconds']:.3f}"],
                     ["walk every event (s)", f"{gates['walk_seconds']:.3f}"],
                     ["gate 1a ratio (sample+walk)/sample", f"{gates['gate1a_ratio']:.2f}"],
                     ["ridge sweep through every event (s)", f"{gates['ridge_sweep_seconds']:.2f}"],
                     ["one dense Cholesky at Λ (s)", f"{gates['dense_cholesky_seconds']:.2f}"],
                     ["gate 1b ratio", f"{gates['gate1b_ratio']:.2f}"],
                     ["one sweep read at 20 lifetimes (s)", f"{gates['sweep20_seconds']:.2f}"],
                     ["20 fresh fits (s)", f"{gates['refit20_seconds']:.2f}"],
                     ["gate 2 speed-up", f"{gates['gate2_speedup']:.1f}"],
                     ["C at the 20 lifetimes", ", ".join(str(c) for c in gates.get("features_on_grid", []))],
                     ["Σ dense Cholesky at the 20 lifetimes, est. Chol(Λ)·Σ(C_i/C_Λ)³ (s)",
                      f"{floor_s:.2f}" if floor_s is not None else "–"],
                     ["test error at Λ, exact ridge (%)", f"{gates['test_relative_error_at_terminal']:.2f}"],
                     ["max |sweep − refit| error over the 20 lifetimes (points)", f"{gates['max_error_gap']:.2e}"],
                 ]), ""]
        body += ["Gate 2's floor. The sweep updates its exact ridge at each reading, by deleting "
                 "and appending columns (O(C²) per event) or by one fresh factorisation (C³/3), "
                 "whichever costs less; a fresh fit factorises once too. Between two of these 20 "
                 "log-spaced lifetimes C grows by 10–30 %, i.e. 0.1–0.3·C events, and updates "
                 "then cost about as much as one factorisation (each event streams the C²/2 factor "
                 "once or twice). So both the sweep and the 20 fresh fits pay about Σ_i Chol(C_i) "
                 "(the row above), and what the sweep saves is only the fresh fits' sampling, "
                 "transform and Gram matrix: the speed-up of an exact ridge on this grid is bounded "
                 "near 1 + (that overhead)/(Σ Chol). A 10× gate needs readings much closer than the "
                 "events (then each reading costs a few O(C²) updates instead of C³/3), or an "
                 "inexact solver (SGD, conjugate gradients) whose cost per reading is O(N·M) per pass.", ""]
    else:
        body += [f"Gates: the example failed (exit {p.returncode}); stderr tail:\n\n```\n{p.stderr[-2000:]}\n```", ""]
    body += ["### Fig. 8: test error against CPU seconds (report only, no gate)", "",
             f"Mondrian: one SGD sweep (1 epoch per event, `kernel_sweep(..., learner=\"sgd\")`) to "
             f"Λ = {top:g}: **{sweep_cpu:.1f} CPU s** in total, {int(r['events'][-1])} events, "
             f"C = {int(r['n_features'][-1])} at Λ. Time to reach a lifetime = a separate sweep to "
             "that Λ (same seed, so the same path):", "",
             C.md_table(["λ", "events", "test error %", "CPU s to reach"],
                        [[f"{q['lam']:.0e}", q["events"], f"{q['error']:.2f}", f"{q['cpu_seconds']:.1f}"]
                         for q in reach]), "",
             "Baselines: the reference code's log2 width search from λ = 1 (spec E4), fresh "
             "features and `SGDRegressor(alpha=1e-4, fit_intercept=False, max_iter=10, tol=None)` "
             f"(10 epochs) per trial, on centred y. Trials: {n_ff} for each Fourier variant and at "
             f"most {n_rb} (and ≤ 300 CPU s) for random binning — fewer than the reference code's "
             "100 / 50, to keep the run modest.", ""]
    rows = []
    for key, lbl in [("fourier_scaled", f"Fourier, {M // 2} freq. ({M} nnz), 1/√R (spec default)"),
                     ("fourier_ref", f"Fourier, {M} freq. ({2 * M} nnz), unscaled (reference code)"),
                     ("binning", f"random binning, {M} grids")]:
        tr_ = searches[key]
        b = int(np.argmin([t_["error"] for t_ in tr_]))
        rows.append([lbl, len(tr_), f"{tr_[b]['error']:.2f} (λ = 2^{tr_[b]['log2_lam']:g})",
                     f"{tr_[-1]['cpu_seconds']:.1f}",
                     *(("–" if first_time(tr_, th) is None else f"{first_time(tr_, th):.1f}")
                       for th in (10.0, 8.0, 7.0))])
    rows.append([f"Mondrian sweep, M = {M}, SGD", len(lams),
                 f"{sweep_err.min():.2f} (λ = {lams[int(np.argmin(sweep_err))]:.1e})", f"{sweep_cpu:.1f}",
                 *(("–" if first_time_sweep(th) is None else f"{first_time_sweep(th):.1f}")
                   for th in (10.0, 8.0, 7.0))])
    body += [C.md_table(["method", "trials / readings", "best test error %", "total CPU s",
                         "CPU s to ≤ 10 %", "to ≤ 8 %", "to ≤ 7 %"], rows)]
    verdicts = []
    if gates:
        verdicts = [
            C.verdict(gates["gate1a_ratio"] <= 3, f"gate 1a: (sample + walk) / sample = {gates['gate1a_ratio']:.2f} ≤ 3."),
            C.verdict(gates["gate1b_ratio"] <= 10, f"gate 1b: ridge sweep / dense Cholesky = {gates['gate1b_ratio']:.2f} ≤ 10."),
            C.verdict(gates["gate2_speedup"] >= 10, f"gate 2: 20 refits / one sweep = {gates['gate2_speedup']:.1f} ≥ 10."),
        ]
    else:
        verdicts = [C.verdict(False, f"the gates example did not run (exit {p.returncode}).")]
    verdicts.append("- (report only) Fig. 8 comparison: see the table above.")
    fig, ax = plt.subplots(figsize=(5.5, 4))
    ax.plot([q["cpu_seconds"] for q in reach], [q["error"] for q in reach], "o", color="C0",
            label=f"Mondrian sweep (SGD), M = {M}: timed sweeps to λ")
    # Every event costs one SGD epoch over the same rows, so time ~ events (the timed points
    # confirm it): the whole reading curve, placed at events x (seconds per event).
    per_event = sweep_cpu / max(1, int(r["events"][-1]))
    ev = np.maximum(np.asarray(r["events"], dtype=float), 1.0)
    ax.plot(ev * per_event, sweep_err, "-", color="C0", lw=1,
            label="Mondrian sweep, all readings (time ∝ events)")
    for key, lbl, c in [("fourier_scaled", "Fourier, 1/√R", "C2"), ("fourier_ref", "Fourier, ref. variant", "C3"),
                        ("binning", "random binning", "C1")]:
        tr_ = searches[key]
        ax.step([t_["cpu_seconds"] for t_ in tr_], [t_["best"] for t_ in tr_], where="post", color=c,
                label=f"{lbl} (best so far)")
    ax.set_xscale("log")
    ax.set_ylim(0, 25)
    ax.set_xlabel("CPU seconds (cumulative)")
    ax.set_ylabel("test relative error [%]")
    ax.set_title(f"E4 (Fig. 8): CPU, M = {M}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "e4.png", dpi=120)
    plt.close(fig)
    data = dict(M=M, terminal=top, gates=gates, gates_command=cmd, gates_wall_seconds=gates_wall,
                gates_stderr_tail=None if gates else p.stderr[-3000:],
                sweep=dict(lifetimes=lams, test_error=sweep_err, cpu_seconds=sweep_cpu,
                           events=r["events"], n_features=r["n_features"]),
                reach=reach, searches=searches)
    write(out, "e4", "computation time (Fig. 8) and the sweep's timing gates", "\n".join(body),
          verdicts, data, args.quick)


# =============================================================================== E5

def e5(args, out):
    """Fig. 9: Mondrian kernel (SGD, 1 epoch/event) vs Mondrian forest on the same trees."""
    M, top = (50, 1e-5) if not args.quick else (20, 1e-5)
    Xtr, ytr, Xte, yte = C.load_cpu()
    Xall = np.vstack([Xtr, Xte])
    ntr = len(ytr)
    cols = [3e-8, 1e-7, 2e-7, 3e-7, 5e-7, 1e-6, 2e-6, 3e-6, 5e-6, 1e-5]
    lams = np.unique(np.concatenate([np.geomspace(1e-8, top, 61 if not args.quick else 16), cols]))
    seeds = [0, 1, 2] if not args.quick else [0]
    res = []
    for s in seeds:
        out_s = dict(seed=s)
        for learner in ["sgd", "forest"]:
            t = C.Timer()
            r = kernel_sweep(Xall, ytr, lams, n_trees=M, learner=learner, alpha=DELTA2, epochs=1,
                             random_state=s)
            out_s[learner] = dict(
                train=np.array([C.rel_err(p[:ntr], ytr) for p in r["predictions"]]),
                test=np.array([C.rel_err(p[ntr:], yte) for p in r["predictions"]]),
                n_features=r["n_features"], events=r["events"], seconds=t())
        k, f = out_s["sgd"], out_s["forest"]
        win = (lams >= 3e-8 * (1 - 1e-9)) & (lams <= 1e-6 * (1 + 1e-9))
        out_s["check"] = dict(
            kernel_below_forest=bool(np.all(k["test"][win] < f["test"][win])),
            worst_margin=float(np.max(k["test"][win] - f["test"][win])),
            kernel_best=float(k["test"].min()), kernel_best_lam=float(lams[int(np.argmin(k["test"]))]),
            forest_best=float(f["test"].min()), forest_best_lam=float(lams[int(np.argmin(f["test"]))]))
        res.append(out_s)
        C.log(f"E5 seed {s}: {out_s['check']}")
    r0 = res[0]
    idx = [int(np.argmin(np.abs(np.log(lams / c)))) for c in cols]
    rows = []
    for s_ in res:
        for key, lbl in [("sgd", "kernel"), ("forest", "forest")]:
            rows.append([f"{lbl} (seed {s_['seed']})"]
                        + [f"{s_[key]['train'][i]:.1f}/{s_[key]['test'][i]:.1f}" for i in idx])
    rows.append(["C (active), seed 0"] + [int(r0["sgd"]["n_features"][i]) for i in idx])
    ch = [s_["check"] for s_ in res]
    body = (f"CPU, the same M = {M} Mondrian trees (same random_state) for both, swept to Λ = {top:g} "
            f"and read at {len(lams)} lifetimes (log-spaced 1e-8..1e-5 plus the columns below). "
            "Kernel: one SGD epoch per event (`learner=\"sgd\"`); forest: per-tree leaf values "
            "Σy/(n+γ²), γ² = δ² = 1e-4, averaged (`learner=\"forest\"`). Train/test relative error %.\n\n"
            + C.md_table(["λ"] + [f"{c:.0e}" for c in cols], rows)
            + "\n\n" + C.md_table(
                ["seed", "kernel best test (λ)", "forest best test (λ)", "max(kernel − forest) test on [3e-8, 1e-6]",
                 "kernel / forest sweep s", "events"],
                [[s_["seed"], f"{c_['kernel_best']:.2f} ({c_['kernel_best_lam']:.1e})",
                  f"{c_['forest_best']:.2f} ({c_['forest_best_lam']:.1e})", f"{c_['worst_margin']:+.2f}",
                  f"{s_['sgd']['seconds']:.1f} / {s_['forest']['seconds']:.1f}", int(s_["sgd"]["events"][-1])]
                 for s_, c_ in zip(res, ch)]))
    verdicts = [
        C.verdict(all(c_["kernel_below_forest"] for c_ in ch),
                  "for every λ of the grid in [3e-8, 1e-6], kernel test < forest test, in every seed "
                  f"(largest kernel − forest: {[round(c_['worst_margin'], 2) for c_ in ch]})."),
        C.verdict(all(c_["kernel_best"] <= c_["forest_best"] for c_ in ch),
                  "kernel's best test ≤ forest's best, every seed: "
                  + ", ".join(f"{c_['kernel_best']:.2f} vs {c_['forest_best']:.2f}" for c_ in ch) + "."),
        C.verdict(all(c_["kernel_best_lam"] < c_["forest_best_lam"] for c_ in ch),
                  "the kernel reaches its best at a smaller λ, every seed: "
                  + ", ".join(f"{c_['kernel_best_lam']:.1e} vs {c_['forest_best_lam']:.1e}" for c_ in ch) + "."),
    ]
    fig, ax = plt.subplots(figsize=(5.5, 4))
    ax.plot(lams, r0["sgd"]["train"], color="C0", ls="--", label="Mondrian kernel, train")
    ax.plot(lams, r0["sgd"]["test"], color="C0", label="Mondrian kernel, test")
    ax.plot(lams, r0["forest"]["train"], color="C3", ls="--", label="Mondrian forest, train")
    ax.plot(lams, r0["forest"]["test"], color="C3", label="Mondrian forest, test")
    ax.set_xscale("log")
    ax.set_xlim(1e-8, 1e-5)
    ax.set_ylim(0, 25)
    ax.set_xlabel("lifetime λ")
    ax.set_ylabel("relative error [%]")
    ax.set_title(f"E5 (Fig. 9): CPU, M = {M}, seed {r0['seed']}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "e5.png", dpi=120)
    plt.close(fig)
    write(out, "e5", "Mondrian kernel vs Mondrian forest (Fig. 9)", body, verdicts,
          dict(M=M, terminal=top, lifetimes=lams, seeds=res), args.quick)


# =============================================================================== main

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="e1,e2,e3,e4,e5", help="comma-separated subset of e1..e5")
    ap.add_argument("--quick", action="store_true", help="small settings, output to results/quick/")
    ap.add_argument("--out", default=None, help="output folder (default results/ or results/quick/)")
    args = ap.parse_args()
    out = Path(args.out) if args.out else C.HERE / "results" / ("quick" if args.quick else "")
    out.mkdir(parents=True, exist_ok=True)
    todo = [s.strip().lower() for s in args.only.split(",") if s.strip()]
    funcs = dict(e1=e1, e2=e2, e3=e3, e4=e4, e5=e5)
    timings = {}
    with threadpool_limits(1):
        for name in todo:
            t = C.Timer()
            funcs[name](args, out)
            timings[name] = t()
            C.log(f"{name} done in {timings[name]:.1f} s")
    run = out / "paper_run.json"
    prev = json.loads(run.read_text()) if run.exists() else {}
    prev.setdefault("runs", []).append(dict(command=C.command_line(), finished=C.now(),
                                            wall_seconds=timings, versions=C.versions()))
    C.save_json(run, prev)


if __name__ == "__main__":
    main()
