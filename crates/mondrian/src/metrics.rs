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

/// Area under the ROC curve of `scores` (higher = more likely positive) against `labels`:
/// the Mann–Whitney statistic `(R₊ − n₊(n₊+1)/2) / (n₊·n₋)`, with `R₊` the sum of the
/// positives' ranks and tied scores given their average rank, which is the trapezoidal
/// area scikit-learn's `roc_auc_score` computes (a tied positive–negative pair counts ½).
/// Infinite scores rank like any other (`+∞` above every finite score; ties among them
/// are ties). `None` when one class is absent, when the lengths differ, or when a score is
/// NaN.
pub fn roc_auc(scores: &[f64], labels: &[bool]) -> Option<f64> {
    let order = sorted_order(scores, labels)?;
    let n_pos = labels.iter().filter(|&&l| l).count();
    let n_neg = labels.len() - n_pos;
    if n_pos == 0 || n_neg == 0 {
        return None;
    }
    // Twice the positives' rank sum, with ranks 1..n and ties at their average: a tie
    // group at positions a..b (0-based, exclusive end) has average rank (a + 1 + b) / 2.
    let mut twice_rank_sum = 0u128;
    for_each_tie_group(&order, scores, |start, end| {
        let pos = order[start..end].iter().filter(|&&i| labels[i]).count() as u128;
        twice_rank_sum += pos * (start as u128 + 1 + end as u128);
    });
    let n_pos = n_pos as u128;
    // R₊ − n₊(n₊+1)/2, doubled: exact in integers.
    let twice_u = twice_rank_sum - n_pos * (n_pos + 1);
    Some(twice_u as f64 / (2.0 * n_pos as f64 * n_neg as f64))
}

/// Average precision of `scores` (higher = more likely positive) against `labels`, as
/// scikit-learn's `average_precision_score` computes it: the step-wise sum
/// `Σₖ (Rₖ − Rₖ₋₁)·Pₖ` over the thresholds at the distinct scores, highest first, where
/// `Pₖ` and `Rₖ` are the precision and recall of calling positive every score at or above
/// the k-th threshold (tied scores enter together). `None` when there is no positive (the
/// recall is undefined), when the lengths differ, or when a score is NaN; all positives
/// give 1.
pub fn average_precision(scores: &[f64], labels: &[bool]) -> Option<f64> {
    let mut order = sorted_order(scores, labels)?;
    let n_pos = labels.iter().filter(|&&l| l).count();
    if n_pos == 0 {
        return None;
    }
    order.reverse();
    let (mut tp, mut called) = (0usize, 0usize);
    let mut total = 0.0;
    for_each_tie_group(&order, scores, |start, end| {
        let new_tp = order[start..end].iter().filter(|&&i| labels[i]).count();
        tp += new_tp;
        called += end - start;
        // Recall rises by new_tp / n_pos at this threshold, at precision tp / called.
        total += new_tp as f64 / n_pos as f64 * (tp as f64 / called as f64);
    });
    Some(total)
}

/// The indices of `scores` in ascending order, or `None` for mismatched lengths or a NaN.
fn sorted_order(scores: &[f64], labels: &[bool]) -> Option<Vec<usize>> {
    if scores.len() != labels.len() || scores.iter().any(|s| s.is_nan()) {
        return None;
    }
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[a].total_cmp(&scores[b]));
    Some(order)
}

