//! MCP over Streamable HTTP (HTTP/1.1, hyper), for every front-end that
//! speaks it (Gemini CLI, Qwen Code, GitHub Copilot CLI, the editor's own
//! MCP server), on loopback TCP or a private Unix socket. One endpoint,
//! `/mcp`: POST carries JSON-RPC (`initialize` makes a session), GET opens
//! the session's SSE stream, DELETE ends the session.
//!
//! Who may ask, and the limits, the same for every front-end (each a named
//! constant, in `:help amp-limits`):
//! - every request passes the session's one admission policy
//!   (`serve::admission`: loopback Host with our port, no Origin unless
//!   allow-listed, the token); a refused request is answered (403, 401) and
//!   its connection closed, and a connection holds a handshake slot until
//!   its first admitted request, so token-less peers hold a bounded number
//!   of descriptors whatever they send;
//! - request headers: [`MAX_HEADER_BYTES`], within `server.handshake_timeout_ms`
//!   (idle keep-alive time included), else 431 or the connection closes;
//! - a request body: `server.max_frame_bytes` (the largest message of any
//!   front-end, 64 MiB by default; 413), all of it within
//!   [`BODY_TIMEOUT`] (408, and the connection closes), its share of the
//!   session's in-flight byte budget taken before it is read (a body that
//!   does not fit waits for room, within the same deadline);
//! - a client that reads nothing for `write_deadline::WRITE_TIMEOUT` (15 s)
//!   while an answer or its event stream waits: the connection closes;
//! - requests being answered, per front-end: [`MAX_REQUESTS_IN_FLIGHT`]
//!   (503); a request that waits for the user gives its place back;
//! - admitted connections, per front-end: [`MAX_CONNECTIONS`] (503, closed);
//! - sessions and streams: `sessions::MAX_SESSIONS`, `MAX_SSE_STREAMS`,
//!   `SESSION_QUEUE`.

pub mod sessions;
pub mod sse;

use crate::core::sync::LockExt;
use std::convert::Infallible;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use self::sessions::{Refused, Session, Sessions, STREAM_GRACE};
use self::sse::{Body, Feed};
use super::admission::{Admission, Policy, Request as Admitted};
use super::budget::{Held, Share};
use super::endpoint::Endpoint;
use super::hub::Hub;
use super::listener::{Accept, HandshakeSlot};
use super::registry::Agent;
use super::write_deadline::{Abort, WriteDeadline, WRITE_TIMEOUT};
use crate::core::log;
use crate::core::review::ReviewEnd;
use crate::mcp;

/// A request's start line and headers.
pub const MAX_HEADER_BYTES: usize = 64 * 1024;
/// A request's whole body must arrive within this long.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(10);
/// Requests being answered at once, all sessions of a front-end together;
/// one more is refused (503) rather than queued.
pub const MAX_REQUESTS_IN_FLIGHT: usize = 16;
/// Admitted connections at once, per front-end (each client keeps one or
/// two: its requests and its stream).
pub const MAX_CONNECTIONS: usize = 64;

const SESSION_HEADER: &str = "mcp-session-id";

/// What an MCP-over-HTTP front-end adds: who it serves, its admission
/// rules, its tools, and its feed of the editor's context.
pub trait Protocol: Send + Sync + 'static {
    /// Whom it serves, the session's hub, who may connect.
    fn endpoint(&self) -> &Endpoint;
    fn http(&self) -> &McpHttp;
    /// The answer to one request of `session`; `held` (the request's place
    /// and bytes) is released before waiting for the user.
    fn request(
        self: &Arc<Self>,
        session: &Arc<Session>,
        method: &str,
        params: Value,
        held: &mut Held,
    ) -> impl Future<Output = Result<Value, mcp::RequestError>> + Send;
    /// The notifications about the editor's state for a stream of `session`
    /// that opens now.
    fn feed(self: &Arc<Self>, _session: &Arc<Session>) -> Option<Feed> {
        None
    }
    /// The answer to a request sent without a session (other than
    /// `initialize`); `None`: 400, a session is required.
    fn sessionless(&self, _method: &str) -> Option<mcp::RequestError> {
        None
    }
}

/// A front-end's HTTP state: its sessions and its limits' counters.
pub struct McpHttp {
    pub sessions: Sessions,
    in_flight: Arc<Semaphore>,
    connections: Arc<Semaphore>,
}

