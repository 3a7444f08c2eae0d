#!/usr/bin/env python3
"""Bayesian optimisation with a Mondrian forest surrogate (MF-UCB) versus random search, on
Branin (D = 2) and Hartmann-6 (D = 6).

Follows Lakshminarayanan's PhD thesis, §6.5.3 / Table 6.3, as specified in
/work/shared/spec/mf-regression.md §6.1 ("§6.5.3 Bayesian optimisation"), §6.4 and §7 A14:

  * surrogate: mondrian_ml.MondrianForestRegressor, M = 10 trees, min_samples_split = 2,
    mode "fast" (online updates with the fast approximation, spec §2.6), trained online with
    one partial_fit call per evaluation; inputs scaled to [0,1]^D;
  * acquisition: UCB = predictive mean + 1 x predictive standard deviation, of -f
    (the objectives are maximised as -f);
  * candidates: a random "grid" of uniform points in the box; the next evaluation is the
    UCB maximiser among the candidates not yet evaluated, ties broken uniformly at random;
  * 2 initial evaluations drawn uniformly from the grid; 200 evaluations in total;
  * random search: uniform picks without replacement from the same grid, same budget. Run r
    of random search shares its first two picks with run r of MF-UCB (paired design);
  * repeats: n_grids random grids x n_runs runs per grid (thesis: 3 x 5 = 15 repeats of
    250,000-point grids); mean +/- standard deviation over repeats is reported.

Outputs under --out: results.json (raw traces and summaries), summary.md, best_value.png
(best value found vs number of evaluations, mean +/- sd band) and regret.png (log10 regret
to the grid maximum, median and inter-quartile band). `--summarize-only` rebuilds the last
three from results.json.

Full run (from the repository root):
  target/pyenv/bin/python experiments/bayesopt/run.py
Smoke test (writes to a temporary directory unless --out is given):
  target/pyenv/bin/python experiments/bayesopt/run.py --quick
"""
from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import datetime as _dt
import importlib
import importlib.metadata
import importlib.util
import json
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
DEFAULT_OUT = HERE / "results"
DEFAULT_QUICK_OUT = Path(tempfile.gettempdir()) / "mondrian-bayesopt-quick"

# --------------------------------------------------------------------------- objectives
# Both are minimisation problems in their usual form; BO maximises g = -f.

BRANIN_LOW = np.array([-5.0, 0.0])
BRANIN_HIGH = np.array([10.0, 15.0])


def branin(x):
    """Branin on x1 in [-5, 10], x2 in [0, 15] (original units), rows of x. Min 0.397887."""
    x1, x2 = x[:, 0], x[:, 1]
    b = 5.1 / (4.0 * np.pi**2)
    c = 5.0 / np.pi
    t = 1.0 / (8.0 * np.pi)
    return (x2 - b * x1**2 + c * x1 - 6.0) ** 2 + 10.0 * (1.0 - t) * np.cos(x1) + 10.0


H6_C = np.array([1.0, 1.2, 3.0, 3.2])
H6_A = np.array(
    [
        [10.0, 3.0, 17.0, 3.5, 1.7, 8.0],
        [0.05, 10.0, 17.0, 0.1, 8.0, 14.0],
        [3.0, 3.5, 1.7, 10.0, 17.0, 8.0],
        [17.0, 8.0, 0.05, 10.0, 0.1, 14.0],
    ]
)
H6_P = np.array(
    [
        [0.1312, 0.1696, 0.5569, 0.0124, 0.8283, 0.5886],
        [0.2329, 0.4135, 0.8307, 0.3736, 0.1004, 0.9991],
        [0.2348, 0.1451, 0.3522, 0.2883, 0.3047, 0.6650],
        [0.4047, 0.8828, 0.8732, 0.5743, 0.1091, 0.0381],
    ]
)


