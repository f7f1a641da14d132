//! Script semantics (config).
