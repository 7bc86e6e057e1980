//! The tap front-end: a WebSocket client of the gateway on the plugin's
//! runtime. One loop connects (backing off 1 s, 2 s, ... 30 s while no
//! gateway answers), reads each message within `MAX_IN_BYTES` and the
//! session's byte budget, feeds it to the `Machine` and carries out what it
//! says: tools run as tasks of their own (`crate::editor_tools`, each call
//! its own review owner so a cancel closes only its reviews), the user is
//! told in one line through `User AmpTap` (lua/amp/tap.lua), and the bound
//! connection is registered like any agent's client.

use crate::core::sync::LockExt;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::sync::{mpsc, Notify};
use tokio_tungstenite::tungstenite::error::{CapacityError, Error as WsError};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use super::machine::{next_backoff, Action, Machine};
use super::pairing::{self, Pairing};
use super::protocol::{self, MAX_IN_BYTES, MAX_OUT_BYTES};
use crate::core::log;
use crate::core::review::{Owner, ReviewEnd};
use crate::editor_tools;
use crate::serve::budget::{Held, Share};
use crate::serve::front_end::{Announce, FrontEnd, StartError, Started};
use crate::serve::hub::Hub;
use crate::serve::registry::{Agent, Connection};
use crate::serve::write_deadline::WRITE_TIMEOUT;

pub const AGENT: Agent = Agent { id: "tap", name: "Tap" };

/// A gateway that does not accept the connection within this long is
/// taken as absent.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// What the status shows, written by the loop.
#[derive(Default, Clone)]
struct Shown {
    state: String,
    session: Option<String>,
    provider_id: String,
    paired: bool,
    calls: usize,
}

pub struct TapClient {
    hub: Arc<Hub>,
    url: String,
    shown: Mutex<Shown>,
    pairing: Arc<Pairing>,
    workspace: Notify,
}

/// How a connection ended.
enum Ended {
    /// The session stops.
    Stop,
    Retry,
    GiveUp(String),
}

/// A call running: its stop, and why its reviews close if stopped.
struct Running {
    stop: CancellationToken,
    why: Arc<Mutex<ReviewEnd>>,
}

impl TapClient {
    fn show(&self, machine: &Machine, state: Option<String>) {
        let mut shown = self.shown.locked();
        *shown = Shown {
            state: state.unwrap_or_else(|| machine.describe()),
            session: machine.session().map(str::to_owned),
            provider_id: machine.provider_id.clone(),
            paired: machine.paired(),
            calls: machine.calls(),
        };
    }

    fn tell(&self, error: bool, message: &str) {
        self.hub.editor.event("AmpTap", json!({ "error": error, "message": message }));
    }

    async fn run(self: Arc<Self>, mut codes: mpsc::UnboundedReceiver<String>) {
        let tools = protocol::tools(Duration::from_millis(self.hub.options.review_timeout_ms));
        let mut machine = Machine::new(tools, self.hub.workspace_folders());
        let mut backoff = protocol::BACKOFF_FIRST;
        let closing = self.hub.tasks.closing.clone();
        let config = WebSocketConfig {
            max_message_size: Some(MAX_IN_BYTES),
            max_frame_size: Some(MAX_IN_BYTES),
            ..Default::default()
        };
        loop {
            self.show(&machine, Some(format!("connecting to {}", self.url)));
            let attempt = tokio::time::timeout(
                CONNECT_TIMEOUT,
                tokio_tungstenite::connect_async_with_config(self.url.as_str(), Some(config), false),
            );
            let failure = tokio::select! {
                () = closing.cancelled() => return,
                r = attempt => match r {
                    Ok(Ok((ws, _))) => {
                        log::info(format!("tap: connected to {}", self.url));
                        let (ended, was_bound) = self.connection(ws, &mut machine, &mut codes).await;
                        if was_bound {
                            backoff = protocol::BACKOFF_FIRST;
                        }
                        match ended {
                            Ended::Stop => return,
                            Ended::GiveUp(why) => {
                                self.show(&machine, Some(format!("stopped: {why}")));
                                return;
                            }
                            Ended::Retry => "the connection ended".to_owned(),
                        }
                    }
                    Ok(Err(e)) => format!("no tap gateway at {}: {}", self.url, one_line(&e.to_string())),
                    Err(_) => format!("no tap gateway at {}: no answer within {} s", self.url, CONNECT_TIMEOUT.as_secs()),
                },
            };
            log::debug(format!("tap: {failure}; next try in {} s", backoff.as_secs()));
            self.show(&machine, Some(format!("{failure} (next try in {} s)", backoff.as_secs())));
            tokio::select! {
                () = closing.cancelled() => return,
                () = tokio::time::sleep(backoff) => {}
            }
            backoff = next_backoff(backoff);
        }
    }

