//! JSON text from `serde_json::Value`s, byte for byte what
//! `serde_json::to_writer` writes, with strings scanned eight bytes at a time.
//!
//! Why not serde_json's writer: a `readFile` answer is one string of up to
//! tens of megabytes in which almost nothing needs escaping, and serde_json
//! looks each byte up in a table; this checks a word for the three kinds of
//! bytes that need it (controls, `"` and `\`) and copies clean runs whole.

use serde_json::Value;

/// `value` as compact JSON text.
pub fn to_string(value: &Value) -> String {
    let mut out = Vec::with_capacity(estimated_len(value) + 16);
    write_value(&mut out, value);
    // SAFETY: the output is ASCII punctuation, serde_json's own number and
    // literal text, and the bytes of `str`s (valid UTF-8) copied whole
    // between ASCII escapes, so it is valid UTF-8.
    unsafe { String::from_utf8_unchecked(out) }
}

/// Appends `value` as compact JSON text to `out`.
fn write_value(out: &mut Vec<u8>, value: &Value) {
    write_value_with(out, value, &mut |out, s| write_str(out, s));
}

/// [`write_value`], with string values written by `string` (object keys are
/// always escaped as usual).
fn write_value_with(out: &mut Vec<u8>, value: &Value, string: &mut dyn FnMut(&mut Vec<u8>, &String)) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => out.extend_from_slice(n.to_string().as_bytes()),
        Value::String(s) => string(out, s),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value_with(out, item, string);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            out.push(b'{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_str(out, key);
                out.push(b':');
                write_value_with(out, item, string);
            }
            out.push(b'}');
        }
    }
}

/// JSON text ready to send: whole, or with one long string still to be
/// escaped, piece by piece, as it is sent.
#[derive(Debug)]
pub enum JsonText {
    Whole(String),
    Piecewise(Piecewise),
}

impl JsonText {
    /// The whole text (pieces joined).
    pub fn into_string(self) -> String {
        match self {
            JsonText::Whole(text) => text,
            JsonText::Piecewise(p) => p.to_text(),
        }
    }
}

impl From<String> for JsonText {
    fn from(text: String) -> Self {
        JsonText::Whole(text)
    }
}

/// `value` as JSON text; if one of its strings is at least `long` bytes,
/// the longest is left to be escaped as it is sent (see [`Piecewise`]).
pub fn encode(mut value: Value, long: usize) -> JsonText {
    let Some((text, slot)) = take_longest_string(&mut value, long) else {
        return JsonText::Whole(to_string(&value));
    };
    let mut head = Vec::with_capacity(estimated_len(&value) + 16);
    let mut hole = None;
    write_value_with_hole(&mut head, &value, slot, &mut hole);
    let at = hole.expect("the emptied string is in the value");
    let tail = head.split_off(at);
    JsonText::Piecewise(Piecewise { head, text, tail })
}

/// JSON text with one long string left out: `head`, then `text` escaped,
/// then `tail`. Sending it in pieces means a 20 MB `readFile` answer is
/// never built whole (building one touches 20 MB of fresh memory, slower
/// than the escaping itself) and the client reads the first piece while the
/// rest is escaped.
#[derive(Debug)]
pub struct Piecewise {
    /// The text before the string, up to and including its opening quote.
    head: Vec<u8>,
    text: String,
    /// The text after the string, from its closing quote on.
    tail: Vec<u8>,
}

/// One piece of a [`Piecewise`] text: valid UTF-8 on its own.
pub struct Piece {
    pub bytes: Vec<u8>,
    pub last: bool,
}

impl Piecewise {
    /// The pieces in order, each holding about `size` bytes of the text
    /// (more where escapes grow it), cut between characters.
    pub fn pieces(&self, size: usize) -> impl Iterator<Item = Piece> + '_ {
        let size = size.max(16);
        let (mut at, mut done) = (None::<usize>, false);
        std::iter::from_fn(move || {
            if done {
                return None;
            }
            let head: &[u8] = if at.is_none() { &self.head } else { &[] };
            let start = at.unwrap_or(0);
            let mut end = start.saturating_add(size.saturating_sub(head.len()).max(1)).min(self.text.len());
            while !self.text.is_char_boundary(end) {
                end += 1;
            }
            done = end == self.text.len();
            let tail: &[u8] = if done { &self.tail } else { &[] };
            let chunk = &self.text[start..end];
            let mut bytes = Vec::with_capacity(head.len() + chunk.len() + chunk.len() / 8 + tail.len() + 2);
            bytes.extend_from_slice(head);
            write_str_contents(&mut bytes, chunk);
            bytes.extend_from_slice(tail);
            at = Some(end);
            Some(Piece { bytes, last: done })
        })
    }

    /// The whole text at once (for tests and small consumers).
    pub fn to_text(&self) -> String {
        let bytes: Vec<u8> = self.pieces(usize::MAX / 2).flat_map(|p| p.bytes).collect();
        // SAFETY: see `to_string`; pieces are cut between characters.
        unsafe { String::from_utf8_unchecked(bytes) }
    }
}

