//! The root `Cargo.toml`'s profile entries of crates the project no longer
//! has. A function's removal takes the crates only it used out of the
//! dependency graph (the Arrow worker's `arrow-*`, the hasher's `bcrypt`),
//! and cargo then warns about their entries on every command: "profile
//! package spec `arrow-arith` in profile `release` did not match any
//! packages". `remove-function` prunes them; a user removing a function by
//! hand deletes the lines cargo warns about (README, "Make it yours").
//!
//! What goes: a `[profile.X.package]` table's `name = { ... }` lines and whole
//! `[profile.X.package.name]` tables whose package is not in the graph (`"*"`
//! stays), and a comment line left heading nothing (followed, once they are
//! gone, by a blank line, another comment or the end). Edited as text, line by
//! line: every other line stays as written.

use crate::init_check;
use crate::template_text::without;
use std::collections::BTreeSet;
use std::path::Path;

/// Cargo's warning about a profile entry whose package is not in the graph.
pub const UNMATCHED: &str = "did not match any packages";

/// Prune the root `Cargo.toml` of the project at `root` of the profile
/// entries whose package is not in its dependency graph; the entries pruned
/// (`profile.release.package.arrow-arith`).
pub fn prune(root: &Path) -> Result<Vec<String>, String> {
    let path = root.join("Cargo.toml");
    let manifest =
        std::fs::read_to_string(&path).map_err(|e| format!("read {}: {e}", path.display()))?;
    let (text, gone) = pruned(&manifest, &package_names(root)?);
    if !gone.is_empty() {
        std::fs::write(&path, text).map_err(|e| format!("write {}: {e}", path.display()))?;
    }
    Ok(gone)
}

/// The line telling the user what [`prune`] did (empty if nothing).
pub fn report(gone: &[String]) -> String {
    if gone.is_empty() {
        return String::new();
    }
    format!(
        "pruned from Cargo.toml, no package of the project any more: {}\n",
        gone.join(", ")
    )
}

/// The names of the packages of the dependency graph of the project at
/// `root`, every feature on: the crates cargo matches profile entries
/// against (with only the default features, `cargo metadata` leaves out what
/// a feature alone brings, jemalloc among them, which cargo still matches).
fn package_names(root: &Path) -> Result<BTreeSet<String>, String> {
    let metadata = init_check::metadata(root, &["--all-features", "--offline"])?;
    Ok(init_check::package_names(&metadata, root)?
        .into_iter()
        .collect())
}

/// `manifest` without its profile entries whose package is not one of
/// `packages` (`"*"` kept) and the comment lines they leave heading nothing;
/// the entries removed.
pub fn pruned(manifest: &str, packages: &BTreeSet<String>) -> (String, Vec<String>) {
    let lines: Vec<&str> = manifest.lines().collect();
    let unknown = |spec: &str| {
        let name = spec.split('@').next().unwrap_or(spec);
        name != "*" && !packages.contains(name)
    };
    let mut drop = BTreeSet::new();
    let mut gone = vec![];
    let mut table: Vec<String> = vec![];
    for (n, line) in lines.iter().enumerate() {
        if let Some(path) = header(line) {
            table = path;
            if let [profile, x, package, name] = &table[..]
                && profile == "profile"
                && package == "package"
                && unknown(name)
            {
                drop.extend(n..table_end(&lines, n));
                gone.push(format!("profile.{x}.package.{name}"));
            }
        } else if let [profile, x, package] = &table[..]
            && profile == "profile"
            && package == "package"
            && let Some(name) = entry_name(line)
            && unknown(&name)
        {
            drop.insert(n);
            gone.push(format!("profile.{x}.package.{name}"));
        }
    }
    drop.extend(orphaned_comments(&lines, &drop));
    drop.extend(doubled_blanks(&lines, &drop));
    (without(manifest, &lines, &drop), gone)
}

/// The keys of a table header line (`[profile.dev.package.bcrypt]`,
/// `[profile.release.package."*"]`), quotes taken off.
fn header(line: &str) -> Option<Vec<String>> {
    let inner = line.trim().strip_prefix('[')?;
    let inner = inner.strip_prefix('[').unwrap_or(inner);
    let (path, _) = inner.split_once(']')?;
    Some(keys(path))
}

