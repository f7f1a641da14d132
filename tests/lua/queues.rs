//! Script semantics (queues).
