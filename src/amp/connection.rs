//! One client, from the upgrade to the close.
//!
//! A single task owns the socket: it reads frames, writes queued messages and
//! keeps the connection alive, and every way the loop can end is a branch of
//! one `select!`. Requests run in their own tasks so a slow `editFile` does
//! not hold up a `ping`; at most [`MAX_IN_FLIGHT`] run at once per client,
//! and the socket is not read while that many are pending, so a flood is
//! slowed by TCP instead of growing memory.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::timeout;
use tokio_tungstenite::tungstenite::error::{CapacityError, Error as WsError};
use tokio_tungstenite::tungstenite::handshake::server::{
    ErrorResponse, Request as HttpRequest, Response as HttpResponse,
};
use tokio_tungstenite::tungstenite::http::StatusCode;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{CloseCode, Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::frame::Frame;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

use super::context::{PublishedSelection, PublishedVisibleFiles};
use super::handshake::{admit_by, Admission, TokenIn, UpgradeRequest};
use super::json_text::{JsonText, Piecewise};
use super::protocol::{encode_notification, Dialect};
use super::server::{ClientHandle, HandshakeSlot, Outgoing, Shared, DIALECT_FLAT, DIALECT_UNKNOWN, DIALECT_WRAPPED};
use crate::core::log;
use crate::core::review::{Owner, ReviewEnd};

const MAX_IN_FLIGHT: usize = 64;
/// A client that accepts no bytes for this long is dropped.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(15);
const CLOSE_GRACE: Duration = Duration::from_secs(1);
/// Payload bytes per fragment of a long message: under glibc's default mmap
/// threshold, so each piece's buffer is reused heap memory, not fresh pages.
const FRAGMENT_BYTES: usize = 64 * 1024;

pub type Ws = WebSocketStream<TcpStream>;

pub async fn serve(stream: TcpStream, shared: Arc<Shared>, slot: HandshakeSlot) {
    // Until the client is admitted it holds a place among the pending
    // handshakes and goes when a newer connection needs the place.
    let cancel = slot.cancel.clone();
    let upgraded = tokio::select! {
        upgraded = upgrade(stream, &shared) => upgraded,
        _ = cancel.notified() => {
            log::limited("handshake dropped", log::Level::Debug, "handshake dropped: too many pending handshakes");
            return;
        }
        () = shared.closing.cancelled() => return,
    };
    let Some((ws, authenticated)) = upgraded else { return };
    if !authenticated {
        log::limited("wrong token", log::Level::Warn, "client rejected: wrong or missing auth token");
        tokio::select! {
            _ = close(ws, CloseCode::Normal, "Authentication failed") => {}
            _ = cancel.notified() => {}
        }
        return;
    }
    drop(slot);
    let (outbound, queue) = mpsc::channel(shared.options.send_queue);
    let dialect = Arc::new(AtomicU8::new(DIALECT_UNKNOWN));
    let kick = Arc::new(Notify::new());
    let admitted = {
        let mut clients = shared.clients.lock().unwrap_or_else(|p| p.into_inner());
        (clients.len() < shared.options.max_clients).then(|| {
            let id = shared.next_client_id.fetch_add(1, Ordering::Relaxed);
            clients
                .insert(id, ClientHandle { outbound: outbound.clone(), dialect: dialect.clone(), kick: kick.clone() });
            (id, clients.len())
        })
    };
    let Some((id, count)) = admitted else {
        log::limited("too many clients", log::Level::Warn, "client rejected: too many clients");
        close(ws, CloseCode::Again, "Too many clients").await;
        return;
    };
    log::info(format!("client {id} connected ({count} connected)"));
    shared.editor.event("AmpClientConnected", json!({ "id": id, "clients": count }));
    // Its reviews are its own, and go with it.
    let owner = Owner::new("Amp");

    // What a newly connected client needs first.
    let _ = outbound.try_send(encode_notification("pluginMetadata", Dialect::Flat, &shared.plugin_metadata()).into());

    let pusher = shared.spawn(push_context(shared.clone(), outbound.clone(), dialect.clone()));
    let ended = run(ws, &shared, outbound, queue, dialect, kick, owner).await;
    pusher.abort();
    // (A server that stops closes every review itself, and its main thread
    // is waiting for this task: no editor call then.)
    if !shared.closing.is_cancelled() {
        let _ = shared.editor.close_reviews(owner, ReviewEnd::Disconnected).await;
    }
    let count = {
        let mut clients = shared.clients.lock().unwrap_or_else(|p| p.into_inner());
        clients.remove(&id);
        clients.len()
    };
    log::info(format!("client {id} disconnected: {ended} ({count} connected)"));
    shared.editor.event("AmpClientDisconnected", json!({ "id": id, "clients": count, "reason": ended }));
}

/// Performs the HTTP upgrade with the admission checks; `None` if refused or broken.
async fn upgrade(stream: TcpStream, shared: &Shared) -> Option<(Ws, bool)> {
    let policy = UpgradePolicy {
        token: &shared.token,
        allowed_origins: &shared.options.allowed_origins,
        max_frame_bytes: shared.options.max_frame_bytes,
        handshake_timeout_ms: shared.options.handshake_timeout_ms,
        token_in: TokenIn::Query("auth"),
        subprotocol: None,
    };
    upgrade_with(stream, &policy).await
}

/// What one protocol's server admits at the upgrade: every protocol has the
/// same checks (loopback Host, Origin, token compared in constant time,
/// deadline, frame limit); they differ in where the token is and in the
/// WebSocket subprotocol they answer.
pub struct UpgradePolicy<'a> {
    pub token: &'a str,
    pub allowed_origins: &'a [String],
    pub max_frame_bytes: usize,
    pub handshake_timeout_ms: u64,
    pub token_in: TokenIn,
    /// Answered in `Sec-WebSocket-Protocol` when the client offers it.
    pub subprotocol: Option<&'static str>,
}

