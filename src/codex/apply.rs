//! What Codex writes when it applies an update to a file's text, computed
//! the way Codex 0.169 does it (checked against the binary), so the review
//! shows the bytes Codex would write:
//!
//! - The text is split at `\n`; a final empty piece (the file ends with a
//!   line break) is dropped. When the first line break is `\r\n` the file
//!   is taken as CRLF: each line loses one trailing `\r`, and the result is
//!   joined with `\r\n`; otherwise lines keep any `\r` and are joined with
//!   `\n`. The result always ends with a line break (unless it is empty).
//! - Chunks are placed in order, each searched from where the previous one
//!   ended: first its `@@` anchor line, then its old lines (context and
//!   removed). A search tries an exact match, then lines compared without
//!   trailing white space, then trimmed, then with typographic punctuation
//!   folded to ASCII. A chunk marked `*** End of File` is searched at the
//!   end. A chunk with no old lines is inserted at the end of the file.
//!   When the old lines are not found and end with an empty line, they are
//!   searched again without it.

pub use super::error::UpdateError;
use super::patch::Chunk;
use crate::core::patch::matches_at;

/// The file's line ending, as Codex decides it from its first line break.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    Lf,
    CrLf,
}

impl Ending {
    pub fn of(text: &str) -> Self {
        match text.find('\n') {
            Some(i) if i > 0 && text.as_bytes()[i - 1] == b'\r' => Ending::CrLf,
            _ => Ending::Lf,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Ending::Lf => "\n",
            Ending::CrLf => "\r\n",
        }
    }
}

/// The lines of `text` as Codex matches them (see the module).
pub fn lines_of(text: &str, ending: Ending) -> Vec<&str> {
    let mut lines: Vec<&str> = text.split('\n').collect();
    if ending == Ending::CrLf {
        for line in &mut lines {
            *line = line.strip_suffix('\r').unwrap_or(line);
        }
    }
    if lines.last() == Some(&"") {
        lines.pop();
    }
    lines
}

/// `lines` written back as Codex writes them: joined, with a final line
/// break unless there is no line at all.
pub fn join(lines: &[&str], ending: Ending) -> String {
    if lines.is_empty() {
        return String::new();
    }
    let mut out = lines.join(ending.as_str());
    out.push_str(ending.as_str());
    out
}

/// The text Codex writes for `chunks` applied to `old`; `Err`: why it
/// would refuse (a chunk's lines are not in the file).
pub fn apply_update(old: &str, chunks: &[Chunk]) -> Result<String, UpdateError> {
    let ending = Ending::of(old);
    let lines = lines_of(old, ending);
    let mut replacements: Vec<(usize, usize, Vec<&str>)> = Vec::new();
    let mut from = 0;
    for chunk in chunks {
        if let Some(anchor) = &chunk.anchor {
            match seek(&lines, &[anchor.as_str()], from, false) {
                Some(at) => from = at + 1,
                None => return Err(UpdateError::NoAnchor(shown(anchor))),
            }
        }
        let (mut old_lines, mut new_lines) = (chunk.old(), chunk.new_lines());
        if old_lines.is_empty() {
            // Added at the very end (after a last empty line, too).
            replacements.push((lines.len(), 0, new_lines));
            continue;
        }
        let mut found = seek(&lines, &old_lines, from, chunk.end_of_file);
        if found.is_none() && old_lines.last() == Some(&"") {
            old_lines.pop();
            if new_lines.last() == Some(&"") {
                new_lines.pop();
            }
            found = seek(&lines, &old_lines, from, chunk.end_of_file);
        }
        match found {
            Some(at) => {
                from = at + old_lines.len();
                replacements.push((at, old_lines.len(), new_lines));
            }
            None => {
                let first = old_lines.first().copied().unwrap_or_default();
                return Err(UpdateError::NoChunk(shown(first)));
            }
        }
    }
    replacements.sort_by_key(|(at, _, _)| *at);
    let mut out: Vec<&str> = lines.clone();
    for (at, len, new) in replacements.into_iter().rev() {
        let end = (at + len).min(out.len());
        let at = at.min(end);
        out.splice(at..end, new);
    }
    Ok(join(&out, ending))
}

fn shown(line: &str) -> String {
    crate::core::text::cut(line, 60).to_owned()
}

/// Where `pattern` first occurs in `lines` at or after `from` (at the end
/// when `at_end`), trying looser comparisons only when a stricter one
/// finds nothing anywhere.
pub fn seek(lines: &[&str], pattern: &[&str], from: usize, at_end: bool) -> Option<usize> {
    if pattern.is_empty() {
        return Some(from);
    }
    if pattern.len() > lines.len() {
        return None;
    }
    let last = lines.len() - pattern.len();
    let start = if at_end { last } else { from };
    let tiers: [fn(&str, &str) -> bool; 4] = [
        |a, b| a == b,
        |a, b| a.trim_end() == b.trim_end(),
        |a, b| a.trim() == b.trim(),
        |a, b| folded(a.trim()) == folded(b.trim()),
    ];
    tiers.iter().find_map(|same| (start..=last).find(|&i| matches_at(lines, i, pattern, same)))
}

