//! A function past its memory size (the template's `MemorySize`, the local
//! stack's memory limit): the invocation ends as Lambda reports it
//! (`Runtime.OutOfMemory`, logged as out of memory), and the next invocation
//! is a cold start in a fresh process. Skipped, with a line that says so,
//! where limits are not enforced. The samples' own runs at their limits are
//! in their folders (`functions/*/tests/memory_limit.rs`).

use e2e::limits_enforced;
use local_stack::emulator::{Emulator, Invocation};
use local_stack::template::Function;
use serde_json::{Value, json};

fn answer(invocation: &Invocation) -> Value {
    invocation
        .json()
        .unwrap_or_else(|e| panic!("{e} (HTTP {})", invocation.status))
}

#[test]
fn past_its_memory_size_a_function_is_out_of_memory_then_cold_starts() {
    if !limits_enforced() {
        return;
    }
    let function = Function {
        logical_id: "FixtureFunction".into(),
        binary: "fixture_function".into(),
        memory_mb: 128,
        timeout_s: 10,
        env: Vec::new(),
        reserved_concurrency: None,
    };
    let rie = local_stack::tools::emulator().expect("emulator");
    let emulator = Emulator::start(
        &rie,
        env!("CARGO_BIN_EXE_fixture_function").as_ref(),
        &function,
        &[],
        &e2e::scratch("memory-limit.log"),
    )
    .expect("start");
    let invoke = |mib: u64| emulator.invoke(json!({ "mib": mib }).to_string());

    let first = invoke(16).expect("invoke 16 MiB");
    assert_eq!(answer(&first), json!({ "invocation": 1 }), "{}", first.body);

    let oom = invoke(200).expect("invoke 200 MiB");
    let body = answer(&oom);
    assert_eq!(oom.status, 200, "a function error, as on Lambda: {body}");
    assert_eq!(body["errorType"], "Runtime.OutOfMemory", "{body}");
    let message = body["errorMessage"].as_str().unwrap_or_default();
    assert!(message.starts_with("RequestId: "), "{message}");
    assert!(
        message.ends_with(" Error: Runtime exited with error: signal: killed"),
        "{message}"
    );
    let logs = emulator.logs();
    let out_of_memory: Vec<&str> = logs
        .lines()
        .filter(|line| line.contains("Runtime.OutOfMemory"))
        .collect();
    assert_eq!(out_of_memory.len(), 1, "one out-of-memory line:\n{logs}");
    assert!(out_of_memory[0].contains(message), "{}", out_of_memory[0]);

    let after = invoke(16).expect("invoke 16 MiB after");
    assert_eq!(
        answer(&after),
        json!({ "invocation": 1 }),
        "a fresh process (cold start):\n{}",
        emulator.logs()
    );
}
