//! Provider Interface v2 as this provider speaks it: the gateway's messages
//! it understands (anything else is ignored, as the interface requires),
//! the messages it sends, their size limits, and which Copilot session is
//! this editor's.

use std::time::Duration;

use serde_json::{json, Map, Value};

pub const PROTOCOL_VERSION: u64 = 2;

/// The name this provider registers under (its instance tells editors apart).
pub const PROVIDER_NAME: &str = "neovim";

/// The largest message read from the gateway: the interface's 2 MB for
/// every message other than `tool.result` (which only providers send).
/// Enforced by the WebSocket reader, before a byte past it is kept.
pub const MAX_IN_BYTES: usize = 2_000_000;

/// The largest `tool.result` sent (the interface's 5 MB); a bigger answer
/// is replaced by a one-line error saying so.
pub const MAX_RESULT_BYTES: usize = 5_000_000;

/// The largest other message sent (the interface's 2 MB).
pub const MAX_OUT_BYTES: usize = 2_000_000;

/// Tool calls run at once; declared in `hello` (`concurrency`) so the
/// gateway queues the rest, and enforced here: a call past it is answered
/// `RATE_LIMITED` at once.
pub const MAX_CALLS: usize = 8;

/// A `reconnectToken` restores the binding for this long after it was
/// issued or after the connection dropped (the interface's 30 s).
pub const RECONNECT_TOKEN_TTL: Duration = Duration::from_secs(30);

/// Waits between connection attempts: 1 s, doubled after each failure, at
/// most 30 s; back to 1 s once a connection is bound to a session.
pub const BACKOFF_FIRST: Duration = Duration::from_secs(1);
pub const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// Longest call id kept (ids are UUIDs or alike).
pub const MAX_ID_CHARS: usize = 200;

/// A Copilot session the gateway lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopilotSession {
    pub id: String,
    pub label: String,
    /// Only shown for sessions this provider may access.
    pub cwd: Option<String>,
    pub foreground: bool,
}

/// A message from the gateway.
#[derive(Debug, Clone, PartialEq)]
pub enum In {
    AuthPairing,
    /// `sessions` or `sessions.updated`; `token` after pairing.
    Sessions {
        token: Option<String>,
        active: Vec<CopilotSession>,
    },
    HelloAck {
        provider_id: String,
        reconnect_token: Option<String>,
        protocol_version: Option<u64>,
    },
    Error {
        code: String,
        message: String,
    },
    ToolCall {
        id: String,
        session: Option<String>,
        tool: String,
        args: Map<String, Value>,
    },
    ToolCancel {
        id: String,
        reason: String,
    },
    Lifecycle {
        session: String,
        state: String,
    },
    /// `ack`, and every type this provider does not use (`gate.check`,
    /// `session.event`, ...) or does not know.
    Ignored(String),
}

/// A message that is not one: not JSON, or a known type missing a field it
/// must have. Logged and dropped; the connection goes on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Malformed(pub String);

fn text(v: &Value, field: &str) -> Option<String> {
    v.get(field).and_then(Value::as_str).map(str::to_owned)
}

fn need(v: &Value, field: &str, kind: &str) -> Result<String, Malformed> {
    text(v, field).ok_or_else(|| Malformed(format!("{kind} without {field}")))
}

fn sessions(v: &Value) -> Vec<CopilotSession> {
    let list = v.get("active").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    list.iter()
        .filter_map(|s| {
            Some(CopilotSession {
                id: text(s, "id")?,
                label: text(s, "label").unwrap_or_default(),
                cwd: text(s, "cwd"),
                foreground: s.get("foreground").and_then(Value::as_bool).unwrap_or(false),
            })
        })
        .collect()
}

