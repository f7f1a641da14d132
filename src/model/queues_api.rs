//! HTTP request and response bodies (queues_api).
