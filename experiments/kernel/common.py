"""What paper.py and peers.py share: paths, data loaders, the Appendix A baselines (random
Fourier features, random binning) written in numpy, exact ridge helpers, the error metrics and
the bookkeeping of a run (versions, command line, markdown output)."""
from __future__ import annotations

import datetime as _dt
import importlib.metadata
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
# The shared data folder sits next to the repository (/work/shared next to /work/main).
DATA = Path(os.environ.get("MONDRIAN_DATA", REPO.parent / "shared" / "data" / "regression"))


# ----------------------------------------------------------------------------- data

def load_csv(name):
    """A regression CSV of the shared data folder: header row, last column the target."""
    arr = np.loadtxt(DATA / name, delimiter=",", skiprows=1, dtype=np.float64)
    return np.ascontiguousarray(arr[:, :-1]), np.ascontiguousarray(arr[:, -1])


def load_cpu():
    """The paper's CPU set (Rahimi & Recht's cpu.mat): raw features, 6554 train / 819 test."""
    Xtr, ytr = load_csv("cpu_rr_train.csv")
    Xte, yte = load_csv("cpu_rr_test.csv")
    # The loader checksums of spec §6.1.
    assert Xtr.shape == (6554, 21) and Xte.shape == (819, 21)
    assert abs(Xtr.sum() - 10692661069.99) < 1e-2 and ytr.sum() == 558087 and yte.sum() == 68226
    return Xtr, ytr, Xte, yte


def split_file_test_idx(name, k=0):
    """Row indices of the test set of split k (line k of splits/<name>_test_idx.txt), or None."""
    path = DATA / "splits" / f"{name}_test_idx.txt"
    if not path.exists():
        return None
    with open(path) as fh:
        for i, line in enumerate(fh):
            if i == k:
                return np.array(line.split(), dtype=np.int64)
    raise ValueError(f"{path} has no line {k}")


# ----------------------------------------------------------------------------- metrics

def rel_err(pred, y):
    """The paper's relative error in %: 100 ||y_hat - y|| / ||y|| on raw targets (spec A30)."""
    return float(100.0 * np.linalg.norm(pred - y) / np.linalg.norm(y))


def rmse(pred, y):
    return float(np.sqrt(np.mean((np.asarray(pred) - y) ** 2)))


def cityblock(A, B):
    from scipy.spatial.distance import cdist

    return cdist(A, B, metric="cityblock")


# ----------------------------------------------------------------------------- Appendix A baselines

def fourier_features(X, R, lam, rng, scaled=True):
    """Random Fourier features of exp(-lam ||x - x'||_1) (spec Appendix A): R frequencies with
    i.i.d. lam * Cauchy coordinates, [cos, sin] (2R dense features), scaled by 1/sqrt(R) unless
    ``scaled=False`` (the reference code's variant, spec A17). Returns a function X -> Z so that
    the same frequencies can be applied to several sets."""
    omega = lam * rng.standard_cauchy(size=(X.shape[1], R))
    s = 1.0 / np.sqrt(R) if scaled else 1.0

    def transform(Z):
        P = Z @ omega
        return np.hstack([np.cos(P), np.sin(P)]) * s

    return transform


def binning_keys(X, lam, M, rng):
    """Per grid m, a 64-bit hash of the integer bin key ceil((x - u)/delta) of every row
    (spec Appendix A: widths Gamma(2, 1/lam), shifts Uniform[0, delta)). Hash: a random odd
    64-bit linear form of the key, wrapping modulo 2^64 (collisions have probability ~2^-63 per
    pair of distinct keys). Shape (M, N)."""
    D = X.shape[1]
    out = np.empty((M, X.shape[0]), dtype=np.int64)
    for m in range(M):
        delta = rng.gamma(shape=2.0, scale=1.0 / lam, size=D)
        u = rng.uniform(0.0, delta)
        keys = np.ceil((X - u) / delta).astype(np.int64)
        mult = rng.integers(1, 2**62, size=D, dtype=np.int64) * 2 + 1
        with np.errstate(over="ignore"):
            out[m] = (keys * mult).sum(axis=1)
    return out


