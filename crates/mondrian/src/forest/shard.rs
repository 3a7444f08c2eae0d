//! Tree-parallel shards of a forest: a shard holds the trees `[first, first + count)` of a
//! forest of `n_trees`, and is trained exactly like the whole forest on the same rows.
//!
//! Why it works: tree t draws from a generator seeded by (seed, t) and takes Poisson copies
//! of a point by (seed, t, id), so a tree does not depend on the other trees nor on how
//! many there are (DESIGN.md principle 3: results do not depend on how the work is
//! divided). A shard keeps the *global* index of each tree, so the trees `[first, first +
//! count)` of a shard are bit for bit those of the whole forest, and shards whose ranges
//! tile `0..n_trees` merge (trees concatenated in range order) into the forest one process
//! would have grown.
//!
//! State that depends on all the trees, and how shards handle it:
//!
//! - The point store (scaled rows, ids, sample weights, scaling, feature weights, the
//!   relevance choice) does not depend on the trees: every shard sees every row, so every
//!   shard holds the same store (windows and `forget` work on shards: ids agree). Merging
//!   checks the stores are identical (same encoded bytes) and keeps one.
//! - Learnt feature weights (`Relevance`, `RelevanceCv`) and the regressor's CV calibration
//!   PITs come from pilot and fold forests built from the *parameters* (which keep the full
//!   tree count) and the first rows, never from the forest's own trees: each shard computes
//!   the same values (replicated work, identical state). Merging checks them equal.
//! - The classifier's class count and the regressor's label moments follow the rows, so
//!   they are replicated; merging checks them equal.
//! - The regressor's θ and upward messages are derived state (not saved): the merged
//!   forest derives them again from all its trees. θ by the heuristic or given does not
//!   depend on the trees, so a shard's partial predictions are exact parts of the whole;
//!   θ by marginal likelihood sums over all trees, so a shard refuses partial predictions
//!   then (merge first).
//! - Summaries, split scores and importances are sums over trees: computed by the merged
//!   forest.
//! - `add_trees` would number new trees after the shard's last one: refused on a shard.
//!
//! Files: a whole forest's encoding is unchanged (the range is not a serde field: the
//! payload is bincode, which has no room for an optional trailing field). A shard saves
//! through `Persistent` under its own kind (`…-shard`) as (first, count, model), and the
//! models' `load` reads either kind. A shard put into another serde structure directly
//! loses its range, and decoding it is refused (its tree count does not match).

use std::ops::Range;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::Forest;
use crate::error::{MondrianError, Result};
use crate::tree::NodeStatistics;

/// The trees `[first, first + count)` of a forest, by their global indices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TreeRange {
    pub(crate) first: usize,
    pub(crate) count: usize,
}

impl TreeRange {
    /// Checks a shard's range against the whole forest's tree count.
    pub(crate) fn new(first: usize, count: usize, n_trees: usize) -> Result<TreeRange> {
        if count == 0 || first.checked_add(count).is_none_or(|end| end > n_trees) {
            return Err(MondrianError::InvalidParameter {
                name: "shard",
                reason: format!(
                    "trees {first}..{} are not a non-empty part of a forest of {n_trees} trees",
                    first.saturating_add(count)
                ),
            });
        }
        Ok(TreeRange { first, count })
    }

    fn end(self) -> usize {
        self.first + self.count
    }
}

/// An error for shards that do not fit together.
pub(crate) fn mismatch(what: impl Into<String>) -> MondrianError {
    MondrianError::ShardMismatch(what.into())
}

/// Checks that every shard agrees with the first on `what` (model-level replicated state).
pub(crate) fn check_same<M, T: PartialEq>(
    shards: &[M],
    what: &str,
    field: impl Fn(&M) -> T,
) -> Result<()> {
    let first = shards.first().map(&field);
    match shards.iter().all(|s| Some(field(s)) == first) {
        true => Ok(()),
        false => Err(mismatch(format!("the shards have different {what}"))),
    }
}

