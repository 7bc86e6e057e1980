//! The selection and the open files as MCP resources (`resources/list`,
//! `resources/read`, `resources/subscribe`): `neovim://selection` and
//! `neovim://open-files` (JSON, the tools' answers), and each open file
//! inside the workspace by its `file://` URI (its text as the buffer holds
//! it, as `read_file` reads it).

use serde_json::{json, Value};

use crate::core::uri::path_to_file_uri;
use crate::editor_tools;
use crate::mcp::RequestError;
use crate::serve::hub::Hub;

pub const SELECTION: &str = "neovim://selection";
pub const OPEN_FILES: &str = "neovim://open-files";

/// Whether a client may subscribe to `uri` (told `notifications/resources/updated`).
pub fn subscribable(uri: &str) -> bool {
    uri == SELECTION || uri == OPEN_FILES
}

pub async fn list(hub: &Hub) -> Result<Value, RequestError> {
    let mut resources = vec![
        json!({ "uri": SELECTION, "name": "selection", "title": "Selection in Neovim",
                "description": "The user's current selection or cursor: file, text, range", "mimeType": "application/json" }),
        json!({ "uri": OPEN_FILES, "name": "open-files", "title": "Open files in Neovim",
                "description": "The files open in Neovim, which one is current, which have unsaved changes", "mimeType": "application/json" }),
    ];
    let buffers = hub.editor.open_buffers().await?;
    for b in buffers {
        let path = b.path.to_string_lossy().into_owned();
        if editor_tools::paths::inside_workspace(&b.path, &hub.workspace_folders()).await.is_err() {
            continue;
        }
        let name = b.path.file_name().map_or_else(|| path.clone(), |n| n.to_string_lossy().into_owned());
        resources
            .push(json!({ "uri": path_to_file_uri(&b.path), "name": name, "title": path, "mimeType": "text/plain" }));
    }
    Ok(json!({ "resources": resources }))
}

pub async fn read(hub: &Hub, params: &Value) -> Result<Value, RequestError> {
    let uri = params.get("uri").and_then(Value::as_str).ok_or(RequestError::NoUri)?;
    let (text, mime) = match uri {
        SELECTION => {
            let sel = hub.state.selection();
            (sel.map_or(Value::Null, |s| editor_tools::selection(&s.raw)).to_string(), "application/json")
        }
        OPEN_FILES => {
            let buffers = hub.editor.open_buffers().await?;
            let visible = hub.state.visible_files();
            let files = editor_tools::open_files(buffers, visible.as_ref().map_or(&[][..], |v| v.raw.as_slice()));
            (files.to_string(), "application/json")
        }
        file if file.starts_with("file://") => (
            editor_tools::read_text(hub, file).await.map_err(|why| RequestError::Unreadable(why.into()))?,
            "text/plain",
        ),
        other => return Err(RequestError::NoResource(crate::core::text::cut(other, 200).to_owned())),
    };
    Ok(json!({ "contents": [{ "uri": uri, "mimeType": mime, "text": text }] }))
}
