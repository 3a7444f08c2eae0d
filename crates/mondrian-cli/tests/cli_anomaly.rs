//! `mondrian anomaly score`, `mondrian anomaly eval` and `mondrian density`: what they
//! compute on real and made-up data, and every bad input refused with one line, exit code
//! 2, and nothing written.

mod common;

use common::*;
use std::path::{Path, PathBuf};

/// The shipped ODDS wine anomaly set: 129 rows, 13 features, 10 anomalies (rows 1–10).
fn wine() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../datasets/anomaly_wine.csv")
}

/// `mondrian anomaly eval --json` on `input` with extra arguments.
fn eval_json(input: &Path, extra: &[&str]) -> serde_json::Value {
    last_json(
        mondrian()
            .args(["anomaly", "eval", "--json", "--input"])
            .arg(input)
            .args(extra),
    )
}

/// `mondrian anomaly score` on `input` with extra arguments, written to `out`: the file's
/// header and rows, split at commas.
fn score_rows(input: &Path, out: &Path, extra: &[&str]) -> (Vec<String>, Vec<Vec<String>>) {
    mondrian()
        .args(["anomaly", "score", "--input"])
        .arg(input)
        .arg("--output")
        .arg(out)
        .args(extra)
        .assert()
        .success();
    let text = std::fs::read_to_string(out).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap().split(',').map(String::from).collect();
    let rows = lines
        .map(|l| l.split(',').map(String::from).collect())
        .collect();
    (header, rows)
}

/// Column `name` of `rows` as numbers (`inf` reads as +∞).
fn column(header: &[String], rows: &[Vec<String>], name: &str) -> Vec<f64> {
    let j = header.iter().position(|h| h == name).unwrap();
    rows.iter().map(|r| r[j].parse::<f64>().unwrap()).collect()
}

/// The last column of a CSV file as 0/1 labels.
fn labels(path: &Path) -> Vec<bool> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| l.rsplit(',').next().unwrap().trim() == "1")
        .collect()
}

/// ROC-AUC by its definition: the share of (anomaly, normal) pairs ranked correctly, a tie
/// counting ½.
fn auc_by_pairs(scores: &[f64], labels: &[bool]) -> f64 {
    let (mut won, mut pairs) = (0.0, 0.0);
    for (&a, _) in scores.iter().zip(labels).filter(|(_, &l)| l) {
        for (&n, _) in scores.iter().zip(labels).filter(|(_, &l)| !l) {
            pairs += 1.0;
            won += if a > n {
                1.0
            } else if a == n {
                0.5
            } else {
                0.0
            };
        }
    }
    won / pairs
}

/// Average precision by its definition: Σ (Rₖ − Rₖ₋₁)·Pₖ over the distinct scores.
fn ap_by_thresholds(scores: &[f64], labels: &[bool]) -> f64 {
    let mut thresholds = scores.to_vec();
    thresholds.sort_by(|a, b| b.partial_cmp(a).unwrap());
    thresholds.dedup();
    let n_pos = labels.iter().filter(|&&l| l).count() as f64;
    let (mut ap, mut last) = (0.0, 0.0);
    for t in thresholds {
        let called: Vec<usize> = (0..scores.len()).filter(|&i| scores[i] >= t).collect();
        let tp = called.iter().filter(|&&i| labels[i]).count() as f64;
        ap += (tp / n_pos - last) * tp / called.len() as f64;
        last = tp / n_pos;
    }
    ap
}

