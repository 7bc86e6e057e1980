//! Property tests of the pure column, URI and JSON text conversions.
//!
//! `amp_core::core::text` converts between Neovim's byte columns and the UTF-16 code
//! units Amp and LSP use; `amp_core::core::uri` turns paths into `file://` URIs
//! and back. Both run on every cursor move and every request, on text and paths
//! nobody controls, so they are checked here against simple reference models
//! over arbitrary strings, arbitrary bytes (invalid UTF-8) and arbitrary paths.
//!
//! Run: `cargo test --release --test proptest_text`
//! (more cases: `PROPTEST_CASES=20000 cargo test --release --test proptest_text`).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use amp_core::core::text::{byte_to_utf16_col, utf16_len, utf16_to_byte_col};
use amp_core::core::uri::{file_uri_to_path, path_to_file_uri};
use proptest::prelude::*;

// ---------------------------------------------------------------------------
// strategies
// ---------------------------------------------------------------------------

/// One char, weighted towards the interesting widths: ASCII (1 byte, 1 unit),
/// 2- and 3-byte BMP chars (1 unit), astral chars (4 bytes, 2 units), and
/// combining marks / zero-width joiners that make up grapheme clusters.
fn interesting_char() -> impl Strategy<Value = char> {
    prop_oneof![
        4 => prop::char::range(' ', '~'),
        1 => Just('\t'),
        2 => prop::char::range('\u{80}', '\u{7ff}'),
        2 => prop::char::range('\u{800}', '\u{d7ff}'),
        1 => prop::char::range('\u{e000}', '\u{fffd}'),
        3 => prop::char::range('\u{10000}', '\u{10ffff}'),
        1 => prop::sample::select(vec!['\u{200d}', '\u{301}', '\u{fe0f}', '😀', '👨', '→', 'é', '日']),
    ]
}

/// Strings mixing every UTF-8 width, plus fully arbitrary `String`s.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::collection::vec(interesting_char(), 0..64).prop_map(|v| v.into_iter().collect()),
        1 => any::<String>(),
    ]
}

/// Arbitrary bytes, biased towards fragments of valid multi-byte sequences so
/// truncated, overlong and surrogate encodings show up often.
fn bytes() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        3 => any::<u8>().prop_map(|b| vec![b]),
        1 => prop::sample::select(vec![0x80u8, 0xbf, 0xc0, 0xc1, 0xc3, 0xe2, 0xed, 0xf0, 0xf4, 0xf5, 0xff])
            .prop_map(|b| vec![b]),
        2 => interesting_char().prop_map(|c| c.to_string().into_bytes()),
        1 => (interesting_char(), 1usize..4).prop_map(|(c, cut)| {
            // A char with its tail cut off (a truncated sequence).
            let mut v = c.to_string().into_bytes();
            let keep = v.len().saturating_sub(cut).max(1).min(v.len());
            v.truncate(keep);
            v
        }),
        1 => Just(b"\xed\xa0\x80".to_vec()), // an encoded surrogate (invalid in UTF-8)
        1 => Just(b"\xc0\xaf".to_vec()),     // an overlong '/'
    ];
    prop::collection::vec(piece, 0..48).prop_map(|v| v.concat())
}

/// Absolute unix paths made of any bytes but NUL (and so not necessarily UTF-8),
/// biased towards the characters URIs treat specially.
fn absolute_path() -> impl Strategy<Value = PathBuf> {
    let byte = prop_oneof![
        4 => prop::sample::select(b"abcXYZ019-._~/".to_vec()),
        3 => prop::sample::select(b" #%?&=+;:@!$'()*,[]{}\\\"<>^`|".to_vec()),
        2 => 1u8..=255,
        1 => interesting_char().prop_map(|c| c.to_string().into_bytes()[0]),
    ];
    let segment = prop_oneof![
        6 => prop::collection::vec(byte, 0..12),
        1 => interesting_char().prop_map(|c| c.to_string().into_bytes()),
        1 => prop::sample::select(vec![b".".to_vec(), b"..".to_vec(), b"".to_vec()]),
    ];
    prop::collection::vec(segment, 0..8).prop_map(|segments| {
        let mut raw = Vec::new();
        for s in segments {
            raw.push(b'/');
            raw.extend(s);
        }
        if raw.is_empty() {
            raw.push(b'/');
        }
        PathBuf::from(OsStr::from_bytes(&raw))
    })
}

// ---------------------------------------------------------------------------
// reference models
// ---------------------------------------------------------------------------