impl Default for McpHttp {
    fn default() -> Self {
        Self {
            sessions: Sessions::default(),
            in_flight: Arc::new(Semaphore::new(MAX_REQUESTS_IN_FLIGHT)),
            connections: Arc::new(Semaphore::new(MAX_CONNECTIONS)),
        }
    }
}

/// A connection's standing: pending (holding its handshake slot) until its
/// first admitted request, then holding one of the admitted places.
/// (The variants' values are held, never read: dropping them frees the
/// slot or the place.)
#[allow(dead_code)]
enum Standing {
    Pending(HandshakeSlot),
    Admitted(OwnedSemaphorePermit),
    Vacant,
}

/// Accepts `protocol`'s connections on `listener` (loopback TCP or a Unix
/// socket) until the session stops, as one of its tasks; its sessions end
/// with it (their event streams close).
pub fn spawn_accepting<P, L>(protocol: Arc<P>, listener: L)
where
    P: Protocol,
    L: Accept,
    L::Stream: Abort,
{
    let hub = protocol.endpoint().hub.clone();
    let agent = protocol.endpoint().agent.id;
    let serving = protocol.clone();
    let serve = move |stream, slot| serve(serving.clone(), stream, slot);
    let handshakes = hub.handshakes.clone();
    let accepting = hub.clone();
    hub.spawn_detached(async move {
        super::listener::accept_loop(listener, agent, handshakes, &accepting.tasks, serve).await;
        protocol.http().sessions.end_all();
    });
}

/// Serves one accepted connection (TCP or Unix socket) of `protocol`.
pub async fn serve<P, S>(protocol: Arc<P>, stream: S, slot: HandshakeSlot)
where
    P: Protocol,
    S: AsyncRead + AsyncWrite + Abort + Unpin + Send + 'static,
{
    let hub = protocol.endpoint().hub.clone();
    let cancel = slot.cancel.clone();
    let standing = Arc::new(Mutex::new(Standing::Pending(slot)));
    let service = service_fn(move |req| {
        let (protocol, standing) = (protocol.clone(), standing.clone());
        async move { Ok::<_, Infallible>(handle(req, &protocol, &standing).await) }
    });
    let mut builder = http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(hub.handshakes.timeout).max_header_size(MAX_HEADER_BYTES);
    let stream = WriteDeadline::new(stream, WRITE_TIMEOUT);
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    tokio::select! {
        served = conn.as_mut() => {
            if let Err(e) = served {
                crate::log_debug!("mcp: connection ended: {}", log::untrusted(&e.to_string()));
            }
        }
        // Dropped to make room for newer connections (still pending only:
        // an admitted connection's slot is gone, and nothing notifies).
        () = cancel.notified() => {}
        () = hub.tasks.closing.cancelled() => {
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(Duration::from_secs(1), conn).await;
        }
    }
}

fn plain(status: StatusCode, text: &str) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(format!("{text}\n"))).boxed_unsync());
    *r.status_mut() = status;
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    r
}

