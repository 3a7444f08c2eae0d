//! Ridge regression on Mondrian kernel features (spec `mondrian-kernel.md` §3.3, §4.3) at
//! one lifetime, trained in batch or online, and the choice of the lifetime along one
//! sweep (§3.2–3.3).

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};

use super::features::{check_lifetime, Csr, KernelParams, MondrianKernel};
use super::packed::add_row_to_gram;
use super::path::LifetimePath;
use super::ridge::{IncrementalRidge, NewColumn};
use super::sweep::{run_sweep_until, Criterion, Learner, SweepPoint, SweepReport, SweepSpec};
use crate::data::{FeatureValue, Rows};
use crate::error::{MondrianError, Result};
use crate::model::Params;

/// Parameters of a [`MondrianKernelRidge`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelRidgeParams {
    /// The feature map (trees, lifetime, seed, threads).
    pub kernel: KernelParams,
    /// Ridge regulariser δ² of `‖y − Φw‖² + δ²‖w‖²` (1e-4, the paper's).
    pub delta2: f64,
    /// Most features the exact solver may hold: its dense factor takes 4·C² bytes
    /// (8192: 268 MB).
    pub max_features: usize,
}

impl Default for KernelRidgeParams {
    fn default() -> Self {
        KernelRidgeParams {
            kernel: KernelParams::default(),
            delta2: 1e-4,
            max_features: 8192,
        }
    }
}

impl Params for KernelRidgeParams {
    fn validate(&self) -> Result<()> {
        self.kernel.validate()?;
        if !(self.delta2 > 0.0 && self.delta2.is_finite()) {
            return Err(MondrianError::InvalidParameter {
                name: "delta2",
                reason: format!("{} is not a finite positive number", self.delta2),
            });
        }
        if self.max_features == 0 {
            return Err(MondrianError::InvalidParameter {
                name: "max_features",
                reason: "must be positive".into(),
            });
        }
        Ok(())
    }
}

/// Exact ridge regression on Mondrian kernel features: `w = (ΦᵀΦ + δ²I)⁻¹Φᵀ(y − c)`, c the
/// training mean (spec §3.3, A31), predictions `c + φ(x)ᵀw`. Rows given to
/// [`partial_fit`](Self::partial_fit) extend the trees (§4.1) and update the solution
/// exactly: the new features' columns, then one rank-1 update per row (§4.3).
///
/// Predictive standard deviations come from the ridge posterior read as Bayesian linear
/// regression with noise variance σ² and prior `w ~ N(0, σ²/δ² I)`: the predictive
/// variance is `σ²(1 + φᵀA⁻¹φ)`, with σ² set to its maximum-likelihood value
/// `(‖y − Φw‖² + δ²‖w‖²)/N` (the paper fixes σ² = δ², which makes sense only for targets
/// of unit scale).
///
/// ```
/// use mondrian::kernel::{KernelParams, KernelRidgeParams, MondrianKernelRidge};
/// let x: Vec<f64> = (0..200).map(|i| i as f64 / 200.0).collect();
/// let y: Vec<f64> = x.iter().map(|v| (6.0 * v).sin()).collect();
/// let params = KernelRidgeParams {
///     kernel: KernelParams { n_trees: 30, lifetime: 20.0, ..Default::default() },
///     ..Default::default()
/// };
/// let mut model = MondrianKernelRidge::new(params)?;
/// model.fit(&x, 1, &y)?;
/// let (mean, std) = model.predict_with_std(&[0.25], 1)?;
/// assert!((mean[0] - 1.5f64.sin()).abs() < 0.1 && std[0] > 0.0);
/// # Ok::<(), mondrian::MondrianError>(())
/// ```
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(try_from = "super::decode::RidgeState")]
pub struct MondrianKernelRidge {
    params: KernelRidgeParams,
    kernel: MondrianKernel,
    /// The factor of `A`; rebuilt from `rows` after loading.
    #[serde(skip)]
    ridge: Option<IncrementalRidge>,
    centre: f64,
    /// `(Φᵀ(y − c))` per column and `Σ (y − c)²`.
    b: Vec<f64>,
    y2: f64,
    /// The training rows' features (column ids, M per row), to rebuild the factor.
    rows: Vec<u32>,
    weights: Vec<f64>,
    n_train: usize,
}