/// Calls `group(start, end)` for each run `order[start..end]` of equal scores.
fn for_each_tie_group(order: &[usize], scores: &[f64], mut group: impl FnMut(usize, usize)) {
    let mut start = 0;
    while start < order.len() {
        let mut end = start + 1;
        // `==` rather than `total_cmp`: −0.0 and 0.0 are one score.
        while end < order.len() && scores[order[end]] == scores[order[start]] {
            end += 1;
        }
        group(start, end);
        start = end;
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
    /// AUC by its definition: the share of (positive, negative) pairs the scores order
    /// correctly, a tie counting ½.
    fn auc_by_pairs(scores: &[f64], labels: &[bool]) -> f64 {
        let (mut won, mut pairs) = (0.0, 0.0);
        for (&p, _) in scores.iter().zip(labels).filter(|(_, &l)| l) {
            for (&n, _) in scores.iter().zip(labels).filter(|(_, &l)| !l) {
                pairs += 1.0;
                won += match p.partial_cmp(&n).unwrap() {
                    std::cmp::Ordering::Greater => 1.0,
                    std::cmp::Ordering::Equal => 0.5,
                    std::cmp::Ordering::Less => 0.0,
                };
            }
        }
        won / pairs
    }

    /// AP by its definition: for each distinct score t, highest first, the precision and
    /// recall of calling positive every score ≥ t; Σ (Rₖ − Rₖ₋₁)·Pₖ.
    fn ap_by_thresholds(scores: &[f64], labels: &[bool]) -> f64 {
        let mut thresholds: Vec<f64> = scores.to_vec();
        thresholds.sort_by(|a, b| b.partial_cmp(a).unwrap());
        thresholds.dedup();
        let n_pos = labels.iter().filter(|&&l| l).count() as f64;
        let (mut ap, mut last_recall) = (0.0, 0.0);
        for t in thresholds {
            let called: Vec<usize> = (0..scores.len()).filter(|&i| scores[i] >= t).collect();
            let tp = called.iter().filter(|&&i| labels[i]).count() as f64;
            let recall = tp / n_pos;
            ap += (recall - last_recall) * tp / called.len() as f64;
            last_recall = recall;
        }
        ap
    }

    #[test]
    fn ranking_metrics_by_hand() {
        // scikit-learn's documentation example: AUC 0.75, AP 0.8333.
        let labels = [false, false, true, true];
        let scores = [0.1, 0.4, 0.35, 0.8];
        assert!((roc_auc(&scores, &labels).unwrap() - 0.75).abs() < 1e-15);
        assert!((average_precision(&scores, &labels).unwrap() - 5.0 / 6.0).abs() < 1e-15);
        // Ties: positives {0.5, 0.9, 0.5}, negatives {0.5, 0.1}. Pairs won: 1 + 1 + 1 + 1
        // and two ties at ½, so 5/6. AP: at 0.9 precision 1, recall 1/3; at 0.5 four are
        // called, three positive: 1/3·1 + 2/3·3/4 = 5/6.
        let labels = [true, false, true, false, true];
        let scores = [0.5, 0.5, 0.9, 0.1, 0.5];
        assert!((roc_auc(&scores, &labels).unwrap() - 5.0 / 6.0).abs() < 1e-15);
        assert!((average_precision(&scores, &labels).unwrap() - 5.0 / 6.0).abs() < 1e-15);
        // Out-of-domain points score +∞ and tie with each other: pairs (∞,∞) ½, (∞,2) 1,
        // (1,∞) 0, (1,2) 0, so 3/8; AP: at ∞ precision ½ recall ½, at 1 precision ½,
        // recall 1: ½·½ + ½·½ = ½.
        let inf = f64::INFINITY;
        let labels = [true, false, true, false];
        let scores = [inf, inf, 1.0, 2.0];
        assert_eq!(roc_auc(&scores, &labels), Some(0.375));
        assert_eq!(average_precision(&scores, &labels), Some(0.5));
        // Perfect and reversed rankings; −0.0 and 0.0 are one score.
        assert_eq!(roc_auc(&[0.0, 1.0], &[false, true]), Some(1.0));
        assert_eq!(roc_auc(&[1.0, 0.0], &[false, true]), Some(0.0));
        assert_eq!(roc_auc(&[-0.0, 0.0], &[false, true]), Some(0.5));
        assert_eq!(average_precision(&[-0.0, 0.0], &[false, true]), Some(0.5));
        // Every positive: AP 1 (as scikit-learn); AUC undefined.
        assert_eq!(average_precision(&[0.3, 0.1], &[true, true]), Some(1.0));
        assert_eq!(roc_auc(&[0.3, 0.1], &[true, true]), None);
        // Undefined: a class absent, a NaN, lengths that differ.
        assert_eq!(roc_auc(&[0.3, 0.1], &[false, false]), None);
        assert_eq!(average_precision(&[0.3, 0.1], &[false, false]), None);
        assert_eq!(roc_auc(&[f64::NAN, 0.1], &[true, false]), None);
        assert_eq!(average_precision(&[f64::NAN, 0.1], &[true, false]), None);
        assert_eq!(roc_auc(&[0.1], &[true, false]), None);
        assert_eq!(roc_auc(&[], &[]), None);
    }

    #[test]
    fn ranking_metrics_match_their_definitions() {
        // Pseudo-random scores on few values (many ties), some ±∞, and labels.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for case in 0..200 {
            let n = 2 + (next() % 60) as usize;
            let levels = 1 + next() % 8;
            let scores: Vec<f64> = (0..n)
                .map(|_| match next() % 20 {
                    0 => f64::INFINITY,
                    1 => f64::NEG_INFINITY,
                    _ => (next() % levels) as f64 * 0.25 - 0.5,
                })
                .collect();
            let mut labels: Vec<bool> = (0..n).map(|_| next() % 3 == 0).collect();
            labels[0] = true;
            labels[1] = false;
            let auc = roc_auc(&scores, &labels).unwrap();
            let ap = average_precision(&scores, &labels).unwrap();
            assert!(
                (auc - auc_by_pairs(&scores, &labels)).abs() < 1e-12,
                "case {case}"
            );
            assert!(
                (ap - ap_by_thresholds(&scores, &labels)).abs() < 1e-12,
                "case {case}"
            );
        }
    }
}
