//! Reading good and bad files of every format: what is read, and every error names its
//! file and line.

use super::*;
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Asserts that `e` matches `pattern`; otherwise shows it, after `context` if given.
macro_rules! assert_error {
    ($e:expr, $pattern:pat) => {
        assert!(matches!($e, $pattern), "{:?}", $e)
    };
    ($e:expr, $pattern:pat, $($context:tt)+) => {
        assert!(matches!($e, $pattern), "{}: {:?}", format_args!($($context)+), $e)
    };
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A temp file that is removed when dropped.
struct Tmp(PathBuf);
impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}
impl Tmp {
    fn path(&self) -> &Path {
        &self.0
    }
}

fn tmp_path(name: &str) -> PathBuf {
    let n = COUNTER.fetch_add(1, Ordering::SeqCst);
    std::env::temp_dir().join(format!(
        "mondrian-io-test-{}-{}-{}",
        std::process::id(),
        n,
        name
    ))
}

fn tmp(name: &str, content: &[u8]) -> Tmp {
    let p = tmp_path(name);
    fs::write(&p, content).unwrap();
    Tmp(p)
}

/// The error of reading `content` as a training file named `name`.
fn dataset_error(name: &str, content: &[u8]) -> DataError {
    let f = tmp(name, content);
    read_dataset(f.path(), None).unwrap_err()
}

fn gz(content: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(content).unwrap();
    e.finish().unwrap()
}

fn line_of(e: &DataError) -> Option<usize> {
    match e {
        DataError::Gzip { line, .. }
        | DataError::NoRows { line, .. }
        | DataError::BadHeader { line, .. }
        | DataError::FeatureMismatch { line, .. }
        | DataError::ColumnCount { line, .. }
        | DataError::NotANumber { line, .. }
        | DataError::NonFinite { line, .. }
        | DataError::BadToken { line, .. }
        | DataError::IndexOrder { line, .. }
        | DataError::IndexOutOfRange { line, .. }
        | DataError::Csv { line, .. }
        | DataError::NonIntegerLabel { line, .. }
        | DataError::NonBinaryLabel { line, .. } => Some(*line),
        DataError::Io { .. } | DataError::Empty { .. } | DataError::TooLarge { .. } => None,
    }
}

const CSV: &str = "a,b,label\n1,2.5,0\n-3,4e2,1\n 5 , 6 ,2\n";

fn check_small_csv(ds: &Dataset) {
    assert_eq!(ds.n_features, 2);
    assert_eq!(ds.n_rows(), 3);
    assert_eq!(ds.x, vec![1.0, 2.5, -3.0, 400.0, 5.0, 6.0]);
    assert_eq!(ds.labels, vec![0.0, 1.0, 2.0]);
    assert_eq!(ds.feature_names, vec!["a", "b"]);
}

// ---- happy paths -------------------------------------------------------------

#[test]
fn csv_happy() {
    let f = tmp("a.csv", CSV.as_bytes());
    let ds = read_dataset(f.path(), None).unwrap();
    check_small_csv(&ds);
    assert_eq!(integer_labels(&ds, f.path()).unwrap(), vec![0, 1, 2]);
    // A matching hint is fine.
    check_small_csv(&read_dataset(f.path(), Some(2)).unwrap());
}

#[test]
fn csv_crlf_bom_quotes_blank_lines_no_final_newline() {
    let f = tmp(
        "b.csv",
        b"\xEF\xBB\xBF\"a\",b,label\r\n\r\n1,\"2.5\",0\r\n-3,4e2,1\r\n\r\n 5 , 6 ,2",
    );
    check_small_csv(&read_dataset(f.path(), None).unwrap());
}

#[test]
fn csv_gz_happy() {
    let f = tmp("c.csv.gz", &gz(CSV.as_bytes()));
    check_small_csv(&read_dataset(f.path(), None).unwrap());
    // Uppercase extension, gzip recognised by name.
    let f = tmp("C.CSV.GZ", &gz(CSV.as_bytes()));
    check_small_csv(&read_dataset(f.path(), None).unwrap());
}

