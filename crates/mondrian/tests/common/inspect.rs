//! Tree inspection: canonical signatures and bitwise fingerprints, point depths, lowest
//! common ancestors, leaf counts, and an invariant checker written independently of the
//! library's own `check_invariants`.

use std::fmt::Write as _;

use mondrian::process::Feature;
use mondrian::stats::label::LabelCounts;
use mondrian::tree::{MondrianTree, SET_MIN_FEATURES};

use super::Data;

/// Full canonical signature: the nested leaf sets with the split dimension of every
/// internal node, left child first (the left/right order is fixed by geometry once the
/// dimension is). Two trees on the same ids have the same signature iff they induce the
/// same hierarchical partition with the same split dimensions.
pub fn signature(tree: &MondrianTree) -> String {
    fn rec(t: &MondrianTree, j: u32, out: &mut String) {
        match t.children(j) {
            None => {
                let mut p = t.leaf_points(j).to_vec();
                p.sort_unstable();
                write!(out, "{p:?}").unwrap();
            }
            Some((l, r)) => {
                write!(out, "{}(", t.split_dimension(j)).unwrap();
                rec(t, l, out);
                out.push('|');
                rec(t, r, out);
                out.push(')');
            }
        }
    }
    let mut s = String::new();
    if let Some(r) = tree.root() {
        rec(tree, r, &mut s);
    }
    s
}

/// Bitwise fingerprint of a tree and its counts (structure, times, locations, stored boxes
/// — a leaf of one point stores none, its box is the point —, pause flags, leaf points and
/// label counts), preorder.
pub fn fingerprint(tree: &MondrianTree, counts: &LabelCounts) -> String {
    let mut s = String::new();
    let Some(root) = tree.root() else {
        return s;
    };
    for j in tree.subtree_preorder(root) {
        write!(
            s,
            "[{} {:x} {:?} {:?} c{:?}",
            tree.is_leaf(j),
            tree.split_time(j).to_bits(),
            tree.stores_box(j).then(|| tree.data_box(j, &[])),
            tree.is_paused(j),
            counts.node(j)
        )
        .unwrap();
        if tree.is_leaf(j) {
            write!(s, " p{:?}]", tree.leaf_points(j)).unwrap();
        } else {
            write!(
                s,
                " d{} x{:x}]",
                tree.split_dimension(j),
                tree.split_location(j).to_bits()
            )
            .unwrap();
        }
    }
    s
}

/// Depth (root = 0) of the leaf holding each point id; `usize::MAX` for ids not in the tree.
pub fn point_depths(tree: &MondrianTree, n: usize) -> Vec<usize> {
    let mut out = vec![usize::MAX; n];
    let Some(root) = tree.root() else {
        return out;
    };
    let mut stack = vec![(root, 0usize)];
    while let Some((j, depth)) = stack.pop() {
        match tree.children(j) {
            Some((l, r)) => {
                stack.push((l, depth + 1));
                stack.push((r, depth + 1));
            }
            None => {
                for &i in tree.leaf_points(j) {
                    out[i as usize] = depth;
                }
            }
        }
    }
    out
}

/// Split time of the lowest common ancestor of two points: the time of the first node on
/// the common path whose split separates them; the lifetime λ if they share a leaf.
pub fn separation_time(tree: &MondrianTree, xa: &[Feature], xb: &[Feature]) -> f64 {
    let mut j = tree.root().expect("non-empty tree");
    while !tree.is_leaf(j) {
        let (ja, jb) = (tree.route(j, xa), tree.route(j, xb));
        if ja != jb {
            return tree.split_time(j);
        }
        j = ja;
    }
    tree.lifetime()
}

/// Number of leaves, counted by traversal (not by the arena size).
pub fn count_leaves(tree: &MondrianTree) -> usize {
    tree.leaves().len()
}

