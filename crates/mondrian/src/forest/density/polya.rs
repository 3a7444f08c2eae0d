//! The streaming Mondrian Pólya tree (sMPT) read off the engine's Mondrian tree (spec
//! `mondrian-polya-forest.md` §4): every split of the tree is two Pólya levels, a **cut**
//! of the node's box at the split and a **restriction** of each side to its child's box,
//! with Beta parameters derived from the boxes, the depth and the point counts.
//!
//! Nothing here is stored: a tree with [`PointCounts`] is the whole state (§7.1), so after
//! any insertions and deletions the masses equal those of a tree built on the current
//! points. The depth cap is a view: a node at depth `max_depth` is read as a leaf, which
//! is exactly the Mondrian tree truncated at that depth (truncation is a function of the
//! untruncated tree, so online ≡ batch and exact deletion carry over unchanged).
//!
//! Log-volumes and degeneracy use only the **active** dimensions, those where the root box
//! has positive extent (§12 A9).

use std::borrow::Cow;

use crate::process::Feature;
use crate::stats::counts::PointCounts;
use crate::tree::MondrianTree;

/// What kind of Pólya leaf a query ends in (§4.2, §8.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum LeafKind {
    /// The root is a leaf (one point, or the depth cap at 0): the whole domain.
    Root,
    /// A side of a cut whose child's box is degenerate: the whole side, unrestricted.
    TypeI,
    /// A Mondrian leaf (or a node at the depth cap) with a non-degenerate box: that box.
    TypeII,
    /// The part of a cut's side outside its child's box, where no point was seen.
    Complement,
    /// Outside the domain: mass 0.
    OutOfDomain,
}

/// One Pólya level on a query's path (§8.4).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub enum Step {
    /// A cut at Pólya depth `2d` (`d` for a batch tree): the query went to `side` (0: `≤`).
    Cut {
        /// Split dimension.
        dim: usize,
        /// Split location (in the trees' space).
        threshold: f64,
        /// 0 for `x[dim] ≤ threshold`, 1 otherwise.
        side: u8,
        /// Share of the parent's mass this side takes.
        share: f64,
    },
    /// A restriction at Pólya depth `2d + 1`: the query fell inside the child's box
    /// (`inside`) or in its complement.
    Restrict {
        /// Whether the query lies in the box of the points seen.
        inside: bool,
        /// Share of the side's mass this branch takes.
        share: f64,
        /// For the complement: how far outside the box the query lies per dimension,
        /// divided by the side's extent there (0 inside the box's range).
        excess: Vec<f64>,
    },
}

/// The result of evaluating one tree at one query.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Evaluation {
    /// ln of the leaf's mass (−∞ outside the domain).
    pub log_mass: f64,
    /// ln of the leaf's volume over the active dimensions.
    pub log_volume: f64,
    /// The kind of leaf.
    pub kind: LeafKind,
}

impl Evaluation {
    pub(crate) const OUTSIDE: Evaluation = Evaluation {
        log_mass: f64::NEG_INFINITY,
        log_volume: f64::NEG_INFINITY,
        kind: LeafKind::OutOfDomain,
    };

    /// ln of the density, `log_mass − log_volume` (−∞ outside the domain).
    pub fn log_density(&self) -> f64 {
        match self.kind {
            LeafKind::OutOfDomain => f64::NEG_INFINITY,
            _ => self.log_mass - self.log_volume,
        }
    }
}

/// One Pólya leaf of a tree, for enumeration (§11 items 2, 4).
#[derive(Debug, Clone, PartialEq)]
pub struct PolyaLeaf {
    /// ln of its mass.
    pub log_mass: f64,
    /// ln of its volume.
    pub log_volume: f64,
    /// Its kind.
    pub kind: LeafKind,
    /// The region's encoding `c₀r₀c₁r₁…` (§4.2): cut sides `0`/`1`, then `∈` (the box),
    /// `¬` (its complement) or nothing (a Type I side).
    pub encoding: String,
}

/// An engine tree with its counts, read as an sMPT with prior strength `gamma` and depth
/// cap `max_depth`, over the training features `features` it indexes.
pub(crate) struct StreamingView<'a> {
    pub(crate) tree: &'a MondrianTree,
    pub(crate) counts: &'a PointCounts,
    pub(crate) features: &'a [Feature],
    pub(crate) gamma: f64,
    pub(crate) max_depth: Option<usize>,
}

