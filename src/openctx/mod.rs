//! The OpenCtx client. `spec` (the user's provider entries), `types`,
//! `selectors`, `merge` and `cache` are plain Rust; `transport` talks to
//! providers (HTTP, a Node host, MCP servers); `client` orchestrates them. The service that owns them inside Neovim is
//! `crate::nvim::openctx`.

pub mod cache;
pub mod client;
pub mod merge;
pub mod selectors;
pub mod spec;
pub mod transport;
pub mod types;
