//! Memory guards: what a forest will need, what the machine (or the caller) allows, and a
//! clear error before growing what cannot fit.
//!
//! A training call that would outgrow memory is refused before anything is allocated, with
//! [`MondrianError::MemoryLimit`], instead of being stopped by the kernel's OOM killer or
//! aborting on a failed allocation. The limit is the caller's budget when one is given
//! (`max_memory`), otherwise what the machine has left: the smallest of the memory the
//! kernel reports available, the room under the process's address-space limit and the room
//! under its cgroup's memory limit (Linux; elsewhere only a budget is enforced).

use crate::error::{MondrianError, Result};

/// Bytes of a node record (see `tree::arena`).
const NODE_BYTES: u64 = 32;
/// Bytes of one stored feature value (`f32`).
const FEATURE_BYTES: u64 = 4;

/// What one training call will hold, for [`forest_bytes`].
#[derive(Debug, Clone, Copy)]
pub struct ForestShape {
    /// Trees in the forest.
    pub n_trees: usize,
    /// Training points the forest will hold after the call.
    pub n_points: usize,
    /// Features per point.
    pub n_features: usize,
    /// Bytes of the model's statistics per node.
    pub stats_bytes_per_node: usize,
    /// Blocks with fewer points pause (leaves then hold several points).
    pub min_samples_split: usize,
}

/// An estimate of the heap bytes of a forest of this shape. Per tree: `L = n · min(1,
/// 2 / min_samples_split)` leaves (a paused block holds about half the points that would
/// split it) and `2L − 1` nodes, each a record and its statistics; a stored box of `2D`
/// floats for every internal node and, once leaves hold several points, every leaf; a
/// point id per point and, past three points a leaf, a list per leaf; an eighth more for
/// the slack of growing buffers. Then the shared store of the points. Classifiers that
/// pause pure blocks usually take less: this is the size on labels that keep every block
/// splitting.
pub fn forest_bytes(shape: ForestShape) -> u64 {
    let n = shape.n_points as u64;
    let d = shape.n_features as u64;
    let mss = shape.min_samples_split.max(1) as u64;
    let leaves = if mss <= 2 { n } else { (2 * n).div_ceil(mss) }.max(1);
    let nodes = 2 * leaves - 1;
    let boxes = (leaves - 1) + if mss > 2 { leaves } else { 0 };
    let lists = if mss > 3 { leaves * 28 } else { 0 };
    let per_tree = nodes
        .saturating_mul(NODE_BYTES + shape.stats_bytes_per_node as u64)
        .saturating_add(boxes.saturating_mul(2 * d * FEATURE_BYTES))
        .saturating_add(n.saturating_mul(4))
        .saturating_add(lists);
    let store = n.saturating_mul(d * FEATURE_BYTES + 24);
    (shape.n_trees as u64)
        .saturating_mul(per_tree.saturating_add(per_tree / 8))
        .saturating_add(store)
}

/// Where a memory limit comes from, for the error message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitSource {
    /// The caller's `max_memory` budget.
    Budget,
    /// Memory the kernel reports available.
    Available,
    /// Room under the process's address-space limit (`ulimit -v`).
    AddressSpace,
    /// Room under the process's cgroup memory limit (a container's).
    Cgroup,
}

impl std::fmt::Display for LimitSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LimitSource::Budget => "the memory budget",
            LimitSource::Available => "the memory available on this machine",
            LimitSource::AddressSpace => "the room under the address-space limit (ulimit -v)",
            LimitSource::Cgroup => "the room under the container's memory limit",
        })
    }
}

/// The machine's room for more memory, with where the tightest limit comes from: `None`
/// where it cannot be read (not Linux, or no `/proc`).
pub fn machine_room() -> Option<(u64, LimitSource)> {
    let mut best: Option<(u64, LimitSource)> = None;
    let mut consider = |bytes: Option<u64>, source| {
        if let Some(b) = bytes {
            if best.is_none_or(|(m, _)| b < m) {
                best = Some((b, source));
            }
        }
    };
    consider(meminfo_available(), LimitSource::Available);
    consider(address_space_room(), LimitSource::AddressSpace);
    consider(cgroup_room(), LimitSource::Cgroup);
    best
}

/// The value (in kB) of field `key` of a `/proc` status-like file, in bytes.
fn proc_kb(path: &str, key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    let line = text.lines().find(|l| l.starts_with(key))?;
    let kb: u64 = line[key.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb.saturating_mul(1024))
}

fn meminfo_available() -> Option<u64> {
    proc_kb("/proc/meminfo", "MemAvailable:")
}

fn address_space_room() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max address space"))?;
    let soft = line["Max address space".len()..]
        .split_whitespace()
        .next()?;
    let limit: u64 = soft.parse().ok()?; // "unlimited" does not parse: no limit
    let used = proc_kb("/proc/self/status", "VmSize:")?;
    Some(limit.saturating_sub(used))
}

fn cgroup_room() -> Option<u64> {
    let read = |name: &str| {
        std::fs::read_to_string(format!("/sys/fs/cgroup/{name}"))
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
    };
    let max = read("memory.max")?; // "max" does not parse: no limit
    let current = read("memory.current").unwrap_or(0);
    Some(max.saturating_sub(current))
}

