//! The tokio half of each request: decode, resolve paths, do file I/O and
//! JSON here, and cross to the main thread only to read or change the editor.

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::AtomicU8;
use std::sync::Arc;

use serde_json::{json, Value};

use super::calls::{parse_call, Call, EditSpec};
use super::connection::note_dialect;
use crate::core::edit::apply_range;
use super::json_text::JsonText;
use super::protocol::{decode_request, encode_error, encode_response, RpcError, INTERNAL_ERROR};
use super::server::Shared;
use crate::core::uri::{file_uri_to_path, parse_line_fragment, path_to_file_uri, scheme, split_fragment};
use crate::nvim::bridge::{on_main, BridgeError};
use crate::nvim::buffers::{self, ApplyError, WritePlan};
use crate::nvim::file_record;
use crate::nvim::{diagnostics, open};
use crate::core::text::byte_to_utf16_col;
use crate::core::filetext::split_lines;
use crate::core::{fsutil, log};

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

/// The path, its canonical form, and the names of loaded buffers that are
/// the same file (opened through a symlink or another hard link): Neovim
/// itself knows a buffer by its file's identity, not only by its name.
async fn candidates(shared: &Shared, path: PathBuf) -> Vec<PathBuf> {
    let mut out = vec![path.clone()];
    if let Ok(c) = tokio::fs::canonicalize(&path).await {
        if c != path {
            out.push(c);
        }
    }
    if let Ok(meta) = tokio::fs::metadata(&path).await {
        let id = (meta.dev(), meta.ino());
        for name in shared.loaded_buffer_names() {
            if out.contains(&name) {
                continue;
            }
            if let Ok(m) = tokio::fs::metadata(&name).await {
                if (m.dev(), m.ino()) == id {
                    out.push(name);
                }
            }
        }
    }
    out
}

/// Refuses what is not a regular file before anything opens it: opening a
/// FIFO blocks until a writer comes, a device can be endless.
fn not_a_regular_file(path: &Path, meta: &std::fs::Metadata) -> Option<String> {
    let kind = meta.file_type();
    let what = if kind.is_dir() { Some("a directory") } else { special_kind(&kind) };
    what.map(|what| format!("{} is {what}: only regular files can be read or edited", path.display()))
}

/// What a file is when it is neither a regular file nor a directory.
fn special_kind(kind: &std::fs::FileType) -> Option<&'static str> {
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

fn too_big(path: &Path, size: u64, max: u64) -> String {
    format!(
        "{} is {size} bytes, more than the {max} bytes an agent may read or edit at once (edits.max_file_bytes)",
        path.display()
    )
}

/// How long reading one file may take before the request gives up.
const READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

async fn read_file(shared: &Arc<Shared>, path: &str) -> Result<Value, RpcError> {
    let abs = resolve(shared, path);
    let max = shared.options.max_file_bytes;
    let meta = tokio::fs::metadata(&abs).await;
    if let Some(why) = meta.as_ref().ok().and_then(|m| not_a_regular_file(&abs, m)) {
        return Ok(failure(why));
    }
    let paths = candidates(shared, abs.clone()).await;
    // No buffer has it: the disk has the text, no need to wait for the main thread.
    let loaded = if shared.maybe_loaded(&paths) {
        on_main(move || buffers::loaded_text(paths)).await.map_err(bridge_error)?
    } else {
        Ok(None)
    };
    let content = match loaded {
        Ok(Some(snapshot)) if snapshot.joined.len() as u64 > max => {
            return Ok(failure(too_big(&abs, snapshot.joined.len() as u64, max)))
        }
        Ok(Some(snapshot)) => snapshot.file_text(),
        Ok(None) => {
            let meta = match meta {
                Ok(m) => m,
                Err(e) => return Ok(failure(io_message(&abs, &e))),
            };
            if meta.len() > max {
                return Ok(failure(too_big(&abs, meta.len(), max)));
            }
            let read = tokio::time::timeout(READ_TIMEOUT, fsutil::read_regular(abs.clone(), max)).await;
            let bytes = match read {
                Ok(Ok(bytes)) => bytes,
                Ok(Err(e)) => return Ok(failure(io_message(&abs, &e))),
                Err(_) => return Ok(failure(format!("reading {} took too long", abs.display()))),
            };
            let options = crate::core::filetext::read_options();
            match crate::core::filetext::decode(&bytes, &options) {
                Ok(disk) => disk.written_text(false),
                Err(why) => return Ok(failure(format!("cannot read {} as text: {}", abs.display(), why.0))),
            }
        }
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

/// Why the file may not be written, as `:w` would refuse it (it has no
/// write permission bits, or this user may not write it).
fn not_writable(path: &Path, meta: &std::fs::Metadata) -> Option<String> {
    let no_write_bits = meta.permissions().mode() & 0o222 == 0;
    let denied = || {
        let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else { return true };
        // SAFETY: a valid NUL-terminated path; access() only reads it.
        unsafe { libc::access(c.as_ptr(), libc::W_OK) != 0 }
    };
    (no_write_bits || denied()).then(|| {
        format!(
            "{} is read-only (mode {:o}): the agent may not change it; make it writable (chmod u+w) to allow edits",
            path.display(),
            meta.permissions().mode() & 0o7777
        )
    })
}

/// Why the buffer may not take an agent's edit, as Neovim would refuse the
/// user's `:w` (or would lose someone's text).
fn refused_by_buffer(path: &Path, format: &buffers::BufferFormat) -> Option<String> {
    let path = path.display();
    if !format.is_file {
        Some(format!("{path} is open in a buffer that is not a file ('buftype')"))
    } else if format.readonly {
        Some(format!(
            "{path} is read-only in Neovim ('readonly'): the agent may not change it; :setlocal noreadonly in its buffer to allow edits"
        ))
    } else if format.conflict {
        Some(format!(
            "{path} changed on disk while its buffer has unsaved changes: settle that first (:Amp diff, :Amp take or :Amp keep)"
        ))
    } else {
        None
    }
}

/// Renamed into place when that keeps the file's identity (readers then see
/// the old or the new file, never a mix); written in place otherwise, as
/// Neovim's `'backupcopy'` "auto" decides.
async fn write_plan(path: &Path) -> std::io::Result<WritePlan> {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let target = std::fs::canonicalize(&path)?;
        if path != target && std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
            return Ok(WritePlan::InPlace);
        }
        if !fsutil::rename_keeps_identity(&target) {
            return Ok(WritePlan::InPlace);
        }
        Ok(WritePlan::Rename { target })
    })
    .await
    .map_err(std::io::Error::other)?
}