/// The package a line of a `[profile.X.package]` table names (its key's
/// first part: `bcrypt` of `bcrypt = { ... }` and of `bcrypt.opt-level = 3`).
fn entry_name(line: &str) -> Option<String> {
    if is_comment_or_blank(line) {
        return None;
    }
    let (key, _) = line.split_once('=')?;
    keys(key).into_iter().next()
}

/// The parts of a dotted TOML key (`profile.release.package."*"`), trimmed
/// and unquoted; a quoted part may hold dots.
fn keys(path: &str) -> Vec<String> {
    let (mut parts, mut part, mut quoted) = (vec![], String::new(), false);
    for c in path.chars() {
        match c {
            '"' | '\'' => quoted = !quoted,
            '.' if !quoted => parts.push(std::mem::take(&mut part).trim().to_owned()),
            c => part.push(c),
        }
    }
    parts.push(part.trim().to_owned());
    parts
}

/// One past the last line of the table whose header is line `start`: up to
/// the next header, less the comment and blank lines right above it (they
/// head the next table).
fn table_end(lines: &[&str], start: usize) -> usize {
    let mut end = lines[start + 1..]
        .iter()
        .position(|l| l.trim_start().starts_with('['))
        .map_or(lines.len(), |at| start + 1 + at);
    while end > start + 1 && is_comment_or_blank(lines[end - 1]) {
        end -= 1;
    }
    end
}

/// The runs of comment lines whose next line is in `drop` and which, once
/// `drop` is gone, are followed by a blank line, another comment or the end:
/// they headed only what went.
fn orphaned_comments(lines: &[&str], drop: &BTreeSet<usize>) -> Vec<usize> {
    let is_comment = |n: usize| lines[n].trim_start().starts_with('#');
    let mut orphaned = vec![];
    let mut n = 0;
    while n < lines.len() {
        if drop.contains(&n) || !is_comment(n) {
            n += 1;
            continue;
        }
        let start = n;
        while n < lines.len() && is_comment(n) && !drop.contains(&n) {
            n += 1;
        }
        let next_kept = (n..lines.len()).find(|m| !drop.contains(m));
        let heads_nothing = next_kept.is_none_or(|m| is_comment_or_blank(lines[m]));
        if drop.contains(&n) && heads_nothing {
            orphaned.extend(start..n);
        }
    }
    orphaned
}

/// The blank lines that would follow another blank line once `drop` is
/// gone, where dropped lines stood between them.
fn doubled_blanks(lines: &[&str], drop: &BTreeSet<usize>) -> Vec<usize> {
    let blank = |n: usize| lines[n].trim().is_empty();
    let kept: Vec<usize> = (0..lines.len()).filter(|n| !drop.contains(n)).collect();
    kept.windows(2)
        .filter(|pair| pair[1] > pair[0] + 1 && blank(pair[0]) && blank(pair[1]))
        .map(|pair| pair[1])
        .collect()
}

