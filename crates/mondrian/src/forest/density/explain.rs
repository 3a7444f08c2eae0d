//! Explanations of a Pólya forest's score (spec `mondrian-polya-forest.md` §8.4). **An
//! extension**: the paper's interpretability is the leaf mass itself and the leaf's region
//! encoding; the summaries here (critical step, out-of-box dimensions, attribution) are
//! descriptive readings of the same paths, not part of the model.

use serde::Serialize;

use super::polya::{Evaluation, LeafKind, Step};
use super::RowScore;

/// One tree's path for a query.
#[derive(Debug, Clone, Serialize)]
pub struct TreeExplanation {
    /// The leaf's mass in this tree.
    pub mass: f64,
    /// The kind of leaf the query ends in.
    pub kind: LeafKind,
    /// The leaf's region encoding `c₀r₀c₁r₁…` (§4.2).
    pub encoding: String,
    /// The Pólya levels of the path, root first; thresholds in raw units.
    pub steps: Vec<Step>,
    /// The step with the smallest share (the most mass lost), if any.
    pub critical_step: Option<usize>,
}

/// Why a row scores as it does.
#[derive(Debug, Clone, Serialize)]
pub struct Explanation {
    /// The forest's score of the row.
    pub score: RowScore,
    /// Each tree's path.
    pub trees: Vec<TreeExplanation>,
    /// Per feature, the share of the mass the paths lost to it, summed over trees and
    /// normalised to 1 (all 0 when nothing was lost): a cut step's `−ln share` goes to its
    /// dimension, a complement step's is split over the dimensions in proportion to how
    /// far outside the box the row lies there (relative to the side's extent).
    pub attribution: Vec<f64>,
    /// Per feature, the mean over the trees whose leaf is a complement of how far the row
    /// lies outside the box of the points seen there, relative to the side's extent: the
    /// dimensions in which it sits where the data were not.
    pub out_of_box: Vec<f64>,
    /// How many trees put the row in a complement (a region with no data).
    pub n_complement: usize,
}

impl Explanation {
    /// Builds the summaries from each tree's evaluation and steps (`n_features` wide).
    pub(crate) fn new(
        score: RowScore,
        evals: &[Evaluation],
        steps: Vec<Vec<Step>>,
        n_features: usize,
    ) -> Self {
        let mut attribution = vec![0.0; n_features];
        let mut out_of_box = vec![0.0; n_features];
        let mut n_complement = 0;
        let trees = evals
            .iter()
            .zip(steps)
            .map(|(e, steps)| {
                let mut encoding = String::new();
                let mut critical: Option<(usize, f64)> = None;
                for (k, step) in steps.iter().enumerate() {
                    let share = match step {
                        Step::Cut {
                            dim, side, share, ..
                        } => {
                            encoding.push(if *side == 0 { '0' } else { '1' });
                            attribution[*dim] -= share.ln();
                            *share
                        }
                        Step::Restrict {
                            inside,
                            share,
                            excess,
                        } => {
                            encoding.push(if *inside { '∈' } else { '¬' });
                            if !inside {
                                let total: f64 = excess.iter().sum();
                                if total > 0.0 {
                                    for (a, x) in attribution.iter_mut().zip(excess) {
                                        *a -= share.ln() * x / total;
                                    }
                                }
                                for (o, x) in out_of_box.iter_mut().zip(excess) {
                                    *o += x;
                                }
                            }
                            *share
                        }
                    };
                    if critical.is_none_or(|(_, s)| share < s) {
                        critical = Some((k, share));
                    }
                }
                if e.kind == LeafKind::Complement {
                    n_complement += 1;
                }
                TreeExplanation {
                    mass: e.log_mass.exp(),
                    kind: e.kind,
                    encoding,
                    steps,
                    critical_step: critical.map(|(k, _)| k),
                }
            })
            .collect();
        let total: f64 = attribution.iter().sum();
        if total > 0.0 && total.is_finite() {
            attribution.iter_mut().for_each(|a| *a /= total);
        } else {
            attribution.iter_mut().for_each(|a| *a = 0.0);
        }
        if n_complement > 0 {
            out_of_box
                .iter_mut()
                .for_each(|o| *o /= n_complement as f64);
        }
        Explanation {
            score,
            trees,
            attribution,
            out_of_box,
            n_complement,
        }
    }

    /// The features by attribution, largest first, with their shares.
    pub fn top_features(&self) -> Vec<(usize, f64)> {
        let mut v: Vec<(usize, f64)> = self.attribution.iter().copied().enumerate().collect();
        v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        v
    }
}
