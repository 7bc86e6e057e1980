//! The Claude Code front-end (also OpenCode's TUI, which reads the same
//! lockfiles): MCP over a loopback WebSocket, discovered through
//! `~/.claude/ide/<port>.lock`. `protocol` and `tools` are plain Rust,
//! unit-tested without Neovim (over `core::editor::Editor`); `server` is
//! tokio.

pub mod protocol;
pub mod server;
pub mod tools;
