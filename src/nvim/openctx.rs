//! The OpenCtx service: the current client and its tasks (on the plugin's
//! tokio runtime, all cancelled together when it stops), independent of the
//! agents' servers (annotations work with no agent connected).
//!
//! Lua asks for work by buffer number or request id and gets answers back
//! on the main thread: annotations are drawn by `nvim::annotations`,
//! picker data is handed to `require("amp.openctx")._resolve(id, result)`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::runtime::Handle;
use tokio_util::sync::CancellationToken;

use crate::core::log;
use crate::core::sync::LockExt;
use crate::core::text::utf16_to_byte_col;
use crate::nvim::annotations::{self, LineTitles, Mark};
use crate::nvim::bridge;
use crate::openctx::client::{ClientOptions, OpenCtxClient};
use crate::openctx::spec::ProviderSpec;
use crate::openctx::types::{Annotation, Mention};

pub struct ServiceOptions {
    pub providers: Vec<ProviderSpec>,
    /// Entries left out, each with why (one line each).
    pub skipped: Vec<String>,
    pub timeout: Duration,
    pub startup_timeout: Duration,
    pub max_file_bytes: usize,
    pub node_command: String,
    pub host_script: PathBuf,
    pub cache_dir: PathBuf,
}

impl ServiceOptions {
    pub fn from_json(v: &Value) -> Result<Self, String> {
        let field = |k: &str| v.get(k).filter(|x| !x.is_null());
        let mut providers = Vec::new();
        let mut skipped = Vec::new();
        match field("providers") {
            None => {}
            Some(Value::Object(map)) => {
                for (uri, entry) in map {
                    // Lua hands each entry over as JSON text (vim.json.encode:
                    // an empty table is `[]`, vim.empty_dict() is `{}`).
                    let parsed;
                    let entry = match entry {
                        Value::String(text) => match serde_json::from_str::<Value>(text) {
                            Ok(v) => {
                                parsed = v;
                                &parsed
                            }
                            Err(e) => {
                                skipped.push(format!("openctx.providers[\"{uri}\"]: not JSON ({e})"));
                                continue;
                            }
                        },
                        other => other,
                    };
                    // A bad entry disables itself only, as in the reference client.
                    match ProviderSpec::from_entry(uri, entry) {
                        Ok(Some(spec)) => providers.push(spec),
                        Ok(None) => {}
                        Err(e) => skipped.push(e.to_string()),
                    }
                }
            }
            Some(Value::Array(a)) if a.is_empty() => {}
            Some(other) => return Err(format!("openctx.providers must be a table of provider URIs, got {other}")),
        }
        let int = |k: &str, default: u64| -> Result<u64, String> {
            match field(k) {
                None => Ok(default),
                Some(x) => x.as_u64().ok_or_else(|| format!("openctx.{k} must be a non-negative integer, got {x}")),
            }
        };
        let string = |k: &str| -> Result<Option<String>, String> {
            match field(k) {
                None => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(x) => Err(format!("openctx.{k} must be a string, got {x}")),
            }
        };
        Ok(Self {
            providers,
            skipped,
            timeout: Duration::from_millis(int("timeout_ms", 2000)?.max(1)),
            startup_timeout: Duration::from_millis(int("startup_timeout_ms", 15000)?.max(1)),
            max_file_bytes: int("max_file_bytes", 1024 * 1024)? as usize,
            node_command: string("node_command")?.unwrap_or_else(|| "node".into()),
            host_script: string("host_script")?.map(PathBuf::from).ok_or("openctx.host_script is missing")?,
            cache_dir: string("cache_dir")?.map(PathBuf::from).ok_or("openctx.cache_dir is missing")?,
        })
    }
}

struct Service {
    runtime: Handle,
    /// Cancelled at `stop`: the service's requests in flight are dropped.
    stopped: CancellationToken,
    client: Arc<OpenCtxClient>,
    max_file_bytes: usize,
}

impl Service {
    /// Runs `task` until it ends or the service stops. (The transports'
    /// own short tasks, such as a module download or the MCP handshake, end
    /// by themselves within their deadlines.)
    fn spawn(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        self.runtime.spawn(self.stopped.clone().run_until_cancelled_owned(task));
    }
}

static SERVICE: Mutex<Option<Service>> = Mutex::new(None);

fn service() -> std::sync::MutexGuard<'static, Option<Service>> {
    SERVICE.locked()
}