/// A node's box.
struct NodeBox<'a> {
    lower: Cow<'a, [Feature]>,
    upper: Cow<'a, [Feature]>,
}

/// Sides multiplied together before one logarithm is taken: a box's log-volume costs a
/// logarithm per group rather than per dimension.
const SIDES_PER_LOG: usize = 8;

impl NodeBox<'_> {
    /// ln of the volume over the active dimensions (where `root` has extent).
    fn log_volume(&self, root: &NodeBox) -> f64 {
        let (mut total, mut product, mut k) = (0.0, 1.0f64, 0);
        let active = root.lower.iter().zip(root.upper.iter()).map(|(l, u)| u > l);
        for ((&l, &u), a) in self.lower.iter().zip(self.upper.iter()).zip(active) {
            if a {
                product *= f64::from(u) - f64::from(l);
                k += 1;
                if k == SIDES_PER_LOG {
                    total += product.ln();
                    (product, k) = (1.0, 0);
                }
            }
        }
        total += product.ln();
        if total.is_finite() || self.degenerate(root) {
            return total;
        }
        // A group of very large or very small sides left the range of f64: one logarithm
        // per side.
        self.lower
            .iter()
            .zip(self.upper.iter())
            .zip(root.lower.iter().zip(root.upper.iter()))
            .filter(|(_, (rl, ru))| ru > rl)
            .map(|((&l, &u), _)| (f64::from(u) - f64::from(l)).ln())
            .sum()
    }
    /// Zero extent in an active dimension.
    fn degenerate(&self, root: &NodeBox) -> bool {
        self.lower
            .iter()
            .zip(self.upper.iter())
            .zip(root.lower.iter().zip(root.upper.iter()))
            .any(|((l, u), (rl, ru))| ru > rl && u <= l)
    }
    /// Whether some dimension has extent.
    fn has_extent(&self) -> bool {
        self.lower.iter().zip(self.upper.iter()).any(|(l, u)| u > l)
    }
    fn contains(&self, x: &[Feature]) -> bool {
        x.iter()
            .zip(self.lower.iter().zip(self.upper.iter()))
            .all(|(&v, (&l, &u))| l <= v && v <= u)
    }
}

