//! The tokio half of each request: decode, resolve paths, do file I/O and
//! JSON here, and cross to the main thread only to read or change the editor.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use serde_json::{json, Value};

use super::calls::{parse_call, Call, EditSpec};
use super::protocol::{decode_request, encode_error, encode_response, RpcError, INTERNAL_ERROR};
use super::server::{note_dialect, Client};
use crate::core::checked_file::{self, Use, Wanted};
use crate::core::edit::apply_range;
use crate::core::editor::EditorError;
use crate::core::file_error::FileError;
use crate::core::uri::{file_uri_to_path, parse_line_fragment, path_to_file_uri, scheme, split_fragment};
use crate::serve::budget::Held;
use crate::serve::hub::Hub;
use crate::serve::json_text::JsonText;

/// Answers one TEXT frame of `client` with the text of the response.
/// `held` (the request's place and bytes) is released when the request
/// goes on to wait for the user's review.
pub async fn answer(text: &str, hub: &Arc<Hub>, client: &Client, held: &mut Held) -> JsonText {
    let request = match decode_request(text) {
        Ok(request) => request,
        Err(failure) => return encode_error(&failure.id, &failure.error).into(),
    };
    note_dialect(&client.dialect, request.dialect);
    let outcome = match parse_call(&request.method, request.params) {
        Ok(call) => handle(call, hub, client, held).await,
        Err(e) => Err(e),
    };
    match outcome {
        Ok(result) => encode_response(&request.id, &request.method, request.dialect, result),
        Err(error) => {
            crate::log_debug!("{} failed: {}", request.method, error.message);
            encode_error(&request.id, &error).into()
        }
    }
}

async fn handle(call: Call, hub: &Arc<Hub>, client: &Client, held: &mut Held) -> Result<Value, RpcError> {
    match call {
        Call::Ping { message } => Ok(json!({ "message": message })),
        Call::Authenticate => Ok(json!({ "authenticated": true })),
        Call::ReadFile { path } => read_file(hub, &path).await,
        Call::EditFile { path, edit } => edit_file(hub, client, held, &path, edit).await,
        Call::GetDiagnostics { path } => get_diagnostics(hub, path.as_deref()).await,
        Call::OpenUri { uri } => open_uri(hub, &uri).await,
    }
}

pub(super) fn editor_error(e: EditorError) -> RpcError {
    RpcError::new(INTERNAL_ERROR, e.to_string())
}

/// A `success: false` answer: the request was fine, the file or the
/// editor refused it (`core::file_error::FileError` and the like).
pub(super) fn failure(message: impl std::fmt::Display) -> Value {
    json!({ "success": false, "message": message.to_string() })
}

