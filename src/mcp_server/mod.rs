//! Neovim as an MCP server for any agent (`agents.mcp`): the editor's tools
//! (`crate::editor_tools`) and the selection and open files as resources,
//! over MCP Streamable HTTP on a loopback port with a bearer token
//! (`serve::mcp_http`, the policy and limits of every front-end). Agents
//! reach it through the stdio entry point `lua/amp/mcp/stdio.lua` (run by
//! Neovim itself, `nvim -l`), which finds the Neovim serving the agent's
//! directory from the discovery files `<data>/amp/mcp/<port>.json`, or by
//! its URL.

pub mod protocol;
pub mod resources;
pub mod server;
