//! Who may open a WebSocket: the checks made on the HTTP upgrade request.
//!
//! Browsers are kept out (a page could otherwise talk to a loopback port):
//! any `Origin` header is refused unless allow-listed, and the `Host` must be
//! a loopback name (this stops DNS-rebinding pages, whose Host is their own
//! domain). A wrong token is *not* refused here: the Amp CLI only explains
//! the failure to the user when the upgrade succeeds and the socket is then
//! closed with code 1000 and reason `Authentication failed`.

use super::token::tokens_match;
use crate::core::log::untrusted;

/// What the upgrade request carried, as plain strings.
#[derive(Debug, Default, Clone)]
pub struct UpgradeRequest<'a> {
    pub host: Option<&'a str>,
    pub origin: Option<&'a str>,
    /// The request target's query string, without `?`.
    pub query: Option<&'a str>,
    /// The value of the header named by [`TokenIn::Header`], when the
    /// protocol sends its token in a header.
    pub auth_header: Option<&'a str>,
}

/// Where a protocol's client presents the lockfile's token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenIn {
    /// A query parameter of the upgrade URL (Amp: `?auth=`).
    Query(&'static str),
    /// A request header (Claude Code: `x-claude-code-ide-authorization`).
    Header(&'static str),
}

/// The verdict on an upgrade request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Upgrade; `authenticated` says whether the token matched.
    Upgrade { authenticated: bool },
    /// Refuse with HTTP 403 and this reason.
    Forbidden(String),
}

pub fn admit(req: &UpgradeRequest<'_>, token: &str, allowed_origins: &[String]) -> Admission {
    admit_by(req, token, allowed_origins, TokenIn::Query("auth"))
}

/// [`admit`] for a protocol that presents its token `token_in`.
pub fn admit_by(req: &UpgradeRequest<'_>, token: &str, allowed_origins: &[String], token_in: TokenIn) -> Admission {
    match req.host {
        Some(host) if is_loopback_host(host) => {}
        // Whatever the peer sent is cut and escaped: the reason is logged and sent back.
        Some(host) => return Admission::Forbidden(format!("Host '{}' is not a loopback address", untrusted(host))),
        None => return Admission::Forbidden("missing Host header".into()),
    }
    if let Some(origin) = req.origin {
        if !allowed_origins.iter().any(|allowed| allowed == origin) {
            return Admission::Forbidden(format!("Origin '{}' is not allowed", untrusted(origin)));
        }
    }
    let given = match token_in {
        TokenIn::Query(name) => req.query.and_then(|q| query_param(q, name)),
        TokenIn::Header(_) => req.auth_header.map(str::to_owned),
    };
    let authenticated = given.is_some_and(|g| tokens_match(token, &g));
    Admission::Upgrade { authenticated }
}

/// `localhost`, `127.0.0.1` or `[::1]`, with or without a port.
fn is_loopback_host(host: &str) -> bool {
    let host = host.trim();
    let name = if let Some(rest) = host.strip_prefix('[') {
        match rest.split_once(']') {
            Some((inner, tail)) if tail.is_empty() || is_port(tail) => return inner == "::1",
            _ => return false,
        }
    } else {
        match host.split_once(':') {
            Some((name, port)) if is_port(&format!(":{port}")) => name,
            Some(_) => return false,
            None => host,
        }
    };
    name.eq_ignore_ascii_case("localhost") || name == "127.0.0.1"
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

    fn req<'a>(host: Option<&'a str>, origin: Option<&'a str>, query: Option<&'a str>) -> UpgradeRequest<'a> {
        UpgradeRequest { host, origin, query, auth_header: None }
    }

    #[test]
    fn a_header_token_counts_only_where_the_protocol_sends_one() {
        let header = TokenIn::Header("x-claude-code-ide-authorization");
        let with = UpgradeRequest { host: Some("127.0.0.1:9"), auth_header: Some("tok"), ..Default::default() };
        assert_eq!(admit_by(&with, "tok", &[], header), Admission::Upgrade { authenticated: true });
        let wrong = UpgradeRequest { auth_header: Some("tok2"), ..with.clone() };
        assert_eq!(admit_by(&wrong, "tok", &[], header), Admission::Upgrade { authenticated: false });
        // The query does not stand in for the header, nor the header for the query.
        let query = UpgradeRequest { host: Some("127.0.0.1:9"), query: Some("auth=tok"), ..Default::default() };
        assert_eq!(admit_by(&query, "tok", &[], header), Admission::Upgrade { authenticated: false });
        assert_eq!(admit(&with, "tok", &[]), Admission::Upgrade { authenticated: false });
        let foreign = UpgradeRequest { host: Some("evil.test"), ..with };
        assert!(matches!(admit_by(&foreign, "tok", &[], header), Admission::Forbidden(_)));
    }

    #[test]
    fn loopback_hosts_with_any_port() {
        for h in ["localhost", "localhost:8080", "LOCALHOST:1", "127.0.0.1", "127.0.0.1:65535", "[::1]", "[::1]:9"] {
            assert!(is_loopback_host(h), "{h}");
        }
        for h in ["evil.test", "localhost.evil.test", "127.0.0.2", "[::2]:9", "localhost:", "localhost:x", "[::1]x", ""]
        {
            assert!(!is_loopback_host(h), "{h}");
        }
    }

    #[test]
    fn token_decides_authentication_not_admission() {
        let t = "tok-en_1";
        assert_eq!(
            admit(&req(Some("localhost:1"), None, Some("auth=tok-en_1")), t, &[]),
            Admission::Upgrade { authenticated: true }
        );
        assert_eq!(
            admit(&req(Some("localhost:1"), None, Some("x=1&auth=tok%2Den_1")), t, &[]),
            Admission::Upgrade { authenticated: true }
        );
        assert_eq!(
            admit(&req(Some("localhost:1"), None, Some("auth=nope")), t, &[]),
            Admission::Upgrade { authenticated: false }
        );
        assert_eq!(admit(&req(Some("localhost:1"), None, None), t, &[]), Admission::Upgrade { authenticated: false });
    }

    #[test]
    fn origins_and_foreign_hosts_are_forbidden() {
        assert!(matches!(
            admit(&req(Some("localhost"), Some("https://evil.test"), Some("auth=t")), "t", &[]),
            Admission::Forbidden(_)
        ));
        let allowed = vec!["http://ok.test".to_string()];
        assert_eq!(
            admit(&req(Some("localhost"), Some("http://ok.test"), Some("auth=t")), "t", &allowed),
            Admission::Upgrade { authenticated: true }
        );
        assert!(matches!(admit(&req(Some("evil.test"), None, Some("auth=t")), "t", &[]), Admission::Forbidden(_)));
        assert!(matches!(admit(&req(None, None, Some("auth=t")), "t", &[]), Admission::Forbidden(_)));
    }

    #[test]
    fn refusals_carry_a_cut_escaped_copy_of_the_header() {
        let origin = format!("https://evil.test/\r\nX-Forged: 1\u{1b}[2J{}", "o".repeat(100_000));
        let Admission::Forbidden(why) = admit(&req(Some("localhost"), Some(&origin), None), "t", &[]) else { panic!() };
        assert!(why.len() < 300, "{}", why.len());
        assert!(!why.contains('\r') && !why.contains('\n') && !why.contains('\u{1b}'), "{why}");
        let host = "h\n".repeat(10_000);
        let Admission::Forbidden(why) = admit(&req(Some(&host), None, None), "t", &[]) else { panic!() };
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