/// An absolute, lexically normalised path: relative ones resolve against the
/// first workspace folder.
fn resolve(hub: &Hub, path: &str) -> PathBuf {
    let p = Path::new(path);
    let joined = if p.is_absolute() {
        p.to_path_buf()
    } else {
        let base = hub.workspace_folders().into_iter().next().unwrap_or_else(|| "/".into());
        Path::new(&base).join(p)
    };
    let mut out = PathBuf::new();
    for part in joined.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

async fn read_file(hub: &Hub, path: &str) -> Result<Value, RpcError> {
    let abs = resolve(hub, path);
    match hub.files().read(&abs).await.map_err(editor_error)? {
        Ok(content) => Ok(object([
            ("success", Value::Bool(true)),
            ("content", Value::String(content)),
            ("encoding", "utf-8".into()),
        ])),
        Err(why) => Ok(failure(why)),
    }
}

/// `editFile`: the change goes into the file's buffer (loaded for it if
/// needed) as one undo step, written as the user's `:w` would write it
/// (`core::file_ops`).
async fn edit_file(hub: &Hub, client: &Client, held: &mut Held, path: &str, edit: EditSpec) -> Result<Value, RpcError> {
    let abs = resolve(hub, path);
    if hub.options.review_edit_file {
        return super::reviewed_edit::edit_file(hub, client.owner, held, &abs, edit).await;
    }
    let change = match edit {
        EditSpec::Full(text) => Change::Full(Arc::new(text)),
        EditSpec::Range { start, end, new_text } => Change::Range { start, end, new_text },
    };
    let new_len = match &change {
        Change::Full(text) => text.len(),
        Change::Range { new_text, .. } => new_text.len(),
    };
    let new_text = |snapshot: &crate::core::buffer::BufferText| match &change {
        Change::Full(text) => Ok(text.clone()),
        // Offsets into the text readFile answers.
        Change::Range { start, end, new_text } => apply_range(&snapshot.clone().file_text(), *start, *end, new_text)
            .map(Arc::new)
            .map_err(|source| FileError::Range { path: abs.clone(), source }),
    };
    Ok(match hub.files().edit(&abs, new_len as u64, new_text).await.map_err(editor_error)? {
        Ok(edited) if !edited.written => {
            json!({ "success": true, "message": format!("{} already has this text", abs.display()), "appliedChanges": false })
        }
        Ok(edited) => {
            json!({ "success": true, "message": format!("Edited {}", abs.display()), "appliedChanges": edited.changed })
        }
        Err(why) => failure(why),
    })
}

/// An `editFile`'s change, the whole text shared (never copied) by the
/// edit's attempts and the lines it puts into the buffer.
enum Change {
    Full(Arc<String>),
    Range { start: u64, end: u64, new_text: String },
}

/// A JSON object that owns its values: `json!` copies every value it
/// interpolates (for `readFile`, the whole file: 3-15 ms for 20 MB, most of
/// it fresh pages).
fn object<const N: usize>(entries: [(&str, Value); N]) -> Value {
    Value::Object(entries.into_iter().map(|(key, value)| (key.to_owned(), value)).collect())
}

fn severity_name(severity: u8) -> &'static str {
    match severity {
        1 => "error",
        2 => "warning",
        3 => "info",
        _ => "hint",
    }
}

async fn get_diagnostics(hub: &Hub, path: Option<&str>) -> Result<Value, RpcError> {
    let under = match path {
        Some(p) if !p.is_empty() => Some(hub.files().names_of(&resolve(hub, p)).await),
        _ => None,
    };
    let raw = hub.editor.diagnostics(under).await.map_err(editor_error)?;
    let mut entries: Vec<(PathBuf, Vec<Value>)> = Vec::new();
    for d in raw {
        let (start, end) = (d.utf16_start(), d.utf16_end());
        let item = json!({
            "range": {
                "startLine": start.0,
                "startCharacter": start.1,
                "endLine": end.0,
                "endCharacter": end.1,
            },
            "severity": severity_name(d.severity),
            "description": d.message,
            "source": d.source,
            "lineContent": String::from_utf8_lossy(&d.line),
            "startOffset": d.line_offset + d.col,
            "endOffset": d.end_line_offset + d.end_col,
        });
        match entries.iter_mut().find(|(p, _)| *p == d.path) {
            Some((_, list)) => list.push(item),
            None => entries.push((d.path, vec![item])),
        }
    }
    let entries: Vec<Value> = entries
        .into_iter()
        .map(|(path, diagnostics)| {
            object([("uri", Value::String(path_to_file_uri(&path))), ("diagnostics", Value::Array(diagnostics))])
        })
        .collect();
    Ok(object([("entries", Value::Array(entries))]))
}

async fn open_uri(hub: &Hub, uri: &str) -> Result<Value, RpcError> {
    let opened = match scheme(uri).as_deref() {
        Some("file") => {
            let path = match file_uri_to_path(uri) {
                Ok(p) => p,
                Err(e) => return Ok(failure(format!("cannot open {uri}: {e}"))),
            };
            // Checked here, off the main thread (`checked_file`): opening a
            // FIFO there would block Neovim until a writer comes, a device
            // or a procfs file can be endless. The target of a symlink decides.
            let wanted = Wanted { directory_ok: true, read_through: true };
            let checked = match checked_file::check(&path, hub.options.max_file_bytes, wanted).await {
                Ok(checked) => checked,
                Err(why) => return Ok(failure(why.message(&path, Use::Open))),
            };
            let selection = split_fragment(uri).1.and_then(parse_line_fragment);
            hub.editor.open_file(checked, selection).await
        }
        Some("http" | "https") => hub.editor.open_url(uri.to_owned()).await,
        Some(other) => {
            return Ok(failure(format!("unsupported URI scheme '{other}:' (file, http and https are supported)")))
        }
        None => return Ok(failure(format!("not a URI: '{uri}'"))),
    };
    match opened {
        Ok(()) => Ok(json!({ "success": true })),
        Err(e) => Ok(failure(e.refusal().map_err(editor_error)?)),
    }
}

