//! Codex's `apply_patch` format as plain data: what the model sends to its
//! `apply_patch` tool, and what a rewritten patch (the user's tweak) must
//! look like so Codex applies it.
//!
//! ```text
//! *** Begin Patch
//! *** Add File: <path>          then lines "+<text>"
//! *** Delete File: <path>
//! *** Update File: <path>
//! *** Move to: <path>           (optional)
//! @@ [<a line to find first>]   then lines " <context>", "-<old>", "+<new>"
//! *** End of File               (optional: the chunk ends the file)
//! *** End Patch
//! ```
//!
//! Read as Codex 0.169 reads it (checked against the binary): the patch is
//! trimmed and split into lines (`\r\n` or `\n`); header lines are compared
//! trimmed, diff lines as they are; an empty line inside a chunk is an
//! empty context line; the first chunk of a file may leave out its `@@`.
//! Written by this parser's own rules; no code of Codex's.

use std::fmt;

const BEGIN: &str = "*** Begin Patch";
const END: &str = "*** End Patch";
const ADD: &str = "*** Add File: ";
const DELETE: &str = "*** Delete File: ";
const UPDATE: &str = "*** Update File: ";
const MOVE: &str = "*** Move to: ";
const END_OF_FILE: &str = "*** End of File";

/// A whole patch: its changes, one per file, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patch {
    pub changes: Vec<Change>,
}

/// What a patch does to one file. Paths are as written (relative to
/// Codex's working directory, or absolute).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A new file (or one replaced whole) of these lines, each written with
    /// a final `\n`.
    Add {
        path: String,
        lines: Vec<String>,
    },
    Delete {
        path: String,
    },
    /// Chunks applied to the file's text, the file then written at
    /// `move_to` when given (and the old one removed).
    Update {
        path: String,
        move_to: Option<String>,
        chunks: Vec<Chunk>,
    },
}

impl Change {
    pub fn path(&self) -> &str {
        match self {
            Change::Add { path, .. } | Change::Delete { path } | Change::Update { path, .. } => path,
        }
    }

    /// The text an `Add` writes.
    pub fn added_text(lines: &[String]) -> String {
        let mut text = String::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
        for line in lines {
            text.push_str(line);
            text.push('\n');
        }
        text
    }
}

/// One line of a chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// ` text`: in the file before and after.
    Context(String),
    /// `-text`: taken out.
    Remove(String),
    /// `+text`: put in.
    Insert(String),
}

/// One `@@` section of an update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// `@@ <line>`: this line is found first, the chunk's lines after it.
    pub anchor: Option<String>,
    pub lines: Vec<Line>,
    /// `*** End of File`: the chunk's old lines end the file.
    pub end_of_file: bool,
}

impl Chunk {
    /// The lines the chunk expects in the file (context and removed).
    pub fn old(&self) -> Vec<&str> {
        self.lines
            .iter()
            .filter_map(|l| match l {
                Line::Context(t) | Line::Remove(t) => Some(t.as_str()),
                Line::Insert(_) => None,
            })
            .collect()
    }

    /// The lines that replace them (context and inserted).
    pub fn new_lines(&self) -> Vec<&str> {
        self.lines
            .iter()
            .filter_map(|l| match l {
                Line::Context(t) | Line::Insert(t) => Some(t.as_str()),
                Line::Remove(_) => None,
            })
            .collect()
    }
}

/// Why a patch cannot be read: the 1-based line and what is wrong there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

fn error(line: usize, message: impl Into<String>) -> ParseError {
    ParseError { line, message: message.into() }
}

