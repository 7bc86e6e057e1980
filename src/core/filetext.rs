//! A file's bytes as Neovim reads them, and its text as Neovim's `:w` would
//! write it (pure: no Neovim, no I/O).
//!
//! `readFile` of a file no buffer has loaded is answered on the tokio side,
//! and the file watcher loads an agent's rewrite into a buffer. Both must see
//! the file exactly as `:edit` would: the BOM taken off (and remembered as
//! `'bomb'`), the encoding chosen from `'fileencodings'`, the line format from
//! `'fileformats'` (a file with both CRLF and LF endings is "unix" with CRs
//! kept in its lines), `'endofline'` from the last byte. This module follows
//! Neovim's `readfile()` for the encodings it can decode without iconv
//! (`ucs-bom`, UTF-8, Latin-1); other entries of `'fileencodings'` make a
//! file that is not UTF-8 undecodable here (the caller says so).
//!
//! The text an agent sees is the buffer's text as `:w` writes it, decoded to
//! UTF-8 and without the BOM: the lines joined with the format's
//! end-of-line, plus a final one when the file had it (`'endofline'`). The
//! same rule serves a loaded buffer (`written_text`) and a file on disk, so
//! `readFile` answers the same for both; for an unmodified buffer it is the
//! bytes on disk, decoded.

use std::sync::RwLock;

use super::sync::RwLockExt;

/// `'fileformat'`: how lines end on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineEnd {
    Unix,
    Dos,
    Mac,
}

impl LineEnd {
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "unix" => Some(Self::Unix),
            "dos" => Some(Self::Dos),
            "mac" => Some(Self::Mac),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Unix => "unix",
            Self::Dos => "dos",
            Self::Mac => "mac",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unix => "\n",
            Self::Dos => "\r\n",
            Self::Mac => "\r",
        }
    }
}

/// The global options that decide how Neovim reads a file, as the plugin
/// last saw them (`'fileformats'`, `'fileencodings'`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadOptions {
    pub fileformats: Vec<LineEnd>,
    pub fileencodings: Vec<String>,
}

impl Default for ReadOptions {
    /// Neovim's defaults.
    fn default() -> Self {
        Self {
            fileformats: vec![LineEnd::Unix, LineEnd::Dos],
            fileencodings: ["ucs-bom", "utf-8", "default", "latin1"].map(String::from).to_vec(),
        }
    }
}

impl ReadOptions {
    /// From the options' string values (`"unix,dos"`, `"ucs-bom,utf-8,..."`).
    pub fn from_option_values(fileformats: &str, fileencodings: &str) -> Self {
        let fileformats: Vec<LineEnd> = fileformats.split(',').filter_map(LineEnd::parse).collect();
        Self {
            fileformats: if fileformats.is_empty() { vec![LineEnd::Unix] } else { fileformats },
            fileencodings: fileencodings.split(',').filter(|s| !s.is_empty()).map(|s| s.to_ascii_lowercase()).collect(),
        }
    }
}

static READ_OPTIONS: RwLock<Option<ReadOptions>> = RwLock::new(None);

/// Remembers Neovim's read options (set at start and on `OptionSet`).
pub fn set_read_options(options: ReadOptions) {
    *READ_OPTIONS.write_locked() = Some(options);
}

/// The read options last set, or Neovim's defaults.
pub fn read_options() -> ReadOptions {
    READ_OPTIONS.read_locked().clone().unwrap_or_default()
}

/// A file as a buffer holds it after `:edit`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskText {
    /// The lines joined with `\n`, without a final one (empty for an empty file).
    pub joined: String,
    /// The file has no bytes (Neovim's "--No lines in buffer--").
    pub empty: bool,
    /// `'endofline'`: the last line ended with an end-of-line.
    pub eol: bool,
    pub line_end: LineEnd,
    /// `'bomb'`
    pub bomb: bool,
    /// `'fileencoding'` as Neovim names it.
    pub encoding: &'static str,
}

/// The format a buffer takes from its file when it is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileFormat {
    pub line_end: LineEnd,
    /// `'endofline'`
    pub eol: bool,
    /// `'bomb'`
    pub bomb: bool,
    /// `'fileencoding'` as Neovim names it.
    pub encoding: &'static str,
}

impl DiskText {
    pub fn format(&self) -> FileFormat {
        FileFormat { line_end: self.line_end, eol: self.eol, bomb: self.bomb, encoding: self.encoding }
    }

