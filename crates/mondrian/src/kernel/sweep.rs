//! Learners along the lifetime path (spec `mondrian-kernel.md` §3.3–3.4, E3–E5): exact
//! ridge updated at every event, SGD warm-started at every event, and the per-tree forest
//! of §5, each read at chosen lifetimes. The exact ridge is in `ridge_path.rs`.

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

use super::bayes::MixtureAccumulator;
use super::path::{Event, LifetimePath};
use super::ridge_path::RidgeOnPath;
use super::sgd::{SgdParams, SparseSgd};
use crate::error::{MondrianError, Result};

/// What a sweep learns and where it reads it.
#[derive(Debug, Clone)]
pub struct SweepSpec {
    /// Lifetimes at which to read the learner, increasing (each at most the kernel's).
    pub lifetimes: Vec<f64>,
    /// Training rows: the first `n_train` rows of the path; the others are only predicted.
    pub n_train: usize,
    /// Ridge regulariser δ² (1e-4 in the paper).
    pub delta2: f64,
    /// Targets are centred by this (the training mean by default, spec A31).
    pub centre: Option<f64>,
    /// The learner.
    pub learner: Learner,
    /// Most active features the dense ridge may hold (its factor takes 4·C² bytes).
    pub max_features: usize,
    /// Also average the ridge's predictions over the lifetime posterior on [0, Λ], Λ the
    /// last lifetime read (§3.5; exact ridge only).
    pub average: Option<Averaging>,
    /// Exact ridge: keep the solution exact after every event (the updates of §3.3), not
    /// only at the lifetimes read. `false` (the fast choice) brings the solution up to date
    /// at each reading, by the same updates or by one fresh factorisation, whichever costs
    /// fewer flops; the readings are the same to rounding. Averaging needs every event.
    pub every_event: bool,
}

/// The prior and evidence of Bayesian lifetime averaging (spec §3.5).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Averaging {
    /// The prior on λ over [0, Λ].
    pub prior: LifetimePrior,
    /// `true`: the evidence with the noise variance at its maximum
    /// ([`profiled_log_evidence`]; each component's noise variance is its σ̂²); `false`:
    /// the paper's, σ_y² = δ² and σ_w² = 1 ([`log_marginal_likelihood`]).
    pub profiled: bool,
}

/// A prior on the lifetime, supported on [0, Λ].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LifetimePrior {
    /// Uniform on [0, Λ].
    Uniform,
    /// Log-uniform on [lo, Λ] (scale-free; no mass below lo).
    LogUniform {
        /// Its lower end, positive and below Λ.
        lo: f64,
    },
}

impl LifetimePrior {
    fn cdf(self, terminal: f64) -> Box<dyn Fn(f64) -> f64> {
        match self {
            LifetimePrior::Uniform => Box::new(super::bayes::uniform_cdf(terminal)),
            LifetimePrior::LogUniform { lo } => {
                Box::new(super::bayes::log_uniform_cdf(lo, terminal))
            }
        }
    }
}

/// Predictions averaged over the lifetime posterior (§3.5).
#[derive(Debug, Clone)]
pub struct Averaged {
    /// The posterior mean of every row's prediction.
    pub predictions: Vec<f64>,
    /// The mixture variance of every row: the noise variance of each component plus the
    /// spread of the components' means (the law of total variance). Each component's own
    /// parameter uncertainty, `σ²φᵀA⁻¹φ`, is left out: it would cost O(N·M·C) per event.
    pub variances: Vec<f64>,
    /// `ln p(y | X)`, the log evidence of the training rows under the prior.
    pub log_evidence: f64,
    /// Intervals [τ_c, τ_{c+1}) of the posterior (events + 1).
    pub intervals: usize,
}

/// The learner of a sweep.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Learner {
    /// Exact ridge with Cholesky updates (§3.3).
    Ridge,
    /// SGD, `epochs` epochs after every event (§3.4; the paper: 1), shuffled by `seed`.
    Sgd {
        /// Step sizes and penalty.
        params: SgdParams,
        /// Epochs per event.
        epochs: usize,
        /// Seed of the shuffles.
        seed: u64,
    },
    /// The Mondrian forest of §5: each tree's leaf values `Σ y / (n + γ²)`, averaged.
    Forest {
        /// γ² (the reference code: δ²).
        gamma2: f64,
    },
}

/// How a lifetime is chosen from a sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Criterion {
    /// Lowest error on held-out rows.
    Validation,
    /// Highest log marginal likelihood of the training rows, the noise variance at its
    /// maximum ([`profiled_log_evidence`]; exact ridge only).
    Evidence,
}

