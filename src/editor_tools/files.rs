//! A file's text as the editor holds it, and showing a file to the user.
//! The same reads and refusals as Amp's `readFile` and `openURI`
//! (`core::file_ops`): special files are refused before anything opens
//! them, sizes are capped by `edits.max_file_bytes`.

use serde_json::{Map, Value};

use super::{args, paths, Answer, Context, Outcome, ToolError};
use crate::core::checked_file::{self, Use, Wanted};
use crate::core::uri::LineSelection;

pub async fn read_file(args: &Map<String, Value>, cx: &Context<'_>) -> Outcome {
    let path = paths::resolve(args::required_string(args, "path")?, &cx.hub.workspace_folders()).await?;
    Ok(Answer::Text(cx.hub.files().read(&path).await??))
}

pub async fn open_file(args: &Map<String, Value>, cx: &Context<'_>) -> Outcome {
    let path = paths::resolve(args::required_string(args, "path")?, &cx.hub.workspace_folders()).await?;
    let line = args::position(args, "line")?;
    let column = args::position(args, "column")?;
    let end_line = args::position(args, "endLine")?;
    let end_col = args::position(args, "endColumn")?;
    let selection = match (line, end_line) {
        (Some(start_line), _) => Some(LineSelection { start_line, start_col: column, end_line, end_col }),
        (None, None) if column.is_none() && end_col.is_none() => None,
        _ => return Err(ToolError::LineRequired),
    };
    // Checked here, off the main thread (`checked_file`, as Amp's openURI):
    // a FIFO would block Neovim until a writer comes, a device or a procfs
    // file can be endless. The target of a symbolic link decides.
    let wanted = Wanted { directory_ok: true, read_through: true };
    let checked = checked_file::check(&path, cx.hub.options.max_file_bytes, wanted)
        .await
        .map_err(|why| why.of(&path, Use::Open))?;
    cx.hub.editor.open_file(checked, selection).await?;
    let at = match (line, end_line) {
        (Some(l), Some(e)) => format!(", lines {l} to {e} selected"),
        (Some(l), None) => format!(" at line {l}"),
        _ => String::new(),
    };
    Ok(Answer::Text(format!("Opened {} in Neovim{at}.", path.display())))
}
