//! When the buffer changes between two slices of an agent's edit (the user
//! typed, a plugin changed it): the rest of the edit, moved onto the buffer
//! as it is now. A three-way merge of lines: `base` is the buffer as the
//! edit left it, `ours` the edit's remaining hunks over it, `theirs` the
//! change someone else made to it. Where the two touch the same lines the
//! edit wins (what it replaces is still in the undo history); elsewhere
//! both are kept.

use std::ops::Range;

use super::edit::Hunk;

/// The hunks, over the buffer as it is now (`base` changed by
/// `their_hunks`, made by `edit::line_hunks`), that apply `ours`
/// (ascending, disjoint lines of `base` and what they become) and keep
/// their changes where ours do not touch them.
pub fn rebase<'a>(
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
mod tests {
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
        let hunks = rebase(base, ours, &line_hunks(base, theirs));
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
        let hunks = rebase(&base, &ours, &line_hunks(&base, &theirs));
        assert!(hunks.windows(2).all(|w| w[0].0.end <= w[1].0.start));
        let out = apply(&theirs, &hunks);
        assert!(out.contains(&"t5".to_string()) && out.contains(&"t150".to_string()));
        assert!(!out.contains(&"l120".to_string()) && !out.contains(&"l51".to_string()));
        assert!(out.contains(&"o50".to_string()) && out.contains(&"o100".to_string()));
        assert!(!out.iter().any(|l| l == "l185"));
        assert_eq!(out.len(), 200 + 1 - 1 - 1 + 1 - 10);
    }
}
