//! One provider's conversation with the gateway, as a state machine with no
//! socket: events in (connected, a message, the user's pairing code, a
//! call done, disconnected), actions out (send this, ask the user for the
//! code, run this tool, cancel that one, close). The connection loop
//! (`client`) carries the actions out.
//!
//! States (the interface's): AwaitAuth → AwaitPairing (no token yet: the
//! user types the code Copilot shows) → AwaitSessions → Unbound (no session
//! of this workspace yet) ↔ AwaitAck → Bound. The token issued at pairing
//! and the last `reconnectToken` live here, in memory only.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use super::protocol::{self, CopilotSession, In, MAX_CALLS, RECONNECT_TOKEN_TTL};
use crate::core::review::ReviewEnd;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    Disconnected,
    AwaitAuth,
    /// The gateway shows a code in Copilot; the user types it here.
    AwaitPairing,
    /// `auth` or `auth.confirm` sent; `sessions` comes on success.
    AwaitSessions,
    Unbound,
    AwaitAck {
        session: String,
    },
    Bound {
        session: String,
    },
}

/// A pairing code typed while no pairing waits for one (`state`: the
/// connection's, as `:Amp tap` shows it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no pairing is waiting for a code ({state})")]
pub struct NotPairing {
    pub state: String,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Send(Value),
    /// Tell the user to type the code Copilot shows (`:Amp tap pair`).
    AskCode,
    /// One line for the user.
    Tell {
        error: bool,
        message: String,
    },
    Log(String),
    /// Bound to a Copilot session: the tap is connected for the user.
    Bound {
        session: String,
        label: String,
        provider_id: String,
    },
    /// No longer bound: every call is cancelled (its reviews closed), the
    /// tap is disconnected for the user.
    Unbound {
        why: String,
    },
    Run {
        id: String,
        tool: String,
        args: Map<String, Value>,
    },
    /// Stop call `id`; its reviews close for `why`.
    Cancel {
        id: String,
        why: ReviewEnd,
    },
    /// Close the connection; reconnect after the backoff unless `give_up`.
    Close {
        reason: String,
        give_up: bool,
    },
}

pub struct Machine {
    pub phase: Phase,
    /// Issued by the gateway when pairing succeeded; valid for the
    /// gateway's lifetime, kept in memory only.
    token: Option<String>,
    /// This connection authenticated with `token` (not by pairing).
    with_token: bool,
    /// The last `reconnectToken`, and until when it restores the binding
    /// (`None`: while connected).
    reconnect: Option<(String, Option<Instant>)>,
    instance: String,
    tools: Value,
    workspace: Vec<String>,
    sessions: Vec<CopilotSession>,
    /// Sessions that ended or were refused: never bound to again (the
    /// last [`MAX_SKIPPED`]).
    skip: Vec<String>,
    calls: HashSet<String>,
    /// Why it is not bound (shown in the status), last told to the user.
    note: String,
    pub provider_id: String,
    label: String,
    duplicates: u8,
}

/// Ended sessions remembered (a gateway cannot grow the list without end).
pub const MAX_SKIPPED: usize = 256;

fn instance_id() -> String {
    format!("nvim-{}-{:04x}", std::process::id(), rand::random::<u16>())
}

impl Machine {
    pub fn new(tools: Value, workspace: Vec<String>) -> Self {
        Self {
            phase: Phase::Disconnected,
            token: None,
            with_token: false,
            reconnect: None,
            instance: instance_id(),
            tools,
            workspace,
            sessions: Vec::new(),
            skip: Vec::new(),
            calls: HashSet::new(),
            note: String::new(),
            provider_id: String::new(),
            label: String::new(),
            duplicates: 0,
        }
    }

    pub fn paired(&self) -> bool {
        self.token.is_some()
    }

    pub fn calls(&self) -> usize {
        self.calls.len()
    }

    pub fn session(&self) -> Option<&str> {
        match &self.phase {
            Phase::Bound { session } => Some(session),
            _ => None,
        }
    }