    pub fn lines(&self) -> Vec<&str> {
        if self.empty {
            Vec::new()
        } else {
            self.joined.split('\n').collect()
        }
    }

    /// What `:w` would write from this buffer (decoded, without the BOM).
    pub fn written_text(&self, fixeol: bool) -> String {
        written_text(self.joined.clone().into_bytes(), self.empty, self.line_end, self.eol || fixeol)
    }
}

/// The text `:w` writes from a buffer (without the BOM): `joined` (lines
/// joined with `\n`) with the format's end-of-line, and a final one when
/// `final_eol` ('endofline', or 'fixendofline' without 'binary'). An empty
/// buffer writes nothing.
pub fn written_text(joined: Vec<u8>, empty: bool, line_end: LineEnd, final_eol: bool) -> String {
    if empty {
        return String::new();
    }
    let mut bytes = match line_end {
        LineEnd::Unix => joined,
        LineEnd::Mac => joined.into_iter().map(|b| if b == b'\n' { b'\r' } else { b }).collect(),
        LineEnd::Dos => {
            let newlines = joined.iter().filter(|&&b| b == b'\n').count();
            let mut out = Vec::with_capacity(joined.len() + newlines + 2);
            for (i, line) in joined.split(|&b| b == b'\n').enumerate() {
                if i > 0 {
                    out.extend_from_slice(b"\r\n");
                }
                out.extend_from_slice(line);
            }
            out
        }
    };
    if final_eol {
        bytes.extend_from_slice(line_end.as_str().as_bytes());
    }
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// `'fileencoding'` by the name `encode` knows it, or "other".
pub fn known_encoding(name: &str) -> &'static str {
    match name {
        "" | "utf-8" | "utf8" => "utf-8",
        "latin1" | "latin-1" | "iso-8859-1" | "iso8859-1" => "latin1",
        "utf-16" | "ucs-2" => "utf-16",
        "utf-16le" | "ucs-2le" => "utf-16le",
        "ucs-4" => "ucs-4",
        "ucs-4le" => "ucs-4le",
        _ => "other",
    }
}

/// The bytes `:w` writes for `text` (as `written_text` gives it) with
/// `'fileencoding'` `encoding` and `'bomb'`, for the encodings Neovim
/// converts to without iconv: UTF-8 (also `""`), Latin-1, UTF-16 and UCS-4.
/// `None` for any other encoding, or a character Latin-1 has no byte for.
pub fn encode(text: String, encoding: &str, bomb: bool) -> Option<Vec<u8>> {
    let unit16 = |big: bool| -> Vec<u8> {
        let mut out = if !bomb {
            Vec::new()
        } else if big {
            vec![0xFE, 0xFF]
        } else {
            vec![0xFF, 0xFE]
        };
        for u in text.encode_utf16() {
            out.extend_from_slice(&if big { u.to_be_bytes() } else { u.to_le_bytes() });
        }
        out
    };
    let unit32 = |big: bool| -> Vec<u8> {
        let mut out = if !bomb {
            Vec::new()
        } else if big {
            vec![0, 0, 0xFE, 0xFF]
        } else {
            vec![0xFF, 0xFE, 0, 0]
        };
        for c in text.chars() {
            out.extend_from_slice(&if big { (c as u32).to_be_bytes() } else { (c as u32).to_le_bytes() });
        }
        out
    };
    match known_encoding(encoding) {
        "utf-8" => Some(if bomb {
            let mut out = Vec::with_capacity(text.len() + 3);
            out.extend_from_slice(b"\xEF\xBB\xBF");
            out.extend_from_slice(text.as_bytes());
            out
        } else {
            text.into_bytes()
        }),
        "latin1" => text.chars().map(|c| u8::try_from(u32::from(c)).ok()).collect(),
        "utf-16" => Some(unit16(true)),
        "utf-16le" => Some(unit16(false)),
        "ucs-4" => Some(unit32(true)),
        "ucs-4le" => Some(unit32(false)),
        _ => None,
    }
}

/// Splits an agent's text into buffer lines for a buffer whose
/// `'fileformat'` is `line_end`, as Neovim would read those bytes: "dos"
/// drops one CR before each LF, "unix" keeps CRs in the lines, "mac" splits
/// on CR. Returns the lines and whether the text ends with an end-of-line.
pub fn split_lines(text: &str, line_end: LineEnd) -> (Vec<&str>, bool) {
    let (lines, final_eol) = lines_of(text, line_end);
    (lines.collect(), final_eol)
}

