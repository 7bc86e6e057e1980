//! `file://` URIs <-> filesystem paths (RFC 3986 / RFC 8089) and `#L12C3-L20C5` fragments.
//!
//! Amp sends and expects file URIs; paths on unix are arbitrary bytes, so encoding and
//! decoding work on raw bytes and round-trip any path exactly.

use std::ffi::OsStr;
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Why a URI could not be turned into a local path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UriError {
    /// The scheme is not `file` (holds the scheme found, empty if there was none).
    NotFileScheme(String),
    /// A `%` not followed by two hex digits.
    BadPercentEncoding,
    /// A NUL byte, raw or as `%00`: no unix path can hold one.
    NulByte,
    /// The decoded path is not absolute.
    NotAbsolute,
    /// The URI names a host other than `localhost` (holds that host).
    RemoteHost(String),
}

impl fmt::Display for UriError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UriError::NotFileScheme(s) if s.is_empty() => {
                write!(f, "not a file:// URI (no scheme)")
            }
            UriError::NotFileScheme(s) => write!(f, "not a file:// URI (scheme \"{s}\")"),
            UriError::BadPercentEncoding => write!(f, "invalid percent-encoding in URI"),
            UriError::NulByte => write!(f, "file URI holds a NUL byte, which no path can"),
            UriError::NotAbsolute => write!(f, "file URI does not name an absolute path"),
            UriError::RemoteHost(h) => write!(f, "file URI names a remote host \"{h}\""),
        }
    }
}

impl std::error::Error for UriError {}

/// Builds a `file://` URI from a path, percent-encoding every byte outside
/// `A-Z a-z 0-9 - . _ ~ /`. A relative path is made absolute against the current
/// directory first (lexically, without resolving symlinks).
pub fn path_to_file_uri(path: &Path) -> String {
    let abs;
    let path = if path.is_absolute() {
        path
    } else {
        abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        &abs
    };
    let bytes = path.as_os_str().as_bytes();
    format!("file://{}", percent_encoding::percent_encode(bytes, URI_PATH))
}

/// What a path keeps unescaped in a file URI: `A-Z a-z 0-9 - . _ ~ /`.
const URI_PATH: &percent_encoding::AsciiSet =
    &percent_encoding::NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~').remove(b'/');

/// The lowercased scheme, if `uri` starts with `ALPHA *(ALPHA / DIGIT / "+" / "-" / ".")`
/// followed by `:`.
pub fn scheme(uri: &str) -> Option<String> {
    let (s, _) = uri.split_once(':')?;
    let mut chars = s.bytes();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.'));
    (first_ok && rest_ok).then(|| s.to_ascii_lowercase())
}

/// Splits `uri` at the first `#` into the part before and the fragment after it.
pub fn split_fragment(uri: &str) -> (&str, Option<&str>) {
    match uri.split_once('#') {
        Some((before, frag)) => (before, Some(frag)),
        None => (uri, None),
    }
}

/// Turns a `file:` URI into a local absolute path.
///
/// Accepts `file:///p`, `file://localhost/p` (host case-insensitive) and the short
/// `file:/p`; drops any `?query` and `#fragment`; percent-decodes to raw bytes.
/// A NUL byte, raw or encoded (`%00`), is rejected since no unix path can
/// contain one (and the path would not encode back to the same URI).
pub fn file_uri_to_path(uri: &str) -> Result<PathBuf, UriError> {
    match scheme(uri) {
        Some(s) if s == "file" => {}
        other => return Err(UriError::NotFileScheme(other.unwrap_or_default())),
    }
    let rest = &uri["file:".len()..];
    let (rest, _) = split_fragment(rest);
    let rest = rest.split_once('?').map_or(rest, |(p, _)| p);
    let path = match rest.strip_prefix("//") {
        Some(after) => {
            let (host, path) = after.find('/').map_or((after, ""), |i| after.split_at(i));
            if !host.is_empty() && !host.eq_ignore_ascii_case("localhost") {
                return Err(UriError::RemoteHost(host.to_string()));
            }
            path
        }
        None => rest,
    };
    let bytes = percent_decode(path)?;
    if bytes.first() != Some(&b'/') {
        return Err(UriError::NotAbsolute);
    }
    Ok(PathBuf::from(OsStr::from_bytes(&bytes)))
}

