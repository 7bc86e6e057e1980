//! `ide/contextUpdate` for one event stream: the cursor or selection and
//! the visible files, from the one published state, at once when the
//! stream opens, then at most one per `selection_interval_ms` (a burst is
//! coalesced and ends with the newest state), never the same twice.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;

use super::protocol::{context_update, Recency};
use crate::core::log;
use crate::core::published::{SelectionSnapshot, VisibleFilesSnapshot};
use crate::mcp;
use crate::serve::hub::Hub;
use crate::serve::mcp_http::sse::Feed;
use crate::serve::throttled;

struct State {
    selection: watch::Receiver<Option<Arc<SelectionSnapshot>>>,
    visible: watch::Receiver<Option<Arc<VisibleFilesSnapshot>>>,
    recency: Recency,
    /// The agent's id, for the log.
    agent: &'static str,
    /// The last context sent, without its timestamps.
    sent: Option<Value>,
}

/// The stream's feed of `ide/contextUpdate` notifications for a client of
/// `agent` (its id, for the log).
pub fn feed(hub: &Hub, agent: &'static str) -> Feed {
    let state = State {
        selection: hub.state.subscribe_selection(),
        visible: hub.state.subscribe_visible_files(),
        recency: Recency::default(),
        agent,
        sent: None,
    };
    throttled::feed(state, Duration::from_millis(hub.options.selection_interval_ms))
}

impl throttled::Source for State {
    async fn changed(&mut self) -> bool {
        tokio::select! {
            changed = self.selection.changed() => changed.is_ok(),
            changed = self.visible.changed() => changed.is_ok(),
        }
    }

    fn compose(&mut self) -> Option<String> {
        context(self)
    }
}

/// The notification for the newest state, unless it is the one sent last.
fn context(st: &mut State) -> Option<String> {
    let selection = st.selection.borrow_and_update().clone();
    let visible = st.visible.borrow_and_update().clone();
    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
    let files = visible.as_ref().map_or(&[][..], |v| v.raw.as_slice());
    let params = context_update(selection.as_ref().map(|s| &s.raw), files, &mut st.recency, now_ms);
    // Timestamps change on every call: compare without them.
    let mut key = params.clone();
    if let Some(files) = key["workspaceState"]["openFiles"].as_array_mut() {
        for f in files {
            f.as_object_mut().map(|o| o.remove("timestamp"));
        }
    }
    if st.sent.as_ref() == Some(&key) {
        return None;
    }
    st.sent = Some(key);
    let text = mcp::notification("ide/contextUpdate", &params);
    crate::log_debug!("{}: contextUpdate {}", st.agent, log::untrusted(&text));
    Some(text)
}