/// The upgrade under `policy`: the socket and whether the client presented
/// the token; `None` if refused or broken.
pub async fn upgrade_with(stream: TcpStream, policy: &UpgradePolicy<'_>) -> Option<(Ws, bool)> {
    let config = WebSocketConfig {
        max_message_size: Some(policy.max_frame_bytes),
        max_frame_size: Some(policy.max_frame_bytes),
        ..Default::default()
    };
    let mut authenticated = false;
    // The error type is tungstenite's (its Callback trait), boxing is not ours to choose.
    #[allow(clippy::result_large_err)]
    let check = |req: &HttpRequest, mut resp: HttpResponse| -> Result<HttpResponse, ErrorResponse> {
        // A header that is not visible ASCII still counts as present (lossy
        // text): an Origin of raw bytes must be refused, not ignored.
        let header = |name: &str| req.headers().get(name).map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        let (host, origin) = (header("host"), header("origin"));
        let auth_header = match policy.token_in {
            TokenIn::Header(name) => header(name),
            TokenIn::Query(_) => None,
        };
        let upgrade = UpgradeRequest {
            host: host.as_deref(),
            origin: origin.as_deref(),
            query: req.uri().query(),
            auth_header: auth_header.as_deref(),
        };
        match admit_by(&upgrade, policy.token, policy.allowed_origins, policy.token_in) {
            Admission::Upgrade { authenticated: ok } => {
                authenticated = ok;
                if let Some(wanted) = policy.subprotocol {
                    let offered = header("sec-websocket-protocol").unwrap_or_default();
                    if offered.split(',').any(|p| p.trim() == wanted) {
                        resp.headers_mut()
                            .insert("sec-websocket-protocol", wanted.parse().expect("a valid header value"));
                    }
                }
                Ok(resp)
            }
            Admission::Forbidden(why) => {
                // `why` quotes the peer's headers cut and escaped (handshake.rs).
                log::limited("handshake refused", log::Level::Warn, format!("handshake refused: {why}"));
                let mut refusal = ErrorResponse::new(Some(format!("Forbidden: {why}\n")));
                *refusal.status_mut() = StatusCode::FORBIDDEN;
                Err(refusal)
            }
        }
    };
    let deadline = Duration::from_millis(policy.handshake_timeout_ms);
    match timeout(deadline, tokio_tungstenite::accept_hdr_async_with_config(stream, check, Some(config))).await {
        Ok(Ok(ws)) => Some((ws, authenticated)),
        Ok(Err(e)) => {
            log::limited(
                "handshake failed",
                log::Level::Debug,
                format!("handshake failed: {}", log::untrusted(&e.to_string())),
            );
            None
        }
        Err(_) => {
            log::limited("handshake timed out", log::Level::Debug, "handshake timed out");
            None
        }
    }
}

