//! A patch of our own that takes files from their text on disk to the text
//! the user accepted: what Codex is given instead of its model's patch when
//! the user tweaked a proposal (or the buffer had unsaved changes the
//! review carried over).
//!
//! Every chunk is made so Codex cannot place it anywhere else: its old
//! lines (three lines of context around the changes, more when needed) are
//! the first exact match at or after the previous chunk. And the whole
//! patch is checked before it goes out: rendered, read back and applied to
//! the texts on disk (`apply`, Codex's rules), it must give exactly the
//! accepted texts; a text no patch can give (a missing final line break,
//! line endings Codex would change) is refused with the reason.

use super::apply::{apply_update, join, lines_of, seek, Ending};
pub use super::error::RewriteError;
use super::patch::{parse, render, Change, Chunk, Line, Patch};
use crate::core::edit::line_hunks;

/// Lines of context around a change.
const CONTEXT: usize = 3;

/// The chunks of an update that turn `old` into `new` (`Ok(vec![])` when
/// they are the same text); `Err` when Codex could not write `new` through
/// an update of `old`.
pub fn update_chunks(old: &str, new: &str) -> Result<Vec<Chunk>, RewriteError> {
    let ending = Ending::of(old);
    let old_lines = lines_of(old, ending);
    let new_lines = lines_of(new, ending);
    if !new.is_empty() && !new.ends_with('\n') {
        return Err(RewriteError::NoFinalLineBreak);
    }
    if join(&new_lines, ending) != new {
        return Err(RewriteError::MixedLineEndings);
    }
    // (A patch's lines are read without a final "\r".)
    if new_lines.iter().any(|l| l.ends_with('\r')) {
        return Err(RewriteError::CrlfInLfFile);
    }
    let hunks = line_hunks(&old_lines, &new_lines);
    // Groups of hunks whose context would touch, as old line ranges.
    let mut groups: Vec<(usize, usize, Vec<usize>)> = Vec::new();
    for (i, h) in hunks.iter().enumerate() {
        let (start, end) = (h.start.saturating_sub(CONTEXT), (h.old_end + CONTEXT).min(old_lines.len()));
        match groups.last_mut() {
            Some(last) if start <= last.1 => {
                last.1 = last.1.max(end);
                last.2.push(i);
            }
            _ => groups.push((start, end, vec![i])),
        }
    }
    let mut chunks = Vec::new();
    let mut cursor = 0;
    for (mut start, end, members) in groups {
        // The first exact match from the cursor must be this one: earlier
        // lines of context are added until it is (at the cursor it is).
        while start > cursor && seek_exact(&old_lines, &old_lines[start..end], cursor) != Some(start) {
            start -= 1;
        }
        let mut lines = Vec::new();
        let mut at = start;
        for &i in &members {
            let h = &hunks[i];
            lines.extend(old_lines[at..h.start].iter().map(|l| Line::Context((*l).to_owned())));
            lines.extend(old_lines[h.start..h.old_end].iter().map(|l| Line::Remove((*l).to_owned())));
            lines.extend(new_lines[h.new.clone()].iter().map(|l| Line::Insert((*l).to_owned())));
            at = h.old_end;
        }
        lines.extend(old_lines[at..end].iter().map(|l| Line::Context((*l).to_owned())));
        chunks.push(Chunk { anchor: None, lines, end_of_file: false });
        cursor = end;
    }
    Ok(chunks)
}

fn seek_exact(lines: &[&str], pattern: &[&str], from: usize) -> Option<usize> {
    if pattern.is_empty() || pattern.len() > lines.len() {
        return seek(lines, pattern, from, false);
    }
    (from..=lines.len() - pattern.len()).find(|&i| crate::core::patch::matches_at(lines, i, pattern, |a, b| a == b))
}

/// Whether an Add can write exactly `text` (each line with a final `\n`).
pub fn addable(text: &str) -> bool {
    text.is_empty() || (text.ends_with('\n') && !text.contains("\r\n"))
}

/// The lines of an Add that writes `text` (see [`addable`]).
pub fn added_lines(text: &str) -> Vec<String> {
    lines_of(text, Ending::Lf).into_iter().map(str::to_owned).collect()
}

/// A file as the rewritten patch must leave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The change of the model's patch this one replaces.
    pub change: Change,
    /// The file's text on disk now (`None`: no such file).
    pub disk: Option<String>,
    /// What the user accepted (`None`: the file deleted).
    pub accepted: Option<String>,
}

