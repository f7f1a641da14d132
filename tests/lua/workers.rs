//! Script semantics (workers).