/// Independent check of the structural invariants of spec §1.6 and of the IKN counts
/// (§3.2, §8.5 item 8) against a from-scratch post-order recount: leaves hold the label
/// histogram of their points, internal nodes hold min(c_L,1) + min(c_R,1).
/// `inserted[i]` is the total multiplicity with which point `i` was given to the tree.
pub fn check_tree(
    tree: &MondrianTree,
    counts: &LabelCounts,
    data: &Data,
    inserted: &[u32],
) -> Result<(), String> {
    let lambda = tree.lifetime();
    let pause = tree.pause_rule();
    let k = data.k;
    let Some(root) = tree.root() else {
        return if inserted.iter().all(|&w| w == 0) {
            Ok(())
        } else {
            Err("empty tree after insertions".into())
        };
    };
    if tree.parent(root).is_some() {
        return Err("root has a parent".into());
    }
    let order = tree.subtree_preorder(root);
    if order.len() != tree.n_live_nodes() {
        return Err(format!(
            "{} reachable nodes of {}",
            order.len(),
            tree.n_live_nodes()
        ));
    }
    let n_nodes = tree.n_nodes();
    let mut under: Vec<Vec<u32>> = vec![Vec::new(); n_nodes];
    let mut recount: Vec<Vec<u32>> = vec![vec![0; k]; n_nodes];
    let holds = |s: &[u32]| {
        s.len() < pause.min_samples_split
            || (pause.pause_on_pure
                && s.iter()
                    .all(|&i| data.y[i as usize] == data.y[s[0] as usize]))
    };
    for &j in order.iter().rev() {
        let ju = j as usize;
        match tree.children(j) {
            None => {
                let pts = tree.leaf_points(j);
                if pts.is_empty() {
                    return Err(format!("leaf {j} is empty"));
                }
                if tree.split_time(j) != lambda {
                    return Err(format!(
                        "leaf {j}: tau {} != lambda {lambda}",
                        tree.split_time(j)
                    ));
                }
                for &i in pts {
                    recount[ju][data.y[i as usize] as usize] += 1;
                }
                if tree.is_paused(j) != holds(pts) {
                    return Err(format!(
                        "leaf {j}: paused = {} but pause predicate = {}",
                        tree.is_paused(j),
                        holds(pts)
                    ));
                }
                under[ju] = pts.to_vec();
            }
            Some((l, r)) => {
                if tree.parent(l) != Some(j) || tree.parent(r) != Some(j) {
                    return Err(format!("node {j}: broken parent pointers"));
                }
                if !tree.leaf_points(j).is_empty() {
                    return Err(format!("internal node {j} holds points"));
                }
                if tree.is_paused(j) {
                    return Err(format!("internal node {j} is paused"));
                }
                let t = tree.split_time(j);
                let tp = tree.parent(j).map_or(0.0, |p| tree.split_time(p));
                if !(t >= tp && t < lambda && t >= 0.0) {
                    return Err(format!(
                        "node {j}: tau {t}, parent tau {tp}, lambda {lambda}"
                    ));
                }
                if tree.split_time(l) < t || tree.split_time(r) < t {
                    return Err(format!("node {j}: a child splits before its parent"));
                }
                let dim = tree.split_dimension(j);
                let loc = tree.split_location(j);
                if dim >= data.d {
                    return Err(format!("node {j}: split dimension {dim}"));
                }
                let (lower, upper) = tree.data_box(j, &data.x);
                if !(lower[dim] <= loc && loc < upper[dim]) {
                    return Err(format!(
                        "node {j}: split {loc} not in [lower, upper) of dim {dim}"
                    ));
                }
                if under[l as usize].iter().any(|&i| data.row(i)[dim] > loc)
                    || under[r as usize].iter().any(|&i| data.row(i)[dim] <= loc)
                {
                    return Err(format!(
                        "node {j}: a point is on the wrong side of its split"
                    ));
                }
                let (cl, cr) = (recount[l as usize].clone(), recount[r as usize].clone());
                for (slot, (a, b)) in recount[ju].iter_mut().zip(cl.iter().zip(&cr)) {
                    *slot = (*a).min(1) + (*b).min(1);
                }
                let mut all = std::mem::take(&mut under[l as usize]);
                all.extend(std::mem::take(&mut under[r as usize]));
                under[ju] = all;
                // §1.6 item 7 generalised: an internal node never satisfies the predicate.
                if holds(&under[ju]) {
                    return Err(format!("internal node {j} satisfies the pause predicate"));
                }
            }
        }
        // Storage: a leaf whose points are one training point keeps no box of its own (its
        // box is that point's row). Other nodes store a box or name a few of their points
        // (a batch fit: all of them, when there are at most SET_POINTS; online, also a node
        // that took more points inside its box), whose bounding box the next check holds
        // to that of all points below.
        let mut distinct = under[ju].clone();
        distinct.sort_unstable();
        distinct.dedup();
        let one_point = tree.is_leaf(j) && distinct.len() == 1;
        if one_point && tree.stores_box(j) {
            return Err(format!("leaf {j} over one point stores a box"));
        }
        // Narrower trees keep no sets: every node but a one-point leaf stores its box.
        if data.d < SET_MIN_FEATURES && !one_point && !tree.stores_box(j) {
            return Err(format!("node {j} of a narrow tree stores no box"));
        }
        // Box = bounding box of the points below (item 1, which implies item 2).
        for (dim, (lo, hi)) in data.ranges(&under[ju]).into_iter().enumerate() {
            let (lower, upper) = tree.data_box(j, &data.x);
            if f64::from(lower[dim]) != lo || f64::from(upper[dim]) != hi {
                return Err(format!(
                    "node {j}: box [{}, {}] in dim {dim} is not the bounding box [{lo}, {hi}]",
                    lower[dim], upper[dim]
                ));
            }
        }
        // λ = ∞: every non-paused leaf has zero extent (item 8).
        if tree.is_leaf(j)
            && lambda.is_infinite()
            && !tree.is_paused(j)
            && data.linear_dimension(&under[ju]) > 0.0
        {
            return Err(format!(
                "leaf {j}: lambda = inf, not paused, positive extent"
            ));
        }
        if counts.node(j) != recount[ju].as_slice() {
            return Err(format!(
                "node {j} (leaf: {}): counts {:?}, recount {:?}",
                tree.is_leaf(j),
                counts.node(j),
                recount[ju]
            ));
        }
    }
    // Every inserted point is held exactly as many times as it was inserted (item 6).
    let mut held = vec![0u32; inserted.len()];
    for &i in &under[root as usize] {
        held[i as usize] += 1;
    }
    if held != inserted {
        return Err(format!(
            "leaf multiplicities {held:?} != inserted {inserted:?}"
        ));
    }
    Ok(())
}
