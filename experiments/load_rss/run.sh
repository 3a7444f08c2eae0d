#!/usr/bin/env bash
# Peak memory of loading a model against the model file's size: `mondrian predict` of
# 1,000 letter test rows with classifiers of 10 to 300 trees trained on letter (16,000 rows),
# and regressors of 10 to 100 trees on california housing. Peak RSS is GNU time's %M.
# Usage (from the repository root, after `cargo build --release -p mondrian-cli`):
#   bash experiments/load_rss/run.sh > experiments/load_rss/results.md
set -euo pipefail
BIN=${BIN:-target/release/mondrian}
DATA=${DATA:-../shared/data}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
head -1001 "$DATA/classification/letter_test.csv" > "$WORK/letter_1k.csv"
# A regression file: the first 15,000 rows for training, the next 1,000 to predict.
head -15001 "$DATA/regression/california_housing.csv" > "$WORK/cal_train.csv"
{ head -1 "$DATA/regression/california_housing.csv"; sed -n 15002,16001p "$DATA/regression/california_housing.csv"; } > "$WORK/cal_1k.csv"
echo "| model | trees | file MB | peak RSS of predict MB | RSS / file |"
echo "|---|---:|---:|---:|---:|"
run() {  # name trees train-file input extra-flags...
    local name=$1 trees=$2 train=$3 input=$4
    shift 4
    "$BIN" train --train "$train" --model "$WORK/m.bin" --trees "$trees" --threads 1 "$@" >/dev/null 2>&1
    local bytes kb
    bytes=$(stat -c %s "$WORK/m.bin")
    kb=$( { /usr/bin/time -f "%M" "$BIN" predict --model "$WORK/m.bin" --input "$input" --threads 1 >/dev/null; } 2>&1 | tail -1)
    awk -v n="$name" -v t="$trees" -v b="$bytes" -v k="$kb" \
        'BEGIN { printf "| %s | %d | %.1f | %.1f | %.2f |\n", n, t, b/1e6, k*1024/1e6, k*1024/b }'
}
for t in 10 30 100 300; do
    run classifier "$t" "$DATA/classification/letter_train.csv" "$WORK/letter_1k.csv"
done
for t in 10 30 100; do
    run regressor "$t" "$WORK/cal_train.csv" "$WORK/cal_1k.csv" --task regression --mode fast --min-samples-split 5
done
