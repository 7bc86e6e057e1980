//! The provider registry: one entry per configured provider, each with its
//! transport, its cached `meta`, and its health.
//!
//! Every call has a deadline (the reference client has none; an editor
//! needs one). A provider that fails, hangs or answers garbage contributes
//! nothing and never fails the others; after [`FAILURES_BEFORE_PAUSE`]
//! failures in a row it is paused for [`PAUSE`], as VS Code's client does.
//! Results are merged in the order of provider URIs, each provider's
//! annotations sorted by position; annotation results are cached by
//! provider, URI and content.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use futures_util::stream::{FuturesUnordered, StreamExt};
use serde_json::{json, Value};

use super::cache::TtlCache;
use super::merge::{compare_provider_uris, merge_by_provider, sort_annotations};
use super::selectors::{compile_message_selectors, message_matches, CompiledSelectors};
use super::spec::{ProviderKind, ProviderSpec};
use super::transport::http::HttpTransport;
use super::transport::mcp::McpProvider;
use super::transport::node::NodeHost;
use super::transport::ProviderError;
use super::types::{parse_list_lenient, Annotation, Item, Mention, MetaResult};
use crate::core::log;
use crate::core::sync::LockExt;

const FAILURES_BEFORE_PAUSE: u32 = 5;
const PAUSE: Duration = Duration::from_secs(10);
const RESULT_CACHE_ENTRIES: usize = 64;
const RESULT_CACHE_TTL: Duration = Duration::from_secs(300);
/// How long a failed `meta` is not asked again.
const META_RETRY: Duration = Duration::from_secs(2);

#[derive(Clone)]
enum Transport {
    Http(HttpTransport),
    Node(NodeHost),
    Mcp(McpProvider),
}

/// `meta` with its selectors compiled once.
struct ProviderMeta {
    meta: MetaResult,
    annotation_selectors: Option<CompiledSelectors>,
    message_selectors: Option<Vec<regex::Regex>>,
}

#[derive(Default)]
struct Health {
    consecutive_failures: u32,
    paused_until: Option<Instant>,
    /// The user was told about the current run of failures.
    reported: bool,
}

struct Provider {
    spec: ProviderSpec,
    transport: Transport,
    /// The cached `meta` and the [`Provider::meta_epoch`] it was asked in.
    /// The lock is held while `meta` is asked (one call, not one per
    /// request), so nothing that must not wait for a provider takes it.
    meta: tokio::sync::Mutex<Option<(u64, Arc<ProviderMeta>)>>,
    /// Bumped by [`OpenCtxClient::refresh`]: a cached `meta` of an older
    /// epoch is stale, so a refresh never waits for a `meta` in flight.
    meta_epoch: std::sync::atomic::AtomicU64,
    meta_failed_at: Mutex<Option<Instant>>,
    health: Mutex<Health>,
}

/// Why a mention's items could not be had (the provider's own failure is in the log).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ItemsError {
    #[error("unknown provider")]
    UnknownProvider,
    #[error("{provider}: items failed (see :Amp log)")]
    Failed { provider: String },
}

/// A provider failure the user should hear about (once per run of failures).
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub provider: String,
    pub message: String,
}

pub struct ClientOptions {
    pub timeout: Duration,
    /// Deadline of a provider's start-up (see [`OpenCtxClient::call`]).
    pub startup_timeout: Duration,
    pub node_command: String,
    pub host_script: PathBuf,
    pub cache_dir: PathBuf,
}

pub struct OpenCtxClient {
    providers: Vec<Arc<Provider>>,
    timeout: Duration,
    startup_timeout: Duration,
    node: NodeHost,
    mcp: Vec<McpProvider>,
    annotation_cache: Mutex<TtlCache<Vec<Annotation>>>,
    failures: Mutex<Vec<Failure>>,
}

impl OpenCtxClient {
    pub fn new(specs: Vec<ProviderSpec>, options: ClientOptions) -> Self {
        let node = NodeHost::new(options.node_command, options.host_script, options.cache_dir);
        let mut specs = specs;
        // The order the reference merges results in (`localeCompare`).
        specs.sort_by(|a, b| compare_provider_uris(&a.uri, &b.uri));
        let mut mcp = Vec::new();
        let providers = specs
            .into_iter()
            .map(|spec| {
                let transport = match &spec.kind {
                    ProviderKind::Http => Transport::Http(HttpTransport::new(spec.uri.clone())),
                    ProviderKind::JsModule => Transport::Node(node.clone()),
                    ProviderKind::Mcp { command, args, env, cwd } => {
                        let p = McpProvider::new(command.clone(), args.clone(), env.clone(), cwd.clone());
                        mcp.push(p.clone());
                        Transport::Mcp(p)
                    }
                };
                Arc::new(Provider {
                    spec,
                    transport,
                    meta: tokio::sync::Mutex::new(None),
                    meta_epoch: std::sync::atomic::AtomicU64::new(0),
                    meta_failed_at: Mutex::new(None),
                    health: Mutex::new(Health::default()),
                })
            })
            .collect();
        Self {
            providers,
            timeout: options.timeout,
            startup_timeout: options.startup_timeout,
            node,
            mcp,
            annotation_cache: Mutex::new(TtlCache::new(RESULT_CACHE_ENTRIES, RESULT_CACHE_TTL)),
            failures: Mutex::new(Vec::new()),
        }
    }

