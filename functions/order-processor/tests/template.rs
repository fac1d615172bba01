//! The order processor's resources in `template.yaml`: its queue's redrive
//! and the one key its role may read.

use local_stack::template::Template;
use local_stack::workspace_root;
use testkit::deployed::{ON_DEMAND, deployed};

/// Only passing failures reach SQS's redrive (the function dead-letters what
/// can never succeed), so a valid order must survive a throttle or two:
/// `MaxReceiveCount` cannot be set below 3.
#[test]
fn a_valid_order_survives_a_passing_failure_or_two() {
    let template =
        || Template::load(&workspace_root().join("template.yaml")).expect("template.yaml");
    for refused in ["1", "2"] {
        let deployed = template().with_parameters(&[("MaxReceiveCount", refused)]);
        assert!(deployed.is_err(), "MaxReceiveCount {refused} is accepted");
    }
    assert!(
        template()
            .with_parameters(&[("MaxReceiveCount", "3")])
            .is_ok()
    );
}

/// The order processor may read the one key it opens its connections with
/// (and no other): the template's condition names the code's key.
#[test]
fn the_connection_check_key_is_the_codes() {
    use order_processor::dynamodb::CONNECTION_CHECK_ID;
    let template = deployed(ON_DEMAND);
    let statements = &template["Resources"]["OrderProcessorRole"]["Properties"]["Policies"][0]["PolicyDocument"]
        ["Statement"];
    let get_item = statements
        .as_array()
        .expect("statements")
        .iter()
        .find(|s| s["Action"].to_string().contains("dynamodb:GetItem"))
        .expect("a GetItem statement");
    let keys = &get_item["Condition"]["ForAllValues:StringEquals"]["dynamodb:LeadingKeys"];
    assert_eq!(
        keys,
        &serde_json::json!([CONNECTION_CHECK_ID]),
        "{get_item}"
    );
}