/// [`split_lines`] one line at a time (nothing collected).
pub fn lines_of(text: &str, line_end: LineEnd) -> (LinesOf<'_>, bool) {
    let sep = if line_end == LineEnd::Mac { '\r' } else { '\n' };
    let final_eol = text.ends_with(sep);
    let body = if final_eol { &text[..text.len() - 1] } else { text };
    let parts = (!text.is_empty()).then(|| body.split(sep).peekable());
    (LinesOf { parts, strip_cr: line_end == LineEnd::Dos, final_eol }, final_eol)
}

/// The lines of a text, see [`lines_of`].
pub struct LinesOf<'a> {
    parts: Option<std::iter::Peekable<std::str::Split<'a, char>>>,
    strip_cr: bool,
    final_eol: bool,
}

impl<'a> Iterator for LinesOf<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let parts = self.parts.as_mut()?;
        let line = parts.next()?;
        // The last line ends with a CR only if an LF followed it.
        let followed_by_lf = parts.peek().is_some() || self.final_eol;
        Some(if self.strip_cr && followed_by_lf { line.strip_suffix('\r').unwrap_or(line) } else { line })
    }
}

/// Why a file could not be read as text here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Undecodable(pub String);

/// Reads `bytes` as Neovim's `:edit` would with `options`.
pub fn decode(bytes: &[u8], options: &ReadOptions) -> Result<DiskText, Undecodable> {
    let default_end = options.fileformats.first().copied().unwrap_or(LineEnd::Unix);
    if bytes.is_empty() {
        return Ok(DiskText {
            joined: String::new(),
            empty: true,
            eol: true,
            line_end: default_end,
            bomb: false,
            encoding: "utf-8",
        });
    }
    let (text, bomb, encoding) = decode_encoding(bytes, &options.fileencodings)?;
    let line_end = detect_line_end(&text, &options.fileformats);
    let (lines, eol) = match line_end {
        LineEnd::Mac => {
            // In mac format an LF byte is read as a CR inside the line.
            let converted: String = text.chars().map(|c| if c == '\n' { '\r' } else { c }).collect();
            let (lines, eol) = split_lines(&converted, LineEnd::Mac);
            (lines.join("\n"), eol)
        }
        other => {
            let (lines, eol) = split_lines(&text, other);
            (lines.join("\n"), eol)
        }
    };
    Ok(DiskText { joined: lines, empty: false, eol, line_end, bomb, encoding })
}

/// The encoding `'fileencodings'` picks, as Neovim tries its entries in order.
fn decode_encoding(bytes: &[u8], encodings: &[String]) -> Result<(String, bool, &'static str), Undecodable> {
    for name in encodings {
        match name.as_str() {
            "ucs-bom" => {
                if let Some(found) = decode_bom(bytes) {
                    return Ok(found);
                }
            }
            "utf-8" | "utf8" | "default" => {
                if let Ok(text) = std::str::from_utf8(bytes) {
                    return Ok((text.to_owned(), false, "utf-8"));
                }
            }
            "latin1" | "latin-1" | "iso-8859-1" | "iso8859-1" | "iso-8859" | "iso8859" => {
                return Ok((bytes.iter().map(|&b| b as char).collect(), false, "latin1"));
            }
            _ => {}
        }
    }
    Err(Undecodable(
        "it is not UTF-8 and 'fileencodings' names no encoding the server can read without Neovim \
         (open it in Neovim first)"
            .into(),
    ))
}