/// Reads one message from the gateway.
pub fn parse(raw: &str) -> Result<In, Malformed> {
    let v: Value = serde_json::from_str(raw).map_err(|e| Malformed(format!("not JSON: {e}")))?;
    let kind = v.get("type").and_then(Value::as_str).ok_or_else(|| Malformed("a message without a type".into()))?;
    Ok(match kind {
        "auth.pairing" => In::AuthPairing,
        "sessions" | "sessions.updated" => In::Sessions { token: text(&v, "token"), active: sessions(&v) },
        "hello.ack" => In::HelloAck {
            provider_id: text(&v, "providerId").unwrap_or_default(),
            reconnect_token: text(&v, "reconnectToken"),
            protocol_version: v.get("protocolVersion").and_then(Value::as_u64),
        },
        "error" => In::Error {
            code: text(&v, "code").unwrap_or_else(|| "UNKNOWN".into()),
            message: text(&v, "message").unwrap_or_default(),
        },
        "tool.call" => {
            let id = need(&v, "id", kind)?;
            if id.is_empty() || id.chars().count() > MAX_ID_CHARS {
                return Err(Malformed(format!("tool.call with an id of {} characters", id.chars().count())));
            }
            let args = match v.get("args") {
                None | Some(Value::Null) => Map::new(),
                Some(Value::Object(m)) => m.clone(),
                Some(_) => return Err(Malformed("tool.call whose args are not an object".into())),
            };
            In::ToolCall { id, session: text(&v, "sessionId"), tool: need(&v, "tool", kind)?, args }
        }
        "tool.cancel" => In::ToolCancel { id: need(&v, "id", kind)?, reason: text(&v, "reason").unwrap_or_default() },
        "session.lifecycle" => In::Lifecycle { session: need(&v, "sessionId", kind)?, state: need(&v, "state", kind)? },
        other => In::Ignored(crate::core::text::cut(other, 60).to_owned()),
    })
}

pub fn auth_pair() -> Value {
    json!({ "type": "auth", "mode": "pair" })
}

pub fn auth_token(token: &str) -> Value {
    json!({ "type": "auth", "token": token })
}

pub fn auth_confirm(code: &str) -> Value {
    json!({ "type": "auth.confirm", "code": code })
}

/// The tools as the gateway registers them: the editor's tools, their JSON
/// Schema as `parameters`; `propose_edit` waits for the user, so its
/// timeout is the review's.
pub fn tools(review_timeout: Duration) -> Value {
    let tools: Vec<Value> = crate::editor_tools::TOOLS
        .iter()
        .map(|t| {
            let mut tool = json!({ "name": t.name, "description": t.description, "parameters": t.input_schema() });
            if !t.read_only && t.name == "propose_edit" {
                tool["timeout"] = json!(review_timeout.as_millis() as u64 + 5_000);
            }
            tool
        })
        .collect();
    Value::Array(tools)
}

pub fn hello(
    session: &str,
    instance: &str,
    reconnect_token: Option<&str>,
    tools: &Value,
    workspace: &[String],
) -> Value {
    let mut hello = json!({
        "type": "hello",
        "name": PROVIDER_NAME,
        "protocolVersion": PROTOCOL_VERSION,
        "session": session,
        "instance": instance,
        "metadata": { "editor": "Neovim", "pid": std::process::id(), "workspaceFolders": workspace },
        "concurrency": { "max": MAX_CALLS, "scope": "instance" },
        "tools": tools,
    });
    if let Some(token) = reconnect_token {
        hello["reconnectToken"] = json!(token);
    }
    hello
}

pub fn shutdown_ready(session: &str) -> Value {
    json!({ "type": "shutdown.ready", "sessionId": session })
}

pub fn goodbye(reason: &str) -> Value {
    json!({ "type": "goodbye", "reason": reason })
}

/// The terminal state of a call that failed: `code` is one of the
/// interface's (`NOT_FOUND`, `CANCELLED`, `UNAUTHORIZED`, `INTERNAL`, ...).
pub fn tool_error(id: &str, code: &str, message: &str) -> Value {
    json!({ "type": "tool.result", "id": id, "error": message, "errorCode": code, "retryable": false })
}

/// A tool's answer as `tool.result`, encoded: within [`MAX_RESULT_BYTES`],
/// or an error that says how big it was.
pub fn tool_result(id: &str, outcome: Option<crate::editor_tools::Outcome>, tool: &str) -> String {
    use crate::editor_tools::Answer;
    let message = match outcome {
        None => tool_error(id, "NOT_FOUND", &format!("no such tool: {}", crate::core::text::cut(tool, 100))),
        Some(Ok(Answer::Text(t))) => json!({ "type": "tool.result", "id": id, "data": t }),
        Some(Ok(Answer::Json(v))) => json!({ "type": "tool.result", "id": id, "data": v }),
        // A refusal (a path outside the workspace, a patch that does not
        // apply): the model reads the line and may try otherwise.
        Some(Err(why)) => json!({ "type": "tool.result", "id": id, "error": why.to_string(), "retryable": false }),
    };
    let text = message.to_string();
    if text.len() <= MAX_RESULT_BYTES {
        return text;
    }
    tool_error(
        id,
        "INTERNAL",
        &format!("the answer is {} bytes, over the {MAX_RESULT_BYTES}-byte limit of a tool.result", text.len()),
    )
    .to_string()
}

