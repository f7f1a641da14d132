//! Script semantics (malformed).