/// Units of a byte line as `(byte_start, byte_len, utf16_units)`: each char of
/// each valid run, then each invalid byte alone (1 byte, 1 unit).
fn units(line: &[u8]) -> Vec<(usize, usize, usize)> {
    let mut out = Vec::new();
    let mut pos = 0;
    for chunk in line.utf8_chunks() {
        for c in chunk.valid().chars() {
            out.push((pos, c.len_utf8(), c.len_utf16()));
            pos += c.len_utf8();
        }
        for _ in chunk.invalid() {
            out.push((pos, 1, 1));
            pos += 1;
        }
    }
    assert_eq!(pos, line.len());
    out
}

/// Unit boundaries of a byte line (0, every unit end), ascending.
fn boundaries(line: &[u8]) -> Vec<usize> {
    std::iter::once(0).chain(units(line).into_iter().map(|(s, n, _)| s + n)).collect()
}

/// Reference for `byte_to_utf16_col`: units of the items that end at or before `byte_col`.
fn model_byte_to_utf16(line: &[u8], byte_col: usize) -> usize {
    units(line).into_iter().take_while(|&(s, n, _)| s + n <= byte_col).map(|(_, _, w)| w).sum()
}

/// Reference for `utf16_to_byte_col`: the last boundary whose prefix has at most `col` units.
fn model_utf16_to_byte(line: &[u8], col: usize) -> usize {
    let mut acc = 0;
    for (s, _, w) in units(line) {
        if acc + w > col {
            return s;
        }
        acc += w;
    }
    line.len()
}

fn path_bytes(p: &Path) -> &[u8] {
    p.as_os_str().as_bytes()
}

// ---------------------------------------------------------------------------
// text: valid UTF-8
// ---------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    /// `utf16_len` agrees with the standard library's UTF-16 encoder.
    #[test]
    fn utf16_len_matches_encode_utf16(s in text()) {
        prop_assert_eq!(utf16_len(&s), s.encode_utf16().count());
    }

    /// The whole line's column is its UTF-16 length.
    #[test]
    fn end_of_line_is_utf16_len(s in text()) {
        prop_assert_eq!(byte_to_utf16_col(s.as_bytes(), s.len()), utf16_len(&s));
        prop_assert_eq!(utf16_to_byte_col(s.as_bytes(), utf16_len(&s)), s.len());
    }

    /// At every char boundary: the column is the UTF-16 length of the prefix,
    /// and converting back gives the same byte offset.
    #[test]
    fn round_trip_at_every_char_boundary(s in text()) {
        let line = s.as_bytes();
        let ends = s.char_indices().map(|(b, _)| b).chain(std::iter::once(s.len()));
        for b in ends {
            let u = byte_to_utf16_col(line, b);
            prop_assert_eq!(u, s[..b].encode_utf16().count(), "byte {} of {:?}", b, s);
            prop_assert_eq!(utf16_to_byte_col(line, u), b, "byte {} (col {}) of {:?}", b, u, s);
        }
    }

    /// Inside a multi-byte char, the column counts only the chars before it.
    #[test]
    fn offsets_inside_a_char_floor_to_its_start(s in text()) {
        let line = s.as_bytes();
        for b in 0..=s.len() {
            let floor = (0..=b).rev().find(|&i| s.is_char_boundary(i)).unwrap_or(0);
            prop_assert_eq!(byte_to_utf16_col(line, b), s[..floor].encode_utf16().count(), "byte {} of {:?}", b, s);
        }
    }

    /// Every UTF-16 column maps to a char boundary whose prefix is the longest
    /// one not exceeding it (the middle of a surrogate pair maps to the pair's
    /// start), and back to a column no greater than it.
    #[test]
    fn utf16_columns_map_to_char_boundaries(s in text()) {
        let line = s.as_bytes();
        let total = utf16_len(&s);
        for u in 0..=total + 2 {
            let b = utf16_to_byte_col(line, u);
            prop_assert!(s.is_char_boundary(b), "col {} -> byte {} of {:?}", u, b, s);
            let prefix = s[..b].encode_utf16().count();
            prop_assert!(prefix <= u);
            // The next char would overshoot (or there is none).
            if let Some(c) = s[b..].chars().next() {
                prop_assert!(prefix + c.len_utf16() > u, "col {} -> byte {} of {:?}", u, b, s);
            }
            prop_assert_eq!(byte_to_utf16_col(line, b), prefix);
        }
    }

    /// Both conversions are monotonic (non-decreasing), past the end too.
    #[test]
    fn conversions_are_monotonic(s in text()) {
        let line = s.as_bytes();
        let mut prev = 0;
        for b in 0..=s.len() + 3 {
            let u = byte_to_utf16_col(line, b);
            prop_assert!(u >= prev, "byte {} of {:?}: {} < {}", b, s, u, prev);
            prev = u;
        }
        let mut prev = 0;
        for u in 0..=utf16_len(&s) + 3 {
            let b = utf16_to_byte_col(line, u);
            prop_assert!(b >= prev, "col {} of {:?}: {} < {}", u, s, b, prev);
            prev = b;
        }
    }
}