/// Whether `line` is blank or a comment.
fn is_comment_or_blank(line: &str) -> bool {
    let line = line.trim_start();
    line.is_empty() || line.starts_with('#')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::{cargo, run_without_warning};

    const MANIFEST: &str = "\
[workspace]
members = [\"a\"]

# Tests hash passwords: optimise the hot dependencies even in debug builds.
[profile.dev.package.blowfish]
opt-level = 3
[profile.dev.package.sha2]
opt-level = 3
# TLS crypto.
[profile.dev.package.\"ring\"]
opt-level = 3

[profile.release.package]
\"*\" = { opt-level = \"s\" }
# Records
serde = { opt-level = 3 }
# bcrypt
bcrypt = { opt-level = 3 }
subtle.opt-level = 3
# Arrow
arrow-arith = { opt-level = 3 }
\"arrow-array@60.1.0\" = { opt-level = 3 }
# Checksums
ring = { opt-level = 3 } # TLS

[profile.lab]
inherits = \"release\"
";

    fn packages(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn entries_of_crates_gone_go_and_the_rest_stays_as_written() {
        let (text, gone) = pruned(MANIFEST, &packages(&["sha2", "ring", "serde", "subtle"]));
        assert_eq!(
            gone,
            [
                "profile.dev.package.blowfish",
                "profile.release.package.bcrypt",
                "profile.release.package.arrow-arith",
                "profile.release.package.arrow-array@60.1.0",
            ]
        );
        let expected = "\
[workspace]
members = [\"a\"]

# Tests hash passwords: optimise the hot dependencies even in debug builds.
[profile.dev.package.sha2]
opt-level = 3
# TLS crypto.
[profile.dev.package.\"ring\"]
opt-level = 3

[profile.release.package]
\"*\" = { opt-level = \"s\" }
# Records
serde = { opt-level = 3 }
# bcrypt
subtle.opt-level = 3
# Checksums
ring = { opt-level = 3 } # TLS

[profile.lab]
inherits = \"release\"
";
        assert_eq!(text, expected);
    }

    #[test]
    fn a_comment_left_heading_nothing_goes_and_the_star_stays() {
        let (text, gone) = pruned(MANIFEST, &packages(&["serde"]));
        assert_eq!(gone.len(), 8, "{gone:?}");
        assert!(text.contains("\"*\" = { opt-level = \"s\" }"), "{text}");
        for orphan in [
            "# bcrypt",
            "# Arrow",
            "# Checksums",
            "# TLS crypto",
            "# Tests",
        ] {
            assert!(!text.contains(orphan), "{orphan} left:\n{text}");
        }
        assert!(text.contains("# Records\nserde"), "{text}");
        assert!(
            text.contains("members = [\"a\"]\n\n[profile.release.package]"),
            "one blank line: {text}"
        );
        assert!(text.ends_with("[profile.lab]\ninherits = \"release\"\n"));
    }

    #[test]
    fn nothing_changes_when_every_entry_names_a_package() {
        let all = ["blowfish", "sha2", "ring", "serde", "bcrypt", "subtle"];
        let all = packages(&[&all[..], &["arrow-arith", "arrow-array"]].concat());
        assert_eq!(pruned(MANIFEST, &all), (MANIFEST.to_owned(), vec![]));
        assert_eq!(report(&[]), "");
    }

    /// On a scratch workspace: cargo warns about the entries of crates it
    /// does not have, which fails a command run with
    /// [`run_without_warning`], and no longer once they are pruned.
    #[test]
    fn cargo_warns_until_the_entries_are_pruned() {
        let scratch = std::env::temp_dir().join(format!("xtask-profiles-{}", std::process::id()));
        std::fs::create_dir_all(scratch.join("src")).expect("scratch");
        let manifest = "[package]\nname = \"kept\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n\
            [profile.release.package]\n\"*\" = { opt-level = \"s\" }\nkept = { opt-level = 3 }\n\
            gone = { opt-level = 3 }\n\n[profile.dev.package.gone]\nopt-level = 3\n";
        std::fs::write(scratch.join("Cargo.toml"), manifest).expect("manifest");
        std::fs::write(scratch.join("src/lib.rs"), "").expect("lib.rs");
        // As the suite's removal step checks a cargo command in its copy.
        let build = || {
            let mut build = cargo();
            build
                .current_dir(&scratch)
                .args(["build", "--offline"])
                .env("CARGO_TARGET_DIR", scratch.join("target"));
            run_without_warning(&mut build, UNMATCHED)
        };
        let before = build();
        let pruned = prune(&scratch);
        let after = build();
        let text = std::fs::read_to_string(scratch.join("Cargo.toml")).unwrap_or_default();
        let _ = std::fs::remove_dir_all(&scratch);
        let warned = before.expect_err("cargo warns");
        assert!(
            warned.contains("spec `gone` in profile `release`"),
            "{warned}"
        );
        assert!(warned.contains("spec `gone` in profile `dev`"), "{warned}");
        assert_eq!(
            pruned.expect("pruned"),
            ["profile.release.package.gone", "profile.dev.package.gone"]
        );
        assert_eq!(after, Ok(()), "{text}");
        assert!(text.contains("kept = { opt-level = 3 }"), "{text}");
    }
}
