//! What the password hasher's lab probes (`examples/`) share: the bcrypt
//! yardstick, every candidate timed side by side, the figures made of those
//! times, and the function's own section of the report (`<binary>-section`).

pub mod figures;
pub mod section;
pub mod side_by_side;
pub mod yardstick;