/// A refusal after which the connection is closed (its peer may not be
/// trusted, or its body was not read).
fn closing(status: StatusCode, text: &str) -> Response<Body> {
    let mut r = plain(status, text);
    r.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
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

async fn handle<P: Protocol>(req: Request<Incoming>, protocol: &Arc<P>, standing: &Mutex<Standing>) -> Response<Body> {
    let agent = protocol.endpoint().agent;
    if let Err((status, reason)) = admit(req.headers(), req.uri().query(), &protocol.endpoint().policy, agent) {
        return closing(status, &reason);
    }
    {
        let mut standing = standing.locked();
        if matches!(*standing, Standing::Pending(_)) {
            // The first admitted request: the slot goes, a place is taken.
            *standing = match protocol.http().connections.clone().try_acquire_owned() {
                Ok(place) => Standing::Admitted(place),
                Err(_) => Standing::Vacant,
            };
        }
        if matches!(*standing, Standing::Vacant) {
            return closing(StatusCode::SERVICE_UNAVAILABLE, "busy: too many connections");
        }
    }
    // An admitted client's requests see the editor's state (read when the
    // first one comes).
    protocol.endpoint().hub.state.context_ready().await;
    let mut response = route(req, protocol).await;
    // Node's fetch keeps no idle socket whose server says it closes it
    // within its own threshold: no request races our header timeout.
    response.headers_mut().insert("keep-alive", HeaderValue::from_static("timeout=1"));
    response
}

/// The admission policy on one request: `Err((status, reason))` when refused.
fn admit(headers: &HeaderMap, query: Option<&str>, policy: &Policy, agent: Agent) -> Result<(), (StatusCode, String)> {
    // A header that is not visible ASCII still counts as present (lossy
    // text): an Origin of raw bytes must be refused, not ignored.
    let header = |name: &str| headers.get(name).map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let (host, origin) = (header("host"), header("origin"));
    let token_header = policy.token_in.header().and_then(header);
    let request =
        Admitted { host: host.as_deref(), origin: origin.as_deref(), query, token_header: token_header.as_deref() };
    let (status, reason) = match policy.admit(&request) {
        Admission::Admitted { authenticated: true } => return Ok(()),
        Admission::Admitted { authenticated: false } => (StatusCode::UNAUTHORIZED, "missing or wrong token".into()),
        Admission::Forbidden(why) => (StatusCode::FORBIDDEN, why),
    };
    log::limited("mcp refused", log::Level::Warn, format!("{}: refused a request: {reason}", agent.id));
    Err((status, reason))
}

async fn route<P: Protocol>(req: Request<Incoming>, protocol: &Arc<P>) -> Response<Body> {
    if req.uri().path() != "/mcp" {
        return plain(StatusCode::NOT_FOUND, "not found (the MCP endpoint is /mcp)");
    }
    let session_id = req.headers().get(SESSION_HEADER).and_then(|h| h.to_str().ok()).map(str::to_owned);
    let sessions = &protocol.http().sessions;
    match (req.method().clone(), session_id) {
        (Method::POST, id) => post(req, id, protocol).await,
        (Method::GET, Some(id)) => open_stream(protocol, &id),
        (Method::DELETE, Some(id)) => {
            if sessions.end(&id, "session ended by the client") {
                log::info(format!("{}: a client ended its session", protocol.endpoint().agent.id));
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

/// `GET /mcp`: the session's event stream. The client counts as connected
/// (the registry) from its first stream until the session ends or its
/// stream stays closed past [`STREAM_GRACE`].
fn open_stream<P: Protocol>(protocol: &Arc<P>, id: &str) -> Response<Body> {
    let hub = protocol.endpoint().hub.clone();
    let agent = protocol.endpoint().agent;
    let on_close = {
        let hub = hub.clone();
        move |session: Arc<Session>| {
            let opened = session.streams_opened();
            let waiting = hub.clone();
            hub.spawn(async move {
                tokio::select! {
                    () = tokio::time::sleep(STREAM_GRACE) => {}
                    () = session.ended.cancelled() => return,
                }
                if session.streams_opened() == opened && session.disconnect("its event stream closed") {
                    close_reviews(&waiting, &session).await;
                }
            });
        }
    };
    let inbox = match protocol.http().sessions.open_stream(id, on_close) {
        Ok(inbox) => inbox,
        Err(why) => return refused(why),
    };
    let session = inbox.session.clone();
    {
        let mut connection = session.connection.locked();
        if connection.is_none() {
            match hub.connect(agent, session.owner) {
                Ok(c) => *connection = Some(c),
                Err(too_many) => return plain(StatusCode::SERVICE_UNAVAILABLE, &too_many.to_string()),
            }
        }
    }
    log::info(format!("{}: a client opened its event stream", agent.id));
    let feed = protocol.feed(&session);
    let keepalive = Duration::from_millis(hub.options.ping_interval_ms);
    let mut r = Response::new(sse::stream(inbox, feed, keepalive, hub.tasks.closing.clone()));
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

async fn post<P: Protocol>(req: Request<Incoming>, session_id: Option<String>, protocol: &Arc<P>) -> Response<Body> {
    let hub = &protocol.endpoint().hub;
    let max = hub.options.max_frame_bytes;
    let declared = req.headers().get(header::CONTENT_LENGTH).and_then(|h| h.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return closing(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!("the body is over {max} bytes (server.max_frame_bytes)"),
        );
    }
    let (body, share) = match tokio::time::timeout(BODY_TIMEOUT, read_body(req.into_body(), declared, hub)).await {
        Ok(Ok(read)) => read,
        Ok(Err(response)) => return response,
        Err(_) => {
            return closing(
                StatusCode::REQUEST_TIMEOUT,
                &format!("the body did not arrive within {} s", BODY_TIMEOUT.as_secs()),
            )
        }
    };
    let Ok(slot) = protocol.http().in_flight.clone().try_acquire_owned() else {
        return plain(StatusCode::SERVICE_UNAVAILABLE, "busy: too many requests in flight");
    };
    let mut held = Held { slot: Some(slot), share };
    let text = String::from_utf8_lossy(&body);
    let (id, method, params) = match mcp::decode(&text) {
        Ok(mcp::Incoming::Request { id, method, params }) => (id, method, params),
        // Notifications (notifications/initialized) and answers: accepted.
        Ok(_) => return plain(StatusCode::ACCEPTED, ""),
        Err(bad) => return json(StatusCode::BAD_REQUEST, mcp::error(&bad.id, bad.code, &bad.message)),
    };
    drop(text);
    drop(body);
    let sessions = &protocol.http().sessions;
    let (session, new) = if method == "initialize" {
        match sessions.create(protocol.endpoint().agent.name) {
            Ok(s) => {
                close_reviews_when_ended(hub, &s);
                (s, true)
            }
            Err(why) => return refused(why),
        }
    } else {
        match session_id.as_deref().map(|id| sessions.get(id)) {
            Some(Ok(s)) => (s, false),
            Some(Err(why)) => return refused(why),
            None => {
                return match protocol.sessionless(&method) {
                    Some(e) => json(StatusCode::OK, mcp::failed(&id, &e)),
                    None => plain(StatusCode::BAD_REQUEST, "Mcp-Session-Id header required"),
                }
            }
        }
    };
    let agent = protocol.endpoint().agent.id;
    crate::log_debug!("{agent}: {method} {}", log::untrusted(&params.to_string()));
    let reply = match protocol.request(&session, &method, params, &mut held).await {
        Ok(result) => mcp::result(&id, result),
        Err(e) => {
            crate::log_debug!("{agent}: {method} failed: {e}");
            mcp::failed(&id, &e)
        }
    };
    drop(held);
    let mut r = json(StatusCode::OK, reply);
    if new {
        log::info(format!("{agent}: a client started a session ({} sessions)", sessions.count()));
        if let Ok(v) = HeaderValue::from_str(&session.id) {
            r.headers_mut().insert(SESSION_HEADER, v);
        }
    }
    r
}

/// When `session` ends (DELETE, evicted for a newer one), nobody waits for
/// its reviews' decisions any more: they close, and the user is told.
fn close_reviews_when_ended(hub: &Arc<Hub>, session: &Arc<Session>) {
    let (hub_, session) = (hub.clone(), session.clone());
    hub.spawn(async move {
        tokio::select! {
            () = session.ended.cancelled() => close_reviews(&hub_, &session).await,
            () = hub_.tasks.closing.cancelled() => {}
        }
    });
}

/// Closes `session`'s pending reviews, told as its agent having gone. (A
/// stopping session closes every review itself, and its main thread waits
/// for this task: no editor call then.)
async fn close_reviews(hub: &Hub, session: &Session) {
    if !hub.tasks.is_closing() {
        let _ = hub.editor.close_reviews(session.owner, ReviewEnd::Disconnected).await;
    }
}

/// A request's body (at most `server.max_frame_bytes`) and its share of
/// the byte budget, taken before the bytes are read: the declared length's
/// cost, or for a chunked body (Copilot CLI sends those) the largest
/// body's, given back down to the real size once it is in. Each share is
/// taken whole, with nothing else held, so readers waiting for room can
/// never hold parts of the budget that together block each other.
async fn read_body(body: Incoming, declared: Option<u64>, hub: &Hub) -> Result<(Bytes, Option<Share>), Response<Body>> {
    let max = hub.options.max_frame_bytes;
    let expected = declared.map_or(max, |n| n as usize);
    let Ok(mut share) = hub.budget.take(expected).await else {
        return Err(closing(StatusCode::SERVICE_UNAVAILABLE, "shutting down"));
    };
    let mut bytes = BytesMut::new();
    let mut body = body;
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else {
            return Err(closing(StatusCode::BAD_REQUEST, "the body could not be read"));
        };
        let Ok(data) = frame.into_data() else { continue };
        if bytes.len() + data.len() > max {
            return Err(closing(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!("the body is over {max} bytes (server.max_frame_bytes)"),
            ));
        }
        bytes.extend_from_slice(&data);
    }
    share.shrink_to(&hub.budget, bytes.len());
    Ok((bytes.freeze(), Some(share)))
}
