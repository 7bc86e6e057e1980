//! Which agents are connected, the same for every protocol: each admitted
//! client (a WebSocket connection, an MCP session with its event stream) is
//! registered under its agent while it lasts. The registry feeds the log,
//! the `User AmpClientConnected` / `AmpClientDisconnected` events (the
//! agent's name in their data; `lua/amp/connection.lua` turns them into
//! the notices and the statusline), each front-end's client limit, and the
//! end of a client's reviews when it goes.
//!
//! A front-end whose clients say who they are (Claude's serves Claude Code
//! and OpenCode) registers a client at once, so it counts against the
//! limit, and announces it once it knows its name ([`Registry::name`]): the
//! events and the statusline then name it as the user knows it.

use crate::core::sync::LockExt;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::json;

use crate::core::editor::Editor;
use crate::core::log;
use crate::core::review::Owner;

/// An agent as the user knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Agent {
    /// The key in `setup({ agents = { ... } })`, in events and in `status()`.
    pub id: &'static str,
    /// The name shown to the user ("Claude").
    pub name: &'static str,
}

/// The connected clients of one session.
#[derive(Default)]
pub struct Registry {
    clients: Mutex<HashMap<u64, Client>>,
}

/// One registered client: its front-end (`agent.id`) and the name it is
/// announced by; `announced` once `AmpClientConnected` fired for it.
#[derive(Debug, Clone, Copy)]
struct Client {
    agent: Agent,
    announced: bool,
}

/// Refused: `agent` has `max` clients connected already.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("too many {agent} clients (at most {max})")]
pub struct TooMany {
    pub agent: &'static str,
    pub max: usize,
}

impl Registry {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Client>> {
        self.clients.locked()
    }

    /// Registers `owner`, a client of `agent`, unless `max` clients of that
    /// front-end are connected, and announces it by `agent.name`; the
    /// connection is registered until the returned guard ends.
    pub fn connect(
        self: &Arc<Self>,
        agent: Agent,
        owner: Owner,
        max: usize,
        editor: Arc<dyn Editor>,
    ) -> Result<Connection, TooMany> {
        let connection = self.register(agent, owner, max, editor)?;
        self.name(owner.session, agent.name, connection.editor.as_ref());
        Ok(connection)
    }

    /// Registers `owner` as [`Registry::connect`] does, without announcing
    /// it: its front-end calls [`Registry::name`] once the client said who
    /// it is. Until then it counts (limits, `status()`) and fires no event.
    pub fn register(
        self: &Arc<Self>,
        agent: Agent,
        owner: Owner,
        max: usize,
        editor: Arc<dyn Editor>,
    ) -> Result<Connection, TooMany> {
        let of_agent = {
            let mut clients = self.lock();
            let of_agent = clients.values().filter(|c| c.agent.id == agent.id).count();
            if of_agent >= max {
                return Err(TooMany { agent: agent.name, max });
            }
            clients.insert(owner.session, Client { agent, announced: false });
            of_agent + 1
        };
        log::info(format!("{}: client {} connected ({of_agent} connected)", agent.id, owner.session));
        Ok(Connection { registry: self.clone(), editor, agent, owner, ended: false })
    }

    /// Announces the client `session` as `name` (`User AmpClientConnected`),
    /// once: false when it was announced already or is gone.
    pub fn name(&self, session: u64, name: &'static str, editor: &dyn Editor) -> bool {
        let (agent, of_agent, total) = {
            let mut clients = self.lock();
            let Some(client) = clients.get_mut(&session) else { return false };
            if client.announced {
                return false;
            }
            client.agent.name = name;
            client.announced = true;
            let agent = client.agent;
            (agent, clients.values().filter(|c| c.agent.id == agent.id).count(), clients.len())
        };
        editor.event(
            "AmpClientConnected",
            json!({ "id": session, "agent": agent.id, "name": name, "clients": of_agent, "total": total }),
        );
        true
    }

    /// Clients of `agent` connected now.
    pub fn count(&self, agent_id: &str) -> usize {
        self.lock().values().filter(|c| c.agent.id == agent_id).count()
    }

    /// Clients of every agent connected now.
    pub fn total(&self) -> usize {
        self.lock().len()
    }
}

/// One registered client; unregistered when [`Connection::end`] is called
/// or when dropped (its task ended or was dropped at shutdown).
pub struct Connection {
    registry: Arc<Registry>,
    editor: Arc<dyn Editor>,
    pub agent: Agent,
    /// Its reviews are this owner's.
    pub owner: Owner,
    ended: bool,
}

impl Connection {
    /// The client is gone, for `reason` (logged, and in the event's data).
    pub fn end(mut self, reason: &str) {
        self.finish(reason);
    }