/// Whether `path` is `folder` or inside it (whole components).
fn within(path: &str, folder: &str) -> bool {
    let (path, folder) = (path.trim_end_matches('/'), folder.trim_end_matches('/'));
    path == folder || path.strip_prefix(folder).is_some_and(|rest| rest.starts_with('/')) || folder.is_empty()
}

/// The session working in this editor's workspace: the one whose cwd is a
/// workspace folder, else the one whose cwd holds a workspace folder most
/// closely, else the one working inside a workspace folder (the foreground
/// one first, then the gateway's order). `skip`: sessions that ended.
pub fn pick_session<'a>(
    sessions: &'a [CopilotSession],
    workspace: &[String],
    skip: &[String],
) -> Option<&'a CopilotSession> {
    let candidates = || sessions.iter().filter(|s| !skip.contains(&s.id)).filter_map(|s| Some((s, s.cwd.as_deref()?)));
    let best = |matches: &dyn Fn(&str) -> bool| {
        let mut found: Vec<(&CopilotSession, &str)> = candidates().filter(|(_, cwd)| matches(cwd)).collect();
        // The longest cwd is the most specific; the foreground one wins a tie.
        found.sort_by_key(|(s, cwd)| (std::cmp::Reverse(cwd.trim_end_matches('/').len()), !s.foreground));
        found.first().map(|(s, _)| *s)
    };
    best(&|cwd| workspace.iter().any(|w| cwd.trim_end_matches('/') == w.trim_end_matches('/')))
        .or_else(|| best(&|cwd| workspace.iter().any(|w| within(w, cwd))))
        .or_else(|| best(&|cwd| workspace.iter().any(|w| within(cwd, w))))
}

/// Why `tap.url` is refused (each holds the URL as given).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    #[error("tap.url must start with ws://, got {0:?}")]
    NotWebSocket(String),
    #[error("tap.url has a bad port: {0:?}")]
    BadPort(String),
    #[error("tap.url must be on this machine (localhost, 127.0.0.1 or [::1]), got {0:?}")]
    NotLocal(String),
}

