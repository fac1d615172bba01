//! The documents a user of the template reads stay short, are where a user
//! looks for them, and carry no measurement copied from `BENCHMARKS.md` (the
//! lab rewrites that file; a copy elsewhere goes stale without anyone
//! noticing).

use e2e::workspace_root;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The README a user reads first, after `sam init`.
const README_MAX_LINES: usize = 250;

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The subfolders of `dir`.
fn subfolders(dir: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.is_dir())
        .collect();
    dirs.sort();
    dirs
}

/// Every folder a user meets: the product's, the tests', the tools'.
fn folders_a_user_meets() -> Vec<PathBuf> {
    let root = workspace_root();
    let mut folders: Vec<PathBuf> = ["shared", "events", "tests", "tools", "xtask"]
        .iter()
        .map(|name| root.join(name))
        .collect();
    folders.extend(subfolders(&root.join("functions")));
    folders.extend(
        subfolders(&root.join("tools"))
            .into_iter()
            .filter(|dir| dir.join("Cargo.toml").is_file()),
    );
    folders
}

/// Every Markdown file a person reads, but `BENCHMARKS.md` itself.
fn documents() -> Vec<PathBuf> {
    let root = workspace_root();
    let mut docs = vec![
        root.join("README.md"),
        root.join("ARCHITECTURE.md"),
        root.join("CONTRIBUTING.md"),
    ];
    docs.extend(
        folders_a_user_meets()
            .into_iter()
            .map(|dir| dir.join("README.md")),
    );
    docs
}

/// The decimal numbers in `text` (`4.8`, `13.9`, not `256`, `1,769` or
/// `0.1.52`), each with the unit written right after it (`MiB`, `ms`, `x`,
/// `%`; empty where none): the lab prints every measurement with a decimal
/// part, in tables whose header names the unit.
fn decimals(text: &str) -> Vec<(String, String)> {
    let words: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || matches!(c, '(' | ')' | '|' | ',' | ';' | '`' | '*'))
        .filter(|w| !w.is_empty())
        .collect();
    let mut found = Vec::new();
    for (i, word) in words.iter().enumerate() {
        let number_end = word
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(word.len());
        let (number, glued) = word.split_at(number_end);
        let number = number.trim_end_matches('.');
        let decimal = number.split_once('.').is_some_and(|(whole, part)| {
            !whole.is_empty() && !part.is_empty() && part.chars().all(|c| c.is_ascii_digit())
        });
        if !decimal || glued.starts_with(|c: char| c.is_ascii_alphanumeric()) && glued.len() > 3 {
            continue;
        }
        let unit = if glued.is_empty() {
            words.get(i + 1).copied().unwrap_or_default()
        } else {
            glued
        };
        found.push((
            number.to_owned(),
            unit.trim_end_matches(['.', ':']).to_owned(),
        ));
    }
    found
}

/// The measurements a document states: decimal numbers followed by a unit
/// of time, size or ratio (`4.8 MiB`, `13.9 ms`, `2.9x`, `35.5%`).
fn measurements(text: &str) -> BTreeSet<String> {
    const UNITS: [&str; 11] = [
        "ms", "µs", "us", "ns", "s", "MiB", "KiB", "GiB", "MB", "x", "%",
    ];
    decimals(text)
        .into_iter()
        .filter(|(_, unit)| UNITS.contains(&unit.as_str()))
        .map(|(number, _)| number)
        .collect()
}

#[test]
fn the_readme_is_short() {
    let lines = read(&workspace_root().join("README.md")).lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines; at most {README_MAX_LINES}: details go to the folders' READMEs"
    );
}

#[test]
fn every_folder_a_user_meets_has_a_readme() {
    let missing: Vec<String> = folders_a_user_meets()
        .into_iter()
        .filter(|dir| !dir.join("README.md").is_file())
        .map(|dir| dir.display().to_string())
        .collect();
    assert!(missing.is_empty(), "no README.md in: {missing:?}");
}

#[test]
fn no_measurement_is_copied_from_the_benchmarks() {
    let measured: BTreeSet<String> = decimals(&read(&workspace_root().join("BENCHMARKS.md")))
        .into_iter()
        .map(|(number, _)| number)
        .collect();
    assert!(
        measured.len() > 20,
        "BENCHMARKS.md should hold the lab's measurements: {measured:?}"
    );
    let mut copies = Vec::new();
    for doc in documents().into_iter().filter(|doc| doc.is_file()) {
        for figure in measurements(&read(&doc)).intersection(&measured) {
            copies.push(format!("{}: {figure}", doc.display()));
        }
    }
    assert!(
        copies.is_empty(),
        "figures of BENCHMARKS.md copied (point at its section instead):\n  {}",
        copies.join("\n  ")
    );
}

#[test]
fn measurements_are_told_from_settings() {
    let found =
        measurements("init 13.9 ms, RSS 4.8MiB (2.9x), 256 MB, 1,769 MB, 35.5% and v0.1.52");
    let expected: BTreeSet<String> = ["13.9", "4.8", "2.9", "35.5"]
        .into_iter()
        .map(str::to_owned)
        .collect();
    assert_eq!(found, expected);
}
