//! What each function's answer to a sample event must hold under `sam local invoke`.

use serde_json::Value;

/// What the answer of `function` to `event` must hold. The checks need no
/// function's code: failures name records of the event, hashes match the
/// request, reports cover the `stored_orders` orders the order processor
/// stored before (the end-to-end suite checks the values themselves).
pub fn check(
    function: &str,
    event: &Value,
    answer: &Value,
    stored_orders: usize,
) -> Result<(), String> {
    let fail = |what: &str| Err(format!("{what}: {answer}"));
    if answer.get("errorType").is_some() {
        return fail("a function error");
    }
    match function {
        "order-processor" => {
            let ids: Vec<&Value> = records(event).map(|r| &r["messageId"]).collect();
            let Some(failures) = answer["batchItemFailures"].as_array() else {
                return fail("no batchItemFailures");
            };
            if failures.len() >= ids.len() {
                return fail("every record failed");
            }
            if !failures.iter().all(|f| ids.contains(&&f["itemIdentifier"])) {
                return fail("a failure names no record of the event");
            }
        }
        "password-hasher" => {
            // A Function URL event gets an HTTP answer wrapping the same JSON.
            let inner = |v: &Value| serde_json::from_str::<Value>(v.as_str().unwrap_or_default());
            let (request, answer) = if event.get("requestContext").is_some() {
                if answer["statusCode"] != 200 {
                    return fail("HTTP status is not 200");
                }
                match (inner(&event["body"]), inner(&answer["body"])) {
                    (Ok(request), Ok(answer)) => (request, answer),
                    _ => return fail("the HTTP body is not JSON"),
                }
            } else {
                (event.clone(), answer.clone())
            };
            match request["operation"].as_str() {
                Some("hash") => {
                    let asked = request["passwords"].as_array().map_or(0, Vec::len);
                    let hashes = answer["hashes"].as_array().map_or(&[][..], Vec::as_slice);
                    let bcrypt = |h: &Value| h.as_str().is_some_and(|h| h.starts_with("$2b$"));
                    if hashes.len() != asked || !hashes.iter().all(bcrypt) {
                        return fail("not one bcrypt hash per password");
                    }
                }
                Some("verify") => {
                    let asked = request["items"].as_array().map_or(0, Vec::len);
                    let results = answer["results"].as_array().map_or(&[][..], Vec::as_slice);
                    let verdict = |r: &Value| r["valid"].is_boolean() || r["error"].is_string();
                    if results.len() != asked || !results.iter().all(verdict) {
                        return fail("not one verdict per item");
                    }
                }
                other => return Err(format!("no expectation for operation {other:?}")),
            }
        }
        "arrow-worker" => {
            // A daily report reads only its day (the day index): every item
            // read is one of the day's orders. Anything else scans them all.
            let daily = event["operation"] == "daily_report";
            let scanned = answer["rows"]["scanned"].as_u64();
            if daily
                && (scanned > Some(stored_orders as u64)
                    || answer["rows"]["matched"].as_u64() != scanned)
            {
                return fail("read more than the day's orders");
            }
            if !daily && scanned != Some(stored_orders as u64) {
                return fail(&format!("did not scan the {stored_orders} stored orders"));
            }
            let counted: u64 = answer["groups"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|g| g["count"].as_u64())
                .sum();
            if answer["rows"]["matched"] != counted {
                return fail("the groups do not add up to the matched rows");
            }
            if let Some(day) = event["day"].as_str()
                && answer["report_id"] != format!("daily/{day}")
            {
                return fail(&format!("not stored as daily/{day}"));
            }
            if event.get("segment").is_some() && answer["segment"]["segment"] != event["segment"] {
                return fail("another segment answered");
            }
        }
        other => return Err(format!("no expectations for {other}")),
    }
    Ok(())
}

/// The records of an SQS event.
fn records(event: &Value) -> impl Iterator<Item = &Value> {
    event["Records"].as_array().into_iter().flatten()
}

