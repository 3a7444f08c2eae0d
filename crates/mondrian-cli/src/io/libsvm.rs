//! LIBSVM: `label idx:val idx:val ...` with 1-based, strictly increasing indices; a
//! missing index means 0. The width is the largest index seen, or `n_features_hint` when
//! that is larger. Blank lines and `#` comments are skipped, `qid:` tokens (SVMlight) are
//! ignored. Feature `i` (0-based) of the result is LIBSVM index `i + 1` and is named `x{i}`.

use std::path::Path;

use super::{parse_f64, show, trim, DataError, Dataset};

/// No dense matrix larger than this many cells (8 GiB of f64) is built.
const MAX_CELLS: usize = 1 << 30;

/// Whether the first data line has the shape `label idx:val ...`.
pub(super) fn looks_like(data: &[u8]) -> bool {
    let Some(line) = data
        .split(|&b| b == b'\n')
        .map(content)
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

/// A LIBSVM line without `\r`, comment and surrounding whitespace.
fn content(line: &[u8]) -> &[u8] {
    let line = match line.iter().position(|&b| b == b'#') {
        Some(p) => &line[..p],
        None => line,
    };
    trim(line)
}

/// The whitespace-separated tokens of a line.
fn tokens(line: &[u8]) -> impl Iterator<Item = &[u8]> {
    line.split(|b| b.is_ascii_whitespace())
        .filter(|t| !t.is_empty())
}

/// Reads LIBSVM text; `hint` is the least width, and an index beyond it is an error.
pub(super) fn parse(path: &Path, data: &[u8], hint: Option<usize>) -> Result<Dataset, DataError> {
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
        let content = content(raw_line);
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
        named: false,
    })
}

/// The 1-based line of data row `row` (0-based).
pub(super) fn row_line(data: &[u8], row: usize) -> Option<usize> {
    let mut r = 0usize;
    for (i, l) in data.split(|&b| b == b'\n').enumerate() {
        if content(l).is_empty() {
            continue;
        }
        if r == row {
            return Some(i + 1);
        }
        r += 1;
    }
    None
}