impl MondrianKernelRidge {
    /// An unfitted model; the parameters are checked here.
    pub fn new(params: KernelRidgeParams) -> Result<Self> {
        params.validate()?;
        let kernel = MondrianKernel::new(params.kernel.clone())?;
        Ok(MondrianKernelRidge {
            params,
            kernel,
            ridge: None,
            centre: 0.0,
            b: Vec::new(),
            y2: 0.0,
            rows: Vec::new(),
            weights: Vec::new(),
            n_train: 0,
        })
    }

    /// A model from decoded parts (checked by the caller); the factor is rebuilt when
    /// needed.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn from_parts(
        params: KernelRidgeParams,
        kernel: MondrianKernel,
        centre: f64,
        b: Vec<f64>,
        y2: f64,
        rows: Vec<u32>,
        weights: Vec<f64>,
        n_train: usize,
    ) -> Self {
        MondrianKernelRidge {
            params,
            kernel,
            ridge: None,
            centre,
            b,
            y2,
            rows,
            weights,
            n_train,
        }
    }

    /// The parameters.
    pub fn params(&self) -> &KernelRidgeParams {
        &self.params
    }
    /// The feature map.
    pub fn kernel(&self) -> &MondrianKernel {
        &self.kernel
    }
    /// The lifetime λ.
    pub fn lifetime(&self) -> f64 {
        self.params.kernel.lifetime
    }
    /// Features C.
    pub fn n_features_out(&self) -> usize {
        self.kernel.n_features_out()
    }
    /// The weights w, by column.
    pub fn weights(&self) -> &[f64] {
        &self.weights
    }
    /// The centre c added to every prediction.
    pub fn centre(&self) -> f64 {
        self.centre
    }
    /// Training rows.
    pub fn n_train(&self) -> usize {
        self.n_train
    }

    /// Samples the trees on `x` and solves the ridge problem (row-major `x`, `n_features`
    /// per row; one target per row), replacing what the model held.
    pub fn fit<T: FeatureValue>(&mut self, x: &[T], n_features: usize, y: &[f64]) -> Result<()> {
        let n = check_targets(x, n_features, y)?;
        let mut fresh = Self::new(self.params.clone())?;
        fresh.kernel.fit(x, n_features)?;
        fresh.check_size()?;
        let phi = fresh.kernel.transform(x, n_features)?;
        debug_assert_eq!(phi.nnz(), n * fresh.params.kernel.n_trees);
        fresh.solve(&phi, y);
        *self = fresh;
        Ok(())
    }

    /// Samples the trees on every row of `x` and solves the ridge problem on the first
    /// `y.len()` of them, the others read for their positions only (no labels): the
    /// transductive protocol of the paper's experiments (spec §1.5, A2), where test rows
    /// share the trees' sampling.
    pub fn fit_transductive<T: FeatureValue>(
        &mut self,
        x: &[T],
        n_features: usize,
        y: &[f64],
    ) -> Result<()> {
        let rows = Rows::new(x, n_features)?;
        let n_train = y.len();
        if n_train == 0 || n_train > rows.n_rows() {
            return Err(MondrianError::LengthMismatch {
                n_rows: rows.n_rows(),
                n_labels: n_train,
            });
        }
        let train = &x[..n_train * n_features];
        check_targets(train, n_features, y)?;
        let mut fresh = Self::new(self.params.clone())?;
        fresh.kernel.fit(x, n_features)?;
        fresh.check_size()?;
        let phi = fresh.kernel.transform(train, n_features)?;
        fresh.solve(&phi, y);
        *self = fresh;
        Ok(())
    }

    /// The ridge solution on these training features and targets.
    fn solve(&mut self, phi: &Csr, y: &[f64]) {
        let n = y.len();
        self.centre = y.iter().sum::<f64>() / n as f64;
        self.n_train = n;
        self.rows = phi.indices.clone();
        let yc: Vec<f64> = y.iter().map(|v| v - self.centre).collect();
        self.y2 = yc.iter().map(|v| v * v).sum();
        self.b = vec![0.0; phi.n_cols];
        for (i, &v) in yc.iter().enumerate() {
            for &c in phi.row(i) {
                self.b[c as usize] += v * phi.value;
            }
        }
        self.factor();
    }

    /// Extends the trees by these rows and updates the ridge solution exactly (§4.3): the
    /// new features' columns are appended (zero but for δ² on the diagonal), then each row
    /// is a rank-1 update. Targets are centred by the first fit's mean. The first call fits.
    pub fn partial_fit<T: FeatureValue>(
        &mut self,
        x: &[T],
        n_features: usize,
        y: &[f64],
    ) -> Result<()> {
        if self.ridge.is_none() && self.n_train == 0 {
            return self.fit(x, n_features, y);
        }
        check_targets(x, n_features, y)?;
        if self.ridge.is_none() {
            self.factor();
        }
        let before = self.kernel.n_features_out();
        // Near the size limit, grow a copy first so that a refusal changes nothing.
        let worst = before + y.len() * self.params.kernel.n_trees;
        let added = if worst > self.params.max_features {
            let mut grown = self.kernel.clone();
            let added = grown.partial_fit(x, n_features)?;
            std::mem::swap(&mut self.kernel, &mut grown);
            if let Err(e) = self.check_size() {
                self.kernel = grown;
                return Err(e);
            }
            added
        } else {
            self.kernel.partial_fit(x, n_features)?
        };
        let phi = self.kernel.transform(x, n_features)?;
        let ridge = self.ridge.as_mut().expect("factored above");
        let zero: Vec<NewColumn<'_>> = (0..added).map(|_| NewColumn::new(&[], 0.0, 0.0)).collect();
        ridge.replace(None, &zero);
        self.b.resize(before + added, 0.0);
        let mut v = Vec::new();
        for (i, &target) in y.iter().enumerate() {
            let yc = target - self.centre;
            v.clear();
            v.extend(phi.row(i).iter().map(|&c| (c as usize, phi.value)));
            ridge.add_row(&v, yc);
            for &c in phi.row(i) {
                self.b[c as usize] += yc * phi.value;
            }
            self.y2 += yc * yc;
        }
        self.rows.extend_from_slice(&phi.indices);
        self.n_train += y.len();
        self.weights = ridge.weights();
        Ok(())
    }

    fn check_size(&self) -> Result<()> {
        let c = self.kernel.n_features_out();
        if c > self.params.max_features {
            return Err(MondrianError::InvalidParameter {
                name: "max_features",
                reason: format!(
                    "the trees have {c} cells, more than the {} features the exact solver \
                     may hold (its factor takes 4·C² bytes); lower the lifetime or the trees, \
                     or raise max_features",
                    self.params.max_features
                ),
            });
        }
        Ok(())
    }

    /// Factors `A = ΦᵀΦ + δ²I` from the stored rows: the Gram matrix, then one blocked
    /// dense factorisation.
    fn factor(&mut self) {
        let m = self.params.kernel.n_trees;
        let c = self.kernel.n_features_out();
        let inv_m = 1.0 / m as f64;
        // The Gram matrix's lower triangle in packed rows; rows of `self.rows` are sorted.
        let mut gram = vec![0.0; c * (c + 1) / 2];
        for row in self.rows.chunks_exact(m) {
            add_row_to_gram(&mut gram, row, inv_m);
        }
        let ridge = IncrementalRidge::from_gram(gram, self.b.clone(), self.params.delta2);
        self.weights = ridge.weights();
        self.ridge = Some(ridge);
    }

    /// Predictions `c + φ(x)ᵀw` (rows the trees never saw take the exact extension: a cell
    /// of their own contributes 0, spec §4.5).
    pub fn predict<T: FeatureValue>(&self, x: &[T], n_features: usize) -> Result<Vec<f64>> {
        if self.n_train == 0 {
            return Err(MondrianError::NotFitted);
        }
        let phi = self.kernel.transform(x, n_features)?;
        Ok(self.predict_features(&phi))
    }

    fn predict_features(&self, phi: &Csr) -> Vec<f64> {
        (0..phi.n_rows)
            .map(|i| {
                self.centre
                    + phi.value
                        * phi
                            .row(i)
                            .iter()
                            .map(|&c| self.weights[c as usize])
                            .sum::<f64>()
            })
            .collect()
    }

    /// The noise variance σ² = (‖y − Φw‖² + δ²‖w‖²)/N (see the type's docs).
    pub fn noise_variance(&self) -> f64 {
        let dot_wb: f64 = self.weights.iter().zip(&self.b).map(|(w, b)| w * b).sum();
        // ‖y − Φw‖² + δ²‖w‖² = yᵀy − wᵀb, since A w = b.
        ((self.y2 - dot_wb) / self.n_train as f64).max(0.0)
    }

    /// Predictive means and standard deviations `σ√(1 + φᵀA⁻¹φ)`, where φ includes the
    /// features a row opens in the trees where it lies in a cell of its own (untrained:
    /// each adds its prior variance), so rows far from the data get wide intervals.
    pub fn predict_with_std<T: FeatureValue>(
        &mut self,
        x: &[T],
        n_features: usize,
    ) -> Result<(Vec<f64>, Vec<f64>)> {
        if self.n_train == 0 {
            return Err(MondrianError::NotFitted);
        }
        if self.ridge.is_none() {
            self.factor();
        }
        let phi = self.kernel.transform(x, n_features)?;
        let mean = self.predict_features(&phi);
        let ridge = self.ridge.as_ref().expect("factored above");
        let s2 = self.noise_variance();
        let (m, delta2) = (self.params.kernel.n_trees, self.params.delta2);
        let mut buf = Vec::new();
        let mut v = Vec::new();
        let std = (0..phi.n_rows)
            .map(|i| {
                v.clear();
                v.extend(phi.row(i).iter().map(|&c| (c as usize, phi.value)));
                // A tree where the row lies in a cell of its own adds a feature no row has
                // trained: its column of A is δ² alone, so it adds (1/M)/δ² (§4.3 step 1).
                let own = (m - phi.row(i).len()) as f64 / (m as f64 * delta2);
                (s2 * (1.0 + ridge.inverse_quadratic_with(&v, &mut buf) + own)).sqrt()
            })
            .collect();
        Ok((mean, std))
    }

    /// The exact log marginal likelihood of the training targets (spec §3.3 with σ_w = 1,
    /// σ_y² = δ²; the full formula, A3).
    pub fn log_marginal_likelihood(&mut self) -> Result<f64> {
        if self.n_train == 0 {
            return Err(MondrianError::NotFitted);
        }
        if self.ridge.is_none() {
            self.factor();
        }
        let ridge = self.ridge.as_ref().expect("factored above");
        let w2: f64 = self.weights.iter().map(|w| w * w).sum();
        let dot_wb: f64 = self.weights.iter().zip(&self.b).map(|(w, b)| w * b).sum();
        let rss = (self.y2 - dot_wb - self.params.delta2 * w2).max(0.0);
        Ok(super::ridge::log_marginal_likelihood(
            rss,
            w2,
            ridge.log_det(),
            self.weights.len(),
            self.n_train,
            self.params.delta2,
        ))
    }

    /// Chooses the lifetime along one sweep (spec §3.2–3.3), then fits the model at the
    /// chosen one. The trees are sampled once, to the largest lifetime, on every row; the
    /// ridge solution is exact at every lifetime read. With [`Criterion::Validation`], a
    /// shuffled `validation_fraction` of the rows is held out and scored by squared error;
    /// with [`Criterion::Evidence`], every row trains and the log marginal likelihood
    /// decides. With `patience`, the sweep stops after that many readings in a row that do
    /// not improve on the best score. The final model is the one [`fit`](Self::fit) gives at
    /// the chosen lifetime (same trees, by the time-ordered sampling), trained on every row.
    /// Returns it with the score of each lifetime in the caller's order (lower is better:
    /// validation MSE or minus the log marginal likelihood; NaN where the sweep stopped
    /// before it).
    pub fn fit_cv<T: FeatureValue>(
        params: KernelRidgeParams,
        x: &[T],
        n_features: usize,
        y: &[f64],
        search: &LifetimeSearch,
    ) -> Result<(Self, Vec<f64>)> {
        let LifetimeSearch {
            lifetimes,
            criterion,
            validation_fraction,
            patience,
        } = search;
        let (criterion, validation_fraction) = (*criterion, *validation_fraction);
        params.validate()?;
        if *patience == Some(0) {
            return Err(MondrianError::InvalidParameter {
                name: "patience",
                reason: "at least one reading without improvement must be allowed".into(),
            });
        }
        let n = check_targets(x, n_features, y)?;
        let mut grid = lifetimes.to_vec();
        if grid.is_empty() {
            return Err(MondrianError::InvalidParameter {
                name: "lifetimes",
                reason: "the search needs at least one lifetime".into(),
            });
        }
        for &l in &grid {
            check_lifetime("lifetimes", l)?;
        }
        grid.sort_by(f64::total_cmp);
        grid.dedup();
        let n_val = match criterion {
            Criterion::Validation => {
                if !(validation_fraction > 0.0 && validation_fraction < 1.0) {
                    return Err(MondrianError::InvalidParameter {
                        name: "validation_fraction",
                        reason: format!("{validation_fraction} is not in (0, 1)"),
                    });
                }
                if n < 2 {
                    return Err(MondrianError::EmptyData(concat!(
                        "validation needs at least two rows (one to train, one to score), ",
                        "not 1 sample"
                    )));
                }
                ((n as f64 * validation_fraction).round() as usize).clamp(1, n - 1)
            }
            Criterion::Evidence => 0,
        };
        // Training rows first, then the held-out ones: the path's training prefix.
        let mut order: Vec<usize> = (0..n).collect();
        order.shuffle(&mut Xoshiro256PlusPlus::seed_from_u64(
            params.kernel.seed ^ 0x5eed,
        ));
        let d = n_features;
        let xs: Vec<T> = order
            .iter()
            .flat_map(|&i| x[i * d..(i + 1) * d].iter().copied())
            .collect();
        let ys: Vec<f64> = order.iter().map(|&i| y[i]).collect();
        let n_train = n - n_val;
        let mut top = params.kernel.clone();
        top.lifetime = *grid.last().expect("not empty");
        let mut kernel = MondrianKernel::new(top)?;
        kernel.fit(&xs, d)?;
        let mut path = LifetimePath::new(&kernel)?;
        let score = |p: &SweepPoint| match criterion {
            Criterion::Validation => {
                let sq: f64 = p.predictions[n_train..]
                    .iter()
                    .zip(&ys[n_train..])
                    .map(|(a, b)| (a - b) * (a - b))
                    .sum();
                sq / n_val as f64
            }
            Criterion::Evidence => -p.log_evidence.unwrap_or(f64::NEG_INFINITY),
        };
        let (mut best, mut since_best) = (f64::INFINITY, 0usize);
        let report: SweepReport = run_sweep_until(
            &mut path,
            &ys[..n_train],
            &SweepSpec {
                lifetimes: grid.clone(),
                n_train,
                delta2: params.delta2,
                centre: None,
                learner: Learner::Ridge,
                max_features: params.max_features,
                average: None,
                every_event: false,
            },
            |p| {
                let s = score(p);
                if s < best {
                    (best, since_best) = (s, 0);
                } else {
                    since_best += 1;
                }
                patience.is_none_or(|k| since_best < k)
            },
        )?;
        let mut scores: Vec<f64> = report.points.iter().map(score).collect();
        scores.resize(grid.len(), f64::NAN);
        let best = scores
            .iter()
            .enumerate()
            .min_by(|a, b| a.1.total_cmp(b.1))
            .map(|(i, _)| i)
            .expect("not empty");
        let mut chosen = params;
        chosen.kernel.lifetime = grid[best];
        let mut model = Self::new(chosen)?;
        model.fit(x, n_features, y)?;
        // Scores in the caller's order of lifetimes.
        let by_caller = lifetimes
            .iter()
            .map(|l| scores[grid.iter().position(|g| g == l).expect("in the grid")])
            .collect();
        Ok((model, by_caller))
    }
}

