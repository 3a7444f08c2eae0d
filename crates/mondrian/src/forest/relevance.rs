//! Relevance feature weights (`FeatureWeights::Relevance` and `RelevanceCv`), shared by
//! every forest: the impurity its splits remove per feature, the pilot forest behind the
//! weights and the cross-validation of their power.

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

use super::{mix64, TreeUnit};
use crate::data::{
    FeatureValue, FeatureWeights, RelevanceChoice, Rows, AUTO_MIN_ROWS, RELEVANCE_CV_FOLDS,
    RELEVANCE_CV_POWERS,
};
use crate::error::{MondrianError, Result};
use crate::model::{Model, Params};

/// Whether any of the trees made a split.
pub(crate) fn made_a_split<S>(trees: &[TreeUnit<S>]) -> bool {
    trees
        .iter()
        .any(|u| u.tree.root().is_some_and(|r| u.tree.children(r).is_some()))
}

/// Feature scores for [`FeatureWeights::Relevance`](crate::data::FeatureWeights): the
/// impurity each split removes, `I(node) − I(left) − I(right)` clamped at 0, summed by split
/// dimension over every split of every tree. `impurity(unit)` gives one tree's `I` indexed
/// by node (squared error for regression, n·Gini for classification).
pub(crate) fn split_relevance<S>(
    trees: &[TreeUnit<S>],
    n_features: usize,
    impurity: impl Fn(&TreeUnit<S>) -> Vec<f64>,
) -> Vec<f64> {
    let mut score = vec![0.0; n_features];
    for unit in trees {
        let Some(root) = unit.tree.root() else {
            continue;
        };
        let imp = impurity(unit);
        for j in unit.tree.subtree_preorder(root) {
            if let Some((l, r)) = unit.tree.children(j) {
                let removed = imp[j as usize] - imp[l as usize] - imp[r as usize];
                score[unit.tree.split_dimension(j)] += removed.max(0.0);
            }
        }
    }
    score
}

/// What the held-out rows of one fold say about a forest fitted without them.
pub(crate) struct HeldOut {
    /// Their loss, summed (log-loss, NLPD).
    pub(crate) loss: f64,
    /// Each row's PIT, the predictive CDF at its target, when asked for (regression).
    pub(crate) pits: Vec<f64>,
}

/// What relevance weighting asks of a model (crate-internal): the parameters of its pilot
/// and cross-validation forests, its split scores and its held-out loss. The weights
/// themselves are computed once, here, for every model.
pub(crate) trait Weighed: Model {
    /// The feature-weight setting the model was made with.
    fn weight_setting(&self) -> &FeatureWeights;
    /// The parameters of the pilot forest behind learnt weights: the model's own, with
    /// uniform weights, the pilot seed, and nothing the pilot's scores do not need.
    fn pilot_params(&self) -> Self::Params;
    /// The parameters of the forests the cross-validation of the power compares.
    fn cv_params(&self, y: &[Self::Target]) -> Self::Params;
    /// `params` with other feature weights.
    fn with_weights(params: &Self::Params, weights: FeatureWeights) -> Self::Params;
    /// `params` with another seed.
    fn with_seed(params: &Self::Params, seed: u64) -> Self::Params;
    /// The model's seed.
    fn seed(&self) -> u64;
    /// Impurity its splits remove, per feature.
    fn split_scores(&self) -> Vec<f64>;
    /// Whether any tree made a split.
    fn made_a_split(&self) -> bool;
    /// Whether the first training call, of `n_rows` rows, keeps the held-out rows' PITs of
    /// its cross-validation (to recalibrate intervals).
    fn wants_cv_pits(&self, _n_rows: usize) -> bool {
        false
    }
    /// Loss of held-out rows, weighted by `weights` (`None`: all 1) and summed (log-loss,
    /// NLPD), and each row's PIT if `pits`.
    fn held_out<T: FeatureValue>(
        &self,
        x: &[T],
        n_features: usize,
        y: &[Self::Target],
        weights: Option<&[f64]>,
        pits: bool,
    ) -> Result<HeldOut>;
    /// Batch training with sample weights (`None`: all 1).
    fn fit_rows<T: FeatureValue>(
        &mut self,
        x: &[T],
        n_features: usize,
        y: &[Self::Target],
        weights: Option<&[f64]>,
    ) -> Result<()>;
}

