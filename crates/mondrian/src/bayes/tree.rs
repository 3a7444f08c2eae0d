//! The Bayesian decision tree T = (T, δ, ξ) of spec `bayesian-trees.md` §1.2, as a particle
//! grows it (§3.1): an arena of nodes, each holding its training rows N_j, their sufficient
//! statistics, log ℓ(Y_{N_j}) and the data extent, with the rule (δ_j, ξ_j) of an internal
//! node. Equality goes left.
//!
//! What a node learnt from the data ([`NodeData`]) never changes once made, so it is shared
//! behind an `Arc`: copying a particle on resampling copies a few words per node, where a
//! per-tree permutation of the rows would copy N indices (§3.1 [REC]: shared structure).

use std::sync::{Arc, OnceLock};

use super::likelihood::{LeafModel, SufficientStats};
use crate::data::{FeatureValue, Rows};
use crate::error::{MondrianError, Result};

/// Training features with per-dimension presorted orders: the sorted distinct values of
/// each dimension and the dense rank of every row in it (equal values share a rank), so a
/// node's split candidates come from sorting small integers.
#[derive(Debug, Clone)]
pub struct Features {
    values: Vec<f64>,
    n_rows: usize,
    n_features: usize,
    /// Dense rank of row i in dimension d at `d · n_rows + i`.
    ranks: Vec<u32>,
    /// Sorted distinct values of each dimension.
    distinct: Vec<Vec<f64>>,
}

impl Features {
    /// Row-major features; fails on a ragged buffer, no rows, a non-finite value, or more
    /// than `u32::MAX` rows.
    pub fn new<T: FeatureValue>(x: &[T], n_features: usize) -> Result<Self> {
        let rows = Rows::new(x, n_features)?;
        rows.validate(None)?;
        let n_rows = rows.n_rows();
        if n_rows == 0 {
            return Err(MondrianError::EmptyData("training needs at least one row"));
        }
        if n_rows > u32::MAX as usize {
            return Err(MondrianError::InvalidParameter {
                name: "x",
                reason: format!("{n_rows} rows is more than {}", u32::MAX),
            });
        }
        let values: Vec<f64> = x.iter().map(|v| v.to_f64()).collect();
        let mut ranks = vec![0u32; n_rows * n_features];
        let mut distinct = Vec::with_capacity(n_features);
        let mut order: Vec<u32> = (0..n_rows as u32).collect();
        for d in 0..n_features {
            let at = |i: u32| values[i as usize * n_features + d];
            order.sort_unstable_by(|&a, &b| at(a).total_cmp(&at(b)));
            let mut uniq: Vec<f64> = Vec::new();
            for &i in &order {
                let v = at(i);
                // −0.0 and 0.0 are one value: `==`, not the bits, decides.
                if uniq.last() != Some(&v) {
                    uniq.push(v);
                }
                ranks[d * n_rows + i as usize] = (uniq.len() - 1) as u32;
            }
            distinct.push(uniq);
        }
        Ok(Features {
            values,
            n_rows,
            n_features,
            ranks,
            distinct,
        })
    }

    /// N.
    pub fn n_rows(&self) -> usize {
        self.n_rows
    }

    /// D.
    pub fn n_features(&self) -> usize {
        self.n_features
    }

    /// Row i.
    pub fn row(&self, i: usize) -> &[f64] {
        &self.values[i * self.n_features..(i + 1) * self.n_features]
    }

    /// x_{i,d}.
    #[inline]
    pub fn value(&self, i: usize, d: usize) -> f64 {
        self.values[i * self.n_features + d]
    }

    /// The sorted distinct values of dimension d.
    pub fn distinct(&self, d: usize) -> &[f64] {
        &self.distinct[d]
    }

    /// The dense rank of row i in dimension d: its value is `distinct(d)[rank]`.
    #[inline]
    pub fn rank(&self, i: usize, d: usize) -> u32 {
        self.ranks[d * self.n_rows + i]
    }
}

/// What a node learnt from the data: N_j, the statistics of Y_{N_j}, log ℓ(Y_{N_j}) and
/// the extent of X_{N_j} (min and max per dimension).
#[derive(Debug)]
pub struct NodeData<S> {
    pub(crate) rows: Box<[u32]>,
    pub(crate) stats: S,
    pub(crate) log_ml: f64,
    /// The D minima, then the D maxima, computed when first asked for: most nodes a
    /// particle creates stop at once, and whether a node can split rarely needs them
    /// ([`NodeData::has_valid_dim`]).
    pub(crate) bounds: OnceLock<Box<[f64]>>,
}

