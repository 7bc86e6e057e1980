//! Ordering of results, as `@openctx/client` 0.0.30 orders them.
//!
//! - Within one provider, annotations are sorted by the start of their range
//!   (`lib/client/src/api.ts`, `observeAnnotations`): by line, then character,
//!   an annotation without a range counting as (0, 0); the sort is stable, so
//!   ties keep the provider's order. (A range-less annotation is therefore not
//!   forced first: it ties with anything at 0:0.)
//! - Across providers, results are concatenated in the order of the provider
//!   URIs, which `configurationFromUserInput` (`lib/client/src/configuration.ts`)
//!   sorts with `a.providerUri.localeCompare(b.providerUri)`: ICU collation,
//!   not code-unit order. [`compare_provider_uris`] reproduces it for ASCII.

use std::cmp::Ordering;

use super::types::Annotation;

/// Stable sort by (start line, start character); no range sorts as (0, 0).
pub fn sort_annotations(list: &mut [Annotation]) {
    list.sort_by_key(|a| a.range.map_or((0, 0), |r| (r.start.line, r.start.character)));
}

/// Flattens per-provider results into one list tagged with the provider URI,
/// providers ordered by [`compare_provider_uris`] (stable for equal URIs),
/// each provider's results kept in their order.
pub fn merge_by_provider<T>(results: Vec<(String, Vec<T>)>) -> Vec<(String, T)> {
    let mut results = results;
    results.sort_by(|(a, _), (b, _)| compare_provider_uris(a, b));
    let total = results.iter().map(|(_, list)| list.len()).sum();
    let mut out = Vec::with_capacity(total);
    for (uri, list) in results {
        out.extend(list.into_iter().map(|item| (uri.clone(), item)));
    }
    out
}

/// `a.localeCompare(b)` as Node 20 (ICU 7x, root/en collation) answers it for
/// ASCII strings: punctuation and symbols before digits before letters, in
/// ICU's order (`_ - , ; : ! ? . ' " ( ) [ ] { } @ * / \ & # % ` ^ + < = > | ~ $`),
/// letters compared without case first and lowercase first on a tie, control
/// characters ignored. Non-ASCII characters (rare in URIs, which are
/// percent-encoded) sort after ASCII by code point: an approximation. Strings
/// that collate equal fall back to UTF-16 code-unit order, so the result is total.
pub fn compare_provider_uris(a: &str, b: &str) -> Ordering {
    let primary = |s: &str| s.chars().filter_map(primary_weight).collect::<Vec<u32>>();
    let tertiary = |s: &str| {
        s.chars().filter(|&c| primary_weight(c).is_some()).map(|c| c.is_ascii_uppercase()).collect::<Vec<bool>>()
    };
    primary(a)
        .cmp(&primary(b))
        .then_with(|| tertiary(a).cmp(&tertiary(b)))
        .then_with(|| a.encode_utf16().cmp(b.encode_utf16()))
}

/// ICU root collation order of the ASCII characters that are not ignorable
/// (letters in lowercase; uppercase shares the primary weight).
const ASCII_COLLATION_ORDER: &str =
    "\t\n\u{b}\u{c}\r _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$0123456789abcdefghijklmnopqrstuvwxyz";

