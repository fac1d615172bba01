//! The JSON API, by direct invoke or through a Lambda Function URL.
//!
//! Direct invoke: the event is the request; a bad request is a function error
//! (`errorType` `InvalidRequest` or `DeadlineTooShort`). Function URL: the
//! request is the HTTP body; a bad request is HTTP 400 with `{"error": …}`.

use crate::config::Limits;
use crate::hashing::{self, Estimator};
use crate::request::{self, Invalid, Request};
use base64::Engine;
use lambda_runtime::{Diagnostic, LambdaEvent};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// Share of the time left that the estimated work may take.
const DEADLINE_SHARE: f64 = 0.8;

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The request is malformed or breaks a limit.
    Invalid(String),
    /// The estimated work would not finish before the deadline.
    DeadlineTooShort(String),
    /// The pool failed (a bug, not the caller's fault).
    Internal(String),
}

impl Refusal {
    /// The `errorType` of a direct invoke.
    pub fn error_type(&self) -> &'static str {
        match self {
            Refusal::Invalid(_) => "InvalidRequest",
            Refusal::DeadlineTooShort(_) => "DeadlineTooShort",
            Refusal::Internal(_) => "InternalError",
        }
    }

    /// The message (never containing a password).
    pub fn message(&self) -> &str {
        match self {
            Refusal::Invalid(m) | Refusal::DeadlineTooShort(m) | Refusal::Internal(m) => m,
        }
    }
}

impl From<Invalid> for Refusal {
    fn from(e: Invalid) -> Self {
        Refusal::Invalid(e.0)
    }
}

/// The handler's state, created once at cold start.
#[derive(Debug, Clone)]
pub struct Hasher {
    limits: Limits,
    estimator: Estimator,
    init: shared::Init,
}

impl Hasher {
    /// A hasher for the pool `init` built, with `limits`, timed by `estimator`.
    pub fn new(init: shared::Init, limits: Limits, estimator: Estimator) -> Self {
        Self {
            limits,
            estimator,
            init,
        }
    }

    /// The Lambda entry point.
    pub async fn handle(&self, event: LambdaEvent<Value>) -> Result<Value, Diagnostic> {
        let deadline = deadline_of(event.context.deadline);
        let payload = event.payload;
        if is_function_url(&payload) {
            return Ok(self.serve_url(&payload, deadline).await);
        }
        let body = serde_json::to_vec(&payload).map_err(|e| Refusal::Internal(e.to_string()));
        let answer = match body {
            Ok(body) => self.serve(&body, deadline).await,
            Err(refusal) => Err(refusal),
        };
        answer.map_err(|refusal| {
            tracing::warn!(
                error_type = refusal.error_type(),
                reason = refusal.message(),
                "request refused"
            );
            Diagnostic {
                error_type: refusal.error_type().to_owned(),
                error_message: refusal.message().to_owned(),
            }
        })
    }

    async fn serve_url(&self, event: &Value, deadline: Instant) -> Value {
        let method = event["requestContext"]["http"]["method"]
            .as_str()
            .unwrap_or_default();
        let answer = if method != "POST" {
            Err((405, Refusal::Invalid("use POST with a JSON body".into())))
        } else {
            match url_body(event) {
                Ok(body) => self.serve(&body, deadline).await.map_err(|r| {
                    let status = if matches!(r, Refusal::Internal(_)) {
                        500
                    } else {
                        400
                    };
                    (status, r)
                }),
                Err(refusal) => Err((400, refusal)),
            }
        };
        let (status, body) = match answer {
            Ok(body) => (200, body),
            Err((status, refusal)) => {
                tracing::warn!(
                    status,
                    error_type = refusal.error_type(),
                    reason = refusal.message(),
                    "request refused"
                );
                (
                    status,
                    json!({"error": refusal.message(), "errorType": refusal.error_type()}),
                )
            }
        };
        json!({
            "statusCode": status,
            "headers": {"content-type": "application/json"},
            "body": body.to_string(),
        })
    }

