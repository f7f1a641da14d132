//! HTTP request and response bodies (jobs_api).