#[test]
fn eval_matches_the_scores_that_score_writes() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("scores.csv");
    let truth = labels(&wine());
    // (eval flags, the score flags of the same protocol)
    let cases: [(&[&str], &[&str]); 2] = [
        (&[], &[]),
        (
            &["--stream", "--window", "40"],
            &["--stream", "--window", "40"],
        ),
    ];
    for (eval_flags, score_flags) in cases {
        let v = eval_json(&wine(), &[&["--trees", "30"], eval_flags].concat());
        let (header, rows) = score_rows(&wine(), &out, &[&["--trees", "30"], score_flags].concat());
        assert_eq!(
            header,
            ["score", "mass", "log_density", "out_of_domain"],
            "the `anomaly` column is not a feature and no explanation was asked"
        );
        assert_eq!(rows.len(), 129, "one line per row");
        let scores = column(&header, &rows, "score");
        let masses = column(&header, &rows, "mass");
        for (s, m) in scores.iter().zip(&masses) {
            assert!(*m > 0.0 && *m <= 1.0, "{m}");
            assert!((s + m.log10()).abs() < 1e-12, "score = −log10 mass");
        }
        let auc = v["roc_auc"].as_f64().unwrap();
        let ap = v["average_precision"].as_f64().unwrap();
        assert!((auc - auc_by_pairs(&scores, &truth)).abs() < 1e-12, "{v}");
        assert!(
            (ap - ap_by_thresholds(&scores, &truth)).abs() < 1e-12,
            "{v}"
        );
        assert_eq!(v["n"], 129);
        assert_eq!(v["n_anomalies"], 10);
        assert_eq!(v["n_features"], 13);
        assert_eq!(v["n_out_of_domain"], 0, "in-sample rows lie in the domain");
        assert_eq!(v["trees"], 30);
        assert_eq!(v["seed"], 0);
        assert!(v["seconds"].as_f64().unwrap() > 0.0);
        assert_eq!(v["groups"], serde_json::json!([30]));
    }
}

#[test]
fn eval_reports_its_protocol_and_finds_wine_anomalies() {
    let batch = eval_json(&wine(), &[]);
    assert_eq!(batch["variant"], "batch");
    assert_eq!(batch["protocol"], "fit-then-score");
    assert!(batch["window"].is_null() && batch["shuffle"].is_null());
    assert_eq!(batch["trees"], 100);
    // A ranking unrelated to the labels has AUC 0.5 with standard deviation
    // √((n₊ + n₋ + 1) / (12 n₊ n₋)) = √(130 / 14280) = 0.095 (Mann–Whitney); 0.85 is 3.7
    // of them above. The paper reports 0.951 ± 0.005 (bMPF) and 0.882 ± 0.013 (sMPF).
    assert!(batch["roc_auc"].as_f64().unwrap() > 0.85, "{batch}");
    let stream = eval_json(&wine(), &["--stream", "--shuffle", "0"]);
    assert_eq!(stream["variant"], "streaming");
    assert_eq!(stream["protocol"], "stream-then-score");
    assert_eq!(stream["shuffle"], 0);
    assert!(stream["roc_auc"].as_f64().unwrap() > 0.75, "{stream}");
    let window = eval_json(&wine(), &["--stream", "--window", "50", "--seed", "3"]);
    assert_eq!(window["protocol"], "insert-then-score");
    assert_eq!(window["window"], 50);
    assert_eq!(window["seed"], 3);
}

#[test]
fn shuffle_is_numpys_permutation_and_gz_reads_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // numpy.random.default_rng(0).permutation(129), printed by NumPy 2.4.
    let order: [usize; 129] = [
        126, 53, 64, 34, 122, 108, 83, 119, 71, 74, 99, 37, 72, 1, 13, 81, 11, 43, 16, 5, 110, 121,
        105, 106, 116, 39, 36, 85, 50, 75, 102, 23, 20, 92, 10, 27, 52, 88, 94, 8, 93, 9, 118, 22,
        19, 117, 100, 68, 44, 2, 4, 25, 97, 98, 86, 55, 17, 80, 111, 3, 66, 87, 42, 15, 96, 30, 35,
        28, 18, 6, 67, 65, 114, 24, 91, 57, 21, 84, 90, 82, 47, 0, 60, 70, 62, 45, 107, 26, 51, 49,
        101, 125, 123, 40, 61, 12, 127, 32, 124, 89, 46, 58, 14, 73, 38, 112, 31, 115, 104, 48, 77,
        76, 7, 109, 103, 63, 128, 69, 113, 78, 59, 54, 29, 41, 56, 120, 33, 79, 95,
    ];
    let text = std::fs::read_to_string(wine()).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    let rows: Vec<&str> = lines.collect();
    let permuted: Vec<&str> = order.iter().map(|&i| rows[i]).collect();
    let shuffled = write(
        d,
        "shuffled.csv",
        &format!("{header}\n{}\n", permuted.join("\n")),
    );
    for flags in [&["--stream"][..], &["--stream", "--window", "40"]] {
        let trees = ["--trees", "7"];
        let by_flag = eval_json(&wine(), &[flags, &trees, &["--shuffle", "0"]].concat());
        let by_file = eval_json(&shuffled, &[flags, &trees].concat());
        let in_file_order = eval_json(&wine(), &[flags, &trees].concat());
        for key in ["roc_auc", "average_precision"] {
            assert_eq!(by_flag[key], by_file[key], "{flags:?} {key}");
        }
        // The order matters to a stream (here, to the trees' draws): the test would not
        // see a shuffle that did nothing.
        assert_ne!(by_flag["roc_auc"], in_file_order["roc_auc"], "{flags:?}");
    }
    // The same file gzip-compressed reads the same.
    let gz = d.join("wine.csv.gz");
    let mut enc = flate2::write::GzEncoder::new(
        std::fs::File::create(&gz).unwrap(),
        flate2::Compression::default(),
    );
    std::io::Write::write_all(&mut enc, &std::fs::read(wine()).unwrap()).unwrap();
    enc.finish().unwrap();
    let plain = eval_json(&wine(), &["--trees", "10"]);
    let packed = eval_json(&gz, &["--trees", "10"]);
    assert_eq!(plain["roc_auc"], packed["roc_auc"]);
}

