//! Reading data sets for the `mondrian` command.
//!
//! Two formats are understood, each optionally gzip-compressed:
//!
//! * **CSV** (`*.csv`, `*.csv.gz`): one header row, then rows of numeric cells
//!   separated by commas; the **last** column is the label / target. Cells may be
//!   surrounded by whitespace and may be quoted. Blank lines are skipped.
//! * **LIBSVM** (`*.libsvm`, `*.svm`, optionally `.gz`): `label idx:val idx:val ...`
//!   with 1-based, strictly increasing indices; a missing index means 0. The width
//!   is the largest index seen, or `n_features_hint` when that is larger. Blank lines
//!   and `#` comments are skipped, `qid:` tokens (SVMlight) are ignored. Feature `i`
//!   (0-based) of the result is LIBSVM index `i + 1` and is named `x{i}`.
//!
//! Any other extension (`.txt`, `.t`, `.tr`, `.scale`, `.val`, none, ...) is decided by
//! the content: if the first data line looks like `label idx:val ...` the file is
//! read as LIBSVM, otherwise as CSV. Gzip is recognised by a `.gz` suffix or by the
//! gzip magic bytes.
//!
//! Every value must be a finite number: NaN and ±infinity are rejected, naming the
//! line and the column. All errors name the file and (where there is one) the
//! 1-based line number. Nothing in here panics on any input.

use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// A dense data set: `n_rows() × n_features` features in row-major order, plus labels.
#[derive(Debug, Clone, PartialEq)]
pub struct Dataset {
    /// Features, row-major: row `i` is `x[i * n_features .. (i + 1) * n_features]`.
    pub x: Vec<f64>,
    /// Number of feature columns.
    pub n_features: usize,
    /// Labels / targets exactly as read (CSV: last column; LIBSVM: first token).
    /// Empty for prediction input without a label column (see [`read_features`]).
    pub labels: Vec<f64>,
    /// Feature names: the CSV header (without the label column), or `x0, x1, ...`
    /// for LIBSVM.
    pub feature_names: Vec<String>,
}

impl Dataset {
    /// Number of rows (data points).
    pub fn n_rows(&self) -> usize {
        self.x
            .len()
            .checked_div(self.n_features)
            .unwrap_or(self.labels.len())
    }
}

/// Everything that can go wrong while reading a data set. Each variant names the
/// file; all but [`DataError::Io`], [`DataError::Empty`] and [`DataError::TooLarge`]
/// also carry the 1-based line number (of the uncompressed text).
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// The file is missing or cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    /// The file is named `.gz` / starts like gzip but cannot be decompressed.
    #[error("{}:{line}: corrupt gzip data (decompression failed at line {line} of the uncompressed text): {message}", path.display())]
    Gzip {
        path: PathBuf,
        line: usize,
        message: String,
    },

    /// The file (after decompression) is empty or holds only blank / comment lines.
    #[error("{}: the file is empty (no header and no data)", path.display())]
    Empty { path: PathBuf },

    /// A CSV file with a header row but no data rows.
    #[error("{}:{line}: the file has a header row but no data rows", path.display())]
    NoRows { path: PathBuf, line: usize },

    /// The CSV header row is unusable (too few columns, or it looks like data).
    #[error("{}:{line}: bad header row: {message}", path.display())]
    BadHeader {
        path: PathBuf,
        line: usize,
        message: String,
    },

    /// The file's number of feature columns differs from the one required
    /// (`n_features_hint` for CSV, `n_features` for prediction input).
    #[error("{}:{line}: {message}", path.display())]
    FeatureMismatch {
        path: PathBuf,
        line: usize,
        /// Number of features required.
        expected: usize,
        /// Number of columns found in the file.
        found: usize,
        message: String,
    },

    /// A CSV row whose number of columns differs from the header's.
    #[error("{}:{line}: the row has {found} columns but the header has {expected}", path.display())]
    ColumnCount {
        path: PathBuf,
        line: usize,
        expected: usize,
        found: usize,
    },

    /// A CSV cell that is not a number.
    #[error("{}:{line}: {column}: `{value}` is not a number", path.display())]
    NotANumber {
        path: PathBuf,
        line: usize,
        /// Which column, e.g. "column 3 (`x2`)".
        column: String,
        value: String,
    },

    /// NaN or ±infinity (or a number too large for f64) in a feature or label.
    #[error("{}:{line}: {column}: `{value}` is not a finite number (NaN and infinities are not allowed)", path.display())]
    NonFinite {
        path: PathBuf,
        line: usize,
        /// Which column, e.g. "column 3 (`x2`)", "the label", "feature index 7".
        column: String,
        value: String,
    },

    /// A malformed LIBSVM token.
    #[error("{}:{line}: bad LIBSVM token `{token}`: {message}", path.display())]
    BadToken {
        path: PathBuf,
        line: usize,
        token: String,
        message: String,
    },

    /// LIBSVM feature indices that are not strictly increasing within a line.
    #[error("{}:{line}: LIBSVM feature indices must be strictly increasing, but index {index} follows {previous}", path.display())]
    IndexOrder {
        path: PathBuf,
        line: usize,
        previous: usize,
        index: usize,
    },

    /// A LIBSVM feature index larger than the given number of features.
    #[error("{}:{line}: LIBSVM feature index {index} is beyond the expected number of features ({max})", path.display())]
    IndexOutOfRange {
        path: PathBuf,
        line: usize,
        index: usize,
        max: usize,
    },

    /// The dense matrix would be unreasonably large (a LIBSVM file with huge indices).
    #[error("{}: a dense {rows} x {columns} matrix is too large to hold in memory (LIBSVM indices too large?)", path.display())]
    TooLarge {
        path: PathBuf,
        rows: usize,
        columns: usize,
    },

    /// The CSV reader itself failed (malformed CSV).
    #[error("{}:{line}: malformed CSV: {message}", path.display())]
    Csv {
        path: PathBuf,
        line: usize,
        message: String,
    },

    /// A label that is not an exact integer where class labels are required (or one too
    /// large for every integer near it to be exact in f64).
    #[error("{}:{line}: label {value} (data row {row}) {}; classification needs integer class labels", path.display(), if .value.fract() == 0.0 { "is too large (at most 2^53 = 9007199254740992 in magnitude)" } else { "is not an integer" })]
    NonIntegerLabel {
        path: PathBuf,
        line: usize,
        /// 1-based data row (not counting the header).
        row: usize,
        value: f64,
    },
}

