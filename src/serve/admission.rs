//! Who may talk to a front-end: one policy for every protocol, checked on
//! each WebSocket upgrade and on each HTTP request.
//!
//! Browsers are kept out (a page could otherwise talk to a loopback port):
//! any `Origin` header is refused unless allow-listed (`server.allowed_origins`),
//! and the `Host` must be a loopback name (`localhost`, `127.0.0.1`, `[::1]`)
//! followed by the port the client connected to, which stops DNS-rebinding
//! pages (their Host is their own domain) and requests relayed from another
//! port. On a Unix socket there is no port: the name alone is checked.
//! The token is compared in constant time; where a protocol carries it
//! (a query parameter, a header, `<scheme> <token>` in a header) is the
//! protocol's choice. A wrong token is not a refusal here: each transport
//! says it its own way (Amp's CLI only explains a close frame after a
//! successful upgrade; HTTP answers 401).

use super::token::tokens_match;
use crate::core::log::untrusted;

/// What a request carried, as plain strings.
#[derive(Debug, Default, Clone)]
pub struct Request<'a> {
    pub host: Option<&'a str>,
    pub origin: Option<&'a str>,
    /// The request target's query string, without `?`.
    pub query: Option<&'a str>,
    /// The value of the header named by the policy's [`TokenIn`], if it
    /// names one.
    pub token_header: Option<&'a str>,
}

/// Where a protocol's client presents the token of its discovery file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenIn {
    /// A query parameter of the URL (Amp: `?auth=`).
    Query(&'static str),
    /// A header holding the token (Claude Code: `x-claude-code-ide-authorization`).
    Header(&'static str),
    /// A header holding `<scheme> <token>` (Gemini: `Authorization: Bearer`,
    /// Copilot CLI: `Authorization: Nonce`).
    Scheme { header: &'static str, scheme: &'static str },
}

impl TokenIn {
    /// The header that carries the token, if it is one.
    pub fn header(&self) -> Option<&'static str> {
        match *self {
            TokenIn::Query(_) => None,
            TokenIn::Header(name) | TokenIn::Scheme { header: name, .. } => Some(name),
        }
    }
}

/// The verdict on a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Served; `authenticated` says whether the token matched.
    Admitted { authenticated: bool },
    /// Refused (HTTP 403) for this reason, which quotes the peer's header
    /// cut and escaped.
    Forbidden(String),
}

/// One front-end's admission rules.
#[derive(Debug, Clone)]
pub struct Policy {
    pub token: String,
    pub token_in: TokenIn,
    pub allowed_origins: Vec<String>,
    /// The port a TCP listener is bound to; `None` on a Unix socket.
    pub port: Option<u16>,
}

impl Policy {
    pub fn admit(&self, req: &Request<'_>) -> Admission {
        match req.host {
            Some(host) if is_loopback_host(host, self.port) => {}
            Some(host) => {
                return Admission::Forbidden(format!(
                    "Host '{}' is not this server's loopback address",
                    untrusted(host)
                ))
            }
            None => return Admission::Forbidden("missing Host header".into()),
        }
        if let Some(origin) = req.origin {
            if !self.allowed_origins.iter().any(|allowed| allowed == origin) {
                return Admission::Forbidden(format!("Origin '{}' is not allowed", untrusted(origin)));
            }
        }
        let given = match self.token_in {
            TokenIn::Query(name) => req.query.and_then(|q| query_param(q, name)),
            TokenIn::Header(_) => req.token_header.map(str::to_owned),
            TokenIn::Scheme { scheme, .. } => req
                .token_header
                .and_then(|v| v.split_once(' ').filter(|(s, _)| *s == scheme).map(|(_, t)| t.to_owned())),
        };
        // Compared in constant time, a missing token as an empty one.
        let matches = tokens_match(&self.token, given.as_deref().unwrap_or(""));
        Admission::Admitted { authenticated: matches && given.is_some() }
    }
}

/// `localhost`, `127.0.0.1` or `[::1]`, then `:port` when `port` is given
/// (a TCP listener's), or any port or none when it is not (a Unix socket).
fn is_loopback_host(host: &str, port: Option<u16>) -> bool {
    let host = host.trim();
    let (name, tail) = if let Some(rest) = host.strip_prefix('[') {
        match rest.split_once(']') {
            Some((inner, tail)) => (inner, tail),
            None => return false,
        }
    } else {
        match host.find(':') {
            Some(i) => host.split_at(i),
            None => (host, ""),
        }
    };
    let name_ok = name.eq_ignore_ascii_case("localhost") || name == "127.0.0.1" || name == "::1";
    let port_ok = match port {
        Some(port) => tail.strip_prefix(':') == Some(&port.to_string()),
        None => tail.is_empty() || is_port(tail),
    };
    name_ok && port_ok
}

fn is_port(tail: &str) -> bool {
    tail.strip_prefix(':').is_some_and(|p| !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()))
}

