//! HTTP contract tests (jobs).
