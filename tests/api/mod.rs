//! The HTTP contract, through the real router.

mod admin;
mod jobs;
mod operations;
mod queues;
