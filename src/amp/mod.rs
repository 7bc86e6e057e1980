//! The Amp editor protocol and server. Everything but `requests` is plain
//! Rust with no Neovim API; `requests` reaches the editor only through
//! [`crate::nvim::bridge`].

pub mod calls;
pub mod connection;
pub mod context;
pub mod handshake;
pub mod json_text;
pub mod lockfile;
pub mod options;
pub mod protocol;
pub mod requests;
pub mod server;
pub mod token;
