"""An explained anomaly from real data: the California housing block groups (the features of
../shared/data/regression/california_housing.csv, without the target), a batch Mondrian Pólya
forest with min-max scaled features, its most anomalous row and why.

    target/pyenv/bin/python experiments/explain/california.py
"""

from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from mondrian_ml import MondrianPolyaForest

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "regression"

df = pd.read_csv(DATA / "california_housing.csv").drop(columns=["MedHouseVal"])
names = list(df.columns)
mpf = MondrianPolyaForest(variant="batch", feature_ranges="first_batch", random_state=0).fit(df)
score = mpf.score_samples(df)
i = int(np.argmin(score))
row = df.iloc[i]
print(f"rows {len(df)}; most anomalous: row {i}, mean leaf mass {10 ** score[i]:.2e}")
print("its values (median):")
for n in names:
    print(f"  {n:10s} {row[n]:10.2f} ({df[n].median():.2f})")
e = mpf.explain(row.to_numpy())
print("attribution:", ", ".join(f"{n} {a:.2f}" for n, a in
                                sorted(zip(names, e["attribution"]), key=lambda t: -t[1])[:4]))
critical = Counter()
for t in e["trees"]:
    step = t["steps"][t["critical_step"]]
    critical[names[step["dim"]]] += 1
print("feature of each tree's critical cut:", dict(critical.most_common()))
t = e["trees"][0]
print(f"tree 0: leaf {t['kind']}, mass {t['mass']:.2e}, region {t['encoding']}")
for s in t["steps"][:3]:
    print(f"  {names[s['dim']]} {s['side']} {s['threshold']:.2f}: share {s['share']:.4f}")
