//! The functions' own sections (`lab_probes::section`): each function of the
//! template with a `section` probe, in the template's order, measured by that
//! probe and placed after the generic sections, numbered from [`FIRST`].
//! Each sits between markers named for its function, so `cargo xtask lab
//! section <name>` replaces it in an existing report.

use crate::machine::Machine;
use crate::plan;
use crate::probes::{self, Probes, SHIPPED};
use crate::scale::Scale;
use crate::splice;
use lab_probes::section::{Context, Section};
use local_stack::template::{Function, Template};
use local_stack::workspace_root;
use std::fmt::Write as _;
use std::path::Path;

/// The number of the first function's section (the generic ones come first).
pub const FIRST: usize = 7;
/// The probe kind.
const KIND: &str = "section";

/// One function's section as measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    /// The function's binary.
    pub binary: String,
    /// Its number in the report.
    pub number: usize,
    pub section: Section,
}

/// The template's functions that have a `section` probe, numbered.
fn offering(probes: &Probes) -> Result<Vec<(usize, Function)>, String> {
    let template = Template::load(&workspace_root().join("template.yaml"))?;
    let functions = plan::functions(&template)?;
    Ok(probes
        .offering(&functions, KIND)
        .cloned()
        .enumerate()
        .map(|(n, f)| (FIRST + n, f))
        .collect())
}

/// Every function's section at `scale`, its charts under `report_dir`;
/// `only` picks one function by binary.
pub fn measure(
    probes: &Probes,
    scale: Scale,
    machine: &Machine,
    report_dir: &Path,
    only: Option<&str>,
    tick: &dyn Fn(&str),
) -> Result<Vec<Measured>, String> {
    let mut measured = Vec::new();
    for (number, function) in offering(probes)? {
        if only.is_some_and(|binary| binary != function.binary) {
            continue;
        }
        tick(&format!("{}: its own section", function.binary));
        let probe = probes::of(&function.binary, KIND);
        let plots = probes
            .folder(&probe)
            .map(|dir| dir.join("plots").to_string_lossy().into_owned())
            .ok_or_else(|| format!("no folder for {probe}"))?;
        let context = Context {
            full: scale == Scale::Full,
            cores: machine.cores,
            plots,
            report_dir: report_dir.to_owned(),
            machine: machine.line(),
        };
        let line = probes.run(SHIPPED, &probe, &context.args(), &[])?;
        let section = serde_json::from_value(line).map_err(|e| format!("{probe}: {e}"))?;
        measured.push(Measured {
            binary: function.binary,
            number,
            section,
        });
    }
    match only {
        Some(binary) if measured.is_empty() => Err(format!(
            "no function `{binary}` with a `{}` probe in the template",
            probes::of(binary, KIND)
        )),
        _ => Ok(measured),
    }
}

/// The markers around `binary`'s section.
fn markers(binary: &str) -> (String, String) {
    (
        format!("<!-- section:{binary} -->"),
        format!("<!-- /section:{binary} -->"),
    )
}

/// One section as the report holds it, between its markers.
pub fn text(measured: &Measured) -> String {
    let (open, close) = markers(&measured.binary);
    let mut md = String::new();
    let _ = writeln!(
        md,
        "{open}\n## {}. {}\n",
        measured.number, measured.section.title
    );
    let _ = writeln!(md, "{}", measured.section.body.trim_end());
    let _ = writeln!(md, "\n{close}");
    md
}

/// Replace the sections of `measured` in the report in `dir` (every one
/// found, or nothing written).
pub fn rewrite(dir: &Path, measured: &[Measured]) -> Result<(), String> {
    let owned: Vec<_> = measured
        .iter()
        .map(|m| (markers(&m.binary), text(m)))
        .collect();
    let parts: Vec<_> = owned
        .iter()
        .map(|((open, close), text)| ((open.as_str(), close.as_str()), text.clone()))
        .collect();
    splice::rewrite(dir, &parts)
}

/// The report in `dir`, if it has `binary`'s section to replace.
pub fn rewritable(dir: &Path, binary: &str) -> Result<String, String> {
    let (open, close) = markers(binary);
    splice::rewritable(dir, &[(&open, &close)])
}

/// The properties the sections checked: those that held printed, an error
/// naming those that broke.
pub fn check(measured: &[Measured]) -> Result<(), String> {
    let mut broke = Vec::new();
    for m in measured {
        for line in &m.section.held {
            println!("lab: {line}");
        }
        broke.extend(m.section.broke.iter().map(|b| format!("{}: {b}", m.binary)));
    }
    if broke.is_empty() {
        Ok(())
    } else {
        Err(broke.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured(broke: &[&str]) -> Measured {
        Measured {
            binary: "f".into(),
            number: FIRST,
            section: Section {
                title: "Its title".into(),
                body: "Its body.\n\n".into(),
                held: vec!["it held".into()],
                broke: broke.iter().map(|&b| b.to_owned()).collect(),
            },
        }
    }

    #[test]
    fn a_section_is_numbered_between_markers_named_for_its_function() {
        assert_eq!(
            text(&measured(&[])),
            "<!-- section:f -->\n## 7. Its title\n\nIts body.\n\n<!-- /section:f -->\n"
        );
    }

    #[test]
    fn a_broken_property_fails_the_check_naming_its_function() {
        assert_eq!(check(&[measured(&[])]), Ok(()));
        assert_eq!(
            check(&[measured(&["hashes differ"])]),
            Err("f: hashes differ".to_owned())
        );
    }

    #[test]
    fn a_rewrite_replaces_the_function_s_section_only() {
        let dir = std::env::temp_dir().join(format!("lab-sections-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let old = "# B\n<!-- section:f -->\nold\n<!-- /section:f -->\nkept\n";
        std::fs::write(dir.join("BENCHMARKS.md"), old).expect("written");
        let missing = rewritable(&dir, "g");
        let done = rewrite(&dir, &[measured(&[])]);
        let new = std::fs::read_to_string(dir.join("BENCHMARKS.md")).expect("read");
        let _ = std::fs::remove_dir_all(&dir);
        assert!(missing.is_err());
        assert_eq!(done, Ok(()));
        assert_eq!(new, format!("# B\n{}kept\n", text(&measured(&[]))));
    }
}
