//! The HTTP contract, through the real router.

mod admin;
mod auth;
mod batches;
mod browser;
mod callbacks;
mod complete_and_pop;
mod connections;
mod cron;
mod deadlines;
mod details;
mod document;
mod features;
mod jobs;
mod leasing;
mod limits;
mod memory;
mod metrics;
mod operations;
mod partitions;
mod queues;
mod search;
mod tenants;
pub(crate) mod tls;