/// Decodes `%XX` escapes to raw bytes; other bytes pass through unchanged.
/// Hand-written because it is strict where `percent-encoding` is lenient:
/// a bad escape or a NUL (`%00` or raw) refuses the URI instead of opening
/// a file under another name.
fn percent_decode(s: &str) -> Result<Vec<u8>, UriError> {
    fn hex(b: u8) -> Option<u8> {
        (b as char).to_digit(16).map(|d| d as u8)
    }
    let src = s.as_bytes();
    let mut out = Vec::with_capacity(src.len());
    let mut i = 0;
    while i < src.len() {
        if src[i] == b'%' {
            let hi = src.get(i + 1).copied().and_then(hex);
            let lo = src.get(i + 2).copied().and_then(hex);
            match (hi, lo) {
                (Some(0), Some(0)) => return Err(UriError::NulByte),
                (Some(h), Some(l)) => out.push((h << 4) | l),
                _ => return Err(UriError::BadPercentEncoding),
            }
            i += 3;
        } else if src[i] == 0 {
            return Err(UriError::NulByte);
        } else {
            out.push(src[i]);
            i += 1;
        }
    }
    Ok(out)
}

/// A line (and optional column/range) selection from a `#L..` fragment, 1-based as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineSelection {
    /// First line (1-based).
    pub start_line: u32,
    /// Column on the first line (1-based), if given.
    pub start_col: Option<u32>,
    /// Last line (1-based), if a range was given.
    pub end_line: Option<u32>,
    /// Column on the last line (1-based), if given.
    pub end_col: Option<u32>,
}

/// Parses `L12`, `L12C3`, `L12-L20`, `L12-20`, `L12C3-L20C5` (`L`/`C` in any case,
/// fragment without the `#`). Zero, overflowing or malformed numbers give `None`.
/// The range is returned as written; a reversed range is not reordered.
pub fn parse_line_fragment(fragment: &str) -> Option<LineSelection> {
    let (start, end) = match fragment.split_once('-') {
        Some((s, e)) => (s, Some(e)),
        None => (fragment, None),
    };
    let start = strip_l(start)?;
    let (start_line, start_col) = parse_pos(start)?;
    let (end_line, end_col) = match end {
        None => (None, None),
        Some(e) => {
            let e = strip_l(e).unwrap_or(e);
            let (l, c) = parse_pos(e)?;
            (Some(l), c)
        }
    };
    Some(LineSelection { start_line, start_col, end_line, end_col })
}

/// Removes a leading `L`/`l`.
fn strip_l(s: &str) -> Option<&str> {
    s.strip_prefix('L').or_else(|| s.strip_prefix('l'))
}

/// Parses `<line>[C<col>]` (without the leading `L`).
fn parse_pos(s: &str) -> Option<(u32, Option<u32>)> {
    match s.find(['C', 'c']) {
        Some(i) => Some((parse_num(&s[..i])?, Some(parse_num(&s[i + 1..])?))),
        None => Some((parse_num(s)?, None)),
    }
}

