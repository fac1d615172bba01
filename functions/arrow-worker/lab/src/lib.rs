//! What the Arrow worker's lab probes (`examples/`) share: the orders of the
//! lab's tables, the first-invocation trial behind the arena pre-warm's
//! measure, and the function's own section of the report (`<binary>-section`:
//! the Step Functions fan-out and the daily report).

pub mod fan_out;
pub mod orders;
pub mod section;
pub mod trial;