def hartmann6(x):
    """Hartmann-6 on [0,1]^6, rows of x. Min -3.32237."""
    out = np.zeros(x.shape[0])
    for i in range(4):  # loop keeps memory at O(n) for large grids
        out -= H6_C[i] * np.exp(-((x - H6_P[i]) ** 2 * H6_A[i]).sum(axis=1))
    return out


def branin_unit(u):
    return branin(BRANIN_LOW + u * (BRANIN_HIGH - BRANIN_LOW))


FUNCTIONS = {
    "branin": {
        "label": "Branin",
        "dim": 2,
        "f_unit": branin_unit,  # takes points of [0,1]^2
        "f_min": 0.397887,
        "x_min": [[-np.pi, 12.275], [np.pi, 2.275], [9.42478, 2.475]],
        "thesis": {"oracle": -0.398, "MF": (-0.400, 0.005), "SMAC": (-0.655, 0.27),
                   "oracle_str": "−0.398", "MF_str": "−0.400 ± 0.005", "SMAC_str": "−0.655 ± 0.27"},
    },
    "hartmann6": {
        "label": "Hartmann-6",
        "dim": 6,
        "f_unit": hartmann6,
        "f_min": -3.32237,
        "x_min": [[0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573]],
        "thesis": {"oracle": 3.322, "MF": (3.247, 0.109), "SMAC": (2.977, 0.11),
                   "oracle_str": "3.322", "MF_str": "3.247 ± 0.109", "SMAC_str": "2.977 ± 0.11"},
    },
}


def check_objectives():
    """The known minima, to catch typos in the constants."""
    xb = np.array(FUNCTIONS["branin"]["x_min"])
    assert np.allclose(branin(xb), 0.397887, atol=1e-5), branin(xb)
    xh = np.array(FUNCTIONS["hartmann6"]["x_min"])
    assert abs(hartmann6(xh)[0] + 3.32237) < 1e-4, hartmann6(xh)


# --------------------------------------------------------------------------- BO loops


def best_so_far(values):
    return np.maximum.accumulate(np.asarray(values, dtype=float))


def run_mf_ucb(U, g, n_evals, n_init, rng, forest_seed, mode, n_trees, mss, kappa, n_jobs):
    """One MF-UCB run on candidate grid U (N x D in [0,1]^D) with objective values g (= -f)."""
    from mondrian_ml import MondrianForestRegressor

    N, D = U.shape
    reg = MondrianForestRegressor(
        n_estimators=n_trees,
        min_samples_split=mss,
        mode=mode,
        feature_ranges=[(0.0, 1.0)] * D,
        n_jobs=n_jobs,
        random_state=forest_seed,
    )
    chosen = [int(i) for i in rng.choice(N, size=n_init, replace=False)]
    evaluated = np.zeros(N, dtype=bool)
    evaluated[chosen] = True
    reg.partial_fit(U[chosen], g[chosen])
    t_predict = t_update = 0.0
    n_ties = 0
    while len(chosen) < n_evals:
        t0 = time.perf_counter()
        mean, std = reg.predict(U, return_std=True)
        t_predict += time.perf_counter() - t0
        ucb = mean + kappa * std
        ucb[evaluated] = -np.inf
        top = np.flatnonzero(ucb == ucb.max())
        if len(top) > 1:
            n_ties += 1
        i = int(top[rng.integers(len(top))]) if len(top) > 1 else int(top[0])
        chosen.append(i)
        evaluated[i] = True
        t0 = time.perf_counter()
        reg.partial_fit(U[i : i + 1], g[i : i + 1])
        t_update += time.perf_counter() - t0
    return {
        "indices": chosen,
        "values": g[chosen].tolist(),
        "t_predict": t_predict,
        "t_update": t_update,
        "n_tie_steps": n_ties,
    }


