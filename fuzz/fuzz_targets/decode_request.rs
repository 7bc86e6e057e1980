//! Fuzzes what the server does with one inbound TEXT frame before it reaches
//! the editor: `decode_request` (JSON, envelopes in both dialects), then
//! `parse_call` (method dispatch and params checking), then the pure parts of
//! the handlers (`editFile` byte ranges, `openURI` URIs and `#L` fragments)
//! and the encoding of the response or error that would be sent back.
//!
//! Besides "never panics", it checks that every reply is one JSON object that
//! carries the request's id, and that errors have a numeric JSON-RPC code.
#![no_main]

use amp_core::amp::calls::{parse_call, Call, EditSpec};
use amp_core::amp::protocol::{
    decode_request, encode_error, encode_response, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR,
};
use amp_core::core::edit::apply_range;
use amp_core::core::uri::{file_uri_to_path, parse_line_fragment, path_to_file_uri, split_fragment};
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};

/// A buffer's text with every UTF-8 width, for `editFile` ranges.
const TEXT: &str = "ascii\né→😀\n\tend\n";

fn reply_id(frame: &str) -> Value {
    let v: Value = serde_json::from_str(frame).expect("reply is JSON");
    let obj = v.as_object().expect("reply is an object");
    assert_eq!(obj.len(), 1, "reply has one top-level key: {frame}");
    obj["serverResponse"]["id"].clone()
}

fuzz_target!(|data: &[u8]| {
    // tungstenite rejects non-UTF-8 TEXT frames before they reach decoding.
    let Ok(text) = std::str::from_utf8(data) else { return };
    let request = match decode_request(text) {
        Ok(request) => request,
        Err(failure) => {
            assert!(matches!(failure.error.code, PARSE_ERROR | INVALID_REQUEST), "{:?}", failure.error);
            assert!(failure.id.is_null() || failure.id.is_string() || failure.id.is_number());
            let frame = encode_error(&failure.id, &failure.error);
            assert_eq!(reply_id(&frame), failure.id);
            return;
        }
    };
    assert!(request.id.is_string() || request.id.is_number(), "id {:?}", request.id);
    let (id, method, dialect) = (request.id.clone(), request.method.clone(), request.dialect);
    match parse_call(&request.method, request.params) {
        Err(error) => {
            assert!(matches!(error.code, INVALID_PARAMS | METHOD_NOT_FOUND), "{error:?}");
            assert!(!error.message.is_empty());
            let frame = encode_error(&id, &error);
            assert_eq!(reply_id(&frame), id);
        }
        Ok(call) => {
            match call {
                Call::EditFile { edit: EditSpec::Range { start, end, new_text }, .. } => {
                    if let Ok(out) = apply_range(TEXT, start, end, &new_text) {
                        // Only in-range edits on char boundaries are applied.
                        assert!(start <= end && end as usize <= TEXT.len());
                        assert_eq!(out.len(), TEXT.len() - (end - start) as usize + new_text.len());
                    }
                }
                Call::OpenUri { uri } => {
                    if let Ok(path) = file_uri_to_path(&uri) {
                        assert!(path.is_absolute());
                        let again = file_uri_to_path(&path_to_file_uri(&path)).expect("re-encoded URI decodes");
                        assert_eq!(again.as_os_str(), path.as_os_str());
                    }
                    if let Some(fragment) = split_fragment(&uri).1 {
                        if let Some(sel) = parse_line_fragment(fragment) {
                            assert!(sel.start_line >= 1);
                        }
                    }
                }
                _ => {}
            }
            let frame = encode_response(&id, &method, dialect, json!({ "success": true })).into_string();
            assert_eq!(reply_id(&frame), id);
        }
    }
});
