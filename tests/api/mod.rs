//! The HTTP contract, through the real router.

mod operations;
