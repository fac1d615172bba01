//! Until analytics land, the handler answers with what cold start decided.

use lambda_runtime::{Error, LambdaEvent};
use serde_json::Value;

/// Answer with the cold-start facts and the memory figures.
pub async fn handle(init: &shared::Init, _event: LambdaEvent<Value>) -> Result<Value, Error> {
    Ok(serde_json::json!({
        "error": "unsupported operation: analytics are not implemented yet",
        "facts": init.facts(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn answers_with_the_facts() {
        let init =
            shared::Init::decide(&[("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "3538")]).expect("init");
        let event = LambdaEvent::new(Value::Null, lambda_runtime::Context::default());
        let body = handle(&init, event).await.expect("answer");
        assert_eq!(body["facts"]["vcpus"]["lambda_share"], 2);
        assert!(body["facts"]["memory"]["rss_bytes"].as_u64().unwrap_or(0) > 0);
    }
}
