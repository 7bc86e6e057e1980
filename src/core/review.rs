//! Reviews of agents' changes, as the protocols see them: an agent proposes
//! a file's new text, the user decides (in the editor's review view) and the
//! protocol answers the agent with the outcome. The view itself is the
//! editor's (`nvim::review`); this is the shared vocabulary.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::core::checked_file::{FileRefusal, Use};
use crate::core::editor::EditorError;

/// What the user decided about a proposal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The text to keep: the proposal with the user's own edits and the
    /// hunks they rejected put back.
    Accepted(String),
    Rejected,
}

/// Who asked for a review: the agent's display name and its connection or
/// session. Reviews are known by (session, name): an agent sees, replaces
/// and closes only its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Owner {
    /// For the user: "Amp", "Claude", "Gemini".
    pub agent: &'static str,
    /// One per connection (Amp, Claude) or MCP session (Gemini), never reused.
    pub session: u64,
}

static NEXT_SESSION: AtomicU64 = AtomicU64::new(1);

impl Owner {
    /// A new owner: a session number no other owner has.
    pub fn new(agent: &'static str) -> Self {
        Self { agent, session: NEXT_SESSION.fetch_add(1, Ordering::Relaxed) }
    }
}

/// A proposed new text for `path`, shown as a review named `name` (an
/// agent's tab name; a second review of the same owner and name replaces
/// the first).
#[derive(Debug, Clone)]
pub struct Proposal {
    pub name: String,
    pub path: PathBuf,
    /// The text the proposal is compared with; `None`: the file on disk
    /// (empty when the file does not exist yet).
    pub original: Option<String>,
    pub proposed: String,
    pub owner: Owner,
    /// Whether the user's edits in the review reach the agent: true when
    /// it is told the accepted text (Amp, Claude, Gemini); false when it
    /// writes its own proposal whatever the answer (Copilot CLI), so the
    /// view offers no edit and says so.
    pub edits_kept: bool,
}

/// Why a review closed without the user's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReviewEnd {
    /// The agent closed it (`close_tab`, `closeDiff`, `closeAllDiffTabs`):
    /// it knows, so the user is not told.
    Agent,
    /// The agent's connection or session ended: nobody waits for the
    /// decision any more. The user is told in one line.
    Disconnected,
    /// Nobody decided within the agent's time limit. The user is told in
    /// one line.
    TimedOut,
}

impl ReviewEnd {
    /// The name the view's side knows it by.
    pub fn name(self) -> &'static str {
        match self {
            ReviewEnd::Agent => "agent",
            ReviewEnd::Disconnected => "disconnected",
            ReviewEnd::TimedOut => "timed_out",
        }
    }
}

/// The largest file a review reads from disk for its left side, and the
/// largest proposed text it shows.
pub const MAX_REVIEW_BYTES: u64 = 16 * 1024 * 1024;

/// Reviews waiting for a decision at once, all agents together: each holds
/// its texts (and, once shown, two buffers), so an agent's flood of
/// proposals is refused (with a reason) instead of filling the editor.
pub const MAX_OPEN_REVIEWS: usize = 32;

/// Why a proposal is not shown for review (the agent is told as it is).
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// The proposed text is bigger than [`MAX_REVIEW_BYTES`].
    #[error("cannot review {}: the proposed text is {size} bytes, more than a review shows ({MAX_REVIEW_BYTES})", path.display())]
    TooBig { path: PathBuf, size: usize },
    /// [`MAX_OPEN_REVIEWS`] wait already.
    #[error("cannot review {}: {open} reviews wait for a decision already (at most {MAX_OPEN_REVIEWS})", path.display())]
    TooMany { path: PathBuf, open: usize },
    /// The file on disk (its left side) cannot be read for a review.
    #[error(transparent)]
    Unreadable(#[from] FileRefusal),
}

/// A review refused is the editor's refusal of the proposal.
impl From<ReviewError> for EditorError {
    fn from(e: ReviewError) -> Self {
        EditorError::Refused(e.to_string())
    }
}