    /// The state in one line, for `:Amp tap` and `status()`.
    pub fn describe(&self) -> String {
        match &self.phase {
            Phase::Disconnected => "not connected".into(),
            Phase::AwaitAuth => "authenticating".into(),
            Phase::AwaitPairing => "pairing: run :Amp tap pair and type the code the Copilot session shows".into(),
            Phase::AwaitSessions => "checking the pairing code".into(),
            Phase::Unbound => self.note.clone(),
            Phase::AwaitAck { session } => format!("binding to Copilot session {session}"),
            Phase::Bound { session } => format!("connected to Copilot session {} ({session})", self.label_or(session)),
        }
    }

    fn label_or<'a>(&'a self, session: &'a str) -> &'a str {
        if self.label.is_empty() {
            session
        } else {
            &self.label
        }
    }

    /// A connection is open: authenticate with the issued token, or ask to pair.
    pub fn connected(&mut self) -> Vec<Action> {
        self.phase = Phase::AwaitAuth;
        self.calls.clear();
        self.duplicates = 0;
        self.with_token = self.token.is_some();
        match &self.token {
            Some(token) => vec![Action::Send(protocol::auth_token(token))],
            None => vec![Action::Send(protocol::auth_pair())],
        }
    }

    /// The code the user typed (six digits, checked by `pairing`).
    pub fn code(&mut self, code: &str) -> Result<Vec<Action>, NotPairing> {
        if self.phase != Phase::AwaitPairing {
            return Err(NotPairing { state: self.describe() });
        }
        self.phase = Phase::AwaitSessions;
        Ok(vec![Action::Send(protocol::auth_confirm(code))])
    }

    /// The connection is gone: calls in flight are the gateway's to fail
    /// (`DISCONNECTED`); the `reconnectToken` stays good for 30 s.
    pub fn disconnected(&mut self, now: Instant) -> Vec<Action> {
        let was_bound = self.session().is_some();
        if let Some((_, until @ None)) = &mut self.reconnect {
            *until = Some(now + RECONNECT_TOKEN_TTL);
        }
        self.phase = Phase::Disconnected;
        let mut out: Vec<Action> =
            self.calls.drain().map(|id| Action::Cancel { id, why: ReviewEnd::Disconnected }).collect();
        if was_bound {
            out.push(Action::Unbound { why: "the connection to the tap gateway was lost".into() });
        }
        out
    }

    /// Call `id` answered: whether its result is still wanted (not
    /// cancelled, same connection).
    pub fn call_done(&mut self, id: &str) -> bool {
        self.calls.remove(id)
    }

    pub fn workspace_changed(&mut self, workspace: Vec<String>, now: Instant) -> Vec<Action> {
        self.workspace = workspace;
        match &self.phase {
            Phase::Unbound => self.bind(now),
            Phase::Bound { session } => {
                let best = protocol::pick_session(&self.sessions, &self.workspace, &self.skip).map(|s| s.id.clone());
                if best.as_deref() == Some(session.as_str()) {
                    return Vec::new();
                }
                let mut out = self.unbind("the workspace changed");
                out.extend(self.bind(now));
                out
            }
            _ => Vec::new(),
        }
    }

    fn skip_session(&mut self, session: String) {
        if self.skip.len() >= MAX_SKIPPED {
            self.skip.remove(0);
        }
        self.skip.push(session);
    }

    fn unbind(&mut self, why: &str) -> Vec<Action> {
        let mut out: Vec<Action> =
            self.calls.drain().map(|id| Action::Cancel { id, why: ReviewEnd::Disconnected }).collect();
        if self.session().is_some() {
            out.push(Action::Unbound { why: why.into() });
        }
        self.phase = Phase::Unbound;
        out
    }

