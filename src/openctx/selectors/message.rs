//! Message selectors (`meta.items.messageSelectors`): which providers are
//! asked for items of a chat message.

use regex::{Regex, RegexBuilder};

use super::super::types::MessageSelector;
use super::js_regex::translate_js_regex;
use super::REGEX_SIZE_LIMIT;

/// Compiles `meta.items.messageSelectors`. A pattern the `regex` crate rejects
/// (look-around, backreferences, ...) is reported and skipped. The reference
/// host (Cody, `lib/shared/src/context/openctx/context.ts`) asks a provider for
/// items of a message only when one of its patterns matches, so absent selectors
/// and `[]` both give an empty list, which matches nothing. (Cody counts a
/// pattern that throws as a match, by accident of `return []`; that is not mirrored.)
///
/// Patterns are JavaScript regexes (`new RegExp(pattern)`, no flags). The
/// silent differences are translated: `.` stops at `\r`, `\u2028`, `\u2029` too;
/// `\d`, `\w`, `\b` are ASCII; `\s` is JS's set; `[` is literal inside a class;
/// an escaped letter JS does not know is that letter; a `{` that starts no
/// quantifier is literal.
pub fn compile_message_selectors(sel: Option<&[MessageSelector]>) -> (Vec<Regex>, Vec<String>) {
    let mut regexes = Vec::new();
    let mut errors = Vec::new();
    for (i, s) in sel.unwrap_or_default().iter().enumerate() {
        let source = translate_js_regex(&s.pattern);
        match RegexBuilder::new(&source).size_limit(REGEX_SIZE_LIMIT).dfa_size_limit(REGEX_SIZE_LIMIT).build() {
            Ok(r) => regexes.push(r),
            Err(e) => errors.push(format!(
                "message selector {i} {:?} is skipped: {}",
                s.pattern,
                e.to_string().lines().rfind(|l| !l.trim().is_empty()).unwrap_or("invalid pattern").trim()
            )),
        }
    }
    (regexes, errors)
}

/// Whether any pattern is found in the message (`message.match(re)`: a search, not a full match).
pub fn message_matches(regexes: &[Regex], message: &str) -> bool {
    regexes.iter().any(|r| r.is_match(message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_selectors_absent_and_empty_never_match() {
        let (r, e) = compile_message_selectors(None);
        assert!(r.is_empty() && e.is_empty());
        assert!(!message_matches(&r, "anything"));
        let (r, e) = compile_message_selectors(Some(&[]));
        assert!(r.is_empty() && e.is_empty());
        assert!(!message_matches(&r, "anything"));
    }

    fn msg(patterns: &[&str]) -> (Vec<Regex>, Vec<String>) {
        let sel: Vec<MessageSelector> = patterns.iter().map(|p| MessageSelector { pattern: p.to_string() }).collect();
        compile_message_selectors(Some(&sel))
    }

    #[test]
    fn message_selectors_search_anywhere_and_or_together() {
        let (r, e) = msg(&["issue-\\d+", "^/linear "]);
        assert!(e.is_empty(), "{e:?}");
        assert!(message_matches(&r, "please look at issue-42 today"));
        assert!(message_matches(&r, "/linear ENG-1"));
        assert!(!message_matches(&r, "say /linear ENG-1"));
        assert!(!message_matches(&r, "issue-x"));
        let (r, _) = msg(&[".*"]);
        assert!(message_matches(&r, "")); // JS: "".match(/.*/) is [""], truthy
        let (r, _) = msg(&["https?:\\/\\/github\\.com\\/[^\\/]+\\/[^\\/]+\\/issues\\/\\d+"]);
        assert!(message_matches(&r, "see https://github.com/a/b/issues/12"));
        assert!(!message_matches(&r, "see https://github.com/a/b/pulls/12"));
    }

    #[test]
    fn message_selectors_follow_js_semantics() {
        let m = |p: &str, s: &str| {
            let (r, e) = msg(&[p]);
            assert!(e.is_empty(), "{p}: {e:?}");
            message_matches(&r, s)
        };
        assert!(!m("^\\d$", "٣")); // Arabic-Indic digit: not \d in JS
        assert!(m("^\\d$", "3"));
        assert!(!m("^\\w$", "é"));
        assert!(m("^\\W$", "é"));
        assert!(!m("a.b", "a\rb"));
        assert!(!m("a.b", "a\u{2028}b"));
        assert!(m("a.b", "a\u{0}b"));
        assert!(m("a[^]b", "a\nb"));
        assert!(!m("a[]b", "ab"));
        assert!(m("^\\s$", "\u{feff}"));
        assert!(m("[[]", "["));
        assert!(m("[a&&b]", "&"));
        assert!(m("a{", "a{"));
        assert!(m("{foo}", "{foo}"));
        assert!(m("a{2}", "aa"));
        assert!(!m("^a{2}$", "a"));
        assert!(m("x{1,}", "xx"));
        assert!(m("\\<b\\>", "<b>"));
        assert!(m("\\p", "p"));
        assert!(m("\\A", "A"));
        assert!(m("[\\b]", "\u{8}"));
        assert!(m("\\bfoo\\b", "a foo b"));
        assert!(!m("\\bfoo\\b", "afoob"));
        assert!(m("\\u00e9", "é"));
        assert!(m("\\x41", "A"));
        assert!(m("\\cJ", "\n"));
        assert!(m("(?<year>\\d{4})", "in 2024"));
        assert!(m("[\\d-]+x", "1-2x"));
    }

    #[test]
    fn unsupported_patterns_are_reported_and_skipped() {
        let (r, e) = msg(&["(?=x)y", "ok", "(a)\\1", "[", "(", "a{2,1}", "\\k<n>(?<n>a)"]);
        assert_eq!(r.len(), 1);
        assert_eq!(e.len(), 6, "{e:?}");
        assert!(e[0].starts_with("message selector 0 \"(?=x)y\" is skipped: "), "{}", e[0]);
        assert!(e[0].contains("look-around"), "{}", e[0]);
        assert!(e[1].contains("backreferences"), "{}", e[1]);
        assert!(message_matches(&r, "ok"));
    }

    #[test]
    fn catastrophic_patterns_run_in_linear_time() {
        let (r, e) = msg(&["(a+)+$", "(x+x+)+y", "^(\\w+\\s?)*$"]);
        assert!(e.is_empty(), "{e:?}");
        let mut input = "a".repeat(100_000);
        input.push('!');
        let input2 = "x".repeat(100_000);
        let mut input3 = "word ".repeat(20_000);
        input3.push('!');
        let started = std::time::Instant::now();
        assert!(!message_matches(&r[..1], &input));
        assert!(!message_matches(&r[1..2], &input2));
        assert!(!message_matches(&r[2..], &input3));
        assert!(started.elapsed() < std::time::Duration::from_secs(2), "{:?}", started.elapsed());
    }

    #[test]
    fn huge_patterns_are_rejected_by_the_size_limit() {
        let (r, e) = msg(&["(a{1000}){1000}"]);
        assert!(r.is_empty());
        assert_eq!(e.len(), 1);
        assert!(e[0].contains("size limit"), "{}", e[0]);
    }
}
