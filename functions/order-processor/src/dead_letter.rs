//! Where records that can never succeed go: a trait, so the handler is tested
//! without a network. `sqs.rs` is the real implementation (the queue at
//! `DEAD_LETTER_QUEUE_URL`); the tests use the in-memory one in
//! `order_processor_testkit::dead_letters`.
//!
//! A dead letter is the record as it came (body, message attributes) plus
//! three attributes saying why: [`attr::FAILURE_CLASS`] (the metric class,
//! e.g. `schema`), [`attr::FAILURE_REASON`] (the logged reason, at most
//! [`MAX_REASON_CHARS`]: never the body) and [`attr::SOURCE_MESSAGE_ID`]. From
//! a FIFO queue it keeps its message group, and its message id is the
//! deduplication id, so a send repeated after a lost answer is dropped by SQS
//! (within its 5-minute deduplication window). On a standard queue the repeat
//! arrives: the letter is the same, and a consumer drops it by
//! [`attr::SOURCE_MESSAGE_ID`].
//! A record that cannot be made into a dead letter ([`Unsendable`]) is
//! reported failed instead, and SQS's redrive policy moves it.

use crate::error::RecordFailure;
use crate::store::StoreError;
use aws_lambda_events::sqs::{SqsMessage, SqsMessageAttribute};
use std::collections::BTreeMap;
use std::future::Future;

/// The most message attributes SQS allows on one message.
pub const MAX_MESSAGE_ATTRIBUTES: usize = 10;
/// The longest failure reason a dead letter carries, in characters.
pub const MAX_REASON_CHARS: usize = 256;

/// Names of the attributes a dead letter gets (they replace attributes of the
/// same name the record had, e.g. from an earlier trip through the queue).
pub mod attr {
    /// The failure's class (`schema`, `invalid_json`, `conflict`, …).
    pub const FAILURE_CLASS: &str = "FailureClass";
    /// Why the record failed, as logged (never the body).
    pub const FAILURE_REASON: &str = "FailureReason";
    /// The message id the record had in the order queue: the same in every
    /// send of the record's letter, so a consumer can drop repeats by it.
    pub const SOURCE_MESSAGE_ID: &str = "SourceMessageId";
}

/// One message for the dead-letter queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    /// The record's body, unchanged.
    pub body: String,
    /// The record's message attributes and the three of [`attr`], by name.
    pub attributes: BTreeMap<String, SqsMessageAttribute>,
    /// From a FIFO queue: the group and the deduplication id.
    pub fifo: Option<Fifo>,
}

/// What a FIFO dead-letter queue needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fifo {
    /// The record's `MessageGroupId`: the group keeps its order there too.
    pub group_id: String,
    /// The record's message id.
    pub deduplication_id: String,
}

/// Why a record cannot be sent to the dead-letter queue.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unsendable {
    /// SQS refuses a message without a body.
    #[error("no body to send")]
    NoBody,
    /// The record's attributes and the failure's exceed SQS's limit.
    #[error("{0} message attributes with the failure's, SQS allows {MAX_MESSAGE_ATTRIBUTES}")]
    TooManyAttributes(usize),
    /// A FIFO record without a group or a message id.
    #[error("a FIFO record without MessageGroupId or messageId")]
    NoGroup,
}

impl DeadLetter {
    /// The dead letter for `record`, which failed with `failure`; `fifo` when
    /// the batch came from a FIFO queue.
    pub fn new(
        record: &SqsMessage,
        failure: &RecordFailure,
        fifo: bool,
    ) -> Result<Self, Unsendable> {
        let body = record
            .body
            .clone()
            .filter(|b| !b.is_empty())
            .ok_or(Unsendable::NoBody)?;
        let message_id = record.message_id.clone().unwrap_or_default();
        let mut attributes: BTreeMap<String, SqsMessageAttribute> = record
            .message_attributes
            .iter()
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect();
        for (name, value) in [
            (attr::FAILURE_CLASS, failure.class().to_owned()),
            (attr::FAILURE_REASON, reason(failure)),
            (attr::SOURCE_MESSAGE_ID, message_id.clone()),
        ] {
            attributes.insert(name.to_owned(), text(value));
        }
        if attributes.len() > MAX_MESSAGE_ATTRIBUTES {
            return Err(Unsendable::TooManyAttributes(attributes.len()));
        }
        let fifo = if fifo {
            let group_id = record
                .attributes
                .get("MessageGroupId")
                .filter(|g| !g.is_empty())
                .ok_or(Unsendable::NoGroup)?;
            if message_id.is_empty() {
                return Err(Unsendable::NoGroup);
            }
            Some(Fifo {
                group_id: group_id.clone(),
                deduplication_id: message_id,
            })
        } else {
            None
        };
        Ok(Self {
            body,
            attributes,
            fifo,
        })
    }

    /// The value of a string attribute, if the letter has it.
    pub fn attribute(&self, name: &str) -> Option<&str> {
        self.attributes.get(name)?.string_value.as_deref()
    }
}