/// Reads a patch. A patch wrapped in a shell here-document (`<<'EOF'` ...
/// `EOF`), as the shell form of apply_patch sends it, is read too.
pub fn parse(text: &str) -> Result<Patch, ParseError> {
    let mut lines: Vec<&str> = text.trim().lines().collect();
    let mut first_line = 1;
    if lines.len() >= 2 && lines[0].trim().starts_with("<<") && lines[lines.len() - 1].trim() == "EOF" {
        lines = lines[1..lines.len() - 1].to_vec();
        first_line = 2;
    }
    match lines.first() {
        Some(l) if l.trim() == BEGIN => {}
        _ => return Err(error(first_line, format!("the patch must start with '{BEGIN}'"))),
    }
    match lines.last() {
        Some(l) if lines.len() >= 2 && l.trim() == END => {}
        _ => return Err(error(first_line + lines.len().saturating_sub(1), format!("the patch must end with '{END}'"))),
    }
    let body = &lines[1..lines.len() - 1];
    let mut changes = Vec::new();
    let mut i = 0;
    // 1-based line number of body[i] in the text.
    let number = |i: usize| first_line + 1 + i;
    while i < body.len() {
        let header = body[i].trim();
        let at = number(i);
        i += 1;
        if header.is_empty() {
            continue;
        }
        if let Some(path) = header.strip_prefix(ADD) {
            let path = file_path(path, at)?;
            let mut added = Vec::new();
            while i < body.len() {
                let Some(text) = body[i].strip_prefix('+') else { break };
                added.push(text.to_owned());
                i += 1;
            }
            changes.push(Change::Add { path, lines: added });
        } else if let Some(path) = header.strip_prefix(DELETE) {
            changes.push(Change::Delete { path: file_path(path, at)? });
        } else if let Some(path) = header.strip_prefix(UPDATE) {
            let path = file_path(path, at)?;
            let mut move_to = None;
            if let Some(to) = body.get(i).and_then(|l| l.trim().strip_prefix(MOVE)) {
                move_to = Some(file_path(to, number(i))?);
                i += 1;
            }
            let mut chunks = Vec::new();
            while i < body.len() && !starts_change(body[i]) {
                let (chunk, next) = parse_chunk(body, i, chunks.is_empty(), &number)?;
                chunks.push(chunk);
                i = next;
            }
            if chunks.is_empty() {
                return Err(error(at, format!("the update of {path} changes nothing")));
            }
            changes.push(Change::Update { path, move_to, chunks });
        } else {
            return Err(error(
                at,
                format!("expected '{}', '{}' or '{}', got '{}'", ADD.trim(), DELETE.trim(), UPDATE.trim(), cut(header)),
            ));
        }
    }
    Ok(Patch { changes })
}

fn is_file_header(line: &str) -> bool {
    let line = line.trim();
    line.starts_with(ADD) || line.starts_with(DELETE) || line.starts_with(UPDATE)
}

/// Whether a chunk's line is a diff line (` `, `-`, `+`): never a header,
/// whatever text follows.
fn is_diff_line(line: &str) -> bool {
    line.starts_with([' ', '-', '+'])
}

/// A line inside an update that starts the next file's change.
fn starts_change(line: &str) -> bool {
    !is_diff_line(line) && is_file_header(line)
}

fn file_path(rest: &str, line: usize) -> Result<String, ParseError> {
    let path = rest.trim();
    if path.is_empty() {
        return Err(error(line, "a file header without a path"));
    }
    Ok(path.to_owned())
}

/// One chunk from `body[start..]`: the chunk and the index after it.
fn parse_chunk(
    body: &[&str],
    start: usize,
    first: bool,
    number: &impl Fn(usize) -> usize,
) -> Result<(Chunk, usize), ParseError> {
    let mut i = start;
    // Untrimmed: " @@ x" is a context line whose text is "@@ x".
    let head = body[i].trim_end();
    let anchor = if head == "@@" {
        i += 1;
        None
    } else if let Some(rest) = head.strip_prefix("@@ ") {
        i += 1;
        Some(rest.to_owned())
    } else if first {
        // The first chunk may go without its "@@".
        None
    } else {
        return Err(error(number(i), format!("expected '@@' to start a chunk, got '{}'", cut(body[i]))));
    };
    let mut chunk = Chunk { anchor, lines: Vec::new(), end_of_file: false };
    while i < body.len() {
        let line = body[i];
        if !is_diff_line(line) && line.trim() == END_OF_FILE {
            if chunk.lines.is_empty() {
                break;
            }
            chunk.end_of_file = true;
            i += 1;
            break;
        }
        if line.starts_with("@@") || starts_change(line) {
            break;
        }
        match line.chars().next() {
            None => chunk.lines.push(Line::Context(String::new())),
            Some(' ') => chunk.lines.push(Line::Context(line[1..].to_owned())),
            Some('-') => chunk.lines.push(Line::Remove(line[1..].to_owned())),
            Some('+') => chunk.lines.push(Line::Insert(line[1..].to_owned())),
            Some(_) => {
                return Err(error(
                    number(i),
                    format!("a chunk line must start with ' ', '-' or '+', got '{}'", cut(line)),
                ))
            }
        }
        i += 1;
    }
    if chunk.lines.is_empty() {
        return Err(error(number(start), "a chunk without lines"));
    }
    Ok((chunk, i))
}