/// The patch that gives every target its accepted text, checked (see the
/// module); `Err`: why no patch can.
pub fn rewrite(targets: &[Target]) -> Result<String, RewriteError> {
    let mut changes = Vec::new();
    for t in targets {
        let of = |e| RewriteError::Of { path: t.change.path().to_owned(), source: Box::new(e) };
        changes.extend(change_for(t).map_err(of)?);
    }
    if changes.is_empty() {
        return Err(RewriteError::NothingToChange);
    }
    let text = render(&Patch { changes });
    check(&text, targets)?;
    Ok(text)
}

fn change_for(t: &Target) -> Result<Vec<Change>, RewriteError> {
    let path = t.change.path().to_owned();
    let move_to = match &t.change {
        Change::Update { move_to, .. } => move_to.clone(),
        _ => None,
    };
    match (&t.disk, &t.accepted) {
        (None, None) => Ok(vec![]),
        (Some(_), None) => Ok(vec![Change::Delete { path }]),
        (None, Some(text)) => {
            if !addable(text) {
                return Err(RewriteError::NotAddable);
            }
            Ok(vec![Change::Add { path: move_to.unwrap_or(path), lines: added_lines(text) }])
        }
        (Some(disk), Some(text)) => {
            let chunks = update_chunks(disk, text)?;
            match (chunks.is_empty(), move_to) {
                (true, None) => Ok(vec![]),
                // Moved with its text as it is: an update needs a chunk.
                (true, Some(to)) => {
                    if !addable(text) {
                        return Err(RewriteError::NotMovable);
                    }
                    Ok(vec![Change::Delete { path }, Change::Add { path: to, lines: added_lines(text) }])
                }
                (false, move_to) => Ok(vec![Change::Update { path, move_to, chunks }]),
            }
        }
    }
}

