//! The OpenCtx client. `types`, `selectors`, `merge` and `cache` are plain
//! Rust; `transport` talks to providers (HTTP, a Node host, MCP servers);
//! `client` orchestrates them; `service` owns the runtime and reaches the
//! editor only through [`crate::bridge`].

pub mod cache;
pub mod client;
pub mod merge;
pub mod selectors;
pub mod service;
pub mod transport;
pub mod types;