fn decode_bom(bytes: &[u8]) -> Option<(String, bool, &'static str)> {
    if let Some(rest) = bytes.strip_prefix(b"\xEF\xBB\xBF") {
        return std::str::from_utf8(rest).ok().map(|t| (t.to_owned(), true, "utf-8"));
    }
    let units = |rest: &[u8], big: bool, width: usize| -> Option<Vec<u32>> {
        if !rest.len().is_multiple_of(width) {
            return None;
        }
        Some(
            rest.chunks(width)
                .map(|c| match (width, big) {
                    (2, true) => u16::from_be_bytes([c[0], c[1]]) as u32,
                    (2, false) => u16::from_le_bytes([c[0], c[1]]) as u32,
                    (_, true) => u32::from_be_bytes([c[0], c[1], c[2], c[3]]),
                    (_, false) => u32::from_le_bytes([c[0], c[1], c[2], c[3]]),
                })
                .collect(),
        )
    };
    let utf16 = |u: Vec<u32>| char::decode_utf16(u.into_iter().map(|x| x as u16)).collect::<Result<String, _>>().ok();
    let utf32 = |u: Vec<u32>| u.into_iter().map(char::from_u32).collect::<Option<String>>();
    if let Some(rest) = bytes.strip_prefix(b"\xFF\xFE\x00\x00") {
        return units(rest, false, 4).and_then(utf32).map(|t| (t, true, "ucs-4le"));
    }
    if let Some(rest) = bytes.strip_prefix(b"\x00\x00\xFE\xFF") {
        return units(rest, true, 4).and_then(utf32).map(|t| (t, true, "ucs-4"));
    }
    if let Some(rest) = bytes.strip_prefix(b"\xFF\xFE") {
        return units(rest, false, 2).and_then(utf16).map(|t| (t, true, "utf-16le"));
    }
    if let Some(rest) = bytes.strip_prefix(b"\xFE\xFF") {
        return units(rest, true, 2).and_then(utf16).map(|t| (t, true, "utf-16"));
    }
    None
}