/// The decoded value of `name` in a query string, as a browser's
/// `URLSearchParams` reads it (`+` is a space, bad escapes stay as written).
fn query_param(query: &str, name: &str) -> Option<String> {
    form_urlencoded::parse(query.as_bytes()).find(|(k, _)| k == name).map(|(_, v)| v.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(token_in: TokenIn) -> Policy {
        Policy { token: "tok-en_1".into(), token_in, allowed_origins: vec![], port: Some(9) }
    }

    fn req<'a>(host: Option<&'a str>, origin: Option<&'a str>, query: Option<&'a str>) -> Request<'a> {
        Request { host, origin, query, token_header: None }
    }

    const YES: Admission = Admission::Admitted { authenticated: true };
    const NO: Admission = Admission::Admitted { authenticated: false };

    #[test]
    fn loopback_names_with_our_port_only() {
        for h in ["localhost:9", "LOCALHOST:9", "127.0.0.1:9", "[::1]:9", " 127.0.0.1:9 "] {
            assert!(is_loopback_host(h, Some(9)), "{h}");
        }
        for h in [
            "localhost",
            "127.0.0.1",
            "[::1]",
            "localhost:1",
            "127.0.0.1:10",
            "localhost:",
            "evil.test:9",
            "localhost.evil.test:9",
            "127.0.0.2:9",
            "[::2]:9",
            "[::1]x",
            "localhost:9x",
            "",
        ] {
            assert!(!is_loopback_host(h, Some(9)), "{h}");
        }
        // A Unix socket has no port to compare.
        for h in ["localhost", "localhost:80", "[::1]", "127.0.0.1:1"] {
            assert!(is_loopback_host(h, None), "{h}");
        }
        for h in ["evil.test", "localhost:x", "localhost:", "[::1"] {
            assert!(!is_loopback_host(h, None), "{h}");
        }
    }

    #[test]
    fn the_token_decides_authentication_not_admission() {
        let amp = policy(TokenIn::Query("auth"));
        assert_eq!(amp.admit(&req(Some("localhost:9"), None, Some("auth=tok-en_1"))), YES);
        assert_eq!(amp.admit(&req(Some("localhost:9"), None, Some("x=1&auth=tok%2Den_1"))), YES);
        assert_eq!(amp.admit(&req(Some("localhost:9"), None, Some("auth=nope"))), NO);
        assert_eq!(amp.admit(&req(Some("localhost:9"), None, None)), NO);
        let header = policy(TokenIn::Header("x-claude-code-ide-authorization"));
        let with = Request { host: Some("127.0.0.1:9"), token_header: Some("tok-en_1"), ..Default::default() };
        assert_eq!(header.admit(&with), YES);
        assert_eq!(header.admit(&Request { token_header: Some("tok-en_2"), ..with.clone() }), NO);
        // The query does not stand in for the header, nor the header for the query.
        assert_eq!(header.admit(&req(Some("127.0.0.1:9"), None, Some("auth=tok-en_1"))), NO);
        assert_eq!(amp.admit(&with), NO);
        let bearer = policy(TokenIn::Scheme { header: "authorization", scheme: "Bearer" });
        for (value, verdict) in [
            ("Bearer tok-en_1", YES),
            ("Bearer tok-en_2", NO),
            ("bearer tok-en_1", NO),
            ("Nonce tok-en_1", NO),
            ("tok-en_1", NO),
            ("Bearer ", NO),
        ] {
            let r = Request { host: Some("127.0.0.1:9"), token_header: Some(value), ..Default::default() };
            assert_eq!(bearer.admit(&r), verdict, "{value}");
        }
        let empty = Policy { token: String::new(), ..bearer };
        assert_eq!(empty.admit(&req(Some("127.0.0.1:9"), None, None)), NO, "no header is no token");
    }

    #[test]
    fn origins_and_foreign_hosts_are_forbidden() {
        let p = policy(TokenIn::Query("auth"));
        assert!(matches!(p.admit(&req(Some("localhost:9"), Some("https://evil.test"), None)), Admission::Forbidden(_)));
        let allowed = Policy { allowed_origins: vec!["http://ok.test".into()], ..p.clone() };
        assert_eq!(allowed.admit(&req(Some("localhost:9"), Some("http://ok.test"), Some("auth=tok-en_1"))), YES);
        assert!(matches!(p.admit(&req(Some("evil.test:9"), None, None)), Admission::Forbidden(_)));
        assert!(matches!(p.admit(&req(None, None, None)), Admission::Forbidden(_)));
    }

    #[test]
    fn refusals_carry_a_cut_escaped_copy_of_the_header() {
        let p = policy(TokenIn::Query("auth"));
        let origin = format!("https://evil.test/\r\nX-Forged: 1\u{1b}[2J{}", "o".repeat(100_000));
        let Admission::Forbidden(why) = p.admit(&req(Some("localhost:9"), Some(&origin), None)) else { panic!() };
        assert!(why.len() < 300, "{}", why.len());
        assert!(!why.contains('\r') && !why.contains('\n') && !why.contains('\u{1b}'), "{why}");
        let host = "h\n".repeat(10_000);
        let Admission::Forbidden(why) = p.admit(&req(Some(&host), None, None)) else { panic!() };
        assert!(why.len() < 700 && !why.contains('\n'), "{}", why.len());
    }

    #[test]
    fn query_values_are_decoded_as_browsers_do() {
        assert_eq!(query_param("x=1&token=a%20b+c", "token").as_deref(), Some("a b c"));
        assert_eq!(query_param("token=100%", "token").as_deref(), Some("100%"));
        assert_eq!(query_param("token=%zz&token=2", "token").as_deref(), Some("%zz"));
        assert_eq!(query_param("token", "token").as_deref(), Some(""));
        assert_eq!(query_param("tok=1", "token"), None);
    }
}
