//! Authentication token for the Amp WebSocket server.
//!
//! The token is written to the lockfile and must be presented by clients, so it has
//! to be unguessable (OS CSPRNG) and compared without leaking timing information.

use base64::Engine;
use rand::rngs::OsRng;
use rand::RngCore;

/// Number of random bytes in a token (256 bits).
const TOKEN_BYTES: usize = 32;

/// Returns a fresh token: 32 bytes from the OS CSPRNG as unpadded base64url (43 chars).
pub fn generate_token() -> String {
    let mut bytes = [0u8; TOKEN_BYTES];
    OsRng.fill_bytes(&mut bytes);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn token_shape() {
        let t = generate_token();
        assert_eq!(t.len(), 43);
        assert!(t.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'));
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
