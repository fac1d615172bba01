//! Until hashing lands, the handler answers every request with a clear
//! "unsupported operation" error and what cold start decided. It never echoes
//! the request: it may hold passwords.

use lambda_runtime::{Error, LambdaEvent};
use serde_json::Value;

/// Refuse every operation, reporting the pool this function would hash on.
pub async fn handle(init: &shared::Init, _event: LambdaEvent<Value>) -> Result<Value, Error> {
    Ok(serde_json::json!({
        "error": "unsupported operation: hashing is not implemented yet",
        "workers": init.vcpus.workers,
        "facts": init.facts(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn never_echoes_the_request() {
        let init = shared::Init::decide(&[("WORKER_COUNT", "2")]).expect("init");
        let event = LambdaEvent::new(
            serde_json::json!({"operation": "hash", "passwords": ["hunter2"]}),
            lambda_runtime::Context::default(),
        );
        let body = handle(&init, event).await.expect("answer").to_string();
        assert!(!body.contains("hunter2"), "{body}");
        assert!(body.contains("\"workers\":2"), "{body}");
    }
}
