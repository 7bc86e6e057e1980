//! The IDE-companion front-end: the wire format of Gemini CLI's IDE
//! companion spec, which Qwen Code forked (MCP Streamable HTTP on a
//! loopback port through `serve::mcp_http`, a bearer token, `openDiff` /
//! `closeDiff`, `ide/contextUpdate`, `ide/diffAccepted` / `ide/diffRejected`
//! on the session's event stream). One implementation, started once per
//! [`flavor::Flavor`]: what differs between the agents is only who they
//! are, where their discovery file goes and what it holds, and the
//! variables of their terminals ([`gemini`], [`qwen`]).
//!
//! `protocol`, `tools` and the flavors are plain Rust, unit-tested without
//! Neovim (over `core::editor::Editor`).

pub mod context;
pub mod flavor;
pub mod gemini;
pub mod protocol;
pub mod qwen;
pub mod server;
pub mod tools;
