//! The HTTP contract, through the real router.

mod admin;
mod auth;
mod browser;
mod connections;
mod details;
mod document;
mod jobs;
mod leasing;
mod limits;
mod metrics;
mod operations;
mod queues;
mod tenants;
mod tls;