/// The request paths against an in-memory editor (`core::fake_editor`):
/// what reaches the editor, what reaches the disk, what the agent is told.
#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use serde_json::{json, Value};

    use super::answer;
    use crate::core::editor::RawDiagnostic;
    use crate::core::fake_editor::{unix_format, Call, FakeEditor};
    use crate::core::filetext::LineEnd;
    use crate::serve::budget::Held;
    use crate::serve::hub::Hub;
    use crate::serve::options::ServerOptions;
    use crate::testutil::TempDir;

    struct Shared {
        hub: Arc<Hub>,
        client: crate::amp::server::Client,
    }

    impl std::ops::Deref for Shared {
        type Target = crate::core::published::EditorState;
        fn deref(&self) -> &Self::Target {
            &self.hub.state
        }
    }

    fn server(editor: Arc<FakeEditor>, workspace: &Path) -> Shared {
        let options =
            ServerOptions { workspace_folders: vec![workspace.to_string_lossy().into_owned()], ..Default::default() };
        let hub = Arc::new(Hub::new(options, editor));
        let client = crate::amp::server::test_client(&hub, workspace);
        Shared { hub, client }
    }

    /// Sends one request in the flat dialect; the result object (or the error).
    async fn call(shared: &Shared, method: &str, params: Value) -> Value {
        let request = json!({ "clientRequest": { "id": "1", method: params } }).to_string();
        let text = answer(&request, &shared.hub, &shared.client, &mut Held::default()).await.into_string();
        let reply: Value = serde_json::from_str(&text).unwrap();
        let body = &reply["serverResponse"];
        body.get(method).or_else(|| body.get("error")).cloned().unwrap_or(reply)
    }

    #[tokio::test]
    async fn read_of_a_file_no_buffer_has_goes_to_the_disk_alone() {
        let dir = TempDir::new("read-disk");
        std::fs::write(dir.0.join("a.txt"), b"one\r\ntwo\r\n").unwrap();
        let editor = Arc::new(FakeEditor::new(true));
        let shared = server(editor.clone(), &dir.0);
        shared.loaded_buffers.set(vec![]);
        let got = call(&shared, "readFile", json!({ "path": "a.txt" })).await;
        assert_eq!(got["success"], true);
        assert_eq!(got["content"], "one\r\ntwo\r\n");
        assert_eq!(editor.calls(), vec![], "the editor was asked nothing");
    }

    #[tokio::test]
    async fn read_of_a_loaded_file_answers_the_buffer_with_its_unsaved_text() {
        let dir = TempDir::new("read-buffer");
        let file = dir.0.join("a.txt");
        std::fs::write(&file, b"on disk\n").unwrap();
        let editor = Arc::new(FakeEditor::new(true));
        editor.open(&file, &["typed", "not saved"], true, unix_format());
        let shared = server(editor.clone(), &dir.0);
        shared.loaded_buffers.set(vec![file.clone()]);
        let got = call(&shared, "readFile", json!({ "path": file })).await;
        assert_eq!(got["content"], "typed\nnot saved\n");
        assert_eq!(editor.calls(), vec![Call::LoadedText]);
    }

    #[tokio::test]
    async fn edit_keeps_the_file_format_and_writes_through_the_rename_path() {
        let dir = TempDir::new("edit-crlf");
        let file = dir.0.join("a.txt");
        std::fs::write(&file, b"one\r\ntwo\r\n").unwrap();
        let editor = Arc::new(FakeEditor::new(true));
        let shared = server(editor.clone(), &dir.0);
        let got = call(&shared, "editFile", json!({ "path": file, "fullContent": "one\r\nTWO\r\nthree\r\n" })).await;
        assert_eq!((got["success"].clone(), got["appliedChanges"].clone()), (json!(true), json!(true)), "{got}");
        assert_eq!(std::fs::read(&file).unwrap(), b"one\r\nTWO\r\nthree\r\n");
        let buffer = editor.buffer(&file).unwrap();
        assert_eq!(
            (buffer.lines, buffer.format.line_end, buffer.modified),
            (vec!["one".into(), "TWO".into(), "three".into()], LineEnd::Dos, false)
        );
        assert_eq!(editor.calls(), vec![Call::TextForEdit, Call::ApplySlice, Call::Replace]);
        // The same text again: nothing is written, the file keeps its bytes and mtime.
        let before = std::fs::metadata(&file).unwrap().modified().unwrap();
        let again = call(&shared, "editFile", json!({ "path": file, "fullContent": "one\r\nTWO\r\nthree\r\n" })).await;
        assert_eq!(again["appliedChanges"], false, "{again}");
        assert_eq!(std::fs::metadata(&file).unwrap().modified().unwrap(), before);
    }

    #[tokio::test]
    async fn text_put_into_an_empty_file_ends_with_the_newline_neovim_writes() {
        // Neovim reads an empty file with 'endofline' set, and its own :w of
        // the same change writes "x\n": there was no final newline to take away.
        let dir = TempDir::new("edit-empty");
        let file = dir.0.join("empty.txt");
        for records in [true, false] {
            std::fs::write(&file, b"").unwrap();
            let shared = server(Arc::new(FakeEditor::new(records)), &dir.0);
            let got = call(&shared, "editFile", json!({ "path": file, "fullContent": "x" })).await;
            assert_eq!(got["success"], true, "{got}");
            assert_eq!(std::fs::read(&file).unwrap(), b"x\n", "records: {records}");
        }
        // Taking a newline away is still the agent's to do.
        let shared = server(Arc::new(FakeEditor::new(true)), &dir.0);
        std::fs::write(&file, b"x\n").unwrap();
        let got = call(&shared, "editFile", json!({ "path": file, "fullContent": "y" })).await;
        assert_eq!(got["success"], true, "{got}");
        assert_eq!(std::fs::read(&file).unwrap(), b"y");
    }

    #[tokio::test]
    async fn edit_without_the_file_record_is_written_by_the_editor() {
        let dir = TempDir::new("edit-write");
        let file = dir.0.join("a.txt");
        std::fs::write(&file, b"a\n").unwrap();
        let editor = Arc::new(FakeEditor::new(false));
        let shared = server(editor.clone(), &dir.0);
        let got = call(&shared, "editFile", json!({ "path": file, "fullContent": "b\n" })).await;
        assert_eq!(got["success"], true, "{got}");
        assert_eq!(std::fs::read(&file).unwrap(), b"b\n");
        assert_eq!(editor.calls(), vec![Call::TextForEdit, Call::ApplySlice, Call::WriteApplied]);
    }

    #[tokio::test]
    async fn an_edit_is_recomputed_while_the_user_types_and_given_up_after_three_tries() {
        let dir = TempDir::new("edit-typing");
        let file = dir.0.join("a.txt");
        std::fs::write(&file, b"a\n").unwrap();
        let editor = Arc::new(FakeEditor::new(true));
        let shared = server(editor.clone(), &dir.0);
        editor.type_meanwhile(2);
        let got = call(&shared, "editFile", json!({ "path": file, "fullContent": "b\n" })).await;
        assert_eq!(got["success"], true, "{got}");
        assert_eq!(editor.calls().iter().filter(|c| **c == Call::ApplySlice).count(), 3);
        editor.type_meanwhile(3);
        let got = call(&shared, "editFile", json!({ "path": file, "fullContent": "c\n" })).await;
        assert_eq!(got["success"], false);
        assert!(got["message"].as_str().unwrap().contains("kept changing"), "{got}");
        assert_eq!(std::fs::read(&file).unwrap(), b"b\n", "nothing half-done");
    }

    #[tokio::test]
    async fn edits_the_editor_would_refuse_are_refused_before_anything_changes() {
        let dir = TempDir::new("edit-refused");
        let file = dir.0.join("ro.txt");
        std::fs::write(&file, b"a\n").unwrap();
        let editor = Arc::new(FakeEditor::new(true));
        editor.open(&file, &["a"], false, crate::core::buffer::BufferFormat { readonly: true, ..unix_format() });
        let shared = server(editor.clone(), &dir.0);
        let got = call(&shared, "editFile", json!({ "path": file, "fullContent": "b\n" })).await;
        assert_eq!(got["success"], false);
        assert!(got["message"].as_str().unwrap().contains("'readonly'"), "{got}");
        let fifo = dir.0.join("pipe");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        for method in ["readFile", "editFile"] {
            let got = call(&shared, method, json!({ "path": fifo, "fullContent": "x" })).await;
            assert!(got["message"].as_str().unwrap().contains("FIFO"), "{method}: {got}");
        }
        assert_eq!(std::fs::read(&file).unwrap(), b"a\n");
        assert!(!editor.calls().iter().any(|c| matches!(c, Call::ApplySlice | Call::WriteApplied)));
    }

    #[tokio::test]
    async fn diagnostics_columns_become_utf16_and_entries_group_by_file() {
        let dir = TempDir::new("diagnostics");
        let file = dir.0.join("a.rs");
        let editor = Arc::new(FakeEditor::new(true));
        let line = "é😀x".as_bytes().to_vec();
        editor.set_diagnostics(vec![RawDiagnostic {
            path: file.clone(),
            lnum: 0,
            col: 6, // after "é😀" (2 + 4 bytes)
            end_lnum: 0,
            end_col: 7,
            severity: 2,
            message: "m".into(),
            source: Some("s".into()),
            line: line.clone(),
            end_line: line,
            line_offset: 0,
            end_line_offset: 0,
        }]);
        let shared = server(editor.clone(), &dir.0);
        let got = call(&shared, "getDiagnostics", json!({ "path": file })).await;
        let d = &got["entries"][0]["diagnostics"][0];
        assert_eq!(
            (d["range"]["startCharacter"].clone(), d["range"]["endCharacter"].clone()),
            (json!(3), json!(4)),
            "{got}"
        );
        assert_eq!(d["severity"], "warning");
        assert!(got["entries"][0]["uri"].as_str().unwrap().starts_with("file:///"));
    }

    #[tokio::test]
    async fn open_uri_refuses_special_files_without_the_editor_and_passes_the_line() {
        let dir = TempDir::new("open");
        let file = dir.0.join("a.txt");
        std::fs::write(&file, b"a\n").unwrap();
        let editor = Arc::new(FakeEditor::new(true));
        let shared = server(editor.clone(), &dir.0);
        let got = call(&shared, "openURI", json!({ "uri": "file:///dev/null" })).await;
        assert_eq!(got["success"], false, "{got}");
        assert_eq!(editor.calls(), vec![]);
        let uri = format!("{}#L3", crate::core::uri::path_to_file_uri(&file));
        let got = call(&shared, "openURI", json!({ "uri": uri })).await;
        assert_eq!(got["success"], true, "{got}");
        assert!(matches!(&editor.calls()[..], [Call::OpenFile(p, Some(sel))] if *p == file && sel.start_line == 3));
    }

    #[tokio::test]
    async fn an_editor_that_is_gone_is_an_internal_error_not_a_hang() {
        let dir = TempDir::new("gone");
        let file = dir.0.join("a.txt");
        std::fs::write(&file, b"a\n").unwrap();
        let editor = Arc::new(FakeEditor::new(true));
        editor.go_away();
        let shared = server(editor.clone(), &dir.0);
        let got = call(&shared, "editFile", json!({ "path": file, "fullContent": "b\n" })).await;
        assert_eq!(got["code"], -32603, "{got}");
        assert!(got["message"].as_str().unwrap().contains("shutting down"));
        assert_eq!(std::fs::read(&file).unwrap(), b"a\n");
    }
}