/// `Err` if a password of the hasher request `event` (direct or Function URL)
/// appears in `output`.
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sqs_event() -> Value {
        json!({"Records": [{"messageId": "a"}, {"messageId": "b"}]})
    }

    #[test]
    fn order_answers_must_name_only_records_of_the_event() {
        let check = |answer| check("order-processor", &sqs_event(), &answer, 0);
        assert!(check(json!({"batchItemFailures": []})).is_ok());
        assert!(check(json!({"batchItemFailures": [{"itemIdentifier": "b"}]})).is_ok());
        assert!(check(json!({"batchItemFailures": [{"itemIdentifier": "c"}]})).is_err());
        assert!(
            check(json!({"batchItemFailures": [{"itemIdentifier": "a"}, {"itemIdentifier": "b"}]}))
                .is_err()
        );
        assert!(check(json!({"errorType": "Runtime.ExitError"})).is_err());
        assert!(check(json!({})).is_err());
    }

    #[test]
    fn hasher_answers_need_one_result_per_request_item() {
        let hash = json!({"operation": "hash", "passwords": ["p1", "p2"]});
        let check = |event: &Value, answer| check("password-hasher", event, &answer, 0);
        assert!(check(&hash, json!({"hashes": ["$2b$10$x", "$2b$10$y"]})).is_ok());
        assert!(check(&hash, json!({"hashes": ["$2b$10$x"]})).is_err());
        assert!(check(&hash, json!({"hashes": ["plain", "$2b$10$y"]})).is_err());
        let url = json!({"requestContext": {}, "body": hash.to_string()});
        let wrapped = |status, body: Value| json!({"statusCode": status, "body": body.to_string()});
        assert!(check(&url, wrapped(200, json!({"hashes": ["$2b$1", "$2b$2"]}))).is_ok());
        assert!(check(&url, wrapped(400, json!({"hashes": ["$2b$1", "$2b$2"]}))).is_err());
        let verify = json!({"operation": "verify", "items": [{}, {}]});
        assert!(
            check(
                &verify,
                json!({"results": [{"valid": true}, {"error": "malformed"}]})
            )
            .is_ok()
        );
        assert!(check(&verify, json!({"results": [{"valid": true}]})).is_err());
    }

    #[test]
    fn reports_must_cover_the_stored_orders_and_a_day_only_its_own() {
        let answer = json!({"rows": {"scanned": 4, "matched": 4}, "groups": [{"count": 3}, {"count": 1}], "report_id": "daily/2026-11-20"});
        let daily = json!({"operation": "daily_report", "day": "2026-11-20"});
        assert!(check("arrow-worker", &daily, &answer, 6).is_ok());
        assert!(check("arrow-worker", &daily, &answer, 3).is_err());
        let mut scanned_all = answer.clone();
        scanned_all["rows"]["scanned"] = json!(6);
        assert!(check("arrow-worker", &daily, &scanned_all, 6).is_err());
        let other_day = json!({"operation": "daily_report", "day": "2026-11-21"});
        assert!(check("arrow-worker", &other_day, &answer, 6).is_err());
        let mut short = answer.clone();
        short["groups"] = json!([{"count": 3}]);
        assert!(check("arrow-worker", &daily, &short, 6).is_err());
        let aggregate = json!({"operation": "aggregate", "query": {"group_by": "day"}});
        let mut all = scanned_all.clone();
        all["rows"]["matched"] = json!(4);
        assert!(check("arrow-worker", &aggregate, &all, 6).is_ok());
        assert!(check("arrow-worker", &aggregate, &answer, 6).is_err());
    }

    #[test]
    fn a_password_in_the_output_is_found_in_either_event_shape() {
        let direct = json!({"operation": "verify", "items": [{"password": "hunter2"}]});
        assert!(no_password_in(&direct, "log: hunter2").is_err());
        assert!(no_password_in(&direct, "log: nothing").is_ok());
        let url = json!({"body": json!({"passwords": ["swordfish"]}).to_string()});
        assert!(no_password_in(&url, "{\"swordfish\"}").is_err());
    }
}