def run_random(g, n_evals, n_init, rng):
    """Random search: uniform picks without replacement. `rng` is in the same state as the
    paired MF-UCB run's, so the first n_init picks are its initial design."""
    N = len(g)
    first = [int(i) for i in rng.choice(N, size=n_init, replace=False)]
    rest_pool = np.setdiff1d(np.arange(N), first, assume_unique=False)
    rest = rng.choice(rest_pool, size=n_evals - n_init, replace=False)
    chosen = first + [int(i) for i in rest]
    return {"indices": chosen, "values": g[chosen].tolist()}


# --------------------------------------------------------------------------- environment


def _version(pkg):
    try:
        return importlib.metadata.version(pkg)
    except importlib.metadata.PackageNotFoundError:
        return None


def environment():
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        commit = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        dirty = bool(
            subprocess.run(
                ["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no"],
                capture_output=True,
                text=True,
            ).stdout.strip()
        )
    except OSError:
        commit, dirty = None, None
    try:
        mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        mem_gb = None
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    core_built = None
    try:
        spec = importlib.util.find_spec("mondrian_ml")
        sos = sorted(Path(spec.origin).parent.glob("_core*.so")) if spec and spec.origin else []
        if sos:
            core_built = _dt.datetime.fromtimestamp(sos[0].stat().st_mtime, _dt.timezone.utc).strftime(
                "%Y-%m-%d %H:%M UTC")
    except (ImportError, OSError):
        pass
    return {
        "mondrian_ml_core_built_utc": core_built,
        "date_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "host_cpu": cpu,
        "n_cpus": os.cpu_count(),
        "memory_gb": None if mem_gb is None else round(mem_gb, 1),
        "load_average_at_start": load,
        "os": platform.platform(),
        "python": platform.python_version(),
        "packages": {p: _version(p) for p in ("mondrian_ml", "numpy", "scipy", "scikit-learn", "matplotlib")},
        "git_commit": commit,
        "git_worktree_dirty": dirty,
    }


# --------------------------------------------------------------------------- experiment


def method_names(modes):
    return [f"MF-UCB ({m})" for m in modes] + ["Random search"]


def run_experiment(args):
    importlib.import_module("mondrian_ml")  # import once, outside the timed runs

    check_objectives()
    fn_names = args.functions.split(",")
    modes = args.modes.split(",")
    out = {"functions": {}}
    t_all = time.perf_counter()
    for fi, fname in enumerate(fn_names):
        spec = FUNCTIONS[fname]
        D = spec["dim"]
        # seeded per function, so a run restricted with --functions reproduces the same numbers
        fn_seq = np.random.SeedSequence([args.seed, list(FUNCTIONS).index(fname)])
        grid_seqs = fn_seq.spawn(args.grids)
        per_method = {m: [] for m in method_names(modes)}
        grids = []
        for gi in range(args.grids):
            grid_seq, runs_seq = grid_seqs[gi].spawn(2)
            U = np.random.default_rng(grid_seq).random((args.candidates, D))
            U = np.ascontiguousarray(U, dtype=np.float64)
            g = -spec["f_unit"](U)
            grids.append({"grid": gi, "oracle": float(g.max()), "argmax_unit": U[int(np.argmax(g))].tolist()})
            for ri, run_seq in enumerate(runs_seq.spawn(args.runs)):
                for mi, mode in enumerate(modes):
                    # same seed sequence for every method: same initial design.
                    rng = np.random.default_rng(run_seq)
                    forest_seed = int(run_seq.generate_state(1)[0] % (2**31 - 1)) + mi
                    t0 = time.perf_counter()
                    res = run_mf_ucb(
                        U, g, args.evals, args.n_init, rng, forest_seed, mode,
                        args.trees, args.mss, args.kappa, args.n_jobs,
                    )
                    res["seconds"] = time.perf_counter() - t0
                    res.update(grid=gi, run=ri, forest_seed=forest_seed)
                    per_method[f"MF-UCB ({mode})"].append(res)
                    best = max(res["values"])
                    print(
                        f"[{fname}] grid {gi} run {ri} MF-UCB ({mode}): best {best:.5f} "
                        f"(grid max {g.max():.5f}) in {res['seconds']:.1f}s "
                        f"(predict {res['t_predict']:.1f}s, update {res['t_update']:.2f}s)",
                        flush=True,
                    )
                rng = np.random.default_rng(run_seq)
                res = run_random(g, args.evals, args.n_init, rng)
                res.update(grid=gi, run=ri)
                per_method["Random search"].append(res)
                print(f"[{fname}] grid {gi} run {ri} random search: best {max(res['values']):.5f}", flush=True)
        out["functions"][fname] = {"grids": grids, "methods": per_method}
    out["total_seconds"] = time.perf_counter() - t_all
    return out


