//! amp.nvim-rs: the Amp editor server and an OpenCtx client inside Neovim.
//!
//! Three layers (docs/architecture.md):
//! - `core`: editor-agnostic Rust: the [`core::editor::Editor`] trait (what a
//!   protocol may ask of the editor), file text as `:edit`/`:w` see it, the
//!   one edit loop, the file watcher, the log;
//! - `amp`, `claude` (with `mcp`) and `openctx`: the protocols, which use
//!   `core` and nothing else (`claude` also reuses the Amp server's security
//!   pieces and shared state);
//! - `nvim`: everything that touches Neovim (mlua, nvim-oxi, the main-thread
//!   bridge, the Lua helpers, the lifecycles) and the module's entry point.

pub mod amp;
pub mod claude;
pub mod core;
pub mod gemini;
pub mod mcp;
pub mod nvim;
pub mod openctx;
#[cfg(test)]
mod testutil;