/// Checks that tree ranges, given sorted by their start, are non-empty and tile one
/// contiguous range, and returns it.
pub(crate) fn tile(ranges: impl IntoIterator<Item = Range<usize>>) -> Result<Range<usize>> {
    let mut ranges = ranges.into_iter().peekable();
    let start = ranges.peek().map_or(0, |r| r.start);
    let mut end = start;
    for r in ranges {
        if r.is_empty() {
            return Err(mismatch(format!(
                "a part holds no trees (at tree {})",
                r.start
            )));
        }
        if r.start != end {
            return Err(mismatch(match r.start < end {
                true => format!("tree ranges overlap at tree {}", r.start),
                false => format!("trees {end}..{} are missing", r.start),
            }));
        }
        end = r.end;
    }
    Ok(start..end)
}

/// Checks that parts (`(first tree, tree count)`, sorted by first tree) cover exactly the
/// trees `0..n_trees` of one forest: what combining shards' predictions needs.
pub(crate) fn cover(parts: impl IntoIterator<Item = (usize, usize)>, n_trees: usize) -> Result<()> {
    let held = tile(
        parts
            .into_iter()
            .map(|(first, count)| first..first.saturating_add(count)),
    )?;
    if held.start != 0 {
        return Err(mismatch(format!("trees 0..{} are missing", held.start)));
    }
    match held.end.cmp(&n_trees) {
        std::cmp::Ordering::Equal => Ok(()),
        std::cmp::Ordering::Less => Err(mismatch(format!(
            "trees {}..{n_trees} are missing",
            held.end
        ))),
        std::cmp::Ordering::Greater => Err(mismatch(format!(
            "the parts cover {} trees of a forest of {n_trees}",
            held.end
        ))),
    }
}

/// Ranges that cut `range` into `k` contiguous parts whose sizes differ by at most one
/// (the larger ones first).
pub(crate) fn cut(range: TreeRange, k: usize) -> Result<Vec<TreeRange>> {
    if k == 0 || k > range.count {
        return Err(MondrianError::InvalidParameter {
            name: "k",
            reason: format!(
                "cannot split {} trees into {k} non-empty shards",
                range.count
            ),
        });
    }
    let (base, extra) = (range.count / k, range.count % k);
    let mut first = range.first;
    Ok((0..k)
        .map(|i| {
            let count = base + usize::from(i < extra);
            let part = TreeRange { first, count };
            first += count;
            part
        })
        .collect())
}

impl<S: NodeStatistics> Forest<S> {
    /// The global indices of the trees this forest holds (or will plant), in a forest of
    /// `n_trees`.
    pub(crate) fn tree_range(&self, n_trees: usize) -> Range<usize> {
        self.range.map_or(0..n_trees, |r| r.first..r.end())
    }

    /// Whether this forest is a proper part of a larger one.
    pub(crate) fn is_shard(&self) -> bool {
        self.range.is_some()
    }

    /// Makes this unplanted forest the shard of trees `first..first + count` of a forest
    /// of `n_trees` (the whole forest is no shard).
    pub(crate) fn set_range(&mut self, first: usize, count: usize, n_trees: usize) -> Result<()> {
        let range = TreeRange::new(first, count, n_trees)?;
        self.range = (count < n_trees).then_some(range);
        Ok(())
    }
}

impl<S> Forest<S>
where
    S: NodeStatistics + Serialize + Clone,
    S::Target: Serialize + Clone,
{
    /// `k` shards with contiguous ranges of as equal sizes as possible, each with a copy of
    /// the store: the inverse of [`merge`](Self::merge).
    pub(crate) fn split(self, k: usize, n_trees: usize) -> Result<Vec<Self>> {
        let whole = self.tree_range(n_trees);
        let parts = cut(
            TreeRange {
                first: whole.start,
                count: whole.len(),
            },
            k,
        )?;
        let planted = !self.trees.is_empty();
        let mut trees = self.trees.into_iter();
        Ok(parts
            .into_iter()
            .map(|r| Forest {
                store: self.store.clone(),
                trees: match planted {
                    true => trees.by_ref().take(r.count).collect(),
                    false => Vec::new(),
                },
                pool: self.pool.clone(),
                range: (r.count < n_trees).then_some(r),
                progress: self.progress.clone(),
            })
            .collect())
    }

    /// One forest from shards (any order) whose ranges tile a contiguous range of a forest
    /// of `n_trees`, with identical stores: their trees in range order and one store.
    pub(crate) fn merge(mut shards: Vec<Self>, n_trees: usize) -> Result<Self> {
        if shards.is_empty() {
            return Err(mismatch("no shards to merge"));
        }
        shards.sort_by_key(|s| s.tree_range(n_trees).start);
        let store = bincode::serialize(&shards[0].store)
            .map_err(|e| mismatch(format!("cannot encode a point store: {e}")))?;
        let planted = !shards[0].trees.is_empty();
        let held = tile(shards.iter().map(|s| s.tree_range(n_trees)))?;
        for s in &shards {
            if s.trees.is_empty() == planted
                || (planted && s.trees.len() != s.tree_range(n_trees).len())
                || bincode::serialize(&s.store).ok().as_ref() != Some(&store)
            {
                return Err(mismatch(
                    "the shards hold different points (every shard must see every row)",
                ));
            }
        }
        let mut shards = shards.into_iter();
        let mut merged = shards.next().expect("one shard at least");
        for s in shards {
            merged.trees.extend(s.trees);
        }
        merged.range = (held.len() < n_trees).then_some(TreeRange {
            first: held.start,
            count: held.len(),
        });
        Ok(merged)
    }
}

