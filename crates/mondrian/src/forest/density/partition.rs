//! The batch Mondrian Pólya tree (bMPT, spec `mondrian-polya-forest.md` §3): a Pólya tree
//! on a partition drawn from the Mondrian **process** on a fixed domain box, not restricted
//! to the data. The partition does not depend on the points, so inserting or deleting one
//! only moves the counts on its path (§3.2), exactly.
//!
//! The cells are never stored: a node keeps its split dimension, its location and the
//! share `f₀` of its cell's extent left of the cut, which is all the Pólya reading needs
//! (`α_k = γ(d+1)² f_k + n_k`, §3.2), and its point count.

use rand::Rng;
use serde::{Deserialize, Serialize};

use super::polya::{Evaluation, LeafKind, PolyaLeaf, Step};
use crate::process::{sample_exponential, sample_proportional};

const NO_CHILD: u32 = u32::MAX;

/// One bMPT: the partition (sampled once) and the counts.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Partition {
    /// Left child per node (the right is `left + 1`); [`NO_CHILD`] for a leaf.
    left: Vec<u32>,
    dim: Vec<u32>,
    loc: Vec<f64>,
    /// Share of the node's cell left of the cut.
    share_left: Vec<f64>,
    count: Vec<u32>,
}

impl Partition {
    /// A Mondrian process on the box `[lower, upper]` with lifetime `lifetime`, cut down to
    /// depth `max_depth` (§3.1); one of the two must be finite. Dimensions of zero extent
    /// are never cut.
    pub(crate) fn sample<R: Rng + ?Sized>(
        lower: &[f64],
        upper: &[f64],
        lifetime: f64,
        max_depth: Option<usize>,
        rng: &mut R,
    ) -> Self {
        let mut p = Partition {
            left: vec![NO_CHILD],
            dim: vec![0],
            loc: vec![0.0],
            share_left: vec![0.0],
            count: vec![0],
        };
        // (node, depth, parent time, cell)
        let mut stack = vec![(0u32, 0usize, 0.0f64, lower.to_vec(), upper.to_vec())];
        while let Some((j, depth, tau_parent, lo, hi)) = stack.pop() {
            if max_depth.is_some_and(|m| depth >= m) {
                continue;
            }
            let sides = lo.iter().zip(&hi).map(|(l, u)| u - l);
            let linear: f64 = sides.clone().sum();
            let tau = tau_parent + sample_exponential(rng, linear);
            if tau >= lifetime || tau.is_nan() {
                continue;
            }
            let d = sample_proportional(rng, sides, linear);
            // ξ uniform on the open interval (l, u) (§12 A10).
            let xi = loop {
                let v = lo[d] + rng.gen::<f64>() * (hi[d] - lo[d]);
                if v > lo[d] && v < hi[d] {
                    break v;
                }
            };
            let first = p.left.len() as u32;
            let i = j as usize;
            p.left[i] = first;
            p.dim[i] = d as u32;
            p.loc[i] = xi;
            p.share_left[i] = (xi - lo[d]) / (hi[d] - lo[d]);
            for _ in 0..2 {
                p.left.push(NO_CHILD);
                p.dim.push(0);
                p.loc.push(0.0);
                p.share_left.push(0.0);
                p.count.push(0);
            }
            let (mut hi_l, mut lo_r) = (hi.clone(), lo.clone());
            hi_l[d] = xi;
            lo_r[d] = xi;
            stack.push((first + 1, depth + 1, tau, lo_r, hi));
            stack.push((first, depth + 1, tau, lo, hi_l));
        }
        p
    }

    /// Adds `delta` to the counts on the path of `x` (in the domain).
    pub(crate) fn add(&mut self, x: &[f32], delta: i64) {
        let mut j = 0usize;
        loop {
            self.count[j] = (i64::from(self.count[j]) + delta) as u32;
            let l = self.left[j];
            if l == NO_CHILD {
                return;
            }
            j = (l + u32::from(f64::from(x[self.dim[j] as usize]) > self.loc[j])) as usize;
        }
    }

    /// Evaluates the tree at `x` (inside the domain, whose ln-volume is `log_domain`),
    /// §3.2; `record` hears each cut.
    pub(crate) fn evaluate(
        &self,
        x: &[f32],
        gamma: f64,
        log_domain: f64,
        mut record: Option<&mut Vec<Step>>,
    ) -> Evaluation {
        let (mut j, mut depth) = (0usize, 0usize);
        let (mut log_mass, mut log_volume) = (0.0, log_domain);
        while self.left[j] != NO_CHILD {
            let side = u8::from(f64::from(x[self.dim[j] as usize]) > self.loc[j]);
            let f = match side {
                0 => self.share_left[j],
                _ => 1.0 - self.share_left[j],
            };
            let c = (self.left[j] + u32::from(side)) as usize;
            let a = gamma * ((depth + 1) as f64).powi(2);
            let share = (a * f + f64::from(self.count[c])) / (a + f64::from(self.count[j]));
            log_mass += share.ln();
            log_volume += f.ln();
            if let Some(r) = record.as_deref_mut() {
                r.push(Step::Cut {
                    dim: self.dim[j] as usize,
                    threshold: self.loc[j],
                    side,
                    share,
                });
            }
            j = c;
            depth += 1;
        }
        Evaluation {
            log_mass,
            log_volume,
            kind: if depth == 0 {
                LeafKind::Root
            } else {
                LeafKind::TypeI
            },
        }
    }

    /// Every leaf cell with its mass and volume (§11 item 2).
    pub(crate) fn leaves(&self, gamma: f64, log_domain: f64) -> Vec<PolyaLeaf> {
        let mut out = Vec::new();
        let mut stack = vec![(0usize, 0usize, 0.0f64, log_domain, String::new())];
        while let Some((j, depth, log_mass, log_volume, code)) = stack.pop() {
            if self.left[j] == NO_CHILD {
                out.push(PolyaLeaf {
                    log_mass,
                    log_volume,
                    kind: if depth == 0 {
                        LeafKind::Root
                    } else {
                        LeafKind::TypeI
                    },
                    encoding: code,
                });
                continue;
            }
            let a = gamma * ((depth + 1) as f64).powi(2);
            for side in 0..2u32 {
                let f = match side {
                    0 => self.share_left[j],
                    _ => 1.0 - self.share_left[j],
                };
                let c = (self.left[j] + side) as usize;
                let share = (a * f + f64::from(self.count[c])) / (a + f64::from(self.count[j]));
                stack.push((
                    c,
                    depth + 1,
                    log_mass + share.ln(),
                    log_volume + f.ln(),
                    format!("{code}{side}"),
                ));
            }
        }
        out
    }

    /// Whether the arrays agree in length, children lie after their parent, and counts add
    /// up (for decoded models).
    pub(crate) fn is_consistent(&self, n_features: usize) -> bool {
        let n = self.left.len();
        if [
            self.dim.len(),
            self.loc.len(),
            self.share_left.len(),
            self.count.len(),
        ]
        .iter()
        .any(|&m| m != n)
            || n == 0
        {
            return false;
        }
        (0..n).all(|j| match self.left[j] {
            NO_CHILD => true,
            l => {
                let l = l as usize;
                l > j
                    && l + 1 < n
                    && (self.dim[j] as usize) < n_features
                    && self.share_left[j] > 0.0
                    && self.share_left[j] < 1.0
                    && self.count[j] == self.count[l] + self.count[l + 1]
            }
        })
    }
}
