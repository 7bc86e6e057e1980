//! `propose_edit`: an edit the user reviews (`core::review`) before it is
//! written. The tool waits for the decision (giving back its request's
//! place meanwhile); what the user accepts, their own changes included, is
//! written as `:w` writes it (`core::file_ops`: one undo step in the
//! buffer, the file's encoding, line endings and BOM, hard and symbolic
//! links kept), as Amp's reviewed `editFile` does. A path where no file is
//! yet proposes a new file: reviewed against nothing, and made as `:w ++p`
//! makes it (`core::new_file`).

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{json, Map, Value};

use super::{args, paths, Answer, Context, Outcome, ToolError};
use crate::core::review::Proposal;
use crate::core::reviewed_write::{review_and_create, review_and_write, Outcome as Reviewed};
use crate::serve::budget::Held;

static NEXT: AtomicU64 = AtomicU64::new(1);

pub async fn propose_edit(args: &Map<String, Value>, cx: &Context<'_>, held: &mut Held) -> Outcome {
    let path = paths::resolve(args::required_string(args, "path")?, &cx.hub.workspace_folders()).await?;
    let new_text = args::string(args, "newText")?;
    let patch = args::string(args, "patch")?;
    let description = args::string(args, "description")?.unwrap_or_default();
    let shown = paths::shown(&path);
    let files = cx.hub.files();
    // No file there (not even a dangling link): a new one.
    let new_file = tokio::fs::symlink_metadata(&path).await.is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound);
    let original = files.read(&path).await?;
    let original = match (original, new_file) {
        (Ok(text), false) => text,
        // A buffer of that name that was never written: its text is the
        // user's, and a file made under it would contradict it.
        (Ok(_), true) => return Err(ToolError::NotSavedYet { shown }),
        (Err(_), true) => String::new(),
        (Err(why), false) => return Err(why.into()),
    };
    if tokio::fs::metadata(&path).await.is_ok_and(|m| m.permissions().readonly()) {
        return Err(ToolError::ReadOnly { shown });
    }
    let proposed = match (new_text, patch) {
        (Some(text), None) => same_line_breaks(&original, text),
        (None, Some(patch)) => crate::core::patch::apply(&original, patch)
            .map_err(|source| ToolError::Patch { shown: shown.clone(), source })?,
        (Some(_), Some(_)) => return Err(ToolError::BothTextAndPatch),
        (None, None) => return Err(ToolError::NoTextNorPatch),
    };
    if new_file && proposed.is_empty() {
        return Err(ToolError::EmptyNewFile { shown });
    }
    if proposed == original && !new_file {
        return Ok(Answer::Json(json!({
            "decision": "unchanged",
            "path": path.to_string_lossy(),
            "message": "The file already has this text: nothing to review.",
        })));
    }
    // The user decides now: the request holds no place meanwhile.
    held.release();
    let name = review_name(&path, cx.client, description);
    let proposal = Proposal {
        name,
        path: path.clone(),
        original: Some(original),
        proposed: proposed.clone(),
        owner: cx.owner,
        edits_kept: true,
    };
    let timeout = Duration::from_millis(cx.hub.options.review_timeout_ms);
    let reviewed = if new_file {
        review_and_create(&files, proposal, timeout).await?
    } else {
        review_and_write(&files, proposal, timeout).await?
    };
    match reviewed {
        Reviewed::TimedOut => Err(ToolError::NotReviewed { shown, secs: timeout.as_secs() }),
        Reviewed::Rejected => Ok(Answer::Json(json!({
            "decision": "rejected",
            "path": path.to_string_lossy(),
            "message": "The user rejected the edit: the file is unchanged.",
        }))),
        Reviewed::Refused(why) => Err(ToolError::NotWritten(why)),
        Reviewed::Written { text, edited } => {
            let changed_by_user = text != proposed;
            Ok(Answer::Json(json!({
                "decision": "accepted",
                "path": path.to_string_lossy(),
                "created": new_file,
                "written": edited.written,
                "changedByUser": changed_by_user,
                "message": if changed_by_user {
                    "The user accepted the edit with changes of their own; the file now has `text`."
                } else {
                    "The user accepted the edit; the file now has `text`."
                },
                "text": text,
            })))
        }
    }
}

/// `text` with the line breaks of `original` when that has "\r\n" for
/// every one and `text` has none (a model writes "\n"): the review then
/// shows only the lines that change.
fn same_line_breaks(original: &str, text: &str) -> String {
    let crlf = original.matches("\r\n").count();
    if crlf > 0 && crlf == original.matches('\n').count() && !text.contains('\r') {
        text.replace('\n', "\r\n")
    } else {
        text.to_owned()
    }
}

/// The review's name: the file, the client, a number, what it does (all on
/// one line, short: it names the review's buffers and list entry).
fn review_name(path: &Path, client: &str, description: &str) -> String {
    let one_line = |s: &str, max: usize| {
        let s: String = s.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
        crate::core::text::cut(s.trim(), max).to_owned()
    };
    let file = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let who = match one_line(client, 40) {
        c if c.is_empty() => String::new(),
        c => format!("{c} "),
    };
    match one_line(description, 60) {
        d if d.is_empty() => format!("{file} ({who}edit {n})"),
        d => format!("{file} ({who}edit {n}: {d})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_breaks_follow_a_crlf_file_and_names_are_one_short_line() {
        assert_eq!(same_line_breaks("a\r\nb\r\n", "a\nc\n"), "a\r\nc\r\n");
        assert_eq!(same_line_breaks("a\nb\n", "a\nc\n"), "a\nc\n");
        assert_eq!(same_line_breaks("a\r\nb\n", "a\nc\n"), "a\nc\n");
        assert_eq!(same_line_breaks("a\r\n", "x\r\ny\n"), "x\r\ny\n");
        let name = review_name(Path::new("/w/a.rs"), "codex\nx", &"d".repeat(100));
        assert!(name.starts_with("a.rs (codex x edit "), "{name}");
        assert!(!name.contains('\n') && name.len() < 130, "{name}");
        assert!(review_name(Path::new("/w/a.rs"), "", "").starts_with("a.rs (edit "));
    }
}