/// What the first training call fixes besides the scaling.
#[derive(Default)]
pub(crate) struct Initial {
    /// The feature weights (`None`: all 1).
    pub(crate) weights: Option<Vec<f64>>,
    /// The cross-validated choice behind them, if one ran.
    pub(crate) choice: Option<RelevanceChoice>,
    /// The rows' sorted cross-validated PITs at the chosen power (a row of sample weight
    /// `w` counted [`multiplicity`](super::multiplicity) times), if the model asked for
    /// them ([`Weighed::wants_cv_pits`]) and a cross-validation ran.
    pub(crate) pits: Option<Vec<f64>>,
}

/// What the first training call of `model` fixes on `rows` with sample weights `sample`
/// (`None`: all 1): the feature weights, with the cross-validated choice behind them if
/// there was one.
pub(crate) fn initial_weights<M, T>(
    model: &M,
    rows: &Rows<T>,
    y: &[M::Target],
    sample: Option<&[f64]>,
) -> Result<Initial>
where
    M: Weighed,
    T: FeatureValue,
{
    let setting = match model.weight_setting() {
        FeatureWeights::Auto if rows.n_rows() >= AUTO_MIN_ROWS => &FeatureWeights::RelevanceCv,
        FeatureWeights::Auto => &FeatureWeights::Uniform,
        other => other,
    };
    Ok(match setting {
        FeatureWeights::Uniform | FeatureWeights::Auto => Initial::default(),
        FeatureWeights::Given(w) => Initial {
            weights: Some(w.clone()),
            ..Initial::default()
        },
        FeatureWeights::Relevance { power } => Initial {
            weights: Some(relevance(model, rows, y, sample, *power)?),
            ..Initial::default()
        },
        FeatureWeights::RelevanceCv => relevance_cv(model, rows, y, sample)?,
    })
}

/// A pilot forest with uniform feature weights grown on the rows (with their sample
/// weights); its split scores give the relevance weights.
fn pilot<M, T>(model: &M, rows: &Rows<T>, y: &[M::Target], sample: Option<&[f64]>) -> Result<M>
where
    M: Weighed,
    T: FeatureValue,
{
    let mut pilot = M::with_params(model.pilot_params().check()?);
    pilot.fit_rows(rows.values(), rows.n_features(), y, sample)?;
    Ok(pilot)
}

/// [`FeatureWeights::Relevance`] at `power` (0: all 1).
fn relevance<M, T>(
    model: &M,
    rows: &Rows<T>,
    y: &[M::Target],
    sample: Option<&[f64]>,
    power: f64,
) -> Result<Vec<f64>>
where
    M: Weighed,
    T: FeatureValue,
{
    if power == 0.0 {
        return Ok(vec![1.0; rows.n_features()]);
    }
    let pilot = pilot(model, rows, y, sample)?;
    pilot_weights(
        pilot.made_a_split(),
        pilot.split_scores(),
        rows.n_rows(),
        power,
    )
}