// ---------------------------------------------------------------------------
// text: arbitrary bytes (invalid UTF-8)
// ---------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    /// Any bytes and any offset, however large: no panic, results clamped to
    /// the line, and equal to the per-invalid-byte reference model.
    #[test]
    fn arbitrary_bytes_never_panic_and_stay_clamped(
        line in bytes(),
        extra in prop::sample::select(vec![0usize, 1, 2, 7, 1000, usize::MAX / 2, usize::MAX - 1, usize::MAX]),
    ) {
        let total = byte_to_utf16_col(&line, line.len());
        prop_assert!(total <= line.len());
        prop_assert_eq!(total, model_byte_to_utf16(&line, line.len()));
        for b in (0..=line.len()).chain([line.len().saturating_add(extra)]) {
            let u = byte_to_utf16_col(&line, b);
            prop_assert!(u <= total && u <= b.min(line.len()), "byte {} of {:?} -> {}", b, line, u);
            prop_assert_eq!(u, model_byte_to_utf16(&line, b), "byte {} of {:?}", b, line);
        }
        for u in (0..=total + 2).chain([total.saturating_add(extra)]) {
            let b = utf16_to_byte_col(&line, u);
            prop_assert!(b <= line.len(), "col {} of {:?} -> {}", u, line, b);
            prop_assert_eq!(b, model_utf16_to_byte(&line, u), "col {} of {:?}", u, line);
        }
    }

    /// With invalid bytes counted as one unit each, every unit boundary still
    /// survives byte -> UTF-16 -> byte, and the columns are monotonic.
    #[test]
    fn arbitrary_bytes_round_trip_at_unit_boundaries(line in bytes()) {
        let mut prev = 0;
        for b in boundaries(&line) {
            let u = byte_to_utf16_col(&line, b);
            prop_assert!(u >= prev);
            prev = u;
            prop_assert_eq!(utf16_to_byte_col(&line, u), b, "byte {} of {:?}", b, line);
        }
    }

    /// On valid UTF-8 the byte model and the `&str` functions agree.
    #[test]
    fn valid_bytes_agree_with_str(s in text()) {
        prop_assert_eq!(byte_to_utf16_col(s.as_bytes(), usize::MAX), utf16_len(&s));
        prop_assert_eq!(boundaries(s.as_bytes()).len(), s.chars().count() + 1);
    }
}