#[test]
fn stream_scores_every_row_after_its_insertion() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("s.csv");
    let (header, rows) = score_rows(
        &wine(),
        &out,
        &["--stream", "--window", "30", "--trees", "20"],
    );
    assert_eq!(rows.len(), 129);
    // Each row is inserted before it is scored, so it lies in the domain; the first is
    // the only point of every tree, whose root is then its only leaf: mass 1.
    assert!(column(&header, &rows, "out_of_domain")
        .iter()
        .all(|&o| o == 0.0));
    assert_eq!(rows[0][0], "0");
    assert_eq!(column(&header, &rows, "mass")[0], 1.0);
    // Standard input, and standard output without --output, give the same lines.
    let stdin = mondrian()
        .args([
            "anomaly", "score", "--stream", "--window", "30", "--trees", "20",
        ])
        .args(["--input", "-"])
        .pipe_stdin(wine())
        .unwrap()
        .output()
        .unwrap();
    assert!(stdin.status.success());
    assert_eq!(stdin.stdout, std::fs::read(&out).unwrap());
}

/// `n` rows of two features drifting across [0, 1.7] in `a`, with every 97th row far
/// outside the others in `b`, as numbers and as CSV text that reads back to them.
fn drifting(n: usize) -> (Vec<f64>, String) {
    let mut x = Vec::with_capacity(2 * n);
    let mut s = String::from("a,b\n");
    for i in 0..n {
        let a = 0.7 * (i as f64 / n as f64) + (i as f64 * 0.618_034) % 1.0;
        let b = (i as f64 * 0.414_214) % 1.0 + if i % 97 == 0 { 5.0 } else { 0.0 };
        x.extend([a, b]);
        s.push_str(&format!("{a},{b}\n"));
    }
    (x, s)
}

/// The streaming forest the CLI sets up for `--stream --window W --trees M` on fewer than
/// `SCALE_FROM_FEATURES` features (the raw features, the default seed and settings).
fn library_stream(trees: usize, window: usize) -> mondrian::MondrianPolyaForest {
    mondrian::MondrianPolyaForest::new(mondrian::PolyaParams {
        variant: mondrian::PolyaVariant::Streaming,
        n_trees: trees,
        window: Some(window),
        scaling: Some(mondrian::Scaling::Identity),
        ..Default::default()
    })
    .unwrap()
}

#[test]
fn streamed_output_is_the_librarys_stream_row_for_row() {
    // 9,000 rows: the CLI streams and writes them in three chunks (4,096 rows each), the
    // library here takes them in one call; every line must hold that row's numbers
    // exactly (they are written in full, so they read back to the same bits).
    let dir = tempfile::tempdir().unwrap();
    let (x, text) = drifting(9000);
    let data = write(dir.path(), "drift.csv", &text);
    let (header, rows) = score_rows(
        &data,
        &dir.path().join("s.csv"),
        &[
            "--stream",
            "--window",
            "300",
            "--trees",
            "5",
            "--threads",
            "1",
        ],
    );
    assert_eq!(header, ["score", "mass", "log_density", "out_of_domain"]);
    let want = library_stream(5, 300).score_stream(&x, 2, false).unwrap();
    assert_eq!(rows.len(), want.len(), "one line per row");
    let (score, mass) = (
        column(&header, &rows, "score"),
        column(&header, &rows, "mass"),
    );
    let log_density = column(&header, &rows, "log_density");
    let outside = column(&header, &rows, "out_of_domain");
    for (i, w) in want.iter().enumerate() {
        assert_eq!(score[i], w.anomaly_score(), "row {i}");
        assert_eq!(mass[i], w.mass, "row {i}");
        assert_eq!(log_density[i], w.log_density, "row {i}");
        assert_eq!(outside[i], f64::from(u8::from(w.out_of_domain)), "row {i}");
    }
}