    /// One connection, until it ends; whether it was bound to a session.
    async fn connection(
        self: &Arc<Self>,
        ws: tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
        machine: &mut Machine,
        codes: &mut mpsc::UnboundedReceiver<String>,
    ) -> (Ended, bool) {
        let (mut sink, mut stream) = ws.split();
        let (results_tx, mut results) = mpsc::unbounded_channel::<(String, String)>();
        let mut conn = Conn { calls: HashMap::new(), registered: None, results: results_tx, was_bound: false };
        let closing = self.hub.tasks.closing.clone();
        let mut pending = machine.connected();
        let mut share: Option<Share> = None;
        let ended = 'conn: loop {
            for action in std::mem::take(&mut pending) {
                match self.act(action, &mut conn, &mut sink, share.take()).await {
                    Ok(()) => {}
                    Err(ended) => break 'conn ended,
                }
            }
            self.show(machine, None);
            tokio::select! {
                () = closing.cancelled() => {
                    let _ = send(&mut sink, &protocol::goodbye("Neovim is closing")).await;
                    let _ = sink.send(Message::Close(None)).await;
                    break Ended::Stop;
                }
                frame = stream.next() => match frame {
                    Some(Ok(Message::Text(text))) => {
                        // The message's share of the session's in-flight
                        // bytes, held until its call is answered.
                        let Ok(taken) = self.hub.budget.take(text.len()).await else { break Ended::Stop };
                        match protocol::parse(&text) {
                            Ok(message) => {
                                share = Some(taken);
                                pending = machine.message(message, Instant::now());
                            }
                            Err(e) => log::warn(format!("tap: a message from the gateway dropped: {}", log::untrusted(&e.0))),
                        }
                    }
                    Some(Ok(Message::Close(frame))) => {
                        let why = frame.map(|f| f.reason.to_string()).unwrap_or_default();
                        log::info(format!("tap: the gateway closed the connection {}", log::untrusted(&why)));
                        break Ended::Retry;
                    }
                    Some(Ok(_)) => {} // pings are answered by the reader; binary frames are not the protocol's
                    Some(Err(WsError::Capacity(CapacityError::MessageTooLong { size, max_size }))) => {
                        let message = format!("the tap gateway sent a message of {size} bytes, over the limit of {max_size}: reconnecting");
                        log::warn(format!("tap: {message}"));
                        self.tell(true, &message);
                        let close = CloseFrame { code: CloseCode::Size, reason: "message too big".into() };
                        let _ = sink.send(Message::Close(Some(close))).await;
                        break Ended::Retry;
                    }
                    Some(Err(e)) => {
                        log::info(format!("tap: connection lost: {}", one_line(&e.to_string())));
                        break Ended::Retry;
                    }
                    None => break Ended::Retry,
                },
                Some(code) = codes.recv() => match machine.code(&code) {
                    Ok(actions) => pending = actions,
                    Err(e) => self.tell(true, &e.to_string()),
                },
                Some((id, text)) = results.recv() => {
                    conn.calls.remove(&id);
                    if machine.call_done(&id) {
                        if let Err(e) = send_text(&mut sink, text).await {
                            log::info(format!("tap: connection lost: {}", one_line(&e.to_string())));
                            break Ended::Retry;
                        }
                    }
                }
                () = self.workspace.notified() => {
                    pending = machine.workspace_changed(self.hub.workspace_folders(), Instant::now());
                }
            }
        };
        self.pairing.waiting.store(false, Ordering::SeqCst);
        // Calls in flight are the gateway's to fail (DISCONNECTED); here
        // they stop and their reviews close.
        for action in machine.disconnected(Instant::now()) {
            let _ = self.act(action, &mut conn, &mut sink, None).await;
        }
        for (_, running) in conn.calls.drain() {
            running.stop.cancel();
        }
        if let Some(c) = conn.registered.take() {
            c.end("the connection to the tap gateway ended");
        }
        self.show(machine, None);
        (ended, conn.was_bound)
    }

    async fn act<S>(&self, action: Action, conn: &mut Conn, sink: &mut S, share: Option<Share>) -> Result<(), Ended>
    where
        S: futures_util::Sink<Message, Error = WsError> + Unpin,
    {
        match action {
            Action::Send(message) => send(sink, &message).await.map_err(|e| {
                log::info(format!("tap: connection lost: {e}"));
                Ended::Retry
            })?,
            Action::AskCode => {
                self.pairing.waiting.store(true, Ordering::SeqCst);
                self.hub.editor.event(
                    "AmpTap",
                    json!({ "pair": true, "message": "the tap gateway asks to pair: run :Amp tap pair and type the code the Copilot session shows" }),
                );
            }
            Action::Tell { error, message } => self.tell(error, &message),
            Action::Log(message) => log::debug(format!("tap: {}", log::untrusted(&message))),
            Action::Bound { session, label, provider_id } => {
                conn.was_bound = true;
                log::info(format!(
                    "tap: bound to Copilot session {} ({}) as {}",
                    log::untrusted(&session),
                    log::untrusted(&label),
                    log::untrusted(&provider_id)
                ));
                match self.hub.connect(AGENT, Owner::new(AGENT.name)) {
                    Ok(c) => conn.registered = Some(c),
                    Err(e) => log::warn(format!("tap: {e}")),
                }
            }
            Action::Unbound { why } => {
                for (_, running) in conn.calls.drain() {
                    running.stop.cancel();
                }
                if let Some(c) = conn.registered.take() {
                    c.end(&why);
                }
            }
            Action::Run { id, tool, args } => {
                let running =
                    Running { stop: CancellationToken::new(), why: Arc::new(Mutex::new(ReviewEnd::Disconnected)) };
                let (stop, why, hub, results) =
                    (running.stop.clone(), running.why.clone(), self.hub.clone(), conn.results.clone());
                conn.calls.insert(id.clone(), running);
                self.hub.spawn(async move {
                    // Its own owner: a cancel closes this call's reviews only.
                    let owner = Owner::new(AGENT.name);
                    let cx = editor_tools::Context { hub: &hub, owner, client: "Copilot" };
                    let mut held = Held { slot: None, share };
                    let outcome = tokio::select! {
                        biased;
                        () = stop.cancelled() => None,
                        outcome = editor_tools::call(&tool, &args, &cx, &mut held) => Some(outcome),
                    };
                    drop(held);
                    match outcome {
                        Some(outcome) => {
                            let _ = results.send((id.clone(), protocol::tool_result(&id, outcome, &tool)));
                        }
                        None => {
                            let why = *why.locked();
                            let _ = hub.editor.close_reviews(owner, why).await;
                        }
                    }
                });
            }
            Action::Cancel { id, why } => {
                if let Some(running) = conn.calls.remove(&id) {
                    *running.why.locked() = why;
                    running.stop.cancel();
                }
            }
            Action::Close { reason, give_up } => {
                let frame = CloseFrame { code: CloseCode::Normal, reason: protocol::PROVIDER_NAME.into() };
                let _ = sink.send(Message::Close(Some(frame))).await;
                return Err(if give_up { Ended::GiveUp(reason) } else { Ended::Retry });
            }
        }
        Ok(())
    }
}