/// `'fileformat'` as Neovim's `readfile()` detects it from `'fileformats'`.
fn detect_line_end(text: &str, formats: &[LineEnd]) -> LineEnd {
    let default = formats.first().copied().unwrap_or(LineEnd::Unix);
    if formats.len() <= 1 {
        return default;
    }
    let (try_unix, try_dos, try_mac) =
        (formats.contains(&LineEnd::Unix), formats.contains(&LineEnd::Dos), formats.contains(&LineEnd::Mac));
    let bytes = text.as_bytes();
    let mut found = None;
    if try_unix || try_dos {
        if let Some(nl) = bytes.iter().position(|&b| b == b'\n') {
            let after_cr = nl > 0 && bytes[nl - 1] == b'\r';
            found = Some(if !try_unix || (try_dos && after_cr) { LineEnd::Dos } else { LineEnd::Unix });
            // Don't give in to unix if mac is more likely: CRs before the
            // first LF, and more CRs than LFs in all.
            if found == Some(LineEnd::Unix) && try_mac && bytes[..nl].contains(&b'\r') {
                let lfs = bytes.iter().filter(|&&b| b == b'\n').count();
                let crs = bytes.iter().filter(|&&b| b == b'\r').count();
                if crs > lfs {
                    found = Some(LineEnd::Mac);
                }
            }
        } else if !(try_mac && bytes.contains(&b'\r')) {
            return default;
        }
    }
    let found = match found {
        Some(f) => f,
        None if try_mac => LineEnd::Mac,
        None => default,
    };
    // Reading as dos, an LF without a CR before it means unix after all
    // (when 'fileformats' allows it): Neovim starts over as unix.
    if found == LineEnd::Dos && try_unix {
        let lone_lf = bytes.iter().enumerate().any(|(i, &b)| b == b'\n' && (i == 0 || bytes[i - 1] != b'\r'));
        if lone_lf {
            return LineEnd::Unix;
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(bytes: &[u8]) -> DiskText {
        decode(bytes, &ReadOptions::default()).unwrap()
    }

    #[test]
    fn plain_utf8_reads_back_byte_for_byte() {
        for text in ["a\nb\n", "a\nb", "a\r\nb\r\n", "a\r\nb\nc\r\n", "x\0y\n", "\n", "a\r\nb\r", "\r\n"] {
            let d = read(text.as_bytes());
            assert_eq!(d.written_text(false), text, "{text:?} read as {d:?}");
        }
    }

    #[test]
    fn formats_follow_fileformats() {
        assert_eq!(read(b"a\r\nb\r\n").line_end, LineEnd::Dos);
        assert_eq!(read(b"a\r\nb\r\n").lines(), ["a", "b"]);
        // Mixed endings: unix, with the CRs kept in the lines.
        let mixed = read(b"a\r\nb\nc\r\n");
        assert_eq!((mixed.line_end, mixed.lines()), (LineEnd::Unix, vec!["a\r", "b", "c\r"]));
        let unix_only = ReadOptions::from_option_values("unix", "utf-8");
        let d = decode(b"a\r\nb\r\n", &unix_only).unwrap();
        assert_eq!((d.line_end, d.lines()), (LineEnd::Unix, vec!["a\r", "b\r"]));
        let dos_only = ReadOptions::from_option_values("dos", "utf-8");
        let d = decode(b"a\nb\r\n", &dos_only).unwrap();
        assert_eq!((d.line_end, d.lines()), (LineEnd::Dos, vec!["a", "b"]));
        assert_eq!(d.written_text(true), "a\r\nb\r\n");
        let with_mac = ReadOptions::from_option_values("unix,dos,mac", "utf-8");
        let d = decode(b"a\rb\rc\r", &with_mac).unwrap();
        assert_eq!((d.line_end, d.lines(), d.eol), (LineEnd::Mac, vec!["a", "b", "c"], true));
        assert_eq!(d.written_text(false), "a\rb\rc\r");
        // No line end at all: the first format.
        assert_eq!(read(b"abc").line_end, LineEnd::Unix);
    }

    #[test]
    fn end_of_line_and_empty_files() {
        let d = read(b"a\nb");
        assert!(!d.eol);
        assert_eq!(d.written_text(false), "a\nb");
        assert_eq!(d.written_text(true), "a\nb\n", "'fixendofline' adds the missing end-of-line");
        let empty = read(b"");
        assert!(empty.empty);
        assert_eq!(empty.written_text(true), "", "an empty file stays empty");
        let one = read(b"\n");
        assert_eq!((one.empty, one.lines()), (false, vec![""]));
    }

    #[test]
    fn boms_and_encodings() {
        let d = read(b"\xEF\xBB\xBFclass A\r\n");
        assert_eq!((d.bomb, d.encoding, d.line_end), (true, "utf-8", LineEnd::Dos));
        assert_eq!(d.written_text(true), "class A\r\n");
        let latin1 = read(b"caf\xE9\n");
        assert_eq!((latin1.encoding, latin1.joined.as_str()), ("latin1", "café"));
        let utf16 = read(b"\xFF\xFEh\0i\0\n\0");
        assert_eq!((utf16.encoding, utf16.bomb, utf16.joined.as_str(), utf16.eol), ("utf-16le", true, "hi", true));
        let strict = ReadOptions::from_option_values("unix,dos", "ucs-bom,utf-8");
        assert!(decode(b"caf\xE9\n", &strict).is_err());
    }

    #[test]
    fn encodings_write_back_what_they_read() {
        let samples: [&[u8]; 5] = [
            b"\xEF\xBB\xBFclass A\r\n",
            b"caf\xE9\n",
            b"\xFF\xFEh\0i\0\n\0",
            b"\xFE\xFF\0h\0i\0\n",
            b"\xFF\xFE\0\0h\0\0\0\n\0\0\0",
        ];
        for bytes in samples {
            let d = read(bytes);
            assert_eq!(encode(d.written_text(false), d.encoding, d.bomb).as_deref(), Some(bytes), "{d:?}");
        }
        assert_eq!(encode("5 €".into(), "latin1", false), None, "no Latin-1 byte for €");
        assert_eq!(encode("x".into(), "cp1252", false), None, "iconv encodings are Neovim's");
    }

    #[test]
    fn agent_text_splits_by_the_buffers_format() {
        assert_eq!(split_lines("a\r\nb\n", LineEnd::Unix), (vec!["a\r", "b"], true));
        assert_eq!(split_lines("a\r\nb\n", LineEnd::Dos), (vec!["a", "b"], true));
        assert_eq!(split_lines("a\r\nb\r", LineEnd::Dos), (vec!["a", "b\r"], false));
        assert_eq!(split_lines("a\rb", LineEnd::Mac), (vec!["a", "b"], false));
        assert_eq!(split_lines("", LineEnd::Unix), (Vec::<&str>::new(), false));
        assert_eq!(split_lines("\n", LineEnd::Unix), (vec![""], true));
    }

    #[test]
    fn split_then_write_is_the_identity_for_the_formats_own_text() {
        for (text, end) in [
            ("a\r\nb\r\n", LineEnd::Dos),
            ("a\r\nb", LineEnd::Dos),
            ("a\rb\r", LineEnd::Mac),
            ("a\r\nb\n", LineEnd::Unix),
        ] {
            let (lines, eol) = split_lines(text, end);
            assert_eq!(written_text(lines.join("\n").into_bytes(), false, end, eol), text);
        }
    }
}
