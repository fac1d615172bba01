//! `seed_corpus EVENTS CORPUS DICT`: the seed corpus of every fuzz target,
//! derived from the sample events (`EVENTS/<function>/*.json`) by the same
//! functions the suite's proptest harness uses, one file per seed in
//! `CORPUS/<target>/`, and a libFuzzer dictionary per target in `DICT/`.
//!
//! Built with the targets, so with their coverage instrumentation, which only
//! links into a libFuzzer binary: this is one whose initialisation does the
//! work and exits before any fuzzing.
#![no_main]

use std::path::{Path, PathBuf};

libfuzzer_sys::fuzz_target!(init: write_seeds_and_exit(), |_data: &[u8]| {});

fn write_seeds_and_exit() {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let [events, corpus, dict] = args.as_slice() else {
        eprintln!("usage: seed_corpus EVENTS CORPUS DICT");
        std::process::exit(2);
    };
    match write_all(events, corpus, dict) {
        Ok(()) => std::process::exit(0),
        Err(e) => {
            eprintln!("seed_corpus: {e}");
            std::process::exit(1);
        }
    }
}

/// A fuzz target's name, seeds and dictionary words.
type Target = (&'static str, Vec<Vec<u8>>, &'static [&'static str]);

fn write_all(events: &Path, corpus: &Path, dict: &Path) -> Result<(), String> {
    let orders = local_stack::events::json_in(&events.join("order-processor"))?;
    let hasher = local_stack::events::json_in(&events.join("password-hasher"))?;
    let arrow = local_stack::events::json_in(&events.join("arrow-worker"))?;
    let targets: [Target; 4] = [
        (
            "order_body",
            orders
                .iter()
                .flat_map(order_processor_testkit::fuzz::seeds)
                .collect(),
            order_processor_testkit::fuzz::VOCABULARY,
        ),
        (
            "hasher_request",
            password_hasher_testkit::fuzz::seeds(&hasher),
            password_hasher_testkit::fuzz::VOCABULARY,
        ),
        (
            "arrow_request",
            arrow_worker_testkit::fuzz::request_seeds(&arrow),
            arrow_worker_testkit::fuzz::VOCABULARY,
        ),
        (
            "dynamodb_items",
            arrow_worker_testkit::fuzz::item_seeds(),
            &[],
        ),
    ];
    std::fs::create_dir_all(dict).map_err(|e| format!("{}: {e}", dict.display()))?;
    for (target, seeds, vocabulary) in targets {
        let dir = corpus.join(target);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for (n, seed) in seeds.iter().enumerate() {
            let path = dir.join(format!("seed-{n}"));
            std::fs::write(&path, seed).map_err(|e| format!("{}: {e}", path.display()))?;
        }
        let entries: String = vocabulary
            .iter()
            .map(|word| format!("\"{}\"\n", escaped(&format!("\"{word}\""))))
            .collect();
        let path = dict.join(format!("{target}.dict"));
        std::fs::write(&path, entries).map_err(|e| format!("{}: {e}", path.display()))?;
        println!("{target}: {} seeds in {}", seeds.len(), dir.display());
    }
    Ok(())
}

/// `dir/*.json`, sorted, each parsed.
/// A dictionary entry's text: printable ASCII as is, the rest as `\xNN`.
fn escaped(word: &str) -> String {
    word.bytes()
        .map(|b| match b {
            b'"' | b'\\' => format!("\\{}", b as char),
            0x20..0x7f => (b as char).to_string(),
            _ => format!("\\x{b:02X}"),
        })
        .collect()
}
