//! Script semantics (recurring).
