//! When a provider is asked: annotation selectors (`meta.annotations.selectors`)
//! and message selectors (`meta.items.messageSelectors`).
//!
//! Annotation selectors mirror `@openctx/client` 0.0.30
//! (`lib/client/src/providerClient/selector.ts`): no selectors → every
//! document; `[]` → none; `[{}]` → every document; selectors are OR'ed and the
//! fields of one selector AND'ed. `path` is a glob compiled by picomatch 3
//! **with default options** (`match(trimLeadingSlash(path))`), tested against
//! `new URL(uri).pathname` without its leading `/`: still percent-encoded, the
//! host ignored (so `**/*.lua` does not match `home/u/.config/nvim/init.lua`:
//! see [`glob`] for dotfiles). `contentContains` is a plain substring test.
//!
//! Each part has a file of its own: [`pathname`] (`new URL(uri).pathname` as
//! Node computes it), [`glob`] (picomatch's globs, compiled to linear-time
//! regexes), [`message`] (message selectors) over [`js_regex`] (JavaScript
//! regexes rewritten for the `regex` crate).

mod glob;
mod js_regex;
mod message;
mod pathname;

pub use message::{compile_message_selectors, message_matches};

use glob::PathGlob;
use pathname::url_pathname;

use super::types::AnnotationSelector;

/// Compiled regex programs are capped: a provider's pattern must not eat the editor's memory.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// A provider's `meta.annotations.selectors`, compiled once per `meta`.
#[derive(Debug, Clone)]
pub struct CompiledSelectors {
    scope: Scope,
}

#[derive(Debug, Clone)]
enum Scope {
    /// `selectors` absent.
    Always,
    /// The reference would throw for every document (an empty `path`).
    Never,
    /// OR of the selectors (`[]` never matches).
    AnyOf(Vec<Selector>),
}

#[derive(Debug, Clone)]
struct Selector {
    path: Option<PathGlob>,
    content_contains: Option<String>,
}

impl CompiledSelectors {
    /// Compiles the selectors. Problems come back as readable messages and never
    /// fail the others: a glob that does not compile only makes its own selector
    /// never match (as picomatch's `/$^/` fallback does). An empty `path` (`""`
    /// or `"/"`) makes picomatch throw, which fails the provider's annotations
    /// for every document in the reference; here the whole set never matches.
    pub fn compile(selectors: Option<&[AnnotationSelector]>) -> (CompiledSelectors, Vec<String>) {
        let Some(selectors) = selectors else {
            return (CompiledSelectors { scope: Scope::Always }, Vec::new());
        };
        let mut compiled = Vec::with_capacity(selectors.len());
        let mut errors = Vec::new();
        for (i, sel) in selectors.iter().enumerate() {
            let path = match &sel.path {
                None => None,
                Some(p) => {
                    let glob = p.strip_prefix('/').unwrap_or(p);
                    if glob.is_empty() {
                        errors.push(format!(
                            "annotation selector {i}: empty path glob {p:?}; the provider gets no annotation requests"
                        ));
                        return (CompiledSelectors { scope: Scope::Never }, errors);
                    }
                    let g = PathGlob::new(glob);
                    if let Some(e) = g.error() {
                        errors.push(format!("annotation selector {i}: path glob {glob:?} never matches: {e}"));
                    }
                    Some(g)
                }
            };
            compiled.push(Selector { path, content_contains: sel.content_contains.clone() });
        }
        (CompiledSelectors { scope: Scope::AnyOf(compiled) }, errors)
    }

