//! Bracket expressions in globs (`[a-z]`, `[^/]`, `[[:alpha:]]`, `[\d]`),
//! read as picomatch 3 reads them and written out as `regex` classes. Escapes
//! such as `\s` mean what they mean in the JavaScript regex picomatch builds.

use super::super::js_regex::{DIGIT, JS_NOT_SPACE, JS_SPACE, WORD};
use super::GlobError;

/// A bracket expression starting after its `[`: `Ok(None)` when it is not
/// closed (then `[` is a literal), `Err` when picomatch's regex would not compile.
pub(super) fn parse_class(chars: &[char], start: usize) -> Result<Option<(String, usize)>, GlobError> {
    let mut pos = start;
    let negated = chars.get(pos) == Some(&'^');
    if negated {
        pos += 1;
    }
    // (from, to) ranges and whole nested classes such as `[^0-9]`.
    let mut ranges: Vec<(char, char)> = Vec::new();
    let mut nested: Vec<&'static str> = Vec::new();
    let mut first = true;
    // A member read just before a possible `-`.
    let mut pending: Option<char> = None;
    let mut dash = false;
    loop {
        let Some(&c) = chars.get(pos) else { return Ok(None) };
        pos += 1;
        let member: Option<char>;
        match c {
            ']' if !first => break,
            '[' if chars.get(pos) == Some(&':') => {
                let tail: String = chars[pos + 1..].iter().collect();
                let Some(end) = tail.find(":]") else {
                    member = Some('[');
                    push_member(&mut ranges, &mut pending, &mut dash, member)?;
                    first = false;
                    continue;
                };
                let name = &tail[..end];
                let set = posix_class(name).ok_or_else(|| GlobError::UnknownPosixClass(name.to_owned()))?;
                pos += 1 + name.chars().count() + 2;
                flush(&mut ranges, &mut pending, &mut dash);
                ranges.extend_from_slice(set);
                first = false;
                continue;
            }
            '\\' => {
                let Some(&e) = chars.get(pos) else { return Ok(None) };
                pos += 1;
                let shorthand: Option<&'static [(char, char)]> = match e {
                    'd' => Some(DIGIT),
                    'w' => Some(WORD),
                    's' => Some(JS_SPACE),
                    _ => None,
                };
                if let Some(set) = shorthand {
                    flush(&mut ranges, &mut pending, &mut dash);
                    ranges.extend_from_slice(set);
                    first = false;
                    continue;
                }
                let negated_shorthand = match e {
                    'D' => Some("[^0-9]"),
                    'W' => Some("[^0-9A-Za-z_]"),
                    'S' => Some(JS_NOT_SPACE),
                    _ => None,
                };
                if let Some(n) = negated_shorthand {
                    flush(&mut ranges, &mut pending, &mut dash);
                    nested.push(n);
                    first = false;
                    continue;
                }
                member = Some(match e {
                    't' => '\t',
                    'n' => '\n',
                    'r' => '\r',
                    'f' => '\u{c}',
                    'v' => '\u{b}',
                    'b' => '\u{8}',
                    other => other,
                });
            }
            '-' if pending.is_some() && !dash && chars.get(pos).is_some_and(|&n| n != ']') => {
                dash = true;
                first = false;
                continue;
            }
            other => member = Some(other),
        }
        push_member(&mut ranges, &mut pending, &mut dash, member)?;
        first = false;
    }
    flush(&mut ranges, &mut pending, &mut dash);
    let mut out = String::from(if negated { "[^/" } else { "[" });
    for (a, b) in ranges {
        if a == b {
            out.push_str(&format!("\\x{{{:X}}}", a as u32));
        } else {
            out.push_str(&format!("\\x{{{:X}}}-\\x{{{:X}}}", a as u32, b as u32));
        }
    }
    for n in nested {
        out.push_str(n);
    }
    out.push(']');
    Ok(Some((out, pos)))
}

