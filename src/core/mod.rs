//! Editor-agnostic code: no Neovim API, no mlua. Protocols (`amp`,
//! `openctx`) depend on this and nothing else; `nvim` implements
//! [`editor::Editor`] for Neovim.

pub mod buffer;
pub mod checked_file;
pub mod edit;
pub mod edit_gate;
pub mod edit_plan;
pub mod editor;
#[cfg(test)]
pub mod fake_editor;
pub mod file_error;
pub mod file_ops;
pub mod filetext;
pub mod filewatch;
pub mod fsutil;
pub mod log;
pub mod new_file;
pub mod patch;
pub mod published;
pub mod rebase;
pub mod review;
pub mod reviewed_write;
pub mod selection;
pub mod sliced_apply;
pub mod sync;
pub mod text;
pub mod uri;