/// Parses a positive decimal number made only of ASCII digits.
fn parse_num(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<u32>().ok().filter(|&n| n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    fn sel(sl: u32, sc: Option<u32>, el: Option<u32>, ec: Option<u32>) -> Option<LineSelection> {
        Some(LineSelection { start_line: sl, start_col: sc, end_line: el, end_col: ec })
    }

    #[test]
    fn encode_example_from_spec() {
        assert_eq!(path_to_file_uri(Path::new("/tmp/a b#%é.txt")), "file:///tmp/a%20b%23%25%C3%A9.txt");
    }

    #[test]
    fn encode_keeps_unreserved_and_slash() {
        let s = "/AZaz09-._~/x";
        assert_eq!(path_to_file_uri(Path::new(s)), format!("file://{s}"));
        assert_eq!(path_to_file_uri(Path::new("/")), "file:///");
    }

    #[test]
    fn encode_reserved_and_control() {
        assert_eq!(path_to_file_uri(Path::new("/a?b")), "file:///a%3Fb");
        assert_eq!(path_to_file_uri(Path::new("/a:b@c+d")), "file:///a%3Ab%40c%2Bd");
        assert_eq!(path_to_file_uri(Path::new("/t\tn\n")), "file:///t%09n%0A");
        assert_eq!(path_to_file_uri(Path::new("/\u{7f}")), "file:///%7F");
    }

    #[test]
    fn encode_raw_non_utf8_bytes() {
        let path = Path::new(OsStr::from_bytes(b"/x\xff\xfe"));
        assert_eq!(path_to_file_uri(path), "file:///x%FF%FE");
        assert_eq!(file_uri_to_path("file:///x%FF%FE").unwrap(), path);
    }

    #[test]
    fn encode_relative_becomes_absolute() {
        let uri = path_to_file_uri(Path::new("rel/x"));
        assert!(uri.starts_with("file:///"), "{uri}");
        assert!(uri.ends_with("/rel/x"), "{uri}");
    }

    #[test]
    fn roundtrip() {
        for s in [
            "/plain/file.rs",
            "/with space/a b",
            "/hash#x/#",
            "/pct%20/%",
            "/q?x=1&y=2",
            "/caf\u{e9}/na\u{ef}ve",
            "/emoji/\u{1f600}\u{1f468}\u{200d}\u{1f469}.txt",
            "/\u{65e5}\u{672c}\u{8a9e}",
            "/semi;colon,comma'quote\"[]{}",
            "/trailing/",
            "/",
        ] {
            let uri = path_to_file_uri(Path::new(s));
            assert!(uri.is_ascii(), "{uri}");
            assert_eq!(file_uri_to_path(&uri).unwrap(), p(s), "{uri}");
        }
    }

    #[test]
    fn scheme_cases() {
        assert_eq!(scheme("file:///x").as_deref(), Some("file"));
        assert_eq!(scheme("FILE:///x").as_deref(), Some("file"));
        assert_eq!(scheme("git+ssh://h").as_deref(), Some("git+ssh"));
        assert_eq!(scheme("a.b-c:").as_deref(), Some("a.b-c"));
        assert_eq!(scheme("x1:y").as_deref(), Some("x1"));
        assert_eq!(scheme("/abs/path"), None);
        assert_eq!(scheme("1abc:x"), None);
        assert_eq!(scheme(":x"), None);
        assert_eq!(scheme("no colon"), None);
        assert_eq!(scheme("a b:c"), None);
        assert_eq!(scheme("/a:b"), None);
        assert_eq!(scheme(""), None);
    }

    #[test]
    fn split_fragment_cases() {
        assert_eq!(split_fragment("file:///a#L1"), ("file:///a", Some("L1")));
        assert_eq!(split_fragment("file:///a#b#c"), ("file:///a", Some("b#c")));
        assert_eq!(split_fragment("file:///a#"), ("file:///a", Some("")));
        assert_eq!(split_fragment("file:///a"), ("file:///a", None));
        assert_eq!(split_fragment(""), ("", None));
    }

    #[test]
    fn decode_forms() {
        assert_eq!(file_uri_to_path("file:///a/b").unwrap(), p("/a/b"));
        assert_eq!(file_uri_to_path("file://localhost/a/b").unwrap(), p("/a/b"));
        assert_eq!(file_uri_to_path("file://LocalHost/a").unwrap(), p("/a"));
        assert_eq!(file_uri_to_path("FILE:///a").unwrap(), p("/a"));
        assert_eq!(file_uri_to_path("file:/a/b").unwrap(), p("/a/b"));
        assert_eq!(file_uri_to_path("file:///a/b?x=1#L3").unwrap(), p("/a/b"));
        assert_eq!(file_uri_to_path("file:///a/b#frag?notquery").unwrap(), p("/a/b"));
        assert_eq!(file_uri_to_path("file:///a%2fb").unwrap(), p("/a/b"));
        assert_eq!(file_uri_to_path("file:///%e2%86%92").unwrap(), p("/\u{2192}"));
        // Unencoded non-ASCII passes through.
        assert_eq!(file_uri_to_path("file:///caf\u{e9}").unwrap(), p("/caf\u{e9}"));
    }

    #[test]
    fn decode_errors() {
        use UriError::*;
        assert_eq!(file_uri_to_path("http://x/a"), Err(NotFileScheme("http".into())));
        assert_eq!(file_uri_to_path("/abs/path"), Err(NotFileScheme(String::new())));
        assert_eq!(file_uri_to_path(""), Err(NotFileScheme(String::new())));
        assert_eq!(file_uri_to_path("files:///a"), Err(NotFileScheme("files".into())));
        assert_eq!(file_uri_to_path("file://host/a"), Err(RemoteHost("host".into())));
        assert_eq!(file_uri_to_path("file://localhost:80/a"), Err(RemoteHost("localhost:80".into())));
        assert_eq!(file_uri_to_path("file://server"), Err(RemoteHost("server".into())));
        assert_eq!(file_uri_to_path("file:///a%"), Err(BadPercentEncoding));
        assert_eq!(file_uri_to_path("file:///a%2"), Err(BadPercentEncoding));
        assert_eq!(file_uri_to_path("file:///a%zz"), Err(BadPercentEncoding));
        assert_eq!(file_uri_to_path("file:///a%+1"), Err(BadPercentEncoding));
        assert_eq!(file_uri_to_path("file:///a%00b"), Err(NulByte));
        // Found by fuzzing: a raw NUL decoded, but its path encoded to the
        // refused `%00`.
        assert_eq!(file_uri_to_path("file:///a\0b"), Err(NulByte));
        assert_eq!(file_uri_to_path("file:rel/a"), Err(NotAbsolute));
        assert_eq!(file_uri_to_path("file:"), Err(NotAbsolute));
        assert_eq!(file_uri_to_path("file://"), Err(NotAbsolute));
        assert_eq!(file_uri_to_path("file://localhost"), Err(NotAbsolute));
        assert_eq!(file_uri_to_path("file:%2Fa"), Ok(p("/a")));
    }

    #[test]
    fn error_display_is_readable() {
        assert_eq!(UriError::NotFileScheme("http".into()).to_string(), "not a file:// URI (scheme \"http\")");
        assert_eq!(UriError::NotFileScheme(String::new()).to_string(), "not a file:// URI (no scheme)");
        assert!(UriError::BadPercentEncoding.to_string().contains("percent"));
        assert!(UriError::NotAbsolute.to_string().contains("absolute"));
        assert!(UriError::RemoteHost("h".into()).to_string().contains("\"h\""));
        let e: Box<dyn std::error::Error> = Box::new(UriError::NotAbsolute);
        assert!(!e.to_string().is_empty());
    }

    #[test]
    fn fragment_valid_forms() {
        assert_eq!(parse_line_fragment("L12"), sel(12, None, None, None));
        assert_eq!(parse_line_fragment("l12"), sel(12, None, None, None));
        assert_eq!(parse_line_fragment("L12C3"), sel(12, Some(3), None, None));
        assert_eq!(parse_line_fragment("L12c3"), sel(12, Some(3), None, None));
        assert_eq!(parse_line_fragment("L12-L20"), sel(12, None, Some(20), None));
        assert_eq!(parse_line_fragment("L12-l20"), sel(12, None, Some(20), None));
        assert_eq!(parse_line_fragment("L12-20"), sel(12, None, Some(20), None));
        assert_eq!(parse_line_fragment("L12C3-L20C5"), sel(12, Some(3), Some(20), Some(5)));
        assert_eq!(parse_line_fragment("L12C3-L20"), sel(12, Some(3), Some(20), None));
        assert_eq!(parse_line_fragment("L12-L20C5"), sel(12, None, Some(20), Some(5)));
        assert_eq!(parse_line_fragment("L12-20C5"), sel(12, None, Some(20), Some(5)));
        assert_eq!(parse_line_fragment("L007"), sel(7, None, None, None));
        assert_eq!(parse_line_fragment("L4294967295"), sel(u32::MAX, None, None, None));
        // Reversed ranges are returned as written.
        assert_eq!(parse_line_fragment("L20-L12"), sel(20, None, Some(12), None));
    }

    #[test]
    fn fragment_invalid_forms() {
        for f in [
            "",
            "L",
            "12",
            "L0",
            "L0C1",
            "L1C0",
            "L1-L0",
            "L1-0",
            "L1C",
            "LC1",
            "L1-",
            "L1-L",
            "L-1",
            "L1--L2",
            "L1-L2-L3",
            "L1CC2",
            "L1C2C3",
            "L 1",
            " L1",
            "L1 ",
            "L+1",
            "L1x",
            "x1",
            "L1.5",
            "L4294967296",
            "L12-C5",
            "LL1",
            "L1-LL2",
            "L\u{661}",
            "#L1",
        ] {
            assert_eq!(parse_line_fragment(f), None, "{f:?}");
        }
    }
}
