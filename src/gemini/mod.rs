//! The Gemini CLI front-end: MCP Streamable HTTP on a loopback port
//! (`serve::mcp_http`), discovered through
//! `$TMPDIR/gemini/ide/gemini-ide-server-<pid>-<port>.json`. `protocol` and
//! `tools` are plain Rust, unit-tested without Neovim (over
//! `core::editor::Editor`).

pub mod context;
pub mod protocol;
pub mod server;
pub mod tools;