    /// Sends `hello` for the session of this workspace, or waits for one.
    fn bind(&mut self, now: Instant) -> Vec<Action> {
        let Some(session) = protocol::pick_session(&self.sessions, &self.workspace, &self.skip).cloned() else {
            self.phase = Phase::Unbound;
            let folder = self.workspace.first().map_or("", String::as_str);
            let others = self.sessions.len();
            let note = match others {
                0 => format!("connected to the gateway; no Copilot session is running (waiting for one in {folder})"),
                n => format!("connected to the gateway; none of its {n} Copilot sessions works in {folder} (waiting)"),
            };
            let tell = note != self.note;
            self.note = note;
            return if tell { vec![Action::Tell { error: false, message: self.note.clone() }] } else { Vec::new() };
        };
        let token = match &self.reconnect {
            Some((t, None)) => Some(t.clone()),
            Some((t, Some(until))) if now < *until => Some(t.clone()),
            _ => None,
        };
        self.label = session.label.clone();
        self.phase = Phase::AwaitAck { session: session.id.clone() };
        vec![Action::Send(protocol::hello(&session.id, &self.instance, token.as_deref(), &self.tools, &self.workspace))]
    }

    pub fn message(&mut self, message: In, now: Instant) -> Vec<Action> {
        match message {
            In::AuthPairing => {
                if self.phase != Phase::AwaitAuth {
                    return vec![Action::Log(format!("auth.pairing unasked ({:?})", self.phase))];
                }
                self.phase = Phase::AwaitPairing;
                vec![Action::AskCode]
            }
            In::Sessions { token, active } => {
                let mut out = Vec::new();
                if let Some(token) = token {
                    if self.phase == Phase::AwaitSessions && !self.with_token {
                        out.push(Action::Tell { error: false, message: "paired with the tap gateway".into() });
                    }
                    self.token = Some(token);
                }
                self.sessions = active;
                match self.phase.clone() {
                    Phase::AwaitAuth | Phase::AwaitSessions | Phase::Unbound => {
                        self.phase = Phase::Unbound;
                        out.extend(self.bind(now));
                    }
                    Phase::Bound { session } if !self.sessions.iter().any(|s| s.id == session) => {
                        self.skip_session(session);
                        out.extend(self.unbind("the Copilot session ended"));
                        out.extend(self.bind(now));
                    }
                    _ => {}
                }
                out
            }
            In::HelloAck { provider_id, reconnect_token, protocol_version } => {
                let Phase::AwaitAck { session } = self.phase.clone() else {
                    return vec![Action::Log("hello.ack unasked".into())];
                };
                if let Some(v) = protocol_version.filter(|v| *v != protocol::PROTOCOL_VERSION) {
                    let message = format!("the tap gateway answered with protocol version {v}, not 2");
                    return vec![
                        Action::Tell { error: true, message: message.clone() },
                        Action::Close { reason: message, give_up: true },
                    ];
                }
                self.reconnect = reconnect_token.map(|t| (t, None));
                self.provider_id = provider_id.clone();
                self.phase = Phase::Bound { session: session.clone() };
                self.note.clear();
                vec![Action::Bound { session, label: self.label.clone(), provider_id }]
            }
            In::Error { code, message } => self.error(&code, &message, now),
            In::ToolCall { id, session, tool, args } => {
                let bound = self.session().map(str::to_owned);
                if bound.is_none() || session.as_ref().is_some_and(|s| Some(s) != bound.as_ref()) {
                    let why = "this provider is not bound to that session";
                    return vec![Action::Send(protocol::tool_error(&id, "UNAUTHORIZED", why))];
                }
                if self.calls.contains(&id) {
                    return vec![Action::Log(format!("a second tool.call with the id {id} ignored"))];
                }
                if self.calls.len() >= MAX_CALLS {
                    let why = format!("{MAX_CALLS} calls already run in this editor: try again when one is done");
                    let mut refused = protocol::tool_error(&id, "RATE_LIMITED", &why);
                    refused["retryable"] = true.into();
                    return vec![Action::Send(refused)];
                }
                self.calls.insert(id.clone());
                vec![Action::Run { id, tool, args }]
            }
            In::ToolCancel { id, reason } => {
                if !self.calls.remove(&id) {
                    return vec![Action::Log(format!("tool.cancel of {id}, which is not running"))];
                }
                let why = if reason == "timeout" { ReviewEnd::TimedOut } else { ReviewEnd::Agent };
                vec![
                    Action::Cancel { id: id.clone(), why },
                    Action::Send(protocol::tool_error(&id, "CANCELLED", "Cancelled")),
                ]
            }
            In::Lifecycle { session, state } => {
                let ours = matches!(&self.phase, Phase::Bound { session: s } | Phase::AwaitAck { session: s } if *s == session);
                if !ours || state != "shutdown.pending" {
                    return Vec::new();
                }
                self.skip_session(session.clone());
                self.reconnect = None;
                let mut out = self.unbind("the Copilot session ended");
                out.push(Action::Send(protocol::shutdown_ready(&session)));
                out.extend(self.bind(now));
                out
            }
            In::Ignored(kind) => vec![Action::Log(format!("ignored a message of type {kind}"))],
        }
    }

