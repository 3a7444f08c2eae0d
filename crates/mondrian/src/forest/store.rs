//! The point store of a forest: the scaled training points its trees index into, the
//! frozen scaling that maps raw rows into the trees' space, and stable ids for them.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use super::weights::MAX_SAMPLE_WEIGHT;
use crate::data::{FeatureScaler, FeatureValue, RelevanceChoice, Rows, Scaling};
use crate::error::{MondrianError, Result};
use crate::process::Feature;
use crate::tree::TrainingPoints;

/// The id of a slot that holds no point.
const FREE: u64 = u64::MAX;

/// The scaled training points a forest keeps (paused leaves are re-sampled from them, and
/// deletion reads a point's row to find it), with the frozen scaling that maps raw rows into
/// the trees' space.
///
/// Points live in slots, which the trees name (`u32`); each point also has a stable id: its
/// arrival index, counting every row given to training since the model was started (the
/// ids users pass to `forget`). Slots of points that left (a sliding window, `forget`) are
/// reused for new points, so the store never holds more than the points it keeps plus those
/// of one call. A row of sample weight 0 gets an id but no slot.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct PointStore<T> {
    pub(crate) n_features: Option<usize>,
    pub(crate) scaler: Option<FeatureScaler>,
    /// Row-major features, one row per slot.
    pub(crate) features: Vec<Feature>,
    /// One target per slot.
    pub(crate) targets: Vec<T>,
    /// The id of the point in each slot; [`FREE`] for a slot without one.
    ids: Vec<u64>,
    /// The slots of the points held, in arrival order (so ids increase along it).
    live: VecDeque<u32>,
    /// Slots whose point left, reused before the buffers grow.
    free: Vec<u32>,
    /// The id the next point gets: the number of rows given to training so far.
    next_id: u64,
    /// Each slot's sample weight; empty while every point ever admitted had weight 1, so
    /// that unweighted training keeps no weights.
    weights: Vec<f64>,
    /// How [`FeatureWeights::RelevanceCv`](crate::data::FeatureWeights) chose the weights.
    pub(crate) relevance: Option<RelevanceChoice>,
}

impl<T: Copy> PointStore<T> {
    pub(crate) fn new() -> Self {
        PointStore {
            n_features: None,
            scaler: None,
            features: Vec::new(),
            targets: Vec::new(),
            ids: Vec::new(),
            live: VecDeque::new(),
            free: Vec::new(),
            next_id: 0,
            weights: Vec::new(),
            relevance: None,
        }
    }