impl<S> NodeData<S> {
    /// The data of the rows `rows`, with its extent: a root is shared by every particle,
    /// so its extent is computed once here.
    pub(crate) fn new<L: LeafModel<Stats = S>>(
        features: &Features,
        targets: &[L::Target],
        model: &L,
        rows: Vec<u32>,
    ) -> Self {
        let data = scored(model, targets, rows.into_boxed_slice());
        if data.rows.len() == features.n_rows() {
            // Every row (rows are distinct): the extent is the presorted ends.
            let d = features.n_features();
            let mut b = Vec::with_capacity(2 * d);
            b.extend(features.distinct.iter().map(|v| v[0]));
            b.extend(features.distinct.iter().map(|v| v[v.len() - 1]));
            let _ = data.bounds.set(b.into_boxed_slice());
        } else {
            data.bounds(features);
        }
        data
    }

    /// The data of `rows` scored against `targets`, its extent left for later.
    pub(crate) fn scored<L: LeafModel<Stats = S>>(
        model: &L,
        targets: &[L::Target],
        rows: Box<[u32]>,
    ) -> Self {
        scored(model, targets, rows)
    }

    /// The extent: the D minima, then the D maxima.
    pub(crate) fn bounds(&self, features: &Features) -> &[f64] {
        self.bounds.get_or_init(|| {
            let mut b = empty_bounds(features.n_features());
            for &r in self.rows.iter() {
                widen(&mut b, features.row(r as usize));
            }
            b.into_boxed_slice()
        })
    }

    /// The extent if it has been computed, else an empty slice.
    pub(crate) fn known_bounds(&self) -> &[f64] {
        self.bounds.get().map_or(&[], |b| b)
    }

    /// [ℓ^x_{jd}, u^x_{jd}]: from the extent when it is known, else by one pass over
    /// dimension d alone.
    pub(crate) fn extent(&self, features: &Features, d: usize) -> (f64, f64) {
        if let Some(b) = self.bounds.get() {
            return (b[d], b[b.len() / 2 + d]);
        }
        self.rows
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &r| {
                let v = features.value(r as usize, d);
                (if v < lo { v } else { lo }, if v > hi { v } else { hi })
            })
    }

    /// Whether dimension d takes two values among the rows: from the extent when it is
    /// known, else by stopping at the first value that differs from the first row's.
    pub(crate) fn is_valid_dim(&self, features: &Features, d: usize) -> bool {
        if let Some(b) = self.bounds.get() {
            return b[d] < b[b.len() / 2 + d];
        }
        let Some((&first, rest)) = self.rows.split_first() else {
            return false;
        };
        let v0 = features.value(first as usize, d);
        rest.iter().any(|&r| features.value(r as usize, d) != v0)
    }

    /// Whether some dimension takes two values among the rows (V_j ≠ ∅). Without the
    /// extent this stops at the first row that differs from the first one.
    pub(crate) fn has_valid_dim(&self, features: &Features) -> bool {
        if let Some(b) = self.bounds.get() {
            let d = b.len() / 2;
            return (0..d).any(|k| b[k] < b[d + k]);
        }
        let Some((&first, rest)) = self.rows.split_first() else {
            return false;
        };
        let x0 = features.row(first as usize);
        // `!=` on the values, so −0.0 and 0.0 are one value, as in the extent.
        rest.iter().any(|&r| features.row(r as usize) != x0)
    }
}

/// The data of `rows`: their statistics and marginal, the extent left for later.
fn scored<L: LeafModel>(model: &L, targets: &[L::Target], rows: Box<[u32]>) -> NodeData<L::Stats> {
    let mut stats = model.empty_stats();
    stats.add_rows(targets, &rows);
    with_stats(model, rows, stats)
}

/// The data of `rows` with their statistics `stats` already computed.
fn with_stats<L: LeafModel>(model: &L, rows: Box<[u32]>, stats: L::Stats) -> NodeData<L::Stats> {
    NodeData {
        log_ml: model.log_marginal(&stats),
        rows,
        stats,
        bounds: OnceLock::new(),
    }
}

/// The extent of no points: +∞ minima, −∞ maxima.
fn empty_bounds(d: usize) -> Vec<f64> {
    let mut b = vec![f64::INFINITY; d];
    b.extend(std::iter::repeat_n(f64::NEG_INFINITY, d));
    b
}

