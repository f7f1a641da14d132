//! The HTTP contract, through the real router.

mod admin;
mod complete_and_pop;
mod document;
mod jobs;
mod leasing;
mod limits;
mod operations;
mod queues;
