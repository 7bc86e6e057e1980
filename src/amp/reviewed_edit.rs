//! `editFile` with `review.edit_file`: the change is shown to the user as a
//! proposal and the request is answered only when they decide, or when
//! `review_timeout_ms` passes (`core::reviewed_write`, which the MCP
//! server's `propose_edit` shares). What they accept (their own edits to
//! the proposal included) is written as any `editFile` is; the answer
//! carries that final text.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{json, Value};

use super::calls::EditSpec;
use super::protocol::RpcError;
use super::requests::failure;
use crate::core::edit::apply_range;
use crate::core::file_error::FileError;
use crate::core::review::{Owner, Proposal};
use crate::core::reviewed_write::{review_and_write, Outcome};
use crate::serve::budget::Held;
use crate::serve::hub::Hub;

static NEXT: AtomicU64 = AtomicU64::new(1);

/// The text `edit` makes of `original` (an error for a range that does not fit).
pub fn proposed_text(abs: &Path, original: &str, edit: &EditSpec) -> Result<String, FileError> {
    match edit {
        EditSpec::Full(text) => Ok(text.clone()),
        EditSpec::Range { start, end, new_text } => apply_range(original, *start, *end, new_text)
            .map_err(|source| FileError::Range { path: abs.to_path_buf(), source }),
    }
}

/// The review's name: unique, and says which file.
fn review_name(abs: &Path) -> String {
    let base = abs.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    format!("{base} (edit {})", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// `editFile` under review. `held` (the request's place and bytes in
/// flight) is given back while the user reviews: the connection keeps
/// reading meanwhile.
pub async fn edit_file(
    hub: &Hub,
    owner: Owner,
    held: &mut Held,
    abs: &Path,
    edit: EditSpec,
) -> Result<Value, RpcError> {
    let editor_error = super::requests::editor_error;
    let files = hub.files();
    let original = match files.read(abs).await.map_err(editor_error)? {
        Ok(text) => text,
        Err(why) => return Ok(failure(why)),
    };
    let proposed = match proposed_text(abs, &original, &edit) {
        Ok(text) => text,
        Err(why) => return Ok(failure(why)),
    };
    drop(edit);
    held.release();
    let timeout = Duration::from_millis(hub.options.review_timeout_ms);
    let outcome = if proposed == original {
        // Nothing to review: the write finds the text there already.
        let unchanged = |_: &crate::core::buffer::BufferText| Ok(std::sync::Arc::new(proposed.clone()));
        match files.edit(abs, proposed.len() as u64, unchanged).await.map_err(editor_error)? {
            Ok(edited) => Outcome::Written { text: proposed, edited },
            Err(why) => Outcome::Refused(why),
        }
    } else {
        let proposal = Proposal {
            name: review_name(abs),
            path: abs.to_path_buf(),
            original: Some(original),
            proposed,
            owner,
            edits_kept: true,
        };
        review_and_write(&files, proposal, timeout).await.map_err(editor_error)?
    };
    Ok(answer(abs, outcome, timeout))
}

/// The agent's answer to a reviewed `editFile`.
fn answer(abs: &Path, outcome: Outcome, timeout: Duration) -> Value {
    match outcome {
        Outcome::Written { text, edited } => json!({
            "success": true,
            "message": format!("Edited {} (reviewed by the user; content is the text written)", abs.display()),
            "appliedChanges": edited.changed,
            "content": text,
        }),
        Outcome::Rejected => failure(format!("the user rejected the edit to {}: nothing was changed", abs.display())),
        Outcome::TimedOut => failure(format!(
            "the user did not review the edit to {} within {} s: nothing was changed",
            abs.display(),
            timeout.as_secs()
        )),
        Outcome::Refused(why) => failure(why),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::file_ops::Edited;

    #[test]
    fn a_range_edit_applies_to_the_read_text_and_a_bad_one_is_refused() {
        let path = Path::new("/w/a.txt");
        assert_eq!(proposed_text(path, "old\n", &EditSpec::Full("new\n".into())).unwrap(), "new\n");
        let range = EditSpec::Range { start: 0, end: 3, new_text: "NEW".into() };
        assert_eq!(proposed_text(path, "old\n", &range).unwrap(), "NEW\n");
        let bad = EditSpec::Range { start: 10, end: 20, new_text: "x".into() };
        assert_eq!(
            proposed_text(path, "short\n", &bad).unwrap_err().to_string(),
            "cannot apply the edit to /w/a.txt: end (20) is past the end of the text (6 bytes)"
        );
    }

    #[test]
    fn each_outcome_is_told_to_the_agent() {
        let path = Path::new("/w/a.txt");
        let wait = Duration::from_secs(300);
        let written = Outcome::Written { text: "mine\n".into(), edited: Edited { changed: true, written: true } };
        let ok = answer(path, written, wait);
        assert_eq!((ok["success"].as_bool(), ok["content"].as_str()), (Some(true), Some("mine\n")));
        assert!(answer(path, Outcome::Rejected, wait)["message"].as_str().unwrap().contains("rejected"));
        let late = answer(path, Outcome::TimedOut, wait);
        assert!(late["message"].as_str().unwrap().contains("within 300 s"), "{late}");
        assert_eq!(answer(path, Outcome::Refused(FileError::Editor("why".into())), wait)["message"], "why");
    }
}