    pub fn provider_uris(&self) -> Vec<String> {
        self.providers.iter().map(|p| p.spec.uri.clone()).collect()
    }

    /// Failures not yet shown to the user (each provider once per run of failures).
    pub fn take_failures(&self) -> Vec<Failure> {
        std::mem::take(&mut *self.failures.locked())
    }

    /// Forgets every provider's `meta` and cached results (`:Amp annotations refresh`).
    /// Never waits: it runs on Neovim's main thread, and a provider's `meta`
    /// may be in flight (holding its slot) for a whole timeout; bumping the
    /// epoch makes whatever that call stores stale.
    pub fn refresh(&self) {
        for p in &self.providers {
            p.meta_epoch.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            *p.meta_failed_at.locked() = None;
            *p.health.locked() = Health::default();
        }
        self.annotation_cache.locked().clear();
    }

    pub async fn shutdown(&self) {
        self.node.shutdown().await;
        for m in &self.mcp {
            m.shutdown().await;
        }
    }

    async fn call(&self, provider: &Provider, method: &str, params: Value) -> Result<Value, ProviderError> {
        {
            let health = provider.health.locked();
            if health.paused_until.is_some_and(|until| Instant::now() < until) {
                return Err(ProviderError::Transport("paused after repeated failures".into()));
            }
        }
        let outcome = self.call_unrecorded(provider, method, params).await;
        // Success is recorded by the caller once the answer has parsed: an
        // answer of the wrong shape is a failure too.
        if let Err(e) = &outcome {
            self.record(provider, method, Err(e));
        }
        outcome
    }

    /// One call with its deadlines, its health neither consulted nor recorded.
    async fn call_unrecorded(&self, provider: &Provider, method: &str, params: Value) -> Result<Value, ProviderError> {
        let settings = &provider.spec.settings;
        let once = |params: Value| async move {
            match &provider.transport {
                Transport::Http(t) => t.call(method, params, settings).await,
                Transport::Node(n) => n.call(&provider.spec.uri, method, params, settings).await,
                Transport::Mcp(m) => m.call(method, params).await,
            }
        };
        let call = async {
            match once(params.clone()).await {
                // A child process that died just before the call (its exit
                // not yet noticed) is restarted by the next call: try once
                // more within the same deadline.
                Err(ProviderError::Transport(e)) if !matches!(provider.transport, Transport::Http(_)) => {
                    log::info(format!("openctx provider {}: {e}; retrying once", provider.spec.uri));
                    once(params).await
                }
                other => other,
            }
        };
        // Starting a process (Node importing a module, an MCP server's
        // handshake, `npx` installing it first) has its own, longer deadline;
        // the call itself then has the per-call one.
        let start = async {
            let once = || async {
                match &provider.transport {
                    Transport::Http(_) => Ok(()),
                    Transport::Node(n) => n.start(&provider.spec.uri).await,
                    Transport::Mcp(m) => m.start().await,
                }
            };
            match once().await {
                Err(ProviderError::Transport(e)) if !matches!(provider.transport, Transport::Http(_)) => {
                    log::info(format!("openctx provider {}: {e}; retrying the start once", provider.spec.uri));
                    once().await
                }
                other => other,
            }
        };
        let outcome = match tokio::time::timeout(self.startup_timeout, start).await {
            Err(_) => Err(ProviderError::Transport(format!(
                "did not start within {} ms (openctx.startup_timeout_ms)",
                self.startup_timeout.as_millis()
            ))),
            Ok(Err(e)) => Err(e),
            Ok(Ok(())) => match tokio::time::timeout(self.timeout, call).await {
                Ok(r) => r,
                Err(_) => Err(ProviderError::Timeout),
            },
        };
        outcome
    }

