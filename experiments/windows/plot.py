"""Plots the memory of a windowed stream (results/memory.csv, written by
`cargo run --release -p mondrian --example window_stream -- memory ...`) to
results/memory.png: the process's resident set and the model's own bytes against the
points streamed.

Usage: python experiments/windows/plot.py [results/memory.csv]
"""

import csv
import pathlib
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent


def main() -> None:
    path = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "results" / "memory.csv"
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    points = [int(r["points"]) / 1e6 for r in rows]
    fig, ax = plt.subplots(figsize=(7, 3.6))
    ax.plot(points, [float(r["rss_mib"]) for r in rows], label="process resident set (RSS)")
    ax.plot(points, [float(r["peak_mib"]) for r in rows], "--", label="peak RSS")
    ax.plot(points, [float(r["model_mib"]) for r in rows], label="model (trees + points held)")
    ax.set_xlabel("points streamed (millions)")
    ax.set_ylabel("MiB")
    ax.set_ylim(bottom=0)
    ax.set_title("10 trees, window of 100,000 points, rotating hyperplane (D = 10)")
    ax.legend(loc="lower right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    out = path.with_suffix(".png")
    fig.savefig(out, dpi=120)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