/// (Re)configures the service; the previous client and its processes go.
pub fn configure(options: ServiceOptions) -> Result<Value, String> {
    stop();
    let runtime = super::runtime::handle()?;
    bridge::open()?;
    let client = Arc::new(OpenCtxClient::new(
        options.providers,
        ClientOptions {
            timeout: options.timeout,
            startup_timeout: options.startup_timeout,
            node_command: options.node_command,
            host_script: options.host_script,
            cache_dir: options.cache_dir,
        },
    ));
    let providers = client.provider_uris();
    log::info(format!("openctx: {} provider(s): {}", providers.len(), providers.join(", ")));
    for s in &options.skipped {
        log::warn(format!("openctx: provider skipped: {s}"));
    }
    let stopped = CancellationToken::new();
    *service() = Some(Service { runtime, stopped, client, max_file_bytes: options.max_file_bytes });
    Ok(json!({ "providers": providers, "skipped": options.skipped }))
}

/// Stops the service (its Node and MCP children are killed). Idempotent.
/// Main thread, and it waits for nothing: requests in flight are dropped,
/// the children are told to go on the runtime (a child that outlives
/// Neovim's exit still sees its stdin close and exits; children are killed
/// when their handles drop anyway).
pub fn stop() {
    let Some(Service { runtime, stopped, client, .. }) = service().take() else { return };
    bridge::close();
    stopped.cancel();
    // Nothing more is drawn as lines come into view.
    annotations::forget_all();
    runtime.spawn(async move {
        let _ = tokio::time::timeout(Duration::from_millis(200), client.shutdown()).await;
    });
}

pub fn running() -> bool {
    service().is_some()
}

/// Requests annotations for a buffer; they are drawn when they arrive unless
/// the buffer changed meanwhile (only the newest answer is applied).
pub fn refresh_buffer(bufnr: i32) -> Result<(), String> {
    let guard = service();
    let Some(s) = guard.as_ref() else { return Ok(()) };
    let Some(doc) = annotations::read_document(bufnr, s.max_file_bytes)? else { return Ok(()) };
    let client = s.client.clone();
    s.spawn(async move {
        let uri = crate::core::uri::path_to_file_uri(&doc.path);
        let (bufnr, generation) = (doc.bufnr, doc.generation);
        // Drawn each time a provider answers: a slow one holds up nobody.
        client
            .annotations(&uri, &doc.text, |found| {
                // Everything but drawing is done here, off the main thread:
                // positions, the list's JSON text, grouping by line.
                let marks = to_marks(&doc.text, &found);
                let listed: Vec<Value> =
                    found.iter().zip(&marks).map(|((provider, a), mark)| annotation_json(provider, a, mark)).collect();
                let listed = Value::Array(listed).to_string();
                let lines = group_by_line(marks);
                let _ = bridge::post(move || annotations::render(bufnr, generation, lines, listed));
            })
            .await;
        let failures = client.take_failures();
        if !failures.is_empty() {
            let _ = bridge::post(move || {
                for f in failures {
                    annotations::report_failure(&f.provider, &f.message);
                }
            });
        }
    });
    Ok(())
}

/// The titles on each line, by ascending line, each line's in the order
/// of `marks`.
fn group_by_line(marks: Vec<Mark>) -> Vec<LineTitles> {
    let mut by_line: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for m in marks {
        by_line.entry(m.line).or_default().push(m.title);
    }
    by_line.into_iter().map(|(line, titles)| LineTitles { line, titles }).collect()
}

/// Converts annotation positions (UTF-16) to byte columns on the text's lines.
fn to_marks(text: &str, found: &[(String, Annotation)]) -> Vec<Mark> {
    let lines: Vec<&str> = text.split('\n').collect();
    found
        .iter()
        .map(|(_, a)| {
            let (line, character) =
                a.range.as_ref().map_or((0, 0), |r| (r.start.line as usize, r.start.character as usize));
            let line = line.min(lines.len().saturating_sub(1));
            let text = lines.get(line).copied().unwrap_or_default().trim_end_matches('\r');
            Mark { line, col: utf16_to_byte_col(text.as_bytes(), character), title: a.item.title.replace('\n', " ") }
        })
        .collect()
}

/// An annotation as Lua sees it in `b:amp_openctx_annotations`: the
/// protocol's fields plus its provider and its 0-based byte column.
fn annotation_json(provider: &str, a: &Annotation, mark: &Mark) -> Value {
    let mut v = serde_json::to_value(a).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut v {
        map.insert("provider".into(), json!(provider));
        map.insert("byte_col".into(), json!(mark.col));
    }
    v
}

/// Forgets metas and cached results. Main thread: waits for nothing (no
/// `block_on`, no provider lock); the annotations asked for next are
/// delivered through the bridge as usual.
pub fn reset() -> Result<(), String> {
    let guard = service();
    let s = guard.as_ref().ok_or("OpenCtx is not enabled")?;
    s.client.refresh();
    Ok(())
}

/// Hands `result` to the Lua request `id` on the main thread.
fn resolve(id: i64, result: Value) {
    let _ = bridge::post(move || annotations::resolve_request(id, &result));
}