/// The learner read at one lifetime.
#[derive(Debug, Clone)]
pub struct SweepPoint {
    /// The lifetime.
    pub lifetime: f64,
    /// Active features C(λ).
    pub n_features: usize,
    /// Predictions of every row of the path (training rows first).
    pub predictions: Vec<f64>,
    /// Log marginal likelihood of the training rows with σ_y² = δ², σ_w² = 1 (exact ridge
    /// only; the paper's formula in full, §3.3 and A3).
    pub log_marginal_likelihood: Option<f64>,
    /// Log marginal likelihood with the noise variance σ² at its maximum and the prior
    /// `w ~ N(0, σ²/δ² I)` (exact ridge only; [`profiled_log_evidence`]): does not depend
    /// on the targets' units, so it can choose a lifetime for targets of any scale.
    pub log_evidence: Option<f64>,
    /// Events taken to reach it.
    pub events: usize,
}

/// A sweep's readings, in the order of the lifetimes asked for.
#[derive(Debug, Clone)]
pub struct SweepReport {
    /// One per lifetime.
    pub points: Vec<SweepPoint>,
    /// The centre added back to predictions.
    pub centre: f64,
    /// The posterior average, if asked for.
    pub average: Option<Averaged>,
}

/// Runs a learner along the path from lifetime 0, reading it at each of
/// `spec.lifetimes`. `y` holds the targets of the training rows (the first `n_train` of
/// the path). The ridge learner is exact after every event: deleting the split feature's
/// column and appending its children's (§3.3), O(C²) per event.
pub fn run_sweep(path: &mut LifetimePath<'_>, y: &[f64], spec: &SweepSpec) -> Result<SweepReport> {
    run_sweep_until(path, y, spec, |_| true)
}

/// [`run_sweep`] that asks `go_on` after each reading whether to continue: a search can
/// stop once its score has stopped improving, skipping the largest lifetimes, whose
/// readings cost the most. The report then holds the readings taken. With averaging the
/// sweep always runs to the end (the posterior needs the whole range).
pub fn run_sweep_until(
    path: &mut LifetimePath<'_>,
    y: &[f64],
    spec: &SweepSpec,
    mut go_on: impl FnMut(&SweepPoint) -> bool,
) -> Result<SweepReport> {
    check_spec(path, y, spec)?;
    let centre = spec
        .centre
        .unwrap_or_else(|| y.iter().sum::<f64>() / y.len() as f64);
    let yc: Vec<f64> = y.iter().map(|v| v - centre).collect();
    let mut learner: Box<dyn PathLearner> = match spec.learner {
        Learner::Ridge => Box::new(RidgeOnPath::start(path, &yc, spec)),
        Learner::Sgd {
            params,
            epochs,
            seed,
        } => Box::new(SgdOnPath::start(
            path,
            &yc,
            spec.n_train,
            params,
            epochs,
            seed,
        )),
        Learner::Forest { gamma2 } => {
            Box::new(ForestOnPath::start(path, &yc, spec.n_train, gamma2))
        }
    };
    let mut points = Vec::with_capacity(spec.lifetimes.len());
    let mut events = 0;
    let terminal = *spec.lifetimes.last().expect("checked");
    let mut average = spec
        .average
        .map(|a| Average::start(a, terminal, learner.as_mut(), path, spec.delta2));
    for &lifetime in &spec.lifetimes {
        while path.next_time().is_some_and(|tau| tau < lifetime) {
            let e = path.next_event().expect("an event is queued");
            events += 1;
            learner.on_event(&e, path)?;
            if let Some(a) = average.as_mut() {
                a.interval(e.tau, learner.as_mut(), path);
            }
        }
        let evidence = learner.evidence(path);
        let mut predictions = learner.predict(path);
        predictions.iter_mut().for_each(|p| *p += centre);
        points.push(SweepPoint {
            lifetime,
            n_features: path.n_active(),
            predictions,
            log_marginal_likelihood: evidence.map(|e| e.0),
            log_evidence: evidence.map(|e| e.1),
            events,
        });
        if average.is_none() && !go_on(points.last().expect("just pushed")) {
            break;
        }
    }
    let average = average.map(|a| a.finish(terminal, centre));
    Ok(SweepReport {
        points,
        centre,
        average,
    })
}

/// The running posterior mixture: the state of interval c waits until τ_{c+1} is known.
struct Average {
    acc: MixtureAccumulator,
    cdf: Box<dyn Fn(f64) -> f64>,
    profiled: bool,
    delta2: f64,
    n_train: usize,
    /// τ_c, the log evidence, the centred predictions and the noise variance of the open
    /// interval.
    open: (f64, f64, Vec<f64>, f64),
    intervals: usize,
}