#[test]
fn gzip_recognised_by_magic_bytes() {
    let f = tmp("d.csv", &gz(CSV.as_bytes()));
    check_small_csv(&read_dataset(f.path(), None).unwrap());
}

#[test]
fn unknown_extension_is_csv() {
    let f = tmp("e.data", CSV.as_bytes());
    check_small_csv(&read_dataset(f.path(), None).unwrap());
    let f = tmp("noext", CSV.as_bytes());
    check_small_csv(&read_dataset(f.path(), None).unwrap());
    let f = tmp("f.txt", CSV.as_bytes());
    check_small_csv(&read_dataset(f.path(), None).unwrap());
}

#[test]
fn pandas_style_numbered_header_is_accepted() {
    let f = tmp("g.csv", b"0,1,2\n1,2,3\n");
    let ds = read_dataset(f.path(), None).unwrap();
    assert_eq!(ds.feature_names, vec!["0", "1"]);
    assert_eq!(ds.labels, vec![3.0]);
}

const SVM: &str =
    "# comment line\n1 1:0.5 3:-2\n\n-1 2:1e-3 # trailing comment\n2.0 qid:3 3:7\n+1\n";

fn check_small_svm(ds: &Dataset, width: usize) {
    assert_eq!(ds.n_features, width);
    assert_eq!(ds.n_rows(), 4);
    assert_eq!(ds.labels, vec![1.0, -1.0, 2.0, 1.0]);
    let mut want = vec![0.0; 4 * width];
    want[0] = 0.5;
    want[2] = -2.0;
    want[width + 1] = 1e-3;
    want[2 * width + 2] = 7.0;
    assert_eq!(ds.x, want);
    let names: Vec<String> = (0..width).map(|i| format!("x{i}")).collect();
    assert_eq!(ds.feature_names, names);
}

#[test]
fn libsvm_happy() {
    for name in ["h.libsvm", "h.svm", "h.SVM"] {
        let f = tmp(name, SVM.as_bytes());
        check_small_svm(&read_dataset(f.path(), None).unwrap(), 3);
    }
    // CRLF line ends.
    let f = tmp("h2.libsvm", SVM.replace('\n', "\r\n").as_bytes());
    check_small_svm(&read_dataset(f.path(), None).unwrap(), 3);
}

#[test]
fn libsvm_hint_widens() {
    let f = tmp("i.libsvm", SVM.as_bytes());
    check_small_svm(&read_dataset(f.path(), Some(5)).unwrap(), 5);
    check_small_svm(&read_dataset(f.path(), Some(3)).unwrap(), 3);
}

#[test]
fn libsvm_gz_happy() {
    for name in ["j.libsvm.gz", "j.svm.gz", "j.scale.t.gz"] {
        let f = tmp(name, &gz(SVM.as_bytes()));
        check_small_svm(&read_dataset(f.path(), None).unwrap(), 3);
    }
}

#[test]
fn libsvm_sniffed_for_txt_t_tr_scale() {
    for name in [
        "k.txt",
        "k.scale.t",
        "k.scale.tr",
        "k.scale",
        "k.scale.val",
        "k",
    ] {
        let f = tmp(name, SVM.as_bytes());
        check_small_svm(&read_dataset(f.path(), None).unwrap(), 3);
    }
    // But an explicit .csv is always CSV: one column -> bad header.
    let e = dataset_error("k.csv", SVM.as_bytes());
    assert_error!(e, DataError::BadHeader { .. });
    assert!(e.to_string().contains("LIBSVM"), "{e}");
}

