//! Reading a saved SMC posterior back: every index and field checked before anything is
//! rebuilt (the statistics against their rows, each split's children against their
//! parent, the tree shape, the islands' sizes), so corrupt bytes are an error.

use std::collections::HashSet;
use std::sync::{Arc, OnceLock};

use super::{corrupt, PosteriorFile};
use crate::bayes::likelihood::{ClassCounts, LeafModel, Moments, SufficientStats};
use crate::bayes::smc::{IslandRun, SmcParams, SmcPosterior};
use crate::bayes::tree::{BayesTree, Kind, Node, NodeData, NO_PARENT};
use crate::forest::DecodeError;

/// The checks of a leaf model's statistics that the rows cannot make.
pub(super) trait StoredStats: Sized {
    /// Whether `s` could summarise `n` targets under the model.
    fn plausible(&self, n: usize, n_classes: usize) -> bool;
    /// Whether a split's children add up to their parent.
    fn adds_up(parent: &Self, left: &Self, right: &Self) -> bool;
}

impl StoredStats for ClassCounts {
    fn plausible(&self, n: usize, n_classes: usize) -> bool {
        let c = self.counts();
        c.len() == n_classes
            && self.count() == n
            && c.iter().map(|&v| u64::from(v)).sum::<u64>() == n as u64
    }
    fn adds_up(parent: &Self, left: &Self, right: &Self) -> bool {
        let (p, l, r) = (parent.counts(), left.counts(), right.counts());
        p.iter()
            .zip(l.iter().zip(r))
            .all(|(&p, (&l, &r))| u64::from(p) == u64::from(l) + u64::from(r))
    }
}

impl StoredStats for Moments {
    fn plausible(&self, n: usize, _: usize) -> bool {
        self.n() == n as u64 && self.mean().is_finite() && self.m2().is_finite() && self.m2() >= 0.0
    }
    fn adds_up(parent: &Self, left: &Self, right: &Self) -> bool {
        // The counts add up exactly; the means and squared deviations of separate passes
        // only to rounding, so they are held to a loose tolerance that still catches a
        // changed exponent or leading digit.
        if parent.n() != left.n() + right.n() {
            return false;
        }
        let parts = [parent, left, right];
        let sd = |m: &Moments| (m.m2() / m.n().max(1) as f64).sqrt();
        let (np, nl, nr) = (parent.n() as f64, left.n() as f64, right.n() as f64);
        let scale: f64 = parts
            .iter()
            .map(|m| m.n() as f64 * (m.mean().abs() + sd(m)))
            .sum();
        let sums = np * parent.mean() - nl * left.mean() - nr * right.mean();
        let delta = right.mean() - left.mean();
        let pooled = left.m2() + right.m2() + delta * delta * nl * nr / np;
        let size = parts
            .iter()
            .map(|m| m.mean().abs() + sd(m))
            .fold(0.0, f64::max);
        sums.abs() <= 1e-8 * scale + f64::MIN_POSITIVE
            && (parent.m2() - pooled).abs()
                <= 1e-6 * (parent.m2() + pooled) + 1e-9 * np * size * size
    }
}

/// Whether `left` and `right` (increasing) split `parent` (increasing) between them.
fn partitions(parent: &[u32], left: &[u32], right: &[u32]) -> bool {
    if left.len() + right.len() != parent.len() {
        return false;
    }
    let (mut i, mut j) = (0, 0);
    for &p in parent {
        if left.get(i) == Some(&p) {
            i += 1;
        } else if right.get(j) == Some(&p) {
            j += 1;
        } else {
            return false;
        }
    }
    true
}

/// The islands' sizes of a run with these parameters.
fn island_sizes(p: &SmcParams) -> Vec<usize> {
    let (i, c) = (p.islands, p.particles);
    (0..i).map(|k| c / i + usize::from(k < c % i)).collect()
}

