//! Reading data sets for the `mondrian` command.
//!
//! Two formats are understood, each optionally gzip-compressed: CSV ([`csv`]: `*.csv`,
//! `*.csv.gz`) and LIBSVM ([`libsvm`]: `*.libsvm`, `*.svm`, optionally `.gz`).
//!
//! Any other extension (`.txt`, `.t`, `.tr`, `.scale`, `.val`, none, ...) is decided by
//! the content: if the first data line looks like `label idx:val ...` the file is
//! read as LIBSVM, otherwise as CSV. Gzip is recognised by a `.gz` suffix or by the
//! gzip magic bytes.
//!
//! Every value must be a finite number: NaN and ±infinity are rejected, naming the
//! line and the column. All errors name the file and (where there is one) the
//! 1-based line number. Nothing in here panics on any input.

mod csv;
mod libsvm;
#[cfg(test)]
mod tests;

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
    /// Whether the file named its features (a CSV header), rather than the names being
    /// made up (LIBSVM).
    pub named: bool,
}

impl Dataset {
    /// Number of rows (data points).
    pub fn n_rows(&self) -> usize {
        self.x
            .len()
            .checked_div(self.n_features)
            .unwrap_or(self.labels.len())
    }

    /// The features of row `i` (`i < n_rows()`).
    pub fn row(&self, i: usize) -> &[f64] {
        &self.x[i * self.n_features..(i + 1) * self.n_features]
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

    /// A label other than 0 or 1 where anomaly labels are required.
    #[error("{}:{line}: label {value} (data row {row}) is not 0 or 1; the last column must be the anomaly label, 0 (normal) or 1 (anomaly)", path.display())]
    NonBinaryLabel {
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
        Format::Csv => csv::parse(
            path,
            &data,
            csv::Mode::Labelled {
                hint: n_features_hint,
            },
        ),
        Format::Libsvm => libsvm::parse(path, &data, n_features_hint),
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
        Format::Csv => csv::parse(path, &data, csv::Mode::Features { n_features }),
        Format::Libsvm => libsvm::parse(path, &data, Some(n_features)),
    }
}

/// Reads a data set whose columns are all features (CSV; the caller leaves out any it does
/// not want), or LIBSVM, whose labels are read but are not features.
pub fn read_unlabelled(path: &Path) -> Result<Dataset, DataError> {
    let data = load(path)?;
    match detect(path, &data) {
        Format::Csv => csv::parse(path, &data, csv::Mode::Unlabelled),
        Format::Libsvm => libsvm::parse(path, &data, None),
    }
}

/// The labels as anomaly flags: each must be 0 (normal) or 1 (anomaly); any other value is
/// an error naming its line in `path`.
pub fn binary_labels(ds: &Dataset, path: &Path) -> Result<Vec<bool>, DataError> {
    ds.labels
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            if v == 0.0 || v == 1.0 {
                Ok(v == 1.0)
            } else {
                Err(DataError::NonBinaryLabel {
                    path: path.to_path_buf(),
                    line: data_row_line(path, i).unwrap_or_else(|| guess_row_line(path, i)),
                    row: i + 1,
                    value: v,
                })
            }
        })
        .collect()
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

/// Whether `path` is `-`, which names standard input.
pub fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Reads the whole file (standard input for `-`), decompressing gzip, and strips a UTF-8
/// BOM.
fn load(path: &Path) -> Result<Vec<u8>, DataError> {
    let read = if is_stdin(path) {
        let mut raw = Vec::new();
        std::io::stdin().lock().read_to_end(&mut raw).map(|_| raw)
    } else {
        fs::read(path)
    };
    let raw = read.map_err(|source| DataError::Io {
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
            if libsvm::looks_like(data) {
                Format::Libsvm
            } else {
                Format::Csv
            }
        }
    }
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

// ---------------------------------------------------------------------------------
// Locating a data row's line (for error messages after parsing)

/// The 1-based line of data row `row` (0-based) in `path`, found by re-reading it.
fn data_row_line(path: &Path, row: usize) -> Option<usize> {
    let data = load(path).ok()?;
    match detect(path, &data) {
        Format::Csv => csv::row_line(&data, row),
        Format::Libsvm => libsvm::row_line(&data, row),
    }
}

/// Best guess of a row's line when the file cannot be re-read: no blank lines.
fn guess_row_line(path: &Path, row: usize) -> usize {
    match inner_ext(path).as_str() {
        "libsvm" | "svm" | "t" | "tr" | "scale" | "val" => row + 1,
        _ => row + 2,
    }
}
