//! Sections of `BENCHMARKS.md` that one command can measure again on its own
//! (`cargo xtask lab power`, `cargo xtask lab section NAME`) sit between markers;
//! this replaces them in an existing report.

use std::path::Path;

/// An opening and a closing marker (HTML comments, invisible when rendered).
pub type Markers = (&'static str, &'static str);

/// Markers of any lifetime (a function's section's are made at run time).
type Pair<'a> = (&'a str, &'a str);

/// `text` with the part between `markers` (both kept) replaced by
/// `replacement` (which brings its own markers); an error if the markers are
/// missing or out of order.
pub fn splice(text: &str, markers: Pair<'_>, replacement: &str) -> Result<String, String> {
    let start = text
        .find(markers.0)
        .ok_or_else(|| format!("no {} in the report", markers.0))?;
    let end = text[start..]
        .find(markers.1)
        .map(|at| start + at + markers.1.len())
        .ok_or_else(|| format!("no {} after {} in the report", markers.1, markers.0))?;
    // The replacement ends with a line break; so did the marker's line.
    let rest = text[end..].strip_prefix('\n').unwrap_or(&text[end..]);
    Ok(format!("{}{replacement}{rest}", &text[..start]))
}

/// The report in `dir`, if it has every part in `markers` to replace.
pub fn rewritable(dir: &Path, markers: &[Pair<'_>]) -> Result<String, String> {
    let path = dir.join("BENCHMARKS.md");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    for &pair in markers {
        splice(&text, pair, "").map_err(|e| {
            format!(
                "{}: {e} (run the whole lab once: `cargo xtask lab`)",
                path.display()
            )
        })?;
    }
    Ok(text)
}

/// Replace each part of the report in `dir` by its new text (which brings its
/// markers); nothing is written unless every part is found.
pub fn rewrite(dir: &Path, parts: &[(Pair<'_>, String)]) -> Result<(), String> {
    let path = dir.join("BENCHMARKS.md");
    let markers: Vec<Pair<'_>> = parts.iter().map(|(m, _)| *m).collect();
    let mut text = rewritable(dir, &markers)?;
    for (pair, replacement) in parts {
        text = splice(&text, *pair, replacement)?;
    }
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUMMARY: Markers = ("<!-- power-summary -->", "<!-- /power-summary -->");
    const SECTION: Markers = ("<!-- power-tuning -->", "<!-- /power-tuning -->");

    #[test]
    fn splice_replaces_only_between_the_markers() {
        let text = "# B\n<!-- power-summary -->\nold line\n<!-- /power-summary -->\n## 4\nkept\n";
        let new = "<!-- power-summary -->\nnew line\n<!-- /power-summary -->\n";
        assert_eq!(
            splice(text, SUMMARY, new).expect("spliced"),
            "# B\n<!-- power-summary -->\nnew line\n<!-- /power-summary -->\n## 4\nkept\n"
        );
        assert!(
            splice("no markers", SUMMARY, new)
                .unwrap_err()
                .contains("power-summary")
        );
        let reversed = "<!-- /power-tuning -->\n<!-- power-tuning -->\n";
        assert!(splice(reversed, SECTION, "x").is_err());
    }

    #[test]
    fn rewrite_replaces_every_part_or_writes_nothing() {
        let dir = std::env::temp_dir().join(format!("lab-splice-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("BENCHMARKS.md");
        let old = "# B\n<!-- power-summary -->\nold\n<!-- /power-summary -->\nkept\n";
        std::fs::write(&path, old).expect("written");
        let part = |m: Markers, body: &str| (m, format!("{}\n{body}\n{}\n", m.0, m.1));
        let missing = rewrite(&dir, &[part(SUMMARY, "new"), part(SECTION, "new")]);
        let unchanged = std::fs::read_to_string(&path).expect("read");
        let done = rewrite(&dir, &[part(SUMMARY, "new")]);
        let changed = std::fs::read_to_string(&path).expect("read");
        let _ = std::fs::remove_dir_all(&dir);
        assert!(missing.unwrap_err().contains("cargo xtask lab"));
        assert_eq!(unchanged, old);
        assert_eq!(done, Ok(()));
        assert_eq!(
            changed,
            "# B\n<!-- power-summary -->\nnew\n<!-- /power-summary -->\nkept\n"
        );
    }
}
