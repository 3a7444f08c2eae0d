#!/usr/bin/env bash
# Two builds of the CLI alternated run by run on the same data (the VM's speed drifts, so
# only interleaved runs compare): batch fit and predict seconds and the log-loss (which a
# change meant to keep the model must leave equal), one line per run.
#
# Usage (from the repository root): experiments/classification/build_ab.sh BIN_A BIN_B REPS DATA...
# e.g. experiments/classification/build_ab.sh /tmp/mondrian-before target/release/mondrian 5 satimage dna usps
set -euo pipefail
a=$1 b=$2 reps=$3
shift 3
data=${DATA_DIR:-../shared/data/classification}
for ds in "$@"; do
  train=$data/${ds}_train.csv
  [ -f "$train" ] || train=$train.gz
  test=$data/${ds}_test.csv
  for _ in $(seq 1 "$reps"); do
    for bin in "$a" "$b"; do
      "$bin" eval --train "$train" --test "$test" --threads 1 --json |
        python3 -c "import json, sys; d = json.load(sys.stdin); print('$ds', '$bin', 'fit %.3f predict %.3f log_loss %.10f' % (d['train_seconds'], d['predict_seconds'], d['log_loss']))"
    done
  done
done