/// Typographic dashes, quotes and spaces as their ASCII forms.
fn folded(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '\u{2010}' | '\u{2011}' | '\u{2012}' | '\u{2013}' | '\u{2014}' | '\u{2015}' | '\u{2212}' => '-',
            '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' => '\'',
            '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' => '"',
            '\u{00A0}' | '\u{2002}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
            c => c,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codex::patch::{parse, Change};

    fn update(old: &str, patch_body: &str) -> Result<String, UpdateError> {
        let patch = parse(&format!("*** Begin Patch\n*** Update File: f\n{patch_body}\n*** End Patch")).unwrap();
        let Change::Update { chunks, .. } = &patch.changes[0] else { panic!() };
        apply_update(old, chunks)
    }

    #[test]
    fn chunks_replace_their_lines_in_order() {
        let old = "a\nb\nc\nd\nb\n";
        assert_eq!(update(old, "@@\n a\n-b\n+B").unwrap(), "a\nB\nc\nd\nb\n");
        // The second chunk is searched after the first: the second "b".
        assert_eq!(update(old, "@@\n-b\n+1\n@@\n-b\n+2").unwrap(), "a\n1\nc\nd\n2\n");
        // An anchor moves the search past it.
        assert_eq!(update(old, "@@ d\n-b\n+X").unwrap(), "a\nb\nc\nd\nX\n");
        // End of File: searched at the end.
        assert_eq!(update(old, "@@\n-b\n+Z\n*** End of File").unwrap(), "a\nb\nc\nd\nZ\n");
        // No old lines: added at the end.
        assert_eq!(update(old, "@@\n+e").unwrap(), "a\nb\nc\nd\nb\ne\n");
        // As Codex 0.169 writes them (checked with the binary): a last empty
        // line is kept, and an addition goes after it.
        assert_eq!(update("a\nb\n\n", "@@\n-a\n+A").unwrap(), "A\nb\n\n");
        assert_eq!(update("a\n\n", "@@\n+z").unwrap(), "a\n\nz\n");
        assert_eq!(update("", "@@\n+first").unwrap(), "first\n");
    }

    #[test]
    fn a_final_line_break_is_always_written_and_crlf_is_kept() {
        assert_eq!(update("a\nb", "@@\n-a\n+A").unwrap(), "A\nb\n");
        // As Codex 0.169 writes them (checked with the binary).
        assert_eq!(update("one\r\ntwo\r\nthree", "@@\n one\n-two\n+TWO").unwrap(), "one\r\nTWO\r\nthree\r\n");
        assert_eq!(update("a\r\nb\nc\r\n", "@@\n a\n-b\n+B").unwrap(), "a\r\nB\r\nc\r\n");
        assert_eq!(update("a\nb\r\nc\r\n", "@@\n a\n-b\n+B").unwrap(), "a\nB\nc\r\n");
        assert_eq!(update("a\n", "@@\n-a").unwrap(), "");
    }

    #[test]
    fn looser_matches_only_when_no_exact_one() {
        // Trailing spaces, then indentation, then typographic punctuation.
        assert_eq!(update("x  \ny\n", "@@\n-x\n+X").unwrap(), "X\ny\n");
        assert_eq!(update("  x\ny\n", "@@\n-x\n+X").unwrap(), "X\ny\n");
        assert_eq!(update("say “hi” — now\n", "@@\n-say \"hi\" - now\n+bye").unwrap(), "bye\n");
        // An exact match later wins over a loose one earlier.
        assert_eq!(update(" x\nx\n", "@@\n-x\n+X").unwrap(), " x\nX\n");
        // Old lines ending with an empty line are searched again without it.
        assert_eq!(update("a\nb\n", "@@\n-b\n-\n+B\n+").unwrap(), "a\nB\n");
    }

    #[test]
    fn missing_lines_are_refused_with_the_reason() {
        assert_eq!(
            update("a\n", "@@\n-zzz\n+y").unwrap_err().to_string(),
            "a chunk's lines are not in the file (its first: 'zzz')"
        );
        assert_eq!(update("a\n", "@@ nope\n-a\n+b").unwrap_err(), UpdateError::NoAnchor("nope".into()));
        assert_eq!(UpdateError::NoAnchor("nope".into()).to_string(), "the line 'nope' is not in the file");
        // Searched only after the previous chunk.
        assert!(update("a\nb\n", "@@\n-b\n+B\n@@\n-a\n+A").is_err());
    }
}
