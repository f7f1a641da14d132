//! Script semantics (events).
