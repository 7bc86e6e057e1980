//! Reviews of agents' changes, as the protocols see them: an agent proposes
//! a file's new text, the user decides (in the editor's review view) and the
//! protocol answers the agent with the outcome. The view itself is the
//! editor's (`nvim::review`); this is the shared vocabulary.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

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

/// Whether `proposal` may be shown while `open` reviews wait (one of the
/// same owner and name is replaced, so it does not count): `Err(reason)`
/// otherwise.
pub fn admit(proposal: &Proposal, open: usize, replaces: bool) -> Result<(), String> {
    if proposal.proposed.len() as u64 > MAX_REVIEW_BYTES {
        return Err(format!(
            "cannot review {}: the proposed text is {} bytes, more than a review shows ({MAX_REVIEW_BYTES})",
            proposal.path.display(),
            proposal.proposed.len()
        ));
    }
    if !replaces && open >= MAX_OPEN_REVIEWS {
        return Err(format!(
            "cannot review {}: {open} reviews wait for a decision already (at most {MAX_OPEN_REVIEWS})",
            proposal.path.display()
        ));
    }
    Ok(())
}

/// The original text of a proposal whose `original` is `None`: the file on
/// disk (lossy UTF-8: the view only shows it), empty when the file does not
/// exist yet.
pub async fn original_text(proposal: &Proposal) -> Result<String, String> {
    match &proposal.original {
        Some(text) => Ok(text.clone()),
        None => disk_text(&proposal.path).await,
    }
}

/// The file's text on disk as a review shows it (lossy UTF-8), empty when
/// the file does not exist yet: at most [`MAX_REVIEW_BYTES`], and never a
/// FIFO, device or procfs file (`/proc/self/pagemap` says 0 bytes and
/// reads gigabytes).
pub async fn disk_text(path: &std::path::Path) -> Result<String, String> {
    match crate::core::checked_file::read(path, MAX_REVIEW_BYTES).await {
        Ok(bytes) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
        Err(why) if why.is_not_found() => Ok(String::new()),
        Err(why) => Err(why.message(path, crate::core::checked_file::Use::Review)),
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
        }
    }

    #[test]
    fn proposals_over_the_size_or_past_the_count_are_refused_with_a_reason() {
        let p = proposal(PathBuf::from("/w/a.txt"), None);
        assert_eq!(admit(&p, 0, false), Ok(()));
        assert_eq!(admit(&p, MAX_OPEN_REVIEWS - 1, false), Ok(()));
        let full = admit(&p, MAX_OPEN_REVIEWS, false).unwrap_err();
        assert!(full.contains("32 reviews wait") && full.contains("/w/a.txt"), "{full}");
        // Replacing a review of the same name adds none.
        assert_eq!(admit(&p, MAX_OPEN_REVIEWS, true), Ok(()));
        let big = Proposal { proposed: "x".repeat(MAX_REVIEW_BYTES as usize + 1), ..p };
        assert!(admit(&big, 0, false).unwrap_err().contains("more than a review shows"));
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
        assert!(err.contains("not a regular file"), "{err}");
    }
}