/// The connection's loop; returns why it ended.
async fn run(
    mut ws: Ws,
    shared: &Arc<Shared>,
    outbound: mpsc::Sender<Outgoing>,
    mut queue: mpsc::Receiver<Outgoing>,
    dialect: Arc<AtomicU8>,
    kick: Arc<Notify>,
    owner: Owner,
) -> String {
    let in_flight = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let ping_every = Duration::from_millis(shared.options.ping_interval_ms);
    let mut keepalive = tokio::time::interval_at(tokio::time::Instant::now() + ping_every, ping_every);
    let mut last_heard = Instant::now();
    if shared.closing.is_cancelled() {
        close(ws, CloseCode::Away, "Neovim is shutting down").await;
        return "server shutting down".into();
    }
    // A frame read while the in-flight budget was spent, and its wait for
    // room: no further frame is read meanwhile (back-pressure through TCP),
    // but the queue keeps being sent, which is what gives room back.
    let mut over_budget: Option<(String, BudgetWait)> = None;
    let spawn_request = |text: String, held: OwnedSemaphorePermit| {
        let permit = in_flight.clone().try_acquire_owned().expect("guarded by available_permits");
        let (shared, outbound, dialect) = (shared.clone(), outbound.clone(), dialect.clone());
        let server = shared.clone();
        server.spawn(async move {
            let reply = super::requests::answer(&text, &shared, &dialect, owner).await;
            drop(text);
            // Release before queueing: the loop re-checks permits when it drains the queue.
            drop(permit);
            // The frame's bytes stay counted until its answer is sent.
            let _ = outbound.send(Outgoing { text: reply, held: Some(held) }).await;
        });
    };
    loop {
        tokio::select! {
            held = async { over_budget.as_mut().expect("guarded").1.as_mut().await }, if over_budget.is_some() => {
                let (text, _) = over_budget.take().expect("guarded");
                match held {
                    Ok(held) => spawn_request(text, held),
                    Err(_) => return "server shutting down".into(),
                }
            }
            frame = ws.next(), if over_budget.is_none() && in_flight.available_permits() > 0 => {
                last_heard = Instant::now();
                match frame {
                    Some(Ok(Message::Text(text))) => {
                        let cost = budget_cost(text.len(), shared.options.max_inflight_bytes);
                        match shared.budget.clone().try_acquire_many_owned(cost) {
                            Ok(held) => spawn_request(text, held),
                            Err(_) => {
                                log::limited("in-flight budget", log::Level::Info, format!(
                                    "requests in flight reached max_inflight_bytes ({} bytes): reading paused until answers are sent",
                                    shared.options.max_inflight_bytes
                                ));
                                over_budget = Some((text, Box::pin(shared.budget.clone().acquire_many_owned(cost))));
                            }
                        }
                    }
                    Some(Ok(Message::Binary(_))) => {
                        close(ws, CloseCode::Unsupported, "Binary frames are not supported; send JSON in text frames").await;
                        return "sent a binary frame".into();
                    }
                    Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {}
                    Some(Ok(Message::Close(_))) => {
                        // tungstenite queued the reply; send it and let the client hang up.
                        finish(ws).await;
                        return "closed by the client".into();
                    }
                    None => return "closed by the client".into(),
                    Some(Err(WsError::Capacity(CapacityError::MessageTooLong { size, max_size }))) => {
                        let reason = format!("Message too big ({size} bytes; limit {max_size})");
                        close(ws, CloseCode::Size, &reason).await;
                        return reason;
                    }
                    Some(Err(WsError::Utf8)) => {
                        close(ws, CloseCode::Invalid, "Text frame is not valid UTF-8").await;
                        return "sent invalid UTF-8".into();
                    }
                    Some(Err(WsError::Protocol(e))) => {
                        close(ws, CloseCode::Protocol, "Protocol violation").await;
                        return format!("protocol error: {e}");
                    }
                    Some(Err(e)) => return format!("connection error: {e}"),
                }
            }
            Some(out) = queue.recv() => {
                let Outgoing { text, held } = out;
                let sent = match text {
                    JsonText::Whole(text) => timeout(WRITE_TIMEOUT, ws.send(Message::Text(text))).await,
                    JsonText::Piecewise(long) => timeout(WRITE_TIMEOUT, send_in_fragments(&mut ws, &long)).await,
                };
                drop(held);
                match sent {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => return format!("write failed: {e}"),
                    Err(_) => return "stopped reading (write timed out)".into(),
                }
            }
            _ = keepalive.tick() => {
                if last_heard.elapsed() > ping_every * 2 + Duration::from_secs(5) {
                    return "keepalive timed out".into();
                }
                if timeout(WRITE_TIMEOUT, ws.send(Message::Ping(Vec::new()))).await.map_or(true, |r| r.is_err()) {
                    return "keepalive ping failed".into();
                }
            }
            _ = kick.notified() => {
                close(ws, CloseCode::Policy, "Client is not reading its messages").await;
                return "outbound queue overflowed".into();
            }
            () = shared.closing.cancelled() => {
                close(ws, CloseCode::Away, "Neovim is shutting down").await;
                return "server shutting down".into();
            }
        }
    }
}