/// The gateway's address, checked: `ws://` to this machine only (the
/// interface is local; the token and the editor's text never leave it).
pub fn check_url(url: &str) -> Result<String, UrlError> {
    let rest = url.strip_prefix("ws://").ok_or_else(|| UrlError::NotWebSocket(url.to_owned()))?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = match authority.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0) => host,
        _ if authority.starts_with('[') && authority.ends_with(']') => authority,
        Some(_) => return Err(UrlError::BadPort(url.to_owned())),
        None => authority,
    };
    match host {
        "localhost" | "127.0.0.1" | "[::1]" => Ok(url.to_owned()),
        _ => Err(UrlError::NotLocal(url.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(id: &str, cwd: Option<&str>, foreground: bool) -> CopilotSession {
        CopilotSession { id: id.into(), label: String::new(), cwd: cwd.map(Into::into), foreground }
    }

    #[test]
    fn messages_parse_unknown_ones_are_ignored_and_bad_ones_say_why() {
        let m =
            parse(r#"{"type":"sessions","token":"t","active":[{"id":"a","cwd":"/w","extra":1},{"label":"no id"}]}"#);
        assert_eq!(m, Ok(In::Sessions { token: Some("t".into()), active: vec![session("a", Some("/w"), false)] }));
        assert_eq!(parse(r#"{"type":"gate.check","callId":"g"}"#), Ok(In::Ignored("gate.check".into())));
        assert_eq!(parse(r#"{"type":"ack","requestId":"r"}"#), Ok(In::Ignored("ack".into())));
        let call = parse(r#"{"type":"tool.call","id":"c1","sessionId":"a","tool":"read_file","args":{"path":"x"}}"#);
        assert!(
            matches!(call, Ok(In::ToolCall { ref id, ref tool, ref args, .. }) if id == "c1" && tool == "read_file" && args["path"] == "x")
        );
        assert!(parse("{").unwrap_err().0.starts_with("not JSON"));
        assert_eq!(parse(r#"{"id":"x"}"#), Err(Malformed("a message without a type".into())));
        assert_eq!(parse(r#"{"type":"tool.call","tool":"x"}"#), Err(Malformed("tool.call without id".into())));
        let long = format!(r#"{{"type":"tool.call","id":"{}","tool":"x"}}"#, "i".repeat(MAX_ID_CHARS + 1));
        assert!(parse(&long).is_err());
        let at_limit = format!(r#"{{"type":"tool.call","id":"{}","tool":"x"}}"#, "i".repeat(MAX_ID_CHARS));
        assert!(parse(&at_limit).is_ok());
        assert!(parse(r#"{"type":"tool.call","id":"c","tool":"x","args":[1]}"#).is_err());
    }

    #[test]
    fn the_session_of_this_workspace_is_picked() {
        let ws = vec!["/code/foo".to_owned()];
        let list = vec![
            session("home", Some("/code"), true),
            session("other", Some("/code/bar"), true),
            session("exact", Some("/code/foo/"), false),
            session("hidden", None, true),
        ];
        assert_eq!(pick_session(&list, &ws, &[]).map(|s| s.id.as_str()), Some("exact"));
        assert_eq!(pick_session(&list, &ws, &["exact".into()]).map(|s| s.id.as_str()), Some("home"));
        let inside = vec![session("sub", Some("/code/foo/src"), false), session("other", Some("/code/foobar"), true)];
        assert_eq!(pick_session(&inside, &ws, &[]).map(|s| s.id.as_str()), Some("sub"));
        let none = vec![session("other", Some("/code/foobar"), true), session("x", None, true)];
        assert_eq!(pick_session(&none, &ws, &[]), None);
        let tie = vec![session("bg", Some("/code/foo"), false), session("fg", Some("/code/foo"), true)];
        assert_eq!(pick_session(&tie, &ws, &[]).map(|s| s.id.as_str()), Some("fg"));
    }

    #[test]
    fn results_stay_within_the_limit_and_refusals_are_errors() {
        use crate::editor_tools::Answer;
        let ok: Value = serde_json::from_str(&tool_result("c", Some(Ok(Answer::Text("hi".into()))), "t")).unwrap();
        assert_eq!(ok, json!({ "type": "tool.result", "id": "c", "data": "hi" }));
        let nul = crate::editor_tools::error::PathError::Nul.into();
        let refused: Value = serde_json::from_str(&tool_result("c", Some(Err(nul)), "t")).unwrap();
        assert_eq!((refused["error"].as_str(), refused.get("data")), (Some("the path contains a NUL byte"), None));
        let unknown: Value = serde_json::from_str(&tool_result("c", None, "nope")).unwrap();
        assert_eq!(unknown["errorCode"], "NOT_FOUND");
        // The envelope around a text answer: 37 bytes with the id "c".
        let envelope = tool_result("c", Some(Ok(Answer::Text(String::new()))), "t").len();
        let fits = "x".repeat(MAX_RESULT_BYTES - envelope);
        let at_limit = tool_result("c", Some(Ok(Answer::Text(fits.clone()))), "t");
        assert_eq!(at_limit.len(), MAX_RESULT_BYTES);
        let over = tool_result("c", Some(Ok(Answer::Text(fits + "x"))), "t");
        let over: Value = serde_json::from_str(&over).unwrap();
        assert_eq!(over["errorCode"], "INTERNAL");
        assert!(over["error"].as_str().unwrap().contains("5000001 bytes"), "{over}");
    }

    #[test]
    fn the_gateway_must_be_on_this_machine() {
        assert!(check_url("ws://localhost:9400").is_ok());
        assert!(check_url("ws://127.0.0.1:9400/").is_ok());
        assert!(check_url("ws://[::1]:9400").is_ok());
        assert!(check_url("ws://localhost").is_ok());
        assert_eq!(
            check_url("wss://localhost:9400").unwrap_err().to_string(),
            r#"tap.url must start with ws://, got "wss://localhost:9400""#
        );
        assert_eq!(
            check_url("ws://example.com:9400").unwrap_err().to_string(),
            r#"tap.url must be on this machine (localhost, 127.0.0.1 or [::1]), got "ws://example.com:9400""#
        );
        assert!(check_url("ws://localhost.evil.com:9400").is_err());
        assert_eq!(check_url("ws://localhost:0"), Err(UrlError::BadPort("ws://localhost:0".into())));
        assert!(check_url("ws://localhost:99999").is_err());
    }

    #[test]
    fn hello_names_the_session_protocol_and_limits() {
        let tools = tools(Duration::from_secs(300));
        let names: Vec<_> = tools.as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(names.len(), crate::editor_tools::TOOLS.len());
        let h = hello("s1", "nvim-1", Some("rt"), &tools, &["/w".into()]);
        assert_eq!((h["protocolVersion"].as_u64(), h["session"].as_str()), (Some(2), Some("s1")));
        assert_eq!(h["reconnectToken"], "rt");
        assert_eq!(h["concurrency"]["max"], MAX_CALLS);
        assert!(hello("s1", "i", None, &tools, &[]).get("reconnectToken").is_none());
        assert!(h.to_string().len() < MAX_OUT_BYTES);
    }
}
