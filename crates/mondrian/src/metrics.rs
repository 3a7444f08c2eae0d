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

/// The standard normal quantile Φ⁻¹(p) for p ∈ (0, 1): Acklam's rational approximation
/// (relative error below 1.2e-9), ±∞ at 0 and 1.
pub fn normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969683028665376e1,
        2.209460984245205e2,
        -2.759285104469687e2,
        1.383_577_518_672_69e2,
        -3.066479806614716e1,
        2.506628277459239,
    ];
    const B: [f64; 5] = [
        -5.447609879822406e1,
        1.615858368580409e2,
        -1.556989798598866e2,
        6.680131188771972e1,
        -1.328068155288572e1,
    ];
    const C: [f64; 6] = [
        -7.784894002430293e-3,
        -3.223964580411365e-1,
        -2.400758277161838,
        -2.549732539343734,
        4.374664141464968,
        2.938163982698783,
    ];
    const D: [f64; 4] = [
        7.784695709041462e-3,
        3.224671290700398e-1,
        2.445134137142996,
        3.754408661907416,
    ];
    if p <= 0.0 {
        return f64::NEG_INFINITY;
    }
    if p >= 1.0 {
        return f64::INFINITY;
    }
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < 0.02425 {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - 0.02425 {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
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

    #[test]
    fn normal_quantiles_match_tables() {
        // Φ⁻¹ values from standard tables (16 digits).
        for (p, z) in [
            (0.5, 0.0),
            (0.95, 1.6448536269514722),
            (0.975, 1.959963984540054),
            (0.995, 2.5758293035489004),
            (0.01, -2.3263478740408408),
            (1e-6, -4.753424308822899),
        ] {
            assert!(
                (normal_quantile(p) - z).abs() <= 1e-8 * z.abs().max(1.0),
                "{p}"
            );
        }
    }
}