/// The rendered patch, read back and applied to the disk's texts, gives
/// the accepted ones.
fn check(text: &str, targets: &[Target]) -> Result<(), RewriteError> {
    let patch = parse(text).map_err(RewriteError::NotReadBack)?;
    for t in targets {
        let (from, to) = match &t.change {
            Change::Update { path, move_to: Some(to), .. } => (path.as_str(), to.as_str()),
            other => (other.path(), other.path()),
        };
        let mut text = t.disk.clone();
        for change in &patch.changes {
            match change {
                Change::Add { path, lines } if path == to || path == from => text = Some(Change::added_text(lines)),
                Change::Delete { path } if path == from => text = None,
                Change::Update { path, chunks, .. } if path == from => {
                    let old = text.as_deref().ok_or_else(|| RewriteError::UpdatedButAbsent(from.to_owned()))?;
                    let not_applied = |source| RewriteError::NotApplied { path: from.to_owned(), source };
                    text = Some(apply_update(old, chunks).map_err(not_applied)?);
                }
                _ => {}
            }
        }
        if text != t.accepted {
            return Err(RewriteError::NotTheAcceptedText(from.to_owned()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn update(path: &str) -> Change {
        Change::Update { path: path.into(), move_to: None, chunks: vec![] }
    }

    fn target(change: Change, disk: Option<&str>, accepted: Option<&str>) -> Target {
        Target { change, disk: disk.map(Into::into), accepted: accepted.map(Into::into) }
    }

    #[test]
    fn a_small_change_gets_three_lines_of_context() {
        let old: String = (1..=20).map(|i| format!("line {i}\n")).collect();
        let new = old.replace("line 10\n", "line ten\n");
        let chunks = update_chunks(&old, &new).unwrap();
        assert_eq!(chunks.len(), 1);
        assert_eq!(chunks[0].old(), ["line 7", "line 8", "line 9", "line 10", "line 11", "line 12", "line 13"]);
        assert_eq!(apply_update(&old, &chunks).unwrap(), new);
        let text = rewrite(&[target(update("f.txt"), Some(&old), Some(&new))]).unwrap();
        assert_eq!(
            text,
            "*** Begin Patch\n*** Update File: f.txt\n@@\n line 7\n line 8\n line 9\n-line 10\n+line ten\n line 11\n line 12\n line 13\n*** End Patch\n"
        );
    }

    #[test]
    fn repeated_lines_get_the_context_that_makes_a_chunk_unique() {
        let old = "x\nx\nx\nx\nx\nx\nx\nx\nx\nx\n";
        let new = "x\nx\nx\nx\nx\nx\nx\nx\nX\nx\n";
        let chunks = update_chunks(old, new).unwrap();
        assert_eq!(apply_update(old, &chunks).unwrap(), new);
        // Two far apart changes in a file of identical lines.
        let old: String = "same\n".repeat(30);
        let mut lines: Vec<&str> = old.lines().collect();
        lines[5] = "five";
        lines[25] = "twenty-five";
        let new = lines.iter().map(|l| format!("{l}\n")).collect::<String>();
        let chunks = update_chunks(&old, &new).unwrap();
        assert_eq!(apply_update(&old, &chunks).unwrap(), new);
    }

    #[test]
    fn texts_codex_cannot_write_are_refused_with_the_reason() {
        let why = update_chunks("a\nb\n", "a\nB").unwrap_err();
        assert_eq!(why.to_string(), "the text has no final line break, which Codex always writes");
        let why = update_chunks("a\r\nb\r\n", "a\r\nB\n").unwrap_err();
        assert_eq!(why, RewriteError::MixedLineEndings);
        let why = update_chunks("a\nb\n", "a\r\nB\r\n").unwrap_err();
        assert_eq!(why.to_string(), "the text has CRLF line endings in a file Codex writes with LF");
        // CRLF kept in a CRLF file.
        let chunks = update_chunks("a\r\nb\r\n", "a\r\nB\r\n").unwrap();
        assert_eq!(apply_update("a\r\nb\r\n", &chunks).unwrap(), "a\r\nB\r\n");
        let why =
            rewrite(&[target(Change::Add { path: "n".into(), lines: vec![] }, None, Some("no eol"))]).unwrap_err();
        assert_eq!(why.to_string(), "n: a new file's text must end with a line break and use LF line endings");
        assert_eq!(
            rewrite(&[target(update("f"), Some("a\n"), Some("a\n"))]).unwrap_err().to_string(),
            "the accepted texts are the files as they are"
        );
    }

    #[test]
    fn adds_deletes_and_moves() {
        let add = Change::Add { path: "new.txt".into(), lines: vec!["x".into()] };
        assert_eq!(
            rewrite(&[target(add, None, Some("y\nz\n"))]).unwrap(),
            "*** Begin Patch\n*** Add File: new.txt\n+y\n+z\n*** End Patch\n"
        );
        // A deletion the user kept a text for becomes an update.
        let del = Change::Delete { path: "old.txt".into() };
        assert_eq!(
            rewrite(&[target(del.clone(), Some("a\nb\n"), Some("a\n"))]).unwrap(),
            "*** Begin Patch\n*** Update File: old.txt\n@@\n a\n-b\n*** End Patch\n"
        );
        let moved = Change::Update { path: "a.txt".into(), move_to: Some("b.txt".into()), chunks: vec![] };
        assert_eq!(
            rewrite(&[target(moved.clone(), Some("1\n2\n"), Some("1\nTWO\n"))]).unwrap(),
            "*** Begin Patch\n*** Update File: a.txt\n*** Move to: b.txt\n@@\n 1\n-2\n+TWO\n*** End Patch\n"
        );
        // Moved with the text as it was: a delete and an add.
        assert_eq!(
            rewrite(&[target(moved, Some("1\n2\n"), Some("1\n2\n"))]).unwrap(),
            "*** Begin Patch\n*** Delete File: a.txt\n*** Add File: b.txt\n+1\n+2\n*** End Patch\n"
        );
    }

    /// Lines from a small alphabet, so lines repeat and matches are ambiguous.
    fn text() -> impl Strategy<Value = String> {
        prop::collection::vec(prop::sample::select(vec!["a", "b", "", "  a", "c d", "}", "é"]), 0..30)
            .prop_map(|lines| lines.iter().map(|l| format!("{l}\n")).collect())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        /// Any accepted text with a final line break: the rewritten patch,
        /// read back and applied as Codex applies it, writes exactly it.
        #[test]
        fn a_rewritten_update_writes_exactly_the_accepted_text(old in text(), new in text()) {
            let chunks = update_chunks(&old, &new).unwrap();
            prop_assert_eq!(apply_update(&old, &chunks).unwrap(), new.clone());
            if old != new {
                let patch = rewrite(&[target(update("f"), Some(&old), Some(&new))]).unwrap();
                let Change::Update { chunks, .. } = &parse(&patch).unwrap().changes[0] else { panic!() };
                prop_assert_eq!(apply_update(&old, chunks).unwrap(), new);
            }
        }

        #[test]
        fn crlf_files_stay_crlf(old in text(), new in text()) {
            prop_assume!(!old.is_empty());
            let (old, new) = (old.replace('\n', "\r\n"), new.replace('\n', "\r\n"));
            let chunks = update_chunks(&old, &new).unwrap();
            prop_assert_eq!(apply_update(&old, &chunks).unwrap(), new);
        }
    }
}
