"""What the interleaved A/B scripts of this directory share: where the data and the binary
are, and the commit a result was measured at."""
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / ".." / "shared" / "data" / "classification"
BIN = ROOT / "target" / "release" / "mondrian"


def path(name, part):
    """The CSV of data set `name`, part `train` or `test` (gzipped if only that exists)."""
    p = DATA / f"{name}_{part}.csv"
    return p if p.exists() else DATA / f"{name}_{part}.csv.gz"


def commit():
    """The short hash of the repository's HEAD."""
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                         capture_output=True, text=True)
    return out.stdout.strip() or "unknown"
