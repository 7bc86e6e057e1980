//! Column conversion between Neovim (byte offsets) and LSP/Amp (UTF-16 code units).
//! Pure functions over one line's bytes.
//!
//! Buffer lines may hold invalid UTF-8; each invalid byte counts as one UTF-16 unit
//! so conversions stay total and invertible.

/// Number of UTF-16 code units needed to encode `s`.
pub fn utf16_len(s: &str) -> usize {
    s.chars().map(char::len_utf16).sum()
}

/// Calls `f(byte_start, byte_len, utf16_units)` for each char of `line` in order, and
/// for each invalid byte as a 1-byte, 1-unit item; stops early when `f` returns false.
fn for_each_unit(line: &[u8], mut f: impl FnMut(usize, usize, usize) -> bool) {
    let mut pos = 0;
    for chunk in line.utf8_chunks() {
        for c in chunk.valid().chars() {
            if !f(pos, c.len_utf8(), c.len_utf16()) {
                return;
            }
            pos += c.len_utf8();
        }
        for _ in chunk.invalid() {
            if !f(pos, 1, 1) {
                return;
            }
            pos += 1;
        }
    }
}

/// UTF-16 column of byte offset `byte_col` in `line`.
///
/// `byte_col` is clamped to the line length; an offset inside a multi-byte char
/// counts only the chars before it.
pub fn byte_to_utf16_col(line: &[u8], byte_col: usize) -> usize {
    let mut units = 0;
    for_each_unit(line, |start, len, w| {
        if start + len > byte_col {
            return false;
        }
        units += w;
        true
    });
    units
}

/// Byte offset in `line` of UTF-16 column `utf16_col` (inverse of [`byte_to_utf16_col`]).
///
/// Clamps to the line length; a column in the middle of a surrogate pair maps to the
/// start of that char.
pub fn utf16_to_byte_col(line: &[u8], utf16_col: usize) -> usize {
    let mut units = 0;
    let mut result = line.len();
    for_each_unit(line, |start, _len, w| {
        if units + w > utf16_col {
            result = start;
            return false;
        }
        units += w;
        true
    });
    result
}

