//! When a provider is asked: annotation selectors (`meta.annotations.selectors`)
//! and message selectors (`meta.items.messageSelectors`).
//!
//! Annotation selectors mirror `@openctx/client` 0.0.30
//! (`lib/client/src/providerClient/selector.ts`): no selectors → every
//! document; `[]` → none; `[{}]` → every document; selectors are OR'ed and the
//! fields of one selector AND'ed. `path` is a glob compiled by picomatch 3
//! **with default options** (`match(trimLeadingSlash(path))`), tested against
//! `new URL(uri).pathname` without its leading `/`: still percent-encoded, the
//! host ignored. Default options mean `dot: false`: `*`, `?` and `**` never match
//! a path segment that starts with `.` (so `**/*.lua` does not match
//! `home/u/.config/nvim/init.lua`) unless the glob spells the dot (`.config/**`,
//! `**/.env`). `contentContains` is a plain substring test.
//!
//! Globs are matched segment by segment: each segment of the glob is a small
//! regular expression (the `regex` crate, linear time), and `**` segments are
//! matched by dynamic programming over the path's segments. `globset` cannot be
//! used as is: it has no notion of picomatch's dotfile rule, nor of extglobs
//! (`*.(txt|png)`, `*.t?(xt)`, used by the reference's own tests).
//!
//! Supported picomatch syntax: `*`, `?`, `**` (as a whole segment; elsewhere it
//! is `*`), `[...]` with ranges, `[^...]`, POSIX classes and `\d \w \s`
//! (picomatch 3 reads `[!a]` as the characters `!` and `a`, not a negation; so
//! does this), braces `{a,b}` (nested, empty alternatives, `/` inside, single
//! character ranges `{a..e}`), extglobs `@(a|b)`, `(a|b)`, `?(a|b)`, `*(a|b)`,
//! `+(a|b)`, a leading `!` (negation) and `./`, `\` escapes. picomatch's
//! `(input === glob)` shortcut is kept: a path equal to the glob text matches.
//! Not supported (compile error, the selector never matches): `!(...)`
//! extglobs, `/` inside `*(...)`/`+(...)`. Known differences, none of which
//! a document URI meets in practice: a path ending in `/` (picomatch lets a
//! glob ending in `*` match one trailing `/`), `**` glued to other characters
//! at the start of a segment (`**.ts` crosses `/` in picomatch), a class that
//! contains `/`, and a class also matching its own text (`[ab]` matching `[ab]`
//! inside a longer path). Checked against picomatch 3.0.2 and Node 20's `URL`
//! on some 50,000 generated glob/path and URI cases during development.

use percent_encoding::{utf8_percent_encode, AsciiSet, CONTROLS};
use regex::{Regex, RegexBuilder};

use super::types::{AnnotationSelector, MessageSelector};

/// Compiled regex programs are capped: a provider's pattern must not eat the editor's memory.
const REGEX_SIZE_LIMIT: usize = 1 << 20;
/// Brace and extglob expansion is capped: `{a,b}{c,d}...` grows exponentially.
const MAX_ALTERNATIVES: usize = 256;

