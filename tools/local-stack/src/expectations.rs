//! What the answer to a sample event must hold, declared beside it in
//! `events/<function>/<event>.expect.json`, and the one check of an answer
//! against it ([`check`]): `sam local invoke`, the end-to-end suite and
//! `cargo xtask run` all check with it, so a new function's samples need no
//! code.
//!
//! Every field is optional and, absent, not checked; only a function error is
//! refused unless `function_error` names it.
//!
//! | field | the answer must |
//! |---|---|
//! | `state_machine` | (what the sample is, not a check) the logical id of a state machine of the template: the sample is the input of an execution of it, not an event of its function's. Only `cargo xtask run` sends it, through Step Functions; whatever invokes samples directly skips it. The fields below then apply to the execution's output; a failed execution answers `{"errorType": <its error>, "errorMessage": <its cause>}`. Not with `invalid_records` nor `http_status` |
//! | `function_error` | be this function error (`errorType`); `null`, the default: none at all |
//! | `http_status` | be an HTTP answer (Function URL) with this `statusCode`; the fields below then read the JSON of its `body` |
//! | `invalid_records` | (SQS batch) report in `batchItemFailures` exactly the records [`failed_records`] derives from these `messageId`s |
//! | `hashes` | hold this many bcrypt hashes (`$2b$`) in `hashes` |
//! | `verdicts` | have exactly this `results` array |
//! | `report` | scan every stored order (`all_stored_orders`) or read only its day's (`day_only`); its groups' counts add up to `rows.matched` |
//! | `answer_includes` | include this JSON: an object's keys at least, an array element by element, anything else equal |
//! | `no_password_in_output` | `true`: show no password of the request, nor the invocation's output ([`Context::output`]) |

use serde::Deserialize;
use serde_json::{Map, Value};
use std::path::Path;

/// One `<event>.expect.json`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expectation {
    /// The logical id of the state machine whose execution input the sample
    /// is: not an event of its function's (see the module's table).
    pub state_machine: Option<String>,
    /// The `errorType` the function must fail with; `None`: no function error.
    pub function_error: Option<String>,
    /// The HTTP status of a Function URL answer; the other checks read its body.
    pub http_status: Option<u16>,
    /// The `messageId`s of the records the function must reject for good
    /// (invalid): see [`failed_records`] for what that means for the answer.
    pub invalid_records: Option<Vec<String>>,
    /// How many bcrypt hashes `hashes` holds.
    pub hashes: Option<usize>,
    /// The whole `results` array.
    pub verdicts: Option<Vec<Value>>,
    /// Which stored orders a report reads.
    pub report: Option<Report>,
    /// JSON the answer includes ([`includes`]).
    pub answer_includes: Option<Map<String, Value>>,
    /// No password of the request in the answer or the output.
    #[serde(default)]
    pub no_password_in_output: bool,
}

/// Which stored orders a report reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Report {
    /// Every order stored ([`Context::stored_orders`]): `rows.scanned` is their number.
    AllStoredOrders,
    /// Only its day's, through the day index: every row read matched, and no
    /// more than were stored.
    DayOnly,
}

/// What the run knows besides the event and its answer.
#[derive(Debug, Clone, Copy, Default)]
pub struct Context<'a> {
    /// Orders stored before the invocation (what a report covers).
    pub stored_orders: usize,
    /// Whether the function reaches its dead-letter queue, the template's
    /// standard one (it then acknowledges the invalid records it moved there;
    /// a record of a FIFO group cannot go there, see [`failed_records`]).
    pub dead_letter_queue: bool,
    /// What the invocation printed (its logs), where known.
    pub output: &'a str,
}

/// The expectation in `text`, read from `path` (named in errors).
pub fn parse(path: &Path, text: &str) -> Result<Expectation, String> {
    let expect: Expectation =
        serde_json::from_str(text).map_err(|e| format!("{}: {e}", path.display()))?;
    if let Some(machine) = &expect.state_machine
        && (expect.invalid_records.is_some() || expect.http_status.is_some())
    {
        return Err(format!(
            "{}: the input of state machine {machine} is neither an SQS batch \
             (invalid_records) nor a Function URL request (http_status)",
            path.display()
        ));
    }
    Ok(expect)
}

