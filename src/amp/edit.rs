//! Text arithmetic for `editFile` and `readFile`: byte-range edits, the mapping
//! between a file's text and Neovim's buffer lines, and the smallest line
//! range that changed (so an edit disturbs as few marks, folds and cursors as
//! possible and stays one undo step).

/// How a buffer's lines become a file's bytes: Neovim keeps lines without
/// their end-of-line, and remembers `'fileformat'` and `'endofline'` aside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineFormat {
    /// `'fileformat'` is `dos`: lines end with `\r\n` on disk.
    pub crlf: bool,
    /// The last line ends with an end-of-line on disk.
    pub final_newline: bool,
}

/// Replaces bytes `start..end` of `old` with `new_text`, refusing offsets that
/// are out of range or fall inside a UTF-8 character.
pub fn apply_range(old: &str, start: u64, end: u64, new_text: &str) -> Result<String, String> {
    let len = old.len() as u64;
    if start > end {
        return Err(format!("start ({start}) is after end ({end})"));
    }
    if end > len {
        return Err(format!("end ({end}) is past the end of the text ({len} bytes)"));
    }
    let (start, end) = (start as usize, end as usize);
    for (name, at) in [("start", start), ("end", end)] {
        if !old.is_char_boundary(at) {
            return Err(format!("{name} ({at}) falls inside a multi-byte character"));
        }
    }
    let mut out = String::with_capacity(old.len() - (end - start) + new_text.len());
    out.push_str(&old[..start]);
    out.push_str(new_text);
    out.push_str(&old[end..]);
    Ok(out)
}

/// Splits a file's text into buffer lines: on `\n`, dropping a `\r` before it
/// (the buffer's `'fileformat'` decides how lines are written back, so a file
/// keeps its own line endings whatever the agent sent).
pub fn text_to_lines(text: &str) -> (Vec<&str>, bool) {
    if text.is_empty() {
        return (Vec::new(), false);
    }
    let final_newline = text.ends_with('\n');
    let body = if final_newline { &text[..text.len() - 1] } else { text };
    let lines = body.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)).collect();
    (lines, final_newline)
}

/// Joins buffer lines into the file's text. No lines means an empty file.
pub fn lines_to_text<S: AsRef<str>>(lines: &[S], format: LineFormat) -> String {
    let eol = if format.crlf { "\r\n" } else { "\n" };
    let total: usize = lines.iter().map(|l| l.as_ref().len() + eol.len()).sum();
    let mut out = String::with_capacity(total);
    for (i, line) in lines.iter().enumerate() {
        if i > 0 {
            out.push_str(eol);
        }
        out.push_str(line.as_ref());
    }
    if format.final_newline && !lines.is_empty() {
        out.push_str(eol);
    }
    out
}

/// Lines `start..old_end` of the old text become lines `start..new_end` of the new.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinePatch {
    pub start: usize,
    pub old_end: usize,
    pub new_end: usize,
}

/// The smallest contiguous line range whose replacement turns `old` into `new`
/// (common prefix and suffix kept). `None` when the lines are equal.
pub fn changed_lines<A: AsRef<str>, B: AsRef<str>>(old: &[A], new: &[B]) -> Option<LinePatch> {
    let prefix = old.iter().zip(new).take_while(|(a, b)| a.as_ref() == b.as_ref()).count();
    if prefix == old.len() && prefix == new.len() {
        return None;
    }
    let max_suffix = old.len().min(new.len()) - prefix;
    let suffix = old
        .iter()
        .rev()
        .zip(new.iter().rev())
        .take(max_suffix)
        .take_while(|(a, b)| a.as_ref() == b.as_ref())
        .count();
    Some(LinePatch { start: prefix, old_end: old.len() - suffix, new_end: new.len() - suffix })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_edits_check_bounds_and_boundaries() {
        assert_eq!(apply_range("hello", 1, 3, "EY").unwrap(), "hEYlo");
        assert_eq!(apply_range("hello", 5, 5, "!").unwrap(), "hello!");
        assert_eq!(apply_range("", 0, 0, "x").unwrap(), "x");
        assert!(apply_range("hello", 3, 2, "").unwrap_err().contains("after end"));
        assert!(apply_range("hello", 0, 6, "").unwrap_err().contains("past the end"));
        assert!(apply_range("é", 1, 2, "").unwrap_err().contains("inside a multi-byte"));
    }

    #[test]
    fn lines_roundtrip_with_formats() {
        for (text, crlf) in [("a\nb\n", false), ("a\nb", false), ("a\r\nb\r\n", true), ("", false), ("\n", false), ("x", false)] {
            let (lines, final_newline) = text_to_lines(text);
            assert_eq!(lines_to_text(&lines, LineFormat { crlf, final_newline }), text, "{text:?}");
        }
    }

    #[test]
    fn crlf_input_is_normalised_to_the_file_format() {
        let (lines, nl) = text_to_lines("a\r\nb\r\n");
        assert_eq!((lines.clone(), nl), (vec!["a", "b"], true));
        assert_eq!(lines_to_text(&lines, LineFormat { crlf: false, final_newline: nl }), "a\nb\n");
    }

    #[test]
    fn changed_lines_keeps_prefix_and_suffix() {
        assert_eq!(changed_lines(&["a", "b", "c"], &["a", "b", "c"]), None);
        assert_eq!(changed_lines(&["a", "b", "c"], &["a", "X", "c"]), Some(LinePatch { start: 1, old_end: 2, new_end: 2 }));
        assert_eq!(changed_lines(&["a", "c"], &["a", "b", "c"]), Some(LinePatch { start: 1, old_end: 1, new_end: 2 }));
        assert_eq!(changed_lines(&["a", "a"], &["a"]), Some(LinePatch { start: 1, old_end: 2, new_end: 1 }));
        let empty: [&str; 0] = [];
        assert_eq!(changed_lines(&empty, &["x"]), Some(LinePatch { start: 0, old_end: 0, new_end: 1 }));
        assert_eq!(changed_lines(&["x"], &empty), Some(LinePatch { start: 0, old_end: 1, new_end: 0 }));
    }
}