/// What the shard-file plumbing needs of a forest model: a whole forest saves under the
/// model's kind exactly as before; a shard saves as (first, count, the model) under
/// `SHARD_KIND`, and loading takes either by the kind in the header.
pub(crate) trait ShardFiles:
    crate::persist::Persistent + Serialize + DeserializeOwned
{
    /// The kind name of a shard's file.
    const SHARD_KIND: &'static str;
    /// The model's saved body, as a whole forest's file holds it.
    type State: DeserializeOwned;
    /// The tree range, if this model is a shard.
    fn range(&self) -> Option<TreeRange>;
    /// `n_trees` of the forest a decoded state belongs to.
    fn forest_trees(state: &Self::State) -> usize;
    /// The model made from a decoded shard body, its forest restricted to `range` (`None`
    /// when the range is the whole forest), checked as any loaded model is.
    fn from_state(state: Self::State, range: Option<TreeRange>) -> Result<Self>;
}

/// A shard's file body: its range, then the model as a whole forest saves it.
#[derive(serde::Deserialize)]
struct ShardBody<S> {
    first: u64,
    count: u64,
    state: S,
}

/// Saves `model` to `writer` under its kind (whole) or its shard kind (a shard).
pub(crate) fn save_to<M: ShardFiles, W: std::io::Write>(model: &M, writer: W) -> Result<()> {
    let encoding = model.encoding();
    match model.range() {
        None => crate::persist::save_encoded(model, M::KIND, encoding, writer),
        Some(r) => {
            let body = (r.first as u64, r.count as u64, model);
            crate::persist::save_encoded(&body, M::SHARD_KIND, encoding, writer)
        }
    }
}

/// [`save_to`] through the crash-safe file writer.
pub(crate) fn save_file<M: ShardFiles>(model: &M, path: &std::path::Path) -> Result<()> {
    let encoding = model.encoding();
    match model.range() {
        None => crate::persist::save_file_encoded(model, M::KIND, encoding, path),
        Some(r) => {
            let body = (r.first as u64, r.count as u64, model);
            crate::persist::save_file_encoded(&body, M::SHARD_KIND, encoding, path)
        }
    }
}

/// Loads a whole forest or a shard, by the kind in the file's header; `whole`: nothing may
/// follow the model.
pub(crate) fn load_from<M: ShardFiles, R: std::io::Read>(reader: R, whole: bool) -> Result<M> {
    let (kind, reader) = read_kind(reader)?;
    if kind.as_deref() != Some(M::SHARD_KIND) {
        return match whole {
            true => crate::persist::load_whole(M::KIND, reader),
            false => crate::persist::load(M::KIND, reader),
        };
    }
    let body: ShardBody<M::State> = match whole {
        true => crate::persist::load_whole(M::SHARD_KIND, reader)?,
        false => crate::persist::load(M::SHARD_KIND, reader)?,
    };
    let corrupt = |m: &str| MondrianError::CorruptModel(m.to_string());
    let (first, count) = (
        usize::try_from(body.first).map_err(|_| corrupt("bad shard range"))?,
        usize::try_from(body.count).map_err(|_| corrupt("bad shard range"))?,
    );
    let n_trees = M::forest_trees(&body.state);
    let range = TreeRange::new(first, count, n_trees)
        .map_err(|_| corrupt("the shard's tree range does not fit its forest"))?;
    M::from_state(body.state, (count < n_trees).then_some(range))
}