fn push_member(
    ranges: &mut Vec<(char, char)>,
    pending: &mut Option<char>,
    dash: &mut bool,
    member: Option<char>,
) -> Result<(), GlobError> {
    let Some(m) = member else { return Ok(()) };
    if *dash {
        let from = pending.take().unwrap_or(m);
        *dash = false;
        if from > m {
            return Err(GlobError::RangeOutOfOrder(from, m));
        }
        ranges.push((from, m));
    } else {
        if let Some(p) = pending.replace(m) {
            ranges.push((p, p));
        }
    }
    Ok(())
}

fn flush(ranges: &mut Vec<(char, char)>, pending: &mut Option<char>, dash: &mut bool) {
    if let Some(p) = pending.take() {
        ranges.push((p, p));
    }
    if std::mem::take(dash) {
        ranges.push(('-', '-'));
    }
}

/// picomatch's POSIX classes.
fn posix_class(name: &str) -> Option<&'static [(char, char)]> {
    Some(match name {
        "alnum" => &[('a', 'z'), ('A', 'Z'), ('0', '9')],
        "alpha" => &[('a', 'z'), ('A', 'Z')],
        "ascii" => &[('\0', '\u{7f}')],
        "blank" => &[(' ', ' '), ('\t', '\t')],
        "cntrl" => &[('\0', '\u{1f}'), ('\u{7f}', '\u{7f}')],
        "digit" => DIGIT,
        "graph" => &[('!', '~')],
        "lower" => &[('a', 'z')],
        "print" => &[(' ', '~')],
        "punct" => &[('!', '/'), (':', '@'), ('[', '`'), ('{', '~')],
        "space" => &[(' ', ' '), ('\t', '\r')],
        "upper" => &[('A', 'Z')],
        "word" => WORD,
        "xdigit" => &[('A', 'F'), ('a', 'f'), ('0', '9')],
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::glob;
    use super::*;

    #[test]
    fn classes() {
        assert!(glob("[abc]", "b"));
        assert!(!glob("[abc]", "d"));
        assert!(glob("[a-z]", "q"));
        assert!(!glob("[a-z]", "Q"));
        assert!(glob("[a-z0-9]", "5"));
        assert!(glob("[^a]", "b"));
        assert!(!glob("[^a]", "a"));
        // picomatch 3: `[!a]` is the set {'!', 'a'}.
        assert!(glob("[!a]", "a"));
        assert!(!glob("[!a]", "b"));
        assert!(glob("[!ab]x", "!x"));
        assert!(glob("[[:alpha:]]", "q"));
        assert!(!glob("[[:alpha:]]", "5"));
        assert!(glob("[[:upper:][:digit:]]", "5"));
        assert!(glob("[[:alnum:]_]", "_"));
        assert!(glob("[\\d]", "5"));
        assert!(glob("[\\w]", "w"));
        assert!(glob("[a-]", "-"));
        assert!(glob("[]a]", "]"));
        assert!(glob("[a\\]]", "]"));
        assert!(glob("[[:alpha:]]*", "abc"));
        assert!(!glob("[[:alpha:]]*", ".abc"));
        // Unclosed: literal.
        assert!(glob("[a", "[a"));
        assert!(!glob("[a", "a"));
        assert!(glob("a]", "a]"));
    }

    #[test]
    fn bad_classes_say_why() {
        let class = |s: &str| {
            let chars: Vec<char> = s.chars().collect();
            parse_class(&chars, 0)
        };
        assert_eq!(class("c-a]"), Err(GlobError::RangeOutOfOrder('c', 'a')));
        assert_eq!(class("[:foo:]]"), Err(GlobError::UnknownPosixClass("foo".into())));
        assert_eq!(class("abc"), Ok(None)); // unclosed: the `[` is a literal
        assert_eq!(class("a-c]"), Ok(Some((r"[\x{61}-\x{63}]".into(), 4))));
        assert_eq!(class("^a]"), Ok(Some((r"[^/\x{61}]".into(), 3))));
    }
}
