//! Node statistics: what each model hangs off the shared Mondrian tree.

pub mod gaussian;
pub mod label;
