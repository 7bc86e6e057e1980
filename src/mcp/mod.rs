//! MCP's JSON-RPC 2.0 messages, the server side: what a client sends
//! (requests, notifications, answers to our requests) and what we send
//! back. Plain Rust, no Neovim API, no transport: the Claude Code front-end
//! carries these over a WebSocket (`crate::claude`).
//!
//! Hand-written rather than the official SDK (`rmcp`): the attach
//! protocols add methods of their own in both directions (`ide_connected`
//! from the client, `selection_changed` / `at_mentioned` from us) that
//! rmcp's typed message enums do not carry, the transport and its limits
//! (handshake, frame size, in-flight budget) are the Amp server's, and the
//! whole of what is needed here is a page of serde.

mod error;

use serde_json::{json, Map, Value};

pub use error::RequestError;

/// JSON-RPC error codes used here.
pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
/// MCP's "resource not found".
pub const RESOURCE_NOT_FOUND: i64 = -32002;

/// The protocol version we answer with when the client asks for one we do
/// not know (MCP lets the server pick; Claude Code 2.1 asks `2025-11-25`).
pub const LATEST_PROTOCOL_VERSION: &str = "2025-11-25";
const KNOWN_VERSIONS: &[&str] = &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// One message from the client.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
        params: Value,
    },
    /// An answer to a request of ours (we send none yet): ignored.
    Response {
        id: Value,
    },
}

/// A message that is not one: the error to answer (with `id` null when the
/// request's id could not be read).
#[derive(Debug, Clone, PartialEq)]
pub struct Malformed {
    pub id: Value,
    pub code: i64,
    pub message: String,
}

/// Decodes one text frame. Batches (arrays) are refused: MCP 2025-06-18
/// removed them and no attach client sends them.
pub fn decode(text: &str) -> Result<Incoming, Malformed> {
    let value: Value = serde_json::from_str(text).map_err(|e| Malformed {
        id: Value::Null,
        code: PARSE_ERROR,
        message: format!("invalid JSON: {e}"),
    })?;
    let Value::Object(mut object) = value else {
        return Err(Malformed {
            id: Value::Null,
            code: INVALID_REQUEST,
            message: "a message must be a JSON object".into(),
        });
    };
    let id = object.remove("id");
    let id_ok = |id: &Value| matches!(id, Value::String(_) | Value::Number(_));
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(Malformed {
            id: id.filter(id_ok).unwrap_or(Value::Null),
            code: INVALID_REQUEST,
            message: "jsonrpc must be \"2.0\"".into(),
        });
    }
    let params = object.remove("params").unwrap_or(Value::Null);
    match (object.remove("method"), id) {
        (Some(Value::String(method)), Some(id)) if id_ok(&id) => Ok(Incoming::Request { id, method, params }),
        (Some(Value::String(_)), Some(_)) => {
            Err(Malformed { id: Value::Null, code: INVALID_REQUEST, message: "id must be a string or a number".into() })
        }
        (Some(Value::String(method)), None) => Ok(Incoming::Notification { method, params }),
        (Some(_), id) => Err(Malformed {
            id: id.filter(id_ok).unwrap_or(Value::Null),
            code: INVALID_REQUEST,
            message: "method must be a string".into(),
        }),
        (None, Some(id)) if object.contains_key("result") || object.contains_key("error") => {
            Ok(Incoming::Response { id })
        }
        (None, id) => Err(Malformed {
            id: id.filter(id_ok).unwrap_or(Value::Null),
            code: INVALID_REQUEST,
            message: "a message needs a method".into(),
        }),
    }
}

pub fn result(id: &Value, result: Value) -> String {
    json!({ "jsonrpc": "2.0", "id": id, "result": result }).to_string()
}

pub fn error(id: &Value, code: i64, message: &str) -> String {
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } }).to_string()
}

/// The answer to a request that failed: its code and message.
pub fn failed(id: &Value, e: &RequestError) -> String {
    error(id, e.code(), &e.to_string())
}

pub fn notification(method: &str, params: &Value) -> String {
    json!({ "jsonrpc": "2.0", "method": method, "params": params }).to_string()
}

/// The `initialize` result: the client's protocol version when we know it,
/// else our latest; tools only.
pub fn initialize_result(params: &Value, name: &str, version: &str) -> Value {
    let asked = params.get("protocolVersion").and_then(Value::as_str).unwrap_or_default();
    let version_answered = if KNOWN_VERSIONS.contains(&asked) { asked } else { LATEST_PROTOCOL_VERSION };
    json!({
        "protocolVersion": version_answered,
        "capabilities": { "tools": { "listChanged": false } },
        "serverInfo": { "name": name, "version": version },
    })
}

/// A `tools/call` request's tool name and arguments (an object, empty when absent).
pub fn tool_call(params: &Value) -> Result<(String, Map<String, Value>), RequestError> {
    let name = params.get("name").and_then(Value::as_str).ok_or(RequestError::NoToolName)?;
    let arguments = match params.get("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(map)) => map.clone(),
        Some(_) => return Err(RequestError::ArgumentsNotAnObject),
    };
    Ok((name.to_owned(), arguments))
}

/// The answer to a request every MCP server of ours treats alike
/// (`initialize`, `ping`, `tools/list` with `tools`, empty resource and
/// prompt lists, method not found); `None` for `tools/call`, which is the
/// protocol's own.
pub fn standard_answer(
    method: &str,
    params: &Value,
    tools: impl FnOnce() -> Value,
) -> Option<Result<Value, RequestError>> {
    Some(match method {
        "initialize" => Ok(initialize_result(params, "amp.nvim", env!("CARGO_PKG_VERSION"))),
        "ping" => Ok(json!({})),
        "tools/list" => Ok(tools()),
        "tools/call" => return None,
        // Listing nothing is better than an error for clients that ask.
        "resources/list" => Ok(json!({ "resources": [] })),
        "prompts/list" => Ok(json!({ "prompts": [] })),
        other => Err(RequestError::NoMethod(other.to_owned())),
    })
}

