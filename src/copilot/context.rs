//! `selection_changed` for one event stream, from the one published
//! selection: at once when the stream opens, then at most one per
//! `selection_interval_ms` (a burst is coalesced and ends with the newest
//! state: Copilot may take two sent a few ms apart in the wrong order),
//! never the same state twice. The text is encoded once per snapshot and
//! shared with every client that sends the same payload (Claude Code's is
//! identical).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::core::log;
use crate::core::published::SelectionSnapshot;
use crate::serve::hub::Hub;
use crate::serve::mcp_http::sse::Feed;
use crate::serve::vscode;

struct State {
    selection: watch::Receiver<Option<Arc<SelectionSnapshot>>>,
    interval: Duration,
    sent: Option<Arc<SelectionSnapshot>>,
    /// A change not sent yet: sent at `last_at + interval`.
    pending: bool,
    last_at: Option<Instant>,
}

/// The stream's feed of `selection_changed` notifications.
pub fn feed(hub: &Hub) -> Feed {
    let state = State {
        selection: hub.state.subscribe_selection(),
        interval: Duration::from_millis(hub.options.selection_interval_ms),
        sent: None,
        pending: true,
        last_at: None,
    };
    Box::pin(futures_util::stream::unfold(state, |mut st| async move {
        let text = next(&mut st).await?;
        Some((text, st))
    }))
}

async fn next(st: &mut State) -> Option<String> {
    loop {
        let due = st.last_at.map_or_else(Instant::now, |at| at + st.interval);
        tokio::select! {
            biased;
            () = tokio::time::sleep_until(due), if st.pending => {
                st.pending = false;
                let Some(state) = st.selection.borrow_and_update().clone() else { continue };
                if st.sent.as_ref().is_some_and(|s| s.raw == state.raw) {
                    continue;
                }
                let text = vscode::selection_changed(&state, vscode::Lines::FromZero);
                crate::log_debug!("copilot: selection_changed {}", log::untrusted(&text));
                st.last_at = Some(Instant::now());
                st.sent = Some(state);
                return Some(text.to_string());
            }
            changed = st.selection.changed(), if !st.pending => {
                changed.ok()?;
                st.pending = true;
            }
        }
    }
}