/// An edit whose bytes this side knows: the buffer takes the edit (one
/// main-thread job), the bytes go to a temp file beside the file (here), and
/// a second short job renames it into place and records it. A failure takes
/// the edit back unless the user typed since.
#[allow(clippy::too_many_arguments)]
async fn edit_then_replace(
    bufnr: i32,
    tick: u32,
    hunks: Vec<crate::core::edit::Hunk>,
    final_eol: buffers::FinalEol,
    autocmds: &'static str,
    stamp: buffers::FileStamp,
    bytes: Vec<u8>,
    target: PathBuf,
) -> Result<Result<(), ApplyError>, RpcError> {
    let new_tick = match on_main(move || buffers::apply(bufnr, tick, &hunks, final_eol)).await.map_err(bridge_error)? {
        Ok(t) => t,
        Err(e) => return Ok(Err(e)),
    };
    let beside = target.clone();
    let tmp = match tokio::task::spawn_blocking(move || fsutil::write_temp(&beside, &bytes)).await {
        Ok(Ok(tmp)) => tmp,
        Ok(Err(e)) => {
            let _ = on_main(move || buffers::undo_applied(bufnr, new_tick)).await;
            return Ok(Err(ApplyError::Failed(format!("cannot write beside {}: {e}", target.display()))));
        }
        Err(e) => return Err(RpcError::new(INTERNAL_ERROR, format!("writer task failed: {e}"))),
    };
    let t = tmp.clone();
    let replaced = on_main(move || buffers::replace_applied(bufnr, new_tick, autocmds, stamp, &t, &target)).await;
    let _ = tokio::fs::remove_file(&tmp).await; // renamed away, or a leftover
    let replaced = replaced.map_err(bridge_error)?;
    if replaced.is_err() {
        let _ = on_main(move || buffers::undo_applied(bufnr, new_tick)).await;
    }
    Ok(replaced)
}

/// The bytes `:w` writes once the edit is in the buffer: `lines`, the
/// buffer's format, and its final end-of-line as the edit leaves it
/// (`final_eol`; 'fixendofline' adds one unless the edit took it away).
/// `None` for an encoding only Neovim converts to.
fn disk_bytes(lines: &[&str], format: &buffers::BufferFormat, final_eol: buffers::FinalEol) -> Option<Vec<u8>> {
    let eol = final_eol.unwrap_or(format.eol);
    let fixeol = format.fixeol && final_eol != Some(false);
    let text = crate::core::filetext::written_text(lines.join("\n").into_bytes(), lines.is_empty(), format.line_end, eol || fixeol);
    crate::core::filetext::encode(text, format.encoding, format.bomb)
}

/// How often an edit is recomputed when the user types between the
/// snapshot and the change.
const EDIT_ATTEMPTS: usize = 3;

