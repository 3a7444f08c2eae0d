//! CSV: one header row, then rows of numeric cells separated by commas; the **last**
//! column is the label / target. Cells may be surrounded by whitespace and may be quoted.
//! Blank lines are skipped.

use std::path::Path;

use super::{parse_f64, show, trim, DataError, Dataset};

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

/// What the columns hold.
#[derive(Clone, Copy, Debug)]
pub(super) enum Mode {
    /// Training data: label in the last column; `hint` = required number of features.
    Labelled { hint: Option<usize> },
    /// Prediction input: `n_features` columns, optionally followed by a label.
    Features { n_features: usize },
    /// Every column is a feature (density and anomaly input; the caller drops columns).
    Unlabelled,
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

/// Reads CSV text with a header row.
pub(super) fn parse(path: &Path, data: &[u8], mode: Mode) -> Result<Dataset, DataError> {
    let mut rdr = reader(data);
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
        Mode::Labelled { hint } => {
            if ncols < 2 {
                let looks_svm = super::libsvm::looks_like(data);
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
        Mode::Features { n_features } => {
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
        Mode::Unlabelled => (ncols, false),
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
        named: true,
    })
}

fn show_name(b: &[u8]) -> String {
    String::from_utf8_lossy(trim(b)).into_owned()
}

/// A reader that leaves the header and the row lengths to the caller.
fn reader(data: &[u8]) -> csv::Reader<&[u8]> {
    csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(data)
}

/// The 1-based line of data row `row` (0-based, after the header).
pub(super) fn row_line(data: &[u8], row: usize) -> Option<usize> {
    let mut rdr = reader(data);
    let mut rec = csv::ByteRecord::new();
    let mut lines = LineCounter::new(data);
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
