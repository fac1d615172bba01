//! The allocator checks with Mimalloc declared, as a function's `main.rs` does,
//! and mimalloc's options: they are set by their index in its `mi_option_e`
//! enum, a number that a new mimalloc may give to another option. For each
//! option the allocator module sets, under each policy: the index is the one
//! mimalloc itself names so, the value reads back as set, and no other option
//! changed.
#![cfg(feature = "mimalloc")]

shared::global_allocator!(Mimalloc);

mod allocator_checks;

allocator_checks::tests!(Mimalloc);

use shared::allocator::{self, Policy};

#[test]
fn each_option_set_is_the_one_named_reads_back_and_changes_nothing_else() {
    let names: Vec<String> = allocator::mimalloc_options()
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    // mimalloc lists every option, in index order, from `show_errors` (0).
    assert_eq!(names.first().map(String::as_str), Some("show_errors"));
    assert!(names.len() > 30, "{names:?}");
    for policy in [Policy::Prompt, Policy::Keep] {
        let before = allocator::mimalloc_options();
        allocator::apply(policy).expect("apply");
        let after = allocator::mimalloc_options();
        let settings = allocator::mimalloc_settings(policy);
        for (option, value) in settings {
            let index = usize::try_from(option.index).expect("an index");
            let (name, read) = after.get(index).expect("index within mimalloc's options");
            assert_eq!(
                name, option.name,
                "{policy}: index {index} is mimalloc's `{name}`, not `{}`",
                option.name
            );
            assert_eq!(*read, *value, "{policy}: {name} reads back {read}");
        }
        let set: Vec<usize> = settings
            .iter()
            .filter_map(|(option, _)| usize::try_from(option.index).ok())
            .collect();
        for (index, (was, is)) in before.iter().zip(&after).enumerate() {
            if !set.contains(&index) {
                assert_eq!(was, is, "{policy}: option {index} changed");
            }
        }
    }
}

/// The workspace builds mimalloc 2.x (the `v2` feature in `Cargo.toml`):
/// 3.3.x, the crate's default, has open crash reports with many threads.
#[test]
fn the_mimalloc_built_is_2_x() {
    let version = allocator::mimalloc_version();
    assert!(
        (20000..30000).contains(&version),
        "mimalloc {version} is linked, not 2.x: is the `v2` feature of `mimalloc` in the workspace's Cargo.toml?"
    );
}

/// The start-up options are in force in this binary, which starts as a
/// function does with the default policy: mimalloc read them before `main`.
#[cfg(target_os = "linux")]
#[test]
fn start_up_options_are_set_before_mimalloc_starts() {
    let policy = Policy::from_env(&shared::config::ProcessEnv).expect("MEMORY_RETURN");
    let options = allocator::mimalloc_options();
    for (option, value) in allocator::mimalloc_start_up_settings(policy) {
        let index = usize::try_from(option.index).expect("an index");
        let (name, read) = options.get(index).expect("index within mimalloc's options");
        assert_eq!(name, option.name, "index {index} is mimalloc's `{name}`");
        let variable = format!("MIMALLOC_{}", name.to_uppercase());
        if std::env::var_os(&variable).is_none() {
            assert_eq!(*read, *value, "{name} reads {read}");
        }
    }
    if options
        .iter()
        .any(|(name, value)| name == "allow_thp" && *value == 0)
    {
        // mimalloc acts on it only at start-up: it turns THP off for the process.
        assert!(
            shared::memory::huge_pages_disabled(),
            "mimalloc started before allow_thp was set"
        );
    }
}
