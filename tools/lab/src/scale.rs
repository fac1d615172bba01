//! How big a lab run is.

/// How big a lab run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// Every allocator, optimised builds, minutes.
    Full,
    /// The default allocator, debug builds, seconds: for the test suite.
    Quick,
}