#[test]
fn features_csv_without_label() {
    let f = tmp("l.csv", b"a,b\n1,2\n3,4\n");
    let ds = read_features(f.path(), 2).unwrap();
    assert_eq!(ds.n_features, 2);
    assert_eq!(ds.n_rows(), 2);
    assert_eq!(ds.x, vec![1.0, 2.0, 3.0, 4.0]);
    assert!(ds.labels.is_empty());
    assert_eq!(ds.feature_names, vec!["a", "b"]);
    assert_eq!(integer_labels(&ds, f.path()).unwrap(), Vec::<i64>::new());
}

#[test]
fn features_csv_with_label() {
    let f = tmp("m.csv", CSV.as_bytes());
    check_small_csv(&read_features(f.path(), 2).unwrap());
}

#[test]
fn features_libsvm() {
    let f = tmp("n.libsvm", SVM.as_bytes());
    check_small_svm(&read_features(f.path(), 4).unwrap(), 4);
    let e = read_features(f.path(), 2).unwrap_err();
    assert_error!(
        e,
        DataError::IndexOutOfRange {
            line: 2,
            index: 3,
            max: 2,
            ..
        }
    );
}

#[test]
fn integer_labels_ok() {
    let f = tmp("o.csv", b"a,label\n1,3\n2,3.0\n3,-1\n4,-0.0\n5,1e2\n");
    let ds = read_dataset(f.path(), None).unwrap();
    assert_eq!(
        integer_labels(&ds, f.path()).unwrap(),
        vec![3, 3, -1, 0, 100]
    );
}

// ---- errors --------------------------------------------------------------------

#[test]
fn err_missing_file() {
    let p = tmp_path("does-not-exist.csv");
    let e = read_dataset(&p, None).unwrap_err();
    assert_error!(e, DataError::Io { .. });
    assert!(e.to_string().contains("does-not-exist.csv"), "{e}");
    let e = read_features(&p, 3).unwrap_err();
    assert_error!(e, DataError::Io { .. });
}

#[test]
fn err_directory() {
    let e = read_dataset(&std::env::temp_dir(), None).unwrap_err();
    assert_error!(e, DataError::Io { .. });
}

#[test]
fn err_gzip_corrupt() {
    let good = gz(CSV.as_bytes());
    // Truncated stream.
    let e = dataset_error("p.csv.gz", &good[..good.len() / 2]);
    assert_error!(e, DataError::Gzip { .. });
    // Corrupted CRC / body.
    let mut bad = good.clone();
    let n = bad.len();
    bad[n - 6] ^= 0xff;
    let e = dataset_error("q.csv.gz", &bad);
    assert_error!(e, DataError::Gzip { .. });
    // Magic bytes followed by garbage.
    let e = dataset_error("r.csv.gz", b"\x1f\x8bthis is not deflate data at all");
    assert_error!(e, DataError::Gzip { line: 1, .. });
    // Plain text named .gz.
    let e = dataset_error("s.csv.gz", CSV.as_bytes());
    assert_error!(e, DataError::Gzip { line: 1, .. });
    assert!(e.to_string().contains("not gzip"), "{e}");
}