/// How [`MondrianKernelRidge::fit_cv`] searches the lifetime.
#[derive(Debug, Clone, PartialEq)]
pub struct LifetimeSearch {
    /// The lifetimes to read (any order; duplicates are read once).
    pub lifetimes: Vec<f64>,
    /// Held-out error or evidence.
    pub criterion: Criterion,
    /// Share of the rows held out for [`Criterion::Validation`], in (0, 1).
    pub validation_fraction: f64,
    /// Stop after this many readings in a row without a better score (`None`: read all).
    pub patience: Option<usize>,
}

impl LifetimeSearch {
    /// Validation on a 20 % hold-out, every lifetime read.
    pub fn validation(lifetimes: Vec<f64>) -> Self {
        Self {
            lifetimes,
            criterion: Criterion::Validation,
            validation_fraction: 0.2,
            patience: None,
        }
    }
}

/// Validates rows and targets; returns the number of rows.
fn check_targets<T: FeatureValue>(x: &[T], n_features: usize, y: &[f64]) -> Result<usize> {
    let rows = Rows::new(x, n_features)?;
    let n = rows.n_rows();
    if n == 0 {
        return Err(MondrianError::EmptyData("fit needs at least one row"));
    }
    if y.len() != n {
        return Err(MondrianError::LengthMismatch {
            n_rows: n,
            n_labels: y.len(),
        });
    }
    if let Some((row, &value)) = y.iter().enumerate().find(|(_, v)| !v.is_finite()) {
        return Err(MondrianError::NonFiniteTarget { row, value });
    }
    Ok(n)
}

impl crate::persist::Persistent for MondrianKernelRidge {
    const KIND: &'static str = "mondrian-kernel-ridge";
}
