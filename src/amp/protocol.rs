//! The Amp editor protocol's envelopes, in both dialects, as plain data.
//!
//! The shipping Amp CLI sends *flat* requests and expects responses keyed by the
//! method name (`{"serverResponse":{"id":"7","ping":{…}}}`); clients written from
//! the quick reference wrap the method (`"method":{"readFile":{…}}`) and expect
//! `"result"`. A request's dialect decides its response's form, and a
//! connection's first request decides the form of the notifications it gets.
//! Nothing here touches sockets or Neovim, so all of it is unit-tested alone.

use crate::serve::json_text::{self, JsonText};
use serde_json::{json, Map, Value};

/// JSON-RPC error codes, as the Amp CLI expects them in `error.code`.
pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;

/// Which envelope form a client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// `{"clientRequest":{"id","<method>":{…}}}`: the Amp CLI.
    Flat,
    /// `{"clientRequest":{"id","method":{"<method>":{…}}}}`: the quick reference.
    Wrapped,
}

/// A JSON-RPC style error: a number and a message saying what was wrong.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self { code, message: message.into() }
    }
    pub fn invalid_params(method: &str, what: impl std::fmt::Display) -> Self {
        Self::new(INVALID_PARAMS, format!("{method}: {what}"))
    }
}

/// One decoded client request, before its params are checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Echoed back as given (the CLI uses strings; numbers are accepted too).
    pub id: Value,
    pub method: String,
    pub params: Value,
    pub dialect: Dialect,
}

/// A request that could not be decoded, with whatever id could be recovered
/// so the client can still match the error to its call.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodeFailure {
    pub id: Value,
    pub error: RpcError,
}

/// Decodes one TEXT frame into a request.
pub fn decode_request(text: &str) -> Result<Request, DecodeFailure> {
    let fail = |id: Value, code, msg: String| DecodeFailure { id, error: RpcError::new(code, msg) };
    let value: Value =
        serde_json::from_str(text).map_err(|e| fail(Value::Null, PARSE_ERROR, format!("malformed JSON: {e}")))?;
    let Value::Object(mut top) = value else {
        return Err(fail(Value::Null, INVALID_REQUEST, "not a request: expected a JSON object".into()));
    };
    let Some(body) = top.remove("clientRequest") else {
        return Err(fail(
            Value::Null,
            INVALID_REQUEST,
            "not a request: expected an object with a \"clientRequest\" key".into(),
        ));
    };
    let Value::Object(mut body) = body else {
        return Err(fail(Value::Null, INVALID_REQUEST, "not a request: \"clientRequest\" must be an object".into()));
    };
    let id = body.remove("id").unwrap_or(Value::Null);
    if !(id.is_string() || id.is_number()) {
        return Err(fail(Value::Null, INVALID_REQUEST, "not a request: \"id\" must be a string or a number".into()));
    }
    match body.remove("method") {
        Some(Value::Object(wrapped)) => {
            let (method, params) = single_entry(wrapped)
                .map_err(|why| fail(id.clone(), INVALID_REQUEST, format!("not a request: \"method\" {why}")))?;
            Ok(Request { id, method, params, dialect: Dialect::Wrapped })
        }
        Some(Value::String(name)) => {
            // JSON-RPC-like `{"method":"ping","params":{…}}`: accepted as the wrapped form.
            let params = body.remove("params").unwrap_or(Value::Null);
            Ok(Request { id, method: name, params, dialect: Dialect::Wrapped })
        }
        Some(_) => Err(fail(id, INVALID_REQUEST, "not a request: \"method\" must be an object".into())),
        None => {
            let (method, params) = single_entry(body)
                .map_err(|why| fail(id.clone(), INVALID_REQUEST, format!("not a request: the request {why}")))?;
            Ok(Request { id, method, params, dialect: Dialect::Flat })
        }
    }
}

/// The one `name: value` pair of an object, or why there is not exactly one.
fn single_entry(map: Map<String, Value>) -> Result<(String, Value), String> {
    let mut entries = map.into_iter();
    match (entries.next(), entries.next()) {
        (Some(entry), None) => Ok(entry),
        (None, _) => Err("names no method".into()),
        (Some((a, _)), Some((b, _))) => Err(format!("names more than one method (\"{a}\", \"{b}\")")),
    }
}

/// Strings at least this long in a response (a `readFile` of a big file)
/// are escaped piece by piece as they are sent (see `json_text::Piecewise`).
pub const LONG_STRING_BYTES: usize = 256 * 1024;

/// A successful response in the request's own dialect. The result is moved
/// into the envelope, not copied (`json!` would clone an interpolated value:
/// a 20 MB file twice).
pub fn encode_response(id: &Value, method: &str, dialect: Dialect, result: Value) -> JsonText {
    let key = match dialect {
        Dialect::Flat => method,
        Dialect::Wrapped => "result",
    };
    let mut body = Map::with_capacity(2);
    body.insert("id".into(), id.clone());
    body.insert(key.into(), result);
    let mut top = Map::with_capacity(1);
    top.insert("serverResponse".into(), Value::Object(body));
    json_text::encode(Value::Object(top), LONG_STRING_BYTES)
}

/// An error response; the same in both dialects.
pub fn encode_error(id: &Value, error: &RpcError) -> String {
    json!({
        "serverResponse": {
            "id": id,
            "error": { "code": error.code, "message": error.message },
        }
    })
    .to_string()
}