    /// Whether the provider should be asked for annotations of this document.
    /// A URI that does not parse as a URL never matches (the reference throws,
    /// and that provider contributes nothing), unless selectors are absent.
    pub fn matches(&self, uri: &str, content: &str) -> bool {
        let selectors = match &self.scope {
            Scope::Always => return true,
            Scope::Never => return false,
            Scope::AnyOf(s) => s,
        };
        let Some(pathname) = url_pathname(uri) else { return false };
        let path = pathname.strip_prefix('/').unwrap_or(&pathname);
        selectors.iter().any(|s| {
            s.path.as_ref().is_none_or(|g| g.is_match(path))
                && s.content_contains.as_deref().is_none_or(|c| content.contains(c))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(path: Option<&str>, contains: Option<&str>) -> AnnotationSelector {
        AnnotationSelector { path: path.map(Into::into), content_contains: contains.map(Into::into) }
    }

    fn compiled(list: &[AnnotationSelector]) -> CompiledSelectors {
        let (c, errors) = CompiledSelectors::compile(Some(list));
        assert!(errors.is_empty(), "{errors:?}");
        c
    }

    fn path_matches(glob: &str, uri: &str) -> bool {
        compiled(&[sel(Some(glob), None)]).matches(uri, "")
    }

    const FIXTURE: &str = "file:///dir1/dir2/file.txt";

    #[test]
    fn absent_empty_and_empty_selector() {
        let (absent, errors) = CompiledSelectors::compile(None);
        assert!(errors.is_empty());
        assert!(absent.matches(FIXTURE, "foo bar"));
        assert!(absent.matches("not a url", "")); // never parsed
        assert!(!compiled(&[]).matches(FIXTURE, "foo bar"));
        assert!(compiled(&[sel(None, None)]).matches(FIXTURE, "foo bar"));
        assert!(compiled(&[sel(None, None), sel(None, None)]).matches(FIXTURE, "foo bar"));
    }

    #[test]
    fn reference_path_cases() {
        // lib/client/src/providerClient/selector.test.ts
        for yes in
            ["dir1/dir2/file.txt", "dir1/*/file.txt", "*/*/file.txt", "**/file.txt", "**", "dir1/**", "**/dir1/**"]
        {
            assert!(path_matches(yes, FIXTURE), "{yes}");
        }
        for no in ["file.txt", "dir2/file.txt", "*.txt", "*", "dir1", "dir1/dir2"] {
            assert!(!path_matches(no, FIXTURE), "{no}");
        }
        assert!(path_matches("**/*.t?(xt)", FIXTURE));
        assert!(path_matches("**/*.(txt|png)", FIXTURE));
        assert!(!path_matches("**/*.(md|png)", FIXTURE));
    }

    #[test]
    fn content_contains_and_combinations() {
        let c = |s: &[AnnotationSelector]| compiled(s).matches(FIXTURE, "foo bar");
        assert!(c(&[sel(None, Some("foo"))]));
        assert!(c(&[sel(None, Some("foo bar"))]));
        assert!(c(&[sel(None, Some(""))]));
        assert!(!c(&[sel(None, Some("baz"))]));
        assert!(!c(&[sel(None, Some("FOO"))]));
        // AND within a selector
        assert!(!c(&[sel(Some("**"), Some("xxx"))]));
        assert!(!c(&[sel(Some("xxx"), Some("foo"))]));
        assert!(c(&[sel(Some("dir1/**"), Some("bar"))]));
        // OR across selectors
        assert!(c(&[sel(Some("**"), None), sel(None, Some("xxx"))]));
        assert!(c(&[sel(Some("nope"), None), sel(None, Some("foo"))]));
        assert!(!c(&[sel(Some("nope"), None), sel(None, Some("nope"))]));
    }

    #[test]
    fn leading_slash_of_the_glob_is_ignored() {
        assert!(path_matches("/dir1/**", FIXTURE));
        assert!(path_matches("/**/*.txt", FIXTURE));
        // Only one is stripped.
        assert!(!path_matches("//dir1/**", FIXTURE));
    }

    #[test]
    fn empty_path_never_matches() {
        // `https://host` has pathname `/`, which leaves "" to match.
        assert!(!path_matches("**", "https://example.com"));
        assert!(!path_matches("**", "https://example.com/"));
        assert!(path_matches("**", "https://example.com/a"));
    }

    #[test]
    fn broken_globs_are_reported_and_never_match() {
        for bad in ["{a,b", "a\\", "[c-a]", "+(a", "(a|b", "!(x)y", "[[:foo:]]", "*(a|b/c)"] {
            let (c, errors) = CompiledSelectors::compile(Some(&[sel(Some(bad), None), sel(None, Some("ok"))]));
            assert_eq!(errors.len(), 1, "{bad}: {errors:?}");
            assert!(errors[0].contains(bad), "{}", errors[0]);
            assert!(!c.matches("file:///x/y", "no"), "{bad}");
            // The other selector still works.
            assert!(c.matches("file:///x/y", "ok"), "{bad}");
        }
    }

    #[test]
    fn empty_path_glob_fails_the_whole_set() {
        for empty in ["", "/"] {
            let (c, errors) = CompiledSelectors::compile(Some(&[sel(Some("**"), None), sel(Some(empty), None)]));
            assert_eq!(errors.len(), 1);
            assert!(errors[0].contains("empty path glob"), "{}", errors[0]);
            assert!(!c.matches(FIXTURE, "anything"));
        }
    }

    #[test]
    fn too_many_alternatives_is_an_error_not_a_hang() {
        let bomb = "{a,b}".repeat(20);
        let (c, errors) = CompiledSelectors::compile(Some(&[sel(Some(&bomb), None)]));
        assert_eq!(errors.len(), 1);
        assert!(errors[0].contains("alternatives"), "{}", errors[0]);
        assert!(!c.matches("file:///ab", ""));
        let fine = "{a,b}".repeat(8);
        assert!(compiled(&[sel(Some(&fine), None)]).matches("file:///abababab", ""));
        assert!(compiled(&[sel(Some(&fine), None)]).matches("file:///bbbbbbba", ""));
    }

    #[test]
    fn uri_paths_stay_percent_encoded_and_ignore_the_host() {
        assert!(path_matches("a%20b/*.ts", "file:///a%20b/c.ts"));
        assert!(path_matches("a%20b/*.ts", "file:///a b/c.ts")); // encoded by the URL parser
        assert!(!path_matches("a b/*.ts", "file:///a%20b/c.ts"));
        assert!(path_matches("%C3%A4/*.ts", "file:///ä/x.ts"));
        assert!(path_matches("src/**", "https://github.com/src/x.go"));
        assert!(!path_matches("github.com/**", "https://github.com/src/x.go"));
        assert!(path_matches("a/b", "file://host/a/b"));
        assert!(path_matches("a/b", "https://user:pw@host:8080/a/b?query=1#frag"));
        assert!(path_matches("a/c", "file:///a/./b/../c"));
        assert!(path_matches("a/c", "file:///a/%2e/b/%2E%2e/c"));
        assert!(path_matches("C:/x/*.ts", "file:///C:/x/y.ts"));
        assert!(path_matches("Untitled-1", "untitled:Untitled-1"));
        assert!(!path_matches("**", "not a url"));
        assert!(!path_matches("**", "/abs/path/without/scheme.ts"));
    }
}
