//! The Amp front-end: the Amp CLI's WebSocket protocol (both dialects),
//! its lockfile and its requests, over the serving layer (`crate::serve`)
//! and the editor core (`crate::core`).

pub mod calls;
pub mod context;
pub mod lockfile;
pub mod protocol;
pub mod requests;
pub mod reviewed_edit;
pub mod server;