/// Reads a labelled data set (CSV with the label in the last column, or LIBSVM).
///
/// `n_features_hint`: for LIBSVM, the minimum width (indices beyond it are an error);
/// for CSV, the number of feature columns the file must have (plus the label).
pub fn read_dataset(path: &Path, n_features_hint: Option<usize>) -> Result<Dataset, DataError> {
    let data = load(path)?;
    match detect(path, &data) {
        Format::Csv => parse_csv(
            path,
            &data,
            CsvMode::Labelled {
                hint: n_features_hint,
            },
        ),
        Format::Libsvm => parse_libsvm(path, &data, n_features_hint),
    }
}

/// Reads prediction input with `n_features` features.
///
/// CSV (with a header): `n_features + 1` columns → the last one is the label (kept in
/// `labels`); `n_features` columns → no labels (`labels` is empty); anything else is
/// a [`DataError::FeatureMismatch`]. LIBSVM: labels are read as usual, width is
/// `n_features` and larger indices are an error.
pub fn read_features(path: &Path, n_features: usize) -> Result<Dataset, DataError> {
    let data = load(path)?;
    match detect(path, &data) {
        Format::Csv => parse_csv(path, &data, CsvMode::Features { n_features }),
        Format::Libsvm => parse_libsvm(path, &data, Some(n_features)),
    }
}

