//! `template.yaml` read as text, as `new-function` and `remove-function` edit
//! it (and `remove-function` the root `Cargo.toml`'s profiles): every line
//! they do not add or remove stays as the user wrote it (comments, order,
//! quoting), which a YAML or TOML round trip would not keep.

use std::collections::BTreeSet;

/// One `  Key:` entry of a top-level section, with the lines under it.
#[derive(Clone, Copy)]
pub struct Entry<'a> {
    pub key: &'a str,
    /// The key's line.
    pub start: usize,
    /// One past its last non-blank line (comments indented under it included).
    pub end: usize,
    /// Its `Type:` (resources).
    pub kind: Option<&'a str>,
}

/// The entries of the top-level `section` (`Resources`, `Outputs`), in order;
/// `None` if the template has no such section.
pub fn entries<'a>(lines: &[&'a str], section: &str) -> Option<Vec<Entry<'a>>> {
    let header = format!("{section}:");
    let first = lines
        .iter()
        .position(|l| l.split(" #").next().unwrap_or(l).trim_end() == header)?;
    let mut found = vec![];
    let mut i = first + 1;
    while i < lines.len() {
        let line = lines[i];
        if !line.trim().is_empty() && indent(line) == 0 && !line.starts_with('#') {
            break; // the next section
        }
        let Some(key) = (indent(line) == 2).then(|| entry_key(line)).flatten() else {
            i += 1;
            continue;
        };
        let (mut end, mut j) = (i + 1, i + 1);
        while j < lines.len() && (lines[j].trim().is_empty() || indent(lines[j]) > 2) {
            if !lines[j].trim().is_empty() {
                end = j + 1;
            }
            j += 1;
        }
        let kind = lines[i + 1..end].iter().find_map(|l| {
            let value = l.strip_prefix("    Type:")?;
            Some(value.split(" #").next()?.trim().trim_matches('"'))
        });
        found.push(Entry {
            key,
            start: i,
            end,
            kind,
        });
        i = j;
    }
    Some(found)
}

/// The key of a `  Key:` line (a logical id: letters and digits), if it is one.
pub fn entry_key(line: &str) -> Option<&str> {
    let (key, rest) = line.trim_start().split_once(':')?;
    let rest = rest.trim();
    let valid = !key.is_empty()
        && key.chars().all(|c| c.is_ascii_alphanumeric())
        && (rest.is_empty() || rest.starts_with('#'));
    valid.then_some(key)
}

pub fn indent(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

/// The binaries of the template's functions (each one's `Binary`, the crate
/// `functions/<binary>/`), in the template's order: the order `sam build`
/// builds them in.
pub fn function_binaries(template: &str) -> Result<Vec<String>, String> {
    let lines: Vec<&str> = template.lines().collect();
    let resources = entries(&lines, "Resources")
        .ok_or("template.yaml has no top-level `Resources:` section")?;
    resources
        .iter()
        .filter(|e| e.kind == Some("AWS::Serverless::Function"))
        .map(|e| {
            lines[e.start..e.end]
                .iter()
                .find_map(|l| l.trim().strip_prefix("Binary:"))
                .map(|binary| binary.split(" #").next().unwrap_or(binary))
                .map(|binary| binary.trim().trim_matches('"').to_owned())
                .ok_or_else(|| format!("template.yaml: {} names no `Binary`", e.key))
        })
        .collect()
}

/// `text` without the lines `drop` (indices into `lines`, its lines), in its
/// own line ends.
pub fn without(text: &str, lines: &[&str], drop: &BTreeSet<usize>) -> String {
    let newline = if text.contains("\r\n") { "\r\n" } else { "\n" };
    let kept: Vec<&str> = lines
        .iter()
        .enumerate()
        .filter(|(n, _)| !drop.contains(n))
        .map(|(_, l)| *l)
        .collect();
    let mut out = kept.join(newline);
    if text.ends_with('\n') {
        out.push_str(newline);
    }
    out
}
