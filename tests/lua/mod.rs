//! The script's semantics, driven through `core` with logical time.

mod plumbing;