/// `Persistent` for a forest model through [`ShardFiles`]: a whole forest saves as it
/// always has (deflated when compact), a shard under its own kind with its tree range, and
/// loading takes either.
macro_rules! persistent_forest {
    ($model:ty, $kind:literal) => {
        impl $crate::persist::Persistent for $model {
            const KIND: &'static str = $kind;
            fn encoding(&self) -> $crate::persist::Encoding {
                match self.is_compact() {
                    true => $crate::persist::Encoding::Deflate,
                    false => $crate::persist::Encoding::Plain,
                }
            }
            fn save_to<W: std::io::Write>(&self, writer: W) -> $crate::error::Result<()> {
                $crate::forest::shard::save_to(self, writer)
            }
            fn load_from<R: std::io::Read>(reader: R) -> $crate::error::Result<Self> {
                $crate::forest::shard::load_from(reader, false)
            }
            fn save(&self, path: impl AsRef<std::path::Path>) -> $crate::error::Result<()> {
                $crate::forest::shard::save_file(self, path.as_ref())
            }
            fn load(path: impl AsRef<std::path::Path>) -> $crate::error::Result<Self> {
                let file = std::fs::File::open(path)?;
                $crate::forest::shard::load_from(std::io::BufReader::new(file), true)
            }
            fn from_bytes(bytes: &[u8]) -> $crate::error::Result<Self> {
                $crate::forest::shard::load_from(bytes, true)
            }
        }
    };
}
pub(crate) use persistent_forest;

/// Refuses what only a whole forest can do.
pub(crate) fn refuse_on_shard(is_shard: bool) -> Result<()> {
    match is_shard {
        true => Err(MondrianError::InvalidParameter {
            name: "n_more",
            reason: "a shard cannot add trees (merge the shards first)".into(),
        }),
        false => Ok(()),
    }
}

/// Reads the start of a saved model's header to learn its kind, and gives back a reader
/// that yields the whole file again (the bytes read first, then the rest), so that a model
/// type can load a shard file or a whole-forest file, whichever it is handed.
pub(crate) fn read_kind<R: std::io::Read>(
    mut reader: R,
) -> Result<(Option<String>, impl std::io::Read)> {
    use std::io::Read;
    let mut prefix = Vec::new();
    reader.by_ref().take(13).read_to_end(&mut prefix)?;
    if let Some(&len) = prefix.get(12) {
        reader
            .by_ref()
            .take(u64::from(len))
            .read_to_end(&mut prefix)?;
    }
    let kind = crate::persist::kind_of(&prefix);
    Ok((kind, std::io::Cursor::new(prefix).chain(reader)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_is_contiguous_and_even() {
        let parts = cut(
            TreeRange {
                first: 2,
                count: 10,
            },
            3,
        )
        .unwrap();
        let sizes: Vec<_> = parts.iter().map(|r| (r.first, r.count)).collect();
        assert_eq!(sizes, vec![(2, 4), (6, 3), (9, 3)]);
        assert!(cut(TreeRange { first: 0, count: 2 }, 3).is_err());
        assert!(cut(TreeRange { first: 0, count: 2 }, 0).is_err());
    }

    #[test]
    fn tiles_are_contiguous_and_covers_whole() {
        assert_eq!(tile([0..3, 3..5]).unwrap(), 0..5);
        assert!(tile([0..3, 2..5]).is_err());
        assert!(tile([0..3, 4..5]).is_err());
        assert!(tile([0..3, 3..3, 3..5]).is_err());
        assert!(cover([(0, 3), (3, 2)], 5).is_ok());
        assert!(cover([(1, 4)], 5).is_err());
        assert!(cover([(0, 3)], 5).is_err());
        assert!(cover([(0, 3), (3, 4)], 5).is_err());
        assert!(cover([(0, 3), (3, usize::MAX)], 5).is_err());
    }

    #[test]
    fn ranges_must_fit_the_forest() {
        assert!(TreeRange::new(0, 10, 10).is_ok());
        assert!(TreeRange::new(9, 2, 10).is_err());
        assert!(TreeRange::new(3, 0, 10).is_err());
        assert!(TreeRange::new(usize::MAX, 2, 10).is_err());
    }
}