impl Average {
    fn start(
        a: Averaging,
        terminal: f64,
        learner: &mut dyn PathLearner,
        path: &LifetimePath<'_>,
        delta2: f64,
    ) -> Self {
        let mut avg = Average {
            acc: MixtureAccumulator::new(path.n_points()),
            cdf: a.prior.cdf(terminal),
            profiled: a.profiled,
            delta2,
            n_train: 0,
            open: (0.0, 0.0, Vec::new(), 0.0),
            intervals: 0,
        };
        avg.open = avg.state(0.0, learner, path);
        avg
    }

    /// The evidence, predictions and noise variance of the current state, from time `tau`.
    fn state(
        &mut self,
        tau: f64,
        learner: &mut dyn PathLearner,
        path: &LifetimePath<'_>,
    ) -> (f64, f64, Vec<f64>, f64) {
        let (paper, profiled, q, n) = learner.evidence_parts(path);
        self.n_train = n;
        let predictions = learner.predict(path);
        match self.profiled {
            true => (tau, profiled, predictions, q / n as f64),
            false => (tau, paper, predictions, self.delta2),
        }
    }

    /// Closes the open interval at `tau` (an event) and opens the next.
    fn interval(&mut self, tau: f64, learner: &mut dyn PathLearner, path: &LifetimePath<'_>) {
        let next = self.state(tau, learner, path);
        let open = std::mem::replace(&mut self.open, next);
        self.close(open, tau);
    }

    fn close(&mut self, (start, log_ev, means, noise): (f64, f64, Vec<f64>, f64), end: f64) {
        let mass = (self.cdf)(end) - (self.cdf)(start);
        self.intervals += 1;
        if mass > 0.0 {
            let vars = vec![noise; means.len()];
            self.acc.add(log_ev + mass.ln(), &means, &vars);
        }
    }

    fn finish(mut self, terminal: f64, centre: f64) -> Averaged {
        let open = std::mem::replace(&mut self.open, (0.0, 0.0, Vec::new(), 0.0));
        self.close(open, terminal);
        Averaged {
            predictions: self.acc.means().iter().map(|p| p + centre).collect(),
            variances: self.acc.variances(),
            log_evidence: self.acc.log_total(),
            intervals: self.intervals,
        }
    }
}

fn check_spec(path: &LifetimePath<'_>, y: &[f64], spec: &SweepSpec) -> Result<()> {
    let bad = |name, reason: String| Err(MondrianError::InvalidParameter { name, reason });
    if spec.lifetimes.is_empty() {
        return bad("lifetimes", "the sweep needs at least one lifetime".into());
    }
    for w in spec.lifetimes.windows(2) {
        if w[0].partial_cmp(&w[1]) != Some(std::cmp::Ordering::Less) {
            return bad("lifetimes", "lifetimes must increase".into());
        }
    }
    for &l in &spec.lifetimes {
        super::features::check_lifetime("lifetimes", l)?;
    }
    if spec.n_train == 0 || spec.n_train > path.n_points() || y.len() != spec.n_train {
        return bad(
            "n_train",
            format!(
                "{} training targets for {} training rows of {} on the path",
                y.len(),
                spec.n_train,
                path.n_points()
            ),
        );
    }
    if !(spec.delta2 > 0.0 && spec.delta2.is_finite()) {
        return bad(
            "delta2",
            format!("{} is not a finite positive number", spec.delta2),
        );
    }
    Ok(())
}

