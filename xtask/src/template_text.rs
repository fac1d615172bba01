//! `template.yaml` read as text, as `new-function` and `remove-function` edit
//! it: every line they do not add or remove stays as the user wrote it
//! (comments, order, quoting), which a YAML round trip would not keep.

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
