//! What a front-end's transport (`websocket`, `mcp_http`) needs of it,
//! the same for every agent: whom it serves, the session's hub, and who
//! may connect. Each front-end keeps one, made with [`Endpoint::new`], so
//! its admission policy is built in one place for all of them.

use std::sync::Arc;

use super::admission::{Policy, TokenIn};
use super::hub::Hub;
use super::registry::Agent;

pub struct Endpoint {
    pub agent: Agent,
    pub hub: Arc<Hub>,
    pub policy: Policy,
}

impl Endpoint {
    /// `agent`'s endpoint on `hub`: its own `token` (sent as `token_in`
    /// says), the session's allowed origins (one policy for every
    /// front-end), and the `port` it listens on (`None`: a Unix socket).
    pub fn new(agent: Agent, hub: Arc<Hub>, token: String, token_in: TokenIn, port: Option<u16>) -> Self {
        let policy = Policy { token, token_in, allowed_origins: hub.options.allowed_origins.clone(), port };
        Self { agent, hub, policy }
    }

    /// The secret the front-end's discovery file gives its agent.
    pub fn token(&self) -> &str {
        &self.policy.token
    }
}
