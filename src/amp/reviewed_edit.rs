//! `editFile` with `review.edit_file`: the change is shown to the user as a
//! proposal (`core::review`) and the request is answered only when they
//! decide, or when `review_timeout_ms` passes. What they accept (their own
//! edits to the proposal included) is written as any `editFile` is; the
//! answer carries that final text.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{json, Value};

use super::calls::EditSpec;
use super::protocol::RpcError;
use crate::core::edit::apply_range;
use crate::core::editor::{Editor, EditorError};
use crate::core::review::{Decision, Owner, Proposal, ReviewEnd};
use crate::serve::budget::Held;
use crate::serve::hub::Hub;

/// The review's outcome for the request, before the write.
#[derive(Debug, PartialEq)]
pub enum Reviewed {
    /// Write this text (what the user accepted).
    Write { original: String, text: String },
    /// Answer the agent with this failure message; nothing was changed.
    Refused(String),
}

static NEXT: AtomicU64 = AtomicU64::new(1);

/// Shows the edit of `abs` (whose text is `original`, as readFile answers
/// it) and waits for the user's decision.
pub async fn review(
    editor: &dyn Editor,
    owner: Owner,
    abs: &Path,
    original: String,
    edit: &EditSpec,
    timeout: Duration,
) -> Result<Reviewed, EditorError> {
    let proposed = match edit {
        EditSpec::Full(text) => text.clone(),
        EditSpec::Range { start, end, new_text } => match apply_range(&original, *start, *end, new_text) {
            Ok(text) => text,
            Err(why) => return Ok(Reviewed::Refused(format!("cannot apply the edit to {}: {why}", abs.display()))),
        },
    };
    if proposed == original {
        return Ok(Reviewed::Write { original, text: proposed });
    }
    // Names the review's tab and buffers: unique, and says which file.
    let base = abs.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let name = format!("{base} (edit {})", NEXT.fetch_add(1, Ordering::Relaxed));
    let proposal = Proposal {
        name: name.clone(),
        path: abs.to_path_buf(),
        original: Some(original.clone()),
        proposed,
        owner,
        edits_kept: true,
    };
    let decided = tokio::time::timeout(timeout, editor.propose(proposal)).await;
    Ok(match decided {
        Err(_) => {
            // The user is told in one line; the agent by the answer.
            let _ = editor.close_review(owner, name, ReviewEnd::TimedOut).await;
            Reviewed::Refused(format!(
                "the user did not review the edit to {} within {} s: nothing was changed",
                abs.display(),
                timeout.as_secs()
            ))
        }
        Ok(Err(e)) => Reviewed::Refused(e.refusal()?),
        Ok(Ok(Decision::Rejected)) => {
            Reviewed::Refused(format!("the user rejected the edit to {}: nothing was changed", abs.display()))
        }
        Ok(Ok(Decision::Accepted(text))) => Reviewed::Write { original, text },
    })
}

/// `editFile` under review: decide, then write what was accepted, if the
/// file's text is still the one the review started from.
/// `held` (the request's place and bytes in flight) is given back while
/// the user reviews: the connection keeps reading meanwhile.
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
        Err(why) => return Ok(super::requests::failure(why)),
    };
    held.release();
    let timeout = Duration::from_millis(hub.options.review_timeout_ms);
    let (original, text) =
        match review(hub.editor.as_ref(), owner, abs, original, &edit, timeout).await.map_err(editor_error)? {
            Reviewed::Refused(why) => return Ok(super::requests::failure(why)),
            Reviewed::Write { original, text } => (original, text),
        };
    let final_text = text.clone();
    let new_text = |snapshot: &crate::core::buffer::BufferText| {
        // The buffer of a file with unsaved changes takes the accepted text
        // at the decision (lua/amp/review/proposal.lua): that is no change.
        let now = snapshot.clone().file_text();
        if now != original && now != final_text {
            return Err(format!("{} changed during the review: nothing was written; read it again", abs.display()));
        }
        Ok(final_text.clone())
    };
    Ok(match files.edit(abs, new_text).await.map_err(editor_error)? {
        Ok(edited) => json!({
            "success": true,
            "message": format!("Edited {} (reviewed by the user; content is the text written)", abs.display()),
            "appliedChanges": edited.changed,
            "content": text,
        }),
        Err(why) => super::requests::failure(why),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::fake_editor::{Call, FakeEditor};

    const WAIT: Duration = Duration::from_secs(5);

    fn full(text: &str) -> EditSpec {
        EditSpec::Full(text.into())
    }

    #[tokio::test]
    async fn the_user_decides_what_is_written() {
        let editor = FakeEditor::new(false);
        let path = Path::new("/w/a.txt");
        editor.decide(vec![Decision::Accepted("mine\n".into()), Decision::Rejected]);
        let got = review(&editor, Owner::new("Amp"), path, "old\n".into(), &full("theirs\n"), WAIT).await.unwrap();
        assert_eq!(got, Reviewed::Write { original: "old\n".into(), text: "mine\n".into() });
        let got = review(&editor, Owner::new("Amp"), path, "old\n".into(), &full("theirs\n"), WAIT).await.unwrap();
        assert!(matches!(got, Reviewed::Refused(ref why) if why.contains("rejected")), "{got:?}");
        let proposals: Vec<_> = editor.calls().into_iter().filter(|c| matches!(c, Call::Propose(..))).collect();
        assert_eq!(proposals.len(), 2);
        assert!(matches!(&proposals[0], Call::Propose(_, text) if text == "theirs\n"));
    }

    #[tokio::test]
    async fn no_change_needs_no_review_and_a_bad_range_none_either() {
        let editor = FakeEditor::new(false);
        let path = Path::new("/w/a.txt");
        let got = review(&editor, Owner::new("Amp"), path, "same\n".into(), &full("same\n"), WAIT).await.unwrap();
        assert_eq!(got, Reviewed::Write { original: "same\n".into(), text: "same\n".into() });
        let bad = EditSpec::Range { start: 10, end: 20, new_text: "x".into() };
        assert!(matches!(
            review(&editor, Owner::new("Amp"), path, "short\n".into(), &bad, WAIT).await.unwrap(),
            Reviewed::Refused(_)
        ));
        assert!(editor.calls().iter().all(|c| !matches!(c, Call::Propose(..))));
    }
}
