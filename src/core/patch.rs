//! A unified diff (as `diff -u` and `git diff` write it) applied to one
//! file's text, for agents that propose an edit as a patch.
//!
//! Each hunk is placed by its text, not only by its header: the removed and
//! context lines must appear, in order, after the previous hunk; of several
//! places the one nearest the header's line wins. Models often write
//! headers with wrong line numbers (or `@@ @@` without any), so a patch that
//! `patch` itself would apply with an offset applies here too; a hunk whose
//! lines are not in the text is refused with the reason, never applied
//! loosely (no fuzz: a wrong place would be a wrong edit).
//!
//! Line breaks: the text's own. A text whose every line break is "\r\n"
//! keeps "\r\n" (a patch written with "\n" applies to it), and the final
//! line break stays as it was unless the patch says `\ No newline at end of
//! file` for the new text.

/// One hunk: where its header says it starts (1-based, 0: not given), the
/// lines it expects (context and removed) and the lines it leaves.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Hunk {
    header: String,
    old_start: usize,
    old: Vec<String>,
    new: Vec<String>,
    /// `\ No newline at end of file` after a line of the new side.
    new_without_final_eol: bool,
}

/// Why a patch does not apply (each message one line, for the agent).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// `number` is 1-based; `after`: the line after which it was looked for.
    #[error("hunk {number} ({header}) does not match the text: its {lines} context and removed line(s) are not found after line {after}; read the file again and make a new patch")]
    NoMatch { number: usize, header: String, lines: usize, after: usize },
    /// The line, cut to 80 bytes.
    #[error("the patch has a line that is not part of a hunk: {0:?}")]
    StrayLine(String),
    #[error("the patch changes more than one file: propose one edit per file")]
    SeveralFiles,
    #[error("the patch has no hunk (no line starting with @@)")]
    NoHunk,
}

/// Applies `patch` to `text`: the new text, or why not.
pub fn apply(text: &str, patch: &str) -> Result<String, PatchError> {
    let hunks = parse(patch)?;
    let crlf = text.contains("\r\n") && text.matches("\r\n").count() == text.matches('\n').count();
    let eol = if crlf { "\r\n" } else { "\n" };
    let final_eol = text.ends_with('\n');
    let body = text.strip_suffix(eol).unwrap_or(text);
    let mut lines: Vec<&str> = if text.is_empty() { Vec::new() } else { body.split(eol).collect() };
    let mut out: Vec<String> = Vec::with_capacity(lines.len());
    let mut at = 0; // the first line of `lines` not yet copied to `out`
    let mut drift: isize = 0; // where the previous hunk was found, minus where it said
    let mut without_final_eol = None;
    for (i, hunk) in hunks.iter().enumerate() {
        let hint = (hunk.old_start.saturating_sub(1) as isize + drift).max(0) as usize;
        let found = find(&lines, at, &hunk.old, hint).ok_or_else(|| PatchError::NoMatch {
            number: i + 1,
            header: hunk.header.clone(),
            lines: hunk.old.len(),
            after: at,
        })?;
        drift = found as isize - hunk.old_start.saturating_sub(1) as isize;
        out.extend(lines[at..found].iter().map(|l| (*l).to_owned()));
        out.extend(hunk.new.iter().cloned());
        at = found + hunk.old.len();
        if at == lines.len() && hunk.new_without_final_eol {
            without_final_eol = Some(true);
        }
    }
    out.extend(lines.drain(at..).map(str::to_owned));
    let mut result = out.join(eol);
    let ends_with_eol = match without_final_eol {
        Some(_) => false,
        None => final_eol || (text.is_empty() && !result.is_empty()),
    };
    if ends_with_eol && !result.is_empty() {
        result.push_str(eol);
    }
    Ok(result)
}

