//! The HTTP contract, through the real router.

mod admin;
mod auth;
mod document;
mod jobs;
mod leasing;
mod limits;
mod operations;
mod queues;
mod tenants;
