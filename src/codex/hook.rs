//! One `apply_patch` of Codex, reviewed: Codex's `PreToolUse` hook hands
//! us the patch before Codex applies it, each file becomes a proposal in
//! the editor's review view, and the user's decisions become the hook's
//! answer ([`HookAnswer`]). Plain Rust over [`Editor`]; the editor never
//! writes the files (Codex does, with its patch or ours).
//!
//! A file's proposal is what Codex would write: the patch applied to the
//! file's text on disk, which is what Codex patches and what its model
//! read. When the file's buffer has unsaved changes the review shows the
//! proposal carried over them (`core::rebase`), so the accepted text keeps
//! them; Codex is then given a patch of ours (`rewrite`) that writes
//! exactly the accepted text, as it is when the user tweaked the proposal.

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures_util::stream::{FuturesUnordered, StreamExt};

use super::apply::apply_update;
use super::patch::{parse, Change};
use super::protocol::{HookAnswer, MAX_PATCH_BYTES, MAX_PATCH_FILES};
use super::rewrite::{rewrite, Target};
use crate::core::editor::{Editor, EditorError};
use crate::core::review::{Decision, Owner, Proposal, ReviewEnd, MAX_REVIEW_BYTES};

/// One file of a patch, before the user decides.
#[derive(Debug, Clone)]
struct File {
    change: Change,
    abs: PathBuf,
    /// The review's name: the path as the patch gives it (and where it moves).
    name: String,
    /// Its text on disk (`None`: no such file).
    disk: Option<String>,
    /// What Codex would write (`None`: the file deleted).
    proposed: Option<String>,
}

/// Reviews `patch` (paths relative to `cwd`) for `owner`, waiting at most
/// `timeout` for the user.
pub async fn review(editor: &dyn Editor, owner: Owner, timeout: Duration, cwd: &Path, patch: &str) -> HookAnswer {
    let files = match prepare(cwd, patch).await {
        Ok(files) => files,
        Err(why) => return HookAnswer::Deny(format!("{why}; the patch was not applied")),
    };
    let decisions = match decide(editor, owner, timeout, &files).await {
        Ok(decisions) => decisions,
        Err(why) => return HookAnswer::Deny(why),
    };
    let targets: Vec<Target> = files
        .iter()
        .zip(decisions)
        .map(|(f, text)| Target {
            change: f.change.clone(),
            disk: f.disk.clone(),
            // A deletion accepted as proposed (the empty text) deletes.
            accepted: match (&f.change, text) {
                (Change::Delete { .. }, t) if t.is_empty() => None,
                (_, t) => Some(t),
            },
        })
        .collect();
    if files.iter().zip(&targets).all(|(f, t)| f.proposed == t.accepted) {
        return HookAnswer::Apply;
    }
    match rewrite(&targets) {
        Ok(text) => HookAnswer::Rewrite(text),
        Err(why) if targets.iter().all(|t| t.accepted == t.disk) => {
            HookAnswer::Deny(format!("the user kept the files as they were in Neovim's review ({why})"))
        }
        Err(why) => HookAnswer::Deny(format!(
            "the text accepted in Neovim cannot be written by a patch ({why}); nothing was applied"
        )),
    }
}