    fn error(&mut self, code: &str, message: &str, now: Instant) -> Vec<Action> {
        let said = crate::core::text::cut(message, 200).replace(['\n', '\r'], " ");
        let close = |message: String, give_up: bool| {
            vec![Action::Tell { error: true, message: message.clone() }, Action::Close { reason: message, give_up }]
        };
        match code {
            "AUTH_FAILED" if self.with_token => {
                // A restarted gateway knows no token it issued before.
                self.token = None;
                self.reconnect = None;
                close(
                    "the tap gateway no longer accepts this editor's token (AUTH_FAILED): pairing again".into(),
                    false,
                )
            }
            "AUTH_FAILED" if self.phase == Phase::AwaitSessions => close(
                "wrong pairing code (AUTH_FAILED): run :Amp tap pair again with the new code Copilot shows".into(),
                false,
            ),
            "AUTH_FAILED" | "UNSUPPORTED_VERSION" => {
                close(format!("the tap gateway refused this editor ({code}): {said}"), code == "UNSUPPORTED_VERSION")
            }
            "INVALID_SESSION" => {
                if let Phase::AwaitAck { session } | Phase::Bound { session } = self.phase.clone() {
                    self.skip_session(session);
                }
                let mut out = self.unbind("the Copilot session is not available");
                out.extend(self.bind(now));
                out
            }
            "DUPLICATE_INSTANCE" => {
                let Phase::AwaitAck { .. } = self.phase else { return vec![Action::Log(format!("{code}: {said}"))] };
                self.duplicates += 1;
                self.reconnect = None;
                if self.duplicates > 3 {
                    return close(format!("the tap gateway keeps refusing this editor ({code}): {said}"), false);
                }
                // Another connection has this identity: take a new one.
                self.instance = instance_id();
                self.phase = Phase::Unbound;
                self.bind(now)
            }
            // Too many hellos on this connection (the gateway allows 10 a
            // minute): a new connection, after the backoff.
            "RATE_LIMITED" if matches!(self.phase, Phase::AwaitAck { .. }) => {
                vec![Action::Log(format!("{code}: {said}")), Action::Close { reason: said, give_up: false }]
            }
            "TOOL_CONFLICT" => vec![Action::Tell {
                error: true,
                message: format!("another tap provider has a tool of the same name (TOOL_CONFLICT): {said}"),
            }],
            _ => vec![Action::Log(format!("the gateway said {}: {said}", crate::core::text::cut(code, 40)))],
        }
    }
}