#[test]
fn streamed_explanations_are_the_librarys_row_for_row() {
    // --explain writes each row as it is explained; it must be the library's explanation
    // of the row right after its insertion (window 50), and its scores those of the
    // stream without --explain.
    let dir = tempfile::tempdir().unwrap();
    let (x, text) = drifting(400);
    let data = write(dir.path(), "drift.csv", &text);
    let flags = [
        "--stream",
        "--window",
        "50",
        "--trees",
        "4",
        "--threads",
        "1",
    ];
    let (header, rows) = score_rows(
        &data,
        &dir.path().join("e.csv"),
        &[&flags[..], &["--explain"]].concat(),
    );
    let (plain_header, plain) = score_rows(&data, &dir.path().join("p.csv"), &flags);
    assert_eq!(
        header.len(),
        4 + 3 + 2 * 2,
        "two features: two top features"
    );
    assert_eq!(header[..4], plain_header[..]);
    let at = |name: &str| header.iter().position(|h| h == name).unwrap();
    let mut forest = library_stream(4, 50);
    for (i, row) in x.chunks_exact(2).enumerate() {
        forest.partial_fit(row, 2).unwrap();
        let e = forest.explain(row).unwrap();
        assert_eq!(rows[i][..4], plain[i][..], "row {i}");
        assert_eq!(rows[i][0].parse::<f64>().unwrap(), e.score.anomaly_score());
        assert_eq!(rows[i][at("n_complement")], e.n_complement.to_string());
        let top = e.top_features()[0];
        let name = ["a", "b"][top.0];
        match top.1 > 0.0 {
            true => assert_eq!(rows[i][at("top_feature_1")], name, "row {i}"),
            false => assert_eq!(rows[i][at("top_feature_1")], "", "row {i}"),
        }
    }
    assert_eq!(rows.len(), 400);
}

/// Two clusters side by side in `a` (a ∈ [0, 0.2] and a ∈ [0.8, 1]), each spread over
/// b ∈ [0, 1].
fn two_clusters(n: usize) -> String {
    let mut s = String::from("a,b\n");
    for i in 0..n {
        let a = 0.2 * ((i as f64 * 0.618_034) % 1.0) + if i % 2 == 0 { 0.0 } else { 0.8 };
        let b = (i as f64 * 0.414_214) % 1.0;
        s.push_str(&format!("{a},{b}\n"));
    }
    s
}

#[test]
fn explanations_name_the_feature_that_sets_a_row_apart() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let train = write(d, "train.csv", &two_clusters(200));
    let model = d.join("m.bin");
    score_rows(
        &train,
        &d.join("fit.csv"),
        &[
            "--variant",
            "streaming",
            "--save-model",
            model.to_str().unwrap(),
        ],
    );
    // In a cluster; in the gap between them (a = 0.5); outside the domain.
    let queries = write(d, "q.csv", "a,b\n0.1,0.5\n0.5,0.5\n0.5,3\n");
    let (header, rows) = score_rows(
        &queries,
        &d.join("q_scores.csv"),
        &["--model", model.to_str().unwrap(), "--explain"],
    );
    let at = |name: &str| header.iter().position(|h| h == name).unwrap();
    // The gap's density is lower (its mass need not be: a mass is the probability of a
    // cell, and the gap's cells are large).
    let log_density = column(&header, &rows, "log_density");
    assert!(log_density[1] < log_density[0], "{rows:?}");
    // The gap row leaves the box of the points in `a` wherever a tree has cut between the
    // clusters (an in-cluster row only leaves small boxes deep down); its mass is lost to
    // `a`.
    let n_complement = column(&header, &rows, "n_complement");
    assert!(n_complement[1] > n_complement[0], "{rows:?}");
    assert_eq!(rows[1][at("out_of_box_feature")], "a");
    assert_eq!(rows[1][at("top_feature_1")], "a");
    assert!(rows[1][at("top_share_1")].parse::<f64>().unwrap() > 0.5);
    // Outside the domain: mass 0, score and log-density infinite.
    assert_eq!(rows[2][at("score")], "inf");
    assert_eq!(rows[2][at("log_density")], "-inf");
    assert_eq!(rows[2][at("out_of_domain")], "1");
    // The saved model scores its training rows as it did when it was fit.
    let (_, again) = score_rows(
        &train,
        &d.join("again.csv"),
        &["--model", model.to_str().unwrap()],
    );
    assert_eq!(
        again,
        score_rows(&train, &d.join("fit2.csv"), &["--variant", "streaming"]).1
    );
}