/// The patch's files with their texts now and as Codex would write them;
/// `Err`: why the patch cannot be reviewed.
async fn prepare(cwd: &Path, patch: &str) -> Result<Vec<File>, String> {
    if patch.len() > MAX_PATCH_BYTES {
        return Err(format!("the patch is {} bytes, more than Neovim reviews ({MAX_PATCH_BYTES})", patch.len()));
    }
    if !cwd.is_absolute() {
        return Err(format!("Codex's working directory '{}' is not absolute", cwd.display()));
    }
    let parsed = parse(patch).map_err(|e| format!("Neovim cannot read the patch ({e})"))?;
    let n = parsed.changes.len();
    if n == 0 {
        return Err("the patch changes no file".into());
    }
    if n > MAX_PATCH_FILES {
        return Err(format!("the patch changes {n} files, more than Neovim reviews at once ({MAX_PATCH_FILES})"));
    }
    let mut seen: Vec<PathBuf> = Vec::new();
    let mut files = Vec::new();
    for change in parsed.changes {
        let path = change.path().to_owned();
        let abs = cwd.join(&path);
        let move_to = match &change {
            Change::Update { move_to: Some(to), .. } => Some(to.clone()),
            _ => None,
        };
        for p in std::iter::once(abs.clone()).chain(move_to.as_ref().map(|to| cwd.join(to))) {
            if seen.contains(&p) {
                return Err(format!("the patch changes {} twice", p.display()));
            }
            seen.push(p);
        }
        let disk = read_disk(&abs).await?;
        let proposed = match (&change, &disk) {
            (Change::Add { lines, .. }, _) => Some(Change::added_text(lines)),
            (Change::Delete { .. }, Some(_)) => None,
            (Change::Update { chunks, .. }, Some(text)) => {
                Some(apply_update(text, chunks).map_err(|e| format!("cannot apply the patch to {path}: {e}"))?)
            }
            (_, None) => return Err(format!("{path} does not exist")),
        };
        let name = match &move_to {
            Some(to) => format!("{path} → {to}"),
            None => path,
        };
        files.push(File { change, abs, name, disk, proposed });
    }
    Ok(files)
}

/// The file's text on disk: `None` when there is none; `Err` for what
/// Codex could not patch either (not a regular file, not UTF-8) or a file
/// bigger than a review shows. Read through `core::checked_file` (no FIFO,
/// device or procfs file, the cap enforced while reading).
async fn read_disk(path: &Path) -> Result<Option<String>, String> {
    use crate::core::checked_file::{read, Use};
    match read(path, MAX_REVIEW_BYTES).await {
        Ok(bytes) => String::from_utf8(bytes).map(Some).map_err(|_| format!("{} is not UTF-8 text", path.display())),
        Err(refused) if refused.is_not_found() => Ok(None),
        Err(refused) => Err(refused.message(path, Use::Review)),
    }
}