/// Refuses a training call whose forest would need `needed` more bytes than the limit:
/// `budget` when given, else the machine's room (no check where it cannot be read).
/// `what` names the forest for the message (e.g. "1000000 trees over 200 points").
pub fn check(needed: u64, budget: Option<u64>, what: impl FnOnce() -> String) -> Result<()> {
    let limit = match budget {
        Some(b) => Some((b, LimitSource::Budget)),
        None => machine_room(),
    };
    match limit {
        Some((limit, source)) if needed > limit => Err(MondrianError::MemoryLimit {
            needed,
            limit,
            limited_by: source,
            what: what(),
        }),
        _ => Ok(()),
    }
}

/// Refuses a training call that takes a forest from about `before` to `after` bytes (see
/// [`forest_bytes`]) when `after` exceeds `budget`, or, without one, when a growth of at
/// least 64 MiB exceeds the machine's room (what the forest holds already is not free
/// memory; smaller growths, such as a streamed point's, skip reading the machine's state).
pub fn check_growth(
    before: u64,
    after: u64,
    budget: Option<u64>,
    what: impl FnOnce() -> String,
) -> Result<()> {
    match budget {
        Some(_) => check(after, budget, what),
        // The machine's room is read from files; a call that grows the forest by less than
        // this (a streamed point, a small batch) is not worth those reads on every call.
        None if after.saturating_sub(before) < MACHINE_CHECK_FROM => Ok(()),
        None => check(after.saturating_sub(before), None, what),
    }
}

/// Growth below which [`check_growth`] does not consult the machine (64 MiB).
const MACHINE_CHECK_FROM: u64 = 64 << 20;

/// `bytes` in the largest unit that keeps a number of at least 1 (for messages).
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1000.0 && unit + 1 < UNITS.len() {
        value /= 1000.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// Reads a memory size: a number of bytes, or with a unit `K`, `M`, `G`, `T` (powers of
/// 1000) or `KiB`, `MiB`, `GiB`, `TiB` (powers of 1024), e.g. `500M`, `4GiB`, `1.5G`.
pub fn parse_bytes(text: &str) -> Result<u64> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let scale: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "m" | "mb" => 1e6,
        "g" | "gb" => 1e9,
        "t" | "tb" => 1e12,
        "kib" => 1024.0,
        "mib" => 1024f64.powi(2),
        "gib" => 1024f64.powi(3),
        "tib" => 1024f64.powi(4),
        _ => f64::NAN,
    };
    let value: f64 = number.parse().unwrap_or(f64::NAN) * scale;
    if value.is_finite() && value >= 1.0 && value < u64::MAX as f64 {
        Ok(value as u64)
    } else {
        Err(MondrianError::InvalidParameter {
            name: "max_memory",
            reason: format!(
                "`{text}` is not a memory size (a positive number of bytes, or with a unit \
                 such as 500M, 4G or 4GiB)"
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_their_units() {
        assert_eq!(parse_bytes("123").unwrap(), 123);
        assert_eq!(parse_bytes("500M").unwrap(), 500_000_000);
        assert_eq!(parse_bytes("1.5G").unwrap(), 1_500_000_000);
        assert_eq!(parse_bytes("4GiB").unwrap(), 4 << 30);
        assert_eq!(parse_bytes(" 2 kb ").unwrap(), 2000);
        for bad in ["", "-1", "0", "4X", "G", "1e999"] {
            assert!(parse_bytes(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn human_sizes_read_naturally() {
        assert_eq!(human_bytes(999), "999 B");
        assert_eq!(human_bytes(41_300_000_000), "41.3 GB");
    }

    #[test]
    fn a_budget_refuses_what_exceeds_it_and_only_that() {
        assert!(check(100, Some(100), String::new).is_ok());
        let err = check(101, Some(100), || "x".into()).unwrap_err();
        assert!(matches!(
            err,
            MondrianError::MemoryLimit {
                needed: 101,
                limit: 100,
                limited_by: LimitSource::Budget,
                ..
            }
        ));
    }

    #[test]
    fn small_growth_skips_the_machine_but_never_a_budget() {
        // Below 64 MiB of growth the machine is not consulted, whatever it has left.
        assert!(check_growth(0, MACHINE_CHECK_FROM - 1, None, String::new).is_ok());
        // A budget is always enforced, however small the step.
        assert!(check_growth(100, 101, Some(100), String::new).is_err());
    }

    #[test]
    fn the_estimate_grows_with_trees_points_and_width() {
        let shape = ForestShape {
            n_trees: 10,
            n_points: 1000,
            n_features: 8,
            stats_bytes_per_node: 16,
            min_samples_split: 2,
        };
        // 1999 nodes × (32 + 16), 999 boxes of 64 bytes, 4000 bytes of point ids per
        // tree, an eighth more, and the store.
        let per_tree = 1999 * 48 + 999 * 64 + 4000;
        assert_eq!(
            forest_bytes(shape),
            10 * (per_tree + per_tree / 8) + 1000 * (32 + 24)
        );
        let more = ForestShape {
            n_trees: 20,
            ..shape
        };
        assert!(forest_bytes(more) > forest_bytes(shape));
        let paused = ForestShape {
            min_samples_split: 10,
            ..shape
        };
        // 200 leaves instead of 1000, though each now stores a box and a list.
        assert!(forest_bytes(paused) < forest_bytes(shape) / 2);
    }
}