/// Moves the longest string of at least `long` bytes out of `value`,
/// leaving an empty string in its place; returns it and the address of
/// that place (which stays put while `value` is not changed).
fn take_longest_string(value: &mut Value, long: usize) -> Option<(String, *const String)> {
    fn longest(v: &mut Value) -> Option<&mut String> {
        match v {
            Value::String(s) => Some(s),
            Value::Array(items) => items.iter_mut().filter_map(longest).max_by_key(|s| s.len()),
            Value::Object(map) => map.values_mut().filter_map(longest).max_by_key(|s| s.len()),
            _ => None,
        }
    }
    let s = longest(value)?;
    (s.len() >= long).then(|| (std::mem::take(s), s as *const String))
}

/// [`write_value`], except that the string at address `slot` (emptied by
/// [`take_longest_string`]) is written as `""` and the place between its
/// quotes stored in `hole`.
fn write_value_with_hole(out: &mut Vec<u8>, value: &Value, slot: *const String, hole: &mut Option<usize>) {
    write_value_with(out, value, &mut |out, s| {
        if std::ptr::eq(s, slot) {
            out.push(b'"');
            *hole = Some(out.len());
            out.push(b'"');
        } else {
            write_str(out, s);
        }
    });
}

/// A cheap lower bound of a value's JSON length (its strings' bytes), to
/// size the output once.
fn estimated_len(v: &Value) -> usize {
    match v {
        Value::String(s) => s.len() + 2,
        Value::Array(a) => a.iter().map(estimated_len).sum::<usize>() + a.len() + 2,
        Value::Object(m) => m.iter().map(|(k, v)| k.len() + 4 + estimated_len(v)).sum::<usize>() + 2,
        _ => 8,
    }
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// The high bit of each byte of the word `w` that is below 0x20, `"` or `\\`.
/// Only the lowest flagged byte is certain (the bit tricks can flag bytes
/// above a true one), which is all [`write_str`] uses; bytes of multi-byte
/// UTF-8 characters (>= 0x80) are never flagged.
#[inline]
fn escape_mask(w: u64) -> u64 {
    let below_space = w.wrapping_sub(ONES * 0x20) & !w;
    let q = w ^ (ONES * u64::from(b'"'));
    let quote = q.wrapping_sub(ONES) & !q;
    let b = w ^ (ONES * u64::from(b'\\'));
    let backslash = b.wrapping_sub(ONES) & !b;
    (below_space | quote | backslash) & HIGHS
}

fn needs_escape(byte: u8) -> bool {
    byte < 0x20 || byte == b'"' || byte == b'\\'
}

/// Appends `s` as a JSON string literal, escaped as serde_json does: the
/// short forms `\" \\ \b \f \n \r \t`, other controls as `\u00xx`, and
/// everything else (DEL and non-ASCII included) as it is. Clean runs are
/// found a word at a time and copied whole.
fn write_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    write_str_contents(out, s);
    out.push(b'"');
}

/// The escaped text of `s`, without quotes.
fn write_str_contents(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    // Room for the escapes of ordinary text (a newline or quote every few
    // dozen bytes): growing a 20 MB buffer midway copies it. Pages reserved
    // and never written cost nothing.
    out.reserve(bytes.len() + bytes.len() / 8 + 2);
    let mut run_start = 0;
    let mut i = 0;
    while i + 8 <= bytes.len() {
        let w = u64::from_le_bytes(bytes[i..i + 8].try_into().expect("eight bytes"));
        let mask = escape_mask(w);
        if mask == 0 {
            i += 8;
            continue;
        }
        // Little-endian: the lowest flagged byte is the first in the text.
        i += (mask.trailing_zeros() / 8) as usize;
        out.extend_from_slice(&bytes[run_start..i]);
        write_escape(out, bytes[i]);
        i += 1;
        run_start = i;
    }
    for (j, &byte) in bytes.iter().enumerate().skip(i) {
        if needs_escape(byte) {
            out.extend_from_slice(&bytes[run_start..j]);
            write_escape(out, byte);
            run_start = j + 1;
        }
    }
    out.extend_from_slice(&bytes[run_start..]);
}

