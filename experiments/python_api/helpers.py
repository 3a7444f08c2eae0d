"""What bench.py and its report share: the paths, our classification helpers (loaded from
experiments/classification/helpers.py), the benchmark's data (`Data`), medians and ranges, and
the bookkeeping of a run (machine, versions, command line)."""
from __future__ import annotations

import datetime as _dt
import importlib.metadata
import importlib.util
import os
import platform
import shlex
import statistics
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
CACHE_DIR = HERE / ".cache"


def _load_classification_helpers():
    """Our own loaders and helpers from experiments/classification/helpers.py."""
    path = REPO_ROOT / "experiments" / "classification" / "helpers.py"
    spec = importlib.util.spec_from_file_location("classification_helpers", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


CR = _load_classification_helpers()
log, find_file, load_csv, write_csv, score = CR.log, CR.find_file, CR.load_csv, CR.write_csv, CR.score
run_cli, save_json, git_rev, binary_version = CR.run_cli, CR.save_json, CR.git_rev, CR.binary_version


# ----------------------------------------------------------------------------- data

class Data:
    """Training/test sets min-max rescaled to [0, 1] with training min/max (as in
    experiments/classification/run.py), the training rows shuffled with the seed, written as CSV
    for the CLI and read back, so that Python and the CLI see exactly the same values in the
    same order."""

    def __init__(self, name, args):
        self.name = name
        src_tr, src_te = find_file(args.data_dir, name, "train"), find_file(args.data_dir, name, "test")
        self.sources = [str(src_tr), str(src_te)]
        header, X, y = load_csv(src_tr)
        _, Xt, yt = load_csv(src_te)
        self.n_train_file, self.n_test_file = len(y), len(yt)
        rng = np.random.default_rng(0)  # fixed subsample (only with --max-train/--max-test)
        if args.max_train and args.max_train < len(y):
            idx = np.sort(rng.choice(len(y), args.max_train, replace=False))
            X, y = X[idx], y[idx]
        if args.max_test and args.max_test < len(yt):
            idx = np.sort(rng.choice(len(yt), args.max_test, replace=False))
            Xt, yt = Xt[idx], yt[idx]
        lo, hi = X.min(axis=0), X.max(axis=0)
        span = np.where(hi > lo, hi - lo, 1.0)
        X, Xt = (X - lo) / span, (Xt - lo) / span
        perm = np.random.default_rng(args.seed).permutation(len(y))
        X, y = X[perm], y[perm]
        sub = f"_sub{len(y)}x{len(yt)}" if (len(y), len(yt)) != (self.n_train_file, self.n_test_file) else ""
        self.train_csv = CACHE_DIR / f"{name}_train_scaled01_perm{args.seed}{sub}.csv"
        self.test_csv = CACHE_DIR / f"{name}_test_scaled01{sub}.csv"
        for path, A, b, src in ((self.train_csv, X, y, src_tr), (self.test_csv, Xt, yt, src_te)):
            if not path.exists() or path.stat().st_mtime < src.stat().st_mtime:
                write_csv(path, header, A, b)
        self.header, self.X, self.y = load_csv(self.train_csv)
        _, self.Xt, self.yt = load_csv(self.test_csv)
        self.names = self.header[:-1]
        self.n_features = self.X.shape[1]
        self.n_classes = int(max(self.y.max(), self.yt.max())) + 1
        self.n_constant = int(np.sum(self.X.max(axis=0) == self.X.min(axis=0)))

    def info(self):
        return dict(name=self.name, sources=self.sources, train_csv=str(self.train_csv),
                    test_csv=str(self.test_csv), n_train=len(self.y), n_test=len(self.yt),
                    n_train_file=self.n_train_file, n_test_file=self.n_test_file,
                    n_features=self.n_features, n_classes=self.n_classes,
                    constant_features_in_train=self.n_constant)


# ----------------------------------------------------------------------------- medians

def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def spread(xs):
    xs = [x for x in xs if x is not None]
    return (min(xs), max(xs)) if xs else (None, None)


# ----------------------------------------------------------------------------- bookkeeping

def machine():
    m = CR.machine()
    try:
        m["physical_cores"] = len({(l.split(":")[1].strip()) for l in open("/proc/cpuinfo")
                                   if l.startswith("core id")}) or None
    except OSError:
        pass
    try:
        m["cpu_mhz"] = [l.split(":")[1].strip() for l in open("/proc/cpuinfo") if l.startswith("cpu MHz")][:1]
    except OSError:
        pass
    m["affinity_cores"] = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return m


def versions(args):
    v = {"python": platform.python_version()}
    for pkg in ("mondrian-ml", "numpy", "scikit-learn", "river", "pandas", "scipy"):
        try:
            v[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            v[pkg] = None
    import mondrian_ml
    import mondrian_ml._core as core
    v["mondrian_ml_path"] = str(Path(mondrian_ml.__file__).parent)
    v["mondrian_ml_core_mtime"] = _dt.datetime.fromtimestamp(Path(core.__file__).stat().st_mtime).isoformat(timespec="seconds")
    v["mondrian_cli"] = binary_version(args.mondrian)
    v["mondrian_cli_mtime"] = _dt.datetime.fromtimestamp(args.mondrian.stat().st_mtime).isoformat(timespec="seconds")
    return v


def command_line():
    script = Path(sys.argv[0]).resolve()
    try:
        script = script.relative_to(REPO_ROOT)
    except ValueError:
        pass
    prefix = "" if Path.cwd().resolve() == REPO_ROOT else f"cd {REPO_ROOT} && "
    py = Path(sys.executable)
    try:
        py = py.relative_to(REPO_ROOT)
    except ValueError:
        pass
    return prefix + shlex.join([str(py), str(script), *sys.argv[1:]])