// ---------------------------------------------------------------------------
// file:// URIs
// ---------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    /// Any absolute path without NUL survives path -> URI -> path byte for
    /// byte (`.`/`..`/`//` included: nothing is normalised).
    #[test]
    fn uri_round_trip(path in absolute_path()) {
        let uri = path_to_file_uri(&path);
        let back = file_uri_to_path(&uri);
        prop_assert!(back.is_ok(), "{:?} -> {} -> {:?}", path, uri, back);
        let back = back.unwrap();
        prop_assert_eq!(path_bytes(&back), path_bytes(&path), "via {}", uri);
    }

    /// The URI is `file://` + the path with every byte outside the unreserved
    /// set and `/` percent-encoded (upper-case hex): plain ASCII, no space,
    /// `#`, `?` or `%` that is not an escape.
    #[test]
    fn uri_is_percent_encoded_ascii(path in absolute_path()) {
        let uri = path_to_file_uri(&path);
        prop_assert!(uri.starts_with("file:///"), "{}", uri);
        let body = &uri.as_bytes()["file://".len()..];
        let mut i = 0;
        while i < body.len() {
            let b = body[i];
            if b == b'%' {
                prop_assert!(i + 2 < body.len(), "truncated escape in {}", uri);
                let hex = &body[i + 1..i + 3];
                prop_assert!(hex.iter().all(|h| h.is_ascii_digit() || (b'A'..=b'F').contains(h)), "{}", uri);
                i += 3;
            } else {
                prop_assert!(b.is_ascii_alphanumeric() || b"-._~/".contains(&b), "byte {:?} in {}", b as char, uri);
                i += 1;
            }
        }
        // Unencoded bytes are exactly the path's unreserved bytes.
        let plain = path_bytes(&path).iter().filter(|b| b.is_ascii_alphanumeric() || b"-._~/".contains(b)).count();
        let escapes = body.iter().filter(|&&b| b == b'%').count();
        prop_assert_eq!(body.len(), plain + 3 * escapes);
        prop_assert_eq!(plain + escapes, path_bytes(&path).len());
    }

    /// The forms a client may send decode to the same path: a fragment or
    /// query appended, the `localhost` host (any case), lower-case hex.
    #[test]
    fn uri_variants_decode_to_the_same_path(
        path in absolute_path(),
        fragment in "[A-Za-z0-9#?/%-]{0,12}",
        host in prop::sample::select(vec!["localhost", "LOCALHOST", "LocalHost"]),
    ) {
        let uri = path_to_file_uri(&path);
        let want = path_bytes(&path).to_vec();
        let with_fragment = format!("{uri}#{fragment}");
        prop_assert_eq!(file_uri_to_path(&with_fragment).map(|p| path_bytes(&p).to_vec()), Ok(want.clone()), "{}", with_fragment);
        let with_query = format!("{uri}?{fragment}");
        prop_assert_eq!(file_uri_to_path(&with_query).map(|p| path_bytes(&p).to_vec()), Ok(want.clone()), "{}", with_query);
        let with_host = format!("file://{host}{}", &uri["file://".len()..]);
        prop_assert_eq!(file_uri_to_path(&with_host).map(|p| path_bytes(&p).to_vec()), Ok(want.clone()), "{}", with_host);
        let lower = lowercase_escapes(&uri);
        prop_assert_eq!(file_uri_to_path(&lower).map(|p| path_bytes(&p).to_vec()), Ok(want), "{}", lower);
    }

    /// Decoding arbitrary text never panics, and whatever it accepts is an
    /// absolute path without NUL that encodes back to a URI naming it.
    #[test]
    fn decoding_arbitrary_uris_never_panics(tail in any::<String>(), prefix in prop::sample::select(vec!["file://", "file:///", "file:", "FILE://localhost", "file://host", "", "http://"])) {
        let uri = format!("{prefix}{tail}");
        if let Ok(path) = file_uri_to_path(&uri) {
            let raw = path_bytes(&path);
            prop_assert!(raw.first() == Some(&b'/'), "{} -> {:?}", uri, path);
            prop_assert!(!raw.contains(&0), "{} -> {:?}", uri, path);
            let again = file_uri_to_path(&path_to_file_uri(&path)).map(|p| path_bytes(&p).to_vec());
            prop_assert_eq!(again, Ok(raw.to_vec()));
        }
    }
}

/// `%AB` -> `%ab` for every escape.
fn lowercase_escapes(uri: &str) -> String {
    let mut out = String::with_capacity(uri.len());
    let mut chars = uri.chars();
    while let Some(c) = chars.next() {
        out.push(c);
        if c == '%' {
            for _ in 0..2 {
                if let Some(h) = chars.next() {
                    out.push(h.to_ascii_lowercase());
                }
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------
// JSON text: amp_core::serve::json_text writes what serde_json writes
// ---------------------------------------------------------------------------

/// JSON values with strings from `text()` plus every control character, `"`
/// and `\`, nested a few levels.
fn json_value() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    let string = prop_oneof![
        3 => text(),
        1 => prop::collection::vec(prop_oneof![prop::char::range('\u{0}', '\u{1f}'), Just('"'), Just('\\'), interesting_char()], 0..40)
            .prop_map(|cs| cs.into_iter().collect::<String>()),
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        string.clone().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 32, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::Array),
            prop::collection::vec((string.clone(), inner), 0..6)
                .prop_map(|entries| serde_json::Value::Object(entries.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    /// The fast writer and serde_json agree byte for byte.
    #[test]
    fn json_text_matches_serde_json(value in json_value()) {
        prop_assert_eq!(amp_core::serve::json_text::to_string(&value), serde_json::to_string(&value).unwrap());
    }
}

/// A few fixed cases, so a failure of the generators themselves is visible.
#[test]
fn fixed_examples() {
    let l = "a😀b".as_bytes();
    assert_eq!(byte_to_utf16_col(l, 5), 3);
    assert_eq!(utf16_to_byte_col(l, 2), 1);
    let p = PathBuf::from(OsStr::from_bytes(b"/tmp/a b#c%d/\xff\xfe/\xc3\xa9"));
    let uri = path_to_file_uri(&p);
    assert_eq!(uri, "file:///tmp/a%20b%23c%25d/%FF%FE/%C3%A9");
    assert_eq!(path_bytes(&file_uri_to_path(&uri).unwrap()), path_bytes(&p));
}