#[test]
fn groups_of_trees_average_to_the_forest_score() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let data = write(d, "c.csv", &two_clusters(100));
    // The library estimates 4 trees over 100 points of 2 features at about 44 KB, 2 trees
    // at about 24 KB: a budget of 30 KB holds 2 at a time.
    let out = mondrian()
        .args([
            "anomaly",
            "score",
            "--stream",
            "--trees",
            "4",
            "--max-memory",
            "30K",
        ])
        .arg("--input")
        .arg(&data)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("in 2 groups of at most 2"), "{err}");
    let mass = |text: &[u8]| -> Vec<f64> {
        String::from_utf8_lossy(text)
            .lines()
            .skip(1)
            .map(|l| l.split(',').nth(1).unwrap().parse().unwrap())
            .collect()
    };
    let grouped = mass(&out.stdout);
    // Group 0 is the forest of the master seed's first 2 trees, group 1 that of the seed
    // SplitMix64 derives from (seed, 1).
    let run = |seed: u64| {
        let out = mondrian()
            .args(["anomaly", "score", "--stream", "--trees", "2", "--seed"])
            .arg(seed.to_string())
            .arg("--input")
            .arg(&data)
            .output()
            .unwrap();
        assert!(out.status.success());
        mass(&out.stdout)
    };
    let mut z = 0x9e37_79b9_7f4a_7c15u64;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    let (first, second) = (run(0), run(z ^ (z >> 31)));
    for i in 0..grouped.len() {
        let want = (first[i] + second[i]) / 2.0;
        assert!((grouped[i] - want).abs() < 1e-12, "row {i}");
    }
    let v = eval_json(&wine(), &["--stream", "--trees", "5", "--max-memory", "1G"]);
    assert_eq!(v["groups"], serde_json::json!([5]));
    // Not even one tree fits: refused.
    fails_with(
        mondrian()
            .args([
                "anomaly",
                "eval",
                "--stream",
                "--max-memory",
                "2K",
                "--input",
            ])
            .arg(wine()),
        "not enough memory",
    );
}

#[test]
fn density_is_in_the_units_of_the_input() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The same sample and test points scaled by 4 (exact in binary): every tree is the
    // same tree scaled, so each density is divided by 4² = 16.
    let scaled = |text: &str, c: f64| -> String {
        let mut lines = text.lines();
        let mut out = format!("{}\n", lines.next().unwrap());
        for l in lines {
            let v: Vec<String> = l
                .split(',')
                .map(|x| (x.parse::<f64>().unwrap() * c).to_string())
                .collect();
            out.push_str(&(v.join(",") + "\n"));
        }
        out
    };
    let train = two_clusters(300);
    let test = "a,b\n0.1,0.5\n0.9,0.25\n0.15,0.8\n0.5,0.5\n2,0.5\n";
    let density = |c: f64, variant: &str| {
        let tr = write(d, "tr.csv", &scaled(&train, c));
        let te = write(d, "te.csv", &scaled(test, c));
        last_json(
            mondrian()
                .args(["density", "--json", "--trees", "20", "--variant", variant])
                .arg("--train")
                .arg(tr)
                .arg("--test")
                .arg(te),
        )
    };
    for variant in ["batch", "streaming"] {
        let (one, four) = (density(1.0, variant), density(4.0, variant));
        // (2, 0.5) lies outside the box of the sample: −∞, counted apart.
        assert_eq!(one["mean_log_density"], "-inf", "{one}");
        assert_eq!(one["n_out_of_domain"], 1);
        assert_eq!(one["n_finite"], 4);
        assert_eq!(one["n"], 5);
        assert_eq!(one["n_train"], 300);
        let (a, b) = (
            one["mean_log_density_finite"].as_f64().unwrap(),
            four["mean_log_density_finite"].as_f64().unwrap(),
        );
        assert!((a - b - 16f64.ln()).abs() < 1e-9, "{variant}: {a} {b}");
    }
}