/// Sends a close frame, waits briefly for the client's reply, then half-closes
/// and discards what the client still sends until it hangs up: closing a
/// socket with unread bytes makes the kernel send a reset, and the client
/// would lose the close frame (and its code) that is still in flight.
pub async fn close(mut ws: Ws, code: CloseCode, reason: &str) {
    let frame = CloseFrame { code, reason: reason.to_owned().into() };
    match timeout(CLOSE_GRACE, ws.close(Some(frame))).await {
        Err(_) => return,
        // Already closing (tungstenite queued its own reply): send that one.
        Ok(Err(_)) => {
            let _ = timeout(CLOSE_GRACE, ws.flush()).await;
        }
        Ok(Ok(())) => {}
    }
    let _ = timeout(CLOSE_GRACE, async {
        while let Some(Ok(message)) = ws.next().await {
            if let Message::Close(_) = message {
                break;
            }
        }
    })
    .await;
    finish(ws).await;
}

/// Flushes what is queued (a close reply), half-closes, and discards what
/// the client still sends until it hangs up (see [`close`]).
pub async fn finish(mut ws: Ws) {
    let _ = timeout(CLOSE_GRACE, ws.flush()).await;
    let stream = ws.get_mut();
    let _ = stream.shutdown().await;
    let mut sink = [0u8; 8192];
    let _ = timeout(CLOSE_GRACE, async {
        while let Ok(n) = stream.read(&mut sink).await {
            if n == 0 {
                break;
            }
        }
    })
    .await;
}

