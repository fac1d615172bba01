//! Traces on the local stack, on its test function: with `TRACING=off` no
//! span leaves a function and it opens no socket for them. The samples'
//! traces are in their folders (`functions/*/tests/traces.rs`).

use e2e::start_fixture;
use local_stack::xray_daemon::Daemon;
use std::time::Duration;

/// With `TRACING=off` no span leaves the function and it opens no socket for
/// them: the log says tracing is off and the daemon hears nothing.
#[test]
fn tracing_off_sends_nothing_and_opens_no_socket() {
    let daemon = Daemon::start(None).unwrap_or_else(|e| panic!("{e}"));
    let address = daemon.address().to_string();
    for (setting, traced) in [("off", false), ("on", true)] {
        let emulator = start_fixture(
            256,
            &[("TRACING", setting), ("AWS_XRAY_DAEMON_ADDRESS", &address)],
        );
        let before = daemon.spans().len();
        let answer = emulator
            .invoke(r#"{"sleep_ms": 10}"#)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(answer.status, 200, "{}", answer.body);
        let logs = emulator.logs_when(|logs| logs.contains("REPORT"));
        let init = logs
            .lines()
            .find(|l| l.contains("shared init done"))
            .unwrap_or_else(|| panic!("no init line:\n{logs}"));
        assert!(
            init.contains(&format!("\"tracing\":\"{setting}\"")),
            "{init}"
        );
        let udp = e2e::udp_sockets_of_descendants(emulator.pid());
        assert_eq!(udp > 0, traced, "TRACING={setting}: {udp} UDP sockets");
        std::thread::sleep(Duration::from_millis(300));
        let sent = daemon.spans().len() - before;
        assert_eq!(sent > 0, traced, "TRACING={setting}: {sent} spans");
    }
}
