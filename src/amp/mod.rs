//! The Amp editor protocol and server: plain Rust over `crate::core`. The
//! editor is reached only through the server's [`crate::core::editor::Editor`].

pub mod calls;
pub mod connection;
pub mod context;
pub mod handshake;
pub mod json_text;
pub mod lockfile;
pub mod options;
pub mod protocol;
pub mod requests;
pub mod reviewed_edit;
pub mod server;
pub mod token;
