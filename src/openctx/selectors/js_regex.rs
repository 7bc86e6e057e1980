//! JavaScript regexes (`new RegExp(pattern)`, no flags) rewritten for the
//! `regex` crate: where the two read the same text differently, the rewrite
//! says what JavaScript means; what the crate cannot do at all (look-around,
//! backreferences) is left for it to reject. Also JavaScript's `\d`, `\w`
//! and `\s` sets, which picomatch's globs use too (they compile to
//! JavaScript regexes).

pub(super) const DIGIT: &[(char, char)] = &[('0', '9')];
pub(super) const WORD: &[(char, char)] = &[('0', '9'), ('A', 'Z'), ('a', 'z'), ('_', '_')];
/// JavaScript's `\s`.
pub(super) const JS_SPACE: &[(char, char)] = &[
    ('\t', '\r'),
    (' ', ' '),
    ('\u{a0}', '\u{a0}'),
    ('\u{1680}', '\u{1680}'),
    ('\u{2000}', '\u{200a}'),
    ('\u{2028}', '\u{2029}'),
    ('\u{202f}', '\u{202f}'),
    ('\u{205f}', '\u{205f}'),
    ('\u{3000}', '\u{3000}'),
    ('\u{feff}', '\u{feff}'),
];
pub(super) const JS_NOT_SPACE: &str =
    r"[^\t-\r \x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}\x{feff}]";

/// Rewrites the parts of a JS regex whose meaning differs in the `regex` crate.
/// Everything else passes through; what the crate cannot do, it rejects.
pub(super) fn translate_js_regex(pattern: &str) -> String {
    const JS_DOT: &str = r"[^\n\r\x{2028}\x{2029}]";
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut in_class = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        if c == '\\' {
            let Some(&e) = chars.get(i) else {
                out.push('\\'); // let the crate report it
                break;
            };
            i += 1;
            match (e, in_class) {
                ('d', false) => out.push_str("[0-9]"),
                ('D', false) => out.push_str("[^0-9]"),
                ('w', false) => out.push_str("[0-9A-Za-z_]"),
                ('W', false) => out.push_str("[^0-9A-Za-z_]"),
                ('s', false) => out.push_str(&js_space_class(false)),
                ('S', false) => out.push_str(JS_NOT_SPACE),
                ('b', false) => out.push_str(r"(?-u:\b)"),
                ('B', false) => out.push_str(r"(?-u:\B)"),
                ('d', true) => out.push_str("0-9"),
                ('w', true) => out.push_str("0-9A-Za-z_"),
                ('s', true) => out.push_str(&js_space_class(true)),
                ('D', true) => out.push_str("[^0-9]"),
                ('W', true) => out.push_str("[^0-9A-Za-z_]"),
                ('S', true) => out.push_str(JS_NOT_SPACE),
                ('b', true) => out.push_str(r"\x08"),
                ('0', _) if !chars.get(i).is_some_and(|d| d.is_ascii_digit()) => out.push_str(r"\x00"),
                ('c', _) if chars.get(i).is_some_and(|l| l.is_ascii_alphabetic()) => {
                    out.push_str(&format!(r"\x{{{:X}}}", chars[i] as u32 % 32));
                    i += 1;
                }
                ('t' | 'n' | 'r' | 'f' | 'v' | 'x' | 'u' | 'k', _) => {
                    out.push('\\');
                    out.push(e);
                }
                (e, _) if e.is_ascii_digit() => {
                    out.push('\\'); // backreference: rejected by the crate
                    out.push(e);
                }
                // An identity escape: the character itself.
                (e, _) => out.push_str(&regex::escape(e.encode_utf8(&mut [0; 4]))),
            }
            continue;
        }
        if in_class {
            match c {
                ']' => {
                    in_class = false;
                    out.push(']');
                }
                '[' | '&' | '~' => {
                    out.push('\\');
                    out.push(c);
                }
                _ => out.push(c),
            }
            continue;
        }
        match c {
            '[' => {
                // JS: `[]` matches nothing, `[^]` anything.
                if chars.get(i) == Some(&']') {
                    out.push_str(r"[^\x{0}-\x{10FFFF}]");
                    i += 1;
                } else if chars.get(i) == Some(&'^') && chars.get(i + 1) == Some(&']') {
                    out.push_str(r"[\x{0}-\x{10FFFF}]");
                    i += 2;
                } else {
                    in_class = true;
                    out.push('[');
                    if chars.get(i) == Some(&'^') {
                        out.push('^');
                        i += 1;
                    }
                    // A leading `]` is literal in Rust but ends the (empty) class in JS: handled above.
                }
            }
            '.' => out.push_str(JS_DOT),
            '{' => {
                let quantifier = quantifier_len(&chars[i..]);
                if quantifier > 0 && !out.is_empty() {
                    out.push('{');
                    out.extend(&chars[i..i + quantifier]);
                    i += quantifier;
                } else {
                    out.push_str(r"\{");
                }
            }
            '}' => out.push_str(r"\}"),
            _ => out.push(c),
        }
    }
    out
}