#[test]
fn err_gzip_corrupt_reports_line() {
    let mut text = String::from("a,b,label\n");
    for i in 0..20000 {
        text.push_str(&format!("{i},{},{}\n", i * 7 % 13, i % 3));
    }
    let good = gz(text.as_bytes());
    let e = dataset_error("t.csv.gz", &good[..good.len() - 100]);
    match e {
        DataError::Gzip { line, .. } => assert!(line > 1, "line {line}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn err_empty() {
    for (name, content) in [
        ("u.csv", b"".to_vec()),
        ("u2.csv", b"  \n\n \r\n".to_vec()),
        ("u3.libsvm", b"".to_vec()),
        ("u4.csv.gz", b"".to_vec()),
        ("u5.csv.gz", gz(b"")),
        ("u6.libsvm", b"# only a comment\n\n".to_vec()),
    ] {
        let f = tmp(name, &content);
        let e = read_dataset(f.path(), None).unwrap_err();
        assert_error!(e, DataError::Empty { .. }, "{name}");
        let e = read_features(f.path(), 2).unwrap_err();
        assert_error!(e, DataError::Empty { .. }, "{name}");
    }
}

#[test]
fn err_header_only() {
    for content in ["a,b,label\n", "a,b,label", "\na,b,label\n\n\n"] {
        let f = tmp("v.csv", content.as_bytes());
        let e = read_dataset(f.path(), None).unwrap_err();
        assert_error!(e, DataError::NoRows { .. });
        let e = read_features(f.path(), 2).unwrap_err();
        assert_error!(e, DataError::NoRows { .. });
    }
    let e = dataset_error("v2.csv", b"\n\na,b,label\n");
    assert_error!(e, DataError::NoRows { line: 3, .. });
}

#[test]
fn err_bad_header() {
    // Only one column.
    let e = dataset_error("w.csv", b"label\n1\n2\n");
    assert_error!(e, DataError::BadHeader { line: 1, .. });
    // Semicolon-separated: one column.
    let f = tmp("w2.csv", b"a;b;label\n1;2;3\n");
    let e = read_dataset(f.path(), None).unwrap_err();
    assert!(e.to_string().contains("delimiter"), "{e}");
    // No header at all.
    let e = dataset_error("w3.csv", b"0.5,2,1\n0.25,3,0\n");
    assert_error!(e, DataError::BadHeader { line: 1, .. });
    assert!(e.to_string().contains("header"), "{e}");
}

#[test]
fn err_feature_mismatch() {
    let f = tmp("x.csv", CSV.as_bytes());
    let e = read_dataset(f.path(), Some(3)).unwrap_err();
    assert_error!(
        e,
        DataError::FeatureMismatch {
            line: 1,
            expected: 3,
            found: 3,
            ..
        }
    );
    for n in [0, 1, 4] {
        let e = read_features(f.path(), n).unwrap_err();
        assert_error!(
            e,
            DataError::FeatureMismatch {
                line: 1,
                found: 3,
                ..
            },
            "{n}"
        );
    }
    let e = read_features(f.path(), usize::MAX).unwrap_err();
    assert_error!(e, DataError::FeatureMismatch { .. });
}

#[test]
fn err_column_count() {
    let e = dataset_error("y.csv", b"a,b,label\n1,2,0\n1,2\n");
    assert_error!(
        e,
        DataError::ColumnCount {
            line: 3,
            expected: 3,
            found: 2,
            ..
        }
    );
    let e = dataset_error("y2.csv", b"a,b,label\n\n1,2,0,7\n");
    assert_error!(
        e,
        DataError::ColumnCount {
            line: 3,
            expected: 3,
            found: 4,
            ..
        }
    );
    assert!(e.to_string().contains(":3:"), "{e}");
    // CRLF, whitespace-only and blank lines, a quoted multi-line header cell.
    let e = dataset_error(
        "y3.csv",
        b"\"a\nb\",c,label\r\n \r\n\r\n1,2,0\r\n\r\n1,2\r\n",
    );
    assert_error!(
        e,
        DataError::ColumnCount {
            line: 7,
            found: 2,
            ..
        }
    );
    // Prediction input: rows must match the header too.
    let f = tmp("y4.csv", b"a,b\n1,2\n1,2,3\n");
    let e = read_features(f.path(), 2).unwrap_err();
    assert_error!(e, DataError::ColumnCount { line: 3, .. });
}

#[test]
fn err_not_a_number() {
    let e = dataset_error("z.csv", b"a,b,label\n1,2,0\n1,abc,1\n");
    match &e {
        DataError::NotANumber {
            line,
            column,
            value,
            ..
        } => {
            assert_eq!(*line, 3);
            assert!(
                column.contains("column 2") && column.contains("`b`"),
                "{column}"
            );
            assert_eq!(value, "abc");
        }
        other => panic!("{other:?}"),
    }
    // Empty cell.
    let e = dataset_error("z2.csv", b"a,b,label\n1,,0\n");
    assert_error!(e, DataError::NotANumber { line: 2, .. });
    assert!(e.to_string().contains("(empty)"), "{e}");
    // Non-numeric label.
    let e = dataset_error("z3.csv", b"a,b,label\n1,2,cat\n");
    assert_error!(e, DataError::NotANumber { line: 2, .. });
    assert!(e.to_string().contains("label"), "{e}");
    // Invalid UTF-8.
    let e = dataset_error("z4.csv", b"a,b,label\n1,\xff\xfe,0\n");
    assert_error!(e, DataError::NotANumber { line: 2, .. });
}

#[test]
fn err_non_finite() {
    for (content, col) in [
        ("a,b,label\n1,2,0\n1,NaN,1\n", "column 2"),
        ("a,b,label\n1,2,0\ninf,2,1\n", "column 1"),
        ("a,b,label\n1,2,0\n1,2,-infinity\n", "column 3"),
        ("a,b,label\n1,2,0\n1,1e400,1\n", "column 2"),
    ] {
        let e = dataset_error("nf.csv", content.as_bytes());
        match &e {
            DataError::NonFinite { line, column, .. } => {
                assert_eq!(*line, 3);
                assert!(column.contains(col), "{column}");
            }
            other => panic!("{other:?}"),
        }
    }
    let f = tmp("nf2.csv", b"a,b\n1,nan\n");
    let e = read_features(f.path(), 2).unwrap_err();
    assert_error!(e, DataError::NonFinite { line: 2, .. });
    // LIBSVM: value and label.
    let e = dataset_error("nf.libsvm", b"1 1:2\n1 1:nan\n");
    assert_error!(e, DataError::NonFinite { line: 2, .. });
    assert!(e.to_string().contains("feature index 1"), "{e}");
    let e = dataset_error("nf2.libsvm", b"1 1:2\ninf 1:1\n");
    assert_error!(e, DataError::NonFinite { line: 2, .. });
    assert!(e.to_string().contains("label"), "{e}");
}

#[test]
fn err_bad_libsvm_token() {
    for content in [
        "1 1:2\n1 2\n",             // missing colon
        "1 1:2\n1 0:3\n",           // index 0
        "1 1:2\n1 a:3\n",           // non-numeric index
        "1 1:2\n1 -1:3\n",          // negative index
        "1 1:2\n1 2:x\n",           // non-numeric value
        "1 1:2\n1 2:\n",            // empty value
        "1 1:2\n1 :2\n",            // empty index
        "1 1:2\n1:2 2:3\n",         // no label
        "1 1:2\ncat 2:3\n",         // non-numeric label
        "1 1:2\n1,2 2:3\n",         // multi-label
        "1 1:2\n1 99999999999:1\n", // index too large for u32
    ] {
        let e = dataset_error("bt.libsvm", content.as_bytes());
        assert_error!(e, DataError::BadToken { line: 2, .. }, "{content:?}");
    }
}

#[test]
fn err_index_order() {
    let e = dataset_error("io.libsvm", b"1 1:2 3:4\n0 3:1 2:1\n");
    assert_error!(
        e,
        DataError::IndexOrder {
            line: 2,
            previous: 3,
            index: 2,
            ..
        }
    );
    let e = dataset_error("io2.libsvm", b"1 1:2 1:4\n");
    assert_error!(e, DataError::IndexOrder { line: 1, .. });
}

#[test]
fn err_index_out_of_range() {
    let f = tmp("ir.libsvm", b"1 1:2 3:4\n0 5:1\n");
    let e = read_dataset(f.path(), Some(4)).unwrap_err();
    assert_error!(
        e,
        DataError::IndexOutOfRange {
            line: 2,
            index: 5,
            max: 4,
            ..
        }
    );
}

#[test]
fn err_too_large() {
    let e = dataset_error("tl.libsvm", b"1 4000000000:1\n0 1:1\n");
    assert_error!(e, DataError::TooLarge { rows: 2, .. });
    let f = tmp("tl2.libsvm", b"1 1:1\n");
    let e = read_dataset(f.path(), Some(usize::MAX)).unwrap_err();
    assert_error!(e, DataError::TooLarge { .. });
}

#[test]
fn err_malformed_csv_never_panics() {
    // An unterminated quote: the csv crate reads to the end; we must not panic.
    let f = tmp("mq.csv", b"a,b,label\n1,\"2,0\n3,4,5\n");
    assert!(read_dataset(f.path(), None).is_err());
}

#[test]
fn err_non_integer_label_names_line() {
    // Blank lines so that the line differs from row + 2.
    let f = tmp("nl.csv", b"a,label\n1,3\n\n2,3.0\n\n3,2.5\n");
    let ds = read_dataset(f.path(), None).unwrap();
    let e = integer_labels(&ds, f.path()).unwrap_err();
    assert_error!(
        e,
        DataError::NonIntegerLabel {
            line: 6,
            row: 3,
            ..
        }
    );
    assert!(
        e.to_string().contains(":6:") && e.to_string().contains("2.5"),
        "{e}"
    );
    // LIBSVM, with a comment line.
    let f = tmp("nl.libsvm", b"# c\n1 1:1\n0.5 1:2\n");
    let ds = read_dataset(f.path(), None).unwrap();
    let e = integer_labels(&ds, f.path()).unwrap_err();
    assert_error!(
        e,
        DataError::NonIntegerLabel {
            line: 3,
            row: 2,
            ..
        }
    );
    // Too large for exact i64 conversion.
    let f = tmp("nl2.csv", b"a,label\n1,1e300\n");
    let ds = read_dataset(f.path(), None).unwrap();
    let e = integer_labels(&ds, f.path()).unwrap_err();
    assert_error!(e, DataError::NonIntegerLabel { line: 2, .. });
    // The file is gone: the line is guessed.
    let ds = Dataset {
        x: vec![0.0, 0.0],
        n_features: 1,
        labels: vec![1.0, f64::NAN],
        feature_names: vec!["a".into()],
        named: true,
    };
    let e = integer_labels(&ds, &tmp_path("gone.csv")).unwrap_err();
    assert_error!(
        e,
        DataError::NonIntegerLabel {
            line: 3,
            row: 2,
            ..
        }
    );
}

#[test]
fn every_error_names_path_and_line() {
    let f = tmp("el.csv", b"a,b,label\n1,2,0\n1,x,1\n");
    let e = read_dataset(f.path(), None).unwrap_err();
    let s = e.to_string();
    assert!(s.contains(&f.path().display().to_string()), "{s}");
    assert_eq!(line_of(&e), Some(3));
    assert!(s.contains(":3:"), "{s}");
}

/// Mutates valid inputs at random (fixed seed) and checks nothing panics.
#[test]
fn fuzz_never_panics() {
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut rnd = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let alphabet: &[u8] = b"0123456789.,:-+eE \n\r#\"naifNIqd\x1f\x8b\xff";
    let seeds: [&[u8]; 2] = [CSV.as_bytes(), SVM.as_bytes()];
    let names = ["fz.csv", "fz.libsvm", "fz.txt", "fz.csv.gz", "fz.t"];
    for iter in 0..1500 {
        let mut d = seeds[iter % 2].to_vec();
        let n_mut = 1 + (rnd() % 6) as usize;
        for _ in 0..n_mut {
            let r = rnd();
            let pos = if d.is_empty() {
                0
            } else {
                (r >> 8) as usize % (d.len() + 1)
            };
            let c = alphabet[(r >> 40) as usize % alphabet.len()];
            match r % 3 {
                0 if pos < d.len() => d[pos] = c,
                1 => d.insert(pos, c),
                _ if pos < d.len() => {
                    d.remove(pos);
                }
                _ => {}
            }
        }
        let name = names[(rnd() % names.len() as u64) as usize];
        let content = if name.ends_with(".gz") && rnd() % 2 == 0 {
            gz(&d)
        } else {
            d
        };
        let f = tmp(name, &content);
        let hint = match rnd() % 3 {
            0 => None,
            1 => Some(2),
            _ => Some(5),
        };
        if let Ok(ds) = read_dataset(f.path(), hint) {
            assert_eq!(ds.x.len(), ds.n_rows() * ds.n_features);
            assert!(ds.labels.len() == ds.n_rows());
            assert!(ds.x.iter().chain(&ds.labels).all(|v| v.is_finite()));
            let _ = integer_labels(&ds, f.path());
        }
        if let Ok(ds) = read_features(f.path(), 2) {
            assert_eq!(ds.x.len(), ds.n_rows() * 2);
            assert!(ds.labels.is_empty() || ds.labels.len() == ds.n_rows());
        }
    }
}

// ---- the shipped demo data set -------------------------------------------------

fn datasets_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../datasets")
}

#[test]
fn satimage_demo_data() {
    for (name, rows) in [
        ("satimage_train.csv.gz", 4435),
        ("satimage_test.csv.gz", 2000),
    ] {
        let p = datasets_dir().join(name);
        let ds = read_dataset(&p, None).unwrap();
        assert_eq!(ds.n_rows(), rows, "{name}");
        assert_eq!(ds.n_features, 36, "{name}");
        assert_eq!(ds.feature_names[0], "x0");
        // LIBSVM scaling to [-1, 1] with the training ranges: the test part
        // goes slightly beyond.
        let bound = if name.contains("train") { 1.0 } else { 1.2 };
        assert!(ds.x.iter().all(|v| v.abs() <= bound), "{name}");
        let y = integer_labels(&ds, &p).unwrap();
        let mut seen = [false; 6];
        for &c in &y {
            assert!((0..6).contains(&c), "{name}: label {c}");
            seen[c as usize] = true;
        }
        assert!(seen.iter().all(|&s| s), "{name}: every class occurs");
        // Prediction input with the label column present.
        let pf = read_features(&p, 36).unwrap();
        assert_eq!(pf, ds);
    }
}

#[test]
fn unlabelled_csv_reads_every_column() {
    let t = tmp("u.csv", b"a,b,anomaly\n1,2,0\n3,4,1\n");
    let ds = read_unlabelled(t.path()).unwrap();
    assert_eq!(ds.n_features, 3);
    assert_eq!(ds.x, vec![1.0, 2.0, 0.0, 3.0, 4.0, 1.0]);
    assert!(ds.labels.is_empty());
    assert_eq!(ds.feature_names, vec!["a", "b", "anomaly"]);
    // One column is enough: a one-dimensional sample.
    let t = tmp("one.csv", b"v\n0.5\n-1\n");
    assert_eq!(read_unlabelled(t.path()).unwrap().x, vec![0.5, -1.0]);
    let t = tmp("nan.csv", b"a,b\n1,nan\n");
    assert_error!(
        read_unlabelled(t.path()).unwrap_err(),
        DataError::NonFinite { line: 2, .. }
    );
}

#[test]
fn binary_labels_name_the_line_of_another_value() {
    let t = tmp("b.csv", b"a,anomaly\n1,0\n\n2,1\n3,2\n");
    let ds = read_dataset(t.path(), None).unwrap();
    let e = binary_labels(&ds, t.path()).unwrap_err();
    assert_error!(
        e,
        DataError::NonBinaryLabel {
            line: 5,
            row: 3,
            ..
        }
    );
    assert!(
        e.to_string().contains("label 2 (data row 3) is not 0 or 1"),
        "{e}"
    );
    let t = tmp("ok.csv", b"a,anomaly\n1,0\n2,1.0\n3,-0\n");
    let ds = read_dataset(t.path(), None).unwrap();
    assert_eq!(
        binary_labels(&ds, t.path()).unwrap(),
        vec![false, true, false]
    );
}
