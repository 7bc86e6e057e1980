//! Three-way merges of lines, for two ways an agent's change meets the
//! user's:
//! - [`rebase`]: a proposal carried over the user's unsaved changes;
//! - [`rebase_edit`]: the rest of an edit applied in slices, moved onto a
//!   buffer someone changed between two slices.
//!
//! ## `rebase`
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
//!
//! ## `rebase_edit`
//! When the buffer changes between two slices of an agent's edit (the user
//! typed, a plugin changed it): the rest of the edit, moved onto the buffer
//! as it is now. A three-way merge of lines: `base` is the buffer as the
//! edit left it, `ours` the edit's remaining hunks over it, `theirs` the
//! change someone else made to it. Where the two touch the same lines the
//! edit wins (what it replaces is still in the undo history); elsewhere
//! both are kept.

use super::edit::{line_hunks, Hunk};
use std::ops::Range;

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
    let ours_lines: Vec<&str> = ours.split_inclusive('\n').collect();
    let theirs_lines: Vec<&str> = theirs.split_inclusive('\n').collect();
    let ours_hunks = line_hunks(&base_lines, &ours_lines);
    let theirs_hunks = line_hunks(&base_lines, &theirs_lines);
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
            side_text(&base_lines, &theirs_lines, theirs_region, start, end)
        } else if theirs_region.is_empty() {
            side_text(&base_lines, &ours_lines, ours_region, start, end)
        } else {
            let agents = side_text(&base_lines, &theirs_lines, theirs_region, start, end);
            // The agent's text may hold the user's lines already (Amp reads
            // the buffer): only lines of the user's that it lacks count.
            let kept: std::collections::HashSet<&str> = agents.split_inclusive('\n').collect();
            if ours_region.iter().flat_map(|h| &ours_lines[h.new.clone()]).any(|line| !kept.contains(line)) {
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

/// Base lines `start..end` with one side's `hunks` (all inside, indices
/// into that side's `lines`) applied.
fn side_text(base: &[&str], lines: &[&str], hunks: &[Hunk], start: usize, end: usize) -> String {
    let mut out = String::new();
    let mut at = start;
    for h in hunks {
        out.extend(base[at..h.start].iter().copied());
        out.extend(lines[h.new.clone()].iter().copied());
        at = h.old_end;
    }
    out.extend(base[at..end].iter().copied());
    out
}

/// The hunks, over the buffer as it is now (`base` changed by
/// `their_hunks`, made by `edit::line_hunks`), that apply `ours`
/// (ascending, disjoint lines of `base` and what they become) and keep
/// their changes where ours do not touch them.
pub fn rebase_edit<'a>(
    base: &[&'a str],
    ours: &[(Range<usize>, Vec<&'a str>)],
    their_hunks: &[Hunk],
) -> Vec<(Range<usize>, Vec<&'a str>)> {
    let mut out = Vec::new();
    // Where a line of `base` after the groups so far is now, minus where it was.
    let mut shift: isize = 0;
    let (mut i, mut j) = (0, 0);
    while i < ours.len() || j < their_hunks.len() {
        let ours_first = j >= their_hunks.len() || (i < ours.len() && ours[i].0.start <= their_hunks[j].start);
        let (lo, mut hi) =
            if ours_first { (ours[i].0.start, ours[i].0.end) } else { (their_hunks[j].start, their_hunks[j].old_end) };
        let (first_ours, first_theirs) = (i, j);
        if ours_first {
            i += 1;
        } else {
            j += 1;
        }
        // Everything that touches the group joins it.
        loop {
            if i < ours.len() && touches(lo, hi, &ours[i].0) {
                hi = hi.max(ours[i].0.end);
                i += 1;
            } else if j < their_hunks.len() && touches(lo, hi, &(their_hunks[j].start..their_hunks[j].old_end)) {
                hi = hi.max(their_hunks[j].old_end);
                j += 1;
            } else {
                break;
            }
        }
        let growth: isize =
            their_hunks[first_theirs..j].iter().map(|h| h.new.len() as isize - (h.old_end - h.start) as isize).sum();
        if i > first_ours {
            let mut lines = Vec::new();
            let mut at = lo;
            for (range, new) in &ours[first_ours..i] {
                lines.extend_from_slice(&base[at..range.start]);
                lines.extend_from_slice(new);
                at = range.end;
            }
            lines.extend_from_slice(&base[at..hi]);
            let start = (lo as isize + shift) as usize;
            let end = (hi as isize + shift + growth) as usize;
            out.push((start..end, lines));
        }
        shift += growth;
    }
    out
}

/// Whether `next` (starting at or after `lo`) belongs to the group
/// `lo..hi`: it overlaps it, or one of them is an insertion at the other's
/// edge (two insertions at one place have no order of their own).
fn touches(lo: usize, hi: usize, next: &Range<usize>) -> bool {
    next.start < hi || (next.start == hi && (lo == hi || next.is_empty()))
}

#[cfg(test)]
mod text_tests {
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

#[cfg(test)]
mod edit_tests {
    use super::*;
    use crate::core::edit::line_hunks;

    fn apply(base: &[&str], hunks: &[(Range<usize>, Vec<&str>)]) -> Vec<String> {
        let mut out: Vec<String> = base.iter().map(|s| s.to_string()).collect();
        for (range, lines) in hunks.iter().rev() {
            out.splice(range.clone(), lines.iter().map(|s| s.to_string()));
        }
        out
    }

    /// The buffer after `theirs` then the rebased `ours`.
    fn merged(base: &[&str], ours: &[(Range<usize>, Vec<&str>)], theirs: &[&str]) -> Vec<String> {
        let hunks = rebase_edit(base, ours, &line_hunks(base, theirs));
        apply(theirs, &hunks)
    }

    #[test]
    fn changes_that_do_not_touch_are_both_kept() {
        let base = ["a", "b", "c", "d", "e"];
        let ours = [(1..2, vec!["B"]), (4..5, vec!["E", "E2"])];
        // They inserted a line at the top and changed "c".
        let theirs = ["x", "a", "b", "C", "d", "e"];
        assert_eq!(merged(&base, &ours, &theirs), ["x", "a", "B", "C", "d", "E", "E2"]);
        // They deleted lines before ours.
        assert_eq!(merged(&base, &[(3..4, vec!["D"])], &["c", "d", "e"]), ["c", "D", "e"]);
        // Nothing of ours left: their text stays.
        assert_eq!(merged(&base, &[], &theirs), theirs);
        // Nothing of theirs: ours apply.
        assert_eq!(merged(&base, &ours, &base), ["a", "B", "c", "d", "E", "E2"]);
    }

    #[test]
    fn where_both_change_the_same_lines_the_edit_wins() {
        let base = ["a", "b", "c", "d"];
        let ours = [(1..3, vec!["B", "C"])];
        assert_eq!(merged(&base, &ours, &["a", "b", "mine", "d"]), ["a", "B", "C", "d"]);
        // Two insertions at the same place: ours.
        assert_eq!(
            merged(&base, &[(2..2, vec!["ours"])], &["a", "b", "theirs", "c", "d"]),
            ["a", "b", "ours", "c", "d"]
        );
        // An insertion of theirs right after our replaced block is a conflict, kept safe: ours.
        assert_eq!(merged(&base, &[(0..2, vec!["A"])], &["a", "b", "t", "c", "d"]), ["A", "c", "d"]);
    }

    #[test]
    fn rebased_hunks_are_ascending_and_disjoint_over_the_new_text() {
        // A pseudo-random mix, checked against the rule: outside ours'
        // ranges, theirs are kept.
        let base: Vec<String> = (0..200).map(|i| format!("l{i}")).collect();
        let base: Vec<&str> = base.iter().map(String::as_str).collect();
        let mut theirs: Vec<&str> = base.clone();
        theirs.insert(5, "t5");
        theirs.retain(|l| *l != "l120");
        let at = theirs.iter().position(|l| *l == "l150").unwrap();
        theirs[at] = "t150";
        let ours = [(50..52, vec!["o50"]), (100..100, vec!["o100"]), (180..190, vec![])];
        let hunks = rebase_edit(&base, &ours, &line_hunks(&base, &theirs));
        assert!(hunks.windows(2).all(|w| w[0].0.end <= w[1].0.start));
        let out = apply(&theirs, &hunks);
        assert!(out.contains(&"t5".to_string()) && out.contains(&"t150".to_string()));
        assert!(!out.contains(&"l120".to_string()) && !out.contains(&"l51".to_string()));
        assert!(out.contains(&"o50".to_string()) && out.contains(&"o100".to_string()));
        assert!(!out.iter().any(|l| l == "l185"));
        assert_eq!(out.len(), 200 + 1 - 1 - 1 + 1 - 10);
    }
}