/// The wait before the next connection attempt after `previous`.
pub fn next_backoff(previous: Duration) -> Duration {
    (previous * 2).min(protocol::BACKOFF_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sessions(list: &[(&str, &str)]) -> In {
        let active = list
            .iter()
            .map(|(id, cwd)| CopilotSession {
                id: (*id).into(),
                label: format!("L{id}"),
                cwd: Some((*cwd).into()),
                foreground: false,
            })
            .collect();
        In::Sessions { token: None, active }
    }

    fn sent(actions: &[Action]) -> Vec<Value> {
        actions.iter().filter_map(|a| if let Action::Send(v) = a { Some(v.clone()) } else { None }).collect()
    }

    fn ack(token: &str) -> In {
        In::HelloAck { provider_id: "p-1".into(), reconnect_token: Some(token.into()), protocol_version: Some(2) }
    }

    fn error(code: &str) -> In {
        In::Error { code: code.into(), message: "m".into() }
    }

    /// A machine paired and bound to session "s" of /w.
    fn bound(now: Instant) -> Machine {
        let mut m = Machine::new(json!([]), vec!["/w".into()]);
        m.connected();
        m.message(In::AuthPairing, now);
        m.code("123456").unwrap();
        m.message(In::Sessions { token: Some("tok".into()), active: vec![] }, now);
        m.message(sessions(&[("x", "/other"), ("s", "/w")]), now);
        m.message(ack("r1"), now);
        assert_eq!(m.session(), Some("s"));
        m
    }

    #[test]
    fn pairing_then_token_then_binding_to_this_workspace() {
        let now = Instant::now();
        let mut m = Machine::new(json!([]), vec!["/w".into()]);
        assert_eq!(sent(&m.connected()), [json!({ "type": "auth", "mode": "pair" })]);
        assert!(m.code("123456").is_err(), "no code before auth.pairing");
        assert_eq!(m.message(In::AuthPairing, now), [Action::AskCode]);
        assert_eq!(sent(&m.code("123456").unwrap()), [json!({ "type": "auth.confirm", "code": "123456" })]);
        let out = m.message(In::Sessions { token: Some("tok".into()), active: vec![] }, now);
        assert!(matches!(&out[0], Action::Tell { error: false, .. }));
        assert!(m.paired() && m.phase == Phase::Unbound);
        assert!(m.describe().contains("no Copilot session is running"), "{}", m.describe());
        let out = m.message(sessions(&[("x", "/other"), ("s", "/w")]), now);
        let hello = &sent(&out)[0];
        assert_eq!((hello["type"].as_str(), hello["session"].as_str()), (Some("hello"), Some("s")));
        assert!(hello.get("reconnectToken").is_none());
        let out = m.message(ack("r1"), now);
        assert!(matches!(&out[0], Action::Bound { session, .. } if session == "s"));
        // Reconnect within 30 s: the token, then the reconnectToken.
        m.disconnected(now);
        assert_eq!(sent(&m.connected()), [json!({ "type": "auth", "token": "tok" })]);
        let out = m.message(sessions(&[("s", "/w")]), now + Duration::from_secs(29));
        assert_eq!(sent(&out)[0]["reconnectToken"], "r1");
        // After 30 s it is a fresh hello.
        m.message(ack("r2"), now);
        m.disconnected(now);
        m.connected();
        let out = m.message(sessions(&[("s", "/w")]), now + RECONNECT_TOKEN_TTL);
        assert!(sent(&out)[0].get("reconnectToken").is_none());
    }

    #[test]
    fn a_wrong_code_and_a_forgotten_token_are_told_and_closed() {
        let now = Instant::now();
        let mut m = Machine::new(json!([]), vec!["/w".into()]);
        m.connected();
        m.message(In::AuthPairing, now);
        m.code("000000").unwrap();
        let out = m.message(error("AUTH_FAILED"), now);
        assert!(matches!(&out[0], Action::Tell { error: true, message } if message.starts_with("wrong pairing code")));
        assert!(matches!(&out[1], Action::Close { give_up: false, .. }));
        assert!(!m.paired());
        // Paired, then the gateway restarted: the token is dropped, pairing again.
        let mut m = bound(now);
        m.disconnected(now);
        m.connected();
        let out = m.message(error("AUTH_FAILED"), now);
        assert!(matches!(&out[1], Action::Close { give_up: false, .. }));
        assert!(!m.paired());
        assert_eq!(sent(&m.connected()), [protocol::auth_pair()]);
        let out = Machine::new(json!([]), vec![]).error("UNSUPPORTED_VERSION", "v3 only", now);
        assert!(matches!(&out[1], Action::Close { give_up: true, .. }));
    }

    #[test]
    fn calls_are_limited_cancelled_and_refused_outside_the_session() {
        let now = Instant::now();
        let mut m = bound(now);
        let call = |id: &str, session: Option<&str>| In::ToolCall {
            id: id.into(),
            session: session.map(Into::into),
            tool: "read_file".into(),
            args: Map::new(),
        };
        let out = m.message(call("other", Some("x")), now);
        assert_eq!(sent(&out)[0]["errorCode"], "UNAUTHORIZED");
        for i in 0..MAX_CALLS {
            assert!(matches!(&m.message(call(&format!("c{i}"), Some("s")), now)[0], Action::Run { .. }));
        }
        let out = m.message(call("one-more", Some("s")), now);
        assert_eq!(sent(&out)[0]["errorCode"], "RATE_LIMITED");
        let out = m.message(In::ToolCancel { id: "c0".into(), reason: "timeout".into() }, now);
        assert_eq!(out[0], Action::Cancel { id: "c0".into(), why: ReviewEnd::TimedOut });
        assert_eq!(sent(&out)[0]["errorCode"], "CANCELLED");
        assert!(!m.call_done("c0"), "a cancelled call's result is not sent");
        assert!(m.call_done("c1"));
        assert!(matches!(&m.message(call("again", None), now)[0], Action::Run { .. }));
        let out = m.disconnected(now);
        assert_eq!(out.iter().filter(|a| matches!(a, Action::Cancel { .. })).count(), MAX_CALLS - 1);
        assert!(matches!(out.last(), Some(Action::Unbound { .. })));
    }

    #[test]
    fn a_session_that_ends_is_left_and_another_of_this_workspace_taken() {
        let now = Instant::now();
        let mut m = bound(now);
        m.message(In::ToolCall { id: "c".into(), session: None, tool: "t".into(), args: Map::new() }, now);
        let out = m.message(In::Lifecycle { session: "x".into(), state: "shutdown.pending".into() }, now);
        assert!(out.is_empty(), "not ours");
        let out = m.message(In::Lifecycle { session: "s".into(), state: "shutdown.pending".into() }, now);
        assert!(matches!(&out[0], Action::Cancel { why: ReviewEnd::Disconnected, .. }));
        assert!(matches!(&out[1], Action::Unbound { .. }));
        assert_eq!(sent(&out), [json!({ "type": "shutdown.ready", "sessionId": "s" })]);
        assert_eq!(m.phase, Phase::Unbound);
        // The ended session is still listed a moment: not taken again.
        assert!(sent(&m.message(sessions(&[("s", "/w")]), now)).is_empty());
        let out = m.message(sessions(&[("s2", "/w")]), now);
        let hello = &sent(&out)[0];
        assert_eq!(hello["session"], "s2");
        assert!(hello.get("reconnectToken").is_none(), "a new session binds afresh");
    }

    #[test]
    fn duplicate_instances_take_a_new_identity_and_bad_sessions_are_skipped() {
        let now = Instant::now();
        let mut m = Machine::new(json!([]), vec!["/w".into()]);
        m.connected();
        m.message(In::AuthPairing, now);
        m.code("123456").unwrap();
        let first = sent(&m.message(In::Sessions { token: Some("t".into()), active: vec![] }, now));
        assert!(first.is_empty());
        let hello1 = sent(&m.message(sessions(&[("s", "/w"), ("s2", "/w/")]), now))[0].clone();
        let hello2 = sent(&m.message(error("DUPLICATE_INSTANCE"), now))[0].clone();
        assert_ne!(hello1["instance"], hello2["instance"]);
        let out = m.message(error("INVALID_SESSION"), now);
        let other = &sent(&out)[0];
        assert_ne!(other["session"], hello2["session"]);
        let out = m.message(error("RATE_LIMITED"), now);
        assert!(matches!(out.last(), Some(Action::Close { give_up: false, .. })), "{out:?}");
        for i in 0..MAX_SKIPPED + 10 {
            m.skip_session(format!("s{i}"));
        }
        assert_eq!(m.skip.len(), MAX_SKIPPED);
        assert_eq!(next_backoff(Duration::from_secs(16)), Duration::from_secs(30));
        assert_eq!(next_backoff(Duration::from_secs(30)), Duration::from_secs(30));
        assert_eq!(next_backoff(protocol::BACKOFF_FIRST), Duration::from_secs(2));
    }
}