/// Whether `proposal` may be shown while `open` reviews wait (one of the
/// same owner and name is replaced, so it does not count).
pub fn admit(proposal: &Proposal, open: usize, replaces: bool) -> Result<(), ReviewError> {
    if proposal.proposed.len() as u64 > MAX_REVIEW_BYTES {
        return Err(ReviewError::TooBig { path: proposal.path.clone(), size: proposal.proposed.len() });
    }
    if !replaces && open >= MAX_OPEN_REVIEWS {
        return Err(ReviewError::TooMany { path: proposal.path.clone(), open });
    }
    Ok(())
}

/// The original text of a proposal whose `original` is `None`: the file on
/// disk (lossy UTF-8: the view only shows it), empty when the file does not
/// exist yet.
pub async fn original_text(proposal: &Proposal) -> Result<String, ReviewError> {
    match &proposal.original {
        Some(text) => Ok(text.clone()),
        None => disk_text(&proposal.path).await,
    }
}

/// The file's text on disk as a review shows it (lossy UTF-8), empty when
/// the file does not exist yet: at most [`MAX_REVIEW_BYTES`], and never a
/// FIFO, device or procfs file (`/proc/self/pagemap` says 0 bytes and
/// reads gigabytes).
pub async fn disk_text(path: &std::path::Path) -> Result<String, ReviewError> {
    match crate::core::checked_file::read(path, MAX_REVIEW_BYTES).await {
        Ok(bytes) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
        Err(why) if why.is_not_found() => Ok(String::new()),
        Err(why) => Err(why.of(path, Use::Review).into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proposal(path: PathBuf, original: Option<&str>) -> Proposal {
        Proposal {
            name: "t".into(),
            path,
            original: original.map(Into::into),
            proposed: "new\n".into(),
            owner: Owner::new("Amp"),
            edits_kept: true,
        }
    }

    #[test]
    fn proposals_over_the_size_or_past_the_count_are_refused_with_a_reason() {
        let p = proposal(PathBuf::from("/w/a.txt"), None);
        assert!(admit(&p, 0, false).is_ok());
        assert!(admit(&p, MAX_OPEN_REVIEWS - 1, false).is_ok());
        let full = admit(&p, MAX_OPEN_REVIEWS, false).unwrap_err();
        assert!(matches!(full, ReviewError::TooMany { open: 32, .. }), "{full:?}");
        assert_eq!(full.to_string(), "cannot review /w/a.txt: 32 reviews wait for a decision already (at most 32)");
        // Replacing a review of the same name adds none.
        assert!(admit(&p, MAX_OPEN_REVIEWS, true).is_ok());
        let big = Proposal { proposed: "x".repeat(MAX_REVIEW_BYTES as usize + 1), ..p };
        let too_big = admit(&big, 0, false).unwrap_err().to_string();
        assert_eq!(
            too_big,
            "cannot review /w/a.txt: the proposed text is 16777217 bytes, more than a review shows (16777216)"
        );
    }

    #[test]
    fn every_owner_is_a_session_of_its_own() {
        let (a, b) = (Owner::new("Claude"), Owner::new("Claude"));
        assert_ne!(a, b);
        assert_eq!(a.agent, "Claude");
        assert_eq!(ReviewEnd::TimedOut.name(), "timed_out");
    }

    #[tokio::test]
    async fn the_original_is_given_or_read_or_empty_for_a_new_file() {
        let dir = crate::testutil::TempDir::new("review");
        let file = dir.0.join("a.txt");
        assert_eq!(original_text(&proposal(file.clone(), Some("given\n"))).await.unwrap(), "given\n");
        assert_eq!(original_text(&proposal(file.clone(), None)).await.unwrap(), "");
        std::fs::write(&file, "on disk\n").unwrap();
        assert_eq!(original_text(&proposal(file, None)).await.unwrap(), "on disk\n");
        let err = original_text(&proposal(dir.0.clone(), None)).await.unwrap_err();
        assert!(matches!(err, ReviewError::Unreadable(_)), "{err:?}");
        assert!(err.to_string().ends_with("it is a directory, not a regular file"), "{err}");
    }
}