/// Whether `pattern` is in `lines` at line `at`, each line compared with
/// `same(line, pattern line)`. The one matching step of both patch formats
/// agents send (this unified diff; Codex's apply_patch, `codex::apply`,
/// which places chunks by Codex's own rules).
pub fn matches_at<P: AsRef<str>>(lines: &[&str], at: usize, pattern: &[P], same: impl Fn(&str, &str) -> bool) -> bool {
    at.checked_add(pattern.len()).is_some_and(|end| end <= lines.len())
        && pattern.iter().zip(&lines[at..]).all(|(p, l)| same(l, p.as_ref()))
}

/// Where `old` appears in `lines` at or after `from`, nearest `hint`.
fn find(lines: &[&str], from: usize, old: &[String], hint: usize) -> Option<usize> {
    if old.is_empty() {
        return Some(hint.clamp(from, lines.len()));
    }
    let last = lines.len().checked_sub(old.len())?;
    let matches = |p: usize| matches_at(lines, p, old, |a, b| a == b);
    if from > last {
        return None;
    }
    let hint = hint.clamp(from, last);
    // Outward from the hint, nearest first.
    for distance in 0..=last - from {
        if hint + distance <= last && matches(hint + distance) {
            return Some(hint + distance);
        }
        match hint.checked_sub(distance) {
            Some(before) if distance > 0 && before >= from && matches(before) => return Some(before),
            _ => {}
        }
    }
    None
}

fn parse(patch: &str) -> Result<Vec<Hunk>, PatchError> {
    let mut hunks: Vec<Hunk> = Vec::new();
    let mut files = 0;
    let mut current: Option<Hunk> = None;
    // Whether the last line read was of the new side (for "\ No newline").
    let mut last_new = false;
    for raw in patch.split('\n') {
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        if line.starts_with("@@") {
            hunks.extend(current.take());
            current = Some(Hunk {
                header: line.split("@@").nth(1).map_or("@@".into(), |h| format!("@@{h}@@")),
                old_start: old_start(line),
                old: Vec::new(),
                new: Vec::new(),
                new_without_final_eol: false,
            });
            continue;
        }
        let Some(hunk) = current.as_mut() else {
            // Before the first hunk: headers (diff --git, index, ---, +++).
            if line.starts_with("+++ ") {
                files += 1;
            }
            continue;
        };
        if line.starts_with("--- ") || line.starts_with("diff ") || line.starts_with("+++ ") {
            if line.starts_with("+++ ") {
                files += 1;
            }
            hunks.extend(current.take());
            continue;
        }
        match line.as_bytes().first() {
            Some(b' ') => {
                hunk.old.push(line[1..].to_owned());
                hunk.new.push(line[1..].to_owned());
                last_new = true;
            }
            Some(b'-') => {
                hunk.old.push(line[1..].to_owned());
                last_new = false;
            }
            Some(b'+') => {
                hunk.new.push(line[1..].to_owned());
                last_new = true;
            }
            Some(b'\\') => hunk.new_without_final_eol |= last_new,
            // A blank context line whose leading space was lost.
            None => {
                hunk.old.push(String::new());
                hunk.new.push(String::new());
                last_new = true;
            }
            Some(_) => return Err(PatchError::StrayLine(cut(line).to_owned())),
        }
    }
    hunks.extend(current);
    // The split gives one more empty "line" after the patch's last newline:
    // not a blank context line.
    if patch.ends_with('\n') {
        if let Some(last) = hunks.last_mut() {
            if last.old.last().is_some_and(String::is_empty) && last.new.last().is_some_and(String::is_empty) {
                last.old.pop();
                last.new.pop();
            }
        }
    }
    if files > 1 {
        return Err(PatchError::SeveralFiles);
    }
    if hunks.is_empty() {
        return Err(PatchError::NoHunk);
    }
    Ok(hunks)
}

