//! The Codex CLI front-end, for Codex started by `:Amp open codex`: its
//! `/ide` context over Codex's private IPC socket (`protocol`, unofficial,
//! behind `codex.ide_context`), and the review of every `apply_patch`
//! through Codex's `PreToolUse` hook (`hook`): the patch format (`patch`),
//! what Codex writes with it (`apply`), the patch of ours that writes what
//! the user accepted (`rewrite`), and the `-c` overrides that install the
//! hook for that run (`launch`). All plain Rust, unit-tested without Neovim
//! (over `core::editor::Editor`); `server` is tokio.

pub mod apply;
mod error;
pub mod hook;
pub mod launch;
pub mod patch;
pub mod protocol;
pub mod rewrite;
pub mod server;
