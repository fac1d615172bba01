//! The JSON API, by direct invoke or through a Lambda Function URL.
//!
//! Direct invoke: the event is the request; a refused request is a function
//! error (`errorType` `InvalidRequest`, `DeadlineTooShort` or, for a bug,
//! `InternalError`). Function URL: the request is the HTTP body; a refused one
//! is an HTTP 400 (405 for a method other than POST, 500 for a bug) with
//! `{"error": …, "errorType": …}`. See [`Error`].
//!
//! The runtime hands the payload over unparsed ([`RawValue`]); it is parsed
//! once, here ([`request::payload`]).
//!
//! Where the CPU work runs:
//! - on the tokio thread serving the invocation: parsing the payload,
//!   decoding a Function URL's body, parsing and validating the request
//!   ([`request`]), the time estimate and building the answer. All linear in
//!   the payload, which Lambda bounds at 6 MB, and cheap next to bcrypt;
//! - on the Rayon pool: bcrypt, handed over in rounds of one lockstep group
//!   per pool thread with [`hashing::on_pool`] and awaited through a oneshot
//!   channel, so the tokio thread never runs a hash.
//!
//! Rounds make the pool fair when requests share it (Lambda Managed
//! Instances): a batch hands over its next round only once the last one is
//! done, so a round of another request, queued meanwhile, runs before it. A
//! small request waits about one round, not behind a whole large batch (a
//! Rayon thread steals its neighbours' groups before it takes new work).
//! Alone, a batch runs the same groups in the same time.
//!
//! A batch whose estimated time ([`Estimator`](calibration::Estimator), see
//! [`Estimates`]), behind the work already accepted ([`Backlog`]), would not
//! fit before the invocation's [`Deadline`] (the shared rule) is refused
//! before any hashing.

use crate::backlog::Backlog;
use crate::calibration::{self, Estimates};
use crate::config::Config;
use crate::error::Error;
use crate::hashing;
use crate::request::{self, Request};
use crate::secret::wipe_json;
use lambda_runtime::{Diagnostic, LambdaEvent};
use serde_json::value::RawValue;
use serde_json::{Value, json};
use shared::invocation::Deadline;
use std::sync::Arc;
use std::time::Instant;
use tracing::Instrument;

/// Share of the time left that the estimated work may take.
const DEADLINE_SHARE: f64 = 0.8;

/// Serves invocations; created once at cold start.
#[derive(Debug, Clone)]
pub struct Handler {
    limits: Config,
    estimates: Estimates,
    init: shared::Init,
    /// The work accepted and not finished, shared by every clone.
    backlog: Arc<Backlog>,
}

impl Handler {
    /// A handler for the pool `init` built, with `limits`, timed by
    /// `estimates` (an [`Estimator`](calibration::Estimator) for a fixed one).
    pub fn new(init: shared::Init, limits: Config, estimates: impl Into<Estimates>) -> Self {
        Self {
            limits,
            estimates: estimates.into(),
            init,
            backlog: Arc::default(),
        }
    }

    /// The Lambda entry point: a direct invocation or a Function URL request.
    pub async fn handle(&self, event: LambdaEvent<Box<RawValue>>) -> Result<Value, Diagnostic> {
        let deadline = Deadline::from_context(&event.context);
        let answer = match request::payload(event.payload) {
            Ok(payload) if is_function_url(&payload) => {
                return Ok(self.serve_url(payload, deadline).await);
            }
            Ok(payload) => match request::from_value(payload, &self.limits) {
                Ok(request) => self.serve(request, deadline).await,
                Err(invalid) => Err(invalid.into()),
            },
            Err(invalid) => Err(invalid.into()),
        };
        answer.map_err(|error| {
            tracing::warn!(
                error_type = error.error_type(),
                reason = %error,
                "request refused"
            );
            error.into()
        })
    }

