"""Data sets of the Table 4 run: every file of ../shared/data/anomaly and the NAB series.

The NAB series are turned into points as spec §9.1 says: shingles of 10 consecutive
values, row i = (v_i, ..., v_{i+9}), n = N - 9, and the label of shingle i is the label of
v_i (its first element). The raw point labels are rebuilt here from the windows of
`nab_labels_realKnownCause.json` (a timestamp inside a window, both ends included) and
checked against the file's own `anomaly` column; the raw counts are compared with spec
Table 3.
"""

from __future__ import annotations

import csv
import gzip
import json
import os
from calendar import timegm
from datetime import datetime

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DATA = os.environ.get("ANOMALY_DATA", os.path.join(ROOT, "..", "shared", "data", "anomaly"))
if not os.path.isdir(DATA):
    DATA = "/work/shared/data/anomaly"
SHINGLED = os.path.join(ROOT, "target", "nab_shingled")
SHINGLE = 10

# File stem -> the row name of the paper's Table 4 (spec §10.4); None = not in the paper.
PAPER_NAME = {
    "thyroid": "Thyroid", "mammography": "Mammography", "seismic": "Seismic",
    "satimage-2": "Satimage-2", "vowels": "Vowels", "musk": "Musk", "http": "HTTP",
    "smtp": "SMTP", "nyc_taxi": "NYC", "ambient_temperature_system_failure": "A.T",
    "cpu_utilization_asg_misconfiguration": "CPU",
    "machine_temperature_system_failure": "M.T", "annthyroid": "Annthyroid",
    "arrhythmia": "Arrhythmia", "breastw": "Breastw", "cardio": "Cardio", "cover": "Cover",
    "glass": "Glass", "ionosphere": "Ionosphere", "letter": "Letter", "lympho": "Lympho",
    "mnist": "Mnist", "optdigits": "Optdigits", "pendigits": "Pendigits", "pima": "Pima",
    "satellite": "Satellite", "shuttle": "Shuttle", "vertebral": "Vertebral", "wbc": "WBC",
    "wine": "Wine", "rogue_agent_key_hold": "rogue_hold",
    "rogue_agent_key_updown": "rogue_updown", "ec2_request_latency_system_failure": None,
}

# Raw (before shingling) anomaly counts of spec Table 3 for the NAB series it lists.
TABLE3_RAW = {
    "ambient_temperature_system_failure": (7267, 726),
    "cpu_utilization_asg_misconfiguration": (18050, 1499),
    "machine_temperature_system_failure": (22695, 2268),
    "nyc_taxi": (10320, 1035),
    "rogue_agent_key_hold": (1882, 190),
    "rogue_agent_key_updown": (5315, 530),
}


def _open(path):
    return gzip.open(path, "rt") if path.endswith(".gz") else open(path)


def read_csv(path):
    """Features and 0/1 labels (last column) of one data file."""
    with _open(path) as f:
        rows = csv.reader(f)
        header = next(rows)
        data = np.array([[float(v) for v in r] for r in rows], dtype=np.float64)
    return header, data[:, :-1], data[:, -1].astype(np.int64)


def _epoch(text):
    text = text.split(".")[0]
    return timegm(datetime.strptime(text, "%Y-%m-%d %H:%M:%S").timetuple())


def nab_series(name, labels_json):
    """Shingled points, shingle labels and a check record for one NAB series."""
    path = os.path.join(DATA, "nab", name + ".csv")
    _, raw, shipped = read_csv(path)
    ts, values = raw[:, 0], raw[:, 1]
    windows = labels_json["windows"]["realKnownCause/" + name + ".csv"]
    y_raw = np.zeros(len(ts), dtype=np.int64)
    for lo, hi in windows:
        y_raw[(ts >= _epoch(lo)) & (ts <= _epoch(hi))] = 1
    n = len(values) - SHINGLE + 1
    x = np.stack([values[i : i + n] for i in range(SHINGLE)], axis=1)
    y = y_raw[:n]
    check = {
        "raw_rows": int(len(values)),
        "raw_anomalies": int(y_raw.sum()),
        "matches_file_column": bool((y_raw == shipped).all()),
        "n": int(n),
        "shingle_anomalies": int(y.sum()),
        "table3_raw": TABLE3_RAW.get(name),
    }
    return x, y, check


def write_csv(path, x, y):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow([f"v{i}" for i in range(x.shape[1])] + ["anomaly"])
        for row, label in zip(x, y):
            w.writerow([repr(float(v)) for v in row] + [int(label)])


def datasets(names=None, max_rows=None):
    """Yield (name, dict) for every data set, smallest first.

    Each dict has `x`, `y`, `path` (a CSV the CLI reads: the shipped file, or the shingled
    NAB file under target/nab_shingled) and `paper` (Table 4 row name or None).
    """
    entries = []
    for f in sorted(os.listdir(DATA)):
        if f.endswith(".csv") or f.endswith(".csv.gz"):
            stem = f.split(".csv")[0]
            entries.append((stem, os.path.join(DATA, f), False))
    nab_dir = os.path.join(DATA, "nab")
    for f in sorted(os.listdir(nab_dir)):
        if f.endswith(".csv"):
            entries.append((f[:-4], None, True))
    with open(os.path.join(nab_dir, "nab_labels_realKnownCause.json")) as fh:
        labels_json = json.load(fh)
    out = []
    for stem, path, is_nab in entries:
        if names and stem not in names:
            continue
        if is_nab:
            x, y, check = nab_series(stem, labels_json)
            path = os.path.join(SHINGLED, stem + ".csv")
            if not os.path.exists(path):
                write_csv(path, x, y)
        else:
            _, x, y = read_csv(path)
            check = None
        if max_rows and len(y) > max_rows:
            continue
        out.append((stem, {"x": x, "y": y, "path": path, "paper": PAPER_NAME.get(stem),
                           "nab": is_nab, "check": check}))
    out.sort(key=lambda e: len(e[1]["y"]))
    return out