/// Mentions for `query`; `path` is the active document's file ("" for none),
/// sent as the `uri` of the request.
pub fn mentions(query: String, path: String, id: i64) -> Result<(), String> {
    let guard = service();
    let s = guard.as_ref().ok_or("OpenCtx is not enabled")?;
    let client = s.client.clone();
    let uri = (!path.is_empty()).then(|| crate::core::uri::path_to_file_uri(std::path::Path::new(&path)));
    s.spawn(async move {
        let list = client.mentions(&query, uri.as_deref()).await;
        let failures = client.take_failures();
        let items: Vec<Value> = list
            .into_iter()
            .map(|(provider, label, m)| json!({ "provider": provider, "label": label, "mention": m }))
            .collect();
        resolve(id, json!({ "mentions": items, "failures": failures_json(failures) }));
    });
    Ok(())
}

/// `:checkhealth amp`: every provider's `meta`, asked afresh, resolved as
/// `{providers = [{uri, kind, ok, name?, features?, error?}], skipped}`.
pub fn check(id: i64) -> Result<(), String> {
    let guard = service();
    let s = guard.as_ref().ok_or("OpenCtx is not enabled")?;
    let client = s.client.clone();
    s.spawn(async move {
        let providers = client.check().await;
        resolve(id, json!({ "providers": providers }));
    });
    Ok(())
}

pub fn items_for_mention(provider: String, mention: Value, id: i64) -> Result<(), String> {
    let mention: Mention = serde_json::from_value(mention).map_err(|e| format!("not a mention: {e}"))?;
    let guard = service();
    let s = guard.as_ref().ok_or("OpenCtx is not enabled")?;
    let client = s.client.clone();
    s.spawn(async move {
        let result = match client.items_for_mention(&provider, &mention).await {
            Ok(items) => json!({ "items": items }),
            Err(e) => json!({ "items": [], "error": e.to_string() }),
        };
        resolve(id, result);
    });
    Ok(())
}

pub fn items_for_message(message: String, id: i64) -> Result<(), String> {
    let guard = service();
    let s = guard.as_ref().ok_or("OpenCtx is not enabled")?;
    let client = s.client.clone();
    s.spawn(async move {
        let items = client.items_for_message(&message).await;
        let failures = client.take_failures();
        let items: Vec<Value> = items.into_iter().map(|(p, i)| json!({ "provider": p, "item": i })).collect();
        resolve(id, json!({ "items": items, "failures": failures_json(failures) }));
    });
    Ok(())
}

fn failures_json(failures: Vec<crate::openctx::client::Failure>) -> Value {
    Value::Array(failures.into_iter().map(|f| json!({ "provider": f.provider, "message": f.message })).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(line: usize, title: &str) -> Mark {
        Mark { line, col: 0, title: title.into() }
    }

    #[test]
    fn a_bad_entry_is_skipped_alone_and_entries_may_be_json_text() {
        let options = ServiceOptions::from_json(&json!({
            "host_script": "/h.mjs",
            "cache_dir": "/c",
            "providers": {
                "file:///good.mjs": "{\"links\":[]}",
                "https://ok.example/api": true,
                "/abs/p.mjs": "true",
                "mcp:x": "{\"args\":[\"a\"]}",
                "mcp:y": "{\"command\":\"node\",\"args\":\"a.js\"}",
                "file:///off.mjs": "false",
                "file:///broken.mjs": "{not json",
            },
        }))
        .unwrap();
        let uris: Vec<&str> = options.providers.iter().map(|p| p.uri.as_str()).collect();
        assert_eq!(uris, ["file:///good.mjs", "https://ok.example/api"]);
        assert_eq!(options.providers[0].settings, json!({"links": []}));
        assert_eq!(options.skipped.len(), 4, "{:?}", options.skipped);
        for (uri, why) in
            [("/abs/p.mjs", "file:///"), ("mcp:x", "command"), ("mcp:y", "args"), ("file:///broken.mjs", "JSON")]
        {
            assert!(
                options
                    .skipped
                    .iter()
                    .any(|s| s.contains(&format!("\"{uri}\"")) && s.contains(why) && !s.contains('\n')),
                "{uri}: {:?}",
                options.skipped
            );
        }
        assert_eq!(options.startup_timeout, Duration::from_millis(15000));
    }

    #[test]
    fn titles_are_grouped_by_ascending_line_in_their_order() {
        let marks = vec![mark(4, "a"), mark(1, "b"), mark(4, "c"), mark(0, "d"), mark(1, "e")];
        let lines = group_by_line(marks);
        let got: Vec<(usize, Vec<String>)> = lines.into_iter().map(|l| (l.line, l.titles)).collect();
        let want = vec![(0, vec!["d"]), (1, vec!["b", "e"]), (4, vec!["a", "c"])];
        let want: Vec<(usize, Vec<String>)> =
            want.into_iter().map(|(l, t)| (l, t.into_iter().map(String::from).collect())).collect();
        assert_eq!(got, want);
    }
}