/// [`FeatureWeights::RelevanceCv`]: the power by cross-validation, then the weights at
/// that power on all rows.
///
/// On each fold one pilot is grown on the other folds with the comparison forests'
/// parameters, uniform weights and the pilot seed: its split scores give the fold's
/// weights at every power, and it is itself the forest of power 0 (uniform weights), so a
/// fold costs one forest per power. The held-out rows' PITs under the chosen power's fold
/// forests are the cross-validated PITs a calibration needs, kept when the model asks.
/// With sample weights, folds are cut by rows (a row's copies stay together), every forest
/// is fitted with the weights and the held-out loss is weighted.
fn relevance_cv<M, T>(
    model: &M,
    rows: &Rows<T>,
    y: &[M::Target],
    sample: Option<&[f64]>,
) -> Result<Initial>
where
    M: Weighed,
    T: FeatureValue,
{
    let (n, d) = (rows.n_rows(), rows.n_features());
    let seed = pilot_seed(model.seed());
    let folds = cv_folds(n, seed, ("feature_weights", "relevance:cv"))?;
    let base = model.cv_params(y);
    let fold_pilot =
        M::with_seed(&M::with_weights(&base, FeatureWeights::Uniform), seed).check()?;
    let want_pits = model.wants_cv_pits(n);
    let powers = RELEVANCE_CV_POWERS;
    let mut loss = vec![0.0; powers.len()];
    let mut pits = vec![Vec::new(); if want_pits { powers.len() } else { 0 }];
    for held in &folds {
        let (fit_x, fit_y, val_x, val_y) = split_rows(rows, y, held);
        let (fit_w, val_w) = split_weights(sample, held);
        let mut pilot = M::with_params(fold_pilot.clone());
        pilot.fit_rows(&fit_x, d, &fit_y, fit_w.as_deref())?;
        let scores = pilot.split_scores();
        for (k, &power) in powers.iter().enumerate() {
            let weighed;
            let forest = match power {
                0.0 => &pilot,
                _ => {
                    let weights = FeatureWeights::Given(pilot_weights(
                        pilot.made_a_split(),
                        scores.clone(),
                        fit_y.len(),
                        power,
                    )?);
                    let mut f = M::with_params(M::with_weights(&base, weights).check()?);
                    f.fit_rows(&fit_x, d, &fit_y, fit_w.as_deref())?;
                    weighed = f;
                    &weighed
                }
            };
            let scored = forest.held_out(&val_x, d, &val_y, val_w.as_deref(), want_pits)?;
            loss[k] += scored.loss;
            if want_pits {
                pits[k].extend(weighted_pits(scored.pits, held, sample, seed));
            }
        }
    }
    // Every row is held out once: the loss per unit of weight.
    let total_weight = sample.map_or(n as f64, |w| w.iter().sum());
    let choice = RelevanceChoice::best_of(
        powers
            .iter()
            .zip(&loss)
            .map(|(&p, &l)| (p, l / total_weight))
            .collect(),
    );
    let chosen = powers.iter().position(|&p| p == choice.power);
    let pits = chosen.filter(|_| want_pits).map(|k| {
        let mut p = std::mem::take(&mut pits[k]);
        p.sort_by(f64::total_cmp);
        p
    });
    Ok(Initial {
        weights: Some(relevance(model, rows, y, sample, choice.power)?),
        choice: Some(choice),
        pits,
    })
}

/// The PITs of the held-out rows `held` (in order), each row counted as often as its
/// sample weight says ([`multiplicity`](super::multiplicity) without bagging, so a
/// fractional weight rounds the same way for a given seed); unchanged without weights.
pub(crate) fn weighted_pits(
    pits: Vec<f64>,
    held: &[usize],
    sample: Option<&[f64]>,
    seed: u64,
) -> Vec<f64> {
    let Some(w) = sample else {
        return pits;
    };
    let mut out = Vec::with_capacity(pits.len());
    for (&row, pit) in held.iter().zip(pits) {
        let copies = super::multiplicity(seed, 0, row as u64, w[row], false);
        out.extend(std::iter::repeat_n(pit, copies as usize));
    }
    out
}

/// The weights [`FeatureWeights::Relevance`] would learn from these rows (the pilot forest
/// of the model's parameters), without training the model.
pub(crate) fn learn_relevance<M, T>(
    model: &M,
    x: &[T],
    n_features: usize,
    y: &[M::Target],
    power: f64,
) -> Result<Vec<f64>>
where
    M: Weighed,
    T: FeatureValue,
{
    FeatureWeights::Relevance { power }.validate(None)?;
    relevance(model, &Rows::new(x, n_features)?, y, None, power)
}