/// What one connection holds.
struct Conn {
    calls: HashMap<String, Running>,
    registered: Option<Connection>,
    results: mpsc::UnboundedSender<(String, String)>,
    was_bound: bool,
}

async fn send<S>(sink: &mut S, message: &Value) -> Result<(), WsError>
where
    S: futures_util::Sink<Message, Error = WsError> + Unpin,
{
    let text = message.to_string();
    if text.len() > MAX_OUT_BYTES {
        // Only tool results can be big, and they are sent as they are
        // (`protocol::tool_result` keeps them within theirs).
        log::warn(format!("tap: a {}-byte message not sent (over {MAX_OUT_BYTES})", text.len()));
        return Ok(());
    }
    send_text(sink, text).await
}

/// Sends `text`, failing when the gateway has not read it within
/// `WRITE_TIMEOUT` (a gateway that stopped reading is left, and connected
/// to again).
async fn send_text<S>(sink: &mut S, text: String) -> Result<(), WsError>
where
    S: futures_util::Sink<Message, Error = WsError> + Unpin,
{
    match tokio::time::timeout(WRITE_TIMEOUT, sink.send(Message::Text(text))).await {
        Ok(sent) => sent,
        Err(_) => Err(WsError::Io(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("the gateway read nothing for {} s", WRITE_TIMEOUT.as_secs()),
        ))),
    }
}

fn one_line(s: &str) -> String {
    crate::core::text::cut(&s.replace(['\n', '\r'], " "), 200).to_owned()
}

/// Starts the tap client (main thread, inside the runtime): nothing is
/// bound or written; the loop connects in the background.
pub fn start(hub: &Arc<Hub>) -> Result<Started, StartError> {
    let url = protocol::check_url(&hub.options.tap_url).map_err(|e| StartError::Option(e.into()))?;
    let (pairing, codes) = Pairing::new();
    pairing::install(pairing.clone());
    let client = Arc::new(TapClient {
        hub: hub.clone(),
        url,
        shown: Mutex::new(Shown { state: "starting".into(), ..Shown::default() }),
        pairing,
        workspace: Notify::new(),
    });
    hub.spawn_detached(client.clone().run(codes));
    let announce: Announce = Box::pin(async { Ok(PathBuf::new()) });
    Ok(Started { front_end: client, announce })
}

impl FrontEnd for TapClient {
    fn agent(&self) -> Agent {
        AGENT
    }

    fn status(&self) -> Value {
        let shown = self.shown.locked().clone();
        json!({
            "enabled": true,
            "url": self.url,
            "state": shown.state,
            "session": shown.session,
            "provider_id": shown.provider_id,
            "paired": shown.paired,
            "calls": shown.calls,
            "clients": self.hub.clients(AGENT.id),
        })
    }

    fn terminal_env(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }

    /// Another session may be this workspace's now.
    fn workspace_changed(self: Arc<Self>) -> Announce {
        self.workspace.notify_one();
        Box::pin(async { Ok(PathBuf::new()) })
    }

    fn stopped(&self) {
        pairing::clear();
    }
}