/// The old side's start in `@@ -12,3 +12,4 @@` (0 when not given).
fn old_start(header: &str) -> usize {
    header
        .split_whitespace()
        .find_map(|w| w.strip_prefix('-'))
        .and_then(|w| w.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn cut(line: &str) -> &str {
    crate::core::text::cut(line, 80)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn applies_a_diff_u_patch() {
        let text = "one\ntwo\nthree\nfour\n";
        let patch = "--- a/f\n+++ b/f\n@@ -1,4 +1,4 @@\n one\n-two\n+TWO\n three\n four\n";
        assert_eq!(apply(text, patch).unwrap(), "one\nTWO\nthree\nfour\n");
    }

    #[test]
    fn hunks_are_found_by_their_text_when_the_numbers_are_wrong() {
        let text = "a\nb\nc\nd\ne\nf\n";
        // Says line 1, is at line 4; a second hunk without numbers.
        let patch = "@@ -1,2 +1,2 @@\n d\n-e\n+E\n@@ @@\n-f\n+F\n+g\n";
        assert_eq!(apply(text, patch).unwrap(), "a\nb\nc\nd\nE\nF\ng\n");
    }

    #[test]
    fn of_several_places_the_nearest_to_the_header_wins() {
        let text = "x\ny\nx\ny\nx\ny\n";
        let patch = "@@ -5,2 +5,2 @@\n x\n-y\n+Y\n";
        assert_eq!(apply(text, patch).unwrap(), "x\ny\nx\ny\nx\nY\n");
    }

    #[test]
    fn a_hunk_that_does_not_match_is_refused_with_the_reason() {
        let err = apply("a\nb\n", "@@ -1,1 +1,1 @@\n-zzz\n+y\n").unwrap_err().to_string();
        assert!(err.starts_with("hunk 1 (@@ -1,1 +1,1 @@) does not match the text: its 1 context and removed line(s) are not found after line 0;"), "{err}");
        assert_eq!(apply("a\n", "no hunk here\n").unwrap_err(), PatchError::NoHunk);
        assert_eq!(
            apply("a\n", "no hunk here\n").unwrap_err().to_string(),
            "the patch has no hunk (no line starting with @@)"
        );
        let two = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n--- a/y\n+++ b/y\n@@ -1 +1 @@\n-a\n+b\n";
        assert_eq!(apply("a\n", two).unwrap_err(), PatchError::SeveralFiles);
        assert_eq!(
            apply("a\n", "@@ -1 +1 @@\n*a\n").unwrap_err().to_string(),
            "the patch has a line that is not part of a hunk: \"*a\""
        );
    }

    #[test]
    fn crlf_text_keeps_crlf_and_the_final_line_break_stays() {
        assert_eq!(apply("a\r\nb\r\n", "@@ -1,2 +1,2 @@\n a\n-b\n+B\n").unwrap(), "a\r\nB\r\n");
        assert_eq!(apply("a\nb", "@@ -1,2 +1,2 @@\n a\n-b\n+B\n").unwrap(), "a\nB");
        let no_eol = "@@ -1,2 +1,2 @@\n a\n-b\n+B\n\\ No newline at end of file\n";
        assert_eq!(apply("a\nb\n", no_eol).unwrap(), "a\nB");
        // A patch written with CRLF lines.
        assert_eq!(apply("a\nb\n", "@@ -1,2 +1,2 @@\r\n a\r\n-b\r\n+B\r\n").unwrap(), "a\nB\n");
    }

    #[test]
    fn blank_context_lines_without_their_space_and_insertions_into_empty_text() {
        assert_eq!(apply("a\n\nb\n", "@@ -1,3 +1,3 @@\n a\n\n-b\n+c\n").unwrap(), "a\n\nc\n");
        assert_eq!(apply("", "@@ -0,0 +1,2 @@\n+x\n+y\n").unwrap(), "x\ny\n");
        // Pure deletion of everything.
        assert_eq!(apply("x\n", "@@ -1 +0,0 @@\n-x\n").unwrap(), "");
    }
}