/// The weights the model's first training call would fix on these rows, as weights to give
/// a stream up front: learnt ones become [`FeatureWeights::Given`], with the
/// cross-validated choice if one ran; other settings come back unchanged.
pub(crate) fn learn_feature_weights<M, T>(
    model: &M,
    x: &[T],
    n_features: usize,
    y: &[M::Target],
) -> Result<(FeatureWeights, Option<RelevanceChoice>)>
where
    M: Weighed,
    T: FeatureValue,
{
    let rows = Rows::new(x, n_features)?;
    rows.validate(None)?;
    if y.len() != rows.n_rows() {
        return Err(MondrianError::LengthMismatch {
            n_rows: rows.n_rows(),
            n_labels: y.len(),
        });
    }
    let learnt = initial_weights(model, &rows, y, None)?;
    Ok((
        learnt
            .weights
            .map_or(FeatureWeights::Uniform, FeatureWeights::Given),
        learnt.choice,
    ))
}

/// The relevance weights of a fitted pilot forest, `w_d = (score_d / max score)^power` with
/// weights below [`MIN_WEIGHT`](crate::data::MIN_WEIGHT) set to 0; all 1 when no split
/// removed anything (constant targets). An error when none of its trees could split (too
/// few points, or a single label), since its scores would then say nothing about the
/// features.
pub(crate) fn pilot_weights(
    made_a_split: bool,
    scores: Vec<f64>,
    n_rows: usize,
    power: f64,
) -> Result<Vec<f64>> {
    if !made_a_split {
        return Err(MondrianError::InvalidParameter {
            name: "feature_weights",
            reason: format!(
                "relevance weights are learnt from the first training call, and a pilot \
                 forest on its {n_rows} row(s) made no split; give a larger first batch \
                 (or learn the weights from a sample) or give the weights"
            ),
        });
    }
    let top = scores.iter().copied().fold(0.0f64, f64::max);
    if !(top > 0.0 && top.is_finite()) {
        return Ok(vec![1.0; scores.len()]);
    }
    Ok(scores
        .iter()
        .map(|s| (s / top).powf(power))
        .map(|w| if w < crate::data::MIN_WEIGHT { 0.0 } else { w })
        .collect())
}