    /// `:checkhealth amp`: every provider's `meta`, asked afresh (nothing
    /// cached, nothing counted as a failure): its kind, and its name and
    /// features or why it failed, in provider order.
    pub async fn check(&self) -> Vec<Value> {
        join_all(self.providers.iter().map(|p| async move {
            let kind = match p.spec.kind {
                ProviderKind::Http => "HTTP endpoint",
                ProviderKind::JsModule => "JavaScript module",
                ProviderKind::Mcp { .. } => "MCP server",
            };
            let outcome = self
                .call_unrecorded(p, "meta", json!({}))
                .await
                .map_err(|e| e.to_string())
                .and_then(|v| serde_json::from_value::<MetaResult>(v).map_err(|e| format!("bad meta: {e}")));
            match outcome {
                Ok(meta) => {
                    let mut features = Vec::new();
                    if meta.annotations.is_some() {
                        features.push("annotations");
                    }
                    if meta.mentions.is_some() {
                        features.push("mentions");
                    }
                    if meta.items.is_some() {
                        features.push("items");
                    }
                    json!({ "uri": p.spec.uri, "kind": kind, "ok": true, "name": meta.name, "features": features })
                }
                Err(e) => json!({ "uri": p.spec.uri, "kind": kind, "ok": false, "error": e }),
            }
        }))
        .await
    }

    /// Calls `method` and parses a list answer leniently (a malformed
    /// element is dropped and logged, the rest kept). A non-list answer is a
    /// failure of the provider.
    async fn call_list<T: serde::de::DeserializeOwned>(
        &self,
        provider: &Provider,
        method: &str,
        params: Value,
    ) -> Option<Vec<T>> {
        let value = self.call(provider, method, params).await.ok()?;
        match parse_list_lenient::<T>(value, method) {
            Ok((list, errors)) => {
                for e in errors {
                    log::warn(format!("openctx provider {}: {e} (skipped)", provider.spec.uri));
                }
                self.record(provider, method, Ok(()));
                Some(list)
            }
            Err(e) => {
                self.record(provider, method, Err(&ProviderError::Protocol(e.to_string())));
                None
            }
        }
    }

    fn record(&self, provider: &Provider, method: &str, outcome: Result<(), &ProviderError>) {
        let mut health = provider.health.locked();
        match outcome {
            Ok(()) => *health = Health::default(),
            Err(e) => {
                health.consecutive_failures += 1;
                log::warn(format!("openctx provider {} {method} failed: {e}", provider.spec.uri));
                if health.consecutive_failures >= FAILURES_BEFORE_PAUSE {
                    health.paused_until = Some(Instant::now() + PAUSE);
                    health.consecutive_failures = 0;
                    log::warn(format!("openctx provider {} paused for {}s", provider.spec.uri, PAUSE.as_secs()));
                }
                if !health.reported {
                    health.reported = true;
                    self.failures.locked().push(Failure {
                        provider: provider.spec.uri.clone(),
                        message: format!("{method} failed: {e}"),
                    });
                }
            }
        }
    }

    /// `meta`, called once and cached. A failure is not cached, but it is
    /// not retried for [`META_RETRY`] either: requests that queued behind a
    /// hanging `meta` would otherwise each wait a whole timeout again.
    async fn meta(&self, provider: &Provider) -> Option<Arc<ProviderMeta>> {
        let mut slot = provider.meta.lock().await;
        let epoch = provider.meta_epoch.load(std::sync::atomic::Ordering::SeqCst);
        if let Some((asked_in, meta)) = slot.as_ref() {
            if *asked_in == epoch {
                return Some(meta.clone());
            }
        }
        {
            let failed = *provider.meta_failed_at.locked();
            if failed.is_some_and(|at| at.elapsed() < META_RETRY) {
                return None;
            }
        }
        let failed = || *provider.meta_failed_at.locked() = Some(Instant::now());
        let Ok(value) = self.call(provider, "meta", json!({})).await else {
            failed();
            return None;
        };
        let meta: MetaResult = match serde_json::from_value(value) {
            Ok(m) => m,
            Err(e) => {
                self.record(provider, "meta", Err(&ProviderError::Protocol(format!("bad meta: {e}"))));
                failed();
                return None;
            }
        };
        self.record(provider, "meta", Ok(()));
        let annotation_selectors = meta.annotations.as_ref().map(|a| {
            let (compiled, errors) = CompiledSelectors::compile(a.selectors.as_deref());
            for e in errors {
                log::warn(format!("openctx provider {}: {e}", provider.spec.uri));
            }
            compiled
        });
        let message_selectors = meta.items.as_ref().and_then(|i| i.message_selectors.as_deref()).map(|sel| {
            let (regexes, errors) = compile_message_selectors(Some(sel));
            for e in errors {
                log::warn(format!("openctx provider {}: {e}", provider.spec.uri));
            }
            regexes
        });
        let meta = Arc::new(ProviderMeta { meta, annotation_selectors, message_selectors });
        *slot = Some((epoch, meta.clone()));
        Some(meta)
    }