impl<'a> StreamingView<'a> {
    fn node_box(&self, node: u32) -> NodeBox<'a> {
        let (lower, upper) = self.tree.data_box(node, self.features);
        NodeBox { lower, upper }
    }

    /// The active dimensions (positive extent in the root box); `None` for an empty tree.
    pub(crate) fn active(&self) -> Option<Vec<bool>> {
        let root = self.tree.root()?;
        let b = self.node_box(root);
        Some(
            b.lower
                .iter()
                .zip(b.upper.iter())
                .map(|(l, u)| u > l)
                .collect(),
        )
    }

    /// Whether node `node` at depth `depth` is a leaf of the Pólya reading: a Mondrian
    /// leaf, or a node at the depth cap.
    fn ends(&self, node: u32, depth: usize) -> bool {
        self.tree.is_leaf(node) || self.max_depth.is_some_and(|m| depth >= m)
    }

    /// Evaluates the tree at `x` (in the trees' space), §4.4; `record` hears each step.
    ///
    /// The mass is a running product of the shares (one logarithm at the end) and a
    /// restriction's volume ratio a product of side ratios, so a step costs no logarithm;
    /// only the leaf's volume is taken in logs.
    pub(crate) fn evaluate(&self, x: &[Feature], mut record: Option<&mut Vec<Step>>) -> Evaluation {
        let Some(root) = self.tree.root() else {
            return Evaluation::OUTSIDE;
        };
        let root_box = self.node_box(root);
        if !root_box.contains(x) {
            return Evaluation::OUTSIDE;
        }
        if self.ends(root, 0) || !root_box.has_extent() {
            return Evaluation {
                log_mass: 0.0,
                log_volume: match root_box.has_extent() {
                    true => root_box.log_volume(&root_box),
                    false => f64::NEG_INFINITY,
                },
                kind: LeafKind::Root,
            };
        }
        let (mut j, mut depth) = (root, 0usize);
        // The mass is `mass · e^log_scale`; the scale takes over if the product gets small.
        let (mut mass, mut log_scale) = (1.0f64, 0.0f64);
        let mut j_box = self.node_box(root);
        loop {
            let dim = self.tree.split_dimension(j);
            let xi = f64::from(self.tree.split_location(j));
            let (l, u) = (f64::from(j_box.lower[dim]), f64::from(j_box.upper[dim]));
            let side = u8::from(f64::from(x[dim]) > xi);
            let f = match side {
                0 => (xi - l) / (u - l),
                _ => (u - xi) / (u - l),
            };
            let c = self.tree.route(j, x);
            let (n_j, n_c) = (
                f64::from(self.counts.count(j)),
                f64::from(self.counts.count(c)),
            );
            let a = self.gamma * ((2 * depth + 1) as f64).powi(2);
            let share = (a * f + n_c) / (a + n_j);
            mass *= share;
            if let Some(r) = record.as_deref_mut() {
                r.push(Step::Cut {
                    dim,
                    threshold: xi,
                    side,
                    share,
                });
            }
            let c_box = self.node_box(c);
            let Some((ratio, inside)) = child_reading(&c_box, &j_box, &root_box, x) else {
                return Evaluation {
                    log_mass: mass.ln() + log_scale,
                    log_volume: j_box.log_volume(&root_box) + f.ln(),
                    kind: LeafKind::TypeI,
                };
            };
            let b = self.gamma * ((2 * depth + 2) as f64).powi(2);
            let ratio = (ratio / f).min(1.0);
            if inside {
                let share = (b * ratio + n_c) / (b + n_c);
                mass *= share;
                if let Some(r) = record.as_deref_mut() {
                    r.push(Step::Restrict {
                        inside: true,
                        share,
                        excess: Vec::new(),
                    });
                }
                if self.ends(c, depth + 1) {
                    return Evaluation {
                        log_mass: mass.ln() + log_scale,
                        log_volume: c_box.log_volume(&root_box),
                        kind: LeafKind::TypeII,
                    };
                }
                if mass < RESCALE_BELOW {
                    log_scale += mass.ln();
                    mass = 1.0;
                }
                j = c;
                j_box = c_box;
                depth += 1;
            } else {
                let share = b * (1.0 - ratio) / (b + n_c);
                mass *= share;
                if let Some(r) = record.as_deref_mut() {
                    r.push(Step::Restrict {
                        inside: false,
                        share,
                        excess: side_excess(&j_box, dim, side, xi, &c_box, x),
                    });
                }
                return Evaluation {
                    log_mass: mass.ln() + log_scale,
                    log_volume: j_box.log_volume(&root_box) + f.ln() + (-ratio).ln_1p(),
                    kind: LeafKind::Complement,
                };
            }
        }
    }

    /// Every Pólya leaf of the tree with its mass, volume and encoding (§11 items 2, 4).
    pub(crate) fn leaves(&self) -> Vec<PolyaLeaf> {
        let mut out = Vec::new();
        let Some(root) = self.tree.root() else {
            return out;
        };
        let root_box = self.node_box(root);
        let any = root_box.has_extent();
        let log_root = if any {
            root_box.log_volume(&root_box)
        } else {
            f64::NEG_INFINITY
        };
        if self.ends(root, 0) || !any {
            out.push(PolyaLeaf {
                log_mass: 0.0,
                log_volume: log_root,
                kind: LeafKind::Root,
                encoding: String::new(),
            });
            return out;
        }
        // (node, depth, ln mass, ln volume, encoding)
        let mut stack = vec![(root, 0usize, 0.0f64, log_root, String::new())];
        while let Some((j, depth, log_mass, log_volume, code)) = stack.pop() {
            let j_box = self.node_box(j);
            let dim = self.tree.split_dimension(j);
            let xi = f64::from(self.tree.split_location(j));
            let (l, u) = (f64::from(j_box.lower[dim]), f64::from(j_box.upper[dim]));
            let (left, right) = self.tree.children(j).expect("an internal node");
            let n_j = f64::from(self.counts.count(j));
            let a = self.gamma * ((2 * depth + 1) as f64).powi(2);
            let b = self.gamma * ((2 * depth + 2) as f64).powi(2);
            for (side, c, f) in [
                (0u8, left, (xi - l) / (u - l)),
                (1u8, right, (u - xi) / (u - l)),
            ] {
                let n_c = f64::from(self.counts.count(c));
                let m_side = log_mass + ((a * f + n_c) / (a + n_j)).ln();
                let v_side = log_volume + f.ln();
                let code = format!("{code}{side}");
                let c_box = self.node_box(c);
                if c_box.degenerate(&root_box) {
                    out.push(PolyaLeaf {
                        log_mass: m_side,
                        log_volume: v_side,
                        kind: LeafKind::TypeI,
                        encoding: code,
                    });
                    continue;
                }
                let log_c = c_box.log_volume(&root_box);
                let ratio = (log_c - v_side).exp().min(1.0);
                out.push(PolyaLeaf {
                    log_mass: m_side + (b * (1.0 - ratio) / (b + n_c)).ln(),
                    log_volume: v_side + (-ratio).ln_1p(),
                    kind: LeafKind::Complement,
                    encoding: format!("{code}¬"),
                });
                let m_in = m_side + ((b * ratio + n_c) / (b + n_c)).ln();
                if self.ends(c, depth + 1) {
                    out.push(PolyaLeaf {
                        log_mass: m_in,
                        log_volume: log_c,
                        kind: LeafKind::TypeII,
                        encoding: format!("{code}∈"),
                    });
                } else {
                    stack.push((c, depth + 1, m_in, log_c, format!("{code}∈")));
                }
            }
        }
        out
    }
}

