//! Each function binary is served by the allocator its `main.rs` declares
//! (`shared::global_allocator!(Kind)`), whatever the other functions of the
//! workspace declare: cargo unifies `shared`'s allocator features across the
//! workspace, and that must not decide which allocator a binary gets. The
//! suite also runs this on a scratch copy whose functions each declare
//! another allocator, built by `sam build` (`E2E_BOOTSTRAPS`; `E2E_PROJECT`
//! names the copy, whose sources and template this reads). There, where
//! each function is built with its own features, a function without the
//! tracing exporter in its manifest's `default` features must say so too.

use e2e::{BOOTSTRAPS, functions, json_lines, start, workspace_root};

/// The allocator `main.rs` of function `name` declares, lower-cased as the
/// init log line names it (`Mimalloc` is `mimalloc`).
fn declared_allocator(name: &str) -> String {
    let path = workspace_root()
        .join("functions")
        .join(name)
        .join("src")
        .join("main.rs");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let declared: Vec<&str> = text
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .filter_map(|line| line.split("global_allocator!(").nth(1))
        .filter_map(|rest| rest.split(')').next())
        .collect();
    assert_eq!(declared.len(), 1, "{}: one allocator line", path.display());
    declared[0].trim().to_lowercase()
}

/// What `shared init done` says of tracing for function `name` built with its
/// own features: `TRACING` is on in the template and the emulator names a
/// daemon, so "on" when its manifest's `default` features name `traces`.
fn declared_tracing(name: &str) -> &'static str {
    let path = workspace_root()
        .join("functions")
        .join(name)
        .join("Cargo.toml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let traced = text
        .lines()
        .any(|line| line.starts_with("default = ") && line.contains("\"traces\""));
    if traced { "on" } else { "not built in" }
}

#[test]
fn every_function_is_served_by_the_allocator_its_main_declares() {
    for name in functions() {
        let expected = declared_allocator(&name);
        let emulator = start(&name, &[("AWS_LAMBDA_LOG_FORMAT", "JSON")]);
        // Any answer will do: init runs before the first invocation.
        emulator.invoke("{}").expect("invoke");
        let logs = emulator.logs();
        let init: Vec<_> = json_lines(&logs)
            .into_iter()
            .filter(|line| line["message"] == "shared init done")
            .collect();
        assert_eq!(init.len(), 1, "{name}: one init line:\n{logs}");
        assert_eq!(init[0]["allocator"], expected.as_str(), "{name}:\n{logs}");
        if std::env::var_os(BOOTSTRAPS).is_some() {
            assert_eq!(
                init[0]["tracing"],
                declared_tracing(&name),
                "{name}:\n{logs}"
            );
        }
        eprintln!("{name}: served by {expected}");
    }
}
