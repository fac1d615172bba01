//! Until orders are validated and stored, this handler acknowledges nothing:
//! every record is reported as a batch item failure, so SQS keeps (and
//! eventually dead-letters) each message instead of losing it.

use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent};
use lambda_runtime::{Error, LambdaEvent};

/// Report every record of the batch as failed.
pub async fn handle(
    init: &shared::Init,
    event: LambdaEvent<SqsEvent>,
) -> Result<SqsBatchResponse, Error> {
    let mut response = SqsBatchResponse::default();
    let mut missing_ids = 0usize;
    for record in event.payload.records {
        match record.message_id {
            Some(id) if !id.is_empty() => response.add_failure(id),
            _ => missing_ids += 1,
        }
    }
    if missing_ids > 0 {
        // A record SQS cannot name cannot be reported failed one by one; failing
        // the whole invocation makes SQS retry the entire batch instead.
        return Err(format!("{missing_ids} record(s) without a messageId").into());
    }
    tracing::warn!(
        failed = response.batch_item_failures.len(),
        workers = init.vcpus.workers,
        "order processing is not implemented yet: every record reported failed"
    );
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lambda_events::sqs::SqsMessage;

    fn init() -> shared::Init {
        shared::Init::decide(&[]).expect("defaults are valid")
    }

    fn event(ids: &[Option<&str>]) -> LambdaEvent<SqsEvent> {
        let mut payload = SqsEvent::default();
        payload.records = ids
            .iter()
            .map(|id| {
                let mut m = SqsMessage::default();
                m.message_id = id.map(str::to_owned);
                m
            })
            .collect();
        LambdaEvent::new(payload, lambda_runtime::Context::default())
    }

    #[tokio::test]
    async fn nothing_is_acknowledged() {
        let response = handle(&init(), event(&[Some("a"), Some("b")]))
            .await
            .expect("response");
        let ids: Vec<_> = response
            .batch_item_failures
            .iter()
            .map(|f| f.item_identifier.as_str())
            .collect();
        assert_eq!(ids, ["a", "b"]);
    }

    #[tokio::test]
    async fn a_record_without_id_fails_the_invocation() {
        assert!(handle(&init(), event(&[Some("a"), None])).await.is_err());
    }
}
