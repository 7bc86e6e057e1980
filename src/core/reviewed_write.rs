//! An agent's edit the user reviews before it is written (Amp's `editFile`
//! with `review.edit_file`, the MCP server's `propose_edit`): the proposal
//! is offered (`core::review`), the decision awaited for at most the
//! review's time limit, and what the user accepts, their own changes
//! included, is written as `:w` writes it (`core::file_ops`), provided the
//! file's text is still the one the proposal was made from. A file that
//! does not exist yet is made as `:w ++p` makes it (`core::new_file`),
//! provided nobody made it, or opened it in Neovim, meanwhile.

use std::sync::Arc;
use std::time::Duration;

use super::editor::EditorError;
use super::file_error::FileError;
use super::file_ops::{Edited, FileAccess};
use super::review::{Decision, Proposal, ReviewEnd};

/// What became of a reviewed edit.
#[derive(Debug)]
pub enum Outcome {
    /// The user accepted `text` (the proposal with their own changes) and
    /// it was written.
    Written { text: String, edited: Edited },
    /// The user rejected it: nothing was written.
    Rejected,
    /// Nobody decided within the time limit: the review was closed (the
    /// user told in one line) and nothing was written.
    TimedOut,
    /// Not offered, or accepted but not written, for this reason (a
    /// refusal of the editor, the file changed during the review, ...).
    Refused(FileError),
}

/// Offers `proposal` (whose `original` is the text it was made from, as
/// `readFile` answers it), waits at most `timeout` for the decision, and
/// writes what was accepted.
pub async fn review_and_write(
    files: &FileAccess<'_>,
    proposal: Proposal,
    timeout: Duration,
) -> Result<Outcome, EditorError> {
    let path = proposal.path.clone();
    let original = proposal.original.clone().unwrap_or_default();
    let accepted = match decide(files, proposal, timeout).await? {
        Ok(accepted) => accepted,
        Err(outcome) => return Ok(outcome),
    };
    let final_text = Arc::new(accepted.clone());
    let new_text = |snapshot: &super::buffer::BufferText| {
        // The buffer of a file with unsaved changes takes the accepted text
        // at the decision (lua/amp/review/proposal.lua): that is no change.
        let now = snapshot.clone().file_text();
        if now != original && now != *final_text {
            return Err(FileError::ChangedDuringReview { path: path.clone() });
        }
        Ok(final_text.clone())
    };
    Ok(match files.edit(&path, accepted.len() as u64, new_text).await? {
        Ok(edited) => Outcome::Written { text: accepted, edited },
        Err(why) => Outcome::Refused(why),
    })
}

/// Offers `proposal` of a file that does not exist yet (its `original`
/// empty), waits at most `timeout` for the decision, and makes the file
/// with what was accepted.
pub async fn review_and_create(
    files: &FileAccess<'_>,
    proposal: Proposal,
    timeout: Duration,
) -> Result<Outcome, EditorError> {
    let path = proposal.path.clone();
    let accepted = match decide(files, proposal, timeout).await? {
        Ok(accepted) => accepted,
        Err(outcome) => return Ok(outcome),
    };
    // A buffer for it now (`:e` of the name during the review) has text of
    // its own, which a file made under it would contradict.
    let names = files.names_of(&path).await;
    if files.loaded.maybe(&names) && files.editor.loaded_text(names).await?.is_some() {
        return Ok(Outcome::Refused(FileError::OpenedDuringReview { path }));
    }
    Ok(match super::new_file::create(&path, &accepted).await {
        Ok(_) => Outcome::Written { text: accepted, edited: Edited { changed: true, written: true } },
        Err(why) => Outcome::Refused(why.into()),
    })
}

