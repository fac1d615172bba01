//! What the lab's probes (`examples/`) and the pre-warm fault test share: the
//! first-invocation trial of the Arrow worker and the bcrypt yardstick.

pub mod trial;
pub mod yardstick;