/// A tool's string argument `name`, which must be non-empty.
pub fn string_arg(args: &Map<String, Value>, name: &str) -> Result<String, RequestError> {
    match args.get(name) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        _ => Err(RequestError::NotANonEmptyString(name.to_owned())),
    }
}

/// A tool's string argument `name`, which may be empty.
pub fn text_arg(args: &Map<String, Value>, name: &'static str) -> Result<String, RequestError> {
    match args.get(name) {
        Some(Value::String(s)) => Ok(s.clone()),
        _ => Err(RequestError::NotAString(name)),
    }
}

/// A tool's path argument `name` (a path or a `file://` URI), made absolute
/// against the first of `workspace_folders` (`/` without one).
pub fn path_arg(
    args: &Map<String, Value>,
    name: &str,
    workspace_folders: &[String],
) -> Result<std::path::PathBuf, RequestError> {
    let raw = string_arg(args, name)?;
    let path = if raw.starts_with("file://") {
        crate::core::uri::file_uri_to_path(&raw)
            .map_err(|source| RequestError::BadUri { name: name.to_owned(), source })?
    } else {
        std::path::PathBuf::from(&raw)
    };
    Ok(if path.is_absolute() {
        path
    } else {
        std::path::Path::new(workspace_folders.first().map(String::as_str).unwrap_or("/")).join(path)
    })
}

/// One tool as `tools/list` lists it: its input an object with
/// `properties`, the `required` ones named.
pub fn listed_tool(name: &str, description: &str, properties: Value, required: &[&str]) -> Value {
    json!({
        "name": name,
        "description": description,
        "inputSchema": { "type": "object", "properties": properties, "required": required },
    })
}

/// A tool result whose content is the given texts, in order.
pub fn text_content(texts: &[&str], is_error: bool) -> Value {
    let content: Vec<Value> = texts.iter().map(|t| json!({ "type": "text", "text": t })).collect();
    if is_error {
        json!({ "content": content, "isError": true })
    } else {
        json!({ "content": content })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_requests_notifications_and_responses() {
        assert_eq!(
            decode(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#),
            Ok(Incoming::Request { id: json!(1), method: "tools/list".into(), params: Value::Null })
        );
        assert_eq!(
            decode(r#"{"jsonrpc":"2.0","method":"ide_connected","params":{"pid":7}}"#),
            Ok(Incoming::Notification { method: "ide_connected".into(), params: json!({"pid": 7}) })
        );
        assert_eq!(decode(r#"{"jsonrpc":"2.0","id":"a","result":{}}"#), Ok(Incoming::Response { id: json!("a") }));
    }

    #[test]
    fn malformed_messages_name_their_fault() {
        assert_eq!(decode("{").unwrap_err().code, PARSE_ERROR);
        assert_eq!(decode("[]").unwrap_err().code, INVALID_REQUEST);
        let e = decode(r#"{"jsonrpc":"1.0","id":3,"method":"x"}"#).unwrap_err();
        assert_eq!((e.id, e.code), (json!(3), INVALID_REQUEST));
        assert_eq!(decode(r#"{"jsonrpc":"2.0","id":{},"method":"x"}"#).unwrap_err().id, Value::Null);
        assert_eq!(decode(r#"{"jsonrpc":"2.0","id":2}"#).unwrap_err().id, json!(2));
    }

    #[test]
    fn initialize_echoes_known_versions_only() {
        let r = initialize_result(&json!({"protocolVersion": "2025-06-18"}), "n", "1");
        assert_eq!(r["protocolVersion"], "2025-06-18");
        let r = initialize_result(&json!({"protocolVersion": "1999-01-01"}), "n", "1");
        assert_eq!(r["protocolVersion"], LATEST_PROTOCOL_VERSION);
        assert_eq!(r["serverInfo"]["name"], "n");
        assert!(r["capabilities"]["tools"].is_object());
    }

    #[test]
    fn tool_calls_and_contents() {
        let (name, args) = tool_call(&json!({"name": "openFile", "arguments": {"filePath": "/a"}})).unwrap();
        assert_eq!((name.as_str(), args["filePath"].as_str()), ("openFile", Some("/a")));
        assert!(tool_call(&json!({"name": "x"})).unwrap().1.is_empty());
        assert!(tool_call(&json!({"arguments": {}})).is_err());
        assert!(tool_call(&json!({"name": "x", "arguments": []})).is_err());
        assert_eq!(
            text_content(&["A", "B"], false),
            json!({"content": [{"type":"text","text":"A"},{"type":"text","text":"B"}]})
        );
        assert_eq!(text_content(&["E"], true)["isError"], true);
    }

    #[test]
    fn encodings() {
        assert_eq!(result(&json!(1), json!({})), r#"{"id":1,"jsonrpc":"2.0","result":{}}"#);
        let e: Value = serde_json::from_str(&error(&json!("x"), METHOD_NOT_FOUND, "no")).unwrap();
        assert_eq!(e["error"]["code"], METHOD_NOT_FOUND);
        let n: Value = serde_json::from_str(&notification("at_mentioned", &json!({"a": 1}))).unwrap();
        assert_eq!((n["method"].as_str(), n.get("id")), (Some("at_mentioned"), None));
    }
}
