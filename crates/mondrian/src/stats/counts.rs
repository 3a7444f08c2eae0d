//! Point counts per node: the statistics of the Pólya forests (spec
//! `mondrian-polya-forest.md` §4.3, §7.1). The Beta parameters, shares and masses all
//! derive from the counts with the geometry, so a count is all a node keeps; being
//! integers, insertions and deletions keep them equal to a recomputation exactly.

use super::NodeStatistics;

/// `n_j`: the number of points (with multiplicity) below each node.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PointCounts {
    n: Vec<u32>,
}

impl PointCounts {
    /// Points below `node`.
    #[inline]
    pub fn count(&self, node: u32) -> u32 {
        self.n[node as usize]
    }
}

impl NodeStatistics for PointCounts {
    type Target = ();

    fn resize(&mut self, n_nodes: usize) {
        self.n.resize(n_nodes, 0);
    }
    fn reserve(&mut self, n_nodes: usize) {
        self.n.reserve(n_nodes.saturating_sub(self.n.len()));
    }
    fn set_leaf(&mut self, node: u32, points: &[u32], _: &[()]) {
        self.n[node as usize] = points.len() as u32;
    }
    fn set_internal(&mut self, node: u32, left: u32, right: u32) -> bool {
        let n = self.n[left as usize] + self.n[right as usize];
        let changed = self.n[node as usize] != n;
        self.n[node as usize] = n;
        changed
    }
    fn set_parent_of(&mut self, node: u32, child: u32) {
        self.n[node as usize] = self.n[child as usize];
    }
    #[inline]
    fn absorb_leaf(&mut self, node: u32, _: (), weight: u32) -> bool {
        self.n[node as usize] += weight;
        true
    }
    #[inline]
    fn absorb_internal(&mut self, node: u32, _: (), weight: u32) -> bool {
        self.n[node as usize] += weight;
        true
    }
    #[inline]
    fn release_leaf(&mut self, node: u32, _: (), weight: u32, _: &[u32], _: &[()]) -> bool {
        self.n[node as usize] -= weight;
        true
    }
    #[inline]
    fn release_internal(&mut self, node: u32, _: u32, _: u32, _: (), weight: u32) -> bool {
        self.n[node as usize] -= weight;
        true
    }
    fn bytes_per_node(&self) -> usize {
        std::mem::size_of::<u32>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::{MondrianTree, PauseRule, TrainingPoints};
    use rand::SeedableRng;

    #[test]
    fn counts_follow_insertions_and_deletions_and_equal_a_recount() {
        let x: Vec<f32> = (0..60).map(|i| ((i * 37) % 23) as f32 / 23.0).collect();
        let targets = vec![(); 30];
        let data = TrainingPoints {
            features: &x,
            n_features: 2,
            targets: &targets,
        };
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(3);
        let mut tree = MondrianTree::new(2, f64::INFINITY, PauseRule::NEVER);
        let mut counts = PointCounts::default();
        tree.fit((0..20).collect(), &data, &mut counts, &mut rng);
        for i in 20..30 {
            tree.extend(i, 1, &data, &mut counts, &mut rng);
        }
        for i in [3u32, 25, 7] {
            tree.delete(i, &data, &mut counts);
        }
        // A recount: each node's count is the number of point ids in its subtree's leaves.
        let root = tree.root().unwrap();
        for j in tree.subtree_preorder(root) {
            let below: usize = tree
                .subtree_preorder(j)
                .into_iter()
                .filter(|&l| tree.is_leaf(l))
                .map(|l| tree.leaf_points(l).len())
                .sum();
            assert_eq!(counts.count(j) as usize, below, "node {j}");
        }
        assert_eq!(counts.count(root), 27);
    }
}