    fn finish(&mut self, reason: &str) {
        if std::mem::replace(&mut self.ended, true) {
            return;
        }
        let (removed, of_agent, total) = {
            let mut clients = self.registry.lock();
            let removed = clients.remove(&self.owner.session);
            (removed, clients.values().filter(|c| c.agent.id == self.agent.id).count(), clients.len())
        };
        // The name it was announced by; one never announced was never
        // connected as far as the user knows: no event.
        let agent = removed.map_or(self.agent, |c| c.agent);
        log::info(format!(
            "{}: client {} disconnected: {} ({of_agent} connected)",
            agent.id,
            self.owner.session,
            log::untrusted(reason)
        ));
        if !removed.is_some_and(|c| c.announced) {
            return;
        }
        self.editor.event(
            "AmpClientDisconnected",
            json!({
                "id": self.owner.session, "agent": agent.id, "name": agent.name,
                "clients": of_agent, "total": total, "reason": reason,
            }),
        );
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.finish("gone");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::fake_editor::{Call, FakeEditor};
    use serde_json::Value;

    const CLAUDE: Agent = Agent { id: "claude", name: "Claude" };
    const GEMINI: Agent = Agent { id: "gemini", name: "Gemini" };

    #[test]
    fn each_agent_has_its_own_limit_and_every_client_its_events() {
        let editor = Arc::new(FakeEditor::new(false));
        let registry = Arc::new(Registry::default());
        let a = registry.connect(CLAUDE, Owner::new("Claude"), 2, editor.clone()).unwrap();
        let b = registry.connect(CLAUDE, Owner::new("Claude"), 2, editor.clone()).unwrap();
        assert_eq!(
            registry.connect(CLAUDE, Owner::new("Claude"), 2, editor.clone()).err(),
            Some(TooMany { agent: "Claude", max: 2 })
        );
        let g = registry.connect(GEMINI, Owner::new("Gemini"), 2, editor.clone()).unwrap();
        assert_ne!(a.owner.session, b.owner.session);
        assert_eq!(a.owner.agent, "Claude");
        assert_eq!((registry.count("claude"), registry.count("gemini"), registry.total()), (2, 1, 3));
        a.end("closed by the client");
        drop(b);
        assert_eq!((registry.count("claude"), registry.total()), (0, 1));
        drop(g);
        let events: Vec<_> = editor
            .calls()
            .into_iter()
            .filter_map(|c| match c {
                Call::Event(name, data) => Some((name, data)),
                _ => None,
            })
            .collect();
        let names: Vec<_> = events.iter().map(|(n, d)| (*n, d["agent"].as_str().unwrap().to_owned())).collect();
        assert_eq!(
            names,
            [
                ("AmpClientConnected", "claude".to_owned()),
                ("AmpClientConnected", "claude".to_owned()),
                ("AmpClientConnected", "gemini".to_owned()),
                ("AmpClientDisconnected", "claude".to_owned()),
                ("AmpClientDisconnected", "claude".to_owned()),
                ("AmpClientDisconnected", "gemini".to_owned()),
            ]
        );
        assert_eq!(events[1].1["clients"], 2);
        assert_eq!(events[3].1["reason"], "closed by the client");
        assert_eq!(events[4].1["reason"], "gone");
        assert_eq!(events[5].1["total"], 0);
    }

    #[test]
    fn a_client_named_later_is_announced_by_its_name_once() {
        let editor = Arc::new(FakeEditor::new(false));
        let registry = Arc::new(Registry::default());
        let events = |editor: &FakeEditor| -> Vec<(&'static str, Value)> {
            editor
                .calls()
                .into_iter()
                .filter_map(|c| match c {
                    Call::Event(name, data) => Some((name, data)),
                    _ => None,
                })
                .collect()
        };
        let a = registry.register(CLAUDE, Owner::new("Claude"), 2, editor.clone()).unwrap();
        // Registered: it counts, against the limit too, before it is named.
        assert_eq!(registry.count("claude"), 1);
        assert!(events(&editor).is_empty());
        let b = registry.register(CLAUDE, Owner::new("Claude"), 2, editor.clone()).unwrap();
        assert!(registry.register(CLAUDE, Owner::new("Claude"), 2, editor.clone()).is_err());
        assert!(registry.name(a.owner.session, "OpenCode", editor.as_ref()));
        assert!(!registry.name(a.owner.session, "Claude", editor.as_ref()), "named once");
        let seen = events(&editor);
        assert_eq!(seen.len(), 1);
        assert_eq!(
            (seen[0].0, &seen[0].1["agent"], &seen[0].1["name"]),
            ("AmpClientConnected", &json!("claude"), &json!("OpenCode"))
        );
        // A client that goes before it is named was never announced: no event.
        drop(b);
        a.end("closed");
        let seen = events(&editor);
        assert_eq!(seen.len(), 2, "{seen:?}");
        assert_eq!((seen[1].0, &seen[1].1["name"]), ("AmpClientDisconnected", &json!("OpenCode")));
        assert!(!registry.name(7, "Claude", editor.as_ref()), "gone");
        assert_eq!(registry.total(), 0);
    }
}
