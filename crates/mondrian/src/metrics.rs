//! Evaluation metrics.

/// Fraction of predictions equal to the truth.
pub fn accuracy(predicted: &[usize], truth: &[usize]) -> f64 {
    if truth.is_empty() {
        return f64::NAN;
    }
    let hits = predicted.iter().zip(truth).filter(|(a, b)| a == b).count();
    hits as f64 / truth.len() as f64
}

/// Mean negative log probability of the true class, with probabilities clipped at `1e-15`
/// (exact zeros occur with λ = ∞, spec `mf-classification.md` §4.4). `proba` is row-major
/// with `n_classes` columns; a true class beyond the columns counts as probability 0.
pub fn log_loss(proba: &[f64], n_classes: usize, truth: &[usize]) -> f64 {
    if truth.is_empty() {
        return f64::NAN;
    }
    let total: f64 = truth
        .iter()
        .enumerate()
        .map(|(i, &y)| {
            let p = if y < n_classes {
                proba[i * n_classes + y]
            } else {
                0.0
            };
            -p.max(1e-15).ln()
        })
        .sum();
    total / truth.len() as f64
}

/// Index of the largest value, the lowest index on ties (spec §4.4).
pub fn argmax(values: &[f64]) -> usize {
    let mut best = 0;
    for (k, &v) in values.iter().enumerate() {
        if v > values[best] {
            best = k;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_by_hand() {
        assert_eq!(accuracy(&[0, 1, 2, 2], &[0, 1, 1, 2]), 0.75);
        let p = [0.5, 0.5, 0.0, 1.0];
        let ll = log_loss(&p, 2, &[0, 0]);
        assert!((ll - (0.5f64.ln().abs() + 1e-15f64.ln().abs()) / 2.0).abs() < 1e-12);
        assert_eq!(argmax(&[0.2, 0.4, 0.4]), 1);
    }
}
