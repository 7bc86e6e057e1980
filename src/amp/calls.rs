//! The requests the server answers, with their params checked and typed.
//!
//! Decoding params here (not in the handlers) gives every method the same
//! readable `-32602` messages and keeps the handlers free of JSON plumbing.

use serde_json::{Map, Value};

use super::protocol::{RpcError, METHOD_NOT_FOUND};

/// The methods this server implements, for error messages and docs.
pub const METHODS: &[&str] = &["ping", "authenticate", "readFile", "editFile", "getDiagnostics", "openURI"];

/// A request whose params have been checked.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    Ping { message: Value },
    Authenticate,
    ReadFile { path: String },
    EditFile { path: String, edit: EditSpec },
    GetDiagnostics { path: Option<String> },
    OpenUri { uri: String },
}

/// The two forms of `editFile`.
#[derive(Debug, Clone, PartialEq)]
pub enum EditSpec {
    /// amp.nvim's form: the file's whole new text.
    Full(String),
    /// The quick reference's form: replace bytes `start..end` of the current text.
    Range { start: u64, end: u64, new_text: String },
}

/// Checks `params` for `method` and returns the typed call.
pub fn parse_call(method: &str, params: Value) -> Result<Call, RpcError> {
    let params = match params {
        Value::Object(map) => map,
        Value::Null => Map::new(),
        other => {
            return Err(RpcError::invalid_params(method, format!("params must be an object, got {}", kind(&other))))
        }
    };
    let p = Params { method, map: &params };
    Ok(match method {
        "ping" => Call::Ping { message: params.get("message").cloned().unwrap_or(Value::Null) },
        "authenticate" => Call::Authenticate,
        "readFile" => Call::ReadFile { path: p.string("path")? },
        "editFile" => {
            let path = p.string("path")?;
            let edit = if params.contains_key("fullContent") {
                EditSpec::Full(p.string("fullContent")?)
            } else if params.contains_key("newText") || params.contains_key("start") || params.contains_key("end") {
                EditSpec::Range { start: p.offset("start")?, end: p.offset("end")?, new_text: p.string("newText")? }
            } else {
                return Err(RpcError::invalid_params(
                    method,
                    "expected either \"fullContent\" or \"start\", \"end\" and \"newText\"",
                ));
            };
            Call::EditFile { path, edit }
        }
        "getDiagnostics" => Call::GetDiagnostics { path: p.optional_string("path")? },
        "openURI" => Call::OpenUri { uri: p.string("uri")? },
        _ => {
            return Err(RpcError::new(
                METHOD_NOT_FOUND,
                format!("unknown method '{method}' (this server answers: {})", METHODS.join(", ")),
            ))
        }
    })
}

struct Params<'a> {
    method: &'a str,
    map: &'a Map<String, Value>,
}

impl Params<'_> {
    fn string(&self, name: &str) -> Result<String, RpcError> {
        match self.map.get(name) {
            Some(Value::String(s)) => Ok(s.clone()),
            Some(other) => Err(self.wrong_type(name, "a string", other)),
            None => Err(RpcError::invalid_params(self.method, format!("missing \"{name}\" (a string)"))),
        }
    }

    fn optional_string(&self, name: &str) -> Result<Option<String>, RpcError> {
        match self.map.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(_) => self.string(name).map(Some),
        }
    }

    fn offset(&self, name: &str) -> Result<u64, RpcError> {
        match self.map.get(name) {
            Some(Value::Number(n)) if n.as_u64().is_some() => Ok(n.as_u64().unwrap_or_default()),
            Some(other) => Err(self.wrong_type(name, "a non-negative integer byte offset", other)),
            None => Err(RpcError::invalid_params(self.method, format!("missing \"{name}\" (a byte offset)"))),
        }
    }

    fn wrong_type(&self, name: &str, wanted: &str, got: &Value) -> RpcError {
        RpcError::invalid_params(self.method, format!("\"{name}\" must be {wanted}, got {}", kind(got)))
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::amp::protocol::INVALID_PARAMS;
    use serde_json::json;

    #[test]
    fn ping_echoes_any_message() {
        assert_eq!(parse_call("ping", json!({"message":"x"})).unwrap(), Call::Ping { message: json!("x") });
        assert_eq!(parse_call("ping", Value::Null).unwrap(), Call::Ping { message: Value::Null });
    }

    #[test]
    fn read_file_requires_a_string_path() {
        assert_eq!(parse_call("readFile", json!({"path":"/a"})).unwrap(), Call::ReadFile { path: "/a".into() });
        let err = parse_call("readFile", json!({})).unwrap_err();
        assert_eq!(err.code, INVALID_PARAMS);
        assert_eq!(err.message, "readFile: missing \"path\" (a string)");
        let err = parse_call("readFile", json!({"path": 3})).unwrap_err();
        assert_eq!(err.message, "readFile: \"path\" must be a string, got a number");
        let err = parse_call("readFile", json!([1])).unwrap_err();
        assert_eq!(err.message, "readFile: params must be an object, got an array");
    }

    #[test]
    fn edit_file_both_forms() {
        assert_eq!(
            parse_call("editFile", json!({"path":"a","fullContent":"x"})).unwrap(),
            Call::EditFile { path: "a".into(), edit: EditSpec::Full("x".into()) }
        );
        assert_eq!(
            parse_call("editFile", json!({"path":"a","start":1,"end":2,"newText":"y"})).unwrap(),
            Call::EditFile { path: "a".into(), edit: EditSpec::Range { start: 1, end: 2, new_text: "y".into() } }
        );
        assert!(parse_call("editFile", json!({"path":"a"})).unwrap_err().message.contains("fullContent"));
        assert!(parse_call("editFile", json!({"path":"a","start":-1,"end":2,"newText":""}))
            .unwrap_err()
            .message
            .contains("\"start\" must be a non-negative integer"));
        assert!(parse_call("editFile", json!({"path":"a","start":1.5,"end":2,"newText":""})).is_err());
    }

    #[test]
    fn diagnostics_path_is_optional() {
        assert_eq!(parse_call("getDiagnostics", json!({})).unwrap(), Call::GetDiagnostics { path: None });
        assert_eq!(
            parse_call("getDiagnostics", json!({"path":"/w"})).unwrap(),
            Call::GetDiagnostics { path: Some("/w".into()) }
        );
    }

    #[test]
    fn unknown_methods_are_named() {
        let err = parse_call("frobnicate", json!({})).unwrap_err();
        assert_eq!(err.code, METHOD_NOT_FOUND);
        assert!(err.message.starts_with("unknown method 'frobnicate'"));
    }
}
