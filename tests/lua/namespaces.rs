//! Script semantics (namespaces).
