//! The HTTP contract, through the real router.

mod admin;
mod auth;
mod jobs;
mod leasing;
mod operations;
mod queues;
mod tenants;
