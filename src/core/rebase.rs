//! An agent's proposal carried over the user's unsaved changes.
//!
//! An agent proposes a file's whole new text from what it read: the file on
//! disk (Claude, Gemini) or readFile's answer some time earlier (Amp). When
//! the file's buffer has unsaved changes the proposal does not hold them;
//! shown against the buffer they read as the agent deleting the user's
//! lines, and accepting would take them out of the buffer. [`rebase`]
//! merges three ways (base: the disk; ours: the buffer; theirs: the
//! proposal) so the review shows only what the agent changed:
//! - a region only the user changed keeps the user's text;
//! - a region only the agent changed takes the agent's;
//! - a region both changed the same way is kept once;
//! - a region both changed differently takes the agent's text, and is
//!   counted when that text lacks a line the user wrote there: the review
//!   shows it as a hunk against the user's own text, for the user to
//!   decide (nothing is dropped without being shown).

use super::edit::{line_hunks, Hunk};

/// The proposal over the user's text, and how many regions both changed
/// differently (those hold the agent's text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rebased {
    pub text: String,
    pub conflicts: usize,
}

/// `theirs` (made from `base`) carried over `ours` (also made from `base`).
pub fn rebase(base: &str, ours: &str, theirs: &str) -> Rebased {
    if ours == base || ours == theirs {
        return Rebased { text: theirs.to_owned(), conflicts: 0 };
    }
    if theirs == base {
        return Rebased { text: ours.to_owned(), conflicts: 0 };
    }
    // Lines with their line breaks: a text is exactly its lines joined.
    let base_lines: Vec<&str> = base.split_inclusive('\n').collect();
    let ours_hunks = line_hunks(&base_lines, &ours.split_inclusive('\n').collect::<Vec<_>>());
    let theirs_hunks = line_hunks(&base_lines, &theirs.split_inclusive('\n').collect::<Vec<_>>());
    let (mut i, mut j, mut at) = (0, 0, 0);
    let mut text = String::with_capacity(theirs.len().max(ours.len()));
    let mut conflicts = 0;
    loop {
        let start = match (ours_hunks.get(i), theirs_hunks.get(j)) {
            (None, None) => break,
            (Some(o), None) => o.start,
            (None, Some(t)) => t.start,
            (Some(o), Some(t)) => o.start.min(t.start),
        };
        // The region: every hunk of either side that overlaps it, until
        // none does.
        let (first_ours, first_theirs) = (i, j);
        let mut end = start;
        loop {
            let before = (i, j);
            while let Some(h) = ours_hunks.get(i).filter(|h| overlaps(h, start, end)) {
                end = end.max(h.old_end);
                i += 1;
            }
            while let Some(h) = theirs_hunks.get(j).filter(|h| overlaps(h, start, end)) {
                end = end.max(h.old_end);
                j += 1;
            }
            if (i, j) == before {
                break;
            }
        }
        text.extend(base_lines[at..start].iter().copied());
        let ours_region = &ours_hunks[first_ours..i];
        let theirs_region = &theirs_hunks[first_theirs..j];
        let region = if ours_region.is_empty() {
            side_text(&base_lines, theirs_region, start, end)
        } else if theirs_region.is_empty() {
            side_text(&base_lines, ours_region, start, end)
        } else {
            let agents = side_text(&base_lines, theirs_region, start, end);
            // The agent's text may hold the user's lines already (Amp reads
            // the buffer): only lines of the user's that it lacks count.
            let kept: std::collections::HashSet<&str> = agents.split_inclusive('\n').collect();
            if ours_region.iter().flat_map(|h| &h.lines).any(|line| !kept.contains(line.as_str())) {
                conflicts += 1;
            }
            agents
        };
        text.push_str(&region);
        at = end;
    }
    text.extend(base_lines[at..].iter().copied());
    Rebased { text, conflicts }
}

