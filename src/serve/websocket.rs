//! One WebSocket client, from the upgrade to the close, for every
//! front-end that speaks WebSocket (Amp, Claude Code and OpenCode).
//!
//! A single task owns the socket: it reads frames, writes queued messages
//! and keeps the connection alive, and every way the loop can end is a
//! branch of one `select!`. Messages are answered in tasks of their own so
//! a slow request does not hold up a ping; at most [`MAX_IN_FLIGHT`] run at
//! once per client and the socket is not read past that, nor past the
//! session's byte budget (`serve::budget`), so a flood is slowed by TCP
//! instead of growing memory. A request that waits for the user (a review)
//! gives its place and its bytes back ([`Held::release`]): the connection
//! keeps reading, answering pings and taking further requests.
//!
//! The limits and their outcomes, the same for every protocol: a message
//! over `server.max_frame_bytes` closes with 1009, invalid UTF-8 with 1007,
//! a binary frame with 1003, a protocol violation with 1002, a client that
//! does not read its messages (its queue of `server.send_queue` is full, or
//! a write takes longer than [`WRITE_TIMEOUT`]) with 1008, a client silent
//! for two ping intervals is dropped, and shutdown closes with 1001.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, Notify, Semaphore};
use tokio::time::timeout;
use tokio_tungstenite::tungstenite::error::{CapacityError, Error as WsError};
use tokio_tungstenite::tungstenite::handshake::server::{
    ErrorResponse, Request as HttpRequest, Response as HttpResponse,
};
use tokio_tungstenite::tungstenite::http::StatusCode;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::frame::Frame;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

pub use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use super::admission::{Admission, Request};
use super::budget::{Held, Share};
use super::endpoint::Endpoint;
use super::json_text::{JsonText, Piecewise};
use super::listener::HandshakeSlot;
use super::write_deadline::{Abort, WRITE_TIMEOUT};
use crate::core::log;
use crate::core::review::ReviewEnd;

/// Requests of one client answered at once; the socket is not read past it.
pub const MAX_IN_FLIGHT: usize = 64;
const CLOSE_GRACE: Duration = Duration::from_secs(1);
/// Payload bytes per fragment of a long message: under glibc's default mmap
/// threshold, so each piece's buffer is reused heap memory, not fresh pages.
const FRAGMENT_BYTES: usize = 64 * 1024;

pub type Ws = WebSocketStream<TcpStream>;

/// One message queued for a client, and the share of the byte budget its
/// request holds until the message is sent (`None` for notifications).
pub struct Outgoing {
    pub text: JsonText,
    pub held: Option<Share>,
}

impl From<JsonText> for Outgoing {
    fn from(text: JsonText) -> Self {
        Self { text, held: None }
    }
}

impl From<String> for Outgoing {
    fn from(text: String) -> Self {
        Self { text: text.into(), held: None }
    }
}

/// The way to a client's socket: its bounded queue.
#[derive(Clone)]
pub struct Outbox {
    queue: mpsc::Sender<Outgoing>,
    /// Wakes the connection to close it: its queue overflowed.
    kick: Arc<Notify>,
}

impl Outbox {
    /// Queues `message` without waiting. A client whose queue is full has
    /// stopped reading: it is disconnected rather than allowed to grow
    /// memory. Whether the message was queued.
    pub fn push(&self, message: impl Into<Outgoing>) -> bool {
        match self.queue.try_send(message.into()) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.kick.notify_one();
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        }
    }

    /// Queues `message` once there is room (a pusher that sends only the
    /// newest state, or an answer); false when the client is gone.
    pub async fn send(&self, message: impl Into<Outgoing>) -> bool {
        self.queue.send(message.into()).await.is_ok()
    }
}

/// What a WebSocket front-end adds to the loop: who it serves, its
/// admission rules, and what it does with each text message.
pub trait Protocol: Send + Sync + 'static {
    /// What the front-end keeps of one client (its pushers are aborted when
    /// it is dropped, at the end of the connection).
    type Client: Send + Sync + 'static;

    /// Whom it serves, the session's hub, who may connect.
    fn endpoint(&self) -> &Endpoint;
    /// Answered in `Sec-WebSocket-Protocol` when the client offers it.
    fn subprotocol(&self) -> Option<&'static str> {
        None
    }
    /// The close frame for a client without the right token.
    fn unauthenticated(&self) -> (CloseCode, &'static str);
    /// Whether the front-end announces each client itself, by the name it
    /// gives (`Hub::name_client`), rather than at the upgrade as the agent.
    fn names_clients(&self) -> bool {
        false
    }
    /// A client was admitted: what the front-end keeps of it; it may queue
    /// first messages and start pushers here.
    fn open(self: &Arc<Self>, outbox: &Outbox, owner: crate::core::review::Owner) -> Self::Client;
    /// One text message: its answer, if any. `held` is the request's place
    /// and bytes, to release before waiting for the user.
    fn message(
        self: &Arc<Self>,
        client: &Arc<Self::Client>,
        text: String,
        held: &mut Held,
    ) -> impl Future<Output = Option<Outgoing>> + Send;
}

