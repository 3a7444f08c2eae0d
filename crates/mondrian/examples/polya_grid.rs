//! Fit a Mondrian Pólya forest on one file and evaluate it at the rows of another: the mass
//! score and the log-density of every query row (spec `mondrian-polya-forest.md` §5, §8.3).
//! Used by `experiments/density/` to draw the density and the scores over a grid.
//!
//! ```text
//! cargo run --release -p mondrian --example polya_grid -- VARIANT TRAIN.csv QUERY.csv SEED [TREES]
//! ```
//!
//! `VARIANT` is `batch` (bMPF) or `streaming` (sMPF). Both files are CSV with a header row
//! and only feature columns. The output (stdout) is CSV: `mass,log_density,out_of_domain`,
//! one line per query row, in order.

use std::error::Error;
use std::fs;

use mondrian::{MondrianPolyaForest, PolyaParams, PolyaVariant};

/// The rows of a header-first, all-numeric CSV file, flattened, and its width.
fn read(path: &str) -> Result<(Vec<f64>, usize), Box<dyn Error>> {
    let text = fs::read_to_string(path)?;
    let mut lines = text.lines();
    let width = lines.next().ok_or("empty file")?.split(',').count();
    let mut x = Vec::new();
    for line in lines.filter(|l| !l.trim().is_empty()) {
        for v in line.split(',') {
            x.push(v.trim().parse::<f64>()?);
        }
    }
    Ok((x, width))
}

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 4 {
        return Err("usage: polya_grid VARIANT TRAIN.csv QUERY.csv SEED [TREES]".into());
    }
    let params = PolyaParams {
        variant: PolyaVariant::parse(&args[0])?,
        seed: args[3].parse()?,
        n_trees: args.get(4).map_or(Ok(100), |t| t.parse())?,
        ..PolyaParams::default()
    };
    let (train, d) = read(&args[1])?;
    let (query, dq) = read(&args[2])?;
    if d != dq {
        return Err(format!("train has {d} columns, query {dq}").into());
    }
    let mut forest = MondrianPolyaForest::new(params)?;
    forest.fit(&train, d)?;
    println!("mass,log_density,out_of_domain");
    for s in forest.evaluate(&query, d)? {
        println!("{},{},{}", s.mass, s.log_density, u8::from(s.out_of_domain));
    }
    Ok(())
}
