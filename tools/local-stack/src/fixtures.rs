//! The local stack's own test application, in `tests/fixtures/`: a template
//! (`template.yaml`) and sample events (`events/<function>/`) of its own, so
//! that its unit tests hold whichever functions a project ships, keeps or
//! removes.

use crate::template::Template;
use std::path::PathBuf;

/// `tests/fixtures/` of this crate.
pub fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("fixtures")
}

/// `tests/fixtures/template.yaml`, parsed.
pub fn template() -> Template {
    Template::load(&dir().join("template.yaml")).unwrap_or_else(|e| panic!("{e}"))
}

/// `tests/fixtures/events/<function>/`: the fixture function's sample events.
pub fn events(function: &str) -> PathBuf {
    dir().join("events").join(function)
}