/// The posterior a [`PosteriorFile`] holds, checked against the parameters and the leaf
/// model (`n_classes` for the classifier's statistics, else 0).
pub(super) fn decode_posterior<L>(
    file: PosteriorFile<'static, L::Stats>,
    params: &SmcParams,
    model: &L,
    n_classes: usize,
) -> Result<(usize, SmcPosterior<L::Stats>), DecodeError>
where
    L: LeafModel,
    L::Stats: StoredStats + Send + Sync,
{
    let d = usize::try_from(file.n_features).map_err(|_| corrupt("too many features"))?;
    let n_rows = usize::try_from(file.n_rows).map_err(|_| corrupt("too many rows"))?;
    if d == 0 || n_rows == 0 || n_rows > u32::MAX as usize {
        return Err(corrupt(format!(
            "a fit on {n_rows} rows of {d} features is not possible"
        )));
    }
    // The node data: increasing rows of the training set, statistics of as many targets,
    // a finite extent.
    let mut data: Vec<Arc<NodeData<L::Stats>>> = Vec::with_capacity(file.data.len());
    for (k, item) in file.data.into_iter().enumerate() {
        let bad = |what: &str| corrupt(format!("node data {k}: {what}"));
        let rows = item.rows.into_owned();
        let increasing = rows.windows(2).all(|w| w[0] < w[1]);
        if rows.is_empty() || !increasing || rows[rows.len() - 1] as usize >= n_rows {
            return Err(bad("its rows are not a set of training rows"));
        }
        let stats = item.stats.into_owned();
        if !stats.plausible(rows.len(), n_classes) {
            return Err(bad("its statistics do not match its rows"));
        }
        let bounds = item.bounds.into_owned();
        let (lo, hi) = bounds.split_at(bounds.len().min(d));
        let extent_ok = bounds.len() % 2 == 0
            && bounds.len() / 2 == d
            && bounds.iter().all(|v| v.is_finite())
            && lo.iter().zip(hi).all(|(l, h)| l <= h);
        if !extent_ok {
            return Err(bad("its extent is not a box of the features"));
        }
        let log_ml = model.log_marginal(&stats);
        if !log_ml.is_finite() {
            return Err(bad("its marginal likelihood is not finite"));
        }
        data.push(Arc::new(NodeData {
            rows: rows.into_boxed_slice(),
            stats,
            log_ml,
            bounds: OnceLock::from(bounds.into_boxed_slice()),
        }));
    }
    let sizes = island_sizes(params);
    if file.islands.len() != sizes.len() {
        return Err(corrupt(format!(
            "{} islands where the parameters ask for {}",
            file.islands.len(),
            sizes.len()
        )));
    }
    let mut used = vec![false; data.len()];
    let mut root: Option<u32> = None;
    // Splits of data already checked: (parent, left, right, dim, threshold bits).
    let mut checked: HashSet<(u32, u32, u32, u32, u64)> = HashSet::new();
    let mut islands = Vec::with_capacity(sizes.len());
    for (i, (island, &size)) in file.islands.into_iter().zip(&sizes).enumerate() {
        let n_trees = island.trees.len();
        if island.n_particles != size as u64 || n_trees == 0 || n_trees > size {
            return Err(corrupt(format!(
                "island {i}: {n_trees} distinct trees of {} particles where the parameters \
                 give it {size}",
                island.n_particles
            )));
        }
        let counts_ok = island.resamplings <= island.stages
            && island.stages <= params.max_stages as u64
            && (!island.truncated || island.stages == params.max_stages as u64);
        if !counts_ok || !island.log_evidence.is_finite() {
            return Err(corrupt(format!("island {i}: an impossible run summary")));
        }
        let mut particles = Vec::with_capacity(n_trees);
        for (t, tree) in island.trees.into_iter().enumerate() {
            let bad =
                |j: usize, what: &str| corrupt(format!("island {i}, tree {t}, node {j}: {what}"));
            if !tree.log_weight.is_finite() {
                return Err(corrupt(format!(
                    "island {i}, tree {t}: a log-weight that is not finite"
                )));
            }
            let nodes = &tree.nodes;
            if nodes.is_empty() || nodes.len() > 2 * n_rows {
                return Err(corrupt(format!(
                    "island {i}, tree {t}: {} nodes for {n_rows} rows",
                    nodes.len()
                )));
            }
            let mut built: Vec<Node<L::Stats>> = Vec::with_capacity(nodes.len());
            for (j, node) in nodes.iter().enumerate() {
                let k = node.data as usize;
                if k >= data.len() {
                    return Err(bad(j, "it names node data that does not exist"));
                }
                used[k] = true;
                if j == 0 {
                    if node.parent != NO_PARENT || node.depth != 0 {
                        return Err(bad(j, "the root has a parent"));
                    }
                    if data[k].rows.len() != n_rows || root.is_some_and(|r| r != node.data) {
                        return Err(bad(j, "the root does not hold every training row"));
                    }
                    root = Some(node.data);
                } else {
                    // A child comes after its parent, which names it.
                    let p = node.parent as usize;
                    let named = p < j
                        && nodes[p]
                            .split
                            .is_some_and(|s| s.left as usize == j || s.right as usize == j);
                    if !named || node.depth != nodes[p].depth + 1 {
                        return Err(bad(j, "its parent is not the node that splits into it"));
                    }
                }
                let kind = match node.split {
                    None => Kind::Leaf,
                    Some(s) => {
                        let (l, r) = (s.left as usize, s.right as usize);
                        let shape_ok = (s.dim as usize) < d
                            && s.threshold.is_finite()
                            && l > j
                            && r == l + 1
                            && r < nodes.len()
                            && nodes[l].parent as usize == j
                            && nodes[r].parent as usize == j;
                        if !shape_ok {
                            return Err(bad(j, "a split that does not make two children"));
                        }
                        let (pk, lk, rk) = (node.data, nodes[l].data, nodes[r].data);
                        let key = (pk, lk, rk, s.dim, s.threshold.to_bits());
                        if !checked.contains(&key) {
                            let ok = match (data.get(lk as usize), data.get(rk as usize)) {
                                (Some(left), Some(right)) => {
                                    splits(&data[k], left, right, s.dim as usize, s.threshold, d)
                                }
                                _ => false,
                            };
                            if !ok {
                                return Err(bad(
                                    j,
                                    "its children's data do not split its rows at its rule",
                                ));
                            }
                            checked.insert(key);
                        }
                        Kind::Split {
                            dim: s.dim,
                            threshold: s.threshold,
                            left: s.left,
                            right: s.right,
                        }
                    }
                };
                built.push(Node {
                    data: Arc::clone(&data[k]),
                    parent: node.parent,
                    depth: node.depth,
                    kind,
                });
            }
            particles.push((tree.log_weight, BayesTree { nodes: built }));
        }
        islands.push(IslandRun {
            log_evidence: island.log_evidence,
            particles,
            n_particles: size,
            stages: island.stages as usize,
            resamplings: island.resamplings as usize,
            truncated: island.truncated,
        });
    }
    if used.iter().any(|u| !u) {
        return Err(corrupt("node data that no tree uses"));
    }
    let posterior = SmcPosterior::combine(islands, params.island_weighting);
    let weights_ok =
        posterior.trees().all(|t| t.weight.is_finite()) && posterior.log_evidence().is_finite();
    if !weights_ok {
        return Err(corrupt("the particles' weights do not combine"));
    }
    Ok((d, posterior))
}

/// Whether `left` and `right` are the two sides of `parent` at x_dim ≤ threshold: their
/// rows split the parent's, their statistics add up, and their extents lie within the
/// parent's on the right side of the threshold.
fn splits<S: StoredStats>(
    parent: &NodeData<S>,
    left: &NodeData<S>,
    right: &NodeData<S>,
    dim: usize,
    threshold: f64,
    d: usize,
) -> bool {
    // Loaded data always has its extent (a box of 2D values, checked on load).
    let (pb, lb, rb) = (
        parent.known_bounds(),
        left.known_bounds(),
        right.known_bounds(),
    );
    if [pb, lb, rb].iter().any(|b| b.len() != 2 * d) {
        return false;
    }
    let within = |c: &[f64]| (0..d).all(|k| c[k] >= pb[k] && c[d + k] <= pb[d + k]);
    partitions(&parent.rows, &left.rows, &right.rows)
        && S::adds_up(&parent.stats, &left.stats, &right.stats)
        && within(lb)
        && within(rb)
        && lb[d + dim] <= threshold
        && rb[dim] > threshold
}
