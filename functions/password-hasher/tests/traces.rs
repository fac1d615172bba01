//! The password hasher's traces on Lambda Managed Instances: each
//! invocation in flight continues its own caller's trace.

use local_stack::jvm::Compiler;
use local_stack::pool::Options;
use local_stack::xray_daemon::Daemon;
use local_stack::zipkin::Zipkin;
use testkit::template;
use testkit::traces::{named, parent, producer_header, trace};

/// On Lambda Managed Instances one environment serves several invocations at
/// once, and each continues its own caller's trace: batches of one, two and
/// three passwords sent together, each with an `X-Amzn-Trace-Id` of its own,
/// are three traces, each holding its own invocation's batch.
#[test]
fn on_managed_instances_each_invocation_in_flight_continues_its_own_trace() {
    let zipkin = Zipkin::start(&testkit::scratch("zipkin.log"), Compiler::Quick)
        .unwrap_or_else(|e| panic!("{e}"));
    let daemon = Daemon::start(Some(zipkin.endpoint())).unwrap_or_else(|e| panic!("{e}"));
    let address = daemon.address().to_string();
    let template = template()
        .with_parameters(&local_stack::managed_instances::LOCAL_PARAMETERS)
        .unwrap_or_else(|e| panic!("{e}"));
    let pool = testkit::managed_pool(
        &template,
        "password-hasher",
        &[("AWS_XRAY_DAEMON_ADDRESS", &address)],
        None,
    );
    let calls: Vec<(usize, (String, String))> = (1..=3).map(|n| (n, producer_header())).collect();
    // Each batch with its own trace header, all sent at once.
    testkit::send_at_once(
        &pool,
        calls
            .iter()
            .map(|(passwords, (header, _))| {
                let event = serde_json::json!({
                    "operation": "hash",
                    "cost": 8,
                    "passwords": vec!["a password"; *passwords],
                });
                let options = Options {
                    trace_header: Some(header.clone()),
                    ..Options::default()
                };
                (event.to_string(), options)
            })
            .collect(),
    );
    for (passwords, (header, trace_id)) in &calls {
        let spans = trace(&zipkin, trace_id, 2);
        let invocation = named(&spans, "invocation");
        assert_eq!(invocation["parentId"], parent(header), "{invocation}");
        let batch = named(&spans, "batch");
        assert_eq!(batch["parentId"], invocation["id"]);
        assert_eq!(
            batch["tags"]["items"].as_str(),
            Some(passwords.to_string().as_str()),
            "{header}: {batch}"
        );
    }
}