def oracle_distribution(n_grids, n_points, seed):
    """Maximum of -f over independent uniform grids of the thesis size, for context."""
    res = {}
    fn_seqs = np.random.SeedSequence([seed, 7]).spawn(len(FUNCTIONS))
    for ss, (fname, spec) in zip(fn_seqs, FUNCTIONS.items()):
        vals = []
        for s in ss.spawn(n_grids):
            U = np.random.default_rng(s).random((n_points, spec["dim"]))
            vals.append(float((-spec["f_unit"](U)).max()))
        res[fname] = vals
    return {"n_grids": n_grids, "n_points": n_points, "max_per_grid": res}


# --------------------------------------------------------------------------- summaries

CHECKPOINTS = (50, 100, 200)


def checkpoints(evals):
    return sorted({k for k in CHECKPOINTS if k <= evals} | {evals})


def traces(runs):
    return np.array([best_so_far(r["values"]) for r in runs])


def stats_at(tr, k):
    k = min(k, tr.shape[1])
    v = tr[:, k - 1]
    return float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else 0.0


def summarise(data):
    cfg = data["config"]
    summ = {}
    for fname, fd in data["functions"].items():
        oracles = np.array([gr["oracle"] for gr in fd["grids"]])
        s = {"oracle_mean": float(oracles.mean()), "oracle_per_grid": oracles.tolist(), "methods": {}}
        for m, runs in fd["methods"].items():
            tr = traces(runs)
            grid_of = np.array([r["grid"] for r in runs])
            reg = oracles[grid_of] - tr[:, -1]
            ms = {
                "n_repeats": len(runs),
                "at": {str(k): stats_at(tr, k) for k in checkpoints(cfg["evals"])},
                "final": stats_at(tr, tr.shape[1]),
                "final_regret_median": float(np.median(reg)),
                "found_grid_max": int(np.sum(reg <= 1e-12)),
            }
            if "seconds" in runs[0]:
                ms["seconds_per_run"] = float(np.mean([r["seconds"] for r in runs]))
                ms["seconds_per_iteration"] = float(
                    np.mean([r["seconds"] / (cfg["evals"] - cfg["n_init"]) for r in runs])
                )
                ms["tie_steps_total"] = int(sum(r["n_tie_steps"] for r in runs))
            s["methods"][m] = ms
        summ[fname] = s
    return summ


def fmt(ms, digits=3):
    m, sd = ms
    return f"{m:.{digits}f} ± {sd:.{digits}f}".replace("-", "−")


