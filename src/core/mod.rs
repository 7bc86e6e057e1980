//! Editor-agnostic code: no Neovim API, no mlua. Protocols (`amp`,
//! `openctx`) depend on this and nothing else; `nvim` implements
//! [`editor::Editor`] for Neovim.

pub mod edit;
pub mod filetext;
pub mod filewatch;
pub mod fsutil;
pub mod log;
pub mod text;
pub mod uri;
