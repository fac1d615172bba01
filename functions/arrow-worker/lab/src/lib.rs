//! What the Arrow worker's lab probes (`examples/`) share: the orders of the
//! lab's tables, and the first-invocation trial behind the arena pre-warm's
//! measure.

pub mod orders;
pub mod trial;