/// Accepts `protocol`'s clients on `listener` until the session stops, as
/// one of its tasks.
pub fn spawn_accepting<P: Protocol>(protocol: Arc<P>, listener: tokio::net::TcpListener) {
    let hub = protocol.endpoint().hub.clone();
    let agent = protocol.endpoint().agent.id;
    let serve = move |stream, slot| serve(protocol.clone(), stream, slot);
    let handshakes = hub.handshakes.clone();
    let accepting = hub.clone();
    hub.spawn_detached(async move {
        super::listener::accept_loop(listener, agent, handshakes, &accepting.tasks, serve).await
    });
}

/// Serves one accepted connection of `protocol`.
pub async fn serve<P: Protocol>(protocol: Arc<P>, stream: TcpStream, slot: HandshakeSlot) {
    let hub = protocol.endpoint().hub.clone();
    let agent = protocol.endpoint().agent;
    // Until the client is admitted it holds a place among the pending
    // handshakes and goes when a newer connection needs the place.
    let cancel = slot.cancel.clone();
    let upgraded = tokio::select! {
        upgraded = upgrade(stream, protocol.as_ref()) => upgraded,
        _ = cancel.notified() => {
            log::limited("handshake dropped", log::Level::Debug, "handshake dropped: too many pending handshakes");
            return;
        }
        () = hub.tasks.closing.cancelled() => return,
    };
    let Some((ws, authenticated)) = upgraded else { return };
    if !authenticated {
        log::limited(
            "wrong token",
            log::Level::Warn,
            format!("{}: client rejected: wrong or missing auth token", agent.id),
        );
        let (code, reason) = protocol.unauthenticated();
        tokio::select! {
            _ = close(ws, code, reason) => {}
            _ = cancel.notified() => {}
        }
        return;
    }
    drop(slot);
    let owner = crate::core::review::Owner::new(agent.name);
    let registered = if protocol.names_clients() { hub.register(agent, owner) } else { hub.connect(agent, owner) };
    let connection = match registered {
        Ok(connection) => connection,
        Err(too_many) => {
            log::limited("too many clients", log::Level::Warn, format!("{}: client rejected: {too_many}", agent.id));
            close(ws, CloseCode::Again, "Too many clients").await;
            return;
        }
    };
    // Its first messages see the editor's state (read when the first
    // client comes).
    hub.state.context_ready().await;
    let (queue, outgoing) = mpsc::channel(hub.options.send_queue);
    let outbox = Outbox { queue, kick: Arc::new(Notify::new()) };
    let client = Arc::new(protocol.open(&outbox, connection.owner));
    let ended = run(ws, &protocol, &client, outbox, outgoing).await;
    drop(client);
    // Nobody waits for its reviews' decisions any more: they close, and the
    // user is told. (A stopping session closes every review itself, and its
    // main thread waits for this task: no editor call then.)
    if !hub.tasks.is_closing() {
        let _ = hub.editor.close_reviews(connection.owner, ReviewEnd::Disconnected).await;
    }
    connection.end(&ended);
}

