//! The tokio half of each request: decode, resolve paths, do file I/O and
//! JSON here, and cross to the main thread only to read or change the editor.

use std::path::{Component, Path, PathBuf};
use std::sync::atomic::AtomicU8;
use std::sync::Arc;

use serde_json::{json, Value};

use super::calls::{parse_call, Call, EditSpec};
use super::connection::note_dialect;
use super::edit::{apply_range, line_hunks, lines_to_text, text_to_lines, LineFormat};
use super::json_text::JsonText;
use super::protocol::{decode_request, encode_error, encode_response, RpcError, INTERNAL_ERROR};
use super::server::Shared;
use super::uri::{file_uri_to_path, parse_line_fragment, path_to_file_uri, scheme, split_fragment};
use crate::bridge::{on_main, BridgeError};
use crate::editor::buffers::{self, ApplyError};
use crate::editor::{diagnostics, open};
use crate::text::byte_to_utf16_col;
use crate::{fsutil, log};

/// Answers one TEXT frame with the text of the response.
pub async fn answer(text: &str, shared: &Arc<Shared>, dialect: &AtomicU8) -> JsonText {
    let request = match decode_request(text) {
        Ok(request) => request,
        Err(failure) => return encode_error(&failure.id, &failure.error).into(),
    };
    note_dialect(dialect, request.dialect);
    let outcome = match parse_call(&request.method, request.params) {
        Ok(call) => handle(call, shared).await,
        Err(e) => Err(e),
    };
    match outcome {
        Ok(result) => encode_response(&request.id, &request.method, request.dialect, result),
        Err(error) => {
            log::debug(format!("{} failed: {}", request.method, error.message));
            encode_error(&request.id, &error).into()
        }
    }
}

async fn handle(call: Call, shared: &Arc<Shared>) -> Result<Value, RpcError> {
    match call {
        Call::Ping { message } => Ok(json!({ "message": message })),
        Call::Authenticate => Ok(json!({ "authenticated": true })),
        Call::ReadFile { path } => read_file(shared, &path).await,
        Call::EditFile { path, edit } => edit_file(shared, &path, edit).await,
        Call::GetDiagnostics { path } => get_diagnostics(shared, path.as_deref()).await,
        Call::OpenUri { uri } => open_uri(&uri).await,
    }
}

fn bridge_error(e: BridgeError) -> RpcError {
    RpcError::new(INTERNAL_ERROR, e.to_string())
}

fn failure(message: impl Into<String>) -> Value {
    json!({ "success": false, "message": message.into() })
}

/// An absolute, lexically normalised path: relative ones resolve against the
/// first workspace folder.
fn resolve(shared: &Shared, path: &str) -> PathBuf {
    let p = Path::new(path);
    let joined = if p.is_absolute() {
        p.to_path_buf()
    } else {
        let base = shared.workspace_folders().into_iter().next().unwrap_or_else(|| "/".into());
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

/// The path and, if different, its canonical form (buffer names may be either).
async fn candidates(path: PathBuf) -> Vec<PathBuf> {
    let canonical = tokio::fs::canonicalize(&path).await.ok();
    let mut out = vec![path];
    if let Some(c) = canonical {
        if c != out[0] {
            out.push(c);
        }
    }
    out
}

async fn read_file(shared: &Arc<Shared>, path: &str) -> Result<Value, RpcError> {
    let abs = resolve(shared, path);
    let paths = candidates(abs.clone()).await;
    // No buffer has it: the disk has the text, no need to wait for the main thread.
    let loaded = if shared.maybe_loaded(&paths) {
        on_main(move || buffers::loaded_text(paths)).await.map_err(bridge_error)?
    } else {
        Ok(None)
    };
    let content = match loaded {
        Ok(Some(snapshot)) => snapshot.file_text(),
        Ok(None) => match tokio::fs::read(&abs).await {
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(text) => text,
                Err(_) => return Ok(failure(format!("{} is not UTF-8 text", abs.display()))),
            },
            Err(e) => return Ok(failure(io_message(&abs, &e))),
        },
        Err(e) => return Ok(failure(e)),
    };
    Ok(object([("success", Value::Bool(true)), ("content", Value::String(content)), ("encoding", "utf-8".into())]))
}

/// A JSON object that owns its values: `json!` copies every value it
/// interpolates (for `readFile`, the whole file: 3-15 ms for 20 MB, most of
/// it fresh pages).
fn object<const N: usize>(entries: [(&str, Value); N]) -> Value {
    Value::Object(entries.into_iter().map(|(key, value)| (key.to_owned(), value)).collect())
}

fn io_message(path: &Path, e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => format!("file not found: {}", path.display()),
        std::io::ErrorKind::PermissionDenied => format!("permission denied: {}", path.display()),
        _ if path.is_dir() => format!("{} is a directory", path.display()),
        _ => format!("cannot read {}: {e}", path.display()),
    }
}

/// How often an edit is recomputed when the user types between the
/// snapshot and the change.
const EDIT_ATTEMPTS: usize = 3;

