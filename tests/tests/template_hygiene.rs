//! `template.yaml` grants no more than it needs and passes checkov. (cfn-lint
//! runs in the suite as `sam validate --lint`.)

use local_stack::{checkov, least_privilege, workspace_root};

#[test]
fn no_iam_grant_is_wider_than_needed() {
    let template = least_privilege::transformed(&workspace_root().join("template.yaml"))
        .expect("the SAM transform of template.yaml");
    let roles = template["Resources"]
        .as_object()
        .expect("resources")
        .values()
        .filter(|r| r["Type"] == "AWS::IAM::Role")
        .count();
    assert!(
        roles >= 5,
        "three functions, the schedule and the state machine have roles: {roles}"
    );
    let findings = least_privilege::findings(&template);
    assert!(
        findings.is_empty(),
        "wider than needed:\n{}",
        findings.join("\n")
    );
}

#[test]
fn checkov_finds_nothing_unexplained() {
    let failed = checkov::failed_checks(&workspace_root().join("template.yaml")).expect("checkov");
    assert!(failed.is_empty(), "checkov:\n{}", failed.join("\n"));
}
