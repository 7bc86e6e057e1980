//! Fuzzes the WebSocket upgrade admission check (`Host`, `Origin`, `?auth=`),
//! which runs on every connection attempt, authenticated or not.
//!
//! Input: `host \n origin \n query` (a missing line is an absent header). The
//! server's token is fixed; the checks are "never panics", "a non-loopback or
//! missing Host is always refused", "an Origin not allow-listed is always
//! refused" and "authenticated only when the query carries the token".
#![no_main]

use amp_core::amp::handshake::{admit, Admission, UpgradeRequest};
use libfuzzer_sys::fuzz_target;

const TOKEN: &str = "Zm9vYmFyYmF6cXV4LXRva2VuX3RoYXRfaXNfbG9uZw";

fuzz_target!(|data: &[u8]| {
    // HTTP header values reach the check through `to_str()`, which only passes visible ASCII.
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut parts = text.splitn(3, '\n');
    let host = parts.next().filter(|s| !s.is_empty());
    let origin = parts.next().filter(|s| !s.is_empty());
    let query = parts.next();
    let allowed = vec!["http://allowed.test".to_string()];
    let verdict = admit(&UpgradeRequest { host, origin, query, auth_header: None }, TOKEN, &allowed);
    if let Admission::Upgrade { authenticated } = verdict {
        let h = host.expect("no Host is refused").trim().to_ascii_lowercase();
        assert!(
            h == "localhost"
                || h == "127.0.0.1"
                || h == "[::1]"
                || h.starts_with("localhost:")
                || h.starts_with("127.0.0.1:")
                || h.starts_with("[::1]:"),
            "admitted Host {host:?}"
        );
        if let Some(o) = origin {
            assert_eq!(o, "http://allowed.test");
        }
        if authenticated {
            assert!(query.is_some_and(|q| q.contains("auth=")), "authenticated without auth=: {query:?}");
        }
    }
    // The right token with a loopback Host and no Origin is always let in.
    let q = format!("auth={TOKEN}&{}", query.unwrap_or(""));
    let ok = admit(
        &UpgradeRequest { host: Some("localhost:1"), origin: None, query: Some(&q), auth_header: None },
        TOKEN,
        &allowed,
    );
    assert_eq!(ok, Admission::Upgrade { authenticated: true }, "query {q:?}");
});