/// Whether hunk `h` touches the region `start..end` of the base (a hunk
/// that starts where the region starts does, insertions included).
fn overlaps(h: &Hunk, start: usize, end: usize) -> bool {
    h.start == start || (h.start < end && start < h.old_end.max(h.start + 1))
}

/// Base lines `start..end` with one side's `hunks` (all inside) applied.
fn side_text(base: &[&str], hunks: &[Hunk], start: usize, end: usize) -> String {
    let mut out = String::new();
    let mut at = start;
    for h in hunks {
        out.extend(base[at..h.start].iter().copied());
        out.extend(h.lines.iter().map(String::as_str));
        at = h.old_end;
    }
    out.extend(base[at..end].iter().copied());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn clean(text: &str) -> Rebased {
        Rebased { text: text.into(), conflicts: 0 }
    }

    #[test]
    fn the_users_lines_stay_and_the_agents_change_comes_in() {
        let base = "a\nb\nc\nd\ne\n";
        // The user changed b (unsaved); the agent, from the disk, changed d.
        assert_eq!(rebase(base, "a\nB (mine)\nc\nd\ne\n", "a\nb\nc\nD\ne\n"), clean("a\nB (mine)\nc\nD\ne\n"));
        // The user added a line; the agent's text lacks it: kept.
        assert_eq!(rebase(base, "a\nb\nmine\nc\nd\ne\n", "A\nb\nc\nd\ne\n"), clean("A\nb\nmine\nc\nd\ne\n"));
        // The agent read the buffer (readFile): its text has the user's line already.
        assert_eq!(rebase(base, "a\nmine\nb\nc\nd\ne\n", "a\nmine\nb\nc\nd\nE\n"), clean("a\nmine\nb\nc\nd\nE\n"));
        // Unchanged sides.
        assert_eq!(rebase(base, base, "x\n"), clean("x\n"));
        assert_eq!(rebase(base, "x\n", base), clean("x\n"));
    }

    #[test]
    fn a_region_both_changed_differently_is_the_agents_and_counted() {
        let got = rebase("a\nb\nc\n", "a\nB (mine)\nc\n", "a\nB (agent)\nc\n");
        assert_eq!(got, Rebased { text: "a\nB (agent)\nc\n".into(), conflicts: 1 });
        // The agent's text of the region holds the user's line: no conflict.
        let got = rebase("one\ntwo\n", "one\ntwo (unsaved)\n", "ONE\ntwo (unsaved)\n");
        assert_eq!(got, clean("ONE\ntwo (unsaved)\n"));
        // Insertions at the same place are one region.
        let got = rebase("a\nb\n", "a\nmine\nb\n", "a\ntheirs\nb\n");
        assert_eq!(got, Rebased { text: "a\ntheirs\nb\n".into(), conflicts: 1 });
        // Without a final line break on either side.
        assert_eq!(rebase("a\nb", "a\nb\nc", "A\nb").text, "A\nb\nc");
    }

    proptest! {
        #[test]
        fn one_sided_changes_come_through_whole(
            base in proptest::collection::vec("[ab]{0,2}\n", 0..8),
            side in proptest::collection::vec("[abc]{0,2}\n", 0..8),
        ) {
            let (base, side) = (base.concat(), side.concat());
            prop_assert_eq!(rebase(&base, &base, &side), clean(&side));
            prop_assert_eq!(rebase(&base, &side, &base), clean(&side));
            prop_assert_eq!(rebase(&base, &side, &side), clean(&side));
        }

        #[test]
        fn changes_far_apart_both_land(
            head in "[ab]{1,3}", tail in "[ab]{1,3}", mine in "[xy]{1,3}", theirs in "[xy]{1,3}",
        ) {
            let base = format!("{head}\n1\n2\n3\n{tail}\n");
            let ours = format!("{mine}\n1\n2\n3\n{tail}\n");
            let agents = format!("{head}\n1\n2\n3\n{theirs}\n");
            prop_assert_eq!(rebase(&base, &ours, &agents), clean(&format!("{mine}\n1\n2\n3\n{theirs}\n")));
        }
    }
}