def make_plots(data, out_dir):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fnames = list(data["functions"])
    colors = {"Random search": "tab:gray"}
    palette = ["tab:blue", "tab:orange", "tab:green"]
    for i, m in enumerate(k for k in data["functions"][fnames[0]]["methods"] if k != "Random search"):
        colors[m] = palette[i % len(palette)]

    # 1. best value found, mean ± sd band.
    fig, axes = plt.subplots(1, len(fnames), figsize=(5.5 * len(fnames), 4.2), squeeze=False)
    for ax, fname in zip(axes[0], fnames):
        fd = data["functions"][fname]
        spec = FUNCTIONS[fname]
        oracle = float(np.mean([gr["oracle"] for gr in fd["grids"]]))
        curves = {}
        for m, runs in fd["methods"].items():
            tr = traces(runs)
            n = np.arange(1, tr.shape[1] + 1)
            mu = tr.mean(0)
            sd = tr.std(0, ddof=1) if len(tr) > 1 else np.zeros_like(mu)
            curves[m] = (n, mu, sd)
        th = spec["thesis"]
        x_end = data["config"]["evals"]

        def draw(a, label=True):
            for m, (n, mu, sd) in curves.items():
                a.plot(n, mu, color=colors[m], label=f"{m} (n={len(fd['methods'][m])})" if label else None)
                a.fill_between(n, mu - sd, mu + sd, color=colors[m], alpha=0.2, linewidth=0)
            a.axhline(oracle, color="k", ls="--", lw=1,
                      label=f"grid max (mean {oracle:.3f})".replace("-", "−") if label else None)
            a.errorbar([x_end + 3], [th["MF"][0]], yerr=[th["MF"][1]], fmt="o", color="tab:red", ms=4,
                       capsize=3, label="thesis MF @200 (mean ± sd)" if label else None)
            a.errorbar([x_end + 7], [th["SMAC"][0]], yerr=[th["SMAC"][1]], fmt="s", color="tab:purple",
                       ms=4, capsize=3, label="SMAC @200 (Eggensperger et al.)" if label else None)

        draw(ax)
        # y range: everything from 25 evaluations on (the first few values are far off).
        k = min(24, x_end - 1)
        lo = min([float((mu[k:] - sd[k:]).min()) for _, mu, sd in curves.values()]
                 + [th["SMAC"][0] - th["SMAC"][1]])
        span = oracle - lo
        ax.set_ylim(oracle - 1.05 * span, oracle + 0.15 * span)
        ax.set_xlim(0, x_end + 12)
        ax.set_title(f"{spec['label']} (D={spec['dim']}), maximising −f")
        ax.set_xlabel("number of function evaluations")
        ax.set_ylabel("best value of −f found")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    fig.suptitle(
        f"Bayesian optimisation with a Mondrian forest surrogate vs random search "
        f"(mean ± sd, {data['config']['grids']}×{data['config']['runs']} repeats, "
        f"{data['config']['candidates']:,} candidates)",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(out_dir / "best_value.png", dpi=130)
    plt.close(fig)

    # 2. log10 regret to the grid maximum, median and IQR.
    fig, axes = plt.subplots(1, len(fnames), figsize=(5.5 * len(fnames), 4.0), squeeze=False)
    for ax, fname in zip(axes[0], fnames):
        fd = data["functions"][fname]
        oracles = np.array([gr["oracle"] for gr in fd["grids"]])
        for m, runs in fd["methods"].items():
            tr = traces(runs)
            grid_of = np.array([r["grid"] for r in runs])
            reg = np.maximum(oracles[grid_of][:, None] - tr, 1e-6)
            n = np.arange(1, tr.shape[1] + 1)
            q25, q50, q75 = np.percentile(reg, [25, 50, 75], axis=0)
            ax.plot(n, q50, color=colors[m], label=m)
            ax.fill_between(n, q25, q75, color=colors[m], alpha=0.2, linewidth=0)
        ax.set_yscale("log")
        ax.set_title(f"{FUNCTIONS[fname]['label']}: regret to grid max (median, IQR; floor 1e-6)")
        ax.set_xlabel("number of function evaluations")
        ax.set_ylabel("grid max − best found")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out_dir / "regret.png", dpi=130)
    plt.close(fig)


