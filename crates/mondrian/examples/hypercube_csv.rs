//! Writes the hypercube-D data of spec `bayesian-trees.md` §5.3 as two CSVs (header
//! `x0..x{D-1},target`, last column the target), so that every tool of the chapter-4
//! experiments reads the one generator's output. Usage:
//! `cargo run --release -p mondrian --example hypercube_csv -- D SEED OUT_DIR [label_noise_sd]`
//! writes `OUT_DIR/hypercube_D{D}_s{SEED}_{train,test}.csv` (noise sd 0.01 by default).
use std::fmt::Write as _;

use mondrian::bayes::hypercube;

fn write_csv(path: &std::path::Path, x: &[f64], y: &[f64], d: usize) -> std::io::Result<()> {
    let mut s = String::new();
    for k in 0..d {
        let _ = write!(s, "x{k},");
    }
    s.push_str("target\n");
    for (row, &t) in x.chunks(d).zip(y) {
        for v in row {
            // `{:?}` is the shortest string that reads back to the same f64.
            let _ = write!(s, "{v:?},");
        }
        let _ = writeln!(s, "{t:?}");
    }
    std::fs::write(path, s)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        return Err("usage: hypercube_csv D SEED OUT_DIR [label_noise_sd]".into());
    }
    let d: usize = args[1].parse()?;
    let seed: u64 = args[2].parse()?;
    let dir = std::path::PathBuf::from(&args[3]);
    let noise: f64 = args.get(4).map_or(Ok(0.01), |s| s.parse())?;
    std::fs::create_dir_all(&dir)?;
    let h = hypercube(d, seed, noise)?;
    let stem = format!("hypercube_D{d}_s{seed}");
    let train = dir.join(format!("{stem}_train.csv"));
    let test = dir.join(format!("{stem}_test.csv"));
    write_csv(&train, &h.train_x, &h.train_y, d)?;
    write_csv(&test, &h.test_x, &h.test_y, d)?;
    println!("{}\n{}", train.display(), test.display());
    Ok(())
}
