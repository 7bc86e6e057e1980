//! The Claude Code front-end (also OpenCode's TUI, which reads the same
//! lockfiles): MCP over a loopback WebSocket, discovered through
//! `~/.claude/ide/<port>.lock`. `protocol` and `tools` are plain Rust,
//! unit-tested without Neovim; `server` is tokio; `editor_side` is the one
//! file that reaches Neovim (through `bridge::on_main`).

pub mod editor_side;
pub mod protocol;
pub mod server;
pub mod tools;
