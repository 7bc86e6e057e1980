//! The serving layer every agent front-end stands on (plain tokio, no
//! Neovim): listeners and the one admission policy, handshake slots, the
//! in-flight byte budget, private discovery files, the registry of
//! connected agents, one WebSocket client loop and MCP over Streamable
//! HTTP. A front-end (`crate::amp`, `crate::claude`, `crate::ide_companion`, ...)
//! adds only its own codec, tools and discovery file; front-ends import
//! nothing from each other.

pub mod admission;
pub mod budget;
pub mod discovery;
pub mod endpoint;
pub mod front_end;
pub mod hub;
pub mod json_text;
pub mod listener;
pub mod mcp_http;
pub mod options;
pub mod registry;
pub mod tasks;
pub mod throttled;
pub mod token;
pub mod unix_peers;
pub mod vscode;
pub mod websocket;
pub mod write_deadline;
