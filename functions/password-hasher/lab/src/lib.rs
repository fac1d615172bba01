//! What the password hasher's lab probes (`examples/`) share: the bcrypt
//! yardstick.

pub mod yardstick;