/// Below this the running mass of [`StreamingView::evaluate`] moves into its log scale.
const RESCALE_BELOW: f64 = 1e-200;

/// One pass over the dimensions for a child's box `c` under its parent's box `j`: `None`
/// if `c` is degenerate (zero extent in an active dimension), else the volume ratio
/// `Π_d h(c)_d / h(j)_d` over the active dimensions (each factor in (0, 1], so no
/// overflow) and whether `c` contains `x`.
fn child_reading(c: &NodeBox, j: &NodeBox, root: &NodeBox, x: &[Feature]) -> Option<(f64, bool)> {
    let (mut r, mut inside) = (1.0, true);
    for (k, &v) in x.iter().enumerate() {
        let (cl, cu) = (c.lower[k], c.upper[k]);
        inside &= cl <= v && v <= cu;
        if root.upper[k] > root.lower[k] {
            if cu <= cl {
                return None;
            }
            r *= (f64::from(cu) - f64::from(cl)) / (f64::from(j.upper[k]) - f64::from(j.lower[k]));
        }
    }
    Some((r, inside))
}

/// Per dimension, how far `x` lies outside the child's box `c`, divided by the extent of
/// the cut's side `R` there (the side is `j_box` cut at `xi` along `dim`).
fn side_excess(
    j_box: &NodeBox,
    dim: usize,
    side: u8,
    xi: f64,
    c: &NodeBox,
    x: &[Feature],
) -> Vec<f64> {
    (0..x.len())
        .map(|d| {
            let (mut l, mut u) = (f64::from(j_box.lower[d]), f64::from(j_box.upper[d]));
            if d == dim {
                if side == 0 {
                    u = xi;
                } else {
                    l = xi;
                }
            }
            let v = f64::from(x[d]);
            let e = (f64::from(c.lower[d]) - v).max(0.0) + (v - f64::from(c.upper[d])).max(0.0);
            if u > l {
                e / (u - l)
            } else {
                0.0
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::{Layout, PauseRule, TrainingPoints};

    /// Spec §4.5 (Appx. C) scaled by 20, which leaves masses unchanged (§11 item 12) and
    /// makes every coordinate exact in f32: x1 = (0,0), x2 = (5,5), x3 = (8,16),
    /// x4 = (20,20); the root cuts x at 10, its left child cuts y at 8. Volumes scale by
    /// 400 and densities by 1/400.
    fn appendix_c() -> (MondrianTree, PointCounts, Vec<Feature>) {
        let x: Vec<Feature> = vec![0.0, 0.0, 5.0, 5.0, 8.0, 16.0, 20.0, 20.0];
        let targets = [(); 4];
        let data = TrainingPoints {
            features: &x,
            n_features: 2,
            targets: &targets,
        };
        let layout = Layout::Split {
            tau: 1.0,
            dim: 0,
            loc: 10.0,
            left: Box::new(Layout::Split {
                tau: 2.0,
                dim: 1,
                loc: 8.0,
                left: Box::new(Layout::Leaf(vec![0, 1])),
                right: Box::new(Layout::Leaf(vec![2])),
            }),
            right: Box::new(Layout::Leaf(vec![3])),
        };
        let mut counts = PointCounts::default();
        let tree = MondrianTree::from_layout(
            2,
            f64::INFINITY,
            PauseRule::NEVER,
            &layout,
            &data,
            &mut counts,
        )
        .unwrap();
        (tree, counts, x)
    }

    #[test]
    fn appendix_c_golden_example() {
        let (tree, counts, x) = appendix_c();
        for max_depth in [Some(2), None] {
            let view = StreamingView {
                tree: &tree,
                counts: &counts,
                features: &x,
                gamma: 1.0,
                max_depth,
            };
            // (encoding, kind, mass, volume in the unit square), from the spec's table.
            let expected = [
                ("1", LeafKind::TypeI, 3.0 / 10.0, 1.0 / 2.0),
                ("0¬", LeafKind::Complement, 18.0 / 125.0, 9.0 / 50.0),
                ("0∈1", LeafKind::TypeI, 1529.0 / 6000.0, 4.0 / 25.0),
                ("0∈0∈", LeafKind::TypeII, 19877.0 / 144000.0, 1.0 / 16.0),
                (
                    "0∈0¬",
                    LeafKind::Complement,
                    23491.0 / 144000.0,
                    39.0 / 400.0,
                ),
            ];
            let leaves = view.leaves();
            assert_eq!(leaves.len(), expected.len());
            for (code, kind, mass, volume) in expected {
                let leaf = leaves.iter().find(|l| l.encoding == code).unwrap();
                assert_eq!(leaf.kind, kind, "{code}");
                assert!((leaf.log_mass.exp() - mass).abs() < 1e-12 * mass, "{code}");
                let v = leaf.log_volume.exp() / 400.0;
                assert!((v - volume).abs() < 1e-12 * volume, "{code}");
            }
            let total: f64 = leaves.iter().map(|l| l.log_mass.exp()).sum();
            assert!((total - 1.0).abs() < 1e-12);
            // Queries: one per leaf, with the shares on their paths.
            let at = |p: [Feature; 2]| {
                let mut steps = Vec::new();
                (view.evaluate(&p, Some(&mut steps)), steps)
            };
            let (e, steps) = at([0.0, 0.0]);
            assert_eq!(e.kind, LeafKind::TypeII);
            assert!((e.log_mass.exp() - 19877.0 / 144000.0).abs() < 1e-14);
            let density = (e.log_mass - e.log_volume).exp() * 400.0;
            assert!((density - 2.208556).abs() < 1e-6, "{density}");
            let shares: Vec<f64> = steps
                .iter()
                .map(|s| match s {
                    Step::Cut { share, .. } | Step::Restrict { share, .. } => *share,
                })
                .collect();
            let want = [7.0 / 10.0, 139.0 / 175.0, 13.0 / 24.0, 11.0 / 24.0];
            for (s, w) in shares.iter().zip(want) {
                assert!((s - w).abs() < 1e-14, "{s} vs {w}");
            }
            assert_eq!(at([2.0, 15.0]).0.kind, LeafKind::TypeI);
            assert_eq!(at([9.0, 1.0]).0.kind, LeafKind::Complement);
            assert_eq!(at([4.0, 6.0]).0.kind, LeafKind::Complement);
            assert!((at([4.0, 6.0]).0.log_mass.exp() - 23491.0 / 144000.0).abs() < 1e-14);
            assert!((at([15.0, 2.0]).0.log_mass.exp() - 0.3).abs() < 1e-14);
            assert_eq!(at([21.0, 2.0]).0.kind, LeafKind::OutOfDomain);
            assert_eq!(at([-0.5, 2.0]).0.log_mass, f64::NEG_INFINITY);
        }
        // With a cap of 1 the left child is a leaf: B_0 (Type II) and its complement.
        let view = StreamingView {
            tree: &tree,
            counts: &counts,
            features: &x,
            gamma: 1.0,
            max_depth: Some(1),
        };
        let leaves = view.leaves();
        let total: f64 = leaves.iter().map(|l| l.log_mass.exp()).sum();
        assert_eq!(leaves.len(), 3);
        assert!((total - 1.0).abs() < 1e-12);
        let b0 = leaves.iter().find(|l| l.encoding == "0∈").unwrap();
        assert!((b0.log_mass.exp() - 7.0 / 10.0 * 139.0 / 175.0).abs() < 1e-14);
    }
}