def write_summary(data, out_dir):
    cfg, env, summ = data["config"], data["environment"], data["summary"]
    mf_methods = [m for m in next(iter(summ.values()))["methods"] if m != "Random search"]
    L = []
    L.append("# Bayesian optimisation with a Mondrian forest surrogate (thesis §6.5.3, Table 6.3)\n")
    L.append(
        "Best value of −f found by UCB-driven Bayesian optimisation with our Mondrian forest "
        "regressor as the surrogate, versus random search on the same candidate grids. "
        "Generated by `experiments/bayesopt/run.py`.\n"
    )
    L.append("## Command\n")
    L.append("```\n" + data["command"] + "\n```\n")
    L.append(
        f"Total wall time: {data['total_seconds'] / 60:.1f} min "
        f"(experiment {data['experiment_seconds'] / 60:.1f} min).\n"
    )
    L.append("## Machine and versions\n")
    pk = env["packages"]
    L.append(f"* Date: {env['date_utc']}")
    L.append(f"* CPU: {env['host_cpu']}, {env['n_cpus']} logical CPUs, {env['memory_gb']} GiB RAM; "
             f"load average at start {tuple(round(x, 2) for x in env['load_average_at_start'] or ())} "
             "(the machine is shared, so timings are indicative)")
    L.append(f"* OS: {env['os']}; Python {env['python']}")
    L.append("* Packages: " + ", ".join(f"{k} {v}" for k, v in pk.items()))
    L.append(f"* Repository commit at start: {env['git_commit']}"
             + (" (work tree has uncommitted changes)" if env["git_worktree_dirty"] else "")
             + (f"; the installed `mondrian_ml` extension was built {env['mondrian_ml_core_built_utc']}"
                if env.get("mondrian_ml_core_built_utc") else ""))
    L.append("")
    L.append("## Protocol\n")
    L.append(
        f"* Surrogate: `MondrianForestRegressor(n_estimators={cfg['trees']}, "
        f"min_samples_split={cfg['mss']}, mode=..., feature_ranges=[(0, 1)] * D, "
        f"n_jobs={cfg['n_jobs']})`, trained online: `partial_fit` on the initial design, then one "
        f"`partial_fit` per new evaluation (no re-fitting). Mode(s): {', '.join(cfg['modes'])}. "
        "The noise variance uses the library default (\"thesis\" rule σ² = 2s²/(K+2) from the running "
        "label statistics)."
    )
    L.append(
        f"* Acquisition: UCB = mean + {cfg['kappa']:g} × std of the forest predictive for −f, "
        "maximised over the candidate grid minus the points already evaluated; ties broken "
        "uniformly at random."
    )
    L.append(
        "* Objectives (maximised as −f): Branin on x1 ∈ [−5, 10], x2 ∈ [0, 15] (min 0.397887); "
        "Hartmann-6 on [0,1]^6 (min −3.32237), constants as in spec §6.1. The surrogate sees "
        "inputs scaled to [0,1]^D (Branin: x = low + u·(high − low))."
    )
    L.append(
        f"* Candidates: each \"grid\" is {cfg['candidates']:,} uniform random points in [0,1]^D "
        f"(spec §7 A14). {cfg['grids']} grids × {cfg['runs']} runs per grid = "
        f"{cfg['grids'] * cfg['runs']} repeats per function and method."
    )
    L.append(
        f"* Budget: {cfg['evals']} evaluations, of which the first {cfg['n_init']} are uniform "
        "random picks from the grid."
    )
    L.append(
        "* Random search: uniform picks without replacement from the same grid, same budget and "
        "repeats; run r shares its first two picks with MF-UCB run r (paired initial design)."
    )
    L.append(
        "* Reported: best value of −f found after 50/100/200 evaluations (and at the end of the budget), mean ± standard "
        "deviation over repeats (as in Table 6.3, spec §7 A17); \"grid max\" is the best "
        "candidate on each grid (the oracle for this finite-candidate protocol)."
    )
    L.append(f"* Seeds: `numpy.random.SeedSequence([{cfg['seed']}, function index])` spawns the "
             "grids, the runs and the forest seeds.")
    L.append("")
    L.append("### Deviations from the thesis protocol\n")
    L.append(
        f"* **{cfg['candidates']:,} candidates per grid instead of 250,000, and "
        f"{cfg['grids']} grids × {cfg['runs']} runs = {cfg['grids'] * cfg['runs']} repeats instead of "
        "3 × 5 = 15**, to keep the whole run well under 15 minutes on this 2-core shared machine: "
        "each BO iteration predicts the forest on the whole grid."
    )
    costs = [
        f"{FUNCTIONS[f]['label']} {m}: {s['methods'][m]['seconds_per_iteration'] * 1e3:.0f} ms"
        for f, s in summ.items()
        for m in mf_methods
    ]
    L.append(
        "  Measured cost per BO iteration (predict on the grid + one online update), averaged over "
        "the run: " + "; ".join(costs) + "."
    )
    L.append(
        "* Unspecified in the thesis, chosen as recommended by spec §6.1/§7 A14: 2 initial "
        "random evaluations, no re-evaluation of candidates, random tie-breaking, uniform random grids."
    )
    L.append(
        "* Random search is our own baseline; the thesis compares with SMAC only (numbers copied "
        "from Eggensperger et al. 2013 below, not re-run)."
    )
    L.append("")
    L.append("## Results\n")
    L.append("Best value of −f found (higher is better), mean ± sd over repeats.\n")
    ks = checkpoints(cfg["evals"])
    L.append("| function | method | " + " | ".join(f"after {k} evals" for k in ks)
             + " | median regret to grid max at the end | runs reaching the grid max |")
    L.append("|" + "---|" * (len(ks) + 4))

    def row(lab, name, cells, extra=("", "")):
        L.append(f"| {lab} | {name} | " + " | ".join(cells) + f" | {extra[0]} | {extra[1]} |")

    for fname, s in summ.items():
        lab = FUNCTIONS[fname]["label"]
        d = 4 if fname == "branin" else 3
        for m, ms in s["methods"].items():
            row(lab, f"**{m}**", [fmt(ms["at"][str(k)], d) for k in ks],
                (f"{ms['final_regret_median']:.2g}", f"{ms['found_grid_max']}/{ms['n_repeats']}"))
        og = ", ".join(f"{v:.{d}f}" for v in s["oracle_per_grid"]).replace("-", "−")
        row(lab, "grid max (our oracle)", [""] * (len(ks) - 1) + [f"{s['oracle_mean']:.{d}f} (grids: {og})".replace("-", "−")])
        th = FUNCTIONS[fname]["thesis"]
        row(lab, "thesis: oracle (true optimum)", [""] * (len(ks) - 1) + [th["oracle_str"]])
        row(lab, "thesis: MF (3 × 5 repeats, 250k grids)", [""] * (len(ks) - 1) + [th["MF_str"]])
        row(lab, "thesis: SMAC (Eggensperger et al. 2013)", [""] * (len(ks) - 1) + [th["SMAC_str"]])
    L.append("")
    L.append("Thesis numbers are after 200 evaluations only. The thesis oracle is the true optimum "
             "of −f; ours is the maximum over our finite grid.\n")
    if "oracle_distribution" in data:
        od = data["oracle_distribution"]
        parts = []
        for f, v in od["max_per_grid"].items():
            v = np.array(v)
            nums = f"mean {v.mean():.4f}, min {v.min():.4f}, max {v.max():.4f}".replace("-", "−")
            parts.append(f"{FUNCTIONS[f]['label']}: {nums}")
        L.append(
            f"For context, the maximum of −f over {od['n_grids']} independent uniform grids of "
            f"the thesis size ({od['n_points']:,} points): " + "; ".join(parts) + ".\n"
        )
    L.append("![best value found vs evaluations](best_value.png)\n")
    L.append("Log-scale regret to the grid maximum (median and inter-quartile range over repeats):\n")
    L.append("![regret vs evaluations](regret.png)\n")
    notes = data.get("notes")
    if notes:
        L.append("## Observations\n")
        L.append(notes.strip() + "\n")
    L.append("## Files\n")
    L.append("* `results.json`: configuration, environment, per-grid oracle, every run's evaluated "
             "candidate indices and values, timings, and the summary statistics above.")
    L.append("* `best_value.png`, `regret.png`: the plots above.")
    (out_dir / "summary.md").write_text("\n".join(L) + "\n")


