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

use crate::core::log;
use crate::core::published::SelectionSnapshot;
use crate::serve::hub::Hub;
use crate::serve::mcp_http::sse::Feed;
use crate::serve::{throttled, vscode};

struct Selection {
    selection: watch::Receiver<Option<Arc<SelectionSnapshot>>>,
    sent: Option<Arc<SelectionSnapshot>>,
}

/// The stream's feed of `selection_changed` notifications.
pub fn feed(hub: &Hub) -> Feed {
    let source = Selection { selection: hub.state.subscribe_selection(), sent: None };
    throttled::feed(source, Duration::from_millis(hub.options.selection_interval_ms))
}

impl throttled::Source for Selection {
    async fn changed(&mut self) -> bool {
        self.selection.changed().await.is_ok()
    }

    fn compose(&mut self) -> Option<String> {
        let state = self.selection.borrow_and_update().clone()?;
        if self.sent.as_ref().is_some_and(|s| s.raw == state.raw) {
            return None;
        }
        let text = vscode::selection_changed(&state, vscode::Lines::FromZero);
        crate::log_debug!("copilot: selection_changed {}", log::untrusted(&text));
        self.sent = Some(state);
        Some(text.to_string())
    }
}