    /// A Function URL request: always an HTTP answer, never a function error.
    async fn serve_url(&self, event: Value, deadline: Deadline) -> Value {
        let method = event["requestContext"]["http"]["method"]
            .as_str()
            .unwrap_or_default();
        let answer = if method != "POST" {
            wipe_json(event);
            Err(Error::MethodNotAllowed)
        } else {
            match request::from_function_url(event, &self.limits) {
                Ok(request) => self.serve(request, deadline).await,
                Err(invalid) => Err(invalid.into()),
            }
        };
        let (status, body) = match answer {
            Ok(body) => (200, body),
            Err(error) => {
                let status = error.http_status();
                tracing::warn!(
                    status,
                    error_type = error.error_type(),
                    reason = %error,
                    "request refused"
                );
                (
                    status,
                    json!({"error": error.to_string(), "errorType": error.error_type()}),
                )
            }
        };
        json!({
            "statusCode": status,
            "headers": {"content-type": "application/json"},
            "body": body.to_string(),
        })
    }

    /// Serve one valid request: refuse it if its estimated time does not fit
    /// before `deadline`, else run it on the pool.
    pub async fn serve(&self, request: Request, deadline: Deadline) -> Result<Value, Error> {
        let started = Instant::now();
        let vcpus = &self.init.vcpus;
        let workers = vcpus.workers;
        let max_cost = self.limits.max_cost;
        let items = request.len();
        let (hashes, cost) = match &request {
            Request::Hash { passwords, cost } => (passwords.len(), *cost),
            // Only the pairs that reach bcrypt, each at its hash's own cost:
            // counted at the highest of them.
            Request::Verify { items } => items
                .iter()
                .filter_map(|pair| hashing::verify_cost(pair, max_cost).ok())
                .fold((0, self.limits.min_cost), |(n, max), c| (n + 1, max.max(c))),
        };
        let budget = || deadline.remaining().mul_f64(DEADLINE_SHARE);
        let mut estimate = self.estimates.current().estimate(hashes, cost, vcpus);
        if estimate > budget() && !self.estimates.calibrated() {
            // The cautious prior refuses it: judge again once calibrated.
            estimate = self.estimates.settled().await.estimate(hashes, cost, vcpus);
        }
        let _admitted =
            self.backlog
                .admit(estimate, budget())
                .map_err(|queued| Error::DeadlineTooShort {
                    hashes,
                    cost,
                    workers,
                    vcpus: calibration::parallelism(vcpus),
                    estimate,
                    queued,
                    left: deadline.remaining(),
                })?;
        let operation = match &request {
            Request::Hash { .. } => "hash",
            Request::Verify { .. } => "verify",
        };
        let round = hashing::group_size(items, workers) * workers;
        // The batch's span: counts and cost, never a password or a hash.
        let batch = tracing::info_span!("batch", operation, items, hashes, cost, workers, round);
        let mut results: Vec<Value> = Vec::with_capacity(items);
        let mut field = "hashes";
        for part in request.into_rounds(round) {
            let (name, part) = hashing::on_pool(move || match part {
                Request::Hash { passwords, cost } => hashing::hash_all(&passwords, cost)
                    .map(|h| ("hashes", h.into_iter().map(Value::from).collect())),
                Request::Verify { items } => {
                    let verdicts: Vec<Value> = hashing::verify_all(&items, max_cost)
                        .into_iter()
                        .map(|v| match v {
                            Ok(valid) => json!({"valid": valid}),
                            Err(e) => json!({"error": e.to_string()}),
                        })
                        .collect();
                    Ok(("results", verdicts))
                }
            })
            .instrument(batch.clone())
            .await??;
            field = name;
            results.extend::<Vec<Value>>(part);
        }
        drop(batch);
        let memory = shared::memory::snapshot();
        let duration_ms = started.elapsed().as_secs_f64() * 1000.0;
        tracing::info!(
            operation,
            items,
            hashes,
            cost,
            workers,
            duration_ms,
            "batch done"
        );
        Ok(json!({
            "operation": operation,
            field: Value::Array(results),
            "workers": workers,
            "detected_vcpus": self.init.vcpus,
            "duration_ms": duration_ms,
            "memory": {"rss_bytes": memory.rss_bytes, "peak_rss_bytes": memory.peak_rss_bytes},
        }))
    }
}

