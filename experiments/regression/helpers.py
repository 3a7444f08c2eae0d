"""What the regression experiment shares: its paths, data sets and method names, logging, the
data (CSV files and the standard splits), the Gaussian metrics, calls of the mondrian CLI, the
bookkeeping of a run (versions, machine) and the mean ± sd formatting of the tables. Used by
run.py, by report.py and by the diagnostics beside them (mixture_vs_gaussian.py,
mss_frontier.py, variance_parts.py)."""
from __future__ import annotations

import datetime as _dt
import hashlib
import importlib.metadata
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
DEFAULT_DATA_DIR = Path("/work/shared/data/regression")
DEFAULT_BINARY = REPO_ROOT / "target" / "release" / "mondrian"
DEFAULT_OUT = HERE / "results"
DEFAULT_QUICK_OUT = Path(tempfile.gettempdir()) / "mondrian-regression-quick"

ALL_DATASETS = ["boston_housing", "concrete", "energy_heating", "kin8nm", "power_plant",
                "wine_quality_red", "yacht", "california_housing"]
SHORT_NAME = {"boston_housing": "boston", "concrete": "concrete", "energy_heating": "energy",
              "kin8nm": "kin8nm", "power_plant": "power", "wine_quality_red": "wine-red",
              "yacht": "yacht", "california_housing": "california"}

# Method keys, in table order.
METHODS = ["mf_exact", "mf_fast", "mf_exact_ml", "mf_exact100", "mf_fast100_mss5",
           "mf_fast100_mss2", "mf_exact_rel", "mf_fast100_mss5_rel", "mf_fast100_mss5_relcv",
           "mf_fast100_mss5_relcv_cal", "mf_fast100_mss2_relcv", "mf_fast_online",
           "mf_exact_online", "rf", "ert", "ert1", "amf"]
LABEL = {
    "mf_exact": "MF exact (10 trees, thesis)",
    "mf_fast": "MF fast (10 trees)",
    "mf_exact_ml": "MF exact, θ by marginal likelihood (10 trees)",
    "mf_fast100_mss5": "MF fast (100 trees, min_samples_split 5)",
    "mf_fast100_mss2": "MF fast (100 trees, min_samples_split 2)",
    "mf_exact100": "MF exact (100 trees)",
    "mf_exact_rel": "MF exact, relevance feature weights (10 trees, thesis otherwise)",
    "mf_fast100_mss5_rel": "MF fast, relevance feature weights (100 trees, min_samples_split 5)",
    "mf_fast100_mss5_relcv": "MF fast, relevance weights with the power chosen by 5-fold CV on the "
                             "training split (100 trees, min_samples_split 5)",
    "mf_fast100_mss5_relcv_cal": "MF fast, relevance:cv weights and intervals recalibrated by 5-fold "
                                 "CV (`--calibration cv`; 100 trees, min_samples_split 5)",
    "mf_fast100_mss2_relcv": "MF fast, fully grown (min_samples_split 2), relevance:cv weights "
                             "(100 trees)",
    "mf_fast_online": "MF fast, online (10 trees)",
    "mf_exact_online": "MF exact, online (10 trees)",
    "rf": "RF (sklearn)",
    "ert": "ERT (sklearn ExtraTrees)",
    "ert1": "ERT-1 (ExtraTrees, max_features=1; diagnostic)",
    "amf": "AMF (river, 10 trees)",
}
SHORT = {"mf_exact": "MF exact", "mf_fast": "MF fast", "mf_exact_ml": "MF exact-ML",
         "mf_fast100_mss5": "MF fast-100 mss5", "mf_fast100_mss2": "MF fast-100 mss2", "mf_exact100": "MF exact-100",
         "mf_exact_rel": "MF exact rel", "mf_fast100_mss5_rel": "MF fast-100 mss5 rel",
         "mf_fast100_mss5_relcv": "MF fast-100 mss5 rel-cv",
         "mf_fast100_mss5_relcv_cal": "MF fast-100 mss5 rel-cv cal",
         "mf_fast100_mss2_relcv": "MF fast-100 mss2 rel-cv",
         "mf_fast_online": "MF fast online", "mf_exact_online": "MF exact online",
         "rf": "RF", "ert": "ERT", "ert1": "ERT-1", "amf": "AMF"}