/// `s` cut to at most `max` bytes, on a character boundary.
pub fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf16_len_cases() {
        assert_eq!(utf16_len(""), 0);
        assert_eq!(utf16_len("abc"), 3);
        assert_eq!(utf16_len("é"), 1);
        assert_eq!(utf16_len("→"), 1);
        assert_eq!(utf16_len("😀"), 2);
        assert_eq!(utf16_len("a😀b"), 4);
        assert_eq!(utf16_len("\t"), 1);
    }

    #[test]
    fn ascii_is_identity() {
        let l = b"hello\tworld";
        for b in 0..=l.len() {
            assert_eq!(byte_to_utf16_col(l, b), b);
            assert_eq!(utf16_to_byte_col(l, b), b);
        }
    }

    #[test]
    fn emoji_example() {
        let l = "a😀b".as_bytes();
        assert_eq!(l.len(), 6);
        assert_eq!(byte_to_utf16_col(l, 5), 3); // 'b'
        assert_eq!(utf16_to_byte_col(l, 3), 5);
        assert_eq!(byte_to_utf16_col(l, 1), 1);
        assert_eq!(utf16_to_byte_col(l, 1), 1);
        assert_eq!(byte_to_utf16_col(l, 6), 4);
        assert_eq!(utf16_to_byte_col(l, 4), 6);
    }

    #[test]
    fn inside_multibyte_counts_to_char_start() {
        let l = "a😀b".as_bytes();
        for b in 2..=4 {
            assert_eq!(byte_to_utf16_col(l, b), 1, "byte {b}");
        }
        let l = "é→x".as_bytes(); // é: 2 bytes, →: 3 bytes
        assert_eq!(byte_to_utf16_col(l, 1), 0);
        assert_eq!(byte_to_utf16_col(l, 2), 1);
        assert_eq!(byte_to_utf16_col(l, 3), 1);
        assert_eq!(byte_to_utf16_col(l, 4), 1);
        assert_eq!(byte_to_utf16_col(l, 5), 2);
        assert_eq!(utf16_to_byte_col(l, 1), 2);
        assert_eq!(utf16_to_byte_col(l, 2), 5);
        assert_eq!(utf16_to_byte_col(l, 3), 6);
    }

    #[test]
    fn middle_of_surrogate_pair_maps_to_char_start() {
        let l = "a😀b".as_bytes();
        assert_eq!(utf16_to_byte_col(l, 2), 1);
        let l = "😀😀".as_bytes();
        assert_eq!(utf16_to_byte_col(l, 1), 0);
        assert_eq!(utf16_to_byte_col(l, 3), 4);
    }

    #[test]
    fn clamping() {
        let l = "é😀".as_bytes();
        assert_eq!(byte_to_utf16_col(l, 100), 3);
        assert_eq!(byte_to_utf16_col(l, usize::MAX), 3);
        assert_eq!(utf16_to_byte_col(l, 100), 6);
        assert_eq!(utf16_to_byte_col(l, usize::MAX), 6);
        assert_eq!(byte_to_utf16_col(b"", 5), 0);
        assert_eq!(utf16_to_byte_col(b"", 5), 0);
        assert_eq!(byte_to_utf16_col(b"", 0), 0);
        assert_eq!(utf16_to_byte_col(b"", 0), 0);
    }

    #[test]
    fn invalid_utf8_bytes_are_one_unit_each() {
        let l = b"a\xffb\xe2\x86c"; // \xe2\x86 is a truncated '→'
        assert_eq!(byte_to_utf16_col(l, 1), 1);
        assert_eq!(byte_to_utf16_col(l, 2), 2);
        assert_eq!(byte_to_utf16_col(l, 3), 3);
        assert_eq!(byte_to_utf16_col(l, 4), 4);
        assert_eq!(byte_to_utf16_col(l, 5), 5);
        assert_eq!(byte_to_utf16_col(l, 6), 6);
        for u in 0..=6 {
            assert_eq!(utf16_to_byte_col(l, u), u);
        }
        // Invalid bytes followed by a valid multi-byte char.
        let l = b"\x80\xc3\xa9z"; // stray continuation, 'é', 'z'
        assert_eq!(byte_to_utf16_col(l, 1), 1);
        assert_eq!(byte_to_utf16_col(l, 2), 1);
        assert_eq!(byte_to_utf16_col(l, 3), 2);
        assert_eq!(utf16_to_byte_col(l, 2), 3);
        assert_eq!(utf16_to_byte_col(l, 3), 4);
    }

    #[test]
    fn tabs_are_one_unit() {
        let l = "\t\té".as_bytes();
        assert_eq!(byte_to_utf16_col(l, 2), 2);
        assert_eq!(byte_to_utf16_col(l, 4), 3);
        assert_eq!(utf16_to_byte_col(l, 3), 4);
    }

    /// Every char boundary survives byte → utf16 → byte, and utf16 columns are monotonic.
    #[test]
    fn roundtrip_property() {
        let lines: [&[u8]; 7] = [
            "".as_bytes(),
            "plain ascii".as_bytes(),
            "é→😀\tx".as_bytes(),
            "👨‍👩‍👧 family".as_bytes(),
            "日本語テキスト😀😀".as_bytes(),
            b"ok\xff\xfe\xc3\xa9\xf0\x9f\x98",
            b"\xf0\x9f\x98\x80\xed\xa0\x80end", // emoji then an encoded surrogate (invalid)
        ];
        for l in lines {
            let mut boundaries = vec![0];
            for_each_unit(l, |s, n, _| {
                boundaries.push(s + n);
                true
            });
            let mut prev = 0;
            for &b in &boundaries {
                let u = byte_to_utf16_col(l, b);
                assert_eq!(utf16_to_byte_col(l, u), b, "line {l:?} byte {b}");
                assert!(u >= prev);
                prev = u;
            }
            assert_eq!(*boundaries.last().unwrap(), l.len());
            if let Ok(s) = std::str::from_utf8(l) {
                assert_eq!(byte_to_utf16_col(l, l.len()), utf16_len(s));
                for (b, _) in s.char_indices() {
                    assert_eq!(byte_to_utf16_col(l, b), utf16_len(&s[..b]));
                }
            }
        }
    }
}