/// A learner that follows the path's events.
pub(super) trait PathLearner {
    fn on_event(&mut self, e: &Event, path: &LifetimePath<'_>) -> Result<()>;
    /// Centred predictions of every row of the path.
    fn predict(&mut self, path: &LifetimePath<'_>) -> Vec<f64>;
    /// The paper's log marginal likelihood and the profiled one.
    fn evidence(&mut self, _path: &LifetimePath<'_>) -> Option<(f64, f64)> {
        None
    }
    /// The paper's and the profiled log evidence, `Q = ‖y − Φŵ‖² + δ²‖ŵ‖²` and N (exact
    /// ridge only: the sweep refuses averaging with another learner).
    fn evidence_parts(&mut self, _path: &LifetimePath<'_>) -> (f64, f64, f64, usize) {
        unreachable!("averaging needs the exact ridge")
    }
}

/// `ŷ_n = Σ_m w(feature of n in tree m) / √M` for every row.
pub(super) fn predict_rows(path: &LifetimePath<'_>, weight: impl Fn(u32) -> f64) -> Vec<f64> {
    let m = path.n_trees();
    let scale = 1.0 / (m as f64).sqrt();
    path.assign()
        .chunks_exact(m)
        .map(|row| row.iter().map(|&id| weight(id)).sum::<f64>() * scale)
        .collect()
}

/// SGD on the path (§3.4): at each event the split feature's weight goes to both children
/// (predictions unchanged), then `epochs` shuffled epochs over the training rows.
struct SgdOnPath {
    sgd: SparseSgd,
    yc: Vec<f64>,
    n_train: usize,
    epochs: usize,
    order: Vec<u32>,
    rng: Xoshiro256PlusPlus,
}

impl SgdOnPath {
    fn start(
        path: &LifetimePath<'_>,
        yc: &[f64],
        n_train: usize,
        params: SgdParams,
        epochs: usize,
        seed: u64,
    ) -> Self {
        let mut sgd = SparseSgd::new(params, path.n_trees());
        sgd.ensure_len(path.n_trees());
        let mut s = SgdOnPath {
            sgd,
            yc: yc.to_vec(),
            n_train,
            epochs,
            order: (0..n_train as u32).collect(),
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        };
        s.train(path);
        s
    }

    fn train(&mut self, path: &LifetimePath<'_>) {
        let rows = &path.assign()[..self.n_train * path.n_trees()];
        for _ in 0..self.epochs {
            self.order.shuffle(&mut self.rng);
            self.sgd.epoch(rows, &self.yc, &self.order);
        }
    }
}

impl PathLearner for SgdOnPath {
    fn on_event(&mut self, e: &Event, path: &LifetimePath<'_>) -> Result<()> {
        self.sgd
            .split(e.parent as usize, e.left as usize, e.right as usize);
        self.train(path);
        Ok(())
    }

    fn predict(&mut self, path: &LifetimePath<'_>) -> Vec<f64> {
        let w = self.sgd.weights();
        predict_rows(path, |id| w.get(id as usize).copied().unwrap_or(0.0))
    }
}

/// The forest of §5: per tree, each cell's value `Σ y / (n + γ²)` over its training rows;
/// a row's prediction is the mean of its cells' values. Only the split tree's two new
/// cells change at an event.
struct ForestOnPath {
    values: Vec<f64>,
    yc: Vec<f64>,
    n_train: usize,
    gamma2: f64,
}

impl ForestOnPath {
    fn start(path: &LifetimePath<'_>, yc: &[f64], n_train: usize, gamma2: f64) -> Self {
        let root = yc.iter().sum::<f64>() / (n_train as f64 + gamma2);
        ForestOnPath {
            values: vec![root; path.n_trees()],
            yc: yc.to_vec(),
            n_train,
            gamma2,
        }
    }

    fn value(&self, path: &LifetimePath<'_>, id: u32) -> f64 {
        let (mut n, mut s) = (0usize, 0.0);
        for &p in path.points_of(id) {
            if (p as usize) < self.n_train {
                n += 1;
                s += self.yc[p as usize];
            }
        }
        s / (n as f64 + self.gamma2)
    }
}

impl PathLearner for ForestOnPath {
    fn on_event(&mut self, e: &Event, path: &LifetimePath<'_>) -> Result<()> {
        self.values.resize(path.n_ids(), 0.0);
        self.values[e.left as usize] = self.value(path, e.left);
        self.values[e.right as usize] = self.value(path, e.right);
        self.values[e.parent as usize] = 0.0;
        Ok(())
    }

    fn predict(&mut self, path: &LifetimePath<'_>) -> Vec<f64> {
        // Leaf values are per-tree predictions: the mean over trees is Σ_m v / M, i.e.
        // predict_rows' Σ/√M with v/√M.
        let m = path.n_trees() as f64;
        let v = &self.values;
        predict_rows(path, |id| v[id as usize] / m.sqrt())
    }
}

/// `ln p(y)` of Bayesian ridge regression with noise variance σ² and prior
/// `w ~ N(0, σ²/δ² I)`, at the σ² that maximises it, `σ̂² = Q/N` with
/// `Q = ‖y − Φŵ‖² + δ²‖ŵ‖²`:
/// `−(N/2)(ln 2π + ln σ̂² + 1) − ½ ln det A + (C/2) ln δ²`.
/// Derivation: `y ~ N(0, (σ²/δ²)(ΦΦᵀ + δ²I_N))`, `det(ΦΦᵀ + δ²I_N) = δ^{2(N−C)} det A`
/// (Sylvester) and `yᵀ(ΦΦᵀ + δ²I_N)⁻¹y = Q/δ²`; at σ² = δ² it is the paper's formula
/// ([`log_marginal_likelihood`]).
pub fn profiled_log_evidence(
    rss: f64,
    w_norm2: f64,
    log_det: f64,
    n_cols: usize,
    n_rows: usize,
    delta2: f64,
) -> f64 {
    let n = n_rows as f64;
    let q = (rss + delta2 * w_norm2).max(f64::MIN_POSITIVE);
    -0.5 * n * ((2.0 * std::f64::consts::PI).ln() + (q / n).ln() + 1.0) - 0.5 * log_det
        + 0.5 * n_cols as f64 * delta2.ln()
}
