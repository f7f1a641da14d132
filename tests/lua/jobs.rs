//! Script semantics (jobs).