/// Whether the event is a Function URL (payload format 2.0) request.
pub fn is_function_url(event: &Value) -> bool {
    event
        .get("requestContext")
        .and_then(|c| c.get("http"))
        .is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibration::Estimator;
    use base64::Engine;
    use std::time::Duration;

    /// A handler at `memory_mb` on a 64-core host, `workers` threads if given,
    /// timed by `estimator`.
    fn handler_at(memory_mb: &str, workers: Option<&str>, estimator: Estimator) -> Handler {
        let mut init = shared::Init::decide(&[]).expect("init");
        init.vcpus = shared::vcpus::detect(&shared::vcpus::Inputs {
            worker_count: workers.map(str::to_owned),
            memory_mb: Some(memory_mb.to_owned()),
            cgroup: shared::vcpus::Cgroup::Absent,
            available: 64,
        })
        .expect("vcpus");
        Handler::new(init, Config::default(), estimator)
    }

    /// Two workers on two whole vCPUs.
    fn handler() -> Handler {
        let estimator = Estimator::from_sample(Duration::from_millis(1), 6);
        handler_at("3538", Some("2"), estimator)
    }

    fn event(payload: &Value) -> LambdaEvent<Box<RawValue>> {
        let raw = serde_json::value::to_raw_value(payload).expect("raw");
        LambdaEvent::new(raw, lambda_runtime::Context::default())
    }

    fn soon() -> Deadline {
        Deadline::at(Instant::now() + Duration::from_secs(30))
    }

    fn valid(request: Value) -> Request {
        request::from_value(request, &Config::default()).expect("a valid request")
    }

    #[tokio::test]
    async fn hash_and_verify_round_trip() {
        let h = handler();
        let answer = h
            .serve(
                valid(json!({"operation":"hash","cost":4,"passwords":["s3cret-one","s3cret-two"]})),
                soon(),
            )
            .await
            .expect("hash");
        assert_eq!(answer["workers"], 2);
        assert_eq!(answer["detected_vcpus"]["decided_by"], "override");
        assert!(answer["duration_ms"].as_f64().is_some());
        assert!(answer["memory"]["rss_bytes"].as_u64().unwrap_or(0) > 0);
        let hashes = answer["hashes"].as_array().expect("hashes");
        let verify = json!({"operation": "verify", "items": [
            {"password": "s3cret-one", "hash": hashes[0]},
            {"password": "s3cret-one", "hash": hashes[1]},
            {"password": "s3cret-two", "hash": "not a hash"},
        ]});
        let answer = h.serve(valid(verify), soon()).await.expect("verify");
        assert_eq!(
            answer["results"],
            json!([{"valid": true}, {"valid": false}, {"error": "malformed bcrypt hash"}])
        );
        assert!(!answer.to_string().contains("s3cret"), "{answer}");
    }

    #[tokio::test]
    async fn one_bad_pair_is_that_items_error_and_the_rest_go_on() {
        let h = handler();
        let hash = bcrypt::hash_with_result("pw", 4)
            .expect("hash")
            .format_for_version(bcrypt::Version::TwoB);
        let over_max = format!("$2b$15${}", &hash[7..]);
        for (bad, error) in [
            (
                json!({"password": "x".repeat(73), "hash": hash}),
                "password is 73 bytes; bcrypt uses at most 72 (longer passwords are refused, not truncated)",
            ),
            (
                json!({"password": "p\u{0}w", "hash": hash}),
                "password contains a NUL byte",
            ),
            (
                json!({"password": "pw", "hash": over_max}),
                "hash cost 15 is above the allowed maximum",
            ),
        ] {
            let mut items = vec![json!({"password": "pw", "hash": hash}); 84];
            items[13] = bad;
            let request = request::from_value(
                json!({"operation": "verify", "items": items}),
                &Config::default(),
            )
            .expect("one bad pair does not refuse the batch");
            let answer = h.serve(request, soon()).await.expect("verify");
            let results = answer["results"].as_array().expect("results");
            assert_eq!(results.len(), 84);
            assert_eq!(results[13], json!({ "error": error }));
            let valid = results.iter().filter(|r| **r == json!({"valid": true}));
            assert_eq!(valid.count(), 83);
        }
    }

    #[tokio::test]
    async fn work_that_cannot_finish_is_refused_up_front() {
        // Calibrated at 1 ms per cost-6 hash: 1,000 hashes at cost 14 on two
        // workers need about 128 s.
        let request =
            valid(json!({"operation": "hash", "cost": 14, "passwords": vec!["pw"; 1_000]}));
        let refusal = handler()
            .serve(
                request,
                Deadline::at(Instant::now() + Duration::from_secs(20)),
            )
            .await
            .expect_err("too slow");
        assert_eq!(refusal.error_type(), "DeadlineTooShort");
        assert!(
            refusal.to_string().contains("1000 hash(es) at cost 14"),
            "{refusal}"
        );
    }

    #[tokio::test]
    async fn only_a_batch_the_prior_refuses_is_calibrated_for_and_it_is_served() {
        // 60 hashes at cost 8 on two workers: about 1.9 s by the cautious
        // prior (more than 80% of 2 s), a fraction of that once calibrated
        // (0.8 s on a machine busy with two builds: with 1 s left, the
        // calibrated estimate too was refused there).
        let mut init = shared::Init::decide(&[]).expect("init");
        init.vcpus = shared::vcpus::detect(&shared::vcpus::Inputs {
            worker_count: None,
            memory_mb: Some("3538".into()),
            cgroup: shared::vcpus::Cgroup::Absent,
            available: 64,
        })
        .expect("vcpus");
        let handler = Handler::new(
            init,
            Config::default(),
            crate::calibration::Estimates::on_demand(),
        );
        let deadline = || Deadline::at(Instant::now() + Duration::from_secs(2));
        let small = valid(json!({"operation": "hash", "cost": 4, "passwords": ["pw"]}));
        handler.serve(small, deadline()).await.expect("small");
        assert!(
            !handler.estimates.calibrated(),
            "the prior accepts a small batch: no calibration"
        );
        let request = valid(json!({"operation": "hash", "cost": 8, "passwords": vec!["pw"; 60]}));
        let answer = handler
            .serve(request, deadline())
            .await
            .expect("fits once calibrated");
        assert_eq!(answer["hashes"].as_array().map(Vec::len), Some(60));
        assert!(handler.estimates.calibrated());
    }

    #[tokio::test]
    async fn a_batch_that_fits_whole_vcpus_but_not_the_real_share_is_refused() {
        // 200 hashes of 16 ms each on a whole vCPU (as timed, no gain from
        // lanes): 1.6 s on two whole vCPUs, about 3.2 s on the 1.02 vCPUs of
        // 1,800 MB (two workers too; 34 groups of up to 6, the last ones not
        // full). With 3 s left, 80% is 2.4 s: only the first fits.
        let timed = Estimator::from_sample(Duration::from_millis(16), 4);
        let request =
            || valid(json!({"operation": "hash", "cost": 4, "passwords": vec!["pw"; 200]}));
        let three_seconds = || Deadline::at(Instant::now() + Duration::from_secs(3));
        let whole = handler_at("3538", None, timed);
        let answer = whole.serve(request(), three_seconds()).await.expect("fits");
        assert_eq!(answer["hashes"].as_array().map(Vec::len), Some(200));
        let fraction = handler_at("1800", None, timed);
        assert_eq!(fraction.init.vcpus.workers, 2);
        let refusal = fraction
            .serve(request(), three_seconds())
            .await
            .expect_err("does not fit the share");
        assert_eq!(refusal.error_type(), "DeadlineTooShort");
        assert!(
            refusal.to_string().starts_with(
                "200 hash(es) at cost 4 on 2 worker(s) sharing 1.02 vCPU(s) need about 3.2 s"
            ),
            "{refusal}"
        );
    }

    #[tokio::test]
    async fn work_already_accepted_counts_before_a_request_is_accepted() {
        // A timing that makes each request long on paper (the hashes
        // themselves take milliseconds): 80% of the time left holds one
        // request and a half. The first is accepted; the second, arriving
        // while the first is in flight, would end too late behind it and is
        // refused naming the queued work; alone, the same request fits.
        let timed = Estimator::from_sample(Duration::from_secs(1), 4);
        let h = handler_at("3538", Some("2"), timed);
        let request = || valid(json!({"operation": "hash", "cost": 4, "passwords": vec!["pw"; 4]}));
        let estimate = timed.estimate(4, 4, &h.init.vcpus);
        let deadline = Deadline::at(Instant::now() + estimate.mul_f64(1.5 / DEADLINE_SHARE));
        let (first, second) =
            tokio::join!(h.serve(request(), deadline), h.serve(request(), deadline));
        assert_eq!(
            first.expect("the first fits")["hashes"]
                .as_array()
                .map(Vec::len),
            Some(4)
        );
        let refusal = second.expect_err("behind the first it does not fit");
        assert_eq!(refusal.error_type(), "DeadlineTooShort");
        assert!(
            refusal.to_string().contains("s of work already accepted"),
            "{refusal}"
        );
        let alone = h.serve(request(), deadline).await.expect("alone it fits");
        assert_eq!(alone["hashes"].as_array().map(Vec::len), Some(4));
    }

    #[tokio::test]
    async fn a_small_request_is_not_starved_behind_a_large_batch() {
        // A batch of many lockstep groups and a small one sent just after it
        // share the pool: the small one is served between two rounds of the
        // large one, not after all of it (Rayon threads steal a batch's
        // groups before they take new work).
        let h = handler_at(
            "3538",
            Some("2"),
            Estimator::from_sample(Duration::from_micros(1), 4),
        );
        // Light enough not to slow the other tests sharing the pool (the
        // calibration test times hashes on it): 6 rounds of cost 8.
        let large = valid(json!({"operation": "hash", "cost": 8, "passwords": vec!["pw"; 72]}));
        let small = valid(json!({"operation": "hash", "cost": 8, "passwords": ["pw", "pw"]}));
        let started = Instant::now();
        let finished = |answer: Result<Value, Error>| {
            answer.expect("served");
            started.elapsed()
        };
        let (large_took, small_took) =
            tokio::join!(async { finished(h.serve(large, soon()).await) }, async {
                finished(h.serve(small, soon()).await)
            });
        // A ratio of two times of one run, not a time: the small one is
        // served within the large one's first rounds (of 6), not at its end.
        assert!(
            small_took < large_took / 2,
            "the small request took {small_took:?}, the large batch {large_took:?}"
        );
    }

    #[tokio::test]
    async fn verify_estimates_only_the_pairs_that_reach_bcrypt() {
        // 1,000 pairs refused without hashing (malformed, over MAX_COST, a
        // long password) are no work, whatever their number.
        let items: Vec<Value> = (0..1_000)
            .map(|i| match i % 3 {
                0 => json!({"password": "pw", "hash": "not a hash"}),
                1 => json!({"password": "pw", "hash": format!("$2b$31${}", "a".repeat(53))}),
                _ => json!({"password": "x".repeat(73), "hash": format!("$2b$14${}", "a".repeat(53))}),
            })
            .collect();
        let almost_none = Deadline::at(Instant::now() + Duration::from_millis(100));
        let answer = handler()
            .serve(
                valid(json!({"operation": "verify", "items": items})),
                almost_none,
            )
            .await
            .expect("no hashing needed");
        assert_eq!(answer["results"].as_array().map(Vec::len), Some(1_000));
    }

    #[tokio::test]
    async fn function_url_requests_get_http_answers() {
        let h = handler();
        let url_event = |body: &str, base64: bool, method: &str| {
            let body = if base64 {
                base64::engine::general_purpose::STANDARD.encode(body)
            } else {
                body.to_owned()
            };
            json!({"version": "2.0", "rawPath": "/", "requestContext": {"http": {"method": method}}, "body": body, "isBase64Encoded": base64})
        };
        let ok = h
            .serve_url(
                url_event(
                    r#"{"operation":"hash","cost":4,"passwords":["pw-url"]}"#,
                    true,
                    "POST",
                ),
                soon(),
            )
            .await;
        assert_eq!(ok["statusCode"], 200);
        let body: Value = serde_json::from_str(ok["body"].as_str().expect("body")).expect("json");
        assert_eq!(body["hashes"].as_array().map(Vec::len), Some(1));
        let bad = h
            .serve_url(url_event(r#"{"operation":"nope"}"#, false, "POST"), soon())
            .await;
        assert_eq!(bad["statusCode"], 400);
        assert!(
            bad["body"]
                .as_str()
                .unwrap_or_default()
                .contains("unknown operation")
        );
        let get = h.serve_url(url_event("", false, "GET"), soon()).await;
        assert_eq!(get["statusCode"], 405);
        assert!(is_function_url(&url_event("", false, "POST")));
        assert!(!is_function_url(&json!({"operation": "hash"})));
    }

    #[tokio::test]
    async fn direct_invoke_errors_are_function_errors() {
        let h = handler();
        let err = h
            .handle(event(
                &json!({"operation": "hash", "cost": 32, "passwords": ["hunter2"]}),
            ))
            .await
            .expect_err("cost 32");
        assert_eq!(err.error_type, "InvalidRequest");
        assert!(err.error_message.contains("cost 32"));
        assert!(!err.error_message.contains("hunter2"));
        // JSON the runtime passes on unparsed, that the parser refuses.
        let lone_surrogate = RawValue::from_string(r#"{"hunter2": "\ud800"}"#.to_owned());
        let err = h
            .handle(LambdaEvent::new(
                lone_surrogate.expect("one JSON value"),
                lambda_runtime::Context::default(),
            ))
            .await
            .expect_err("not valid");
        assert_eq!(err.error_type, "InvalidRequest");
        assert_eq!(
            err.error_message,
            "request is not valid JSON (line 1, column 20)"
        );
    }

    #[tokio::test]
    async fn duplicate_keys_are_refused_by_both_entry_points() {
        let h = handler();
        let raw = |text: String| {
            let raw = RawValue::from_string(text).expect("one JSON value");
            LambdaEvent::new(raw, lambda_runtime::Context::default())
        };
        let leaks = |text: &str| text.contains("first-secret") || text.contains("second-secret");
        // Direct invoke: a function error.
        let err = h
            .handle(raw(r#"{"operation":"hash","cost":4,"passwords":["first-secret-1"],"passwords":["second-secret-2"]}"#.to_owned()))
            .await
            .expect_err("duplicate passwords");
        assert_eq!(err.error_type, "InvalidRequest");
        assert!(
            err.error_message
                .starts_with("duplicate field \"passwords\""),
            "{}",
            err.error_message
        );
        assert!(
            !leaks(&err.error_message) && !leaks(&format!("{err:?}")),
            "{err:?}"
        );
        // Function URL: an HTTP 400, whether the duplicate is in the body (a
        // verify pair's) or in the event around it.
        let body = r#"{"operation":"verify","items":[{"password":"first-secret-1","hash":"x","password":"second-secret-2"}]}"#;
        let url =
            json!({"version": "2.0", "requestContext": {"http": {"method": "POST"}}, "body": body});
        let answer = h.handle(event(&url)).await.expect("an HTTP answer");
        assert_eq!(answer["statusCode"], 400, "{answer}");
        let refusal: Value =
            serde_json::from_str(answer["body"].as_str().expect("body")).expect("json");
        assert_eq!(refusal["errorType"], "InvalidRequest");
        let message = refusal["error"].as_str().expect("error");
        assert!(
            message.starts_with("duplicate field \"password\""),
            "{message}"
        );
        assert!(!leaks(&answer.to_string()), "{answer}");
        let text = url.to_string();
        let twice = format!(r#"{},"body":{}}}"#, &text[..text.len() - 1], json!(body));
        let err = h.handle(raw(twice)).await.expect_err("duplicate body");
        assert_eq!(err.error_type, "InvalidRequest");
        assert!(
            err.error_message.starts_with("duplicate field \"body\""),
            "{}",
            err.error_message
        );
        assert!(!leaks(&err.error_message), "{}", err.error_message);
    }

    #[tokio::test]
    async fn function_url_events_are_told_apart_after_the_one_parse() {
        let url = json!({"version": "2.0", "requestContext": {"http": {"method": "POST"}},
                         "body": r#"{"operation":"hash","cost":4,"passwords":["pw"]}"#});
        let answer = handler().handle(event(&url)).await.expect("an HTTP answer");
        assert_eq!(answer["statusCode"], 200, "{answer}");
        let direct = json!({"operation": "hash", "cost": 4, "passwords": ["pw"]});
        let answer = handler().handle(event(&direct)).await.expect("hashes");
        assert_eq!(answer["hashes"].as_array().map(Vec::len), Some(1));
    }
}