/// A line of the patch as quoted in an error message: 60 bytes at most.
fn cut(line: &str) -> String {
    let short = crate::core::text::cut(line, 60);
    if short.len() < line.len() {
        format!("{short}...")
    } else {
        short.to_owned()
    }
}

/// The patch as Codex reads it (`parse(&render(p)) == p` for every patch
/// whose lines hold no line break).
pub fn render(patch: &Patch) -> String {
    let mut out = String::new();
    let mut line = |s: &str| {
        out.push_str(s);
        out.push('\n');
    };
    line(BEGIN);
    for change in &patch.changes {
        match change {
            Change::Add { path, lines } => {
                line(&format!("{ADD}{path}"));
                for l in lines {
                    line(&format!("+{l}"));
                }
            }
            Change::Delete { path } => line(&format!("{DELETE}{path}")),
            Change::Update { path, move_to, chunks } => {
                line(&format!("{UPDATE}{path}"));
                if let Some(to) = move_to {
                    line(&format!("{MOVE}{to}"));
                }
                for chunk in chunks {
                    match &chunk.anchor {
                        Some(a) => line(&format!("@@ {a}")),
                        None => line("@@"),
                    }
                    for l in &chunk.lines {
                        match l {
                            Line::Context(t) => line(&format!(" {t}")),
                            Line::Remove(t) => line(&format!("-{t}")),
                            Line::Insert(t) => line(&format!("+{t}")),
                        }
                    }
                    if chunk.end_of_file {
                        line(END_OF_FILE);
                    }
                }
            }
        }
    }
    line(END);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(s: &str) -> Line {
        Line::Context(s.into())
    }
    fn rm(s: &str) -> Line {
        Line::Remove(s.into())
    }
    fn ins(s: &str) -> Line {
        Line::Insert(s.into())
    }

    #[test]
    fn reads_every_kind_of_change() {
        let text = "*** Begin Patch\n\
                    *** Add File: new/a.txt\n+one\n+\n+three\n\
                    *** Delete File: old.txt\n\
                    *** Update File: src/b.rs\n*** Move to: src/c.rs\n@@ fn main() {\n     let x = 1;\n-    old();\n+    new();\n\n@@\n-last\n+LAST\n*** End of File\n\
                    *** Update File: d.txt\n x\n-y\n+z\n\
                    *** End Patch\n";
        let patch = parse(text).unwrap();
        assert_eq!(
            patch.changes,
            vec![
                Change::Add { path: "new/a.txt".into(), lines: vec!["one".into(), "".into(), "three".into()] },
                Change::Delete { path: "old.txt".into() },
                Change::Update {
                    path: "src/b.rs".into(),
                    move_to: Some("src/c.rs".into()),
                    chunks: vec![
                        Chunk {
                            anchor: Some("fn main() {".into()),
                            lines: vec![ctx("    let x = 1;"), rm("    old();"), ins("    new();"), ctx("")],
                            end_of_file: false,
                        },
                        Chunk { anchor: None, lines: vec![rm("last"), ins("LAST")], end_of_file: true },
                    ],
                },
                Change::Update {
                    path: "d.txt".into(),
                    move_to: None,
                    chunks: vec![Chunk { anchor: None, lines: vec![ctx("x"), rm("y"), ins("z")], end_of_file: false }],
                },
            ]
        );
        assert_eq!(Change::added_text(&["one".into(), "".into()]), "one\n\n");
        assert_eq!(parse(&render(&patch)).unwrap(), patch);
    }

    #[test]
    fn crlf_a_here_document_and_spaces_around_headers_are_read() {
        let text = "  *** Begin Patch\r\n *** Update File: a.txt \r\n@@\r\n-a\r\n+b\r\n*** End Patch  \r\n";
        let patch = parse(text).unwrap();
        assert_eq!(patch.changes[0].path(), "a.txt");
        let heredoc = "<<'EOF'\n*** Begin Patch\n*** Delete File: x\n*** End Patch\nEOF\n";
        assert_eq!(parse(heredoc).unwrap().changes, vec![Change::Delete { path: "x".into() }]);
        assert_eq!(parse("*** Begin Patch\n*** End Patch").unwrap().changes, vec![]);
        assert_eq!(parse("*** Begin Patch\n\n*** Delete File: x\n\n*** End Patch").unwrap().changes.len(), 1);
    }

    #[test]
    fn errors_name_the_line_and_what_is_wrong() {
        let bad = |text: &str| parse(text).unwrap_err().to_string();
        assert_eq!(bad(""), "line 1: the patch must start with '*** Begin Patch'");
        assert_eq!(bad("*** Begin Patch\n*** Delete File: a"), "line 2: the patch must end with '*** End Patch'");
        assert_eq!(bad("*** Begin Patch"), "line 1: the patch must end with '*** End Patch'");
        assert!(
            bad("*** Begin Patch\n*** Frobnicate: a\n*** End Patch").starts_with("line 2: expected '*** Add File:'")
        );
        assert_eq!(
            bad("*** Begin Patch\n*** Update File: a\n*** End Patch"),
            "line 2: the update of a changes nothing"
        );
        assert_eq!(
            bad("*** Begin Patch\n*** Update File: a\n@@\n x\n?y\n*** End Patch"),
            "line 5: a chunk line must start with ' ', '-' or '+', got '?y'"
        );
        assert_eq!(
            bad("*** Begin Patch\n*** Update File: a\n@@\n@@\n-x\n*** End Patch"),
            "line 3: a chunk without lines"
        );
        assert!(bad("*** Begin Patch\n*** Add File:   \n*** End Patch").starts_with("line 2: expected '*** Add File:'"));
        let long = format!("*** Begin Patch\n*** {}\n*** End Patch", "x".repeat(1000));
        assert!(bad(&long).len() < 200, "a long line is cut in the message");
    }

    #[test]
    fn a_chunk_after_the_first_needs_its_at_at() {
        let text = "*** Begin Patch\n*** Update File: a\n-x\n+y\n@@\n-p\n+q\n*** End Patch";
        let Change::Update { chunks, .. } = &parse(text).unwrap().changes[0] else { panic!() };
        assert_eq!(chunks.len(), 2);
        assert_eq!(chunks[0].old(), ["x"]);
        assert_eq!(chunks[1].new_lines(), ["q"]);
    }

    mod roundtrip {
        use super::super::*;
        use proptest::prelude::*;

        /// Texts that look like the format's own markers.
        fn text() -> impl Strategy<Value = String> {
            prop::sample::select(vec![
                "",
                "x",
                " x ",
                "*** End Patch",
                "*** End of File",
                "@@",
                "@@ y",
                "+p",
                "-m",
                " c",
                "*** Add File: z",
                "é\u{7f}",
                "a\rb",
            ])
            .prop_map(str::to_owned)
        }

        fn line() -> impl Strategy<Value = Line> {
            prop_oneof![text().prop_map(Line::Context), text().prop_map(Line::Remove), text().prop_map(Line::Insert)]
        }

        fn chunk() -> impl Strategy<Value = Chunk> {
            (
                prop::option::of(prop::sample::select(vec!["fn main() {", "x", "@@"])),
                prop::collection::vec(line(), 1..6),
                any::<bool>(),
            )
                .prop_map(|(anchor, lines, end_of_file)| Chunk {
                    anchor: anchor.map(str::to_owned),
                    lines,
                    end_of_file,
                })
        }

        fn change() -> impl Strategy<Value = Change> {
            let path = || prop::sample::select(vec!["a.txt", "dir/b c.rs", "/abs/é"]).prop_map(str::to_owned);
            prop_oneof![
                (path(), prop::collection::vec(text(), 0..5)).prop_map(|(path, lines)| Change::Add { path, lines }),
                path().prop_map(|path| Change::Delete { path }),
                (path(), prop::option::of(path()), prop::collection::vec(chunk(), 1..4))
                    .prop_map(|(path, move_to, chunks)| Change::Update { path, move_to, chunks }),
            ]
        }

        proptest! {
            #[test]
            fn a_rendered_patch_reads_back_as_itself(changes in prop::collection::vec(change(), 0..5)) {
                let patch = Patch { changes };
                prop_assert_eq!(parse(&render(&patch)).unwrap(), patch);
            }
        }
    }
}
