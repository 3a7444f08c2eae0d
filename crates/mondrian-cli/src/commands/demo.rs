//! `mondrian demo`: the learning curve of a default forest on a real data set shipped inside
//! the binary.

use clap::Parser;

use super::classify::TrainTest;
use super::curve::learning_curve;
use super::forest::ForestArgs;
use super::{write_file, CliError};

const DEMO_TRAIN: &[u8] = include_bytes!("../../../../datasets/satimage_train.csv.gz");
const DEMO_TEST: &[u8] = include_bytes!("../../../../datasets/satimage_test.csv.gz");

/// The demo's forest: every flag at its default but the seed. Parsed rather than spelt
/// out, so that a new flag's default reaches the demo too.
#[derive(Parser)]
struct DemoForest {
    #[command(flatten)]
    forest: ForestArgs,
}

pub(crate) fn run() -> Result<(), CliError> {
    let args = DemoForest::try_parse_from(["demo", "--seed", "1"])
        .map_err(|e| CliError::Usage(e.to_string()))?
        .forest;
    // The readers take paths, so the shipped files go through a scratch directory.
    let dir = std::env::temp_dir().join(format!("mondrian-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(CliError::write(&dir))?;
    let (train_path, test_path) = (
        dir.join("satimage_train.csv.gz"),
        dir.join("satimage_test.csv.gz"),
    );
    let loaded = write_file(&train_path, DEMO_TRAIN)
        .and_then(|()| write_file(&test_path, DEMO_TEST))
        .and_then(|()| TrainTest::read(&train_path, &test_path));
    let _ = std::fs::remove_dir_all(&dir);
    let data = loaded?;
    println!(
        "Mondrian forest demo: satimage (Statlog Landsat, UCI). {} training rows arrive in growing\n\
         mini-batches and the forest learns each online; accuracy is measured on {} held-out rows.\n\
         {} features, {} classes; 100 trees, lifetime ∞, γ = 10·D.\n",
        data.train.data.n_rows(),
        data.test.data.n_rows(),
        data.train.data.n_features,
        data.values.len()
    );
    println!(
        "{:>8} {:>9} {:>9} {:>9}  accuracy",
        "seen", "accuracy", "log-loss", "train s"
    );
    // Mini-batches that grow along the stream, so the early learning shows.
    let n = data.train.data.n_rows();
    let mut ends: Vec<usize> = [
        0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
    ]
    .iter()
    .map(|f| ((f * n as f64).round() as usize).clamp(1, n))
    .collect();
    ends.dedup();
    let (_, forest) = learning_curve(&data, &ends, &args, |s| {
        let bar = "#".repeat(((s.accuracy - 0.5).max(0.0) * 100.0).round() as usize);
        println!(
            "{:>8} {:>9.4} {:>9.4} {:>9.2}  {bar}",
            s.n_seen, s.accuracy, s.log_loss, s.train_seconds
        );
    })?;
    let s = forest.summary();
    println!(
        "\n{} nodes over {} trees, mean leaf depth {:.1} ± {:.1}; the online forest has the\n\
         distribution of a batch forest on the same data, so the curve is what batch refits\n\
         would give, at a fraction of the cost.",
        s.n_nodes, s.n_trees, s.depth_mean, s.depth_std
    );
    Ok(())
}
