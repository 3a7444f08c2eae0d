//! The Mondrian kernel feature map (spec `mondrian-kernel.md` §1.5, §4.1–4.2, §4.5).

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::data::{FeatureValue, Rows, Scaling};
use crate::error::{MondrianError, Result};
use crate::forest::{mix64, Forest, Growth};
use crate::model::Params;
use crate::process::Feature;
use crate::tree::{MondrianTree, NoStats, PathStep, PauseRule};

/// No column: a node that is not a cell of the feature map.
pub(super) const NONE: u32 = u32::MAX;

/// How [`MondrianKernel::transform`] places a row the trees were not sampled on (spec §4.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Extension {
    /// Exact (default): the row takes the conditional Mondrian extension of each tree
    /// (§4.1) without being kept: where a new cut would separate it from the data it lies
    /// in a cell of its own, which no training row shares, and gets no feature in that tree
    /// (a linear model gives such a cell weight 0). The draws are keyed by the row's
    /// values, the seed and the tree, so a row always gets the same features.
    #[default]
    Sample,
    /// Cheap and approximate: the row follows the cuts alone, ignoring the data boxes, and
    /// always gets M features.
    Route,
}

impl Extension {
    /// Reads `sample` or `route`.
    pub fn parse(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "sample" | "exact" => Ok(Extension::Sample),
            "route" | "cuts" => Ok(Extension::Route),
            other => Err(MondrianError::InvalidParameter {
                name: "extension",
                reason: format!("`{other}` is not `sample` or `route`"),
            }),
        }
    }
}

/// Parameters of a [`MondrianKernel`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelParams {
    /// Trees M: each row has exactly M non-zero features, `1/√M` each (50).
    pub n_trees: usize,
    /// Lifetime λ: the inverse width of the Laplace kernel `exp(−λ‖x − x′‖₁)`, in the
    /// units of the raw features (no scaling: §6.1). Finite and positive (1).
    pub lifetime: f64,
    /// Master seed; tree t draws from (seed, t).
    pub seed: u64,
    /// Worker threads, 0 for all cores (results do not depend on it).
    pub n_threads: usize,
    /// Rows the trees were not sampled on: exact extension or routing by the cuts.
    pub extension: Extension,
}

impl Default for KernelParams {
    fn default() -> Self {
        KernelParams {
            n_trees: 50,
            lifetime: 1.0,
            seed: 0,
            n_threads: 0,
            extension: Extension::Sample,
        }
    }
}

impl Params for KernelParams {
    fn validate(&self) -> Result<()> {
        if self.n_trees == 0 {
            return Err(MondrianError::InvalidParameter {
                name: "n_trees",
                reason: "at least one tree is needed (M = 0 gives no features)".into(),
            });
        }
        if self.n_threads > crate::data::MAX_THREADS {
            return Err(MondrianError::InvalidParameter {
                name: "n_threads",
                reason: format!(
                    "{} is more than {}",
                    self.n_threads,
                    crate::data::MAX_THREADS
                ),
            });
        }
        check_lifetime("lifetime", self.lifetime)
    }
}

/// Refuses a lifetime that is not finite and positive.
pub(crate) fn check_lifetime(name: &'static str, lifetime: f64) -> Result<()> {
    if lifetime.is_finite() && lifetime > 0.0 {
        Ok(())
    } else {
        Err(MondrianError::InvalidParameter {
            name,
            reason: format!(
                "{lifetime} is not a finite positive number (the lifetime is the inverse \
                 width λ of the Laplace kernel exp(−λ‖x − x′‖₁))"
            ),
        })
    }
}

/// A sparse feature matrix in compressed sparse row form whose stored values are all equal
/// (`value`, `1/√M` for Mondrian features), so they are kept once.
#[derive(Debug, Clone, PartialEq)]
pub struct Csr {
    /// Rows.
    pub n_rows: usize,
    /// Columns.
    pub n_cols: usize,
    /// Row `i`'s entries are `indices[indptr[i]..indptr[i + 1]]`.
    pub indptr: Vec<usize>,
    /// Column of each entry, increasing within a row.
    pub indices: Vec<u32>,
    /// The value of every entry.
    pub value: f64,
}