/// Converts the labels to integers; each must be an exact integer (`3`, `3.0`, `-1`
/// are fine, `2.5` is an error naming its line in `path`). An unlabelled data set
/// gives an empty vector.
pub fn integer_labels(ds: &Dataset, path: &Path) -> Result<Vec<i64>, DataError> {
    // Largest magnitude at which every integer is exactly representable in f64.
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    let mut out = Vec::with_capacity(ds.labels.len());
    for (i, &v) in ds.labels.iter().enumerate() {
        if v.fract() == 0.0 && v.abs() <= EXACT {
            out.push(v as i64);
        } else {
            let line = data_row_line(path, i).unwrap_or_else(|| guess_row_line(path, i));
            return Err(DataError::NonIntegerLabel {
                path: path.to_path_buf(),
                line,
                row: i + 1,
                value: v,
            });
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------
// Loading and format detection

/// No dense matrix larger than this many cells (8 GiB of f64) is built.
const MAX_CELLS: usize = 1 << 30;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Csv,
    Libsvm,
}

/// Lower-cased file name.
fn file_name_lower(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default()
}

/// The extension before an optional `.gz`, lower-cased ("" if none).
fn inner_ext(path: &Path) -> String {
    let name = file_name_lower(path);
    let stem = name.strip_suffix(".gz").unwrap_or(&name);
    match stem.rfind('.') {
        Some(i) if i > 0 => stem[i + 1..].to_string(),
        _ => String::new(),
    }
}

/// Reads the whole file, decompressing gzip, and strips a UTF-8 BOM.
fn load(path: &Path) -> Result<Vec<u8>, DataError> {
    let raw = fs::read(path).map_err(|source| DataError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let gz_name = file_name_lower(path).ends_with(".gz");
    let gz_magic = raw.len() >= 2 && raw[0] == 0x1f && raw[1] == 0x8b;
    let mut data = if gz_name || gz_magic {
        if raw.is_empty() {
            return Err(DataError::Empty {
                path: path.to_path_buf(),
            });
        }
        if !gz_magic {
            return Err(DataError::Gzip {
                path: path.to_path_buf(),
                line: 1,
                message: "not gzip data (the gzip magic bytes are missing)".into(),
            });
        }
        let mut out = Vec::with_capacity(raw.len().saturating_mul(4));
        let mut dec = flate2::read::MultiGzDecoder::new(&raw[..]);
        if let Err(e) = dec.read_to_end(&mut out) {
            let line = out.iter().filter(|&&b| b == b'\n').count() + 1;
            return Err(DataError::Gzip {
                path: path.to_path_buf(),
                line,
                message: e.to_string(),
            });
        }
        out
    } else {
        raw
    };
    if data.starts_with(b"\xEF\xBB\xBF") {
        data.drain(..3);
    }
    if data.iter().all(|b| b.is_ascii_whitespace()) {
        return Err(DataError::Empty {
            path: path.to_path_buf(),
        });
    }
    Ok(data)
}

fn detect(path: &Path, data: &[u8]) -> Format {
    match inner_ext(path).as_str() {
        "csv" => Format::Csv,
        "libsvm" | "svm" => Format::Libsvm,
        _ => {
            if looks_like_libsvm(data) {
                Format::Libsvm
            } else {
                Format::Csv
            }
        }
    }
}

/// Whether the first data line has the shape `label idx:val ...`.
fn looks_like_libsvm(data: &[u8]) -> bool {
    let Some(line) = data
        .split(|&b| b == b'\n')
        .map(libsvm_content)
        .find(|l| !l.is_empty())
    else {
        return false;
    };
    let mut toks = tokens(line);
    let Some(label) = toks.next() else {
        return false;
    };
    if label.contains(&b':') || label.contains(&b',') || parse_f64(label).is_none() {
        return false;
    }
    toks.all(|t| {
        if t.starts_with(b"qid:") {
            return true;
        }
        match t.iter().position(|&b| b == b':') {
            Some(p) => p > 0 && t[..p].iter().all(u8::is_ascii_digit) && !t.contains(&b','),
            None => false,
        }
    })
}

// ---------------------------------------------------------------------------------
// Small helpers

fn trim(b: &[u8]) -> &[u8] {
    let mut s = 0;
    let mut e = b.len();
    while s < e && b[s].is_ascii_whitespace() {
        s += 1;
    }
    while e > s && b[e - 1].is_ascii_whitespace() {
        e -= 1;
    }
    &b[s..e]
}

/// Parses a (trimmed) number; `None` if it is not one. May return NaN / ±inf.
fn parse_f64(b: &[u8]) -> Option<f64> {
    std::str::from_utf8(trim(b)).ok()?.parse::<f64>().ok()
}

/// A cell or token for an error message: lossy UTF-8, at most 40 characters.
fn show(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(trim(b));
    if s.chars().count() > 40 {
        let mut t: String = s.chars().take(40).collect();
        t.push('…');
        t
    } else {
        s.into_owned()
    }
}

/// A LIBSVM line without `\r`, comment and surrounding whitespace.
fn libsvm_content(line: &[u8]) -> &[u8] {
    let line = match line.iter().position(|&b| b == b'#') {
        Some(p) => &line[..p],
        None => line,
    };
    trim(line)
}

fn tokens(line: &[u8]) -> impl Iterator<Item = &[u8]> {
    line.split(|b| b.is_ascii_whitespace())
        .filter(|t| !t.is_empty())
}

fn is_blank_record(rec: &csv::ByteRecord) -> bool {
    rec.len() == 1 && trim(&rec[0]).is_empty()
}

/// Turns byte offsets into 1-based line numbers. (The csv crate's own line count
/// leaves out blank lines, so lines are counted here from the byte offsets.)
struct LineCounter<'a> {
    data: &'a [u8],
    pos: usize,
    line: usize,
}

impl<'a> LineCounter<'a> {
    fn new(data: &'a [u8]) -> Self {
        LineCounter {
            data,
            pos: 0,
            line: 1,
        }
    }

    /// The line of byte offset `byte`; offsets must not decrease between calls.
    fn line_at(&mut self, byte: usize) -> usize {
        let byte = byte.min(self.data.len());
        if byte > self.pos {
            self.line += self.data[self.pos..byte]
                .iter()
                .filter(|&&b| b == b'\n')
                .count();
            self.pos = byte;
        }
        self.line
    }

    /// The line where `rec` starts. The csv crate reports the position before the
    /// blank lines it skipped, so line ends at that offset are stepped over first
    /// (a record never starts with `\r` or `\n`).
    fn record_line(&mut self, rec: &csv::ByteRecord) -> usize {
        match rec.position() {
            Some(p) => {
                let mut b = usize::try_from(p.byte()).unwrap_or(usize::MAX);
                while b < self.data.len() && matches!(self.data[b], b'\n' | b'\r') {
                    b += 1;
                }
                self.line_at(b)
            }
            None => self.line,
        }
    }
}

fn csv_error(path: &Path, e: csv::Error, lines: &mut LineCounter) -> DataError {
    let line = match e.position() {
        Some(p) => lines.line_at(usize::try_from(p.byte()).unwrap_or(usize::MAX)),
        None => lines.line,
    };
    DataError::Csv {
        path: path.to_path_buf(),
        line,
        message: e.to_string(),
    }
}

// ---------------------------------------------------------------------------------
// CSV

#[derive(Clone, Copy, Debug)]
enum CsvMode {
    /// Training data: label in the last column; `hint` = required number of features.
    Labelled { hint: Option<usize> },
    /// Prediction input: `n_features` columns, optionally followed by a label.
    Features { n_features: usize },
}

/// Whether every header cell is numeric, except for the plain column numbering
/// `0,1,2,...` or `1,2,3,...` (as written by e.g. pandas for unnamed columns).
fn header_looks_like_data(rec: &csv::ByteRecord) -> bool {
    let all_numeric = rec.iter().all(|c| parse_f64(c).is_some());
    if !all_numeric {
        return false;
    }
    let as_index = |c: &[u8]| -> Option<usize> {
        let c = trim(c);
        if c.is_empty() || !c.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(c).ok()?.parse::<usize>().ok()
    };
    let numbering = |start: usize| {
        rec.iter()
            .enumerate()
            .all(|(i, c)| as_index(c) == Some(i + start))
    };
    !(numbering(0) || numbering(1))
}

fn parse_csv(path: &Path, data: &[u8], mode: CsvMode) -> Result<Dataset, DataError> {
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(data);
    let mut rec = csv::ByteRecord::new();
    let mut lines = LineCounter::new(data);

    // Header: the first non-blank record.
    loop {
        let got = rdr
            .read_byte_record(&mut rec)
            .map_err(|e| csv_error(path, e, &mut lines))?;
        if !got {
            return Err(DataError::Empty {
                path: path.to_path_buf(),
            });
        }
        if !is_blank_record(&rec) {
            break;
        }
    }
    let header_line = lines.record_line(&rec);
    let ncols = rec.len();
    let names: Vec<String> = rec.iter().map(show_name).collect();

    if header_looks_like_data(&rec) {
        return Err(DataError::BadHeader {
            path: path.to_path_buf(),
            line: header_line,
            message: "the first line looks like data, not a header; CSV files need one header \
                      row naming the columns (e.g. x0,x1,...,label)"
                .into(),
        });
    }

    let (n_features, has_label) = match mode {
        CsvMode::Labelled { hint } => {
            if ncols < 2 {
                let looks_svm = looks_like_libsvm(data);
                return Err(DataError::BadHeader {
                    path: path.to_path_buf(),
                    line: header_line,
                    message: format!(
                        "found {ncols} column; need at least 2 (features, then the label in the \
                         last column). {}",
                        if looks_svm {
                            "This looks like LIBSVM data: give the file a .libsvm or .svm extension."
                        } else {
                            "Is the delimiter a comma?"
                        }
                    ),
                });
            }
            let nf = ncols - 1;
            if let Some(h) = hint {
                if h != nf {
                    return Err(DataError::FeatureMismatch {
                        path: path.to_path_buf(),
                        line: header_line,
                        expected: h,
                        found: ncols,
                        message: format!(
                            "expected {} columns ({h} features + the label), found {ncols} \
                             ({nf} features + the label)",
                            h.saturating_add(1)
                        ),
                    });
                }
            }
            (nf, true)
        }
        CsvMode::Features { n_features } => {
            if ncols == n_features {
                (n_features, false)
            } else if Some(ncols) == n_features.checked_add(1) {
                (n_features, true)
            } else {
                return Err(DataError::FeatureMismatch {
                    path: path.to_path_buf(),
                    line: header_line,
                    expected: n_features,
                    found: ncols,
                    message: format!(
                        "expected {n_features} columns (the features) or {} (the features and a \
                         label), found {ncols}",
                        n_features.saturating_add(1)
                    ),
                });
            }
        }
    };
    let feature_names = names[..n_features].to_vec();

    let column_desc = |j: usize| -> String {
        if has_label && j == n_features {
            format!("column {} (the label `{}`)", j + 1, names[j])
        } else {
            format!("column {} (`{}`)", j + 1, names[j])
        }
    };
    let cell = |b: &[u8], line: usize, j: usize| -> Result<f64, DataError> {
        match parse_f64(b) {
            Some(v) if v.is_finite() => Ok(v),
            Some(_) => Err(DataError::NonFinite {
                path: path.to_path_buf(),
                line,
                column: column_desc(j),
                value: show(b),
            }),
            None => Err(DataError::NotANumber {
                path: path.to_path_buf(),
                line,
                column: column_desc(j),
                value: if trim(b).is_empty() {
                    "(empty)".into()
                } else {
                    show(b)
                },
            }),
        }
    };

    // Rough size guess: each cell takes at least 2 bytes.
    let mut x: Vec<f64> = Vec::with_capacity((data.len() / 8).min(1 << 24));
    let mut labels: Vec<f64> = Vec::new();
    let mut n_rows = 0usize;
    loop {
        let got = rdr
            .read_byte_record(&mut rec)
            .map_err(|e| csv_error(path, e, &mut lines))?;
        if !got {
            break;
        }
        if is_blank_record(&rec) {
            continue;
        }
        let line = lines.record_line(&rec);
        if rec.len() != ncols {
            return Err(DataError::ColumnCount {
                path: path.to_path_buf(),
                line,
                expected: ncols,
                found: rec.len(),
            });
        }
        for j in 0..n_features {
            x.push(cell(&rec[j], line, j)?);
        }
        if has_label {
            labels.push(cell(&rec[n_features], line, n_features)?);
        }
        n_rows += 1;
    }
    if n_rows == 0 {
        return Err(DataError::NoRows {
            path: path.to_path_buf(),
            line: header_line,
        });
    }
    x.shrink_to_fit();
    Ok(Dataset {
        x,
        n_features,
        labels,
        feature_names,
    })
}

fn show_name(b: &[u8]) -> String {
    String::from_utf8_lossy(trim(b)).into_owned()
}

// ---------------------------------------------------------------------------------
// LIBSVM

fn parse_libsvm(path: &Path, data: &[u8], hint: Option<usize>) -> Result<Dataset, DataError> {
    let bad = |line: usize, tok: &[u8], message: String| DataError::BadToken {
        path: path.to_path_buf(),
        line,
        token: show(tok),
        message,
    };
    let non_finite = |line: usize, column: String, tok: &[u8]| DataError::NonFinite {
        path: path.to_path_buf(),
        line,
        column,
        value: show(tok),
    };

    let mut labels: Vec<f64> = Vec::new();
    let mut entries: Vec<(u32, f64)> = Vec::new(); // (0-based index, value)
    let mut row_ends: Vec<usize> = Vec::new();
    let mut max_index = 0usize;

    for (i, raw_line) in data.split(|&b| b == b'\n').enumerate() {
        let line = i + 1;
        let content = libsvm_content(raw_line);
        if content.is_empty() {
            continue;
        }
        let mut toks = tokens(content);
        let Some(label_tok) = toks.next() else {
            continue;
        };
        if label_tok.contains(&b':') {
            return Err(bad(
                line,
                label_tok,
                "each line must start with a label before the index:value pairs".into(),
            ));
        }
        let label = match parse_f64(label_tok) {
            Some(v) if v.is_finite() => v,
            Some(_) => return Err(non_finite(line, "the label".into(), label_tok)),
            None => {
                return Err(bad(
                    line,
                    label_tok,
                    "the label is not a number (multi-label data is not supported)".into(),
                ))
            }
        };
        let mut prev = 0usize;
        for tok in toks {
            if tok.starts_with(b"qid:") {
                continue;
            }
            let Some(colon) = tok.iter().position(|&b| b == b':') else {
                return Err(bad(line, tok, "expected index:value".into()));
            };
            let (idx_b, val_b) = (&tok[..colon], &tok[colon + 1..]);
            let index = if !idx_b.is_empty() && idx_b.iter().all(u8::is_ascii_digit) {
                std::str::from_utf8(idx_b)
                    .ok()
                    .and_then(|s| s.parse::<u32>().ok())
            } else {
                None
            };
            let Some(index) = index else {
                return Err(bad(
                    line,
                    tok,
                    "the feature index is not a positive integer (at most 4294967295)".into(),
                ));
            };
            let index = index as usize;
            if index == 0 {
                return Err(bad(
                    line,
                    tok,
                    "feature indices are 1-based; index 0 is not allowed".into(),
                ));
            }
            if index <= prev {
                return Err(DataError::IndexOrder {
                    path: path.to_path_buf(),
                    line,
                    previous: prev,
                    index,
                });
            }
            if let Some(h) = hint {
                if index > h {
                    return Err(DataError::IndexOutOfRange {
                        path: path.to_path_buf(),
                        line,
                        index,
                        max: h,
                    });
                }
            }
            let value = match parse_f64(val_b) {
                Some(v) if v.is_finite() => v,
                Some(_) => {
                    return Err(non_finite(line, format!("feature index {index}"), val_b));
                }
                None => {
                    return Err(bad(
                        line,
                        tok,
                        format!("the value for index {index} is not a number"),
                    ))
                }
            };
            prev = index;
            max_index = max_index.max(index);
            entries.push(((index - 1) as u32, value));
        }
        labels.push(label);
        row_ends.push(entries.len());
    }

    if labels.is_empty() {
        return Err(DataError::Empty {
            path: path.to_path_buf(),
        });
    }
    let n_rows = labels.len();
    let width = max_index.max(hint.unwrap_or(0));
    let too_large = || DataError::TooLarge {
        path: path.to_path_buf(),
        rows: n_rows,
        columns: width,
    };
    let cells = n_rows.checked_mul(width).ok_or_else(too_large)?;
    if cells > MAX_CELLS {
        return Err(too_large());
    }
    let mut x: Vec<f64> = Vec::new();
    x.try_reserve_exact(cells).map_err(|_| too_large())?;
    x.resize(cells, 0.0);
    let mut start = 0usize;
    for (r, &end) in row_ends.iter().enumerate() {
        let row = &mut x[r * width..(r + 1) * width];
        for &(j, v) in &entries[start..end] {
            row[j as usize] = v;
        }
        start = end;
    }
    Ok(Dataset {
        x,
        n_features: width,
        labels,
        feature_names: (0..width).map(|i| format!("x{i}")).collect(),
    })
}

// ---------------------------------------------------------------------------------
// Locating a data row's line (for error messages after parsing)

/// The 1-based line of data row `row` (0-based) in `path`, found by re-reading it.
fn data_row_line(path: &Path, row: usize) -> Option<usize> {
    let data = load(path).ok()?;
    match detect(path, &data) {
        Format::Csv => {
            let mut rdr = csv::ReaderBuilder::new()
                .has_headers(false)
                .flexible(true)
                .from_reader(&data[..]);
            let mut rec = csv::ByteRecord::new();
            let mut lines = LineCounter::new(&data);
            let mut seen_header = false;
            let mut r = 0usize;
            while rdr.read_byte_record(&mut rec).ok()? {
                if is_blank_record(&rec) {
                    continue;
                }
                if !seen_header {
                    seen_header = true;
                    continue;
                }
                if r == row {
                    return Some(lines.record_line(&rec));
                }
                r += 1;
            }
            None
        }
        Format::Libsvm => {
            let mut r = 0usize;
            for (i, l) in data.split(|&b| b == b'\n').enumerate() {
                if libsvm_content(l).is_empty() {
                    continue;
                }
                if r == row {
                    return Some(i + 1);
                }
                r += 1;
            }
            None
        }
    }
}

/// Best guess of a row's line when the file cannot be re-read: no blank lines.
fn guess_row_line(path: &Path, row: usize) -> usize {
    match inner_ext(path).as_str() {
        "libsvm" | "svm" | "t" | "tr" | "scale" | "val" => row + 1,
        _ => row + 2,
    }
}

// ---------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::atomic::{AtomicUsize, Ordering};

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
            | DataError::NonIntegerLabel { line, .. } => Some(*line),
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
        assert!(matches!(e, DataError::BadHeader { .. }), "{e:?}");
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
        assert!(
            matches!(
                e,
                DataError::IndexOutOfRange {
                    line: 2,
                    index: 3,
                    max: 2,
                    ..
                }
            ),
            "{e:?}"
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
        assert!(matches!(e, DataError::Io { .. }), "{e:?}");
        assert!(e.to_string().contains("does-not-exist.csv"), "{e}");
        let e = read_features(&p, 3).unwrap_err();
        assert!(matches!(e, DataError::Io { .. }), "{e:?}");
    }

    #[test]
    fn err_directory() {
        let e = read_dataset(&std::env::temp_dir(), None).unwrap_err();
        assert!(matches!(e, DataError::Io { .. }), "{e:?}");
    }

    #[test]
    fn err_gzip_corrupt() {
        let good = gz(CSV.as_bytes());
        // Truncated stream.
        let e = dataset_error("p.csv.gz", &good[..good.len() / 2]);
        assert!(matches!(e, DataError::Gzip { .. }), "{e:?}");
        // Corrupted CRC / body.
        let mut bad = good.clone();
        let n = bad.len();
        bad[n - 6] ^= 0xff;
        let e = dataset_error("q.csv.gz", &bad);
        assert!(matches!(e, DataError::Gzip { .. }), "{e:?}");
        // Magic bytes followed by garbage.
        let e = dataset_error("r.csv.gz", b"\x1f\x8bthis is not deflate data at all");
        assert!(matches!(e, DataError::Gzip { line: 1, .. }), "{e:?}");
        // Plain text named .gz.
        let e = dataset_error("s.csv.gz", CSV.as_bytes());
        assert!(matches!(e, DataError::Gzip { line: 1, .. }), "{e:?}");
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
            assert!(matches!(e, DataError::Empty { .. }), "{name}: {e:?}");
            let e = read_features(f.path(), 2).unwrap_err();
            assert!(matches!(e, DataError::Empty { .. }), "{name}: {e:?}");
        }
    }

    #[test]
    fn err_header_only() {
        for content in ["a,b,label\n", "a,b,label", "\na,b,label\n\n\n"] {
            let f = tmp("v.csv", content.as_bytes());
            let e = read_dataset(f.path(), None).unwrap_err();
            assert!(matches!(e, DataError::NoRows { .. }), "{e:?}");
            let e = read_features(f.path(), 2).unwrap_err();
            assert!(matches!(e, DataError::NoRows { .. }), "{e:?}");
        }
        let e = dataset_error("v2.csv", b"\n\na,b,label\n");
        assert!(matches!(e, DataError::NoRows { line: 3, .. }), "{e:?}");
    }

    #[test]
    fn err_bad_header() {
        // Only one column.
        let e = dataset_error("w.csv", b"label\n1\n2\n");
        assert!(matches!(e, DataError::BadHeader { line: 1, .. }), "{e:?}");
        // Semicolon-separated: one column.
        let f = tmp("w2.csv", b"a;b;label\n1;2;3\n");
        let e = read_dataset(f.path(), None).unwrap_err();
        assert!(e.to_string().contains("delimiter"), "{e}");
        // No header at all.
        let e = dataset_error("w3.csv", b"0.5,2,1\n0.25,3,0\n");
        assert!(matches!(e, DataError::BadHeader { line: 1, .. }), "{e:?}");
        assert!(e.to_string().contains("header"), "{e}");
    }

    #[test]
    fn err_feature_mismatch() {
        let f = tmp("x.csv", CSV.as_bytes());
        let e = read_dataset(f.path(), Some(3)).unwrap_err();
        assert!(
            matches!(
                e,
                DataError::FeatureMismatch {
                    line: 1,
                    expected: 3,
                    found: 3,
                    ..
                }
            ),
            "{e:?}"
        );
        for n in [0, 1, 4] {
            let e = read_features(f.path(), n).unwrap_err();
            assert!(
                matches!(
                    e,
                    DataError::FeatureMismatch {
                        line: 1,
                        found: 3,
                        ..
                    }
                ),
                "{n}: {e:?}"
            );
        }
        let e = read_features(f.path(), usize::MAX).unwrap_err();
        assert!(matches!(e, DataError::FeatureMismatch { .. }), "{e:?}");
    }

    #[test]
    fn err_column_count() {
        let e = dataset_error("y.csv", b"a,b,label\n1,2,0\n1,2\n");
        assert!(
            matches!(
                e,
                DataError::ColumnCount {
                    line: 3,
                    expected: 3,
                    found: 2,
                    ..
                }
            ),
            "{e:?}"
        );
        let e = dataset_error("y2.csv", b"a,b,label\n\n1,2,0,7\n");
        assert!(
            matches!(
                e,
                DataError::ColumnCount {
                    line: 3,
                    expected: 3,
                    found: 4,
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(e.to_string().contains(":3:"), "{e}");
        // CRLF, whitespace-only and blank lines, a quoted multi-line header cell.
        let e = dataset_error(
            "y3.csv",
            b"\"a\nb\",c,label\r\n \r\n\r\n1,2,0\r\n\r\n1,2\r\n",
        );
        assert!(
            matches!(
                e,
                DataError::ColumnCount {
                    line: 7,
                    found: 2,
                    ..
                }
            ),
            "{e:?}"
        );
        // Prediction input: rows must match the header too.
        let f = tmp("y4.csv", b"a,b\n1,2\n1,2,3\n");
        let e = read_features(f.path(), 2).unwrap_err();
        assert!(matches!(e, DataError::ColumnCount { line: 3, .. }), "{e:?}");
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
        assert!(matches!(e, DataError::NotANumber { line: 2, .. }), "{e:?}");
        assert!(e.to_string().contains("(empty)"), "{e}");
        // Non-numeric label.
        let e = dataset_error("z3.csv", b"a,b,label\n1,2,cat\n");
        assert!(matches!(e, DataError::NotANumber { line: 2, .. }), "{e:?}");
        assert!(e.to_string().contains("label"), "{e}");
        // Invalid UTF-8.
        let e = dataset_error("z4.csv", b"a,b,label\n1,\xff\xfe,0\n");
        assert!(matches!(e, DataError::NotANumber { line: 2, .. }), "{e:?}");
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
        assert!(matches!(e, DataError::NonFinite { line: 2, .. }), "{e:?}");
        // LIBSVM: value and label.
        let e = dataset_error("nf.libsvm", b"1 1:2\n1 1:nan\n");
        assert!(matches!(e, DataError::NonFinite { line: 2, .. }), "{e:?}");
        assert!(e.to_string().contains("feature index 1"), "{e}");
        let e = dataset_error("nf2.libsvm", b"1 1:2\ninf 1:1\n");
        assert!(matches!(e, DataError::NonFinite { line: 2, .. }), "{e:?}");
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
            assert!(
                matches!(e, DataError::BadToken { line: 2, .. }),
                "{content:?}: {e:?}"
            );
        }
    }

    #[test]
    fn err_index_order() {
        let e = dataset_error("io.libsvm", b"1 1:2 3:4\n0 3:1 2:1\n");
        assert!(
            matches!(
                e,
                DataError::IndexOrder {
                    line: 2,
                    previous: 3,
                    index: 2,
                    ..
                }
            ),
            "{e:?}"
        );
        let e = dataset_error("io2.libsvm", b"1 1:2 1:4\n");
        assert!(matches!(e, DataError::IndexOrder { line: 1, .. }), "{e:?}");
    }

    #[test]
    fn err_index_out_of_range() {
        let f = tmp("ir.libsvm", b"1 1:2 3:4\n0 5:1\n");
        let e = read_dataset(f.path(), Some(4)).unwrap_err();
        assert!(
            matches!(
                e,
                DataError::IndexOutOfRange {
                    line: 2,
                    index: 5,
                    max: 4,
                    ..
                }
            ),
            "{e:?}"
        );
    }

    #[test]
    fn err_too_large() {
        let e = dataset_error("tl.libsvm", b"1 4000000000:1\n0 1:1\n");
        assert!(matches!(e, DataError::TooLarge { rows: 2, .. }), "{e:?}");
        let f = tmp("tl2.libsvm", b"1 1:1\n");
        let e = read_dataset(f.path(), Some(usize::MAX)).unwrap_err();
        assert!(matches!(e, DataError::TooLarge { .. }), "{e:?}");
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
        assert!(
            matches!(
                e,
                DataError::NonIntegerLabel {
                    line: 6,
                    row: 3,
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(
            e.to_string().contains(":6:") && e.to_string().contains("2.5"),
            "{e}"
        );
        // LIBSVM, with a comment line.
        let f = tmp("nl.libsvm", b"# c\n1 1:1\n0.5 1:2\n");
        let ds = read_dataset(f.path(), None).unwrap();
        let e = integer_labels(&ds, f.path()).unwrap_err();
        assert!(
            matches!(
                e,
                DataError::NonIntegerLabel {
                    line: 3,
                    row: 2,
                    ..
                }
            ),
            "{e:?}"
        );
        // Too large for exact i64 conversion.
        let f = tmp("nl2.csv", b"a,label\n1,1e300\n");
        let ds = read_dataset(f.path(), None).unwrap();
        let e = integer_labels(&ds, f.path()).unwrap_err();
        assert!(
            matches!(e, DataError::NonIntegerLabel { line: 2, .. }),
            "{e:?}"
        );
        // The file is gone: the line is guessed.
        let ds = Dataset {
            x: vec![0.0, 0.0],
            n_features: 1,
            labels: vec![1.0, f64::NAN],
            feature_names: vec!["a".into()],
        };
        let e = integer_labels(&ds, &tmp_path("gone.csv")).unwrap_err();
        assert!(
            matches!(
                e,
                DataError::NonIntegerLabel {
                    line: 3,
                    row: 2,
                    ..
                }
            ),
            "{e:?}"
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
}