    /// Serve one request body.
    pub async fn serve(&self, body: &[u8], deadline: Instant) -> Result<Value, Refusal> {
        let started = Instant::now();
        let request = request::parse(body, &self.limits)?;
        let workers = self.init.vcpus.workers;
        let (hashes, cost) = match &request {
            Request::Hash { passwords, cost } => (passwords.len(), *cost),
            // Verify's cost is each hash's own, at most the limit.
            Request::Verify { items } => (
                items.len(),
                items
                    .iter()
                    .filter_map(|(_, h)| hashing::cost_of(h))
                    .filter(|c| *c <= self.limits.max_cost)
                    .max()
                    .unwrap_or(self.limits.min_cost),
            ),
        };
        let estimate = self.estimator.estimate(hashes, cost, workers);
        let left = deadline.saturating_duration_since(Instant::now());
        if estimate.as_secs_f64() > left.as_secs_f64() * DEADLINE_SHARE {
            return Err(Refusal::DeadlineTooShort(format!(
                "{hashes} hash(es) at cost {cost} on {workers} worker(s) need about {:.1} s; {:.1} s are left before the deadline: send smaller batches or a lower cost",
                estimate.as_secs_f64(),
                left.as_secs_f64()
            )));
        }
        let operation = match &request {
            Request::Hash { .. } => "hash",
            Request::Verify { .. } => "verify",
        };
        let max_cost = self.limits.max_cost;
        let (field, results) = hashing::on_pool(move || match request {
            Request::Hash { passwords, cost } => {
                hashing::hash_all(&passwords, cost).map(|h| ("hashes", json!(h)))
            }
            Request::Verify { items } => {
                let verdicts: Vec<Value> = hashing::verify_all(&items, max_cost)
                    .into_iter()
                    .map(|v| match v {
                        Ok(valid) => json!({"valid": valid}),
                        Err(e) => json!({"error": e.to_string()}),
                    })
                    .collect();
                Ok(("results", json!(verdicts)))
            }
        })
        .await
        .and_then(|r| r)
        .map_err(Refusal::Internal)?;
        let memory = shared::memory::snapshot();
        let duration_ms = started.elapsed().as_secs_f64() * 1000.0;
        tracing::info!(
            operation,
            items = hashes,
            cost,
            workers,
            duration_ms,
            "batch done"
        );
        Ok(json!({
            "operation": operation,
            field: results,
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

fn url_body(event: &Value) -> Result<Vec<u8>, Refusal> {
    let body = event
        .get("body")
        .and_then(Value::as_str)
        .ok_or_else(|| Refusal::Invalid("the request has no body".into()))?;
    if event.get("isBase64Encoded").and_then(Value::as_bool) == Some(true) {
        base64::engine::general_purpose::STANDARD
            .decode(body)
            .map_err(|_| Refusal::Invalid("the body is not valid base64".into()))
    } else {
        Ok(body.as_bytes().to_vec())
    }
}

/// The instant to finish by, from the invocation's deadline (Unix epoch ms);
/// 60 s from now when unknown (outside Lambda).
pub fn deadline_of(deadline_epoch_ms: u64) -> Instant {
    Instant::now()
        + shared::invocation::time_left(deadline_epoch_ms).unwrap_or(Duration::from_secs(60))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hasher() -> Hasher {
        let init = shared::Init::decide(&[("WORKER_COUNT", "2")]).expect("init");
        Hasher::new(
            init,
            Limits::default(),
            Estimator::from_sample(Duration::from_millis(1), 6),
        )
    }

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(30)
    }

    #[tokio::test]
    async fn hash_and_verify_round_trip() {
        let h = hasher();
        let answer = h
            .serve(
                br#"{"operation":"hash","cost":4,"passwords":["s3cret-one","s3cret-two"]}"#,
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
        let answer = h
            .serve(verify.to_string().as_bytes(), soon())
            .await
            .expect("verify");
        assert_eq!(
            answer["results"],
            json!([{"valid": true}, {"valid": false}, {"error": "malformed bcrypt hash"}])
        );
        assert!(!answer.to_string().contains("s3cret"), "{answer}");
    }

    #[tokio::test]
    async fn work_that_cannot_finish_is_refused_up_front() {
        // Calibrated at 1 ms per cost-6 hash: 1,000 hashes at cost 14 on two
        // workers need about 128 s.
        let body =
            json!({"operation": "hash", "cost": 14, "passwords": vec!["pw"; 1_000]}).to_string();
        let refusal = hasher()
            .serve(body.as_bytes(), Instant::now() + Duration::from_secs(20))
            .await
            .expect_err("too slow");
        assert_eq!(refusal.error_type(), "DeadlineTooShort");
        assert!(
            refusal.message().contains("1000 hash(es) at cost 14"),
            "{}",
            refusal.message()
        );
    }

    #[tokio::test]
    async fn function_url_requests_get_http_answers() {
        let h = hasher();
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
                &url_event(
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
            .serve_url(&url_event(r#"{"operation":"nope"}"#, false, "POST"), soon())
            .await;
        assert_eq!(bad["statusCode"], 400);
        assert!(
            bad["body"]
                .as_str()
                .unwrap_or_default()
                .contains("unknown operation")
        );
        let get = h.serve_url(&url_event("", false, "GET"), soon()).await;
        assert_eq!(get["statusCode"], 405);
        assert!(is_function_url(&url_event("", false, "POST")));
        assert!(!is_function_url(&json!({"operation": "hash"})));
    }

    #[tokio::test]
    async fn direct_invoke_errors_are_function_errors() {
        let event = LambdaEvent::new(
            json!({"operation": "hash", "cost": 32, "passwords": ["hunter2"]}),
            lambda_runtime::Context::default(),
        );
        let err = hasher().handle(event).await.expect_err("cost 32");
        assert_eq!(err.error_type, "InvalidRequest");
        assert!(err.error_message.contains("cost 32"));
        assert!(!err.error_message.contains("hunter2"));
    }
}