impl Csr {
    /// Entries stored.
    pub fn nnz(&self) -> usize {
        self.indices.len()
    }
    /// The columns of row `i`.
    pub fn row(&self, i: usize) -> &[u32] {
        &self.indices[self.indptr[i]..self.indptr[i + 1]]
    }
    /// Every entry's value, for consumers that want them stored.
    pub fn values(&self) -> Vec<f64> {
        vec![self.value; self.nnz()]
    }
    /// The inner product of rows `i` and `j`: `k_M(x_i, x_j)` for a Mondrian feature matrix.
    pub fn dot(&self, i: usize, j: usize) -> f64 {
        let (a, b) = (self.row(i), self.row(j));
        let (mut p, mut q, mut shared) = (0, 0, 0usize);
        while p < a.len() && q < b.len() {
            match a[p].cmp(&b[q]) {
                std::cmp::Ordering::Less => p += 1,
                std::cmp::Ordering::Greater => q += 1,
                std::cmp::Ordering::Equal => {
                    shared += 1;
                    p += 1;
                    q += 1;
                }
            }
        }
        shared as f64 * self.value * self.value
    }
}

/// The Mondrian kernel's feature map (spec §1.5, Algorithm 1): M independent Mondrian
/// trees of the engine, sampled on the rows given to [`fit`](Self::fit) at lifetime λ; a
/// row's features are the cells (leaves) that hold it, one per tree, each with value
/// `1/√M`, so that `φ(x)ᵀφ(x′)` is the fraction of trees in which x and x′ share a cell,
/// an unbiased estimate of `exp(−λ‖x − x′‖₁)` (Proposition 1).
///
/// Columns are numbered tree by tree in the order of the leaves; [`partial_fit`] extends
/// the trees by new rows (§4.1): old rows keep their features, and the cells the new rows
/// open get new columns at the end (§4.2).
///
/// ```
/// use mondrian::kernel::{KernelParams, MondrianKernel};
/// let x = [0.0, 0.0, 0.1, 0.0, 5.0, 5.0];
/// let mut kernel = MondrianKernel::new(KernelParams { n_trees: 10, lifetime: 2.0, ..Default::default() })?;
/// kernel.fit(&x, 2)?;
/// let phi = kernel.transform(&x, 2)?;
/// assert_eq!(phi.nnz(), 3 * 10); // exactly M features per row
/// assert!((phi.dot(0, 0) - 1.0).abs() < 1e-12);
/// # Ok::<(), mondrian::MondrianError>(())
/// ```
///
/// [`partial_fit`]: Self::partial_fit
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(try_from = "super::decode::KernelState")]
pub struct MondrianKernel {
    params: KernelParams,
    forest: Option<Forest<NoStats>>,
    /// Per tree, the column of each node that is a cell ([`NONE`] otherwise).
    columns: Vec<Vec<u32>>,
    /// The tree of each column.
    tree_of_column: Vec<u32>,
}

impl MondrianKernel {
    /// An unfitted feature map; the parameters are checked here.
    pub fn new(params: KernelParams) -> Result<Self> {
        params.validate()?;
        Ok(MondrianKernel {
            params,
            forest: None,
            columns: Vec::new(),
            tree_of_column: Vec::new(),
        })
    }

    /// A map from decoded parts (checked by the caller).
    pub(super) fn from_parts(
        params: KernelParams,
        forest: Option<Forest<NoStats>>,
        columns: Vec<Vec<u32>>,
        tree_of_column: Vec<u32>,
    ) -> Self {
        MondrianKernel {
            params,
            forest,
            columns,
            tree_of_column,
        }
    }

    /// The parameters.
    pub fn params(&self) -> &KernelParams {
        &self.params
    }

    /// Samples the trees on these rows (row-major, `n_features` per row), replacing
    /// whatever the map held. Every row whose features will be needed can be given here
    /// (train, validation and test rows alike: no labels are read), as the paper does.
    pub fn fit<T: FeatureValue>(&mut self, x: &[T], n_features: usize) -> Result<()> {
        let rows = Rows::new(x, n_features)?;
        rows.validate(None)?;
        if rows.n_rows() == 0 {
            return Err(MondrianError::EmptyData("fit needs at least one row"));
        }
        self.check_memory(0, rows.n_rows(), n_features)?;
        let p = &self.params;
        let mut forest = Forest::new(p.n_threads);
        forest.store.start(&rows, &Scaling::Identity)?;
        forest.plant(p.n_trees, p.lifetime, PauseRule::NEVER, p.seed, || NoStats);
        let scaled = forest.store.scale(&rows)?;
        forest.learn(&scaled, &vec![(); rows.n_rows()], None, self.growth());
        self.forest = Some(forest);
        self.columns = vec![Vec::new(); self.params.n_trees];
        self.tree_of_column.clear();
        self.number_new_cells();
        Ok(())
    }