COLORS = {"mf_exact": "tab:red", "mf_fast": "tab:orange", "mf_exact_ml": "tab:pink",
          "mf_fast100_mss5": "peru", "mf_fast100_mss2": "sienna", "mf_exact100": "darkred",
          "mf_exact_rel": "crimson", "mf_fast100_mss5_rel": "black",
          "mf_fast100_mss5_relcv": "dimgray", "mf_fast100_mss5_relcv_cal": "teal",
          "mf_fast100_mss2_relcv": "slategray",
          "mf_fast_online": "gold", "mf_exact_online": "salmon",
          "rf": "tab:blue", "ert": "tab:green", "ert1": "tab:olive", "amf": "tab:purple"}

Z90 = 1.6448536269514722  # standard normal quantile 0.95
VAR_FLOOR = 1e-12
CLI_KEYS = ["rmse", "nlpd", "coverage_90", "coverage_90_gaussian", "calibration",
            "calibration_gaussian", "train_seconds", "predict_seconds",
            "n_train", "n_test", "trees", "mode", "mu_h", "gamma1", "gamma2", "noise_var",
            "depth_mean", "depth_std", "n_nodes", "n_leaves", "online", "seed", "feature_weights",
            "relevance_choice", "interval_probabilities_90", "calibration_pits"]


def log(msg: str) -> None:
    print(f"[{_dt.datetime.now().strftime('%H:%M:%S')}] {msg}", flush=True)


def csv_list(s: str) -> list[str]:
    return [x.strip() for x in s.split(",") if x.strip()]


# --------------------------------------------------------------------------- data

def load_dataset(data_dir: Path, name: str):
    import pandas as pd
    df = pd.read_csv(data_dir / f"{name}.csv")
    cols = list(df.columns)
    arr = df.to_numpy(dtype=np.float64)
    return cols, arr[:, :-1], arr[:, -1]


