//! How a provider call fails ([`ProviderError`]), and reading a peer's
//! `{result}` / `{error}` answer as a call's outcome (the same for HTTP
//! endpoints, the Node host and MCP servers).

use serde_json::Value;

/// Why a provider call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// The call exceeded its deadline (set by the caller).
    #[error("timed out")]
    Timeout,
    /// Connect/spawn/IO failure, HTTP status other than 2xx, the process died.
    #[error("transport error: {0}")]
    Transport(String),
    /// The answer does not have the protocol's shape (garbage, neither `result` nor `error`).
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The provider's own `{error: {code, message}}`.
    #[error("provider error {code}: {message}")]
    Provider { code: i64, message: String },
    /// A JS module could not be imported (or has no provider in it).
    #[error("import failed: {0}")]
    Import(String),
    /// A JS provider's method threw (or its promise rejected).
    #[error("provider threw: {0}")]
    Threw(String),
}

/// `{code?, message?}` (or anything else a peer put in `error`) as a [`ProviderError::Provider`].
pub(crate) fn provider_error(error: &Value) -> ProviderError {
    match error {
        Value::Object(o) => ProviderError::Provider {
            code: o.get("code").and_then(|c| c.as_i64().or_else(|| c.as_f64().map(|f| f as i64))).unwrap_or(0),
            message: match o.get("message") {
                Some(Value::String(s)) => s.clone(),
                Some(v) => v.to_string(),
                None => error.to_string(),
            },
        },
        Value::String(s) => ProviderError::Provider { code: 0, message: s.clone() },
        other => ProviderError::Provider { code: 0, message: other.to_string() },
    }
}

/// A protocol answer `{result}` / `{error}` as the call's outcome. `error: null`
/// counts as absent; `result: null` is a result.
pub(crate) fn outcome_of(message: &serde_json::Map<String, Value>) -> Result<Value, ProviderError> {
    match message.get("error") {
        Some(e) if !e.is_null() => Err(provider_error(e)),
        _ => match message.get("result") {
            Some(r) => Ok(r.clone()),
            None => Err(ProviderError::Protocol("answer has neither `result` nor `error`".into())),
        },
    }
}

/// An answer of the Node host: as [`outcome_of`], and an error with
/// `kind: "import"` / `"threw"` (node/openctx-host.mjs) is labelled so.
pub(crate) fn host_outcome_of(message: &serde_json::Map<String, Value>) -> Result<Value, ProviderError> {
    let outcome = outcome_of(message);
    let kind = message.get("error").and_then(|e| e.get("kind")).and_then(Value::as_str);
    match (outcome, kind) {
        (Err(ProviderError::Provider { code, message }), Some(kind @ ("import" | "threw"))) => {
            let message = if code != 0 { format!("{message} (code {code})") } else { message };
            Err(if kind == "import" { ProviderError::Import(message) } else { ProviderError::Threw(message) })
        }
        (outcome, _) => outcome,
    }
}

/// An error and its `source()` chain on one line (reqwest's top-level messages
/// alone say little: "error sending request").
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let s_text = s.to_string();
        if !out.contains(&s_text) {
            out.push_str(": ");
            out.push_str(&s_text);
        }
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn display_is_readable() {
        assert_eq!(ProviderError::Timeout.to_string(), "timed out");
        assert_eq!(ProviderError::Transport("HTTP 500 from x".into()).to_string(), "transport error: HTTP 500 from x");
        assert_eq!(ProviderError::Protocol("garbage".into()).to_string(), "protocol error: garbage");
        assert_eq!(
            ProviderError::Provider { code: -32000, message: "nope".into() }.to_string(),
            "provider error -32000: nope"
        );
    }

    #[test]
    fn outcomes() {
        let m = |v: Value| v.as_object().unwrap().clone();
        assert_eq!(outcome_of(&m(json!({"result": [1]}))), Ok(json!([1])));
        assert_eq!(outcome_of(&m(json!({"result": null}))), Ok(Value::Null));
        assert_eq!(outcome_of(&m(json!({"error": null, "result": 2}))), Ok(json!(2)));
        assert_eq!(
            outcome_of(&m(json!({"error": {"code": 7, "message": "x"}}))),
            Err(ProviderError::Provider { code: 7, message: "x".into() })
        );
        assert_eq!(
            outcome_of(&m(json!({"error": "plain"}))),
            Err(ProviderError::Provider { code: 0, message: "plain".into() })
        );
        assert!(matches!(outcome_of(&m(json!({"id": 1}))), Err(ProviderError::Protocol(_))));
    }
}
