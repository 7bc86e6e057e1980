//! The tap gateway provider (`agents.tap`): Neovim connects as an external
//! provider to a tap gateway (GitHub Copilot CLI sessions, `ws://localhost:9400`,
//! Provider Interface v2) and offers the editor's tools
//! (`crate::editor_tools`) to the Copilot session that works in this
//! editor's workspace. Unlike the other front-ends it listens on nothing:
//! it is a WebSocket client on the plugin's runtime.
//!
//! - `protocol`: the messages, their size limits and the choice of session
//!   (plain data, unit-tested);
//! - `machine`: the connection's states (auth, pairing, binding, calls,
//!   shutdown) as a pure state machine, unit-tested without a socket;
//! - `pairing`: the code the user types (`:Amp tap pair`) on its way to the
//!   connection waiting for it;
//! - `client`: the connection loop (connect, read within the limits, run
//!   tools, reconnect with backoff) and the front-end the session shows.

pub mod client;
pub mod machine;
pub mod pairing;
pub mod protocol;