/// `Err(what is wrong)` unless `answer`, the function's answer to `event`,
/// holds everything `expect` declares.
pub fn check(
    expect: &Expectation,
    event: &Value,
    answer: &Value,
    context: &Context,
) -> Result<(), String> {
    match (&expect.function_error, answer.get("errorType")) {
        (None, Some(kind)) => return Err(format!("a function error {kind}: {answer}")),
        (Some(want), None) => return Err(format!("no function error, expected {want}: {answer}")),
        (Some(want), Some(kind)) if *kind != *want => {
            return Err(format!("function error {kind}, expected {want}: {answer}"));
        }
        _ => {}
    }
    let body = answer_json(expect, answer)?;
    if expect.function_error.is_none()
        && let Some(kind) = body.get("errorType")
    {
        return Err(format!("a function error {kind} in the HTTP body: {body}"));
    }
    if let Some(invalid) = &expect.invalid_records {
        batch_failures(invalid, event, &body, context.dead_letter_queue)?;
    }
    if let Some(count) = expect.hashes {
        let hashes = body["hashes"]
            .as_array()
            .ok_or_else(|| format!("no hashes: {body}"))?;
        let bcrypt = |h: &Value| h.as_str().is_some_and(|h| h.starts_with("$2b$"));
        if hashes.len() != count || !hashes.iter().all(bcrypt) {
            return Err(format!("not {count} bcrypt hashes: {body}"));
        }
    }
    if let Some(verdicts) = &expect.verdicts
        && body["results"].as_array() != Some(verdicts)
    {
        return Err(format!(
            "results are not {}: {body}",
            Value::from(verdicts.clone())
        ));
    }
    if let Some(report) = expect.report {
        check_report(report, &body, context.stored_orders)?;
    }
    if let Some(part) = &expect.answer_includes {
        includes(&body, &Value::Object(part.clone()), "answer")
            .map_err(|e| format!("{e}: {body}"))?;
    }
    if expect.no_password_in_output {
        no_password_in(event, &answer.to_string())?;
        no_password_in(event, context.output).map_err(|e| format!("{e} (its logs)"))?;
    }
    Ok(())
}

/// The JSON the checks read: the `body` of an HTTP answer when `expect` has
/// `http_status` (which it must have), else `answer` itself.
pub fn answer_json(expect: &Expectation, answer: &Value) -> Result<Value, String> {
    let Some(status) = expect.http_status else {
        return Ok(answer.clone());
    };
    if answer["statusCode"] != status {
        return Err(format!("HTTP status is not {status}: {answer}"));
    }
    answer["body"]
        .as_str()
        .and_then(|body| serde_json::from_str(body).ok())
        .ok_or_else(|| format!("the HTTP body is not JSON: {answer}"))
}

/// The `messageId`s an SQS batch answer reports failed when `invalid` are
/// the records the function rejects. With a dead-letter queue (`true`: the
/// template's, a standard queue), it moves them there and acknowledges them;
/// it reports failed those it cannot move (without a queue, or a record of a
/// FIFO message group, which a standard queue refuses) and, on a FIFO queue,
/// every later record of their group (`MessageGroupId`), so that the group
/// keeps its order. In the event's order.
pub fn failed_records(invalid: &[String], event: &Value, dead_letter_queue: bool) -> Vec<String> {
    let mut held_groups = Vec::new();
    let mut failed = Vec::new();
    for record in records(event) {
        let id = record["messageId"].as_str().unwrap_or_default();
        let group = record["attributes"]["MessageGroupId"].as_str();
        let moved = dead_letter_queue && group.is_none();
        let rejected = invalid.iter().any(|i| i == id) && !moved;
        if rejected || group.is_some_and(|g| held_groups.contains(&g)) {
            failed.push(id.to_owned());
            held_groups.extend(group);
        }
    }
    failed
}

/// The records of an SQS batch the function processes to the end (neither
/// rejected as `invalid` nor [`failed_records`]): the ones whose work is done.
pub fn processed_records<'a>(
    invalid: &[String],
    event: &'a Value,
    dead_letter_queue: bool,
) -> Vec<&'a Value> {
    let failed = failed_records(invalid, event, dead_letter_queue);
    records(event)
        .filter(|record| {
            let id = record["messageId"].as_str().unwrap_or_default();
            !invalid.iter().chain(&failed).any(|i| i == id)
        })
        .collect()
}

