//! The sample events in `events/<function>/`: what the runner demonstrates
//! with, what the end-to-end suite invokes, where the fuzzers take their seeds.

use crate::workspace_root;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The order ids the order processor's sample events leave in the orders
/// table, sorted: each valid order once; in a FIFO group nothing after an
/// invalid order.
pub const STORED_ORDERS: [&str; 6] = [
    "ord-0001", "ord-0002", "ord-0003", "ord-0101", "ord-0201", "ord-0202",
];

/// Every `events/<function>/*.json`, sorted, with its text.
pub fn of(function: &str) -> Result<Vec<(PathBuf, String)>, String> {
    in_dir(&workspace_root().join("events").join(function))
}

/// The sample events of `function`, parsed.
pub fn json_of(function: &str) -> Result<Vec<Value>, String> {
    json_in(&workspace_root().join("events").join(function))
}

/// Every `*.json` in `dir`, sorted, with its text.
pub fn in_dir(dir: &Path) -> Result<Vec<(PathBuf, String)>, String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let text =
                std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            Ok((path, text))
        })
        .collect()
}

/// Every `*.json` in `dir`, sorted, parsed.
pub fn json_in(dir: &Path) -> Result<Vec<Value>, String> {
    in_dir(dir)?
        .into_iter()
        .map(|(path, text)| {
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
        })
        .collect()
}
