//! Text arithmetic for `editFile` and reloads: byte-range edits and the line
//! hunks that changed, so an edit disturbs as few marks, folds and cursors as
//! possible and stays one undo step (`crate::core::filetext` maps a file's text to
//! buffer lines).

/// Why a byte-range edit does not fit its text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RangeError {
    #[error("start ({start}) is after end ({end})")]
    Reversed { start: u64, end: u64 },
    #[error("end ({end}) is past the end of the text ({len} bytes)")]
    PastEnd { end: u64, len: u64 },
    /// `which` is "start" or "end".
    #[error("{which} ({at}) falls inside a multi-byte character")]
    InsideCharacter { which: &'static str, at: usize },
}

/// Replaces bytes `start..end` of `old` with `new_text`, refusing offsets that
/// are out of range or fall inside a UTF-8 character.
pub fn apply_range(old: &str, start: u64, end: u64, new_text: &str) -> Result<String, RangeError> {
    let len = old.len() as u64;
    if start > end {
        return Err(RangeError::Reversed { start, end });
    }
    if end > len {
        return Err(RangeError::PastEnd { end, len });
    }
    let (start, end) = (start as usize, end as usize);
    for (which, at) in [("start", start), ("end", end)] {
        if !old.is_char_boundary(at) {
            return Err(RangeError::InsideCharacter { which, at });
        }
    }
    let mut out = String::with_capacity(old.len() - (end - start) + new_text.len());
    out.push_str(&old[..start]);
    out.push_str(new_text);
    out.push_str(&old[end..]);
    Ok(out)
}

/// A hunk to apply: lines `start..old_end` of the old text become the new
/// text's lines `new` (indices into the lines the hunks were made from:
/// no copy of them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    pub start: usize,
    pub old_end: usize,
    pub new: std::ops::Range<usize>,
}

/// How long a line diff may search before settling for a coarser answer
/// (still correct, just fewer and larger hunks).
const DIFF_BUDGET: std::time::Duration = std::time::Duration::from_millis(200);

/// The hunks that turn `old` into `new`, in ascending order. Applying them
/// from the last to the first keeps the earlier indices valid. Unchanged
/// lines between hunks are left alone, so marks, folds and cursors there
/// survive a reload or an agent's edit.
pub fn line_hunks<A: AsRef<str>, B: AsRef<str>>(old: &[A], new: &[B]) -> Vec<Hunk> {
    let old_lines: Vec<&str> = old.iter().map(AsRef::as_ref).collect();
    let new_lines: Vec<&str> = new.iter().map(AsRef::as_ref).collect();
    let deadline = std::time::Instant::now() + DIFF_BUDGET;
    let ops = similar::capture_diff_slices_deadline(similar::Algorithm::Myers, &old_lines, &new_lines, Some(deadline));
    let mut hunks: Vec<Hunk> = Vec::new();
    // Positions are counted here from the operations' lengths, in order:
    // similar 2.7's compaction can leave an operation's index on the other
    // side stale (a Delete's new_index, an Insert's old_index), and hunks
    // placed by it would rebuild a wrong text.
    let (mut at_old, mut at_new) = (0, 0);
    for op in ops {
        let (tag, old_range, new_range) = op.as_tag_tuple();
        let (old_len, new_len) = (old_range.len(), new_range.len());
        let (old_range, new_range) = (at_old..at_old + old_len, at_new..at_new + new_len);
        at_old += old_len;
        at_new += new_len;
        if tag == similar::DiffTag::Equal {
            continue;
        }
        match hunks.last_mut() {
            // Adjacent operations (a delete next to an insert) form one hunk.
            Some(last) if last.old_end == old_range.start && last.new.end == new_range.start => {
                last.old_end = old_range.end;
                last.new.end = new_range.end;
            }
            _ => hunks.push(Hunk { start: old_range.start, old_end: old_range.end, new: new_range }),
        }
    }
    hunks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply_hunks(old: &[&str], new: &[&str], hunks: &[Hunk]) -> Vec<String> {
        let mut out: Vec<String> = old.iter().map(|s| s.to_string()).collect();
        for h in hunks.iter().rev() {
            out.splice(h.start..h.old_end, new[h.new.clone()].iter().map(|s| s.to_string()));
        }
        out
    }

    #[test]
    fn hunks_rebuild_the_new_text_and_skip_unchanged_lines() {
        let old = ["a", "b", "c", "d", "e", "f"];
        let new = ["a", "B", "c", "d", "e2", "e3", "f", "g"];
        let hunks = line_hunks(&old, &new);
        assert_eq!(apply_hunks(&old, &new, &hunks), new);
        assert_eq!(hunks.len(), 3, "{hunks:?}");
        assert_eq!(hunks[0], Hunk { start: 1, old_end: 2, new: 1..2 });
        assert!(line_hunks(&old, &old).is_empty());
        let empty: [&str; 0] = [];
        assert_eq!(apply_hunks(&old, &empty, &line_hunks(&old, &empty)), Vec::<String>::new());
        assert_eq!(apply_hunks(&empty, &new, &line_hunks(&empty, &new)), new);
    }

    #[test]
    fn hunks_are_placed_right_where_the_diff_compacts_its_operations() {
        // similar 2.7 reports this Insert at old index 2 (it is at 17).
        let old = ["a", "a", "a", "a", "a", "a", "a", "a", "a", "", "a", "a", "  a", "c d", "a", "a", "b"];
        let new = ["a", "b", "b"];
        let hunks = line_hunks(&old, &new);
        assert_eq!(apply_hunks(&old, &new, &hunks), new);
        assert_eq!(hunks, [Hunk { start: 1, old_end: 16, new: 1..1 }, Hunk { start: 17, old_end: 17, new: 2..3 }]);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(500))]

        /// Lines from a small alphabet (repeats make the diff compact its
        /// operations): the hunks, applied, give the new lines.
        #[test]
        fn hunks_rebuild_any_new_text(
            old in proptest::collection::vec(proptest::sample::select(vec!["a", "b", "", "c d"]), 0..30),
            new in proptest::collection::vec(proptest::sample::select(vec!["a", "b", "", "c d"]), 0..30),
        ) {
            let hunks = line_hunks(&old, &new);
            proptest::prop_assert_eq!(apply_hunks(&old, &new, &hunks), new);
            // Ascending and apart (adjacent ones are one hunk).
            proptest::prop_assert!(hunks.windows(2).all(|w| w[0].old_end < w[1].start));
        }
    }

    #[test]
    fn range_edits_check_bounds_and_boundaries() {
        assert_eq!(apply_range("hello", 1, 3, "EY").unwrap(), "hEYlo");
        assert_eq!(apply_range("hello", 5, 5, "!").unwrap(), "hello!");
        assert_eq!(apply_range("", 0, 0, "x").unwrap(), "x");
        assert_eq!(apply_range("hello", 3, 2, "").unwrap_err().to_string(), "start (3) is after end (2)");
        assert_eq!(
            apply_range("hello", 0, 6, "").unwrap_err().to_string(),
            "end (6) is past the end of the text (5 bytes)"
        );
        assert_eq!(apply_range("é", 1, 2, "").unwrap_err(), RangeError::InsideCharacter { which: "start", at: 1 });
        assert_eq!(
            apply_range("é", 1, 2, "").unwrap_err().to_string(),
            "start (1) falls inside a multi-byte character"
        );
    }
}
