//! Label moments (spec `mf-regression.md` §1.2): count, mean and sum of squared deviations
//! of a set of targets, kept at every node of a tree by [`TargetMoments`].

use serde::{Deserialize, Serialize};

use crate::tree::{MondrianTree, NodeStatistics};

/// Count, mean and sum of squared deviations of a set of labels (Welford; §1.2). The count
/// includes multiplicity (online bagging).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Moments {
    /// Number of labels.
    pub n: f64,
    /// Their mean.
    pub mean: f64,
    /// Σ (y − mean)².
    pub m2: f64,
}

impl Moments {
    /// Finite, with a count and a sum of squares ≥ 0 (checks of decoded models).
    pub(crate) fn is_valid(&self) -> bool {
        self.n.is_finite()
            && self.n >= 0.0
            && self.mean.is_finite()
            && self.m2.is_finite()
            && self.m2 >= 0.0
    }

    /// Whether these moments equal `exact` up to rounding, for targets of magnitude at
    /// most `scale` (the relative tolerance 1e-6 is far above the rounding of any
    /// summation order and far below anything that could matter to a prediction).
    pub(crate) fn agrees_with(&self, exact: &Moments, scale: f64) -> bool {
        const TOL: f64 = 1e-6;
        let scale = scale.max(f64::MIN_POSITIVE);
        self.n == exact.n
            && (self.mean - exact.mean).abs() <= TOL * scale
            && (self.m2 - exact.m2).abs() <= TOL * exact.n * scale * scale
    }

    /// Adds `weight` copies of `y`.
    #[inline]
    pub fn push(&mut self, y: f64, weight: f64) {
        let n = self.n + weight;
        let d = y - self.mean;
        let mean = self.mean + d * weight / n;
        self.m2 += weight * d * (y - mean);
        self.mean = mean;
        self.n = n;
    }

    /// Takes out `weight` copies of `y`, which must have been pushed: the inverse of
    /// [`push`](Self::push) (`m2` is kept ≥ 0 against rounding; the last copy out leaves
    /// empty moments).
    #[inline]
    pub fn remove(&mut self, y: f64, weight: f64) {
        let n = self.n - weight;
        if n <= 0.0 {
            *self = Moments::default();
            return;
        }
        let mean = (self.n * self.mean - weight * y) / n;
        self.m2 = (self.m2 - weight * (y - mean) * (y - self.mean)).max(0.0);
        self.mean = mean;
        self.n = n;
    }

    /// The moments of the union of two disjoint sets (Chan et al.'s pairwise update).
    pub fn merge(a: Moments, b: Moments) -> Moments {
        if a.n == 0.0 {
            return b;
        }
        if b.n == 0.0 {
            return a;
        }
        let n = a.n + b.n;
        let d = b.mean - a.mean;
        Moments {
            n,
            mean: a.mean + d * b.n / n,
            m2: a.m2 + b.m2 + d * d * a.n * b.n / n,
        }
    }

    /// Population variance m2 / n (0 for an empty or single-label set).
    pub fn variance(&self) -> f64 {
        if self.n > 0.0 {
            (self.m2 / self.n).max(0.0)
        } else {
            0.0
        }
    }

    /// The moments of `ys`.
    pub fn of(ys: &[f64]) -> Moments {
        let mut m = Moments::default();
        for &y in ys {
            m.push(y, 1.0);
        }
        m
    }
}

/// Label moments at every node of a tree: the leaf likelihood of exact BP and the whole
/// predictive of the fast approximation (§2.6).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TargetMoments {
    nodes: Vec<Moments>,
}

impl TargetMoments {
    /// No nodes yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The moments of `node`.
    #[inline]
    pub fn get(&self, node: u32) -> Moments {
        self.nodes[node as usize]
    }

    /// Checks moments read from a file: one per node of `tree`, each valid and equal, up to
    /// rounding, to the moments of the stored `targets` its subtree holds. A forged mean or
    /// sum of squares far outside the targets' range would otherwise load and turn the
    /// predictions into infinities.
    pub(crate) fn check_decoded(
        &self,
        tree: &MondrianTree,
        targets: &[f64],
    ) -> std::result::Result<(), String> {
        if self.nodes.len() != tree.n_nodes() {
            return Err("target moments do not match the tree".into());
        }
        if !self.nodes.iter().all(Moments::is_valid) {
            return Err("target moments are not finite".into());
        }
        let scale = targets.iter().fold(0.0f64, |m, y| m.max(y.abs()));
        let mut recomputed = vec![Moments::default(); self.nodes.len()];
        let Some(root) = tree.root() else {
            return Ok(());
        };
        // Children come after their parent in preorder: the reverse meets them first.
        for &j in tree.subtree_preorder(root).iter().rev() {
            let m = match tree.children(j) {
                Some((l, r)) => Moments::merge(recomputed[l as usize], recomputed[r as usize]),
                // A compact tree's leaves keep no points: their moments stand as stored
                // (valid, checked above), and every split must still merge its children's.
                None if tree.is_compact() => self.get(j),
                None => {
                    let mut m = Moments::default();
                    for &i in tree.leaf_points(j) {
                        m.push(targets[i as usize], 1.0);
                    }
                    m
                }
            };
            if !self.get(j).agrees_with(&m, scale) {
                return Err("target moments do not match the stored targets".into());
            }
            recomputed[j as usize] = m;
        }
        Ok(())
    }
}

impl NodeStatistics for TargetMoments {
    type Target = f64;

    fn resize(&mut self, n_nodes: usize) {
        self.nodes.resize(n_nodes, Moments::default());
    }

    fn reserve(&mut self, n_nodes: usize) {
        self.nodes.reserve(n_nodes.saturating_sub(self.nodes.len()));
    }

    fn set_leaf(&mut self, node: u32, points: &[u32], targets: &[f64]) {
        let mut m = Moments::default();
        for &i in points {
            m.push(targets[i as usize], 1.0);
        }
        self.nodes[node as usize] = m;
    }

    fn set_internal(&mut self, node: u32, left: u32, right: u32) -> bool {
        let merged = Moments::merge(self.get(left), self.get(right));
        let changed = merged != self.nodes[node as usize];
        self.nodes[node as usize] = merged;
        changed
    }

    fn set_parent_of(&mut self, node: u32, child: u32) {
        self.nodes[node as usize] = self.get(child);
    }

    fn absorb_leaf(&mut self, node: u32, target: f64, weight: u32) -> bool {
        self.nodes[node as usize].push(target, f64::from(weight));
        true
    }

    fn absorb_internal(&mut self, node: u32, target: f64, weight: u32) -> bool {
        self.nodes[node as usize].push(target, f64::from(weight));
        true
    }

    fn bytes_per_node(&self) -> usize {
        std::mem::size_of::<Moments>()
    }

    #[inline(always)]
    fn prefetch(&self, node: u32) {
        if let Some(m) = self.nodes.get(node as usize) {
            crate::tree::prefetch_lines(m as *const Moments as *const u8, 1);
        }
    }
}
