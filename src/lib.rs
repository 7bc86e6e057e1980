//! amp.nvim-rs: the Amp editor server and an OpenCtx client inside Neovim.
//!
//! Three layers (docs/architecture.md):
//! - `core`: editor-agnostic Rust: the [`core::editor::Editor`] trait (what a
//!   protocol may ask of the editor), file text as `:edit`/`:w` see it, the
//!   one edit loop, the file watcher, the log;
//! - `serve`: the serving layer every agent front-end stands on (listeners,
//!   admission, the byte budget, discovery files, the agent registry, the
//!   WebSocket loop, MCP over HTTP);
//! - `amp`, `claude`, `ide_companion` (Gemini CLI and Qwen Code),
//!   `copilot` (with `mcp`), `codex`, `mcp_server`, `tap` and `openctx`:
//!   the protocols, which use `core` and `serve` and never each other;
//! - `nvim`: everything that touches Neovim (mlua, nvim-oxi, the main-thread
//!   bridge, the Lua helpers, the lifecycles) and the module's entry point.

pub mod amp;
mod big_alloc;
pub mod claude;
pub mod codex;
pub mod copilot;
pub mod core;
pub mod editor_tools;
pub mod ide_companion;
pub mod mcp;
pub mod mcp_server;
pub mod nvim;
pub mod openctx;
pub mod serve;
pub mod tap;
#[cfg(test)]
mod testutil;

/// Big allocations (an agent's messages and files) on pages of their own,
/// returned to the system when freed (see `big_alloc`).
#[global_allocator]
static ALLOCATOR: big_alloc::BigPages = big_alloc::BigPages;
