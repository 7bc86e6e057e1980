//! The GitHub Copilot CLI front-end: MCP Streamable HTTP over a private
//! Unix socket (`serve::mcp_http`), discovered through
//! `~/.copilot/ide/<uuid>.lock`. `protocol` and `tools` are plain Rust,
//! unit-tested without Neovim (over `core::editor::Editor`).

pub mod context;
pub mod protocol;
pub mod server;
pub mod tools;