# --------------------------------------------------------------------------- main


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--functions", default="branin,hartmann6")
    p.add_argument("--modes", default="fast", help="comma-separated MF modes: fast, exact, quadrature")
    p.add_argument("--candidates", type=int, default=50_000, help="points per random grid (thesis: 250,000)")
    p.add_argument("--grids", type=int, default=3, help="random grids per function (thesis: 3)")
    p.add_argument("--runs", type=int, default=2, help="runs per grid (thesis: 5)")
    p.add_argument("--evals", type=int, default=200)
    p.add_argument("--n-init", type=int, default=2)
    p.add_argument("--trees", type=int, default=10)
    p.add_argument("--mss", type=int, default=2)
    p.add_argument("--kappa", type=float, default=1.0)
    p.add_argument("--n-jobs", type=int, default=-1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--oracle-grids", type=int, default=20,
                   help="grids of the thesis size sampled for the oracle-context line (0: skip)")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--quick", action="store_true", help="smoke test: small grids, few evaluations")
    p.add_argument("--summarize-only", action="store_true", help="rebuild summary/plots from results.json")
    p.add_argument("--notes", type=Path, default=None,
                   help="markdown file whose text goes into the 'Observations' section (stored in results.json)")
    args = p.parse_args(argv)

    if args.quick:
        args.candidates, args.grids, args.runs, args.evals, args.oracle_grids = 5000, 1, 2, 20, 2
    out_dir = args.out or (DEFAULT_QUICK_OUT if args.quick else DEFAULT_OUT)
    out_dir.mkdir(parents=True, exist_ok=True)
    res_path = out_dir / "results.json"

    if args.summarize_only:
        data = json.loads(res_path.read_text())
        if args.notes:
            data["notes"] = args.notes.read_text()
            res_path.write_text(json.dumps(data))
        data["summary"] = summarise(data)
        make_plots(data, out_dir)
        write_summary(data, out_dir)
        print(f"rebuilt {out_dir}/summary.md and plots")
        return

    t0 = time.perf_counter()
    exe = sys.executable
    if exe.startswith(str(REPO_ROOT) + os.sep):
        exe = os.path.relpath(exe, REPO_ROOT)
    argv_used = sys.argv[1:] if argv is None else list(argv)
    cmd = " ".join(shlex.quote(a) for a in [exe, os.path.relpath(__file__, REPO_ROOT)] + argv_used)
    env = environment()
    data = {
        "command": f"cd {REPO_ROOT} && {cmd}",
        "environment": env,
        "config": {
            "functions": args.functions.split(","),
            "modes": args.modes.split(","),
            "candidates": args.candidates,
            "grids": args.grids,
            "runs": args.runs,
            "evals": args.evals,
            "n_init": args.n_init,
            "trees": args.trees,
            "mss": args.mss,
            "kappa": args.kappa,
            "n_jobs": args.n_jobs,
            "seed": args.seed,
            "quick": args.quick,
        },
        "thesis": {f: FUNCTIONS[f]["thesis"] for f in FUNCTIONS},
    }
    exp = run_experiment(args)
    data["functions"] = exp["functions"]
    data["experiment_seconds"] = exp["total_seconds"]
    if args.oracle_grids > 0:
        data["oracle_distribution"] = oracle_distribution(args.oracle_grids, 250_000, args.seed)
    if args.notes:
        data["notes"] = args.notes.read_text()
    data["total_seconds"] = time.perf_counter() - t0
    data["summary"] = summarise(data)
    res_path.write_text(json.dumps(data))
    make_plots(data, out_dir)
    write_summary(data, out_dir)
    print(f"done in {data['total_seconds']:.0f}s; wrote {out_dir}")


if __name__ == "__main__":
    main()