fn write_escape(out: &mut Vec<u8>, byte: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let short = match byte {
        b'"' => b'"',
        b'\\' => b'\\',
        0x08 => b'b',
        0x0c => b'f',
        b'\n' => b'n',
        b'\r' => b'r',
        b'\t' => b't',
        _ => {
            out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(byte >> 4)],
                HEX[usize::from(byte & 0xf)],
            ]);
            return;
        }
    };
    out.extend_from_slice(&[b'\\', short]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn same_as_serde(v: &Value) {
        assert_eq!(to_string(v), serde_json::to_string(v).unwrap(), "for {v:?}");
    }

    #[test]
    fn every_ascii_byte_alone_and_at_every_offset_of_a_word() {
        for byte in 0u8..0x80 {
            let c = char::from(byte);
            for before in 0..10 {
                for after in [0, 1, 7, 8, 9] {
                    let s = format!("{}{c}{}", "a".repeat(before), "é".repeat(after));
                    same_as_serde(&Value::String(s));
                }
            }
        }
    }

    #[test]
    fn non_ascii_and_long_mixed_strings() {
        same_as_serde(&json!("é→😀\u{7f}\u{80}\u{ffff}\u{10ffff}"));
        let line = "\tlet s = \"a\\b\"; // é→😀 \u{1}\u{1f}\r\n";
        same_as_serde(&json!(line.repeat(1000)));
        same_as_serde(&json!("x".repeat(8 * 1024 + 3)));
        same_as_serde(&json!(""));
    }

    #[test]
    fn whole_values_in_their_order() {
        same_as_serde(&json!({
            "serverResponse": { "id": "7", "readFile": { "success": true, "content": "a\"b", "encoding": "utf-8" } },
            "n": [0, -1, 1.5, 1e300, u64::MAX, i64::MIN, null, false, [], {}],
            "k\"ey\n": { "nested": [[["deep"]]] },
        }));
    }

    #[test]
    fn a_long_string_is_left_for_the_pieces_and_the_pieces_make_the_same_text() {
        let long = "é→😀 \"quoted\"\n\u{1}".repeat(700);
        let value = json!({ "serverResponse": { "id": "", "readFile": { "a": "", "content": long, "z": [""] } } });
        let JsonText::Piecewise(p) = encode(value.clone(), 1000) else { panic!("expected pieces") };
        assert_eq!(p.to_text(), serde_json::to_string(&value).unwrap());
        for size in [1, 7, 100, 4096, 1 << 20] {
            let pieces: Vec<Piece> = p.pieces(size).collect();
            assert!(pieces.last().unwrap().last && pieces.iter().filter(|p| p.last).count() == 1);
            let mut joined = Vec::new();
            for piece in &pieces {
                assert!(std::str::from_utf8(&piece.bytes).is_ok(), "a piece cut a character");
                joined.extend_from_slice(&piece.bytes);
            }
            assert_eq!(joined, serde_json::to_vec(&value).unwrap(), "size {size}");
        }
        let JsonText::Whole(text) = encode(value.clone(), long.len() + 1) else { panic!("expected whole") };
        assert_eq!(text, serde_json::to_string(&value).unwrap());
    }

    #[test]
    fn the_longest_of_several_strings_is_the_one_left_out() {
        let value = json!(["x".repeat(2000), "y".repeat(3000), {"k": "z".repeat(2500)}]);
        let JsonText::Piecewise(p) = encode(value.clone(), 1000) else { panic!("expected pieces") };
        assert_eq!(p.text.len(), 3000);
        assert_eq!(p.to_text(), serde_json::to_string(&value).unwrap());
    }

    #[test]
    fn the_lowest_flag_of_a_word_is_its_first_byte_to_escape() {
        // Every byte value at every position after clean bytes, with
        // anything (flagged or not) after it.
        for byte in 0u8..=0xff {
            for pos in 0..8 {
                for fill_after in [b'a', 0x00, b'"', 0xff] {
                    let mut w = [b'a'; 8];
                    w[pos] = byte;
                    w[pos + 1..].fill(fill_after);
                    let mask = escape_mask(u64::from_le_bytes(w));
                    let first = w.iter().position(|b| needs_escape(*b));
                    assert_eq!(mask != 0, first.is_some(), "{w:?}");
                    if let Some(first) = first {
                        assert_eq!((mask.trailing_zeros() / 8) as usize, first, "{w:?}");
                    }
                }
            }
        }
    }
}
