//! Fuzzes the admission policy every front-end applies to every connection
//! attempt, authenticated or not (`Host`, `Origin`, the token in a query
//! parameter, a header, or `<scheme> <token>`).
//!
//! Input: `host \n origin \n query \n header` (a missing line is an absent
//! header). The token and port are fixed; the checks are "never panics",
//! "a Host other than a loopback name with our port is always refused", "an
//! Origin not allow-listed is always refused" and "authenticated only when
//! the token is where the protocol carries it".
#![no_main]

use amp_core::serve::admission::{Admission, Policy, Request, TokenIn};
use libfuzzer_sys::fuzz_target;

const TOKEN: &str = "Zm9vYmFyYmF6cXV4LXRva2VuX3RoYXRfaXNfbG9uZw";
const PORT: u16 = 4242;

fn policy(token_in: TokenIn) -> Policy {
    Policy { token: TOKEN.into(), token_in, allowed_origins: vec!["http://allowed.test".to_string()], port: Some(PORT) }
}

fuzz_target!(|data: &[u8]| {
    // HTTP header values reach the check as (lossy) text.
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut parts = text.splitn(4, '\n');
    let host = parts.next().filter(|s| !s.is_empty());
    let origin = parts.next().filter(|s| !s.is_empty());
    let query = parts.next();
    let token_header = parts.next();
    let request = Request { host, origin, query, token_header };
    for token_in in [
        TokenIn::Query("auth"),
        TokenIn::Header("x-claude-code-ide-authorization"),
        TokenIn::Scheme { header: "authorization", scheme: "Bearer" },
    ] {
        let verdict = policy(token_in).admit(&request);
        if let Admission::Admitted { authenticated } = verdict {
            let h = host.expect("no Host is refused").trim().to_ascii_lowercase();
            let name = h.strip_suffix(&format!(":{PORT}")).expect("our port");
            assert!(name == "localhost" || name == "127.0.0.1" || name == "[::1]", "admitted Host {host:?}");
            if let Some(o) = origin {
                assert_eq!(o, "http://allowed.test");
            }
            if authenticated {
                match token_in {
                    TokenIn::Query(_) => assert!(query.is_some_and(|q| q.contains("auth="))),
                    TokenIn::Header(_) => assert_eq!(token_header, Some(TOKEN)),
                    TokenIn::Scheme { .. } => assert_eq!(token_header, Some(format!("Bearer {TOKEN}").as_str())),
                }
            }
        }
    }
    // The right token with a loopback Host and no Origin is always let in.
    let q = format!("auth={TOKEN}&{}", query.unwrap_or(""));
    let host = format!("localhost:{PORT}");
    let ok = policy(TokenIn::Query("auth")).admit(&Request {
        host: Some(&host),
        origin: None,
        query: Some(&q),
        token_header: None,
    });
    assert_eq!(ok, Admission::Admitted { authenticated: true }, "query {q:?}");
});
