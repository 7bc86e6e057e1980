//! `/mcp` over HTTP/1.1 (MCP Streamable HTTP, as Gemini CLI 0.61's client
//! speaks it): who may ask (Host, Origin, bearer token), the limits, and
//! the three methods: POST (JSON-RPC; `initialize` makes a session), GET
//! (the session's SSE stream), DELETE (ends the session).

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::Value;

use super::server::GeminiServer;
use super::sessions::{Refused, Session};
use super::sse::{self, Body, Feeds};
use super::tools;
use crate::amp::connection::budget_cost;
use crate::amp::token::tokens_match;
use crate::core::log;
use crate::core::review::ReviewEnd;
use crate::mcp;

/// The largest request body: `openDiff` carries a whole file, and a review
/// shows at most `core::review::MAX_REVIEW_BYTES` (16 MiB) of the original.
pub const MAX_BODY_BYTES: usize = 32 * 1024 * 1024;
/// Requests being answered at once, all sessions together; one more is
/// refused (503) rather than queued.
pub const MAX_REQUESTS_IN_FLIGHT: usize = 16;

const SESSION_HEADER: &str = "mcp-session-id";

/// Whether the request may be served at all: `Err((status, reason))`.
/// Browsers are kept out (any `Origin`), and so are DNS-rebinding pages
/// (a `Host` other than our loopback address and port).
pub fn admit(headers: &HeaderMap, port: u16, token: &str) -> Result<(), (StatusCode, String)> {
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or_default();
    let (name, host_port) = host.rsplit_once(':').unwrap_or((host, ""));
    let loopback = name == "127.0.0.1" || name.eq_ignore_ascii_case("localhost");
    if !loopback || host_port != port.to_string() {
        return Err((StatusCode::FORBIDDEN, format!("Host '{}' is not this server", log::untrusted(host))));
    }
    if headers.contains_key(header::ORIGIN) {
        return Err((StatusCode::FORBIDDEN, "requests with an Origin are not allowed".into()));
    }
    let given =
        headers.get(header::AUTHORIZATION).and_then(|h| h.to_str().ok()).and_then(|h| h.strip_prefix("Bearer "));
    // Compared in constant time even when absent.
    if !tokens_match(token, given.unwrap_or("")) || given.is_none() {
        return Err((StatusCode::UNAUTHORIZED, "missing or wrong bearer token".into()));
    }
    Ok(())
}

fn plain(status: StatusCode, text: &str) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(format!("{text}\n"))).boxed_unsync());
    *r.status_mut() = status;
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    r
}

fn json(status: StatusCode, text: String) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(text)).boxed_unsync());
    *r.status_mut() = status;
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

fn refused(why: Refused) -> Response<Body> {
    match why {
        Refused::Unknown => plain(StatusCode::NOT_FOUND, "no such session"),
        Refused::Full => plain(StatusCode::SERVICE_UNAVAILABLE, "too many sessions or streams"),
        Refused::StreamOpen => plain(StatusCode::CONFLICT, "the session's stream is open already"),
    }
}

/// Serves one request.
pub async fn handle(req: Request<Incoming>, server: Arc<GeminiServer>) -> Result<Response<Body>, Infallible> {
    let mut response = route(req, &server).await;
    // Node's fetch keeps no idle socket whose server says it closes it
    // within its own threshold: no request races our header timeout.
    response.headers_mut().insert("keep-alive", HeaderValue::from_static("timeout=1"));
    Ok(response)
}

async fn route(req: Request<Incoming>, server: &Arc<GeminiServer>) -> Response<Body> {
    if req.uri().path() != "/mcp" {
        return plain(StatusCode::NOT_FOUND, "not found (the MCP endpoint is /mcp)");
    }
    if let Err((status, reason)) = admit(req.headers(), server.port, &server.token) {
        log::limited("gemini refused", log::Level::Warn, format!("gemini: refused a request: {reason}"));
        return plain(status, &reason);
    }
    let session_id = req.headers().get(SESSION_HEADER).and_then(|h| h.to_str().ok()).map(str::to_owned);
    match (req.method().clone(), session_id) {
        (Method::POST, id) => post(req, id, server).await,
        (Method::GET, Some(id)) => match server.sessions.open_stream(&id) {
            Ok(inbox) => {
                log::info("gemini: a client opened its event stream");
                let core = &server.core;
                let feeds = Feeds {
                    selection: core.selection.subscribe(),
                    visible: core.visible_files.subscribe(),
                    interval: std::time::Duration::from_millis(core.options.selection_interval_ms),
                    keepalive: std::time::Duration::from_millis(core.options.ping_interval_ms),
                    closing: core.closing.clone(),
                };
                let mut r = Response::new(sse::stream(inbox, feeds));
                let h = r.headers_mut();
                h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
                h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
                r
            }
            Err(why) => refused(why),
        },
        (Method::DELETE, Some(id)) => {
            if server.sessions.end(&id) {
                log::info("gemini: a client ended its session");
                plain(StatusCode::OK, "session ended")
            } else {
                refused(Refused::Unknown)
            }
        }
        (Method::GET | Method::DELETE, None) => plain(StatusCode::BAD_REQUEST, "Mcp-Session-Id header required"),
        _ => {
            let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, "use POST, GET or DELETE");
            r.headers_mut().insert(header::ALLOW, HeaderValue::from_static("POST, GET, DELETE"));
            r
        }
    }
}