/// A server notification in the given dialect.
pub fn encode_notification(name: &str, dialect: Dialect, payload: &Value) -> String {
    let mut inner = Map::with_capacity(1);
    inner.insert(name.into(), payload.clone());
    let body = match dialect {
        Dialect::Flat => Value::Object(inner),
        Dialect::Wrapped => json!({ "method": inner }),
    };
    json!({ "serverNotification": body }).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flat_request_decodes_and_answers_keyed_by_method() {
        let req = decode_request(r#"{"clientRequest":{"id":"7","ping":{"message":"hi"}}}"#).unwrap();
        assert_eq!(req.method, "ping");
        assert_eq!(req.dialect, Dialect::Flat);
        assert_eq!(req.params, json!({"message":"hi"}));
        let out: Value =
            serde_json::from_str(&encode_response(&req.id, "ping", req.dialect, json!({"message":"hi"})).into_string())
                .unwrap();
        assert_eq!(out, json!({"serverResponse":{"id":"7","ping":{"message":"hi"}}}));
    }

    #[test]
    fn wrapped_request_decodes_and_answers_with_result() {
        let req = decode_request(r#"{"clientRequest":{"id":"r1","method":{"readFile":{"path":"a"}}}}"#).unwrap();
        assert_eq!((req.method.as_str(), req.dialect), ("readFile", Dialect::Wrapped));
        let out: Value = serde_json::from_str(
            &encode_response(&req.id, "readFile", req.dialect, json!({"content":"x"})).into_string(),
        )
        .unwrap();
        assert_eq!(out, json!({"serverResponse":{"id":"r1","result":{"content":"x"}}}));
    }

    #[test]
    fn numeric_ids_are_echoed_as_numbers() {
        let req = decode_request(r#"{"clientRequest":{"id":12,"ping":{}}}"#).unwrap();
        assert_eq!(req.id, json!(12));
    }

    #[test]
    fn huge_numeric_ids_are_echoed_as_the_same_number() {
        // Found by fuzzing: without correctly rounded float parsing, the
        // echoed 1.87490799e107 read back one ulp lower than the id sent.
        let digits = format!("187490799{}977142714", "0".repeat(90));
        for text in [
            format!(r#"{{"clientRequest":{{"id":{digits},"ping":{{}}}}}}"#),
            format!(r#"{{"clientRequest":{{"id":{digits}}}}}"#),
        ] {
            let id = match decode_request(&text) {
                Ok(req) => req.id,
                Err(failure) => failure.id,
            };
            let sent: Value = serde_json::from_str(&digits).unwrap();
            assert_eq!(id, sent);
            let frame = encode_error(&id, &RpcError::new(INVALID_REQUEST, "x"));
            let echoed: Value = serde_json::from_str(&frame).unwrap();
            assert_eq!(echoed["serverResponse"]["id"], sent, "{frame}");
        }
    }

    #[test]
    fn malformed_json_is_a_parse_error_with_null_id() {
        let err = decode_request("{nope").unwrap_err();
        assert_eq!(err.error.code, PARSE_ERROR);
        assert_eq!(err.id, Value::Null);
        assert!(err.error.message.contains("malformed JSON"));
    }

    #[test]
    fn non_requests_are_invalid_requests() {
        for text in [
            "[]",
            "3",
            "\"x\"",
            "{}",
            r#"{"foo":1}"#,
            r#"{"clientRequest":[]}"#,
            r#"{"clientRequest":{"ping":{}}}"#,
            r#"{"clientRequest":{"id":{},"ping":{}}}"#,
        ] {
            let err = decode_request(text).unwrap_err();
            assert_eq!(err.error.code, INVALID_REQUEST, "{text}");
        }
    }

    #[test]
    fn missing_or_ambiguous_method_keeps_the_id() {
        let err = decode_request(r#"{"clientRequest":{"id":"1"}}"#).unwrap_err();
        assert_eq!((err.error.code, err.id.clone()), (INVALID_REQUEST, json!("1")));
        assert!(err.error.message.contains("names no method"));
        let err = decode_request(r#"{"clientRequest":{"id":"2","ping":{},"readFile":{}}}"#).unwrap_err();
        assert_eq!((err.error.code, err.id.clone()), (INVALID_REQUEST, json!("2")));
        assert!(err.error.message.contains("more than one method"));
        let err = decode_request(r#"{"clientRequest":{"id":"3","method":{}}}"#).unwrap_err();
        assert_eq!(err.id, json!("3"));
    }

    #[test]
    fn errors_have_numeric_code_and_message() {
        let out: Value =
            serde_json::from_str(&encode_error(&json!("9"), &RpcError::new(METHOD_NOT_FOUND, "unknown method 'x'")))
                .unwrap();
        assert_eq!(out, json!({"serverResponse":{"id":"9","error":{"code":-32601,"message":"unknown method 'x'"}}}));
    }

    #[test]
    fn notifications_in_both_dialects() {
        let flat: Value =
            serde_json::from_str(&encode_notification("pluginMetadata", Dialect::Flat, &json!({"version":"1"})))
                .unwrap();
        assert_eq!(flat, json!({"serverNotification":{"pluginMetadata":{"version":"1"}}}));
        let wrapped: Value =
            serde_json::from_str(&encode_notification("selectionChanged", Dialect::Wrapped, &json!({"path":"/a"})))
                .unwrap();
        assert_eq!(wrapped, json!({"serverNotification":{"method":{"selectionChanged":{"path":"/a"}}}}));
    }
}
