//! The HTTP contract, through the real router.

mod admin;
mod browser;
mod connections;
mod details;
mod jobs;
mod leasing;
mod operations;
mod queues;
mod tls;
