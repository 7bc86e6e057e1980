//! Authentication token for the Amp WebSocket server.
//!
//! The token is written to the lockfile and must be presented by clients, so it has
//! to be unguessable (OS CSPRNG) and compared without leaking timing information.

use rand::rngs::OsRng;
use rand::RngCore;

/// Number of random bytes in a token (256 bits).
const TOKEN_BYTES: usize = 32;

/// The base64url alphabet (RFC 4648 §5).
const B64URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Returns a fresh token: 32 bytes from the OS CSPRNG as unpadded base64url (43 chars).
pub fn generate_token() -> String {
    let mut bytes = [0u8; TOKEN_BYTES];
    OsRng.fill_bytes(&mut bytes);
    base64url_nopad(&bytes)
}

/// Compares a client-supplied token with the expected one in constant time.
///
/// Runs over every byte of `expected` whatever the input, so the timing reveals
/// neither the position of the first difference nor (beyond `expected`) the length.
pub fn tokens_match(expected: &str, given: &str) -> bool {
    let e = expected.as_bytes();
    let g = given.as_bytes();
    let mut diff: u8 = (e.len() != g.len()) as u8;
    for (i, &eb) in e.iter().enumerate() {
        // Out-of-range positions compare against 0 (and length already differs).
        let gb = g.get(i).copied().unwrap_or(0);
        diff |= eb ^ gb;
    }
    std::hint::black_box(diff) == 0
}

/// Encodes bytes as base64url without padding.
fn base64url_nopad(data: &[u8]) -> String {
    let mut out = String::with_capacity((data.len() * 4).div_ceil(3));
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let sextets = [(n >> 18) & 63, (n >> 12) & 63, (n >> 6) & 63, n & 63];
        // 1 byte → 2 chars, 2 bytes → 3 chars, 3 bytes → 4 chars.
        for &s in &sextets[..chunk.len() + 1] {
            out.push(B64URL[s as usize] as char);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn encoder_matches_rfc4648_vectors() {
        // RFC 4648 §10 test vectors, padding removed.
        assert_eq!(base64url_nopad(b""), "");
        assert_eq!(base64url_nopad(b"f"), "Zg");
        assert_eq!(base64url_nopad(b"fo"), "Zm8");
        assert_eq!(base64url_nopad(b"foo"), "Zm9v");
        assert_eq!(base64url_nopad(b"foob"), "Zm9vYg");
        assert_eq!(base64url_nopad(b"fooba"), "Zm9vYmE");
        assert_eq!(base64url_nopad(b"foobar"), "Zm9vYmFy");
    }

    #[test]
    fn encoder_uses_url_safe_alphabet() {
        assert_eq!(base64url_nopad(&[0xfb, 0xff, 0xbf]), "-_-_");
        assert_eq!(base64url_nopad(&[0xff, 0xff, 0xff]), "____");
        assert_eq!(base64url_nopad(&[0, 0, 0]), "AAAA");
    }

    #[test]
    fn token_shape() {
        let t = generate_token();
        assert_eq!(t.len(), 43);
        assert!(t
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'));
        assert!(!t.contains('='));
    }

    #[test]
    fn tokens_are_distinct() {
        let set: HashSet<String> = (0..100).map(|_| generate_token()).collect();
        assert_eq!(set.len(), 100);
    }

    #[test]
    fn match_equal() {
        let t = generate_token();
        assert!(tokens_match(&t, &t.clone()));
        assert!(tokens_match("", ""));
    }

    #[test]
    fn mismatch_content_and_length() {
        assert!(!tokens_match("abc", "abd"));
        assert!(!tokens_match("abc", "xbc"));
        assert!(!tokens_match("abc", "ab"));
        assert!(!tokens_match("abc", "abcd"));
        assert!(!tokens_match("abc", ""));
        assert!(!tokens_match("", "a"));
        // Prefix padded with NULs must not match (length check is not bypassed).
        assert!(!tokens_match("ab\0", "ab"));
        assert!(!tokens_match("ab", "ab\0"));
    }

    #[test]
    fn mismatch_non_ascii() {
        assert!(!tokens_match("é", "e"));
        assert!(tokens_match("é", "é"));
    }
}
