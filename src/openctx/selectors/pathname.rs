//! `new URL(uri).pathname` (the WHATWG URL Standard as Node 20 implements
//! it, reduced to the path): what an annotation selector's `path` glob is
//! matched against.
//!
//! Hand-written rather than the `url` crate: the reference client is Node,
//! and `url` 2.5 answers differently from Node 20 where users' URIs do go
//! (`file:///c|/x` keeps its `|`, `file:////a/b` loses a slash), which would
//! make a path selector match where the reference does not. The table in
//! `url_pathname_follows_node` is Node's own answers.

use percent_encoding::{utf8_percent_encode, AsciiSet, CONTROLS};

const SPECIAL_SCHEMES: [&str; 6] = ["http", "https", "ws", "wss", "ftp", "file"];

/// `new URL(uri).pathname`, or `None` where `new URL` throws (no scheme, a
/// forbidden host character, a bad port; IDNA and IP syntax are not checked).
/// Hierarchical paths get dot segments resolved and the characters Node
/// percent-encodes in a path (space, `"`, `<`, `>`, `` ` ``, `{`, `}`, controls,
/// non-ASCII) encoded; existing escapes are left alone.
pub(super) fn url_pathname(uri: &str) -> Option<String> {
    // The URL parser trims C0 controls and spaces, and drops tabs and newlines anywhere.
    let input: String =
        uri.trim_matches(|c: char| c <= ' ').chars().filter(|c| !matches!(c, '\t' | '\n' | '\r')).collect();
    let colon = input.find(':')?;
    let scheme = &input[..colon];
    let mut chars = scheme.chars();
    if !chars.next()?.is_ascii_alphabetic() || !chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    {
        return None;
    }
    let scheme = scheme.to_ascii_lowercase();
    let rest = &input[colon + 1..];
    let rest = &rest[..rest.find(['?', '#']).unwrap_or(rest.len())];
    let special = SPECIAL_SCHEMES.contains(&scheme.as_str());
    let is_slash = |c: char| c == '/' || (special && c == '\\');

    let path: String = if scheme == "file" {
        let after_slashes = rest.strip_prefix(is_slash).and_then(|r| r.strip_prefix(is_slash));
        match after_slashes {
            Some(r) => {
                let host_end = r.find(is_slash).unwrap_or(r.len());
                let host = &r[..host_end];
                if is_windows_drive(host) {
                    format!("/{r}") // `file://C:/x`: the "host" is the drive letter.
                } else if valid_host(host, true, true) {
                    r[host_end..].to_string()
                } else {
                    return None;
                }
            }
            None if rest.starts_with(is_slash) => rest.to_string(),
            None => format!("/{rest}"),
        }
    } else if special {
        // Any run of slashes before the authority is ignored; the host is.
        let r = rest.trim_start_matches(is_slash);
        let host_end = r.find(is_slash).unwrap_or(r.len());
        if !valid_host(&r[..host_end], true, false) {
            return None;
        }
        r[host_end..].to_string()
    } else if let Some(r) = rest.strip_prefix("//") {
        let host_end = r.find('/').unwrap_or(r.len());
        if !valid_host(&r[..host_end], false, false) {
            return None;
        }
        r[host_end..].to_string()
    } else if rest.starts_with('/') {
        rest.to_string()
    } else {
        // Opaque path (`untitled:Untitled-1`): not normalized, only controls and non-ASCII encoded.
        return Some(percent_encode(rest, NODE_OPAQUE_PATH));
    };

    if path.is_empty() {
        return Some(if special { "/".into() } else { String::new() });
    }
    // Split after the leading slash; resolve `.` and `..` (also spelled `%2e`).
    let body = &path[path.chars().next().map_or(0, char::len_utf8)..];
    let raw: Vec<&str> = body.split(is_slash).collect();
    let mut out: Vec<String> = Vec::new();
    let last = raw.len() - 1;
    for (i, seg) in raw.iter().enumerate() {
        let lower = seg.to_ascii_lowercase();
        let single = lower == "." || lower == "%2e";
        let double = matches!(lower.as_str(), ".." | ".%2e" | "%2e." | "%2e%2e");
        if double {
            let keep_drive = scheme == "file" && out.len() == 1 && is_windows_drive(&out[0]);
            if !keep_drive {
                out.pop();
            }
            if i == last {
                out.push(String::new());
            }
        } else if single {
            if i == last {
                out.push(String::new());
            }
        } else {
            let mut seg = percent_encode(seg, NODE_PATH);
            if scheme == "file" && out.is_empty() && seg.len() == 2 && seg.ends_with('|') && is_windows_drive(&seg) {
                seg.replace_range(1..2, ":");
            }
            out.push(seg);
        }
    }
    Some(format!("/{}", out.join("/")))
}