async fn post(req: Request<Incoming>, session_id: Option<String>, server: &Arc<GeminiServer>) -> Response<Body> {
    let declared = req.headers().get(header::CONTENT_LENGTH).and_then(|h| h.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        return plain(StatusCode::PAYLOAD_TOO_LARGE, &format!("the body is over {MAX_BODY_BYTES} bytes"));
    }
    let Ok(in_flight) = server.in_flight.clone().try_acquire_owned() else {
        return plain(StatusCode::SERVICE_UNAVAILABLE, "busy: too many requests in flight");
    };
    let body = match Limited::new(req.into_body(), MAX_BODY_BYTES).collect().await {
        Ok(body) => body.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            return plain(StatusCode::PAYLOAD_TOO_LARGE, &format!("the body is over {MAX_BODY_BYTES} bytes"))
        }
        Err(_) => return plain(StatusCode::BAD_REQUEST, "the body could not be read"),
    };
    // Every protocol's requests share one in-flight byte budget.
    let cost = budget_cost(body.len(), server.core.options.max_inflight_bytes);
    let Ok(held) = server.core.budget.clone().try_acquire_many_owned(cost) else {
        return plain(StatusCode::SERVICE_UNAVAILABLE, "busy: too many bytes of requests in flight");
    };
    let text = String::from_utf8_lossy(&body);
    let (id, method, params) = match mcp::decode(&text) {
        Ok(mcp::Incoming::Request { id, method, params }) => (id, method, params),
        // Notifications (notifications/initialized) and answers: accepted.
        Ok(_) => return plain(StatusCode::ACCEPTED, ""),
        Err(bad) => return json(StatusCode::BAD_REQUEST, mcp::error(&bad.id, bad.code, &bad.message)),
    };
    let (session, new) = if method == "initialize" {
        match server.sessions.create() {
            Ok(s) => {
                close_reviews_when_ended(server, &s);
                (s, true)
            }
            Err(why) => return refused(why),
        }
    } else {
        match session_id.as_deref().map(|id| server.sessions.get(id)) {
            Some(Ok(s)) => (s, false),
            Some(Err(why)) => return refused(why),
            None => return plain(StatusCode::BAD_REQUEST, "Mcp-Session-Id header required"),
        }
    };
    let reply = answer(server, &session, &id, &method, &params).await;
    drop((in_flight, held));
    let mut r = json(StatusCode::OK, reply);
    if new {
        log::info(format!("gemini: a client started a session ({} sessions)", server.sessions.count()));
        if let Ok(v) = HeaderValue::from_str(&session.id) {
            r.headers_mut().insert(SESSION_HEADER, v);
        }
    }
    r
}

/// When `session` ends (DELETE, or evicted for a newer one), nobody waits
/// for its reviews' decisions any more: they close, and the user is told.
fn close_reviews_when_ended(server: &Arc<GeminiServer>, session: &Arc<Session>) {
    let (ended, closing) = (session.ended.clone(), server.core.closing.clone());
    let (editor, owner) = (server.core.editor.clone(), session.owner);
    server.core.spawn(async move {
        tokio::select! {
            () = ended.cancelled() => {
                // A stopping server closes every review itself, and its
                // main thread waits for this task: no editor call then.
                if !closing.is_cancelled() {
                    let _ = editor.close_reviews(owner, ReviewEnd::Disconnected).await;
                }
            }
            () = closing.cancelled() => {}
        }
    });
}

async fn answer(
    server: &Arc<GeminiServer>,
    session: &Arc<Session>,
    id: &Value,
    method: &str,
    params: &Value,
) -> String {
    let target = session.clone();
    let notify: tools::Notify = Arc::new(move |method, params| {
        if !target.send(mcp::notification(method, &params)) {
            log::warn(format!("gemini: {method} dropped: the client's queue is full"));
        }
    });
    let core = server.core.clone();
    let spawn = move |task: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>| {
        core.spawn(task);
    };
    let cx = tools::Context {
        editor: server.core.editor.clone(),
        owner: session.owner,
        workspace_folders: server.core.workspace_folders(),
        diffs: server.diffs.clone(),
        notify,
        spawn: &spawn,
    };
    crate::log_debug!("gemini: {method} {}", log::untrusted(&params.to_string()));
    match tools::answer(method, params, &cx).await {
        Ok(result) => mcp::result(id, result),
        Err((code, message)) => {
            crate::log_debug!("gemini: {method} failed: {message}");
            mcp::error(id, code, &message)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn loopback_host_with_our_port_no_origin_and_the_bearer_token() {
        let ok = [("host", "127.0.0.1:9"), ("authorization", "Bearer tok")];
        assert_eq!(admit(&headers(&ok), 9, "tok"), Ok(()));
        assert_eq!(admit(&headers(&[("host", "LOCALHOST:9"), ok[1]]), 9, "tok"), Ok(()));
        for host in ["127.0.0.1:10", "127.0.0.1", "evil.test:9", "127.0.0.2:9", "[::1]:9", ""] {
            let status = admit(&headers(&[("host", host), ok[1]]), 9, "tok").unwrap_err().0;
            assert_eq!(status, StatusCode::FORBIDDEN, "{host}");
        }
        let origin = admit(&headers(&[ok[0], ok[1], ("origin", "http://127.0.0.1:9")]), 9, "tok");
        assert_eq!(origin.unwrap_err().0, StatusCode::FORBIDDEN);
        for auth in ["Bearer tok2", "Bearer ", "tok", "bearer tok"] {
            let status = admit(&headers(&[ok[0], ("authorization", auth)]), 9, "tok").unwrap_err().0;
            assert_eq!(status, StatusCode::UNAUTHORIZED, "{auth}");
        }
        assert_eq!(admit(&headers(&[ok[0]]), 9, "tok").unwrap_err().0, StatusCode::UNAUTHORIZED);
    }

    #[test]
    fn events_are_sse_messages() {
        assert_eq!(sse::event("{}"), Bytes::from("event: message\ndata: {}\n\n"));
    }
}