/// The held-out folds of [`FeatureWeights::RelevanceCv`](crate::data::FeatureWeights):
/// a seeded permutation of the `n` rows cut into [`RELEVANCE_CV_FOLDS`] near-equal parts,
/// each in row order.
pub(crate) fn cv_folds(
    n: usize,
    seed: u64,
    (name, setting): (&'static str, &str),
) -> Result<Vec<Vec<usize>>> {
    let k = RELEVANCE_CV_FOLDS;
    if n < 2 * k {
        return Err(MondrianError::InvalidParameter {
            name,
            reason: format!(
                "{setting} needs at least {} rows in the first training call, got {n}",
                2 * k
            ),
        });
    }
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut order: Vec<usize> = (0..n).collect();
    order.shuffle(&mut rng);
    Ok((0..k)
        .map(|f| {
            let mut fold = order[f * n / k..(f + 1) * n / k].to_vec();
            fold.sort_unstable();
            fold
        })
        .collect())
}

/// The rows (and targets) outside the sorted row list `held`, then those in it.
pub(crate) fn split_rows<T: FeatureValue, Y: Copy>(
    rows: &Rows<T>,
    y: &[Y],
    held: &[usize],
) -> (Vec<T>, Vec<Y>, Vec<T>, Vec<Y>) {
    let (mut fit_x, mut fit_y, mut val_x, mut val_y) = (vec![], vec![], vec![], vec![]);
    let mut next = held.iter().peekable();
    for (i, &target) in y.iter().enumerate().take(rows.n_rows()) {
        let (x, t) = if next.next_if_eq(&&i).is_some() {
            (&mut val_x, &mut val_y)
        } else {
            (&mut fit_x, &mut fit_y)
        };
        x.extend_from_slice(rows.row(i));
        t.push(target);
    }
    (fit_x, fit_y, val_x, val_y)
}

/// The sample weights (if any) of the rows outside the sorted row list `held`, then of
/// those in it, as [`split_rows`] splits the rows.
pub(crate) fn split_weights(
    weights: Option<&[f64]>,
    held: &[usize],
) -> (Option<Vec<f64>>, Option<Vec<f64>>) {
    let Some(w) = weights else {
        return (None, None);
    };
    let (mut fit, mut val) = (Vec::new(), Vec::new());
    let mut next = held.iter().peekable();
    for (i, &v) in w.iter().enumerate() {
        if next.next_if_eq(&&i).is_some() {
            val.push(v);
        } else {
            fit.push(v);
        }
    }
    (Some(fit), Some(val))
}

/// Scores divided by their sum; all 0 when the sum is not positive.
pub(crate) fn shares(mut scores: Vec<f64>) -> Vec<f64> {
    let total: f64 = scores.iter().sum();
    if total > 0.0 && total.is_finite() {
        scores.iter_mut().for_each(|s| *s /= total);
    } else {
        scores.iter_mut().for_each(|s| *s = 0.0);
    }
    scores
}

/// Seed of the pilot forest behind [`FeatureWeights::Relevance`](crate::data::FeatureWeights),
/// kept apart from the forest's own trees.
pub(crate) fn pilot_seed(seed: u64) -> u64 {
    mix64(seed ^ 0x5049_4c4f_5421_0001)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RCV: (&str, &str) = ("feature_weights", "relevance:cv");

    #[test]
    fn cv_folds_partition_the_rows_in_near_equal_parts() {
        let folds = cv_folds(23, 9, RCV).unwrap();
        let mut all: Vec<usize> = folds.concat();
        all.sort_unstable();
        assert_eq!(all, (0..23).collect::<Vec<_>>());
        assert!(folds.iter().all(|f| (4..=5).contains(&f.len())));
        assert!(folds.iter().all(|f| f.windows(2).all(|w| w[0] < w[1])));
        assert_ne!(folds, cv_folds(23, 10, RCV).unwrap());
        assert!(cv_folds(9, 1, RCV).is_err());
    }

    #[test]
    fn cv_losses_and_pits_equal_a_recomputation_from_public_calls() {
        // Each reported loss is Σ over folds of the held-out −log p of a forest with this
        // forest's parameters (at most CV_MAX_TREES trees) and the weights `learn_relevance`
        // gives on the other folds, divided by the row count; power 0 is the fold's pilot
        // itself (uniform weights, the pilot seed). With Calibration::Cv the PITs kept are
        // the held-out rows' predictive CDF values under the chosen power's fold forests.
        // Rebuilt here from public calls with the same folds.
        use crate::data::{FeatureWeights, RELEVANCE_CV_POWERS};
        use crate::stats::gaussian::PredictionMode;
        use crate::{Calibration, MondrianForestRegressor, RegressorParams, CV_MAX_TREES};
        let n = 60;
        let x: Vec<f64> = (0..n * 3)
            .map(|i| ((i * 37 % 101) as f64) / 101.0)
            .collect();
        let y: Vec<f64> = x
            .chunks(3)
            .map(|r| (5.0 * r[0]).sin() + 0.1 * r[2])
            .collect();
        let params = RegressorParams {
            n_trees: CV_MAX_TREES + 3,
            min_samples_split: 3,
            mode: PredictionMode::Fast,
            seed: 11,
            feature_weights: FeatureWeights::RelevanceCv,
            calibration: Calibration::Cv,
            ..RegressorParams::thesis()
        };
        let mut cv = MondrianForestRegressor::new(params.clone()).unwrap();
        cv.fit(&x, 3, &y).unwrap();
        let choice = cv.relevance_choice().unwrap();
        let folds = cv_folds(n, pilot_seed(params.seed), RCV).unwrap();
        let fold_params = RegressorParams {
            n_trees: CV_MAX_TREES,
            calibration: Calibration::None,
            ..params.clone()
        };
        for (&power, &(p, loss)) in RELEVANCE_CV_POWERS.iter().zip(&choice.losses) {
            assert_eq!(power, p);
            let (mut total, mut pits) = (0.0, Vec::new());
            for held in &folds {
                let part = |keep: bool| -> (Vec<f64>, Vec<f64>) {
                    let rows: Vec<usize> = (0..n).filter(|i| held.contains(i) != keep).collect();
                    let xs = rows.iter().flat_map(|&i| x[3 * i..3 * i + 3].to_vec());
                    (xs.collect(), rows.iter().map(|&i| y[i]).collect())
                };
                let ((fx, fy), (vx, vy)) = (part(true), part(false));
                let probe = MondrianForestRegressor::new(fold_params.clone()).unwrap();
                let (weights, seed) = match power {
                    0.0 => (FeatureWeights::Uniform, pilot_seed(params.seed)),
                    _ => (
                        FeatureWeights::Given(probe.learn_relevance(&fx, 3, &fy, power).unwrap()),
                        params.seed,
                    ),
                };
                let mut f = MondrianForestRegressor::new(RegressorParams {
                    feature_weights: weights,
                    seed,
                    ..fold_params.clone()
                })
                .unwrap();
                f.fit(&fx, 3, &fy).unwrap();
                total -= f.log_density(&vx, 3, &vy).unwrap().iter().sum::<f64>();
                pits.extend(f.cdf(&vx, 3, &vy).unwrap());
            }
            let expected = total / n as f64;
            assert!(
                (loss - expected).abs() <= 1e-12 * expected.abs().max(1.0),
                "{power}: {loss} vs {expected}"
            );
            if power == choice.power {
                pits.sort_by(f64::total_cmp);
                assert_eq!(cv.calibration().unwrap(), &pits[..], "{power}");
            }
        }
        // The forest itself has all its trees.
        assert_eq!(cv.summary().n_trees, CV_MAX_TREES + 3);
    }

    #[test]
    fn cv_pits_equal_a_recomputation_from_public_calls() {
        // Calibration::Cv keeps, sorted, each row's predictive CDF value under a forest of
        // the same parameters (and the feature weights the call fixed) fitted on the other
        // folds. Rebuilt here from public calls with the same folds, for learnt weights.
        use crate::data::FeatureWeights;
        use crate::stats::gaussian::PredictionMode;
        use crate::{Calibration, MondrianForestRegressor, RegressorParams};
        let n = 50;
        let x: Vec<f64> = (0..n * 2).map(|i| ((i * 41 % 97) as f64) / 97.0).collect();
        let y: Vec<f64> = x.chunks(2).map(|r| (4.0 * r[0]).cos() + r[1]).collect();
        let params = RegressorParams {
            n_trees: 5,
            min_samples_split: 3,
            mode: PredictionMode::Fast,
            seed: 5,
            feature_weights: FeatureWeights::RELEVANCE,
            calibration: Calibration::Cv,
            ..RegressorParams::thesis()
        };
        let mut cal = MondrianForestRegressor::new(params.clone()).unwrap();
        cal.fit(&x, 2, &y).unwrap();
        let weights = FeatureWeights::Given(cal.feature_weights().unwrap().to_vec());
        let fold_params = RegressorParams {
            feature_weights: weights,
            calibration: Calibration::None,
            ..params.clone()
        };
        let mut expected = Vec::new();
        for held in cv_folds(n, pilot_seed(params.seed), RCV).unwrap() {
            let part = |keep: bool| -> (Vec<f64>, Vec<f64>) {
                let rows: Vec<usize> = (0..n).filter(|i| held.contains(i) != keep).collect();
                let xs = rows.iter().flat_map(|&i| x[2 * i..2 * i + 2].to_vec());
                (xs.collect(), rows.iter().map(|&i| y[i]).collect())
            };
            let ((fx, fy), (vx, vy)) = (part(true), part(false));
            let mut f = MondrianForestRegressor::new(fold_params.clone()).unwrap();
            f.fit(&fx, 2, &fy).unwrap();
            expected.extend(f.cdf(&vx, 2, &vy).unwrap());
        }
        expected.sort_by(f64::total_cmp);
        assert_eq!(cal.calibration().unwrap(), &expected[..]);
        // The trees are those of the same forest without calibration.
        let mut plain = MondrianForestRegressor::new(RegressorParams {
            calibration: Calibration::None,
            ..params
        })
        .unwrap();
        plain.fit(&x, 2, &y).unwrap();
        assert_eq!(plain.predict(&x, 2).unwrap(), cal.predict(&x, 2).unwrap());
        assert!(plain.calibration().is_none());
    }
}