async fn edit_file(shared: &Arc<Shared>, path: &str, edit: EditSpec) -> Result<Value, RpcError> {
    let abs = resolve(shared, path);
    match tokio::fs::metadata(&abs).await {
        Ok(meta) if meta.is_file() => {}
        Ok(_) => return Ok(failure(format!("{} is not a regular file", abs.display()))),
        Err(e) => return Ok(failure(io_message(&abs, &e))),
    }
    let paths = candidates(abs.clone()).await;
    for _ in 0..EDIT_ATTEMPTS {
        let want = paths.clone();
        let snapshot = match on_main(move || buffers::text_for_edit(want)).await.map_err(bridge_error)? {
            Ok(s) => s,
            Err(e) => return Ok(failure(e)),
        };
        let (bufnr, tick, format) = (snapshot.bufnr, snapshot.changedtick, snapshot.format);
        let current = snapshot.file_text();
        let new_text = match &edit {
            EditSpec::Full(text) => text.clone(),
            EditSpec::Range { start, end, new_text } => match apply_range(&current, *start, *end, new_text) {
                Ok(t) => t,
                Err(why) => return Ok(failure(format!("cannot apply the edit to {}: {why}", abs.display()))),
            },
        };
        let (new_lines, final_newline) = text_to_lines(&new_text);
        let (old_lines, _) = text_to_lines(&current);
        let hunks = line_hunks(&old_lines, &new_lines);
        let changed = !hunks.is_empty() || final_newline != format.final_newline;
        let applied = on_main(move || buffers::apply(bufnr, tick, hunks, final_newline))
            .await
            .map_err(bridge_error)?;
        let new_tick = match applied {
            Ok(t) => t,
            Err(ApplyError::Changed) => continue,
            Err(ApplyError::Failed(e)) => return Ok(failure(e)),
        };
        let format = LineFormat { crlf: format.crlf, final_newline };
        let file_text = lines_to_text(&new_lines, format);
        let target = abs.clone();
        let written = tokio::task::spawn_blocking(move || fsutil::atomic_write(&target, file_text.as_bytes()))
            .await
            .map_err(|e| RpcError::new(INTERNAL_ERROR, format!("writer task failed: {e}")))?;
        if let Err(e) = written {
            // The buffer has the change and stays modified: nothing is lost.
            return Ok(failure(format!("edited the buffer but could not save {}: {e}", abs.display())));
        }
        // Our own write is not an outside change.
        shared.note_written(&abs);
        on_main(move || buffers::mark_saved(bufnr, new_tick))
            .await
            .map_err(bridge_error)?
            .map_err(|e| RpcError::new(INTERNAL_ERROR, e))?;
        return Ok(json!({
            "success": true,
            "message": format!("Edited {}", abs.display()),
            "appliedChanges": changed,
        }));
    }
    Ok(failure(format!("{} kept changing while the edit was applied; try again", abs.display())))
}

fn severity_name(severity: u8) -> &'static str {
    match severity {
        1 => "error",
        2 => "warning",
        3 => "info",
        _ => "hint",
    }
}

async fn get_diagnostics(shared: &Arc<Shared>, path: Option<&str>) -> Result<Value, RpcError> {
    let under = match path {
        Some(p) if !p.is_empty() => Some(candidates(resolve(shared, p)).await),
        _ => None,
    };
    let raw = on_main(move || diagnostics::collect(under))
        .await
        .map_err(bridge_error)?
        .map_err(|e| RpcError::new(INTERNAL_ERROR, e))?;
    let mut entries: Vec<(PathBuf, Vec<Value>)> = Vec::new();
    for d in raw {
        let item = json!({
            "range": {
                "startLine": d.lnum,
                "startCharacter": byte_to_utf16_col(&d.line, d.col),
                "endLine": d.end_lnum,
                "endCharacter": byte_to_utf16_col(&d.end_line, d.end_col),
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

/// What a file is when it is neither a regular file nor a directory.
fn not_openable(kind: &std::fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_file() || kind.is_dir() {
        None
    } else if kind.is_fifo() {
        Some("a FIFO (named pipe)")
    } else if kind.is_socket() {
        Some("a socket")
    } else if kind.is_char_device() {
        Some("a character device")
    } else if kind.is_block_device() {
        Some("a block device")
    } else {
        Some("not a regular file")
    }
}

async fn open_uri(uri: &str) -> Result<Value, RpcError> {
    let opened = match scheme(uri).as_deref() {
        Some("file") => {
            let path = match file_uri_to_path(uri) {
                Ok(p) => p,
                Err(e) => return Ok(failure(format!("cannot open {uri}: {e}"))),
            };
            // Checked here, off the main thread: opening a FIFO there would
            // block Neovim until a writer comes (forever), and a device or a
            // socket is nothing to edit. The target of a symlink decides.
            match tokio::fs::metadata(&path).await {
                Ok(meta) => {
                    if let Some(kind) = not_openable(&meta.file_type()) {
                        return Ok(failure(format!(
                            "cannot open {}: it is {kind}; only regular files and directories are opened",
                            path.display()
                        )));
                    }
                }
                Err(e) => return Ok(failure(io_message(&path, &e))),
            }
            let selection = split_fragment(uri).1.and_then(parse_line_fragment);
            on_main(move || open::open_path(path, selection)).await
        }
        Some("http" | "https") => {
            let url = uri.to_owned();
            on_main(move || open::open_external(url)).await
        }
        Some(other) => {
            return Ok(failure(format!("unsupported URI scheme '{other}:' (file, http and https are supported)")))
        }
        None => return Ok(failure(format!("not a URI: '{uri}'"))),
    };
    match opened.map_err(bridge_error)? {
        Ok(()) => Ok(json!({ "success": true })),
        Err(e) => Ok(failure(e)),
    }
}
