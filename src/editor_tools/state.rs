//! What the user has in front of them: the selection, the open files, the
//! workspace folders, the diagnostics. Read from the published editor
//! state (no editor call) where it has them.

use std::path::PathBuf;

use serde_json::{json, Map, Value};

use super::{args, paths, Answer, Context, Outcome};
use crate::core::selection::RawSelection;
use crate::serve::hub::Hub;

/// A 1-based position: the line, and the column in UTF-16 code units.
fn position(line: usize, utf16_col: usize) -> Value {
    json!({ "line": line + 1, "column": utf16_col + 1 })
}

/// The selection (or the cursor) as the tools show it.
pub fn selection(sel: &RawSelection) -> Value {
    let (first, last) = (sel.regions.first(), sel.regions.last());
    let (Some(first), Some(last)) = (first, last) else {
        return json!({ "path": sel.path.to_string_lossy(), "text": "", "isEmpty": true });
    };
    let text = if sel.cursor_only {
        String::new()
    } else {
        sel.regions.iter().map(|r| r.content(false)).collect::<Vec<_>>().join("\n")
    };
    let mut out = json!({
        "path": sel.path.to_string_lossy(),
        "text": text,
        "start": position(first.start_line, first.utf16_range().0),
        "end": position(last.end_line, last.utf16_range().1),
        "isEmpty": sel.cursor_only,
    });
    if sel.regions.len() > 1 {
        // A blockwise selection: one region per line, joined above.
        out["blockwise"] = json!(true);
    }
    out
}

pub fn get_selection(args: &Map<String, Value>, cx: &Context<'_>) -> Outcome {
    let latest = args::boolean(args, "latest")?.unwrap_or(false);
    let state = &cx.hub.state;
    let snapshot = if latest { state.latest_range().or_else(|| state.selection()) } else { state.selection() };
    Ok(match snapshot {
        Some(s) => Answer::Json(selection(&s.raw)),
        None => Answer::Text("No file is shown in Neovim: there is no selection.".into()),
    })
}

/// The open files: `(path, current, modified, filetype)` from the editor,
/// marked visible when a window shows them.
pub fn open_files(buffers: Vec<crate::core::editor::OpenBuffer>, visible: &[PathBuf]) -> Value {
    let files: Vec<Value> = buffers
        .into_iter()
        .map(|b| {
            json!({
                "path": b.path.to_string_lossy(),
                "active": b.active,
                "visible": visible.contains(&b.path),
                "modified": b.dirty,
                "filetype": b.filetype,
            })
        })
        .collect();
    json!({ "files": files })
}

pub async fn get_open_files(cx: &Context<'_>) -> Outcome {
    let buffers = cx.hub.editor.open_buffers().await?;
    let visible = cx.hub.state.visible_files();
    Ok(Answer::Json(open_files(buffers, visible.as_ref().map_or(&[][..], |v| v.raw.as_slice()))))
}

pub fn workspace_folders(hub: &Hub) -> Value {
    json!({ "folders": hub.workspace_folders() })
}

fn severity(n: u8) -> &'static str {
    match n {
        1 => "error",
        2 => "warning",
        3 => "information",
        _ => "hint",
    }
}

pub async fn get_diagnostics(args: &Map<String, Value>, cx: &Context<'_>) -> Outcome {
    let under = match args::string(args, "path")? {
        Some(p) if !p.is_empty() => {
            let path = paths::resolve(p, &cx.hub.workspace_folders()).await?;
            Some(cx.hub.files().names_of(&path).await)
        }
        _ => None,
    };
    let found = cx.hub.editor.diagnostics(under).await?;
    let mut files: Vec<(PathBuf, Vec<Value>)> = Vec::new();
    for d in found {
        let (start, end) = (d.utf16_start(), d.utf16_end());
        let item = json!({
            "severity": severity(d.severity),
            "message": d.message,
            "source": d.source,
            "start": position(start.0, start.1),
            "end": position(end.0, end.1),
        });
        match files.iter_mut().find(|(p, _)| *p == d.path) {
            Some((_, list)) => list.push(item),
            None => files.push((d.path, vec![item])),
        }
    }
    let files: Vec<Value> = files
        .into_iter()
        .map(|(path, diagnostics)| json!({ "path": path.to_string_lossy(), "diagnostics": diagnostics }))
        .collect();
    Ok(Answer::Json(json!({ "files": files })))
}