/// Length of `n}`, `n,}` or `n,m}` at the start of `rest` (after a `{`), or 0.
fn quantifier_len(rest: &[char]) -> usize {
    let mut i = 0;
    let digits = |i: &mut usize| {
        let s = *i;
        while rest.get(*i).is_some_and(|c| c.is_ascii_digit()) {
            *i += 1;
        }
        *i > s
    };
    if !digits(&mut i) {
        return 0;
    }
    if rest.get(i) == Some(&',') {
        i += 1;
        digits(&mut i);
    }
    if rest.get(i) == Some(&'}') {
        i + 1
    } else {
        0
    }
}

fn js_space_class(inside: bool) -> String {
    let members: String = JS_SPACE
        .iter()
        .map(|&(a, b)| {
            if a == b {
                format!("\\x{{{:X}}}", a as u32)
            } else {
                format!("\\x{{{:X}}}-\\x{{{:X}}}", a as u32, b as u32)
            }
        })
        .collect();
    if inside {
        members
    } else {
        format!("[{members}]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_differs_is_rewritten() {
        assert_eq!(translate_js_regex(r"\d+"), "[0-9]+");
        assert_eq!(translate_js_regex(r"[\d-]"), "[0-9-]");
        assert_eq!(translate_js_regex("a.b"), r"a[^\n\r\x{2028}\x{2029}]b");
        assert_eq!(translate_js_regex(r"\bx"), r"(?-u:\b)x");
        assert_eq!(translate_js_regex(r"[\b]"), r"[\x08]");
        assert_eq!(translate_js_regex("[[&~]"), r"[\[\&\~]");
        assert_eq!(translate_js_regex("[]"), r"[^\x{0}-\x{10FFFF}]");
        assert_eq!(translate_js_regex("[^]"), r"[\x{0}-\x{10FFFF}]");
        assert_eq!(translate_js_regex(r"\cJ\0"), r"\x{A}\x00");
        assert_eq!(translate_js_regex(r"\<\p"), r"<p");
        assert_eq!(translate_js_regex(r"\u00e9\x41"), r"\u00e9\x41");
        assert_eq!(translate_js_regex(r"(a)\1"), r"(a)\1"); // left for the crate to reject
    }

    #[test]
    fn braces_are_quantifiers_only_where_js_reads_them_so() {
        assert_eq!(translate_js_regex("a{2}"), "a{2}");
        assert_eq!(translate_js_regex("a{2,}"), "a{2,}");
        assert_eq!(translate_js_regex("a{2,5}"), "a{2,5}");
        assert_eq!(translate_js_regex("{2}"), r"\{2\}"); // nothing to repeat
        assert_eq!(translate_js_regex("a{"), r"a\{");
        assert_eq!(translate_js_regex("a{x}"), r"a\{x\}");
        assert_eq!(translate_js_regex("a{,2}"), r"a\{,2\}");
        assert_eq!(quantifier_len(&"3,4}x".chars().collect::<Vec<_>>()), 4);
        assert_eq!(quantifier_len(&"3,4x".chars().collect::<Vec<_>>()), 0);
    }

    #[test]
    fn js_space_is_one_class_outside_and_members_inside() {
        let outside = js_space_class(false);
        assert!(outside.starts_with('[') && outside.ends_with(']'), "{outside}");
        assert_eq!(format!("[{}]", js_space_class(true)), outside);
        let re = regex::Regex::new(&format!("^{outside}+$")).unwrap();
        assert!(re.is_match(
            "\t\n\u{b}\u{c}\r \u{a0}\u{1680}\u{2000}\u{200a}\u{2028}\u{2029}\u{202f}\u{205f}\u{3000}\u{feff}"
        ));
        assert!(!re.is_match("\u{85}")); // NEL: Unicode White_Space, not JS's \s
        let not = regex::Regex::new(&format!("^{JS_NOT_SPACE}$")).unwrap();
        assert!(not.is_match("\u{85}") && !not.is_match("\u{feff}"));
    }
}