/// Every file's accepted text, in order; `Err`: the reason to deny (a
/// rejection, a review refused, no decision in time). The first rejection
/// closes the other reviews: the patch goes as a whole or not at all.
async fn decide(editor: &dyn Editor, owner: Owner, timeout: Duration, files: &[File]) -> Result<Vec<String>, String> {
    let mut waiting: FuturesUnordered<_> = files
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let proposal = Proposal {
                name: f.name.clone(),
                path: f.abs.clone(),
                original: None,
                proposed: f.proposed.clone().unwrap_or_default(),
                owner,
                // A tweak reaches Codex as a replacement patch.
                edits_kept: true,
            };
            async move { (i, editor.propose(proposal).await) }
        })
        .collect();
    let mut accepted: Vec<Option<String>> = vec![None; files.len()];
    let outcome = tokio::time::timeout(timeout, async {
        while let Some((i, decision)) = waiting.next().await {
            match decision {
                Ok(Decision::Accepted(text)) => accepted[i] = Some(text),
                Ok(Decision::Rejected) => {
                    return Err(format!("the user rejected the change to {} in Neovim's review", files[i].name))
                }
                Err(EditorError::Refused(why)) => return Err(format!("Neovim cannot review it: {why}")),
                Err(e) => return Err(format!("Neovim cannot review it: {e}")),
            }
        }
        Ok(())
    })
    .await;
    let (result, end) = match outcome {
        Ok(Ok(())) => return Ok(accepted.into_iter().map(Option::unwrap_or_default).collect()),
        Ok(Err(why)) => (format!("{why}; the patch was not applied"), ReviewEnd::Agent),
        Err(_) => (
            format!("nobody decided in Neovim within {} s; the patch was not applied", timeout.as_secs()),
            ReviewEnd::TimedOut,
        ),
    };
    // The other files' reviews go with the patch.
    drop(waiting);
    let _ = editor.close_reviews(owner, end).await;
    Err(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::fake_editor::{Call, FakeEditor};
    use crate::testutil::TempDir;

    fn run<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
    }

    const HOUR: Duration = Duration::from_secs(3600);

    fn patch(body: &str) -> String {
        format!("*** Begin Patch\n{body}\n*** End Patch\n")
    }

    #[test]
    fn accepted_as_proposed_lets_codex_apply_its_own_patch() {
        let dir = TempDir::new("codex-hook");
        std::fs::write(dir.0.join("a.txt"), "one\ntwo\n").unwrap();
        let fake = FakeEditor::new(false);
        fake.decide(vec![Decision::Accepted("one\nTWO\n".into()), Decision::Accepted("new\n".into())]);
        let p = patch("*** Update File: a.txt\n@@\n one\n-two\n+TWO\n*** Add File: sub/b.txt\n+new");
        let answer = run(review(&fake, Owner::new("Codex"), HOUR, &dir.0, &p));
        assert_eq!(answer, HookAnswer::Apply);
        let proposed: Vec<_> = fake.calls().into_iter().filter(|c| matches!(c, Call::Propose(..))).collect();
        assert_eq!(
            proposed,
            [Call::Propose("a.txt".into(), "one\nTWO\n".into()), Call::Propose("sub/b.txt".into(), "new\n".into())]
        );
        assert_eq!(std::fs::read_to_string(dir.0.join("a.txt")).unwrap(), "one\ntwo\n", "never written here");
    }

    #[test]
    fn a_tweak_becomes_a_patch_that_writes_exactly_it() {
        let dir = TempDir::new("codex-hook");
        std::fs::write(dir.0.join("a.txt"), "one\ntwo\nthree\n").unwrap();
        std::fs::write(dir.0.join("gone.txt"), "bye\n").unwrap();
        let fake = FakeEditor::new(false);
        fake.decide(vec![Decision::Accepted("one\nTWO (mine)\nthree\n".into()), Decision::Accepted(String::new())]);
        let p = patch("*** Update File: a.txt\n*** Move to: b.txt\n@@\n one\n-two\n+TWO\n*** Delete File: gone.txt");
        let HookAnswer::Rewrite(text) = run(review(&fake, Owner::new("Codex"), HOUR, &dir.0, &p)) else { panic!() };
        assert_eq!(
            text,
            "*** Begin Patch\n*** Update File: a.txt\n*** Move to: b.txt\n@@\n one\n-two\n+TWO (mine)\n three\n*** Delete File: gone.txt\n*** End Patch\n"
        );
        assert!(fake.calls().contains(&Call::Propose("a.txt → b.txt".into(), "one\nTWO\nthree\n".into())));
    }

    #[test]
    fn a_rejection_denies_the_whole_patch_and_closes_the_other_reviews() {
        let dir = TempDir::new("codex-hook");
        let fake = FakeEditor::new(false);
        fake.decide(vec![Decision::Rejected]);
        let p = patch("*** Add File: x.txt\n+x\n*** Add File: y.txt\n+y");
        let HookAnswer::Deny(why) = run(review(&fake, Owner::new("Codex"), HOUR, &dir.0, &p)) else { panic!() };
        assert_eq!(why, "the user rejected the change to x.txt in Neovim's review; the patch was not applied");
        assert!(fake.calls().iter().any(|c| matches!(c, Call::CloseReviews(_, ReviewEnd::Agent))));
        assert!(!dir.0.join("x.txt").exists());
    }

    #[test]
    fn no_decision_in_time_denies() {
        let dir = TempDir::new("codex-hook");
        let fake = FakeEditor::new(false);
        fake.hold_reviews();
        let p = patch("*** Add File: x.txt\n+x");
        let answer = run(review(&fake, Owner::new("Codex"), Duration::from_millis(50), &dir.0, &p));
        assert_eq!(answer, HookAnswer::Deny("nobody decided in Neovim within 0 s; the patch was not applied".into()));
        assert!(fake.calls().iter().any(|c| matches!(c, Call::CloseReviews(_, ReviewEnd::TimedOut))));
    }

    #[test]
    fn patches_that_cannot_be_reviewed_are_denied_with_the_reason() {
        let dir = TempDir::new("codex-hook");
        std::fs::write(dir.0.join("a.txt"), "a\n").unwrap();
        std::fs::write(dir.0.join("latin1.txt"), b"caf\xe9\n").unwrap();
        let fake = FakeEditor::new(false);
        let deny = |p: &str| match run(review(&fake, Owner::new("Codex"), HOUR, &dir.0, p)) {
            HookAnswer::Deny(why) => why,
            other => panic!("{other:?}"),
        };
        assert!(deny("nonsense").starts_with("Neovim cannot read the patch (line 1: the patch must start with"));
        assert_eq!(deny(&patch("")), "the patch changes no file; the patch was not applied");
        assert_eq!(deny(&patch("*** Delete File: none.txt")), "none.txt does not exist; the patch was not applied");
        assert!(deny(&patch("*** Update File: a.txt\n@@\n-zzz\n+y")).starts_with("cannot apply the patch to a.txt: "));
        assert!(deny(&patch("*** Update File: latin1.txt\n@@\n+x"))
            .ends_with("latin1.txt is not UTF-8 text; the patch was not applied"));
        assert!(deny(&patch("*** Add File: a.txt\n+1\n*** Delete File: a.txt")).contains("a.txt twice"));
        assert!(deny(&patch("*** Update File: .\n@@\n+x")).contains("it is a directory, not a regular file"));
        // A FIFO is refused through core::checked_file, without blocking.
        let fifo = dir.0.join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(deny(&patch("*** Update File: fifo\n@@\n+x")).contains("not a regular file"));
        assert!(fake.calls().is_empty(), "nothing was proposed");
    }

    #[test]
    fn files_per_patch_and_patch_bytes_at_the_limit_and_one_past() {
        let dir = TempDir::new("codex-hook");
        let fake = FakeEditor::new(false);
        let adds = |n: usize| (0..n).map(|i| format!("*** Add File: f{i}\n+x")).collect::<Vec<_>>().join("\n");
        fake.decide(vec![Decision::Accepted("x\n".into()); MAX_PATCH_FILES]);
        let at = run(review(&fake, Owner::new("Codex"), HOUR, &dir.0, &patch(&adds(MAX_PATCH_FILES))));
        assert_eq!(at, HookAnswer::Apply);
        let HookAnswer::Deny(why) =
            run(review(&fake, Owner::new("Codex"), HOUR, &dir.0, &patch(&adds(MAX_PATCH_FILES + 1))))
        else {
            panic!()
        };
        assert!(why.contains("changes 33 files, more than Neovim reviews at once (32)"), "{why}");
        // Bytes: a one-file patch padded to the limit, then one byte more.
        let base = patch("*** Add File: big.txt\n+");
        let at = base.replace("+\n", &format!("+{}\n", "x".repeat(MAX_PATCH_BYTES - base.len())));
        assert_eq!(at.len(), MAX_PATCH_BYTES);
        fake.decide(vec![Decision::Rejected]);
        let answer = run(review(&fake, Owner::new("Codex"), HOUR, &dir.0, &at));
        assert!(matches!(&answer, HookAnswer::Deny(w) if w.contains("rejected")), "{answer:?}");
        let over = at.replacen('x', "xx", 1);
        let HookAnswer::Deny(why) = run(review(&fake, Owner::new("Codex"), HOUR, &dir.0, &over)) else { panic!() };
        assert!(
            why.contains(&format!("the patch is {} bytes, more than Neovim reviews", MAX_PATCH_BYTES + 1)),
            "{why}"
        );
    }
}