/// Whether `new URL` accepts this authority (`user:pw@host:port`): the host is
/// ignored for matching, but a URL it rejects makes the reference throw.
/// Checks the characters and the port, not IDNA or IP address syntax.
fn valid_host(authority: &str, special: bool, file: bool) -> bool {
    let (had_credentials, host_port) = match authority.rfind('@') {
        Some(at) if !file => (true, &authority[at + 1..]),
        _ => (false, authority),
    };
    let (host, port) = if host_port.starts_with('[') {
        match host_port.find(']') {
            Some(end) => (&host_port[..=end], &host_port[end + 1..]),
            None => return false,
        }
    } else if file {
        (host_port, "")
    } else {
        match host_port.find(':') {
            Some(colon) => (&host_port[..colon], &host_port[colon..]),
            None => (host_port, ""),
        }
    };
    if let Some(digits) = port.strip_prefix(':') {
        if !digits.bytes().all(|b| b.is_ascii_digit())
            || digits.parse::<u32>().map_or(!digits.is_empty(), |p| p > 65535)
        {
            return false;
        }
    } else if !port.is_empty() {
        return false;
    }
    if host.is_empty() {
        return file || (!special && !had_credentials && port.is_empty());
    }
    if host.starts_with('[') {
        return host[1..host.len() - 1].chars().all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.');
    }
    let forbidden = |c: char| {
        c < ' '
            || c == '\u{7f}'
            || matches!(c, ' ' | '#' | '/' | ':' | '<' | '>' | '?' | '@' | '[' | '\\' | ']' | '^' | '|')
    };
    !host.chars().any(forbidden)
}

fn is_windows_drive(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 2 && b[0].is_ascii_alphabetic() && (b[1] == b':' || b[1] == b'|')
}

/// Node 20's path percent-encode set (it does not encode `^` or `|`);
/// non-ASCII is always encoded.
const NODE_PATH: &AsciiSet =
    &CONTROLS.add(b' ').add(b'"').add(b'#').add(b'<').add(b'>').add(b'?').add(b'`').add(b'{').add(b'}');

/// The set for opaque paths (`untitled:Untitled-1`): controls only.
const NODE_OPAQUE_PATH: &AsciiSet = CONTROLS;

fn percent_encode(s: &str, set: &'static AsciiSet) -> String {
    utf8_percent_encode(s, set).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_pathname_follows_node() {
        // Expected values from Node 20's `new URL(u).pathname`.
        let cases: &[(&str, Option<&str>)] = &[
            ("file:///a/b.ts", Some("/a/b.ts")),
            ("file:///a b/c.ts", Some("/a%20b/c.ts")),
            ("file://host/a/b", Some("/a/b")),
            ("file:/a/b", Some("/a/b")),
            ("file:a/b", Some("/a/b")),
            ("file://C:/x", Some("/C:/x")),
            ("file:///c|/x", Some("/c:/x")),
            ("file:///C:/../b", Some("/C:/b")),
            ("file:///a\\b", Some("/a/b")),
            ("file:///a?q#f", Some("/a")),
            ("file:///a#f?q", Some("/a")),
            ("http://ex.com", Some("/")),
            ("http:ex.com/a", Some("/a")),
            ("http:/ex.com/a", Some("/a")),
            ("untitled:/a/b", Some("/a/b")),
            ("foo://h/a b/c", Some("/a%20b/c")),
            ("foo:a b", Some("a b")),
            ("foo:a/./b", Some("a/./b")),
            ("foo:/a/./b/../c", Some("/a/c")),
            ("foo:/a\\b", Some("/a\\b")),
            ("foo://h", Some("")),
            ("foo:", Some("")),
            ("file:", Some("/")),
            ("file://h", Some("/")),
            ("file:///ä/ö.ts", Some("/%C3%A4/%C3%B6.ts")),
            ("file:///a/\"q\"<>`{}^|.ts", Some("/a/%22q%22%3C%3E%60%7B%7D^|.ts")),
            ("file:///a/%zz", Some("/a/%zz")),
            ("file:////a/b", Some("//a/b")),
            ("FILE:///A", Some("/A")),
            ("file:///a//b", Some("/a//b")),
            ("file:///a/..", Some("/")),
            ("http://ex.com/a/../../b", Some("/b")),
            ("x-y+z.1:/p", Some("/p")),
            ("file:///a'b", Some("/a'b")),
            (" file:///a/b ", Some("/a/b")),
            ("file:///a\t/b\n", Some("/a/b")),
            ("vscode-notebook-cell:/a/b.ipynb#x", Some("/a/b.ipynb")),
            ("foo://h/a/%2e%2e/b", Some("/b")),
            ("https://u:p@h:8080/a", Some("/a")),
            ("http://[::1]:80/a", Some("/a")),
            ("https://h:/a", Some("/a")),
            ("http://h<", None),
            ("https://h:99999/a", None),
            ("https://h:8x/a", None),
            ("https://u@/a", None),
            ("http:///", None),
            ("foo://h@", None),
            ("foo://h\\a", None),
            ("file://u@h/a", None),
            ("file://h:1/a", None),
            ("1x:/p", None),
            ("a/b", None),
            ("/a/b", None),
            ("", None),
        ];
        let wrong: Vec<_> = cases
            .iter()
            .map(|(uri, want)| (uri, want, url_pathname(uri)))
            .filter(|(_, want, got)| got.as_deref() != **want)
            .collect();
        assert!(wrong.is_empty(), "(uri, Node's pathname, ours): {wrong:#?}");
    }
}
