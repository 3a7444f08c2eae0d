#!/usr/bin/env python
"""Thesis chapter 4 (BART with particle Gibbs), spec `bayesian-trees.md` §5.3-§5.5: Tables
4.1-4.5 on our sampler, and a comparison with the BART software people use (pymc-bart's
particle Gibbs, stochtree's C++ MCMC) on the same data, in one run.

    python experiments/bayes/ch4.py                       # every section, cached runs kept
    python experiments/bayes/ch4.py --only hypercube      # sections: hypercube, california,
                                                          #   regression, peers, diag (comma list)
    python experiments/bayes/ch4.py --only hypercube,california,regression --force
                                                          # rerun our side, keep the peers
    python experiments/bayes/ch4.py --report              # only rewrite tables and plots

Our side runs `crates/mondrian/examples/bart_traces.rs` (one chain through `BartRegressor`,
its traces and σ draws, test metrics of the kept draws, CODA ESS from the library) on CSVs
that `examples/hypercube_csv.rs` writes from `mondrian::bayes::hypercube`. Each finished run
is stored at once in results/ch4.json (key = section|data|tool|sampler|seed), so that an
interrupted run resumes and a rerun of one section leaves the others' results alone.
Writes results/ch4.md, results/ch4.json, results/ch4_*.png and results/targets.md.

Every run is single-threaded (our --threads 1, stochtree num_threads=1, pymc chains=1
cores=1, BLAS one thread), one process at a time.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import importlib.metadata
import json
import math
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import ndtr
from threadpoolctl import threadpool_limits

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DATA = Path(os.environ.get("MONDRIAN_DATA", REPO.parent / "shared" / "data")) / "regression"
RESULTS = HERE / "results"
WORK = HERE / ".cache" / "ch4"
RUNS_JSON = RESULTS / "ch4.json"
# CH4_BIN_DIR: use prebuilt examples from there (e.g. built from a clean snapshot of HEAD
# while others edit the work tree) and skip the build.
BIN = Path(os.environ.get("CH4_BIN_DIR", REPO / "target" / "release" / "examples"))

SAMPLERS = ["cgm", "growprune", "pg"]
SAMPLER_NAME = {"cgm": "CGM", "growprune": "GrowPrune", "pg": "PG"}
HYPER_D = [2, 3, 4, 5, 7]
HYPER_BETA = {2: 1.0, 3: 0.5, 4: 0.4, 5: 0.3, 7: 0.25}  # §4.7 / §5.3
HYPER_SEEDS = [0, 1, 2]
CAL_SUBSETS = [0, 1, 2]
REGRESSION = ["concrete", "kin8nm", "power_plant"]
PEER_HYPER_D = [4, 5, 7]
DIAG_PARTICLES = [2, 10, 100]

# Thesis numbers (§5.4).
T41 = {2: (751.66, 473.57, 259.11), 3: (762.96, 285.2, 666.71), 4: (14.01, 11.76, 686.79),
       5: (2.92, 1.35, 667.27), 7: (1.16, 1.78, 422.96)}
T42 = {2: (157.67, 114.81, 7.69), 3: (93.01, 26.94, 11.025), 4: (0.961, 0.569, 5.394),
       5: (0.130, 0.071, 1.673), 7: (0.027, 0.039, 0.273)}
T44_CAL = (18.956, 34.849, 76.819)
T45_CAL = (1.967e-3, 48.799e-3, 16.743e-3)


# ============================================================================ bookkeeping

def log(*a):
    print(f"[{_dt.datetime.now().strftime('%H:%M:%S')}]", *a, flush=True)


def command_line():
    return " ".join(shlex.quote(a) for a in [Path(sys.executable).name] + sys.argv)


def versions():
    out = {"python": platform.python_version(), "machine": platform.machine(),
           "cpus": os.cpu_count()}
    for pkg in ["numpy", "scipy", "pandas", "matplotlib", "stochtree", "pymc-bart", "pymc",
                "pytensor", "numba"]:
        try:
            out[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            out[pkg] = None
    try:
        out["git"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                                    capture_output=True, text=True).stdout.strip()
        out["git_crates_dirty"] = bool(subprocess.run(
            ["git", "status", "--porcelain", "--", "crates/mondrian/src"], cwd=REPO,
            capture_output=True, text=True).stdout.strip())
    except OSError:
        out["git"] = None
    return out


def to_jsonable(o):
    if isinstance(o, dict):
        return {k: to_jsonable(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [to_jsonable(v) for v in o]
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return to_jsonable(o.tolist())
    if isinstance(o, Path):
        return str(o)
    if isinstance(o, float) and not math.isfinite(o):
        return None
    return o


def load_store():
    if RUNS_JSON.exists():
        return json.loads(RUNS_JSON.read_text())
    return {"meta": {}, "runs": {}}


def save_store(store):
    tmp = RUNS_JSON.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(to_jsonable(store), indent=1, sort_keys=True) + "\n")
    tmp.replace(RUNS_JSON)


def md_table(header, rows):
    lines = ["| " + " | ".join(str(h) for h in header) + " |",
             "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def fmt(v, f="{:.3g}"):
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    return f.format(v)


# ============================================================================ ESS (§5.5)

def effective_size(x):
    """R-CODA ``effectiveSize``: n·var(x)/S₀, S₀ = var.pred/(1 − Σφ)² of the AR(p) fit by
    Yule-Walker with p chosen by AIC among p ≤ min(n − 1, ⌊10 log₁₀ n⌋) (R's ``ar()``),
    var.pred = v_p·n/(n − p − 1); 0 for a chain constant after removing a linear trend.
    The same algorithm as ``mondrian::bayes::effective_size`` (checked against it on every
    hypercube trace, see ch4.json meta.ess_check)."""
    x = np.asarray(x, dtype=np.float64)
    n = len(x)
    if n < 3 or not np.all(np.isfinite(x)):
        return 0.0
    t = np.arange(1, n + 1, dtype=np.float64)
    tc = t - t.mean()
    xc = x - x.mean()
    slope = (tc @ xc) / (tc @ tc)
    if np.sqrt(np.sum((xc - slope * tc) ** 2) / (n - 1)) <= 1.5e-8:
        return 0.0
    order_max = min(n - 1, int(math.floor(10 * math.log10(n))))
    r = np.array([xc[: n - k] @ xc[k:] / n for k in range(order_max + 1)])
    coefs, var = [np.zeros(0)], [r[0]]
    for k in range(1, order_max + 1):
        prev, v = coefs[-1], var[-1]
        kappa = (r[k] - np.dot(prev, r[k - 1:0:-1])) / v
        nxt = np.append(prev - kappa * prev[::-1], kappa)
        coefs.append(nxt)
        var.append(v * (1 - kappa * kappa))
    var = np.array(var)
    aic = n * np.log(var) + 2 * np.arange(order_max + 1)
    p = int(np.argmin(aic))
    var_pred = var[p] * n / (n - (p + 1))
    s0 = var_pred / (1 - coefs[p].sum()) ** 2
    if s0 <= 0:
        return 0.0
    return n * x.var(ddof=1) / s0


# ============================================================================ data

def build():
    for cmd in (["cargo", "build", "--release", "-j", "2", "-p", "mondrian",
                 "--example", "hypercube_csv", "--example", "bart_traces"],
                ["cargo", "build", "--release", "-j", "2", "-p", "mondrian-cli"]):
        log("build:", " ".join(cmd))
        subprocess.run(cmd, cwd=REPO, check=True)


def run_cli(train, test, *, trees, sampler, iters, burn_in, seed, alpha_s, beta_s):
    """The same chain through `mondrian bart eval` (the CLI), to check the example
    against it: same seed, same settings, so the same numbers are expected."""
    cmd = [str(BIN.parent / "mondrian"), "bart", "eval", "--train", str(train), "--test",
           str(test), "--trees", str(trees), "--sampler", sampler, "--particles", "10",
           "--iters", str(iters), "--burn-in", str(burn_in), "--seed", str(seed),
           "--threads", "1", "--alpha-s", str(alpha_s), "--beta-s", str(beta_s), "--json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rec = json.loads(out.strip().splitlines()[-1])
    rec["command"] = " ".join(shlex.quote(c) for c in cmd)
    rec.update(ess_sigma2=float("nan"), seconds=rec["sampler_seconds"])
    return rec


def hypercube_files(d, seed):
    stem = WORK / f"hypercube_D{d}_s{seed}"
    train, test = Path(f"{stem}_train.csv"), Path(f"{stem}_test.csv")
    if not (train.exists() and test.exists()):
        WORK.mkdir(parents=True, exist_ok=True)
        subprocess.run([str(BIN / "hypercube_csv"), str(d), str(seed), str(WORK)], check=True,
                       capture_output=True)
    return train, test


def _write(df, path):
    df.to_csv(path, index=False, float_format=None)


def california_files(k):
    """§5.4 [REC]: one permutation (numpy default_rng(0)) of california_housing.csv; test =
    its first 5000 rows, training set k = the next rows 5000+2000k .. 5000+2000(k+1), so
    the three training sets and the test set are pairwise disjoint."""
    train, test = WORK / f"california_s{k}_train.csv", WORK / "california_test.csv"
    if not (train.exists() and test.exists()):
        WORK.mkdir(parents=True, exist_ok=True)
        df = pd.read_csv(DATA / "california_housing.csv")
        perm = np.random.default_rng(0).permutation(len(df))
        _write(df.iloc[perm[:5000]], test)
        for j in CAL_SUBSETS:
            _write(df.iloc[perm[5000 + 2000 * j: 5000 + 2000 * (j + 1)]],
                   WORK / f"california_s{j}_train.csv")
    return train, test


def regression_files(name):
    """README split 0 (`splits/<name>_test_idx.txt`, line 1: the test rows; train = the
    rest). For kin8nm and power_plant the training set is a random 2000-row subset of split
    0's training rows (numpy default_rng(0)), the size of the California sets (§5.4), which
    keeps 2000 iterations of M = 200 trees affordable for every tool; concrete uses all 927
    training rows."""
    train, test = WORK / f"{name}_train.csv", WORK / f"{name}_test.csv"
    if not (train.exists() and test.exists()):
        WORK.mkdir(parents=True, exist_ok=True)
        df = pd.read_csv(DATA / f"{name}.csv")
        line = (DATA / "splits" / f"{name}_test_idx.txt").read_text().splitlines()[0]
        test_idx = np.array([int(v) for v in line.split()])
        mask = np.ones(len(df), bool)
        mask[test_idx] = False
        train_idx = np.flatnonzero(mask)
        if len(train_idx) > 2000:
            train_idx = np.sort(np.random.default_rng(0).choice(train_idx, 2000, replace=False))
        _write(df.iloc[train_idx], train)
        _write(df.iloc[test_idx], test)
    return train, test


def read_xy(path):
    a = pd.read_csv(path).to_numpy(dtype=np.float64)
    return np.ascontiguousarray(a[:, :-1]), a[:, -1].copy()


# ============================================================================ metrics

def predictive_metrics(f_draws, sigma_draws, y):
    """f_draws: (S, n) posterior draws of f(x); sigma_draws: (S,). RMSE of the posterior
    mean; 90% coverage of the central interval of the predictive mixture
    (1/S) Σ_s N(f_s, σ_s²) (y is inside iff its mixture CDF is in [0.05, 0.95]); NLPD."""
    f = np.asarray(f_draws)
    s = np.asarray(sigma_draws)[:, None]
    z = (y[None, :] - f) / s
    cdf = ndtr(z).mean(axis=0)
    dens = (np.exp(-0.5 * z * z) / (s * math.sqrt(2 * math.pi))).mean(axis=0)
    return dict(rmse=float(np.sqrt(np.mean((f.mean(axis=0) - y) ** 2))),
                coverage_90=float(np.mean((cdf >= 0.05) & (cdf <= 0.95))),
                nlpd=float(-np.mean(np.log(np.maximum(dens, 1e-300)))))


def loglik_trace(f_train, sigma2, y):
    """Training log-likelihood Σ_n log N(y_n | f_s(x_n), σ_s²) of each draw s."""
    r = y[None, :] - f_train
    n = len(y)
    return -0.5 * n * np.log(2 * math.pi * sigma2) - 0.5 * (r * r).sum(axis=1) / sigma2


# ============================================================================ our side

def run_ours(train, test, *, trees, sampler, iters, burn_in, seed, alpha_s=0.95, beta_s=2.0,
             traces=False, particles=10):
    cmd = [str(BIN / "bart_traces"), "--train", str(train), "--test", str(test),
           "--trees", str(trees), "--sampler", sampler, "--particles", str(particles),
           "--iters", str(iters), "--burn-in", str(burn_in), "--seed", str(seed),
           "--alpha-s", str(alpha_s), "--beta-s", str(beta_s),
           # Prediction threads only (the chain is sequential and its seconds are
           # measured inside): 2 for the M = 200 runs, whose 1000 x 5000-row predictions
           # are not timed.
           "--threads", "1" if trees == 1 else "2"]
    if traces:
        cmd += ["--trace-all", "--traces"]
    t0 = time.time()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rec = json.loads(out.strip().splitlines()[-1])
    rec["wall_seconds"] = time.time() - t0
    rec["command"] = " ".join(shlex.quote(c) for c in cmd)
    # The like-for-like columns of the peer comparison: whole-run sampling seconds.
    rec["seconds"] = rec["seconds_total"]
    rec["ess_per_second_sigma2"] = rec["ess_sigma2"] / rec["seconds_total"]
    return rec


# ============================================================================ peers

def run_stochtree(train, test, *, trees, iters, burn_in, seed, alpha_s=0.95, beta_s=2.0):
    """stochtree's BART MCMC from the root (num_gfr = 0: no grow-from-root warm start),
    its defaults otherwise (standardised y, leaf-scale sampling, σ² ~ IG(0, 0))."""
    from stochtree import BARTModel

    X, y = read_xy(train)
    Xt, yt = read_xy(test)
    m = BARTModel()
    t0 = time.time()
    m.sample(X_train=X, y_train=y, num_gfr=0, num_burnin=burn_in, num_mcmc=iters - burn_in,
             general_params={"random_seed": seed + 1, "num_threads": 1},
             mean_forest_params={"num_trees": trees, "alpha": alpha_s, "beta": beta_s})
    seconds = time.time() - t0
    f_test = np.asarray(m.predict(X=Xt, terms="y_hat")).T          # (S, n_test)
    f_train = np.asarray(m.y_hat_train).T                          # (S, n)
    sigma2 = np.asarray(m.global_var_samples, dtype=np.float64)    # (S,)
    return _peer_record("stochtree", f_test, f_train, sigma2, y, yt, seconds,
                        dict(trees=trees, iters=iters, burn_in=burn_in, seed=seed,
                             alpha_s=alpha_s, beta_s=beta_s, num_gfr=0))


def run_pymc_bart(train, test, *, trees, iters, burn_in, seed, alpha_s=0.95, beta_s=2.0):
    """pymc-bart's PGBART (C = 10 particles, its default batch: each step updates 10% of the
    trees) for μ = BART(X), with σ ~ HalfNormal(sd(y)) sampled by NUTS in the same
    compound step; y ~ N(μ, σ²). `iters - burn_in` draws after `burn_in` tuning steps."""
    import logging

    import pymc as pm
    import pymc_bart as pmb

    logging.getLogger("pymc").setLevel(logging.ERROR)
    pmb.pgbart.compute_prior_probability = _capped_prior_probability
    X, y = read_xy(train)
    Xt, yt = read_xy(test)
    t0 = time.time()
    with pm.Model() as model:
        xd = pm.Data("X", X)
        mu = pmb.BART("mu", xd, y, m=trees, alpha=alpha_s, beta=beta_s)
        sigma = pm.HalfNormal("sigma", float(np.std(y)))
        pm.Normal("y", mu, sigma, observed=y, shape=mu.shape)
        idata = pm.sample(draws=iters - burn_in, tune=burn_in, chains=1, cores=1,
                          random_seed=seed, progressbar=False,
                          compute_convergence_checks=False)
    seconds = time.time() - t0
    f_train = idata.posterior["mu"].values[0]                       # (S, n)
    sigma2 = idata.posterior["sigma"].values[0] ** 2                # (S,)
    with model:
        pm.set_data({"X": Xt})
        pp = pm.sample_posterior_predictive(idata, var_names=["mu"], random_seed=seed,
                                            progressbar=False)
    f_test = pp.posterior_predictive["mu"].values[0]                # (S, n_test)
    return _peer_record("pymc-bart", f_test, f_train, sigma2, y, yt, seconds,
                        dict(trees=trees, iters=iters, burn_in=burn_in, seed=seed,
                             alpha_s=alpha_s, beta_s=beta_s, particles=10, batch=[0.1, 0.1]))


def _capped_prior_probability(alpha, beta):
    """pymc-bart's `compute_prior_probability` (the leaf probability 1 − α(1 + d)^−β at each
    depth d, until it reaches 0.9999, then 1), stopped at depth 200. The original loops until
    (1 + d)^β > 9500α: ~10^10 depths for the hypercube's β_s = 0.4 (and never returns in
    practice). Depth 200 is never reached by a tree on ≤ 1280 points with these priors, so
    the prior is unchanged in effect."""
    probs = [0.0]
    depth = 0
    while probs[-1] < 0.9999 and depth < 200:
        probs.append(1 - (alpha * ((1 + depth) ** (-beta))))
        depth += 1
    probs.append(1.0)
    return probs


def _peer_record(tool, f_test, f_train, sigma2, y, yt, seconds, settings):
    rec = dict(tool=tool, **settings)
    rec.update(predictive_metrics(f_test, np.sqrt(sigma2), yt))
    ll = loglik_trace(f_train, sigma2, y)
    rec.update(ess_sigma2=effective_size(sigma2), ess_sigma=effective_size(np.sqrt(sigma2)),
               ess_loglik=effective_size(ll), seconds=seconds, n_train=len(y),
               n_test=len(yt), draws=len(sigma2))
    rec["ess_per_second_sigma2"] = rec["ess_sigma2"] / seconds
    rec["ess_per_second_loglik_total"] = rec["ess_loglik"] / seconds
    return rec


# ============================================================================ jobs

# Peer iteration budgets (total, burn-in). stochtree: the thesis's 2000/1000 everywhere.
# pymc-bart costs ~0.35 s per step at M = 200 on 2000 rows here, so it gets 1000/500 on
# the M = 200 sets (stated in the report); 2000/1000 on hypercube (M = 1).
PYMC_ITERS_M200 = (1000, 500)


def jobs():
    """(section, key, data label, tool, sampler, seed, thunk), in the order they run:
    cheap and most-needed first."""
    out = []

    def ours_h(d, s, samp):
        tr, te = hypercube_files(d, s)
        return run_ours(tr, te, trees=1, sampler=samp, iters=2000, burn_in=1000, seed=s,
                        beta_s=HYPER_BETA[d], traces=True)

    def peer(tool, data, files, trees, seed, beta_s=2.0):
        def thunk():
            tr, te = files()
            if tool == "stochtree":
                return run_stochtree(tr, te, trees=trees, iters=2000, burn_in=1000, seed=seed,
                                     beta_s=beta_s)
            it, bi = (2000, 1000) if trees == 1 else PYMC_ITERS_M200
            return run_pymc_bart(tr, te, trees=trees, iters=it, burn_in=bi, seed=seed,
                                 beta_s=beta_s)
        return ("peers", f"peers|{data}|{tool}|-|{seed}", data, tool, "-", seed, thunk)

    for d in HYPER_D:
        for s in HYPER_SEEDS:
            for samp in SAMPLERS:
                out.append(("hypercube", f"hypercube|D{d}|mondrian|{samp}|{s}", f"hypercube_D{d}",
                            "mondrian", samp, s, lambda d=d, s=s, samp=samp: ours_h(d, s, samp)))
    for d in PEER_HYPER_D:
        for tool in ["stochtree", "pymc-bart"]:
            out.append(peer(tool, f"hypercube_D{d}", lambda d=d: hypercube_files(d, 0), 1, 0,
                            HYPER_BETA[d]))

    def ours_real(files, samp, seed):
        tr, te = files()
        return run_ours(tr, te, trees=200, sampler=samp, iters=2000, burn_in=1000, seed=seed)

    def cal(k):
        for samp in SAMPLERS:
            out.append(("california", f"california|california_s{k}|mondrian|{samp}|0",
                        f"california_s{k}", "mondrian", samp, 0,
                        lambda k=k, samp=samp: ours_real(lambda: california_files(k), samp, 0)))
        for tool in ["stochtree", "pymc-bart"]:
            out.append(peer(tool, f"california_s{k}", lambda k=k: california_files(k), 200, 0))

    cal(0)
    for name in REGRESSION:
        out.append(("regression", f"regression|{name}|mondrian|pg|0", name, "mondrian", "pg", 0,
                    lambda name=name: ours_real(lambda: regression_files(name), "pg", 0)))
        for tool in ["stochtree", "pymc-bart"]:
            out.append(peer(tool, name, lambda name=name: regression_files(name), 200, 0))
    cal(1)
    cal(2)
    # The CLI (`mondrian bart eval`) on one hypercube chain: must equal the example's numbers.
    out.append(("cli", "cli|hypercube_D4|mondrian-cli|pg|0", "hypercube_D4", "mondrian-cli", "pg",
                0, lambda: run_cli(*hypercube_files(4, 0), trees=1, sampler="pg", iters=2000,
                                   burn_in=1000, seed=0, alpha_s=0.95, beta_s=HYPER_BETA[4])))
    # Diagnostic: PG's particles on hypercube D = 4 (does more particles get PG unstuck?).
    for c in DIAG_PARTICLES:
        out.append(("diag", f"diag|hypercube_D4|mondrian|pg_C{c}|0", "hypercube_D4", "mondrian",
                    f"pg_C{c}", 0, lambda c=c: run_ours(
                        *hypercube_files(4, 0), trees=1, sampler="pg", iters=2000, burn_in=1000,
                        seed=0, beta_s=HYPER_BETA[4], particles=c)))
    return out


# ============================================================================ report

def runs_where(store, **kw):
    return [r for r in store["runs"].values() if all(r.get(k) == v for k, v in kw.items())]


def mean_of(rs, field):
    v = [r[field] for r in rs if r.get(field) is not None]
    return float(np.mean(v)) if v else None


def hypercube_section(store):
    lines = ["## Tables 4.1-4.2: hypercube-D (M = 1)", "",
             "Model α_s = 0.95, β_s = 1.0/0.5/0.4/0.3/0.25 for D = 2/3/4/5/7, k = 2, ν = 3, "
             "q = 0.9; 2000 iterations, ESS (CODA) of the training log-likelihood over "
             f"iterations 1001-2000; mean over {len(HYPER_SEEDS)} seeds (data seed = chain "
             "seed). ESS/s divides by the seconds of the kept iterations (the library's "
             "`Traces::ess_per_second`; the thesis does not say which seconds it used). "
             "*thesis* = [T]'s number.", ""]
    rows41, rows42, rows_t, rows_fit = [], [], [], []
    for d in HYPER_D:
        r41, r42, rt, rf = [d], [d], [d], [d]
        for j, samp in enumerate(SAMPLERS):
            rs = runs_where(store, section="hypercube", data=f"hypercube_D{d}", sampler=samp)
            ess = mean_of(rs, "ess_loglik")
            eps = mean_of(rs, "ess_per_second_loglik_kept")
            r41 += [fmt(ess, "{:.1f}"), fmt(T41[d][j], "{:g}")]
            r42 += [fmt(eps, "{:.4g}"), fmt(T42[d][j], "{:g}")]
            rt += [fmt(mean_of(rs, "seconds_total"), "{:.2f}"),
                   fmt(mean_of(rs, "seconds_kept"), "{:.2f}"),
                   fmt(T41[d][j] / T42[d][j], "{:.1f}")]
            rf += [fmt(mean_of(rs, "mean_leaves_per_tree"), "{:.1f}"),
                   fmt(mean_of(rs, "rmse"), "{:.3f}")]
        rows41.append(r41)
        rows42.append(r42)
        rows_t.append(rt)
        rows_fit.append(rf)
    hdr = ["D"] + [x for s in SAMPLERS for x in (SAMPLER_NAME[s], "thesis")]
    lines += ["### Table 4.1: ESS (1000 kept draws)", "", md_table(hdr, rows41), "",
              "### Table 4.2: ESS per second", "", md_table(hdr, rows42), "",
              "### Seconds: ours for all 2000 iterations and for the kept 1000; the "
              "thesis's implied seconds ESS ÷ (ESS/s) (Python; which iterations it timed is "
              "not stated)", "",
              md_table(["D"] + [x for s in SAMPLERS for x in (f"{SAMPLER_NAME[s]} all",
                                                             "kept", "thesis")], rows_t), "",
              "### Posterior shape: mean leaves of the tree over kept draws, test RMSE", "",
              md_table(["D"] + [x for s in SAMPLERS for x in (f"{SAMPLER_NAME[s]} leaves",
                                                             f"{SAMPLER_NAME[s]} RMSE")],
                       rows_fit), "",
              f"True tree: 2^D leaves (4, 8, 16, 32, 128). Trace plots: "
              f"`ch4_hypercube_traces.png` (seed 0, D = 2, 3, 4); ESS/s against D: "
              f"`ch4_hypercube_ess.png`.", ""]
    return lines


def diag_section(store):
    rows = []
    for c in DIAG_PARTICLES:
        for r in runs_where(store, section="diag", sampler=f"pg_C{c}"):
            rows.append([c, fmt(r["mean_leaves_per_tree"], "{:.1f}"),
                         fmt(r["train_mse_kept"], "{:.3f}"), fmt(r["rmse"], "{:.3f}"),
                         fmt(r["ess_loglik"], "{:.1f}"), fmt(r["move_rate_kept"], "{:.2f}"),
                         fmt(r["seconds_total"], "{:.1f}")])
    cgm = runs_where(store, section="hypercube", data="hypercube_D4", sampler="cgm", seed=0)
    for r in cgm:
        rows.append(["CGM (ref.)", fmt(r["mean_leaves_per_tree"], "{:.1f}"),
                     fmt(r["train_mse_kept"], "{:.3f}"), fmt(r["rmse"], "{:.3f}"),
                     fmt(r["ess_loglik"], "{:.1f}"), fmt(r["move_rate_kept"], "{:.2f}"),
                     fmt(r["seconds_total"], "{:.1f}")])
    if not rows:
        return []
    return ["### Diagnostic: PG's particles on hypercube D = 4 (seed 0)", "",
            "Kept-iteration means. The true tree has 16 leaves and a train MSE near the "
            "label noise (10⁻⁴); CGM reaches ~0.003-0.01 (its σ² trace then sits at the "
            "noise floor). PG stays at a train MSE of ~1-2 whatever C, i.e. it mixes fast "
            "(high ESS) around a partition that does not separate the vertices: the high "
            "PG ESS on hypercube D ≥ 4 is not the thesis's 'converged and mixing' ESS.", "",
            "Why, from [pg_mixing.md](pg_mixing.md) (`experiments/bayes/pg_mixing.py`: one "
            "tree's conditional posterior with σ² held fixed, every chain from the single "
            "leaf): the kernel is right and C = 10 is too few for this target. PG started "
            "from CGM's good tree keeps it (π-invariance), and with C = 1000 PG finds trees "
            "of higher posterior than CGM ever visits (σ² = 0.003: log π 154-161 against "
            "CGM's 108-124, with 23 leaves against 43). With C = 10 a fresh particle must "
            "draw a vertex-separating rule at every one of ~15 nodes (at depth 3 only one "
            "dimension of four still separates), so conditional SMC rarely beats the "
            "reference and stalls at a lower mode (σ² = 0.003: 72-82). In the full chain σ² "
            "is then drawn large from the poor fit, which flattens the likelihood and keeps "
            "PG there; CGM's local moves improve the tree a step at a time and σ² follows it "
            "down. The whole sampler passes Geweke's test (spec T13, "
            "`bayes/bart/geweke.rs`) with each kernel.", "",
            md_table(["C", "leaves", "train MSE", "test RMSE", "ESS loglik", "move rate",
                      "seconds"], rows), ""]


def california_section(store):
    lines = ["## Tables 4.3-4.5: California housing (M = 200)", "",
             "Table 4.3 substitute (§5.4 [REC]): `california_housing.csv` (D = 8, not the "
             "RGF version's D = 6), three disjoint random 2000-row training sets, one disjoint "
             "5000-row test set. BART defaults M = 200, α_s = 0.95, β_s = 2, k = 2, ν = 3, "
             "q = 0.9; PG C = 10; 2000 iterations, 1000 burn-in (the full thesis setting). "
             "Means over the three training sets; ESS of the training log-likelihood; ESS/s "
             "over the kept iterations' seconds.", ""]
    rows = []
    for j, samp in enumerate(SAMPLERS):
        rs = [r for r in runs_where(store, section="california", sampler=samp)]
        rows.append([SAMPLER_NAME[samp], len(rs), fmt(mean_of(rs, "ess_loglik"), "{:.1f}"),
                     fmt(T44_CAL[j], "{:g}"),
                     fmt(mean_of(rs, "ess_per_second_loglik_kept"), "{:.4g}"),
                     fmt(T45_CAL[j], "{:.4g}"),
                     fmt(mean_of(rs, "seconds_total"), "{:.0f}"),
                     fmt(mean_of(rs, "rmse"), "{:.4f}"),
                     fmt(mean_of(rs, "coverage_90"), "{:.3f}"),
                     fmt(mean_of(rs, "mean_leaves_per_tree"), "{:.2f}"),
                     fmt(mean_of(rs, "ess_sigma2"), "{:.1f}")])
    lines += [md_table(["sampler", "training sets", "ESS (4.4)", "thesis", "ESS/s (4.5)",
                        "thesis", "seconds (2000 it.)", "test RMSE", "90% cov.",
                        "mean leaves/tree", "ESS σ²"], rows), "",
              "RMSE is in units of $100k (MedHouseVal). The thesis's CaliforniaHouses is "
              "another version of the data (RGF benchmark, D = 6), so only the orderings "
              "and rough magnitudes compare.", ""]
    return lines


PEER_DATA = ([f"hypercube_D{d}" for d in PEER_HYPER_D] + [f"california_s{k}" for k in CAL_SUBSETS]
             + REGRESSION)


def ours_for(store, data):
    if data.startswith("hypercube"):
        return runs_where(store, section="hypercube", data=data, sampler="pg", seed=0)
    if data.startswith("california"):
        return runs_where(store, section="california", data=data, sampler="pg")
    return runs_where(store, section="regression", data=data, sampler="pg")


def peer_table(store):
    rows = []
    for data in PEER_DATA:
        for tool in ["mondrian", "stochtree", "pymc-bart"]:
            rs = ours_for(store, data) if tool == "mondrian" else runs_where(
                store, section="peers", data=data, tool=tool)
            if not rs:
                rows.append([data, "mondrian PG" if tool == "mondrian" else tool]
                            + ["–"] * 9)
                continue
            r = rs[0]
            rows.append([data, "mondrian PG" if tool == "mondrian" else tool,
                         f"{r['iters']}/{r['burn_in']}", fmt(r["rmse"], "{:.4f}"),
                         fmt(r["coverage_90"], "{:.3f}"), fmt(r["nlpd"], "{:.3f}"),
                         fmt(r["ess_sigma2"], "{:.1f}"),
                         fmt(r["ess_per_second_sigma2"], "{:.3g}"),
                         fmt(r["ess_loglik"], "{:.1f}"),
                         fmt(r["ess_per_second_loglik_total"], "{:.3g}"),
                         fmt(r["seconds"], "{:.1f}")])
    return md_table(["data", "tool", "iters/burn-in", "test RMSE", "90% cov.", "NLPD",
                     "ESS σ²", "ESS σ²/s", "ESS loglik", "ESS loglik/s", "seconds"], rows)


def peers_section(store, meta):
    v = meta.get("versions", {})
    return ["## Against the BART software people use", "",
            f"Same data, same number of trees (M = 1 on hypercube with β_s per D, M = 200 "
            f"elsewhere), α_s = 0.95, single thread. Tools: mondrian PG (C = 10, this crate), "
            f"stochtree {v.get('stochtree')} (C++ BART MCMC, grow-from-root warm start off: "
            f"num_gfr = 0), pymc-bart {v.get('pymc-bart')} on pymc {v.get('pymc')} (PGBART, "
            f"10 particles, default batch: 10% of the trees per step; σ by NUTS). "
            f"pymc-bart runs {PYMC_ITERS_M200[0]} iterations with {PYMC_ITERS_M200[1]} tuning "
            f"on the M = 200 sets (about 0.35 s per step on 2000 rows here: 2000 would take "
            f"~12 min per set), the others 2000/1000. Every ESS here is computed by the same "
            f"CODA estimator (ours in Rust, the peers' by this script's Python port of it, which "
            f"agrees with the Rust one, see meta.ess_check) on the kept draws; 'seconds' is "
            f"the whole sampling run (burn-in included, test prediction excluded; pymc's "
            f"includes its model compilation), and ESS/s divides by it for every tool. "
            f"Coverage: share of test targets inside the central 90% interval of the "
            f"posterior predictive mixture (1/S) Σ_s N(f_s(x), σ_s²), noise included. Data: "
            f"hypercube seed 0; California training set k; concrete, kin8nm, power_plant "
            f"README split 0 (kin8nm and power_plant trained on a random 2000-row subset of "
            f"its training rows). Priors differ by tool (stochtree: standardised y, leaf "
            f"scale sampled, σ² ~ IG(0, 0); pymc-bart: σ ~ HalfNormal(sd y); ours: Chipman "
            f"et al.'s ν = 3, q = 0.9, k = 2).", "", peer_table(store), ""]


def targets(store):
    """Targets of the issue, PASS/FAIL each."""
    lines = ["# Targets: thesis chapter 4 (PG-BART) against pymc-bart and stochtree", "",
             "Written by `experiments/bayes/ch4.py` from results/ch4.json; see results/ch4.md "
             "for the settings. ESS/s is the ESS of the σ² trace (kept draws, CODA "
             "estimator) per second of the whole sampling run, the one like-for-like "
             "scalar all three tools expose.", ""]
    rows = []

    def first(rs):
        return rs[0] if rs else None

    groups = [(f"hypercube D={d}", [f"hypercube_D{d}"]) for d in PEER_HYPER_D]
    groups.append(("california (mean of 3 sets)", [f"california_s{k}" for k in CAL_SUBSETS]))
    for label, datas in groups:
        o = [first(ours_for(store, dd)) for dd in datas]
        st = [first(runs_where(store, section="peers", data=dd, tool="stochtree")) for dd in datas]
        pb = [first(runs_where(store, section="peers", data=dd, tool="pymc-bart")) for dd in datas]
        for peer, pr, factor in [("pymc-bart", pb, 10.0), ("stochtree", st, 1.0)]:
            pairs = [(a, b) for a, b in zip(o, pr) if a and b]
            if len(datas) > 1:
                label = f"california (mean of {len(pairs)} of 3 sets)"
            if not pairs:
                rows.append([label, f"PG ESS σ²/s ≥ {factor:g}× {peer}", "–", "–", "NOT RUN"])
                continue
            ours_v = float(np.mean([a["ess_per_second_sigma2"] for a, _ in pairs]))
            peer_v = float(np.mean([b["ess_per_second_sigma2"] for _, b in pairs]))
            ok = ours_v >= factor * peer_v
            rows.append([label, f"PG ESS σ²/s ≥ {factor:g}× {peer}", f"{ours_v:.3g}",
                         f"{peer_v:.3g} (ratio {ours_v / peer_v:.2f})" if peer_v > 0 else
                         f"{peer_v:.3g}", "PASS" if ok else "FAIL"])
    reg = [("california (mean of 3 sets)", [f"california_s{k}" for k in CAL_SUBSETS])] + [
        (n, [n]) for n in REGRESSION]
    for label, datas in reg:
        o = [first(ours_for(store, dd)) for dd in datas]
        st = [first(runs_where(store, section="peers", data=dd, tool="stochtree")) for dd in datas]
        pairs = [(a, b) for a, b in zip(o, st) if a and b]
        if len(datas) > 1:
            label = f"california (mean of {len(pairs)} of 3 sets)"
        if pairs:
            a = float(np.mean([p[0]["rmse"] for p in pairs]))
            b = float(np.mean([p[1]["rmse"] for p in pairs]))
            rows.append([label, "PG test RMSE ≤ 1.05 × stochtree", f"{a:.4f}",
                         f"{b:.4f} (ratio {a / b:.3f})", "PASS" if a <= 1.05 * b else "FAIL"])
        else:
            rows.append([label, "PG test RMSE ≤ 1.05 × stochtree", "–", "–", "NOT RUN"])
        oo = [x for x in o if x]
        if oo:
            c = float(np.mean([x["coverage_90"] for x in oo]))
            rows.append([label, "PG 90% coverage in [0.85, 0.95]", f"{c:.3f}", "–",
                         "PASS" if 0.85 <= c <= 0.95 else "FAIL"])
        else:
            rows.append([label, "PG 90% coverage in [0.85, 0.95]", "–", "–", "NOT RUN"])
    lines += [md_table(["data", "target", "ours", "peer", "verdict"], rows), ""]
    pg_secs = [r["seconds"] for k in CAL_SUBSETS
               for r in ours_for(store, f"california_s{k}")[:1]]
    pg_span = f"{min(pg_secs):.0f}-{max(pg_secs):.0f}" if pg_secs else "–"
    n_pass = sum(r[-1] == "PASS" for r in rows)
    n_fail = sum(r[-1] == "FAIL" for r in rows)
    lines += [f"{n_pass} PASS, {n_fail} FAIL, {len(rows) - n_pass - n_fail} not run.", "",
              "Caveats, part of the verdicts:",
              "- On hypercube D ≥ 4 our PG mixes around a partition that does not separate "
              "the vertices (train MSE 1-2, test RMSE above stochtree's; see the diagnostic "
              "in ch4.md). Its σ² ESS there is fast mixing of the wrong posterior region, so "
              "the hypercube ESS/s PASS lines are PASSes on the stated metric "
              "only. With σ² fixed, C = 1000 particles find better trees than CGM and "
              "C = 10 stalls (results/pg_mixing.md): a matter of particles, not of a "
              "kernel bug (Geweke's test passes).",
              "- The machine is shared (2 cores, load 2-7 from other jobs, changing during "
              "the run); ESS/s ratios between tools run minutes apart carry that noise "
              f"(our PG took {pg_span} s for the same work on the three California sets).",
              "- pymc-bart ran 1000 iterations (500 tuning) on the M = 200 sets, the others "
              "2000 (1000 burn-in); ESS/s normalises for that only roughly.", ""]
    return lines


PLOTTED = [f"hypercube|D{d}|mondrian|{s}|0" for d in (2, 3, 4) for s in SAMPLERS]


def trace_file(key):
    return WORK / ("traces_" + key.replace("|", "_") + ".json")


def plots(store):
    traces_by_key = {k: json.loads(trace_file(k).read_text()) for k in PLOTTED
                     if trace_file(k).exists()}
    # ESS/s against D, ours and the thesis.
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for j, samp in enumerate(SAMPLERS):
        ess = [mean_of(runs_where(store, section="hypercube", data=f"hypercube_D{d}",
                                  sampler=samp), "ess_loglik") for d in HYPER_D]
        eps = [mean_of(runs_where(store, section="hypercube", data=f"hypercube_D{d}",
                                  sampler=samp), "ess_per_second_loglik_kept") for d in HYPER_D]
        c = f"C{j}"
        axes[0].plot(HYPER_D, [e if e else np.nan for e in ess], "o-", color=c,
                     label=f"{SAMPLER_NAME[samp]} (ours)")
        axes[0].plot(HYPER_D, [T41[d][j] for d in HYPER_D], "x--", color=c,
                     label=f"{SAMPLER_NAME[samp]} (thesis)")
        axes[1].plot(HYPER_D, [e if e else np.nan for e in eps], "o-", color=c)
        axes[1].plot(HYPER_D, [T42[d][j] for d in HYPER_D], "x--", color=c)
    for ax, t in zip(axes, ["ESS of the log-likelihood (Table 4.1)", "ESS per second (Table 4.2)"]):
        ax.set_yscale("log")
        ax.set_xlabel("D")
        ax.set_title(t)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(RESULTS / "ch4_hypercube_ess.png", dpi=110)
    plt.close(fig)

    if traces_by_key:
        fig, axes = plt.subplots(3, 3, figsize=(13, 10), sharex=True)
        for i, d in enumerate([2, 3, 4]):
            for j, samp in enumerate(SAMPLERS):
                tr = traces_by_key.get(f"hypercube|D{d}|mondrian|{samp}|0")
                if tr is None:
                    continue
                it = np.arange(1, len(tr["total_leaves"]) + 1)
                axes[i, 0].plot(it, tr["total_leaves"], lw=0.6, color=f"C{j}",
                                label=SAMPLER_NAME[samp])
                axes[i, 1].plot(it, tr["train_mse"], lw=0.6, color=f"C{j}")
                axes[i, 2].plot(it, tr["test_mse"], lw=0.6, color=f"C{j}")
            axes[i, 0].axhline(2 ** d, color="k", ls=":", lw=0.8)
            axes[i, 0].set_ylabel(f"D = {d}")
            axes[i, 1].set_yscale("log")
            axes[i, 2].set_yscale("log")
        axes[0, 0].set_title("leaves (dotted: 2^D)")
        axes[0, 1].set_title("train MSE")
        axes[0, 2].set_title("test MSE")
        axes[0, 0].legend()
        for ax in axes[-1]:
            ax.set_xlabel("iteration")
        fig.suptitle("hypercube-D, M = 1, seed 0 (Figs. 4.2-4.4)")
        fig.tight_layout()
        fig.savefig(RESULTS / "ch4_hypercube_traces.png", dpi=100)
        plt.close(fig)


def report(store):
    meta = store.get("meta", {})
    lines = ["# Bayesian decision trees, thesis chapter 4: BART with particle Gibbs", "",
             "Spec `bayesian-trees.md` §4.7, §5.3-§5.5. Generated by `experiments/bayes/ch4.py`"
             " from results/ch4.json.", "",
             f"Runs: {len(store['runs'])}; last command: `{meta.get('command')}` "
             f"(finished {meta.get('finished')}, {meta.get('elapsed_seconds', 0):.0f} s); "
             f"versions: {json.dumps(meta.get('versions', {}))}.", ""]
    if meta.get("ess_check"):
        lines += [f"ESS check: the script's Python CODA estimator against the library's on "
                  f"{meta['ess_check']['n']} log-likelihood traces: max relative difference "
                  f"{meta['ess_check']['max_rel_diff']:.2e}.", ""]
    cli = runs_where(store, section="cli")
    ex = runs_where(store, section="hypercube", data="hypercube_D4", sampler="pg", seed=0)
    if cli and ex:
        c, e = cli[0], ex[0]
        lines += [f"CLI check: `mondrian bart eval` on hypercube D = 4, PG, seed 0 gives RMSE "
                  f"{c['rmse']:.6f}, 90% coverage {c['coverage_90']:.4f}, ESS {c['ess']:.4f}; "
                  f"the example behind these tables gives {e['rmse']:.6f}, "
                  f"{e['coverage_90']:.4f}, {e['ess_loglik']:.4f} (the same chain).", ""]
    lines += hypercube_section(store) + diag_section(store) + california_section(store) + peers_section(store, meta)
    (RESULTS / "ch4.md").write_text("\n".join(lines) + "\n")
    (RESULTS / "targets.md").write_text("\n".join(targets(store)) + "\n")
    log("wrote", RESULTS / "ch4.md", RESULTS / "targets.md")


# ============================================================================ main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="hypercube,california,regression,peers,diag,cli",
                    help="comma list of sections to run")
    ap.add_argument("--force", action="store_true", help="rerun cached runs of these sections")
    ap.add_argument("--tools", default=None,
                    help="comma list of tools to run (mondrian, stochtree, pymc-bart, "
                         "mondrian-cli); default all")
    ap.add_argument("--report", action="store_true", help="only rewrite tables and plots")
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--max-minutes", type=float, default=None,
                    help="start no new run after this many minutes")
    args = ap.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    store = load_store()
    t_start = time.time()
    if not args.report:
        if not (args.no_build or os.environ.get("CH4_BIN_DIR")):
            build()
        sections = set(args.only.split(","))
        store["meta"]["versions"] = versions()
        store["meta"]["bin_dir"] = str(BIN)
        tools = set(args.tools.split(",")) if args.tools else None
        todo = [j for j in jobs() if j[0] in sections and (tools is None or j[3] in tools)]
        for section, key, data, tool, samp, seed, thunk in todo:
            if key in store["runs"] and not args.force:
                continue
            if (args.max_minutes is not None
                    and time.time() - t_start > 60 * args.max_minutes):
                log("time limit: not starting", key)
                continue
            log("run", key)
            load = os.getloadavg()[0]
            with threadpool_limits(1):
                rec = thunk()
            # The machine is shared: the 1-minute load average before and after the run.
            rec["load_before_after"] = [load, os.getloadavg()[0]]
            rec.update(section=section, data=data, tool=tool, sampler=samp, seed=seed,
                       finished=_dt.datetime.now().isoformat(timespec="seconds"))
            tr = rec.pop("traces", None)
            if tr is not None:
                kept = np.asarray(tr["log_likelihood"])[rec["burn_in"]:]
                rec["ess_loglik_python"] = effective_size(kept)
                if key in PLOTTED:
                    WORK.mkdir(parents=True, exist_ok=True)
                    trace_file(key).write_text(json.dumps(tr))
            # Re-read before writing, so that a concurrent or earlier process's runs stay.
            meta = store["meta"]
            store = load_store()
            store["meta"].update(meta)
            store["runs"][key] = rec
            save_store(store)
            log(f"  rmse {rec['rmse']:.4f} cov {rec['coverage_90']:.3f} "
                f"ess σ² {rec['ess_sigma2']:.1f} ess ll {rec.get('ess_loglik', 0) or 0:.1f} "
                f"s {rec['seconds']:.1f}")
        store["meta"].update(command=command_line(),
                             finished=_dt.datetime.now().isoformat(timespec="seconds"),
                             elapsed_seconds=time.time() - t_start)
    checks = [(r["ess_loglik"], r["ess_loglik_python"]) for r in store["runs"].values()
              if "ess_loglik_python" in r]
    if checks:
        store["meta"]["ess_check"] = dict(
            n=len(checks), max_rel_diff=max(abs(a - b) / max(abs(a), 1e-12) for a, b in checks))
    save_store(store)
    plots(store)
    report(store)


if __name__ == "__main__":
    main()
