//! HTTP contract tests (queues).