fn primary_weight(c: char) -> Option<u32> {
    if c.is_ascii() {
        let lower = c.to_ascii_lowercase();
        // Controls other than \t..\r are completely ignorable.
        ASCII_COLLATION_ORDER.find(lower).map(|i| i as u32 + 1)
    } else {
        Some(0x100 + c as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openctx::types::{Item, Position, Range};

    fn ann(title: &str, start: Option<(u32, u32)>) -> Annotation {
        Annotation {
            uri: "file:///a.ts".into(),
            range: start.map(|(line, character)| Range {
                start: Position { line, character },
                end: Position { line, character: character + 1 },
            }),
            item: Item { title: title.into(), ..Default::default() },
            ..Default::default()
        }
    }

    fn titles(list: &[Annotation]) -> Vec<&str> {
        list.iter().map(|a| a.item.title.as_str()).collect()
    }

    #[test]
    fn sorts_by_line_then_character() {
        let mut list = vec![
            ann("c", Some((2, 0))),
            ann("b", Some((1, 7))),
            ann("a", Some((1, 3))),
            ann("d", Some((10, 0))),
            ann("x", Some((2, 0))),
        ];
        sort_annotations(&mut list);
        assert_eq!(titles(&list), ["a", "b", "c", "x", "d"]);
    }

    #[test]
    fn ties_keep_provider_order_and_ranges_ends_do_not_matter() {
        let mut list = vec![ann("1", Some((3, 4))), ann("2", Some((3, 4))), ann("3", Some((3, 4)))];
        list[0].range.as_mut().unwrap().end = Position { line: 9, character: 0 };
        sort_annotations(&mut list);
        assert_eq!(titles(&list), ["1", "2", "3"]);
    }

    #[test]
    fn missing_range_counts_as_zero_zero() {
        let mut list = vec![
            ann("line1", Some((1, 0))),
            ann("zero", Some((0, 0))),
            ann("whole-file", None),
            ann("zero-2", Some((0, 2))),
        ];
        sort_annotations(&mut list);
        // "zero" was before "whole-file" and both sort as 0:0: the stable sort keeps them so.
        assert_eq!(titles(&list), ["zero", "whole-file", "zero-2", "line1"]);
        let mut list = vec![ann("line1", Some((1, 0))), ann("whole-file", None), ann("zero", Some((0, 0)))];
        sort_annotations(&mut list);
        assert_eq!(titles(&list), ["whole-file", "zero", "line1"]);
    }

    #[test]
    fn sorting_an_empty_list_is_fine() {
        let mut list: Vec<Annotation> = Vec::new();
        sort_annotations(&mut list);
        assert!(list.is_empty());
    }

    #[test]
    fn merges_in_provider_uri_order() {
        let merged = merge_by_provider(vec![
            ("https://z.example/p".to_string(), vec![1, 2]),
            ("file:///p.mjs".to_string(), vec![3]),
            ("mcp:everything".to_string(), vec![]),
            ("https://a.example/p".to_string(), vec![4, 5]),
        ]);
        let uris: Vec<(&str, i32)> = merged.iter().map(|(u, v)| (u.as_str(), *v)).collect();
        assert_eq!(
            uris,
            [
                ("file:///p.mjs", 3),
                ("https://a.example/p", 4),
                ("https://a.example/p", 5),
                ("https://z.example/p", 1),
                ("https://z.example/p", 2),
            ]
        );
    }

    #[test]
    fn duplicate_uris_keep_their_order() {
        let merged =
            merge_by_provider(vec![("b".to_string(), vec!["1"]), ("a".into(), vec!["2"]), ("b".into(), vec!["3"])]);
        assert_eq!(merged.iter().map(|(_, v)| *v).collect::<Vec<_>>(), ["2", "1", "3"]);
        assert!(merge_by_provider::<u8>(Vec::new()).is_empty());
    }

    /// Pairs checked against Node 20's `String.prototype.localeCompare`.
    #[test]
    fn provider_uri_order_is_locale_compare() {
        let less = [
            ("http://x", "http+js://x"),                // ':' before '+' (code units say the opposite)
            ("http+js://x", "https://x"),               // '+' before 's'
            ("file:///a/b_c.mjs", "file:///a/b-c.mjs"), // '_' before '-'
            ("file:///a/b-c.mjs", "file:///a/b.mjs"),
            ("https://a", "https://B"), // case-insensitive first
            ("https://b", "https://C"),
            ("https://a", "https://A"), // then lowercase first
            ("https://Aa", "https://ab"),
            ("https://x/9", "https://x/a"),
            ("https://x/10", "https://x/9"), // no numeric collation
            ("https://x/~", "https://x/$"),
            ("https://x/$", "https://x/0"),
            ("mcp:a", "mcp:a/"), // a prefix first
            ("a", "b\u{1}"),
        ];
        for (a, b) in less {
            assert_eq!(compare_provider_uris(a, b), Ordering::Less, "{a:?} < {b:?}");
            assert_eq!(compare_provider_uris(b, a), Ordering::Greater, "{b:?} > {a:?}");
        }
        assert_eq!(compare_provider_uris("https://x", "https://x"), Ordering::Equal);
        // Control characters are ignored by ICU; the code-unit fallback still orders them.
        assert_eq!(compare_provider_uris("a\u{1}b", "ab"), Ordering::Less);
        assert_eq!(compare_provider_uris("ab", "a\u{1}c"), Ordering::Less);
    }

    #[test]
    fn every_printable_ascii_character_has_a_weight() {
        for c in ' '..='~' {
            assert!(primary_weight(c).is_some(), "{c:?}");
        }
        let mut weights: Vec<u32> =
            (' '..='~').filter(|c| !c.is_ascii_uppercase()).filter_map(primary_weight).collect();
        let n = weights.len();
        weights.sort();
        weights.dedup();
        assert_eq!(weights.len(), n, "distinct weights for distinct characters");
    }
}