/// Widens the extent to hold x. Features are finite, so a plain comparison is `min` and
/// `max` (and, unlike them, vectorises).
#[inline]
fn widen(bounds: &mut [f64], x: &[f64]) {
    let (lo, hi) = bounds.split_at_mut(x.len());
    for ((l, h), &v) in lo.iter_mut().zip(hi.iter_mut()).zip(x) {
        *l = if v < *l { v } else { *l };
        *h = if v > *h { v } else { *h };
    }
}

/// Splits a node's rows by x_dim ≤ threshold (left) and > threshold (right), with the
/// statistics and marginals of both sides; their extents wait until asked for.
pub(crate) fn partition<L: LeafModel>(
    features: &Features,
    targets: &[L::Target],
    model: &L,
    parent: &NodeData<L::Stats>,
    dim: usize,
    threshold: f64,
) -> (NodeData<L::Stats>, NodeData<L::Stats>) {
    // Room for every row on either side: no regrowing, and the unused tail is returned
    // when the vectors become boxed slices.
    let n = parent.rows.len();
    let (mut left, mut right) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let (ls, rs) = parent.stats.split_rows(
        model.empty_stats(),
        targets,
        &parent.rows,
        |r| features.value(r as usize, dim) <= threshold,
        &mut left,
        &mut right,
    );
    (
        with_stats(model, left.into_boxed_slice(), ls),
        with_stats(model, right.into_boxed_slice(), rs),
    )
}

/// What a node is: still to be decided (in the particle's queue E), a leaf, or split.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Kind {
    Open,
    Leaf,
    Split {
        dim: u32,
        threshold: f64,
        left: u32,
        right: u32,
    },
}

/// A node of a [`BayesTree`].
#[derive(Debug)]
pub struct Node<S> {
    pub(crate) data: Arc<NodeData<S>>,
    pub(crate) parent: u32,
    pub(crate) depth: u32,
    pub(crate) kind: Kind,
}

// Derived `Clone` would ask `S: Clone`; the data is shared, never copied.
impl<S> Clone for Node<S> {
    fn clone(&self) -> Self {
        Node {
            data: Arc::clone(&self.data),
            parent: self.parent,
            depth: self.depth,
            kind: self.kind,
        }
    }
}

/// Marks "no parent" (the root).
pub const NO_PARENT: u32 = u32::MAX;

impl<S> Node<S> {
    /// The training rows N_j in the node (in no particular order).
    pub fn rows(&self) -> &[u32] {
        &self.data.rows
    }
    /// The sufficient statistics of Y_{N_j}.
    pub fn stats(&self) -> &S {
        &self.data.stats
    }
    /// log ℓ(Y_{N_j}).
    pub fn log_marginal(&self) -> f64 {
        self.data.log_ml
    }
    /// Depth (0 at the root).
    pub fn depth(&self) -> usize {
        self.depth as usize
    }
    /// The parent's index, `None` at the root.
    pub fn parent(&self) -> Option<usize> {
        (self.parent != NO_PARENT).then_some(self.parent as usize)
    }
    /// The data extent [ℓ^x_{jd}, u^x_{jd}] in dimension d (`features`: the training
    /// features the tree was grown on).
    pub fn extent(&self, features: &Features, d: usize) -> (f64, f64) {
        self.data.extent(features, d)
    }
    /// V_j: the dimensions in which the node's points take at least two values.
    pub fn valid_dims<'a>(&'a self, features: &'a Features) -> impl Iterator<Item = usize> + 'a {
        (0..features.n_features()).filter(move |&d| self.data.is_valid_dim(features, d))
    }
    /// |V_j|.
    pub fn n_valid_dims(&self, features: &Features) -> usize {
        self.valid_dims(features).count()
    }
    /// Whether V_j ≠ ∅, usually without computing the extent.
    pub fn has_valid_dim(&self, features: &Features) -> bool {
        self.data.has_valid_dim(features)
    }
    /// The rule (δ_j, ξ_j) of an internal node.
    pub fn rule(&self) -> Option<(usize, f64)> {
        match self.kind {
            Kind::Split { dim, threshold, .. } => Some((dim as usize, threshold)),
            _ => None,
        }
    }
    /// The (left, right) children of an internal node.
    pub fn children(&self) -> Option<(usize, usize)> {
        match self.kind {
            Kind::Split { left, right, .. } => Some((left as usize, right as usize)),
            _ => None,
        }
    }
    /// Whether the node is still in the particle's queue E (undecided).
    pub fn is_open(&self) -> bool {
        matches!(self.kind, Kind::Open)
    }
    /// A leaf: a node decided to stop, or one left undecided by a run cut short at
    /// `max_stages` (scored as a leaf, §3.5).
    pub fn is_leaf(&self) -> bool {
        !matches!(self.kind, Kind::Split { .. })
    }
}