/// Sends `long` as one text message in fragments, each piece escaped just
/// before it is queued: the whole text never exists at once, and the
/// client reads the first fragment while the rest is escaped.
async fn send_in_fragments(ws: &mut Ws, long: &Piecewise) -> Result<(), WsError> {
    let mut opcode = OpCode::Data(Data::Text);
    for piece in long.pieces(FRAGMENT_BYTES) {
        ws.feed(Message::Frame(Frame::message(piece.bytes, opcode, piece.last))).await?;
        opcode = OpCode::Data(Data::Continue);
    }
    ws.flush().await
}

/// Sends the newest visible files and selection to one client: at once on
/// connect, then whenever they change, at most one selection per
/// `selection_interval_ms` (a burst is coalesced and always ends with the
/// latest state), never the same state twice.
async fn push_context(shared: Arc<Shared>, outbound: mpsc::Sender<Outgoing>, dialect: Arc<AtomicU8>) {
    let interval = Duration::from_millis(shared.options.selection_interval_ms);
    let mut selection = shared.selection.subscribe();
    let mut visible = shared.visible_files.subscribe();
    selection.mark_changed();
    visible.mark_changed();
    let mut sent_selection: Option<Arc<PublishedSelection>> = None;
    let mut sent_visible: Option<Arc<PublishedVisibleFiles>> = None;
    let mut last_selection_at: Option<tokio::time::Instant> = None;
    // Visible files go first: an empty list clears the CLI's selection.
    let mut visible_first = true;
    loop {
        let dialect = || current_dialect(&dialect);
        tokio::select! {
            biased;
            changed = visible.changed() => {
                if changed.is_err() { return; }
                let state = visible.borrow_and_update().clone();
                let state = state.unwrap_or_else(|| Arc::new(PublishedVisibleFiles::new(Vec::new())));
                if sent_visible.as_ref().is_some_and(|s| s.raw == state.raw) { continue; }
                if outbound.send(state.frame(dialect()).to_owned().into()).await.is_err() { return; }
                sent_visible = Some(state);
                visible_first = false;
            }
            changed = selection.changed(), if !visible_first => {
                if changed.is_err() { return; }
                if let Some(at) = last_selection_at {
                    tokio::time::sleep_until(at + interval).await;
                }
                let Some(state) = selection.borrow_and_update().clone() else { continue };
                if sent_selection.as_ref().is_some_and(|s| s.raw == state.raw) { continue; }
                if outbound.send(state.frame(dialect()).to_owned().into()).await.is_err() { return; }
                last_selection_at = Some(tokio::time::Instant::now());
                sent_selection = Some(state);
            }
        }
    }
}

type BudgetWait = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<OwnedSemaphorePermit, tokio::sync::AcquireError>> + Send>,
>;

/// The permits a frame of `len` bytes takes from the in-flight budget:
/// twice its length, since the text and its decoded form (serde_json's copy
/// of every string) both live until the answer is sent; never more than the
/// whole budget (or it could never run).
pub fn budget_cost(len: usize, budget: usize) -> u32 {
    len.saturating_mul(2).clamp(1, budget.min(u32::MAX as usize)) as u32
}

fn current_dialect(slot: &AtomicU8) -> Dialect {
    if slot.load(Ordering::Relaxed) == DIALECT_WRAPPED {
        Dialect::Wrapped
    } else {
        Dialect::Flat
    }
}

/// Records the dialect of a connection's first request.
pub fn note_dialect(slot: &AtomicU8, dialect: Dialect) {
    let value = match dialect {
        Dialect::Flat => DIALECT_FLAT,
        Dialect::Wrapped => DIALECT_WRAPPED,
    };
    let _ = slot.compare_exchange(DIALECT_UNKNOWN, value, Ordering::Relaxed, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    #[test]
    fn budget_cost_is_twice_the_frame_within_the_budget() {
        assert_eq!(super::budget_cost(0, 1 << 20), 1);
        assert_eq!(super::budget_cost(1000, 1 << 20), 2000);
        assert_eq!(super::budget_cost(1 << 30, 1 << 20), 1 << 20);
        assert_eq!(super::budget_cost(usize::MAX, usize::MAX), u32::MAX);
    }
}