/// `editFile`: the change goes into the file's buffer (loaded for it if
/// needed) as one undo step, and Neovim's own `:write` saves it, so the
/// bytes on disk are the bytes the user's `:w` would write.
async fn edit_file(shared: &Arc<Shared>, path: &str, edit: EditSpec) -> Result<Value, RpcError> {
    let abs = resolve(shared, path);
    let max = shared.options.max_file_bytes;
    let meta = match tokio::fs::metadata(&abs).await {
        Ok(meta) => meta,
        Err(e) => return Ok(failure(io_message(&abs, &e))),
    };
    if let Some(why) = not_a_regular_file(&abs, &meta) {
        return Ok(failure(why));
    }
    if meta.len() > max {
        return Ok(failure(too_big(&abs, meta.len(), max)));
    }
    if let Some(why) = not_writable(&abs, &meta) {
        return Ok(failure(why));
    }
    let paths = candidates(shared, abs.clone()).await;
    // What a Neovim killed mid-save left beside the file goes, written or not.
    let beside = abs.clone();
    let _ = tokio::task::spawn_blocking(move || fsutil::remove_orphaned_temps_of(&beside)).await;
    for _ in 0..EDIT_ATTEMPTS {
        // A write by someone else that the watcher has not taken in yet: take
        // it in first (or learn that it conflicts with unsaved changes).
        shared.settle_files(&paths).await;
        let stamp = match tokio::fs::metadata(&abs).await {
            Ok(m) => (m.mtime(), m.mtime_nsec(), m.size(), m.ino()),
            Err(e) => return Ok(failure(io_message(&abs, &e))),
        };
        let want = paths.clone();
        let snapshot = match on_main(move || buffers::text_for_edit(want)).await.map_err(bridge_error)? {
            Ok(s) => s,
            Err(e) => return Ok(failure(e)),
        };
        let (bufnr, tick, format, modified) = (snapshot.bufnr, snapshot.changedtick, snapshot.format, snapshot.modified);
        if let Some(why) = refused_by_buffer(&abs, &format) {
            return Ok(failure(why));
        }
        let new_text = match &edit {
            EditSpec::Full(text) => text.clone(),
            // Offsets into the text readFile answers.
            EditSpec::Range { start, end, new_text } => match apply_range(&snapshot.clone().file_text(), *start, *end, new_text) {
                Ok(t) => t,
                Err(why) => return Ok(failure(format!("cannot apply the edit to {}: {why}", abs.display()))),
            },
        };
        if new_text.len() as u64 > max {
            return Ok(failure(too_big(&abs, new_text.len() as u64, max)));
        }
        let (new_lines, new_final_eol) = split_lines(&new_text, format.line_end);
        let hunks = match snapshot.hunks_to(&new_lines) {
            Ok(h) => h,
            Err(why) => return Ok(failure(format!("cannot edit {}: {why}", abs.display()))),
        };
        if format.encoding == "latin1" {
            let bad: String = hunks.iter().flat_map(|h| h.lines.iter()).flat_map(|l| l.chars()).filter(|&c| c > '\u{ff}').take(8).collect();
            if !bad.is_empty() {
                return Ok(failure(format!(
                    "{} is Latin-1 ('fileencoding') and has no byte for {bad:?}: nothing was changed (the file is never transcoded)",
                    abs.display()
                )));
            }
        }
        // The final end-of-line changes only when the agent's text changes
        // it; otherwise :w treats it as it treats the user's own writes.
        let final_eol = (!new_lines.is_empty() && new_final_eol != format.eol).then_some(new_final_eol);
        let changed = !hunks.is_empty() || final_eol.is_some();
        if !changed && !modified {
            // Nothing to do: the file stays as it is, byte for byte.
            return Ok(json!({ "success": true, "message": format!("{} already has this text", abs.display()), "appliedChanges": false }));
        }
        let autocmds = shared.options.write_autocmds;
        let plan = match write_plan(&abs).await {
            Ok(plan) => plan,
            Err(e) => return Ok(failure(format!("cannot write beside {}: {e}", abs.display()))),
        };
        // The bytes :w will write, when this side can tell (formatters that
        // BufWritePre runs with "all" change the text first): then they are
        // written off the main thread, which only applies and renames.
        let bytes = match &plan {
            WritePlan::Rename { .. } if autocmds != "all" && file_record::available() => {
                disk_bytes(&new_lines, &format, final_eol)
            }
            _ => None,
        };
        let outcome = match (bytes, plan) {
            (Some(bytes), WritePlan::Rename { target }) => {
                edit_then_replace(bufnr, tick, hunks, final_eol, autocmds, stamp, bytes, target).await?
            }
            (_, plan) => {
                let write = move || buffers::apply_and_write(bufnr, tick, hunks, final_eol, autocmds, stamp, plan);
                on_main(write).await.map_err(bridge_error)?
            }
        };
        match outcome {
            Ok(()) => {}
            Err(ApplyError::Changed) => continue,
            Err(ApplyError::Failed(e)) => {
                return Ok(failure(format!("could not edit {}: {e}", abs.display())))
            }
        }
        // Our own write is not an outside change.
        for p in &paths {
            shared.note_written(p);
        }
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
        Some(p) if !p.is_empty() => Some(candidates(shared, resolve(shared, p)).await),
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
                    if let Some(kind) = special_kind(&meta.file_type()) {
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
