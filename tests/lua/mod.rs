//! The script's semantics, driven through `core` with logical time.

mod available;
mod batch;
mod batches;
mod commands;
mod compact_history;
mod compat;
mod config;
mod deadlines;
mod events;
mod fields;
mod grouping;
mod jobs;
mod malformed;
mod memory;
mod namespaces;
mod partitions;
mod plumbing;
mod pop_after;
mod prefix;
mod push;
mod queues;
mod rates;
mod recurring;
mod search;
mod workers;
mod workflows;
