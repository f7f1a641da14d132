//! HTTP contract tests (admin).