/// A Bayesian decision tree: nodes in an arena, the root at index 0.
#[derive(Debug)]
pub struct BayesTree<S> {
    pub(crate) nodes: Vec<Node<S>>,
}

impl<S> Clone for BayesTree<S> {
    fn clone(&self) -> Self {
        BayesTree {
            nodes: self.nodes.clone(),
        }
    }
}

impl<S> BayesTree<S> {
    /// The tree {ε}: a root still to be decided.
    pub(crate) fn with_root(root: Arc<NodeData<S>>) -> Self {
        BayesTree {
            nodes: vec![Node {
                data: root,
                parent: NO_PARENT,
                depth: 0,
                kind: Kind::Open,
            }],
        }
    }

    /// Makes node j internal with rule (dim, threshold) and children of the given data;
    /// returns the children's indices.
    pub(crate) fn split(
        &mut self,
        j: usize,
        dim: usize,
        threshold: f64,
        left: NodeData<S>,
        right: NodeData<S>,
    ) -> (u32, u32) {
        let l = self.nodes.len() as u32;
        let depth = self.nodes[j].depth + 1;
        for data in [left, right] {
            self.nodes.push(Node {
                data: Arc::new(data),
                parent: j as u32,
                depth,
                kind: Kind::Open,
            });
        }
        self.nodes[j].kind = Kind::Split {
            dim: dim as u32,
            threshold,
            left: l,
            right: l + 1,
        };
        (l, l + 1)
    }

    /// All nodes; the root is `nodes()[0]`.
    pub fn nodes(&self) -> &[Node<S>] {
        &self.nodes
    }

    /// Number of leaves.
    pub fn n_leaves(&self) -> usize {
        self.nodes.iter().filter(|n| n.is_leaf()).count()
    }

    /// The largest depth of a node.
    pub fn max_depth(&self) -> usize {
        self.nodes.iter().map(|n| n.depth()).max().unwrap_or(0)
    }

    /// Sum of log ℓ over the leaves.
    pub fn log_likelihood(&self) -> f64 {
        self.nodes
            .iter()
            .filter(|n| n.is_leaf())
            .map(|n| n.log_marginal())
            .sum()
    }

    /// The index of leaf(x) (x has the training width; not checked).
    pub fn leaf_of<T: FeatureValue>(&self, x: &[T]) -> usize {
        let mut j = 0usize;
        while let Kind::Split {
            dim,
            threshold,
            left,
            right,
        } = self.nodes[j].kind
        {
            j = if x[dim as usize].to_f64() <= threshold {
                left as usize
            } else {
                right as usize
            };
        }
        j
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bayes::likelihood::DirichletMultinomial;

    #[test]
    fn features_rank_and_partition() {
        let x = [0.5, 1.0, -0.0, 2.0, 0.0, 2.0, 0.5, 3.0];
        let f = Features::new(&x, 2).unwrap();
        assert_eq!(f.distinct(0), &[-0.0, 0.5]);
        assert_eq!(f.rank(1, 0), 0);
        assert_eq!(f.rank(2, 0), 0);
        assert_eq!(f.rank(3, 0), 1);
        assert_eq!(f.distinct(1), &[1.0, 2.0, 3.0]);
        let y = [0usize, 1, 1, 0];
        let model = DirichletMultinomial::new(1.0, 2).unwrap();
        let root = NodeData::new(&f, &y, &model, vec![0, 1, 2, 3]);
        assert_eq!(root.bounds(&f), &[-0.0, 1.0, 0.5, 3.0]);
        let (l, r) = partition(&f, &y, &model, &root, 0, 0.0);
        assert_eq!(
            (l.rows.as_ref(), r.rows.as_ref()),
            (&[1, 2][..], &[0, 3][..])
        );
        // T4: the children's counts add up to the parent's.
        let mut sum = l.stats.clone();
        sum.merge(&r.stats);
        assert_eq!(sum, root.stats);
        let again = NodeData::new(&f, &y, &model, vec![1, 2]);
        assert_eq!(again.log_ml, l.log_ml);
        assert!(Features::new(&[1.0, f64::NAN], 1).is_err());
        assert!(Features::new::<f64>(&[], 1).is_err());
    }
}