/// `batchItemFailures` of `answer` is [`failed_records`], in any order.
fn batch_failures(
    invalid: &[String],
    event: &Value,
    answer: &Value,
    dead_letter_queue: bool,
) -> Result<(), String> {
    let ids: Vec<&str> = records(event)
        .filter_map(|r| r["messageId"].as_str())
        .collect();
    if let Some(unknown) = invalid.iter().find(|i| !ids.contains(&i.as_str())) {
        return Err(format!(
            "invalid_records names {unknown}, no record of the event"
        ));
    }
    let failures = answer["batchItemFailures"]
        .as_array()
        .ok_or_else(|| format!("no batchItemFailures: {answer}"))?;
    let mut got = failures
        .iter()
        .map(|f| {
            f["itemIdentifier"]
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| format!("a failure without itemIdentifier: {answer}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut expected = failed_records(invalid, event, dead_letter_queue);
    got.sort();
    expected.sort();
    if got != expected {
        return Err(format!(
            "batchItemFailures {got:?}, expected {expected:?}{}: {answer}",
            if dead_letter_queue {
                " (invalid records go to the dead-letter queue)"
            } else {
                ""
            }
        ));
    }
    Ok(())
}

/// A report reads what `report` says of the `stored` orders, and its groups
/// add up to its matched rows.
fn check_report(report: Report, answer: &Value, stored: usize) -> Result<(), String> {
    let rows = |key: &str| {
        answer["rows"][key]
            .as_u64()
            .ok_or_else(|| format!("no rows.{key}: {answer}"))
    };
    let (scanned, matched) = (rows("scanned")?, rows("matched")?);
    let stored = stored as u64;
    match report {
        Report::AllStoredOrders if scanned != stored => {
            return Err(format!(
                "scanned {scanned} orders, not the {stored} stored: {answer}"
            ));
        }
        Report::DayOnly if scanned > stored || matched != scanned => {
            return Err(format!(
                "read {scanned} orders of the {stored} stored, {matched} of its day: more than its day's: {answer}"
            ));
        }
        _ => {}
    }
    let groups = answer["groups"]
        .as_array()
        .ok_or_else(|| format!("no groups: {answer}"))?;
    let mut counted = 0;
    for group in groups {
        counted += group["count"]
            .as_u64()
            .ok_or_else(|| format!("a group without count: {answer}"))?;
    }
    if counted != matched {
        return Err(format!(
            "the groups count {counted} orders, not the {matched} matched: {answer}"
        ));
    }
    Ok(())
}

/// `Err(where)` unless `actual` includes `part`: an object has at least its
/// keys, each including its value; an array has as many elements, each
/// including its own; anything else is equal. `at` names `actual`.
pub fn includes(actual: &Value, part: &Value, at: &str) -> Result<(), String> {
    match (actual, part) {
        (Value::Object(actual), Value::Object(part)) => {
            for (key, value) in part {
                let at = format!("{at}.{key}");
                let inner = actual.get(key).ok_or_else(|| format!("no {at}"))?;
                includes(inner, value, &at)?;
            }
            Ok(())
        }
        (Value::Array(actual), Value::Array(part)) if actual.len() == part.len() => actual
            .iter()
            .zip(part)
            .enumerate()
            .try_for_each(|(i, (a, p))| includes(a, p, &format!("{at}[{i}]"))),
        _ if actual == part => Ok(()),
        _ => Err(format!("{at} is {actual}, expected {part}")),
    }
}

/// `Err` if a password of the hasher request `event` (direct, or the JSON
/// `body` of a Function URL event) appears in `output`.
pub fn no_password_in(event: &Value, output: &str) -> Result<(), String> {
    let body = event["body"]
        .as_str()
        .and_then(|b| serde_json::from_str::<Value>(b).ok());
    let request = body.as_ref().unwrap_or(event);
    let passwords = request["passwords"].as_array().into_iter().flatten().chain(
        request["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|i| &i["password"]),
    );
    if passwords
        .filter_map(Value::as_str)
        .any(|p| output.contains(p))
    {
        Err("a password of the request is in the output".to_owned())
    } else {
        Ok(())
    }
}

/// The records of an SQS event.
fn records(event: &Value) -> impl Iterator<Item = &Value> {
    event["Records"].as_array().into_iter().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn expect(json: Value) -> Expectation {
        parse(Path::new("x.expect.json"), &json.to_string()).expect("an expectation")
    }

    fn check_with(expect: &Expectation, event: &Value, answer: Value) -> Result<(), String> {
        check(expect, event, &answer, &Context::default())
    }

    #[test]
    fn unknown_or_mistyped_fields_are_refused_naming_the_file() {
        let path = Path::new("events/f/e.expect.json");
        let unknown = parse(path, r#"{"hash": 2}"#).expect_err("unknown field");
        assert!(
            unknown.starts_with("events/f/e.expect.json: unknown field `hash`"),
            "{unknown}"
        );
        assert!(parse(path, r#"{"report": "everything"}"#).is_err());
        assert!(parse(path, r#"{"answer_includes": [1]}"#).is_err());
        assert!(parse(path, "{").is_err());
        assert_eq!(parse(path, "{}"), Ok(Expectation::default()));
    }

    #[test]
    fn a_state_machine_input_is_neither_a_batch_nor_a_url_request() {
        let path = Path::new("events/f/run.expect.json");
        let input = parse(
            path,
            r#"{"state_machine": "M", "report": "all_stored_orders"}"#,
        )
        .expect("an execution's input");
        assert_eq!(input.state_machine.as_deref(), Some("M"));
        assert_eq!(input.report, Some(Report::AllStoredOrders));
        for mixed in [
            r#"{"state_machine": "M", "invalid_records": []}"#,
            r#"{"state_machine": "M", "http_status": 200}"#,
        ] {
            let refused = parse(path, mixed).expect_err("not an execution's input");
            assert!(
                refused.starts_with("events/f/run.expect.json: the input of state machine M"),
                "{refused}"
            );
        }
    }

    #[test]
    fn a_function_error_is_refused_unless_expected() {
        let none = expect(json!({}));
        let error = json!({"errorType": "InvalidRequest", "errorMessage": "no"});
        assert!(check_with(&none, &json!({}), json!({"ok": 1})).is_ok());
        assert!(check_with(&none, &error, error.clone()).is_err());
        let refused = expect(json!({"function_error": "InvalidRequest"}));
        assert!(check_with(&refused, &json!({}), error.clone()).is_ok());
        assert!(check_with(&refused, &json!({}), json!({"ok": 1})).is_err());
        let other = expect(json!({"function_error": "DeadlineTooShort"}));
        assert!(check_with(&other, &json!({}), error).is_err());
        assert_eq!(expect(json!({"function_error": null})), none);
    }

    fn batch(records: &[(&str, Option<&str>)]) -> Value {
        let records: Vec<Value> = records
            .iter()
            .map(|(id, group)| match group {
                Some(g) => {
                    json!({"messageId": id, "body": "{}", "attributes": {"MessageGroupId": g}})
                }
                None => json!({"messageId": id, "body": "{}", "attributes": {}}),
            })
            .collect();
        json!({ "Records": records })
    }

    fn failures(ids: &[&str]) -> Value {
        let failures: Vec<Value> = ids.iter().map(|id| json!({"itemIdentifier": id})).collect();
        json!({ "batchItemFailures": failures })
    }

    #[test]
    fn exactly_the_invalid_records_fail_and_in_a_fifo_group_all_after_them() {
        let standard = batch(&[("a", None), ("b", None), ("c", None)]);
        let b_invalid = expect(json!({"invalid_records": ["b"]}));
        assert!(check_with(&b_invalid, &standard, failures(&["b"])).is_ok());
        assert!(check_with(&b_invalid, &standard, failures(&[])).is_err());
        assert!(check_with(&b_invalid, &standard, failures(&["b", "c"])).is_err());
        assert!(check_with(&b_invalid, &standard, failures(&["a"])).is_err());
        assert!(check_with(&b_invalid, &standard, json!({})).is_err());
        let none = expect(json!({"invalid_records": []}));
        assert!(check_with(&none, &standard, failures(&[])).is_ok());
        assert!(check_with(&none, &standard, failures(&["a"])).is_err());
        let typo = expect(json!({"invalid_records": ["z"]}));
        let err = check_with(&typo, &standard, failures(&["z"])).expect_err("no record z");
        assert!(err.contains("no record of the event"), "{err}");

        // g1: a, b (invalid), c (held); g2: d goes on.
        let fifo = batch(&[
            ("a", Some("g1")),
            ("b", Some("g1")),
            ("d", Some("g2")),
            ("c", Some("g1")),
        ]);
        assert_eq!(failed_records(&["b".into()], &fifo, false), ["b", "c"]);
        assert!(check_with(&b_invalid, &fifo, failures(&["b", "c"])).is_ok());
        assert!(check_with(&b_invalid, &fifo, failures(&["c", "b"])).is_ok());
        assert!(check_with(&b_invalid, &fifo, failures(&["b"])).is_err());
        let processed: Vec<&Value> = processed_records(&["b".into()], &fifo, false);
        let ids: Vec<&Value> = processed.iter().map(|r| &r["messageId"]).collect();
        assert_eq!(ids, [&json!("a"), &json!("d")]);
    }

    #[test]
    fn with_a_dead_letter_queue_invalid_records_are_acknowledged_and_hold_no_group() {
        let standard = batch(&[("a", None), ("b", None), ("c", None)]);
        let b_invalid = expect(json!({"invalid_records": ["b"]}));
        let context = Context {
            dead_letter_queue: true,
            ..Context::default()
        };
        let check = |event: &Value, answer: Value| check(&b_invalid, event, &answer, &context);
        assert!(check(&standard, failures(&[])).is_ok());
        assert!(check(&standard, failures(&["b"])).is_err());
        let processed = processed_records(&["b".into()], &standard, true);
        let ids: Vec<&Value> = processed.iter().map(|r| &r["messageId"]).collect();
        assert_eq!(ids, [&json!("a"), &json!("c")]);
        // The template's dead-letter queue is standard: it refuses a record
        // of a FIFO group, which then holds its group.
        let fifo = batch(&[("a", Some("g1")), ("b", Some("g1")), ("c", Some("g1"))]);
        assert!(check(&fifo, failures(&["b", "c"])).is_ok());
        assert!(check(&fifo, failures(&[])).is_err());
    }

    #[test]
    fn hashes_are_counted_and_must_be_bcrypt() {
        let two = expect(json!({"hashes": 2}));
        let event = json!({"operation": "hash", "passwords": ["p1", "p2"]});
        assert!(check_with(&two, &event, json!({"hashes": ["$2b$10$x", "$2b$10$y"]})).is_ok());
        assert!(check_with(&two, &event, json!({"hashes": ["$2b$10$x"]})).is_err());
        assert!(check_with(&two, &event, json!({"hashes": ["plain", "$2b$10$y"]})).is_err());
        assert!(check_with(&two, &event, json!({"results": []})).is_err());
    }

    #[test]
    fn a_function_url_answer_is_checked_by_its_status_then_its_body() {
        let url = expect(json!({"http_status": 200, "hashes": 1}));
        let event = json!({"requestContext": {}, "body": "{\"passwords\": [\"p\"]}"});
        let wrapped = |status, body: Value| json!({"statusCode": status, "body": body.to_string()});
        assert!(check_with(&url, &event, wrapped(200, json!({"hashes": ["$2b$1"]}))).is_ok());
        assert!(check_with(&url, &event, wrapped(400, json!({"hashes": ["$2b$1"]}))).is_err());
        assert!(check_with(&url, &event, wrapped(200, json!({"hashes": []}))).is_err());
        let not_json = json!({"statusCode": 200, "body": "hashes"});
        assert!(check_with(&url, &event, not_json).is_err());
        let error_inside = wrapped(200, json!({"errorType": "X", "hashes": ["$2b$1"]}));
        assert!(check_with(&url, &event, error_inside).is_err());
    }

    #[test]
    fn verdicts_are_the_whole_results_array() {
        let verify =
            expect(json!({"verdicts": [{"valid": true}, {"error": "malformed bcrypt hash"}]}));
        let event = json!({"operation": "verify", "items": [{}, {}]});
        let answer =
            json!({"results": [{"valid": true}, {"error": "malformed bcrypt hash"}], "workers": 2});
        assert!(check_with(&verify, &event, answer).is_ok());
        assert!(check_with(&verify, &event, json!({"results": [{"valid": true}]})).is_err());
        let wrong = json!({"results": [{"valid": false}, {"error": "malformed bcrypt hash"}]});
        assert!(check_with(&verify, &event, wrong).is_err());
    }

    #[test]
    fn reports_cover_the_stored_orders_a_day_only_its_own_and_groups_add_up() {
        let answer = json!({"rows": {"scanned": 4, "matched": 4}, "groups": [{"count": 3}, {"count": 1}], "report_id": "daily/2026-11-20"});
        let event = json!({"operation": "daily_report", "day": "2026-11-20"});
        let daily = expect(
            json!({"report": "day_only", "answer_includes": {"report_id": "daily/2026-11-20"}}),
        );
        let stored = |n| Context {
            stored_orders: n,
            ..Context::default()
        };
        assert!(check(&daily, &event, &answer, &stored(6)).is_ok());
        assert!(check(&daily, &event, &answer, &stored(3)).is_err());
        let mut scanned_all = answer.clone();
        scanned_all["rows"]["scanned"] = json!(6);
        assert!(check(&daily, &event, &scanned_all, &stored(6)).is_err());
        let other_day = expect(
            json!({"report": "day_only", "answer_includes": {"report_id": "daily/2026-11-21"}}),
        );
        assert!(check(&other_day, &event, &answer, &stored(6)).is_err());
        let mut short = answer.clone();
        short["groups"] = json!([{"count": 3}]);
        assert!(check(&daily, &event, &short, &stored(6)).is_err());

        let all = expect(json!({"report": "all_stored_orders"}));
        assert!(check(&all, &event, &scanned_all, &stored(6)).is_ok());
        assert!(check(&all, &event, &answer, &stored(6)).is_err());
        assert!(check(&all, &event, &json!({"groups": []}), &stored(0)).is_err());
    }

    #[test]
    fn answer_includes_is_a_subset_check() {
        let segment =
            expect(json!({"answer_includes": {"segment": {"segment": 0, "total_segments": 1}}}));
        let event = json!({"segment": 0, "total_segments": 1});
        let answer =
            json!({"segment": {"segment": 0, "total_segments": 1, "extra": true}, "groups": []});
        assert!(check_with(&segment, &event, answer).is_ok());
        let other = json!({"segment": {"segment": 1, "total_segments": 1}});
        let err = check_with(&segment, &event, other).expect_err("another segment");
        assert!(
            err.starts_with("answer.segment.segment is 1, expected 0"),
            "{err}"
        );
        assert!(check_with(&segment, &event, json!({})).is_err());
        assert!(includes(&json!([{"a": 1, "b": 2}]), &json!([{"a": 1}]), "x").is_ok());
        assert!(includes(&json!([{"a": 1}, {}]), &json!([{"a": 1}]), "x").is_err());
        assert!(includes(&json!(1), &json!("1"), "x").is_err());
    }

    #[test]
    fn a_password_in_the_answer_or_output_is_found_in_either_event_shape() {
        let direct = json!({"operation": "verify", "items": [{"password": "hunter2"}]});
        assert!(no_password_in(&direct, "log: hunter2").is_err());
        assert!(no_password_in(&direct, "log: nothing").is_ok());
        let url = json!({"body": json!({"passwords": ["swordfish"]}).to_string()});
        assert!(no_password_in(&url, "{\"swordfish\"}").is_err());

        let secret = expect(json!({"no_password_in_output": true}));
        assert!(check_with(&secret, &direct, json!({"results": []})).is_ok());
        assert!(check_with(&secret, &direct, json!({"echo": "hunter2"})).is_err());
        let logged = Context {
            output: "DEBUG request hunter2",
            ..Context::default()
        };
        assert!(check(&secret, &direct, &json!({}), &logged).is_err());
        assert!(check(&expect(json!({})), &direct, &json!({}), &logged).is_ok());
    }
}