/// The upgrade under the front-end's policy: the socket and whether the
/// client presented the token; `None` if refused or broken.
async fn upgrade<P: Protocol>(stream: TcpStream, protocol: &P) -> Option<(Ws, bool)> {
    let options = &protocol.endpoint().hub.options;
    let config = WebSocketConfig {
        max_message_size: Some(options.max_frame_bytes),
        max_frame_size: Some(options.max_frame_bytes),
        ..Default::default()
    };
    let policy = &protocol.endpoint().policy;
    let subprotocol = protocol.subprotocol();
    let mut authenticated = false;
    // The error type is tungstenite's (its Callback trait), boxing is not ours to choose.
    #[allow(clippy::result_large_err)]
    let check = |req: &HttpRequest, mut resp: HttpResponse| -> Result<HttpResponse, ErrorResponse> {
        // A header that is not visible ASCII still counts as present (lossy
        // text): an Origin of raw bytes must be refused, not ignored.
        let header = |name: &str| req.headers().get(name).map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        let (host, origin) = (header("host"), header("origin"));
        let token_header = policy.token_in.header().and_then(header);
        let request = Request {
            host: host.as_deref(),
            origin: origin.as_deref(),
            query: req.uri().query(),
            token_header: token_header.as_deref(),
        };
        match policy.admit(&request) {
            Admission::Admitted { authenticated: ok } => {
                authenticated = ok;
                if let Some(wanted) = subprotocol {
                    let offered = header("sec-websocket-protocol").unwrap_or_default();
                    if offered.split(',').any(|p| p.trim() == wanted) {
                        resp.headers_mut()
                            .insert("sec-websocket-protocol", wanted.parse().expect("a valid header value"));
                    }
                }
                Ok(resp)
            }
            Admission::Forbidden(why) => {
                // `why` quotes the peer's headers cut and escaped (admission.rs).
                log::limited("handshake refused", log::Level::Warn, format!("handshake refused: {why}"));
                let mut refusal = ErrorResponse::new(Some(format!("Forbidden: {why}\n")));
                *refusal.status_mut() = StatusCode::FORBIDDEN;
                Err(refusal)
            }
        }
    };
    let deadline = protocol.endpoint().hub.handshakes.timeout;
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

type BudgetWait = std::pin::Pin<Box<dyn Future<Output = Option<Share>> + Send>>;

/// The connection's loop; returns why it ended.
async fn run<P: Protocol>(
    mut ws: Ws,
    protocol: &Arc<P>,
    client: &Arc<P::Client>,
    outbox: Outbox,
    mut outgoing: mpsc::Receiver<Outgoing>,
) -> String {
    let hub = &protocol.endpoint().hub;
    let in_flight = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let ping_every = Duration::from_millis(hub.options.ping_interval_ms);
    let mut keepalive = tokio::time::interval_at(tokio::time::Instant::now() + ping_every, ping_every);
    let mut last_heard = Instant::now();
    if hub.tasks.is_closing() {
        close(ws, CloseCode::Away, "Neovim is shutting down").await;
        return "server shutting down".into();
    }
    // A message read while the byte budget was spent, and its wait for
    // room: nothing more is read meanwhile (back-pressure through TCP), but
    // the queue keeps being sent, which is what gives room back.
    let mut over_budget: Option<(String, BudgetWait)> = None;
    let spawn_request = |text: String, share: Share| {
        let slot = in_flight.clone().try_acquire_owned().expect("guarded by available_permits");
        let mut held = Held { slot: Some(slot), share: Some(share) };
        let (protocol, client, outbox) = (protocol.clone(), client.clone(), outbox.clone());
        hub.spawn(async move {
            let reply = protocol.message(&client, text, &mut held).await;
            // The place goes before queueing: the loop reads again as it
            // drains the queue; the bytes stay counted until the answer is sent.
            held.slot = None;
            if let Some(mut reply) = reply {
                reply.held = held.share.take();
                outbox.send(reply).await;
            }
        });
    };
    loop {
        let reading = over_budget.is_none() && in_flight.available_permits() > 0;
        tokio::select! {
            share = async { over_budget.as_mut().expect("guarded").1.as_mut().await }, if over_budget.is_some() => {
                let (text, _) = over_budget.take().expect("guarded");
                match share {
                    Some(share) => spawn_request(text, share),
                    None => return "server shutting down".into(),
                }
                // Not heard while we did not read.
                last_heard = Instant::now();
            }
            frame = ws.next(), if reading => {
                last_heard = Instant::now();
                match frame {
                    Some(Ok(Message::Text(text))) => match hub.budget.try_take(text.len()) {
                        Some(share) => spawn_request(text, share),
                        None => {
                            log::limited("in-flight budget", log::Level::Info, format!(
                                "requests in flight reached max_inflight_bytes ({} bytes): reading paused until answers are sent",
                                hub.budget.total()
                            ));
                            let (budget, len) = (hub.budget.clone(), text.len());
                            over_budget = Some((text, Box::pin(async move { budget.take(len).await.ok() })));
                        }
                    },
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
                        return format!("protocol error: {}", log::untrusted(&e.to_string()));
                    }
                    Some(Err(e)) => return format!("connection error: {}", log::untrusted(&e.to_string())),
                }
            }
            Some(out) = outgoing.recv() => {
                let Outgoing { text, held } = out;
                let sent = match text {
                    JsonText::Whole(text) => timeout(WRITE_TIMEOUT, ws.send(Message::Text(text))).await,
                    JsonText::Piecewise(long) => timeout(WRITE_TIMEOUT, send_in_fragments(&mut ws, &long)).await,
                };
                drop(held);
                match sent {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => return format!("write failed: {e}"),
                    Err(_) => {
                        ws.get_ref().abort_on_close();
                        return "stopped reading (write timed out)".into();
                    }
                }
            }
            _ = keepalive.tick() => {
                // Silence counts only while we read: a client we paused is
                // not one that went away.
                if reading && last_heard.elapsed() > ping_every * 2 + Duration::from_secs(5) {
                    return "keepalive timed out".into();
                }
                if !reading {
                    last_heard = Instant::now();
                }
                if timeout(WRITE_TIMEOUT, ws.send(Message::Ping(Vec::new()))).await.map_or(true, |r| r.is_err()) {
                    ws.get_ref().abort_on_close();
                    return "keepalive ping failed".into();
                }
            }
            _ = outbox.kick.notified() => {
                close(ws, CloseCode::Policy, "Client is not reading its messages").await;
                return "outbound queue overflowed".into();
            }
            () = hub.tasks.closing.cancelled() => {
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
async fn finish(mut ws: Ws) {
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