// ---------------------------------------------------------------------------------
// Bad input

/// Runs `cmd`, which must fail with exit code 2 and one line on standard error holding
/// `needle`.
fn refused(cmd: &mut assert_cmd::Command, needle: &str) {
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains(needle), "expected `{needle}` in: {err}");
}

#[test]
fn bad_input_is_refused_in_one_line_and_nothing_is_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = write(d, "scores.csv", "keep me\n");
    let score = |input: &Path, extra: &[&str]| {
        let mut cmd = mondrian();
        cmd.args(["anomaly", "score", "--input"])
            .arg(input)
            .arg("--output")
            .arg(&out)
            .args(extra);
        cmd
    };
    let eval = |input: &Path, extra: &[&str]| {
        let mut cmd = mondrian();
        cmd.args(["anomaly", "eval", "--input"])
            .arg(input)
            .args(extra);
        cmd
    };
    let nan = write(d, "nan.csv", "a,b,anomaly\n1,2,0\n3,nan,1\n");
    let inf = write(d, "inf.csv", "a,b,anomaly\n1,2,0\n3,-inf,1\n");
    let two = write(d, "two.csv", "a,b,anomaly\n1,2,0\n3,4,2\n");
    let none = write(d, "none.csv", "a,b,anomaly\n1,2,0\n3,4,0\n");
    let empty = write(d, "empty.csv", "");
    let header = write(d, "header.csv", "a,b,anomaly\n");
    for (input, needle) in [
        (
            &nan,
            "nan.csv:3: column 2 (`b`): `nan` is not a finite number",
        ),
        (
            &inf,
            "inf.csv:3: column 2 (`b`): `-inf` is not a finite number",
        ),
        (&empty, "the file is empty"),
        (&header, "has a header row but no data rows"),
    ] {
        refused(&mut score(input, &[]), needle);
        refused(&mut eval(input, &[]), needle);
    }
    refused(&mut eval(&two, &[]), "label 2 (data row 2) is not 0 or 1");
    refused(&mut eval(&none, &[]), "every label is 0");
    let ok = write(d, "ok.csv", "a,b,anomaly\n1,2,0\n3,4,1\n5,5,0\n");
    for flags in [&["--stream", "--window", "0"][..], &["--window", "3"]] {
        let needle = match flags.len() {
            3 => "invalid parameter `window`",
            _ => "--window needs --stream",
        };
        refused(&mut score(&ok, flags), needle);
        refused(&mut eval(&ok, flags), needle);
    }
    refused(
        &mut score(&ok, &["--stream", "--variant", "batch"]),
        "--stream needs the streaming forest",
    );
    refused(
        &mut score(&ok, &["--target", "c"]),
        "no column is named `c`",
    );
    refused(&mut score(&ok, &["--max-depth", "0"]), "max_depth");
    refused(&mut eval(&ok, &["--gamma", "-1"]), "gamma");

    // A saved model scores rows of its own width only.
    let model = d.join("m.bin");
    score(&ok, &["--save-model", model.to_str().unwrap()])
        .assert()
        .success();
    std::fs::write(&out, "keep me\n").unwrap();
    let wide = write(d, "wide.csv", "a,b,c\n1,2,3\n");
    refused(
        &mut score(&wide, &["--model", model.to_str().unwrap()]),
        "wide.csv: 3 feature columns, but the model",
    );
    refused(
        &mut score(&ok, &["--model", model.to_str().unwrap(), "--trees", "5"]),
        "--trees sets up a new forest",
    );
    let (_, _, classifier, _) = two_models(d);
    refused(
        &mut score(&ok, &["--model", classifier.to_str().unwrap()]),
        "mondrian-polya-forest",
    );
    refused(
        &mut score(&ok, &["--model", d.join("missing.bin").to_str().unwrap()]),
        "cannot open model",
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "keep me\n");

    // density: the test file must have the training file's columns.
    let other = write(d, "other.csv", "a,c\n1,2\n");
    let wide_test = write(d, "wide_test.csv", "a,b,c\n1,2,3\n");
    for (test, needle) in [
        (&other, "column 2 is `c`, but"),
        (&wide_test, "3 feature columns, but"),
        (&nan, "is not a finite number"),
    ] {
        refused(
            mondrian()
                .args(["density", "--train"])
                .arg(&ok)
                .arg("--test")
                .arg(test),
            needle,
        );
    }
}