/// A `String` message attribute.
fn text(value: String) -> SqsMessageAttribute {
    let mut attribute = SqsMessageAttribute::default();
    attribute.data_type = Some("String".to_owned());
    attribute.string_value = Some(value);
    attribute
}

/// The failure's reason, cut to [`MAX_REASON_CHARS`], with every character
/// SQS does not allow in a message (controls other than tab and line breaks,
/// U+FFFE, U+FFFF) replaced by U+FFFD.
fn reason(failure: &RecordFailure) -> String {
    failure
        .to_string()
        .chars()
        .take(MAX_REASON_CHARS)
        .map(|c| match c {
            '\t' | '\n' | '\r' => c,
            c if c < ' ' || c == '\u{FFFE}' || c == '\u{FFFF}' => '\u{FFFD}',
            c => c,
        })
        .collect()
}

/// Sends dead letters. A send that succeeded is in the queue: the handler
/// then acknowledges the record.
pub trait DeadLetters: Send + Sync {
    /// Send `letter` to the dead-letter queue.
    fn send(&self, letter: &DeadLetter) -> impl Future<Output = Result<(), StoreError>> + Send;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::order::Invalid;
    use std::collections::HashMap;

    fn record(attributes: usize, group: Option<&str>) -> SqsMessage {
        let mut record = SqsMessage::default();
        record.message_id = Some("m-1".into());
        record.body = Some("{not json".into());
        record.message_attributes = (0..attributes)
            .map(|i| (format!("a{i}"), text(format!("v{i}"))))
            .collect();
        if let Some(group) = group {
            record.attributes = HashMap::from([("MessageGroupId".into(), group.into())]);
        }
        record
    }

    fn invalid() -> RecordFailure {
        RecordFailure::Invalid(Invalid::Json("EOF while parsing".into()))
    }

    #[test]
    fn a_dead_letter_is_the_record_and_why() {
        let letter = DeadLetter::new(&record(2, None), &invalid(), false).expect("letter");
        assert_eq!(letter.body, "{not json");
        assert_eq!(letter.attribute("a0"), Some("v0"));
        assert_eq!(letter.attribute("a1"), Some("v1"));
        assert_eq!(letter.attribute(attr::FAILURE_CLASS), Some("invalid_json"));
        assert_eq!(
            letter.attribute(attr::FAILURE_REASON),
            Some("not JSON: EOF while parsing")
        );
        assert_eq!(letter.attribute(attr::SOURCE_MESSAGE_ID), Some("m-1"));
        assert_eq!(letter.fifo, None);
    }

    #[test]
    fn a_fifo_dead_letter_keeps_its_group_and_is_deduplicated_by_message_id() {
        let letter = DeadLetter::new(&record(0, Some("g-7")), &RecordFailure::Conflict, true)
            .expect("letter");
        assert_eq!(
            letter.fifo,
            Some(Fifo {
                group_id: "g-7".into(),
                deduplication_id: "m-1".into()
            })
        );
        assert_eq!(
            DeadLetter::new(&record(0, None), &RecordFailure::Conflict, true),
            Err(Unsendable::NoGroup)
        );
    }

    #[test]
    fn what_sqs_would_refuse_is_not_a_dead_letter() {
        // Seven attributes and three more: ten, the limit.
        assert!(DeadLetter::new(&record(7, None), &invalid(), false).is_ok());
        assert_eq!(
            DeadLetter::new(&record(8, None), &invalid(), false),
            Err(Unsendable::TooManyAttributes(11))
        );
        // An attribute of the same name is replaced, not added.
        let mut again = record(7, None);
        again
            .message_attributes
            .insert(attr::FAILURE_CLASS.into(), text("schema".into()));
        let letter = DeadLetter::new(&again, &invalid(), false).expect("ten attributes");
        assert_eq!(letter.attribute(attr::FAILURE_CLASS), Some("invalid_json"));
        let mut empty = record(0, None);
        empty.body = Some(String::new());
        assert_eq!(
            DeadLetter::new(&empty, &invalid(), false),
            Err(Unsendable::NoBody)
        );
        empty.body = None;
        assert_eq!(
            DeadLetter::new(&empty, &invalid(), false),
            Err(Unsendable::NoBody)
        );
    }

    #[test]
    fn the_reason_is_short_and_only_has_characters_sqs_allows() {
        let failure = RecordFailure::Invalid(Invalid::Schema(format!(
            "unknown field `a\u{0}b\u{FFFF}`{}",
            "x".repeat(1_000)
        )));
        let letter = DeadLetter::new(&record(0, None), &failure, false).expect("letter");
        let reason = letter.attribute(attr::FAILURE_REASON).expect("reason");
        assert_eq!(reason.chars().count(), MAX_REASON_CHARS);
        assert!(reason.starts_with("not a valid order: unknown field `a\u{FFFD}b\u{FFFD}`"));
    }
}
