//! Decoding a saved Pólya forest: every field is checked, so a forest read from any file
//! is as safe as a trained one.

use serde::Deserialize;

use super::{MondrianPolyaForest, PolyaParams, Trees};
use crate::error::MondrianError;
use crate::forest::{Pool, TreeRange};

/// The stored fields; decoding checks them, so a forest read from any file is as safe as
/// a trained one.
#[derive(Deserialize)]
pub(crate) struct PolyaState {
    pub(super) params: PolyaParams,
    trees: Trees,
    /// A shard's trees, set from its file's header before the checks (`shard.rs`): not
    /// part of the body, which is a whole forest's.
    #[serde(skip)]
    pub(super) range: Option<TreeRange>,
}

impl TryFrom<PolyaState> for MondrianPolyaForest {
    type Error = crate::forest::DecodeError;

    fn try_from(s: PolyaState) -> std::result::Result<Self, Self::Error> {
        s.params.validate()?;
        let mut model = MondrianPolyaForest {
            params: s.params,
            trees: s.trees,
            range: s.range,
        };
        let corrupt = |m: &str| crate::forest::DecodeError(MondrianError::CorruptModel(m.into()));
        let n_threads = model.params.n_threads;
        let lifetime = model.params.lifetime;
        let n_trees = model.params.n_trees;
        // A shard holds the trees of its range only.
        let held = model.shard_range().len();
        let range = model.range;
        match &mut model.trees {
            Trees::Empty => {}
            Trees::Streaming(f) => {
                f.pool = Pool::new(n_threads);
                f.range = range;
                f.check_decoded(n_trees, lifetime, |stats, tree| {
                    let Some(root) = tree.root() else {
                        return Ok(());
                    };
                    for j in tree.subtree_preorder(root) {
                        let n = match tree.children(j) {
                            Some((l, r)) => stats.count(l) as usize + stats.count(r) as usize,
                            None => tree.leaf_points(j).len(),
                        };
                        if stats.count(j) as usize != n {
                            return Err(format!("node {j}: its count is not its points'"));
                        }
                    }
                    Ok(())
                })?;
            }
            Trees::Batch(b) => {
                b.pool = Pool::new(n_threads);
                b.store.check()?;
                let d = b.store.n_features.unwrap_or(0);
                if b.trees.len() != held
                    || b.lower.len() != d
                    || b.upper.len() != d
                    || b.lower
                        .iter()
                        .zip(&b.upper)
                        .any(|(l, u)| !(l <= u && u.is_finite()))
                    || !b.trees.iter().all(|t| t.is_consistent(d))
                {
                    return Err(corrupt("the batch trees do not match their domain"));
                }
            }
        }
        Ok(model)
    }
}