// ---------------------------------------------------------------------------
// Annotation selectors
// ---------------------------------------------------------------------------

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
                    if let Err(e) = &g.program {
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

// ---------------------------------------------------------------------------
// URL pathname (WHATWG URL as implemented by Node 20, reduced to `pathname`)
//
// Hand-written rather than the `url` crate: the reference client is Node,
// and `url` 2.5 answers differently from Node 20 where users' URIs do go
// (`file:///c|/x` keeps its `|`, `file:////a/b` loses a slash), which would
// make a path selector match where the reference does not. The table in
// `url_pathname_follows_node` is Node's own answers.
// ---------------------------------------------------------------------------

const SPECIAL_SCHEMES: [&str; 6] = ["http", "https", "ws", "wss", "ftp", "file"];

/// `new URL(uri).pathname`, or `None` where `new URL` throws (no scheme, a
/// forbidden host character, a bad port; IDNA and IP syntax are not checked).
/// Hierarchical paths get dot segments resolved and the characters Node
/// percent-encodes in a path (space, `"`, `<`, `>`, `` ` ``, `{`, `}`, controls,
/// non-ASCII) encoded; existing escapes are left alone.
fn url_pathname(uri: &str) -> Option<String> {
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

// ---------------------------------------------------------------------------
// Globs (the picomatch subset described at the top)
// ---------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct PathGlob {
    /// The glob as given to picomatch: a path equal to it matches.
    literal: String,
    negated: bool,
    /// `Err`: the glob never matches (except by `literal`).
    program: Result<Vec<Alternative>, String>,
}

/// One brace/extglob expansion of the glob, split on `/`.
#[derive(Debug, Clone)]
struct Alternative {
    segments: Vec<Segment>,
    /// picomatch's `x*/**` needs at least one segment under `x*`, while `x/**` matches `x`.
    trailing_globstar_needs_one: bool,
}

#[derive(Debug, Clone)]
enum Segment {
    /// `**`: zero or more path segments, none starting with `.`.
    Globstar,
    Part(Part),
}

#[derive(Debug, Clone)]
struct Part {
    regex: Regex,
    /// Leading `*`/`?` outside braces: picomatch's `(?!\.)`.
    dot_protected: bool,
    /// Leading `*` outside braces: picomatch's `(?=.)`, which only fails at the end of the input.
    star_led: bool,
    ends_with_star: bool,
}

impl PathGlob {
    fn new(glob: &str) -> PathGlob {
        let literal = glob.to_string();
        let mut rest = glob;
        let mut bangs = 0;
        while rest.starts_with('!') && !rest.starts_with("!(") {
            rest = &rest[1..];
            bangs += 1;
        }
        let rest = rest.strip_prefix("./").unwrap_or(rest);
        PathGlob { literal, negated: bangs % 2 == 1, program: compile_glob(rest) }
    }

    fn is_match(&self, path: &str) -> bool {
        if path.is_empty() {
            return false;
        }
        if path == self.literal {
            return true;
        }
        let Ok(alternatives) = &self.program else { return false };
        let segments: Vec<&str> = path.split('/').collect();
        alternatives.iter().any(|a| a.is_match(&segments)) != self.negated
    }
}

impl Alternative {
    /// Dynamic programming over (glob segment, path segment): linear in their product.
    fn is_match(&self, path: &[&str]) -> bool {
        let (p, s) = (self.segments.len(), path.len());
        // next[j]: glob segments i+1.. match path segments j..
        let mut next = vec![false; s + 1];
        next[s] = true;
        for i in (0..p).rev() {
            let mut cur = vec![false; s + 1];
            match &self.segments[i] {
                Segment::Globstar => {
                    let needs_one = self.trailing_globstar_needs_one && i == p - 1;
                    // zero_or_more[j] = next[j] || (path[j] ok && zero_or_more[j+1])
                    let mut zero_or_more = vec![false; s + 1];
                    zero_or_more[s] = next[s];
                    for j in (0..s).rev() {
                        zero_or_more[j] = next[j] || (!path[j].starts_with('.') && zero_or_more[j + 1]);
                    }
                    for j in 0..=s {
                        cur[j] = if needs_one {
                            j < s && !path[j].starts_with('.') && zero_or_more[j + 1]
                        } else {
                            zero_or_more[j]
                        };
                    }
                }
                Segment::Part(part) => {
                    for j in 0..s {
                        cur[j] = next[j + 1] && part.is_match(path[j], j == s - 1);
                    }
                }
            }
            next = cur;
        }
        next[0]
    }
}

impl Part {
    fn is_match(&self, segment: &str, is_last: bool) -> bool {
        if self.dot_protected && segment.starts_with('.') {
            return false;
        }
        if self.star_led && segment.is_empty() && is_last {
            return false;
        }
        self.regex.is_match(segment)
    }
}

/// A parsed glob; groups (`{}`, `@()`, `()`, `?()`) are expanded before matching.
#[derive(Debug, Clone, PartialEq)]
enum Node {
    Lit(char),
    Star,
    QMark,
    /// Regex class source, e.g. `[a-z]`.
    Class(String),
    Sep,
    /// Zero-width: where a group was expanded (a segment that starts with a
    /// group gets no dot protection, even if the chosen alternative is empty).
    GroupMark,
    Group {
        alts: Vec<Vec<Node>>,
        optional: bool,
    },
    Repeat {
        alts: Vec<Vec<Node>>,
        at_least_one: bool,
    },
}

#[derive(Clone, Copy, PartialEq)]
enum Context {
    Top,
    Brace,
    Paren,
}

fn compile_glob(glob: &str) -> Result<Vec<Alternative>, String> {
    let chars: Vec<char> = glob.chars().collect();
    let mut pos = 0;
    let (nodes, _) = parse_seq(&chars, &mut pos, Context::Top)?;
    let expanded = expand(&nodes, false)?;
    expanded.into_iter().map(|nodes| build_alternative(&nodes)).collect()
}

/// Parses until the end of the input or a terminator of `ctx` (`,` `}` in
/// braces, `|` `)` in parentheses), which is consumed and returned.
fn parse_seq(chars: &[char], pos: &mut usize, ctx: Context) -> Result<(Vec<Node>, Option<char>), String> {
    let mut nodes = Vec::new();
    while *pos < chars.len() {
        let c = chars[*pos];
        *pos += 1;
        let next = chars.get(*pos).copied();
        match c {
            ',' | '}' if ctx == Context::Brace => return Ok((nodes, Some(c))),
            '|' | ')' if ctx == Context::Paren => return Ok((nodes, Some(c))),
            '\\' => match next {
                Some(n) => {
                    *pos += 1;
                    nodes.push(if n == '/' { Node::Sep } else { Node::Lit(n) });
                }
                None => return Err("the glob ends with a lone `\\`".into()),
            },
            '[' => match parse_class(chars, *pos)? {
                Some((class, end)) => {
                    *pos = end;
                    nodes.push(Node::Class(class));
                }
                None => nodes.push(Node::Lit('[')),
            },
            '{' => {
                let start = *pos;
                let mut alts = Vec::new();
                loop {
                    let (alt, end) = parse_seq(chars, pos, Context::Brace)?;
                    alts.push(alt);
                    match end {
                        Some(',') => continue,
                        Some(_) => break,
                        None => return Err("unclosed `{`".into()),
                    }
                }
                if alts.len() > 1 {
                    nodes.push(Node::Group { alts, optional: false });
                } else {
                    let raw: String = chars[start..*pos - 1].iter().collect();
                    match raw.split_once("..") {
                        // `{a..e}`: picomatch writes the class `[a-e]` from the raw ends.
                        Some((a, b)) if !a.is_empty() && !b.is_empty() && !b.contains("..") => {
                            let class: Vec<char> = format!("{a}-{b}]").chars().collect();
                            match parse_class(&class, 0)? {
                                Some((c, _)) => nodes.push(Node::Class(c)),
                                None => return Err(format!("bad range {{{raw}}}")),
                            }
                        }
                        // `{a}`: braces without a comma are literal.
                        _ => {
                            nodes.push(Node::Lit('{'));
                            nodes.extend(alts.pop().unwrap_or_default());
                            nodes.push(Node::Lit('}'));
                        }
                    }
                }
            }
            '?' | '@' | '*' | '+' if next == Some('(') => {
                *pos += 1;
                let alts = parse_paren(chars, pos)?;
                nodes.push(match c {
                    '?' => Node::Group { alts, optional: true },
                    '@' => Node::Group { alts, optional: false },
                    '*' => Node::Repeat { alts, at_least_one: false },
                    _ => Node::Repeat { alts, at_least_one: true },
                });
            }
            '!' if next == Some('(') => return Err("`!(...)` extglobs are not supported".into()),
            '(' => {
                let alts = parse_paren(chars, pos)?;
                nodes.push(Node::Group { alts, optional: false });
            }
            '*' => nodes.push(Node::Star),
            '?' => nodes.push(Node::QMark),
            '/' => nodes.push(Node::Sep),
            _ => nodes.push(Node::Lit(c)),
        }
    }
    Ok((nodes, None))
}

/// The alternatives of a parenthesized group, after its `(`.
fn parse_paren(chars: &[char], pos: &mut usize) -> Result<Vec<Vec<Node>>, String> {
    let mut alts = Vec::new();
    loop {
        let (alt, end) = parse_seq(chars, pos, Context::Paren)?;
        alts.push(alt);
        match end {
            Some('|') => continue,
            Some(_) => return Ok(alts),
            None => return Err("unclosed `(`".into()),
        }
    }
}

/// A bracket expression starting after its `[`: `Ok(None)` when it is not
/// closed (then `[` is a literal), `Err` when picomatch's regex would not compile.
fn parse_class(chars: &[char], start: usize) -> Result<Option<(String, usize)>, String> {
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
                let set = posix_class(name).ok_or_else(|| format!("unknown POSIX class [:{name}:]"))?;
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
) -> Result<(), String> {
    let Some(m) = member else { return Ok(()) };
    if *dash {
        let from = pending.take().unwrap_or(m);
        *dash = false;
        if from > m {
            return Err(format!("range out of order in character class: {from}-{m}"));
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

const DIGIT: &[(char, char)] = &[('0', '9')];
const WORD: &[(char, char)] = &[('0', '9'), ('A', 'Z'), ('a', 'z'), ('_', '_')];
/// JavaScript's `\s`.
const JS_SPACE: &[(char, char)] = &[
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
const JS_NOT_SPACE: &str = r"[^\t-\r \x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}\x{feff}]";

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

/// Expands groups into alternatives; each node is tagged with whether it came
/// from inside a group (picomatch drops dot protection for a `*` in braces).
fn expand(nodes: &[Node], in_group: bool) -> Result<Vec<Vec<(Node, bool)>>, String> {
    let mut acc: Vec<Vec<(Node, bool)>> = vec![Vec::new()];
    for node in nodes {
        match node {
            Node::Group { alts, optional } => {
                let mut options: Vec<Vec<(Node, bool)>> = Vec::new();
                if *optional {
                    options.push(Vec::new());
                }
                for alt in alts {
                    options.extend(expand(alt, true)?);
                }
                options.iter_mut().for_each(|o| o.insert(0, (Node::GroupMark, true)));
                if acc.len().saturating_mul(options.len()) > MAX_ALTERNATIVES {
                    return Err(format!("more than {MAX_ALTERNATIVES} brace/extglob alternatives"));
                }
                acc = acc
                    .iter()
                    .flat_map(|prefix| {
                        options.iter().map(move |o| prefix.iter().cloned().chain(o.iter().cloned()).collect())
                    })
                    .collect();
            }
            other => acc.iter_mut().for_each(|a| a.push((other.clone(), in_group))),
        }
    }
    Ok(acc)
}

fn build_alternative(nodes: &[(Node, bool)]) -> Result<Alternative, String> {
    let mut segments = Vec::new();
    for seg in nodes.split(|(n, _)| *n == Node::Sep) {
        let solid: Vec<&(Node, bool)> = seg.iter().filter(|(n, _)| *n != Node::GroupMark).collect();
        // `**` alone, or opening a group (`{**/a,b}`); `**{,x}` is a plain star.
        let unmarked_tail = seg.iter().skip_while(|(n, _)| *n == Node::GroupMark).all(|(n, _)| *n == Node::Star);
        if solid.len() == 2 && unmarked_tail {
            segments.push(Segment::Globstar);
            continue;
        }
        let mut source = String::from("^(?:");
        let mut prev_star = false;
        for (n, _) in solid.iter().copied() {
            if *n == Node::Star && prev_star {
                continue; // `**` inside a segment is `*`
            }
            prev_star = *n == Node::Star;
            node_regex(n, &mut source)?;
        }
        source.push_str(")$");
        let regex = RegexBuilder::new(&source)
            .size_limit(REGEX_SIZE_LIMIT)
            .build()
            .map_err(|e| format!("cannot compile segment: {e}"))?;
        let lead = seg.first();
        let dot_protected = lead.is_some_and(|(n, g)| !g && matches!(n, Node::Star | Node::QMark));
        let star_led = lead.is_some_and(|(n, g)| !g && *n == Node::Star);
        let ends_with_star = solid.last().is_some_and(|(n, _)| *n == Node::Star);
        segments.push(Segment::Part(Part { regex, dot_protected, star_led, ends_with_star }));
    }
    let trailing_globstar_needs_one = match segments.as_slice() {
        [.., Segment::Part(p), Segment::Globstar] => p.ends_with_star,
        _ => false,
    };
    Ok(Alternative { segments, trailing_globstar_needs_one })
}

fn node_regex(node: &Node, out: &mut String) -> Result<(), String> {
    match node {
        Node::Lit(c) => out.push_str(&regex::escape(c.encode_utf8(&mut [0; 4]))),
        Node::Star => out.push_str("[^/]*"),
        Node::GroupMark => {}
        Node::QMark => out.push_str("[^/]"),
        Node::Class(c) => out.push_str(c),
        Node::Sep => return Err("`/` inside `*(...)` or `+(...)` is not supported".into()),
        Node::Group { alts, optional } => {
            alts_regex(alts, out)?;
            if *optional {
                out.push('?');
            }
        }
        Node::Repeat { alts, at_least_one } => {
            alts_regex(alts, out)?;
            out.push(if *at_least_one { '+' } else { '*' });
        }
    }
    Ok(())
}

fn alts_regex(alts: &[Vec<Node>], out: &mut String) -> Result<(), String> {
    out.push_str("(?:");
    for (i, alt) in alts.iter().enumerate() {
        if i > 0 {
            out.push('|');
        }
        for n in alt {
            node_regex(n, out)?;
        }
    }
    out.push(')');
    Ok(())
}

// ---------------------------------------------------------------------------
// Message selectors
// ---------------------------------------------------------------------------

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

/// Rewrites the parts of a JS regex whose meaning differs in the `regex` crate.
/// Everything else passes through; what the crate cannot do, it rejects.
fn translate_js_regex(pattern: &str) -> String {
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

    /// picomatch 3.0.2 with default options, as `@openctx/client` calls it.
    fn glob(glob: &str, path: &str) -> bool {
        let g = PathGlob::new(glob.strip_prefix('/').unwrap_or(glob));
        g.is_match(path)
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
    fn globstar_positions() {
        assert!(glob("**/a.ts", "a.ts"));
        assert!(glob("**/a.ts", "x/y/a.ts"));
        assert!(glob("src/**", "src"));
        assert!(glob("src/**", "src/a/b/c.ts"));
        assert!(!glob("src/**", "srcx/a"));
        assert!(glob("a/**/b", "a/b"));
        assert!(glob("a/**/b", "a/x/y/b"));
        assert!(!glob("a/**/b", "a/x/y/c"));
        assert!(glob("a/**/**/b", "a/b"));
        assert!(glob("**/**", "a/b"));
        assert!(glob("**/node_modules/**", "a/node_modules/b/c"));
        assert!(glob("**/b/**", "b"));
        assert!(!glob("a/**/*", "a"));
        assert!(glob("a/**/*", "a/b"));
        // picomatch: `x*/**` (a star right before) needs one more segment; `x/**` does not.
        assert!(!glob("*/**", "a"));
        assert!(glob("*/**", "a/b"));
        assert!(!glob("a*/**", "ab"));
        assert!(glob("a*/**", "ab/c"));
        assert!(glob("*.d/**", "x.d"));
        assert!(glob("[ab]/**", "a"));
        assert!(!glob("**/*/**", "a"));
        assert!(glob("*/**/b", "a/b"));
    }

    #[test]
    fn star_and_question_mark_stay_in_one_segment() {
        assert!(glob("*.ts", "x.ts"));
        assert!(!glob("*.ts", "a/x.ts"));
        assert!(!glob("a/*", "a/b/c"));
        assert!(!glob("a*b", "a/b"));
        assert!(!glob("a?b", "a/b"));
        assert!(glob("a?b", "axb"));
        assert!(!glob("?", "ab"));
        assert!(glob("a**b", "axb"));
        assert!(!glob("a**b", "ax/yb"));
        assert!(glob("a/**b", "a/xb"));
        assert!(!glob("a/**b", "a/x/b"));
        assert!(!glob("a/*", "a/"));
        assert!(glob("a/*/b", "a//b"));
        assert!(glob("*.*", "a.b"));
        assert!(!glob("*.*", "ab"));
    }

    #[test]
    fn dotfiles_need_an_explicit_dot() {
        assert!(!glob("*", ".a"));
        assert!(!glob("**", ".git/x"));
        assert!(!glob("**", "a/.git/x"));
        assert!(!glob("**/*.ts", ".github/a.ts"));
        assert!(!glob("**/*.ts", "a/.b/c.ts"));
        assert!(!glob("**/*.lua", "home/u/.config/nvim/init.lua"));
        assert!(!glob("a/*", "a/.env"));
        assert!(!glob("*.ts", ".ts"));
        assert!(!glob("?a", ".a"));
        assert!(!glob("*/*.ts", "a/.b.ts"));
        assert!(!glob("a/**", "a/.b"));
        assert!(glob(".github/**", ".github/w.yml"));
        assert!(glob("**/.env", "a/.env"));
        assert!(glob("**/.git/**", "a/.git/b"));
        assert!(!glob("**/.git/**", "a/.git/.b"));
        assert!(glob(".*", ".a"));
        assert!(glob("*/.*.ts", "a/.b.ts"));
        assert!(glob("home/u/.config/**/*.lua", "home/u/.config/nvim/init.lua"));
        assert!(glob("a/**/.b", "a/x/.b"));
        assert!(!glob("a/**/.b", "a/.x/.b"));
        // Classes, extglobs and braces carry no dot protection in picomatch.
        assert!(glob("[.]a", ".a"));
        assert!(glob("[^b]*", ".a"));
        assert!(!glob("[a-z]*", ".a"));
        assert!(glob("{.a,b}", ".a"));
        assert!(glob("{*,.x}", ".y"));
        assert!(glob("x/{*,.y}", "x/.z"));
        assert!(glob("{?a,b}", ".a"));
        assert!(glob("?(.a)b", ".ab"));
        assert!(glob("x/?(a)*", "x/.b"));
        // A star before the brace keeps it.
        assert!(!glob("*{a,b}", ".a"));
        assert!(glob("*{a,b}", "xa"));
    }

    #[test]
    fn braces() {
        assert!(glob("{a,b}/c", "b/c"));
        assert!(!glob("{a,b}/c", "d/c"));
        assert!(glob("src/**/*.{js,ts}", "src/a/b.ts"));
        assert!(glob("src/**/*.{js,ts}", "src/a.js"));
        assert!(!glob("src/**/*.{js,ts}", "src/a.rs"));
        assert!(glob("{a/b,c}/d", "a/b/d"));
        assert!(glob("a/{b,c/d}/e", "a/c/d/e"));
        assert!(glob("{a,{b,c}}", "c"));
        assert!(glob("{a,b/{c,d}}", "b/d"));
        assert!(glob("{a,b}{c,d}", "bd"));
        assert!(glob("{,a}b", "b"));
        assert!(glob("{,a}b", "ab"));
        assert!(glob("a{,.b}", "a.b"));
        assert!(glob("{src,lib}/**", "lib/x"));
        assert!(glob("{**/a,b}", "x/y/a"));
        // Without a comma, braces are literal; ranges are single characters.
        assert!(glob("{a}", "{a}"));
        assert!(!glob("{a}", "a"));
        assert!(glob("{a..e}", "c"));
        assert!(!glob("{a..e}", "f"));
        assert!(glob("{1..3}", "2"));
        // Escaped and stray braces are literal.
        assert!(glob("\\{a,b\\}", "{a,b}"));
        assert!(!glob("\\{a,b\\}", "a"));
        assert!(glob("a}", "a}"));
        assert!(glob("{a,b}}", "a}"));
    }

    #[test]
    fn extglobs() {
        assert!(glob("?(x)y", "y"));
        assert!(glob("?(x)y", "xy"));
        assert!(!glob("?(x)y", "xxy"));
        assert!(glob("*(x)y", "xxy"));
        assert!(glob("*(x)y", "y"));
        assert!(!glob("+(x)y", "y"));
        assert!(glob("+(x)y", "xxy"));
        assert!(glob("+(a|b).ts", "abab.ts"));
        assert!(glob("@(x|z)y", "zy"));
        assert!(glob("(a|b).ts", "a.ts"));
        assert!(!glob("(a|b).ts", "c.ts"));
        assert!(glob("@(a|b/c)", "b/c"));
        assert!(glob("a/(b|c/d)", "a/c/d"));
        assert!(glob("a(b).ts", "ab.ts"));
        // Outside a group `|` and `)` are literal.
        assert!(glob("a|b", "a|b"));
        assert!(!glob("a|b", "a"));
        assert!(glob("a)b", "a)b"));
    }

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
    fn escapes_negation_and_prefixes() {
        assert!(glob("\\*", "*"));
        assert!(!glob("\\*", "a"));
        assert!(glob("a\\*b", "a*b"));
        assert!(glob("x/\\.a", "x/.a"));
        assert!(glob("\\.a/*", ".a/b"));
        assert!(glob("a/b\\/c", "a/b/c"));
        assert!(!glob("!*.ts", "a.ts"));
        assert!(glob("!*.ts", "a.js"));
        assert!(!glob("!**/*.md", "d/a.md"));
        assert!(glob("!**/*.md", "d/a.ts"));
        assert!(glob("!!a", "a"));
        assert!(!glob("!!a", "b"));
        assert!(glob("!(a)", "!(a)")); // unsupported, but equal to its text
        assert!(!glob("!(a)", "b"));
        assert!(glob("./a/*", "a/b"));
        assert!(glob("a.b", "a.b"));
        assert!(!glob("a.b", "axb"));
        assert!(!glob("A.ts", "a.ts"));
        for lit in ["a+b.ts", "$foo.ts", "a^b", "a(b", ":", "a%20b"] {
            assert!(glob(lit, lit), "{lit}");
        }
    }

    #[test]
    fn equal_text_always_matches_even_when_the_glob_is_broken() {
        assert!(glob("{a,b", "{a,b"));
        assert!(!glob("{a,b", "a"));
        assert!(glob("a\\", "a\\"));
        assert!(glob("a[1].ts", "a[1].ts"));
        assert!(glob("a[1].ts", "a1.ts"));
        assert!(glob("[c-a]", "[c-a]"));
        assert!(!glob("[c-a]", "b"));
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