    /// A validated view of caller rows: the model's width once fixed, finite values.
    pub(crate) fn rows<'a, V: FeatureValue>(
        &self,
        x: &'a [V],
        n_features: usize,
    ) -> Result<Rows<'a, V>> {
        let rows = Rows::new(x, n_features)?;
        rows.validate(self.n_features)?;
        Ok(rows)
    }

    /// Fixes the width and the scaling from the first rows (nothing stored yet).
    pub(crate) fn start<V: FeatureValue>(
        &mut self,
        rows: &Rows<V>,
        scaling: &Scaling,
    ) -> Result<()> {
        self.scaler = Some(scaling.scaler_for(rows)?);
        self.n_features = Some(rows.n_features());
        Ok(())
    }

    /// Stretches the features by `weights` (before any point is stored).
    pub(crate) fn reweight(&mut self, weights: &[f64]) -> Result<()> {
        debug_assert!(self.features.is_empty());
        let scaler = self.scaler.as_ref().ok_or(MondrianError::NotFitted)?;
        self.scaler = Some(scaler.weighted(weights)?);
        Ok(())
    }

    /// Rows mapped into the trees' space.
    pub(crate) fn scale<V: FeatureValue>(&self, rows: &Rows<V>) -> Result<Vec<Feature>> {
        let scaler = self.scaler.as_ref().ok_or(MondrianError::NotFitted)?;
        let mut out = Vec::new();
        scaler.transform_into(rows, &mut out)?;
        Ok(out)
    }

    /// Takes the rows `take` (increasing indices into the call's rows) of a training call:
    /// scaled rows (row-major, all of the call's rows), their targets and sample weights
    /// (`None`: all 1). Each goes into a free slot (one freed by an earlier call) or a new
    /// one. Every row of the call gets an id, its arrival index, whether it is taken or
    /// not (a row of weight 0, or one that would leave a window at once); returns (slot,
    /// id) per row taken.
    pub(crate) fn admit(
        &mut self,
        scaled: &[Feature],
        targets: &[T],
        weights: Option<&[f64]>,
        take: &[usize],
    ) -> Vec<(u32, u64)> {
        let d = self.n_features.unwrap_or(0);
        let first_id = self.next_id;
        let mut placed = Vec::with_capacity(take.len());
        for &k in take {
            let row = &scaled[k * d..(k + 1) * d];
            let (target, id) = (targets[k], first_id + k as u64);
            let weight = weights.map_or(1.0, |w| w[k]);
            let slot = match self.free.pop() {
                Some(slot) => {
                    let s = slot as usize;
                    self.features[s * d..(s + 1) * d].copy_from_slice(row);
                    self.targets[s] = target;
                    self.ids[s] = id;
                    slot
                }
                None => {
                    let slot = u32::try_from(self.targets.len())
                        .ok()
                        .filter(|&s| s < u32::MAX)
                        .expect("more points than a store can index");
                    self.features.extend_from_slice(row);
                    self.targets.push(target);
                    self.ids.push(id);
                    slot
                }
            };
            // The first weight other than 1 gives every slot its weight.
            if weight != 1.0 || !self.weights.is_empty() {
                self.weights.resize(self.targets.len(), 1.0);
                self.weights[slot as usize] = weight;
            }
            self.live.push_back(slot);
            placed.push((slot, id));
        }
        self.next_id = first_id + targets.len() as u64;
        placed
    }

    /// The sample weight of the point in `slot`.
    pub(crate) fn weight(&self, slot: u32) -> f64 {
        self.weights.get(slot as usize).copied().unwrap_or(1.0)
    }

    /// Every slot's sample weight, or empty when all are 1.
    pub(crate) fn weights(&self) -> &[f64] {
        &self.weights
    }

    /// The (slot, id) of the points held, oldest first.
    pub(crate) fn live_entries(&self) -> Vec<(u32, u64)> {
        self.live
            .iter()
            .map(|&s| (s, self.ids[s as usize]))
            .collect()
    }

    /// Takes the `n` oldest points out of the store's keeping; their slots stay readable
    /// (the trees still name them) until [`release`](Self::release).
    pub(crate) fn detach_oldest(&mut self, n: usize) -> Vec<u32> {
        let n = n.min(self.live.len());
        let slots: Vec<u32> = self.live.drain(..n).collect();
        for &s in &slots {
            self.ids[s as usize] = FREE;
        }
        slots
    }

    /// The slots of the points with these ids, taken out of the store's keeping as
    /// [`detach_oldest`](Self::detach_oldest) does; an error naming the first id the store
    /// does not hold (never seen, already gone, or given twice), with nothing changed.
    pub(crate) fn detach_ids(&mut self, ids: &[u64]) -> Result<Vec<u32>> {
        let mut found: Vec<(usize, u32)> = Vec::with_capacity(ids.len());
        for &id in ids {
            let at = self
                .live
                .binary_search_by_key(&id, |&s| self.ids[s as usize])
                .ok()
                .filter(|at| found.iter().all(|&(k, _)| k != *at));
            match at {
                Some(at) => found.push((at, self.live[at])),
                None => {
                    return Err(MondrianError::UnknownPoint {
                        id,
                        seen: self.next_id,
                    })
                }
            }
        }
        let slots: Vec<u32> = found.iter().map(|&(_, s)| s).collect();
        for &s in &slots {
            self.ids[s as usize] = FREE;
        }
        self.live.retain(|&s| self.ids[s as usize] != FREE);
        Ok(slots)
    }

    /// Gives detached slots back for reuse, once no tree names them.
    pub(crate) fn release(&mut self, slots: &[u32]) {
        self.free.extend_from_slice(slots);
    }

    /// The ids of the points held, oldest first.
    pub(crate) fn live_ids(&self) -> impl ExactSizeIterator<Item = u64> + '_ {
        self.live.iter().map(|&s| self.ids[s as usize])
    }

    /// The targets and sample weights of the points held, oldest first.
    pub(crate) fn live_weighted_targets(&self) -> impl Iterator<Item = (T, f64)> + '_ {
        self.live
            .iter()
            .map(|&s| (self.targets[s as usize], self.weight(s)))
    }

    pub(crate) fn data(&self) -> TrainingPoints<'_, T> {
        TrainingPoints {
            features: &self.features,
            n_features: self.n_features.unwrap_or(0),
            targets: &self.targets,
        }
    }

    /// Points held.
    pub(crate) fn len(&self) -> usize {
        self.live.len()
    }

    /// Slots (the range of point ids the trees may name).
    pub(crate) fn n_slots(&self) -> usize {
        self.targets.len()
    }

    /// Rows given to training so far (the id the next one gets).
    pub(crate) fn seen(&self) -> u64 {
        self.next_id
    }

    pub(crate) fn bytes(&self) -> usize {
        std::mem::size_of_val(self.features.as_slice())
            + std::mem::size_of_val(self.targets.as_slice())
            + std::mem::size_of_val(self.ids.as_slice())
            + self.live.len() * std::mem::size_of::<u32>()
            + std::mem::size_of_val(self.free.as_slice())
            + std::mem::size_of_val(self.weights.as_slice())
    }

    /// Shape checks after loading a model.
    pub(crate) fn check(&self) -> Result<()> {
        let d = self.n_features.unwrap_or(0);
        let bad = |m: &str| Err(MondrianError::CorruptModel(m.to_string()));
        if self.n_features.is_some() != self.scaler.is_some() {
            return bad("scaler and feature count disagree");
        }
        let n = self.targets.len();
        if self
            .scaler
            .as_ref()
            .is_some_and(|s| s.n_features() != d || !s.is_consistent())
            || Some(self.features.len()) != n.checked_mul(d)
            || self.ids.len() != n
            || n >= u32::MAX as usize
        {
            return bad("stored points do not match the feature count");
        }
        if self.features.iter().any(|v| !v.is_finite()) {
            return bad("a stored point is not finite");
        }
        if !(self.weights.is_empty() || self.weights.len() == n)
            || self
                .weights
                .iter()
                .any(|w| !(w.is_finite() && (0.0..=MAX_SAMPLE_WEIGHT).contains(w)))
        {
            return bad("the stored sample weights do not match the points");
        }
        // Every slot is held (once, ids increasing in arrival order, below the next id) or
        // free (once), never both.
        let mut seen = vec![false; n];
        let mut last = None;
        for &s in &self.live {
            let id = self.ids.get(s as usize).copied().unwrap_or(FREE);
            if id == FREE || id >= self.next_id || last.is_some_and(|l| l >= id) {
                return bad("the store's points are not in arrival order");
            }
            last = Some(id);
            if std::mem::replace(&mut seen[s as usize], true) {
                return bad("the store holds a slot twice");
            }
        }
        for &s in &self.free {
            match seen.get_mut(s as usize) {
                Some(f) if !*f && self.ids[s as usize] == FREE => *f = true,
                _ => return bad("the store's free slots are not free"),
            }
        }
        if seen.contains(&false) {
            return bad("the store has slots neither held nor free");
        }
        if self.relevance.as_ref().is_some_and(|c| !c.is_valid()) {
            return bad("the relevance choice is not valid");
        }
        Ok(())
    }
}
