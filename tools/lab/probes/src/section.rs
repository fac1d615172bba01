//! A function's own section of `BENCHMARKS.md`: what only that function
//! measures (the password hasher's bcrypt candidates, the Arrow worker's
//! fan-out). Its lab crate's `section` probe
//! (`functions/<name>/lab/examples/<name>-section.rs`) measures, draws its
//! charts and prints a [`Section`] as one JSON line; the lab places it after
//! the generic sections, numbers it, and fails the run on a property it
//! says broke. `cargo xtask lab section
//! <name>` measures it again on its own. Deleting the function's folder
//! deletes its section with it.
//!
//! `<name>-section quick|full CORES PLOTS REPORT_DIR MACHINE`: the scale, the
//! cores the lab runs on, where the section's charts go (relative to the
//! report, e.g. `functions/<name>/lab/plots`), the report's folder, and the
//! machine's line for the section's text.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// What a `section` probe prints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Section {
    /// The heading, without its number (`bcrypt: every candidate ...`).
    pub title: String,
    /// The text under the heading (Markdown; charts linked by [`Context::chart`]).
    pub body: String,
    /// The properties checked that held, one line each (printed by the lab).
    #[serde(default)]
    pub held: Vec<String>,
    /// The properties that broke: the lab writes the report, then fails.
    #[serde(default)]
    pub broke: Vec<String>,
}

/// What the lab tells a `section` probe.
#[derive(Debug, Clone, PartialEq)]
pub struct Context {
    /// `cargo xtask lab` (else `--quick`: small, on debug builds, properties only).
    pub full: bool,
    /// The cores the lab may use.
    pub cores: usize,
    /// Where the charts go, relative to the report.
    pub plots: String,
    /// The report's folder.
    pub report_dir: PathBuf,
    /// The machine, as one line.
    pub machine: String,
}

const USAGE: &str = "usage: SECTION quick|full CORES PLOTS REPORT_DIR MACHINE";

impl Context {
    /// The probe's arguments, as [`Context::args`] wrote them.
    pub fn from_args(args: &[String]) -> Result<Self, String> {
        let [scale, cores, plots, report_dir, machine] = args else {
            return Err(USAGE.to_owned());
        };
        let full = match scale.as_str() {
            "full" => true,
            "quick" => false,
            _ => return Err(USAGE.to_owned()),
        };
        Ok(Self {
            full,
            cores: cores.parse().map_err(|_| USAGE.to_owned())?,
            plots: plots.clone(),
            report_dir: PathBuf::from(report_dir),
            machine: machine.clone(),
        })
    }

    /// The arguments the lab runs a `section` probe with.
    pub fn args(&self) -> Vec<String> {
        vec![
            if self.full { "full" } else { "quick" }.to_owned(),
            self.cores.to_string(),
            self.plots.clone(),
            self.report_dir.to_string_lossy().into_owned(),
            self.machine.clone(),
        ]
    }

    /// Where to write chart `file` (its folder made), and its link in the report.
    pub fn chart(&self, file: &str) -> Result<(PathBuf, String), String> {
        let link = format!("{}/{file}", self.plots.trim_end_matches('/'));
        let path = self.report_dir.join(&link);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        Ok((path, link))
    }
}

/// A `section` probe's `main`: `measure` with the context of this process's
/// arguments, its section printed as one JSON line.
pub fn run(measure: impl FnOnce(&Context) -> Result<Section, String>) -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let section = measure(&Context::from_args(&args)?)?;
    let line = serde_json::to_string(&section).map_err(|e| e.to_string())?;
    println!("{line}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_arguments_go_both_ways_and_bad_ones_say_how_to_call() {
        let context = Context {
            full: false,
            cores: 2,
            plots: "functions/f/lab/plots".into(),
            report_dir: PathBuf::from("/tmp/r"),
            machine: "2 core(s), some CPU".into(),
        };
        assert_eq!(Context::from_args(&context.args()), Ok(context.clone()));
        let mut wrong = context.args();
        wrong[0] = "fast".into();
        assert_eq!(Context::from_args(&wrong), Err(USAGE.to_owned()));
        assert_eq!(Context::from_args(&wrong[1..]), Err(USAGE.to_owned()));
        let (path, link) = Context {
            report_dir: std::env::temp_dir().join(format!("section-{}", std::process::id())),
            ..context
        }
        .chart("x.svg")
        .expect("folder made");
        assert_eq!(link, "functions/f/lab/plots/x.svg");
        assert!(path.ends_with(&link) && path.parent().is_some_and(std::path::Path::is_dir));
        let _ = std::fs::remove_dir_all(path.ancestors().nth(5).unwrap_or(&path));
    }

    #[test]
    fn a_section_without_checks_reads_back() {
        let line = r#"{"title":"t","body":"b"}"#;
        let section: Section = serde_json::from_str(line).expect("defaults");
        assert!(section.held.is_empty() && section.broke.is_empty());
    }
}