    /// Annotations for a document from every provider whose selectors
    /// match, merged. `on_update` is called with the merged list so far each
    /// time a provider answers, so a slow provider never holds up the others.
    pub async fn annotations(&self, uri: &str, content: &str, mut on_update: impl FnMut(Vec<(String, Annotation)>)) {
        let content_key = content_hash(content);
        let mut pending: FuturesUnordered<_> = self
            .providers
            .iter()
            .enumerate()
            .map(|(i, p)| async move { (i, self.provider_annotations(p, uri, content, content_key).await) })
            .collect();
        let mut answered: Vec<Option<Vec<Annotation>>> = vec![None; self.providers.len()];
        let mut drawn = false;
        while let Some((i, result)) = pending.next().await {
            let Some(list) = result else { continue };
            let empty = list.is_empty();
            answered[i] = Some(list);
            if empty && answered.iter().flatten().all(Vec::is_empty) && !pending.is_empty() {
                continue; // nothing new to draw yet
            }
            let merged: Vec<(String, Vec<Annotation>)> = self
                .providers
                .iter()
                .zip(&answered)
                .filter_map(|(p, list)| list.clone().map(|l| (p.spec.uri.clone(), l)))
                .collect();
            on_update(merge_by_provider(merged));
            drawn = true;
        }
        if !drawn {
            // No provider answered (none matched, all failed): whatever was
            // drawn for an earlier text no longer applies.
            on_update(Vec::new());
        }
    }

    async fn provider_annotations(
        &self,
        p: &Provider,
        uri: &str,
        content: &str,
        content_key: u64,
    ) -> Option<Vec<Annotation>> {
        let meta = self.meta(p).await?;
        let selectors = meta.annotation_selectors.as_ref()?;
        if !selectors.matches(uri, content) {
            return None;
        }
        let key = format!("{}\u{0}{uri}\u{0}{content_key}", p.spec.uri);
        if let Some(hit) = self.annotation_cache.locked().get(&key) {
            return Some(hit);
        }
        let mut list: Vec<Annotation> =
            self.call_list(p, "annotations", json!({ "uri": uri, "content": content })).await?;
        sort_annotations(&mut list);
        self.annotation_cache.locked().insert(key, list.clone());
        Some(list)
    }

    /// Mentions from every provider that offers them, with its picker label.
    /// `uri` is the active document's (`MentionsParams.uri`), sent as VS Code's client does.
    pub async fn mentions(&self, query: &str, uri: Option<&str>) -> Vec<(String, Option<String>, Mention)> {
        let mut params = json!({ "query": query });
        if let Some(uri) = uri {
            params["uri"] = json!(uri);
        }
        let params = &params;
        let per_provider = join_all(self.providers.iter().map(|p| async move {
            let meta = self.meta(p).await?;
            let label = meta.meta.mentions.as_ref()?.label.clone();
            let list: Vec<Mention> = self.call_list(p, "mentions", params.clone()).await?;
            Some((p.spec.uri.clone(), list.into_iter().map(|m| (label.clone(), m)).collect::<Vec<_>>()))
        }))
        .await;
        merge_by_provider(per_provider.into_iter().flatten().collect())
            .into_iter()
            .map(|(uri, (label, m))| (uri, label, m))
            .collect()
    }

    /// Items for a mention (from the provider that gave it).
    pub async fn items_for_mention(&self, provider_uri: &str, mention: &Mention) -> Result<Vec<Item>, ItemsError> {
        let p = self.providers.iter().find(|p| p.spec.uri == provider_uri).ok_or(ItemsError::UnknownProvider)?;
        self.call_list(p, "items", json!({ "mention": mention }))
            .await
            .ok_or_else(|| ItemsError::Failed { provider: provider_uri.to_owned() })
    }

    /// Items for a message from providers whose `messageSelectors` match it.
    pub async fn items_for_message(&self, message: &str) -> Vec<(String, Item)> {
        let per_provider = join_all(self.providers.iter().map(|p| async move {
            let meta = self.meta(p).await?;
            let regexes = meta.message_selectors.as_ref()?;
            if !message_matches(regexes, message) {
                return None;
            }
            let list: Vec<Item> = self.call_list(p, "items", json!({ "message": message })).await?;
            Some((p.spec.uri.clone(), list))
        }))
        .await;
        merge_by_provider(per_provider.into_iter().flatten().collect())
    }
}

fn content_hash(content: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    content.hash(&mut h);
    h.finish()
}
