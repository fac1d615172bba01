//! What every function's fuzz crate (`functions/<name>/fuzz/`) shares: the
//! call of a target's checks (defined once, in each function's `testkit`
//! (`fuzz`), and also run by the suite's proptest harness), bounded in time,
//! and the seed corpora its `seed_corpus` binary writes. libFuzzer bounds the rest: `run.sh`
//! gives it `-timeout` (a call that never returns) and `-rss_limit_mb` (peak
//! RSS); a panic anywhere, even one caught inside the code under test, aborts
//! the process and is reported as a crash with its input.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A call that takes longer is a hang: the slowest legitimate input takes a
/// few milliseconds in this optimised build.
pub const HANG_BOUND: Duration = Duration::from_secs(2);

/// Run `check` on `data`; panic on a violated property or a hang.
pub fn bounded(data: &[u8], check: fn(&[u8]) -> Result<(), String>) {
    let started = Instant::now();
    if let Err(violation) = check(data) {
        panic!("{violation}");
    }
    let took = started.elapsed();
    assert!(
        took <= HANG_BOUND,
        "{took:?} for one input of {} bytes (bound {HANG_BOUND:?})",
        data.len()
    );
}

/// A fuzz target's name, seeds and dictionary words.
pub type Target = (&'static str, Vec<Vec<u8>>, &'static [&'static str]);

/// The whole of a `seed_corpus` binary (`seed_corpus EVENTS CORPUS DICT`):
/// the targets `targets` makes of the sample events in EVENTS, each seed a
/// file in `CORPUS/<target>/`, each vocabulary a dictionary `DICT/<target>.dict`;
/// then exit (it runs as a libFuzzer binary's initialisation).
pub fn seed_corpus(targets: impl FnOnce(&[Value]) -> Vec<Target>) {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let [events, corpus, dict] = args.as_slice() else {
        eprintln!("usage: seed_corpus EVENTS CORPUS DICT");
        std::process::exit(2);
    };
    let written = events_in(events).and_then(|events| write(&targets(&events), corpus, dict));
    match written {
        Ok(()) => std::process::exit(0),
        Err(e) => {
            eprintln!("seed_corpus: {e}");
            std::process::exit(1);
        }
    }
}

/// The sample events in `dir` (`*.json`, not their `*.expect.json`), sorted.
fn events_in(dir: &Path) -> Result<Vec<Value>, String> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            name.ends_with(".json") && !name.ends_with(".expect.json")
        })
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|path| {
            let text =
                std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
        })
        .collect()
}

fn write(targets: &[Target], corpus: &Path, dict: &Path) -> Result<(), String> {
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