    /// Extends the trees by these rows (spec §4.1; the first call fits): the trees then
    /// have the law of trees sampled on every row seen. Old rows keep their features; the
    /// cells the new rows open get new columns. Returns how many columns were added.
    pub fn partial_fit<T: FeatureValue>(&mut self, x: &[T], n_features: usize) -> Result<usize> {
        let growth = self.growth();
        let Some(forest) = self.forest.as_ref() else {
            self.fit(x, n_features)?;
            return Ok(self.n_features_out());
        };
        let rows = forest.store.rows(x, n_features)?;
        self.check_memory(forest.store.len(), rows.n_rows(), n_features)?;
        let forest = self.forest.as_mut().expect("fitted");
        let scaled = forest.store.scale(&rows)?;
        forest.learn(&scaled, &vec![(); rows.n_rows()], None, growth);
        let before = self.n_features_out();
        self.number_new_cells();
        Ok(self.n_features_out() - before)
    }

    /// Refuses, before anything grows, trees that would not fit in the machine's memory
    /// ([`crate::memory`]): at most 2n − 1 nodes per tree and n point ids.
    fn check_memory(&self, held: usize, n_rows: usize, n_features: usize) -> Result<()> {
        let shape = crate::memory::ForestShape {
            n_trees: self.params.n_trees,
            n_points: n_rows,
            n_features,
            stats_bytes_per_node: 0,
            min_samples_split: 1,
        };
        crate::forest::check_memory(held, shape, None, None)
    }

    fn growth(&self) -> Growth {
        Growth {
            seed: self.params.seed,
            bagging: false,
            window: None,
            time_ordered: true,
        }
    }

    /// Gives a column to every leaf that has none yet, tree by tree.
    fn number_new_cells(&mut self) {
        let Some(forest) = &self.forest else { return };
        for (t, unit) in forest.trees.iter().enumerate() {
            let cols = &mut self.columns[t];
            cols.resize(unit.tree.n_nodes(), NONE);
            debug_assert!(
                cols.iter()
                    .enumerate()
                    .all(|(j, &c)| c == NONE || unit.tree.is_leaf(j as u32)),
                "a cell was split: old features changed"
            );
            for leaf in unit.tree.leaves() {
                if cols[leaf as usize] == NONE {
                    cols[leaf as usize] = self.tree_of_column.len() as u32;
                    self.tree_of_column.push(t as u32);
                }
            }
        }
    }

    /// Changes how rows the trees were not sampled on are placed.
    pub fn set_extension(&mut self, extension: Extension) {
        self.params.extension = extension;
    }

    /// Whether the map has been fitted.
    pub fn is_fitted(&self) -> bool {
        self.forest.is_some()
    }

    /// Width of the rows, once fitted.
    pub fn n_features_in(&self) -> Option<usize> {
        self.forest.as_ref().and_then(|f| f.store.n_features)
    }

    /// Columns of the feature map: the cells of all trees.
    pub fn n_features_out(&self) -> usize {
        self.tree_of_column.len()
    }

    /// The tree each column belongs to.
    pub fn tree_of_column(&self) -> &[u32] {
        &self.tree_of_column
    }

    /// Rows the trees hold.
    pub fn n_points(&self) -> usize {
        self.forest.as_ref().map_or(0, |f| f.store.len())
    }

    /// The engine's trees (for inspection and tests).
    pub fn trees(&self) -> Vec<&MondrianTree> {
        self.forest
            .as_ref()
            .map(|f| f.trees.iter().map(|u| &u.tree).collect())
            .unwrap_or_default()
    }

    /// The column of cell `node` of tree `t`, if it is one.
    pub fn column_of(&self, t: usize, node: u32) -> Option<u32> {
        let c = *self.columns.get(t)?.get(node as usize)?;
        (c != NONE).then_some(c)
    }

