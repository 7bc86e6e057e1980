//! The Gemini CLI front-end: MCP Streamable HTTP on a loopback port,
//! discovered through `$TMPDIR/gemini/ide/gemini-ide-server-<pid>-<port>.json`.
//! `protocol`, `tools` and `sessions` are plain Rust, unit-tested without
//! Neovim (over `core::editor::Editor`); `http`, `sse` and `server` are
//! hyper on tokio.

pub mod discovery;
pub mod http;
pub mod protocol;
pub mod server;
pub mod sessions;
pub mod sse;
pub mod tools;