/// The accepted text, or what became of the proposal otherwise.
async fn decide(
    files: &FileAccess<'_>,
    proposal: Proposal,
    timeout: Duration,
) -> Result<Result<String, Outcome>, EditorError> {
    let editor = files.editor;
    let (owner, name) = (proposal.owner, proposal.name.clone());
    Ok(match tokio::time::timeout(timeout, editor.propose(proposal)).await {
        Err(_) => {
            // The user is told in one line; the agent by the answer.
            let _ = editor.close_review(owner, name, ReviewEnd::TimedOut).await;
            Err(Outcome::TimedOut)
        }
        Ok(Err(e)) => Err(Outcome::Refused(FileError::Editor(e.refusal()?))),
        Ok(Ok(Decision::Rejected)) => Err(Outcome::Rejected),
        Ok(Ok(Decision::Accepted(text))) => Ok(text),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::editor::LoadedBuffers;
    use crate::core::fake_editor::{Call, FakeEditor};
    use crate::core::filewatch::FileWatch;
    use crate::core::review::Owner;

    fn proposal(path: &std::path::Path, original: &str, proposed: &str) -> Proposal {
        Proposal {
            name: "t".into(),
            path: path.to_path_buf(),
            original: Some(original.into()),
            proposed: proposed.into(),
            owner: Owner::new("Test"),
            edits_kept: true,
        }
    }

    fn access<'a>(editor: &'a FakeEditor, watch: &'a FileWatch, loaded: &'a LoadedBuffers) -> FileAccess<'a> {
        FileAccess {
            editor,
            watch,
            loaded,
            max_file_bytes: 1 << 20,
            write_autocmds: crate::core::editor::WriteAutocmds::Post,
        }
    }

    #[tokio::test]
    async fn the_user_decides_what_is_written_and_the_time_limit_closes_the_review() {
        let dir = crate::testutil::TempDir::new("reviewed-write");
        let file = dir.0.join("a.txt");
        std::fs::write(&file, "old\n").unwrap();
        let editor = FakeEditor::new(true);
        let (watch, loaded) = (FileWatch::default(), LoadedBuffers::default());
        loaded.set(vec![]);
        let files = access(&editor, &watch, &loaded);
        editor.decide(vec![Decision::Rejected, Decision::Accepted("mine\n".into())]);
        let wait = Duration::from_secs(5);
        let rejected = review_and_write(&files, proposal(&file, "old\n", "theirs\n"), wait).await.unwrap();
        assert!(matches!(rejected, Outcome::Rejected), "{rejected:?}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "old\n");
        let written = review_and_write(&files, proposal(&file, "old\n", "theirs\n"), wait).await.unwrap();
        assert!(matches!(written, Outcome::Written { ref text, .. } if text == "mine\n"), "{written:?}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "mine\n");
        // The file changed meanwhile: what was accepted is not written over it.
        editor.decide(vec![Decision::Accepted("late\n".into())]);
        let stale = review_and_write(&files, proposal(&file, "old\n", "x\n"), wait).await.unwrap();
        let Outcome::Refused(why) = stale else { panic!("{stale:?}") };
        assert!(matches!(why, FileError::ChangedDuringReview { ref path } if *path == file), "{why:?}");
        assert_eq!(
            why.to_string(),
            format!("{} changed during the review: nothing was written; read it again", file.display())
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "mine\n");
        // Nobody decides: the review is closed as timed out.
        editor.hold_reviews();
        let timed_out = review_and_write(&files, proposal(&file, "mine\n", "y\n"), Duration::from_millis(50)).await;
        assert!(matches!(timed_out, Ok(Outcome::TimedOut)), "{timed_out:?}");
        assert!(editor.calls().iter().any(|c| matches!(c, Call::CloseReview(..))), "{:?}", editor.calls());
    }

    #[tokio::test]
    async fn a_new_file_is_made_once_accepted_and_never_under_a_buffer_opened_meanwhile() {
        let dir = crate::testutil::TempDir::new("reviewed-create");
        let file = dir.0.join("sub/new.txt");
        let editor = FakeEditor::new(true);
        let (watch, loaded) = (FileWatch::default(), LoadedBuffers::default());
        loaded.set(vec![]);
        let files = access(&editor, &watch, &loaded);
        let wait = Duration::from_secs(5);
        editor.decide(vec![Decision::Rejected, Decision::Accepted("mine".into())]);
        let rejected = review_and_create(&files, proposal(&file, "", "theirs\n"), wait).await.unwrap();
        assert!(matches!(rejected, Outcome::Rejected), "{rejected:?}");
        assert!(!file.parent().unwrap().exists(), "nothing made on :q");
        let made = review_and_create(&files, proposal(&file, "", "theirs\n"), wait).await.unwrap();
        assert!(matches!(made, Outcome::Written { ref text, .. } if text == "mine"), "{made:?}");
        assert_eq!(std::fs::read(&file).unwrap(), b"mine\n", "a line break after the last line");
        // A buffer of that name now: its text is the user's.
        let other = dir.0.join("other.txt");
        editor.open(&other, &["draft"], true, crate::core::fake_editor::unix_format());
        loaded.set(vec![other.clone()]);
        editor.decide(vec![Decision::Accepted("x\n".into())]);
        let refused = review_and_create(&files, proposal(&other, "", "x\n"), wait).await.unwrap();
        assert!(
            matches!(refused, Outcome::Refused(ref why) if why.to_string().contains("was opened in Neovim during the review")),
            "{refused:?}"
        );
        assert!(!other.exists());
    }
}
