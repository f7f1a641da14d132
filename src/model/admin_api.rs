//! HTTP request and response bodies (admin_api).