def split_indices(data_dir: Path, name: str, n: int, k: int):
    """(train_idx in the shuffled order all methods use, test_idx, split source)."""
    f = data_dir / "splits" / f"{name}_test_idx.txt"
    if f.exists():
        lines = [ln for ln in f.read_text().splitlines() if ln.strip()]
        if k >= len(lines):
            raise SystemExit(f"{f} has only {len(lines)} splits")
        test = np.array([int(t) for t in lines[k].split()], dtype=np.int64)
        source = f"standard split file {f.name}, line {k}"
    else:
        perm = np.random.default_rng(k).permutation(n)
        test = np.sort(perm[: n // 10])
        source = f"random 90/10: numpy default_rng({k}).permutation({n})[:{n // 10}]"
    mask = np.ones(n, dtype=bool)
    mask[test] = False
    train = np.flatnonzero(mask)
    assert len(np.unique(test)) == len(test) and not np.intersect1d(train, test).size
    train = train[np.random.default_rng(10_000 + k).permutation(len(train))]
    return train, test, source


def write_csv(path: Path, cols, X, y) -> None:
    np.savetxt(path, np.column_stack([X, y]), delimiter=",", fmt="%.17g",
               header=",".join(cols), comments="")


# --------------------------------------------------------------------------- metrics

def gaussian_metrics(y, mean, var) -> dict:
    from scipy.stats import norm
    var = np.maximum(var, VAR_FLOOR)
    sd = np.sqrt(var)
    r = y - mean
    nlpd = float(np.mean(0.5 * np.log(2 * np.pi * var) + 0.5 * r * r / var))
    calib = [float(np.mean(np.abs(r) <= norm.ppf(0.5 + z / 20) * sd) - z / 10) for z in range(1, 10)]
    return {
        "rmse_predictive_mean": float(np.sqrt(np.mean(r * r))),
        "nlpd": nlpd,
        "coverage_90": float(np.mean(np.abs(r) <= Z90 * sd)),
        "calibration": calib,
        "mean_pred_sd": float(np.mean(sd)),
    }


def rmse(y, p) -> float:
    return float(np.sqrt(np.mean((np.asarray(y) - np.asarray(p)) ** 2)))


# --------------------------------------------------------------------------- MF (CLI)

def run_cli(binary: Path, args: list[str]) -> tuple[str, float]:
    t0 = time.perf_counter()
    proc = subprocess.run([str(binary), *args], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"mondrian {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
    return proc.stdout, wall


def mf_eval(binary, train_csv, test_csv, seed, trees, mode, online, theta="heuristic", mss=10,
            weights="uniform", calibration="none") -> dict:
    args = ["eval", "--task", "regression", "--train", str(train_csv), "--test", str(test_csv),
            "--trees", str(trees), "--min-samples-split", str(mss), "--mode", mode,
            "--theta", theta, "--feature-weights", weights, "--calibration", calibration,
            "--seed", str(seed), "--threads", "1", "--json"]
    if online:
        args.append("--online")
    out, wall = run_cli(binary, args)
    d = json.loads(out)
    r = {k: d.get(k) for k in CLI_KEYS}
    r["cli_wall_seconds"] = wall
    r["throughput"] = d["n_train"] * d["trees"] / max(d["train_seconds"], 1e-12)
    return r


def mf_sharpness(binary, train_csv, test_csv, seed, trees, mode, tmp: Path, y_test) -> dict:
    """`train` + `predict` of the same forest (same seed): the per-point predictive mean and sd,
    to report the mean predictive sd (sharpness) next to the RMSE."""
    model = tmp / f"mf_{mode}.model"
    run_cli(binary, ["train", "--task", "regression", "--train", str(train_csv), "--model", str(model),
                     "--trees", str(trees), "--min-samples-split", "10", "--mode", mode,
                     "--feature-weights", "uniform", "--calibration", "none",
                     "--seed", str(seed), "--threads", "1"])
    out, _ = run_cli(binary, ["predict", "--model", str(model), "--input", str(test_csv), "--threads", "1"])
    rows = np.array([[float(v) for v in ln.split(",")] for ln in out.strip().splitlines()[1:]])
    model.unlink()
    mean, sd = rows[:, 0], rows[:, 1]
    return {"mean_pred_sd": float(np.mean(sd)), "median_pred_sd": float(np.median(sd)),
            "rmse_from_predict": rmse(y_test, mean)}



# --------------------------------------------------------------------------- bookkeeping

def versions(binary: Path) -> dict:
    v = {"python": platform.python_version(), "python_executable": sys.executable}
    for pkg in ["numpy", "scipy", "pandas", "scikit-learn", "river", "matplotlib"]:
        try:
            v[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            v[pkg] = None
    try:
        v["mondrian"] = subprocess.run([str(binary), "--version"], capture_output=True, text=True).stdout.strip()
        v["mondrian_binary"] = str(binary)
        v["mondrian_binary_sha256"] = hashlib.sha256(binary.read_bytes()).hexdigest()[:16]
        v["mondrian_binary_mtime"] = _dt.datetime.fromtimestamp(binary.stat().st_mtime).isoformat(timespec="seconds")
    except OSError as e:
        v["mondrian"] = f"unavailable: {e}"
    git = lambda *a: subprocess.run(["git", "-C", str(REPO_ROOT), *a], capture_output=True, text=True).stdout.strip()
    v["git_head"] = git("rev-parse", "--short", "HEAD")
    v["git_dirty"] = bool(git("status", "--porcelain", "--untracked-files=no"))
    return v


def machine() -> dict:
    cpu, cores = None, os.cpu_count()
    try:
        for ln in Path("/proc/cpuinfo").read_text().splitlines():
            if ln.startswith("model name"):
                cpu = ln.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = None
    try:
        for ln in Path("/proc/meminfo").read_text().splitlines():
            if ln.startswith("MemTotal"):
                mem = f"{int(ln.split()[1]) / 1024 ** 2:.1f} GiB"
    except OSError:
        pass
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    return {"cpu": cpu, "logical_cores": cores, "memory": mem, "platform": platform.platform(),
            "loadavg_at_start": load}


# --------------------------------------------------------------------------- table cells

def ms(x) -> tuple[float, float]:
    x = np.asarray(x, dtype=float)
    if x.size == 0:
        return math.nan, math.nan
    return float(x.mean()), float(x.std(ddof=1)) if x.size > 1 else 0.0


def fmt(x, digits=3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    if x != 0 and (abs(x) >= 1e5 or abs(x) < 1e-3):
        return f"{x:.{digits - 1}e}"
    return f"{x:.{digits}g}" if abs(x) >= 1000 else f"{x:.{digits}f}" if abs(x) < 10 else f"{x:.{max(digits - 1, 1)}f}"


def pm(x, digits=3) -> str:
    m, s = ms(x)
    if math.isnan(m):
        return "n/a"
    return f"{fmt(m, digits)} ± {fmt(s, digits)}" if len(x) > 1 else fmt(m, digits)