    /// The feature matrix of these rows: at most M non-zeros per row, `1/√M` each, exactly
    /// M for the rows the trees hold (and, with [`Extension::Route`], for every row).
    pub fn transform<T: FeatureValue>(&self, x: &[T], n_features: usize) -> Result<Csr> {
        let forest = self.forest.as_ref().ok_or(MondrianError::NotFitted)?;
        let rows = forest.store.rows(x, n_features)?;
        let scaled = forest.store.scale(&rows)?;
        let m = self.params.n_trees;
        let n = rows.n_rows();
        let mut cells = vec![NONE; n * m];
        let features = &forest.store.features;
        let (seed, extension) = (self.params.seed, self.params.extension);
        let chunk = 256;
        forest.pool.install(|| {
            cells
                .par_chunks_mut(chunk * m)
                .zip(scaled.par_chunks(chunk * n_features.max(1)))
                .for_each(|(out, xs)| {
                    let mut steps = Vec::new();
                    for (t, unit) in forest.trees.iter().enumerate() {
                        let cols = &self.columns[t];
                        for (i, x) in xs.chunks_exact(n_features.max(1)).enumerate() {
                            let x = &x[..n_features];
                            let node = match extension {
                                Extension::Route => Some(unit.tree.leaf_of(x)),
                                Extension::Sample => {
                                    unit.tree.path_steps(x, features, &mut steps);
                                    cell_after_extension(&steps, seed, t, x)
                                }
                            };
                            out[i * m + t] = node.map_or(NONE, |j| cols[j as usize]);
                        }
                    }
                })
        });
        let mut indptr = Vec::with_capacity(n + 1);
        let mut indices = Vec::with_capacity(n * m);
        indptr.push(0);
        for row in cells.chunks_exact(m) {
            let start = indices.len();
            indices.extend(row.iter().copied().filter(|&c| c != NONE));
            indices[start..].sort_unstable();
            indptr.push(indices.len());
        }
        Ok(Csr {
            n_rows: n,
            n_cols: self.n_features_out(),
            indptr,
            indices,
            value: 1.0 / (m as f64).sqrt(),
        })
    }

    /// `k_M(x, x′)`: the fraction of trees in which the two rows share a cell (0 in a tree
    /// where either lies in a cell of its own).
    pub fn kernel_value<T: FeatureValue>(&self, a: &[T], b: &[T]) -> Result<f64> {
        let d = a.len();
        let mut both: Vec<T> = a.to_vec();
        both.extend_from_slice(b);
        let phi = self.transform(&both, d)?;
        Ok(phi.dot(0, 1))
    }

    /// Heap bytes of the trees, the stored rows and the column maps.
    pub fn heap_bytes(&self) -> usize {
        let forest = self.forest.as_ref().map_or(0, |f| {
            f.store.bytes() + f.trees.iter().map(|u| u.tree.heap_bytes()).sum::<usize>()
        });
        forest
            + self.columns.iter().map(|c| c.capacity() * 4).sum::<usize>()
            + self.tree_of_column.capacity() * 4
    }
}

/// The cell a row falls in once the tree is extended by it (spec §4.1), from its weighed
/// path: going down, the row branches off above node j with probability `p_split` (a new
/// cut between it and j's data before j's split time); `None` if it does anywhere (its own
/// cell), else its leaf. The uniform draws come from (seed, tree, the row's bits).
fn cell_after_extension(steps: &[PathStep], seed: u64, tree: usize, x: &[Feature]) -> Option<u32> {
    let mut rng = None;
    for step in steps {
        if step.p_split > 0.0 {
            let rng = rng.get_or_insert_with(|| row_rng(seed, tree, x));
            if rng.gen::<f64>() < step.p_split {
                return None;
            }
        }
        if step.is_leaf {
            return Some(step.node);
        }
    }
    // The walk stops early only once branching off is certain.
    None
}

/// A generator keyed by the seed, the tree and the row's values.
fn row_rng(seed: u64, tree: usize, x: &[Feature]) -> Xoshiro256PlusPlus {
    let mut h = mix64(seed ^ 0x6b65_726e_656c_0000 ^ (tree as u64).wrapping_mul(0x9e37));
    for v in x {
        h = mix64(h ^ u64::from(v.to_bits()));
    }
    Xoshiro256PlusPlus::seed_from_u64(h)
}

impl crate::persist::Persistent for MondrianKernel {
    const KIND: &'static str = "mondrian-kernel";
}