def binning_features(keys, n_fit):
    """Random-binning feature matrix (N x C, CSR, values 1/sqrt(M)) from ``binning_keys``. The
    map (grid, key) -> column is filled on the first ``n_fit`` rows; rows in a bin never seen
    there get no feature in that grid (the reference code's test-time rule)."""
    M, N = keys.shape
    rows, cols = [], []
    offset = 0
    for m in range(M):
        uniq, inv = np.unique(keys[m, :n_fit], return_inverse=True)
        pos = np.searchsorted(uniq, keys[m])
        pos_c = np.minimum(pos, len(uniq) - 1)
        found = uniq[pos_c] == keys[m]
        idx = np.nonzero(found)[0]
        rows.append(idx)
        cols.append(pos_c[idx] + offset)
        offset += len(uniq)
    rows = np.concatenate(rows)
    cols = np.concatenate(cols)
    data = np.full(rows.shape, 1.0 / np.sqrt(M))
    return sp.csr_matrix((data, (rows, cols)), shape=(N, offset))


def ridge_exact(Phi_tr, y_tr, Phi_te, delta2):
    """Exact primal ridge with centred targets and no intercept (spec 3.3, A31):
    w = (Phi^T Phi + delta2 I)^{-1} Phi^T (y - mean); prediction mean + Phi w."""
    mu = y_tr.mean()
    yc = y_tr - mu
    if sp.issparse(Phi_tr):
        A = (Phi_tr.T @ Phi_tr).toarray()
        b = Phi_tr.T @ yc
    else:
        A = Phi_tr.T @ Phi_tr
        b = Phi_tr.T @ yc
    A[np.diag_indices_from(A)] += delta2
    w = sla.cho_solve(sla.cho_factor(A, lower=True, check_finite=False), b, check_finite=False)
    return mu + np.asarray(Phi_te @ w).ravel()


def laplace_krr(Xtr, ytr, Xte_list, lam, delta2):
    """Exact Laplace kernel ridge exp(-lam ||x - x'||_1), (K + delta2 I) a = y - mean
    (spec 6.1). Returns the predictions for each matrix of ``Xte_list``."""
    mu = ytr.mean()
    K = np.exp(-lam * cityblock(Xtr, Xtr))
    K[np.diag_indices_from(K)] += delta2
    a = sla.cho_solve(sla.cho_factor(K, lower=True, check_finite=False, overwrite_a=True),
                      ytr - mu, check_finite=False)
    del K
    return [mu + np.exp(-lam * cityblock(Xq, Xtr)) @ a for Xq in Xte_list]


# ----------------------------------------------------------------------------- bookkeeping

def versions():
    out = {"python": platform.python_version(), "machine": platform.machine(),
           "cpus": os.cpu_count()}
    for pkg in ["mondrian-ml", "numpy", "scipy", "scikit-learn", "matplotlib"]:
        try:
            out[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            out[pkg] = None
    try:
        out["git"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                                    capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "crates"], cwd=REPO,
                               capture_output=True, text=True).stdout.strip()
        out["git_crates_dirty"] = bool(dirty)
    except OSError:
        out["git"] = None
    try:
        out["rustc"] = subprocess.run(["rustc", "--version"], capture_output=True,
                                      text=True).stdout.strip()
    except OSError:
        out["rustc"] = None
    return out


def command_line():
    return " ".join(shlex.quote(a) for a in [Path(sys.executable).name] + sys.argv)


def now():
    return _dt.datetime.now().isoformat(timespec="seconds")


def save_json(path, obj):
    def default(o):
        if isinstance(o, (np.integer,)):
            return int(o)
        if isinstance(o, (np.floating,)):
            return float(o)
        if isinstance(o, np.ndarray):
            return o.tolist()
        if isinstance(o, Path):
            return str(o)
        raise TypeError(type(o))

    Path(path).write_text(json.dumps(obj, indent=1, default=default) + "\n")


def md_table(header, rows):
    lines = ["| " + " | ".join(str(h) for h in header) + " |",
             "|" + "|".join("---" for _ in header) + "|"]
    for r in rows:
        lines.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(lines)


def verdict(ok, text):
    return f"- **{'PASS' if ok else 'FAIL'}**: {text}"


class Timer:
    def __init__(self):
        self.t0 = time.perf_counter()

    def __call__(self):
        return time.perf_counter() - self.t0


def log(*a):
    print(f"[{_dt.datetime.now().strftime('%H:%M:%S')}]", *a, flush=True)
