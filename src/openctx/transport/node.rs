//! OpenCtx providers that are JS modules, run by ONE long-lived Node process
//! (`node/openctx-host.mjs`) shared by every module provider.
//!
//! The process starts on the first call; calls are multiplexed over its stdin
//! and stdout by id (see the host script for the line protocol). When it dies,
//! every pending call fails with `Transport("node exited …")` and the next call
//! starts a new one. A call given up by its caller (a timeout) makes the host
//! answer a ping: a provider stuck in a synchronous loop blocks Node's event
//! loop, and with it every JS provider, so a host that does not answer is
//! killed and the next call starts a new one. Remote modules (`https://…/x.js`, `http+js:`, `https+js:`)
//! are downloaded into `cache_dir` first, because plain Node cannot import an
//! `https:` URL.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde_json::{json, Value};
use tokio::sync::watch;

use super::http::{read_body_capped, shared_client, MAX_BODY_BYTES};
use super::{error_chain, ChildConn, ChildSpec, ProviderError, RequestError};
use crate::core::sync::LockExt;

/// A downloaded module is used without asking the server again for this long.
const MODULE_MAX_AGE: Duration = Duration::from_secs(24 * 60 * 60);
/// A download is abandoned after this long (it runs detached from the calls
/// waiting for it, so a caller's short timeout does not restart it each time).
const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(60);
const SHUTDOWN_WAIT: Duration = Duration::from_secs(1);
/// How long the host has to answer a liveness ping (it answers at once when
/// its event loop runs).
const PING_TIMEOUT: Duration = Duration::from_secs(2);

type DownloadResult = Option<Result<PathBuf, String>>;

struct NodeInner {
    spec: ChildSpec,
    cache_dir: PathBuf,
    conn: Mutex<Option<Arc<ChildConn>>>,
    /// Downloads in flight, by URL.
    downloads: Mutex<HashMap<String, watch::Receiver<DownloadResult>>>,
    /// A liveness ping is in flight (one at a time).
    pinging: AtomicBool,
    /// Modules imported by [`NodeHost::start`], and the process that imported them.
    loaded: Mutex<HashMap<String, std::sync::Weak<ChildConn>>>,
}

/// The Node host shared by all JS module providers. Cheap to clone.
#[derive(Clone)]
pub struct NodeHost {
    inner: Arc<NodeInner>,
}

/// Where a provider URI's module comes from.
#[derive(Debug, PartialEq, Eq)]
enum ModuleSource {
    /// `file:` URLs (and absolute paths): handed to the host as they are.
    Local(String),
    /// `http(s):` URLs (`+js` stripped): downloaded first.
    Remote(String),
}

fn module_source(uri: &str) -> ModuleSource {
    let lower = uri.get(..9).unwrap_or(uri).to_ascii_lowercase();
    if lower.starts_with("http+js:") {
        ModuleSource::Remote(format!("http:{}", &uri["http+js:".len()..]))
    } else if lower.starts_with("https+js:") {
        ModuleSource::Remote(format!("https:{}", &uri["https+js:".len()..]))
    } else if lower.starts_with("http:") || lower.starts_with("https:") {
        ModuleSource::Remote(uri.to_string())
    } else {
        ModuleSource::Local(uri.to_string())
    }
}

/// FNV-1a, 64 bits, from a given offset basis: stable across Rust versions
/// (std's `DefaultHasher` is not), which a cache file name needs.
fn fnv1a(bytes: &[u8], basis: u64) -> u64 {
    let mut h = basis;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// `cache_dir/<128-bit hash of the URL>.mjs` (`.cjs` for a `.cjs` URL, so Node
/// loads it as CommonJS and the provider is its `module.exports`).
fn cache_path(cache_dir: &Path, url: &str) -> PathBuf {
    let hash = format!(
        "{:016x}{:016x}",
        fnv1a(url.as_bytes(), 0xcbf2_9ce4_8422_2325),
        fnv1a(url.as_bytes(), 0x6c62_272e_07bb_0142)
    );
    let path_part = url.split(['?', '#']).next().unwrap_or(url);
    let ext = if path_part.to_ascii_lowercase().ends_with(".cjs") { "cjs" } else { "mjs" };
    cache_dir.join(format!("openctx-module-{hash}.{ext}"))
}

fn is_fresh(path: &Path) -> bool {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .is_ok_and(|t| SystemTime::now().duration_since(t).map_or(true, |age| age < MODULE_MAX_AGE))
}

/// The reference's rule for a remote module's `Content-Type`
/// (`fetchProviderSource` in `@openctx/client` 0.0.30): its media type,
/// parameters dropped, must be `text/javascript`, `application/javascript` or
/// `text/plain`; an HTML page (a login or error page) is refused.
fn is_module_content_type(header: Option<&str>) -> bool {
    let Some(header) = header else { return false };
    let media = header.trim();
    let media = media.split(';').next().unwrap_or(media);
    matches!(media, "text/javascript" | "application/javascript" | "text/plain")
}

async fn download(url: &str, path: &Path) -> Result<PathBuf, String> {
    let fetch = async {
        let client = shared_client().map_err(|e| e.to_string())?;
        let response = client.get(url).send().await.map_err(|e| format!("downloading {url}: {}", error_chain(&e)))?;
        if !response.status().is_success() {
            return Err(format!("HTTP {} from {url}", response.status().as_u16()));
        }
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        if !is_module_content_type(content_type.as_deref()) {
            // (The provider is named by whoever reports this: the URL would
            // push the reason out of a short notification.)
            return Err(format!(
                "not a JavaScript module: Content-Type {} (expected text/javascript, application/javascript or text/plain)",
                content_type.as_deref().map_or("missing".to_owned(), |t| format!("\"{}\"", t.trim()))
            ));
        }
        read_body_capped(response, MAX_BODY_BYTES, url).await.map_err(|e| match e {
            ProviderError::Transport(m) => m,
            other => other.to_string(),
        })
    };
    let body = match tokio::time::timeout(DOWNLOAD_TIMEOUT, fetch).await {
        Ok(r) => r?,
        Err(_) => return Err(format!("downloading {url} took longer than {}s", DOWNLOAD_TIMEOUT.as_secs())),
    };
    let path = path.to_path_buf();
    let written = tokio::task::spawn_blocking(move || -> std::io::Result<PathBuf> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        // Write aside, then rename: the host never imports half a file.
        static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = path.with_extension(format!("{}.{n}.tmp", std::process::id()));
        std::fs::write(&tmp, &body)?;
        if let Err(e) = std::fs::rename(&tmp, &path) {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        Ok(path)
    })
    .await
    .map_err(|e| format!("saving {url}: {e}"))?
    .map_err(|e| format!("saving {url}: {e}"))?;
    crate::core::log::info(format!("openctx: downloaded {url} to {}", written.display()));
    Ok(written)
}

impl NodeHost {
    pub fn new(node_command: String, host_script: PathBuf, cache_dir: PathBuf) -> Self {
        let spec = ChildSpec {
            program: node_command,
            args: vec![host_script.to_string_lossy().into_owned()],
            env: Vec::new(),
            cwd: None,
            label: "node".into(),
            jsonrpc: false,
        };
        NodeHost {
            inner: Arc::new(NodeInner {
                spec,
                cache_dir,
                conn: Mutex::new(None),
                downloads: Mutex::new(HashMap::new()),
                pinging: AtomicBool::new(false),
                loaded: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// One provider call. `module` is the provider URI (`file://`, `https://…js`,
    /// `http+js:…`); remote modules are downloaded to `cache_dir` first (keyed by
    /// a hash of the URL), then imported. Cancel-safe.
    pub async fn call(
        &self,
        module: &str,
        method: &str,
        params: Value,
        settings: &Value,
    ) -> Result<Value, ProviderError> {
        let module_ref = self.module_ref(module).await?;
        self.send(json!({"module": module_ref, "method": method, "params": params, "settings": settings}))
            .await
            .map(|(_, v)| v)
    }

    /// The start-up of `module`: downloads it if it is remote, starts the
    /// host if none runs and has it import the module. Done once per module
    /// and host process; the caller gives it a longer deadline than a call
    /// (`openctx.startup_timeout_ms`). Cancel-safe.
    pub async fn start(&self, module: &str) -> Result<(), ProviderError> {
        let module_ref = self.module_ref(module).await?;
        let running = self.inner.conn.locked().as_ref().filter(|c| !c.is_dead()).cloned();
        if let Some(conn) = running {
            let loaded = self.inner.loaded.locked().get(&module_ref).and_then(std::sync::Weak::upgrade);
            if loaded.is_some_and(|c| Arc::ptr_eq(&c, &conn)) {
                return Ok(());
            }
        }
        let (conn, _) = self.send(json!({"module": module_ref, "load": true})).await?;
        self.inner.loaded.locked().insert(module_ref, Arc::downgrade(&conn));
        Ok(())
    }

    /// What the host imports for a provider URI (remote modules downloaded first).
    async fn module_ref(&self, module: &str) -> Result<String, ProviderError> {
        Ok(match module_source(module) {
            ModuleSource::Local(m) => m,
            ModuleSource::Remote(url) => self.fetch_module(&url).await?.to_string_lossy().into_owned(),
        })
    }

    async fn send(&self, mut message: Value) -> Result<(Arc<ChildConn>, Value), ProviderError> {
        // A process found dead before anything was sent is replaced once.
        for _ in 0..2 {
            let conn = self.connection()?;
            let abandoned = PingIfAbandoned { host: self, conn: Some(conn.clone()) };
            let outcome = conn.request_inner(message).await;
            abandoned.defuse();
            match outcome {
                Ok(v) => return Ok((conn, v)),
                Err(RequestError::Failed(e)) => return Err(e),
                Err(RequestError::NotSent(_, m)) => message = m,
            }
        }
        Err(ProviderError::Transport("node exited (it keeps dying on start)".into()))
    }

    /// Kills the Node process (pending calls fail). A later call starts a new one.
    pub async fn shutdown(&self) {
        let conn = self.inner.conn.locked().take();
        if let Some(conn) = conn {
            conn.shutdown("node host shut down", SHUTDOWN_WAIT).await;
        }
    }

    /// The running Node process's pid, if one is running.
    pub fn pid(&self) -> Option<u32> {
        self.inner.conn.locked().as_ref().filter(|c| !c.is_dead()).and_then(|c| c.pid())
    }

    /// Pings `conn`'s host in the background; kills it (and forgets it, so
    /// the next call starts a new one) if it does not answer in time.
    fn check_alive(&self, conn: Arc<ChildConn>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        if conn.is_dead() || self.inner.pinging.swap(true, Ordering::AcqRel) {
            return;
        }
        let inner = self.inner.clone();
        runtime.spawn(async move {
            let ping = tokio::time::timeout(PING_TIMEOUT, conn.request_inner(json!({ "ping": true }))).await;
            if ping.is_err() && !conn.is_dead() {
                crate::core::log::warn(
                    "openctx: the Node host stopped answering (a JS provider is blocking it): restarting it",
                );
                {
                    let mut slot = inner.conn.locked();
                    if slot.as_ref().is_some_and(|c| Arc::ptr_eq(c, &conn)) {
                        *slot = None;
                    }
                }
                conn.shutdown(
                    "node host stopped answering (a JS provider blocked it) and was restarted",
                    SHUTDOWN_WAIT,
                )
                .await;
            }
            inner.pinging.store(false, Ordering::Release);
        });
    }

    fn connection(&self) -> Result<Arc<ChildConn>, ProviderError> {
        let mut slot = self.inner.conn.locked();
        if let Some(conn) = slot.as_ref().filter(|c| !c.is_dead()) {
            return Ok(conn.clone());
        }
        let conn = ChildConn::spawn(&self.inner.spec)?;
        *slot = Some(conn.clone());
        Ok(conn)
    }

    /// The local file for a remote module: downloaded once (again after a day),
    /// by a detached task shared by every call waiting for it. A running host
    /// keeps the module it imported first; a newer download is used by the next
    /// host process.
    async fn fetch_module(&self, url: &str) -> Result<PathBuf, ProviderError> {
        let path = cache_path(&self.inner.cache_dir, url);
        let mut rx = {
            let mut downloads = self.inner.downloads.locked();
            // (An entry whose task vanished without an answer is started anew.)
            match downloads.get(url).filter(|rx| rx.borrow().is_some() || rx.has_changed().is_ok()) {
                Some(rx) => rx.clone(),
                None => {
                    if is_fresh(&path) {
                        return Ok(path);
                    }
                    let (tx, rx) = watch::channel(None);
                    downloads.insert(url.to_string(), rx.clone());
                    let inner = self.inner.clone();
                    let (url, path) = (url.to_string(), path.clone());
                    tokio::spawn(async move {
                        let result = match download(&url, &path).await {
                            Ok(p) => Ok(p),
                            // An old copy beats no provider.
                            Err(e) if path.exists() => {
                                crate::core::log::warn(format!(
                                    "openctx: {e}; using the copy from an earlier download"
                                ));
                                Ok(path)
                            }
                            Err(e) => Err(e),
                        };
                        let _ = tx.send(Some(result));
                        inner.downloads.locked().remove(&url);
                    });
                    rx
                }
            }
        };
        let result = rx
            .wait_for(Option::is_some)
            .await
            .map_err(|_| ProviderError::Transport(format!("downloading {url} was abandoned")))?
            .clone();
        match result {
            Some(Ok(path)) => Ok(path),
            Some(Err(e)) => Err(ProviderError::Transport(e)),
            None => Err(ProviderError::Transport(format!("downloading {url} was abandoned"))),
        }
    }

    #[cfg(test)]
    fn stray_lines(&self) -> u64 {
        self.inner.conn.locked().as_ref().map_or(0, |c| c.stray_lines())
    }
}

/// Dropped with its call unfinished (the caller gave up): checks that the
/// host is still answering.
struct PingIfAbandoned<'a> {
    host: &'a NodeHost,
    conn: Option<Arc<ChildConn>>,
}

impl PingIfAbandoned<'_> {
    fn defuse(mut self) {
        self.conn = None;
    }
}

impl Drop for PingIfAbandoned<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            self.host.check_alive(conn);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::http::tests::{response, serve, Route, Seen};
    use super::super::test_support::{kill9, repo_root};
    use super::*;
    use std::time::Instant;

    const LIMIT: Duration = Duration::from_secs(15);

    #[test]
    fn module_content_types_follow_the_reference() {
        for ok in [
            "text/javascript",
            "application/javascript",
            "text/plain",
            "text/javascript; charset=utf-8",
            " text/plain ",
        ] {
            assert!(is_module_content_type(Some(ok)), "{ok}");
        }
        // As fetchProviderSource: trimmed, parameters dropped, compared exactly.
        for bad in [
            "text/html",
            "text/html; charset=utf-8",
            "application/json",
            "Text/JavaScript",
            "text/javascript ; x=y",
            "",
        ] {
            assert!(!is_module_content_type(Some(bad)), "{bad}");
        }
        assert!(!is_module_content_type(None));
    }

    fn fixture(name: &str) -> PathBuf {
        repo_root().join("tests/fixtures/openctx").join(name)
    }

    fn file_url(path: &Path) -> String {
        // Fixture paths are plain ASCII without spaces here; encode the few
        // characters a URL path cannot hold anyway.
        let mut out = String::from("file://");
        for c in path.to_string_lossy().chars() {
            match c {
                ' ' => out.push_str("%20"),
                '#' => out.push_str("%23"),
                '?' => out.push_str("%3F"),
                '%' => out.push_str("%25"),
                c => out.push(c),
            }
        }
        out
    }

    fn scratch_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("amp-openctx-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn host(cache: &str) -> NodeHost {
        NodeHost::new("node".into(), repo_root().join("node/openctx-host.mjs"), scratch_dir(cache))
    }

    #[test]
    fn module_sources_and_cache_paths() {
        assert_eq!(module_source("file:///a/p.mjs"), ModuleSource::Local("file:///a/p.mjs".into()));
        assert_eq!(module_source("https://h/x.js"), ModuleSource::Remote("https://h/x.js".into()));
        assert_eq!(module_source("https+js://h/x"), ModuleSource::Remote("https://h/x".into()));
        assert_eq!(module_source("HTTP+JS://h/x"), ModuleSource::Remote("http://h/x".into()));
        let a = cache_path(Path::new("/c"), "https://h/x.js");
        assert_eq!(a, cache_path(Path::new("/c"), "https://h/x.js"));
        assert_ne!(a, cache_path(Path::new("/c"), "https://h/y.js"));
        assert!(a.to_string_lossy().ends_with(".mjs"));
        assert!(cache_path(Path::new("/c"), "https://h/x.cjs?v=1").to_string_lossy().ends_with(".cjs"));
        // Stable across builds: a known value.
        assert_eq!(fnv1a(b"a", 0xcbf2_9ce4_8422_2325), 0xaf63_dc4c_8601_ec8c);
    }

    #[tokio::test]
    async fn node_host_runs_provider_modules() {
        tokio::time::timeout(LIMIT, async {
            let host = host("basic");
            assert_eq!(host.pid(), None, "the process starts lazily");
            let basic = file_url(&fixture("provider-basic.mjs"));
            let settings = json!({"prefix": "P:"});

            let meta = host.call(&basic, "meta", json!({}), &settings).await.unwrap();
            assert_eq!(meta["name"], "basic");
            assert_eq!(meta["annotations"]["selectors"], json!([{"path": "**/*.md"}]));
            let pid = host.pid().expect("running after the first call");

            let content = "one\nTODO: two\nthree TODO\n";
            let ann = host
                .call(&basic, "annotations", json!({"uri": "file:///x.md", "content": content}), &settings)
                .await
                .unwrap();
            assert_eq!(ann.as_array().unwrap().len(), 2);
            assert_eq!(ann[0]["item"]["title"], "P: TODO on line 2");
            assert_eq!(ann[0]["range"]["start"], json!({"line": 1, "character": 0}));
            assert_eq!(ann[1]["range"]["start"], json!({"line": 2, "character": 6}));

            let mentions = host.call(&basic, "mentions", json!({"query": "ALP"}), &json!({})).await.unwrap();
            assert_eq!(mentions, json!([{"title": "alpha", "uri": "basic://alpha"}]));
            let items = host
                .call(&basic, "items", json!({"mention": {"title": "alpha", "uri": "basic://alpha"}}), &json!({}))
                .await
                .unwrap();
            assert_eq!(items[0]["ai"]["content"], "content of basic://alpha");

            // Settings arrive as the second argument, unchanged.
            let echo = host.call(&basic, "echo", json!({"a": [1, "é"]}), &settings).await.unwrap();
            assert_eq!(echo, json!({"params": {"a": [1, "é"]}, "settings": {"prefix": "P:"}}));

            // Imported once: the module body ran once for all these calls.
            let meta = host.call(&basic, "meta", json!({}), &settings).await.unwrap();
            assert_eq!(meta["loads"], 1);

            // Nested default.default; its missing list methods answer [].
            let nested = file_url(&fixture("provider-nested.mjs"));
            let meta = host.call(&nested, "meta", json!({}), &json!({})).await.unwrap();
            assert_eq!(meta["name"], "nested");
            for m in ["annotations", "mentions", "items"] {
                assert_eq!(host.call(&nested, m, json!({}), &json!({})).await.unwrap(), json!([]), "{m}");
            }
            // ... but a missing meta (or other method) is an error.
            let no_meta = file_url(&fixture("provider-no-meta.mjs"));
            let e = host.call(&no_meta, "meta", json!({}), &json!({})).await.unwrap_err();
            assert_eq!(e, ProviderError::Provider { code: 0, message: "provider has no method meta".into() });
            let e = host.call(&nested, "frobnicate", json!({}), &json!({})).await.unwrap_err();
            assert!(
                matches!(&e, ProviderError::Provider { message, .. } if message.contains("no method frobnicate")),
                "{e:?}"
            );

            // Thrown errors: an Error (with a numeric code), an async rejection, a string.
            let throws = file_url(&fixture("provider-throws.mjs"));
            let e = host.call(&throws, "meta", json!({}), &json!({})).await.unwrap_err();
            assert_eq!(e, ProviderError::Threw("boom from meta".into()));
            assert_eq!(e.to_string(), "provider threw: boom from meta");
            let e = host.call(&throws, "mentions", json!({}), &json!({})).await.unwrap_err();
            assert_eq!(e, ProviderError::Threw("async boom (code 42)".into()));
            let e = host.call(&throws, "items", json!({}), &json!({})).await.unwrap_err();
            assert_eq!(e, ProviderError::Threw("a plain string".into()));

            // A module that does not exist, and one that fails to parse.
            let missing = file_url(&fixture("does-not-exist.mjs"));
            let e = host.call(&missing, "meta", json!({}), &json!({})).await.unwrap_err();
            assert!(matches!(&e, ProviderError::Import(m) if m.contains("does-not-exist.mjs")), "{e:?}");
            assert!(e.to_string().starts_with("import failed: "), "{e}");

            // A provider that writes to stdout in every way: answers stay clean.
            let logs = file_url(&fixture("provider-logs.mjs"));
            let meta = host.call(&logs, "meta", json!({}), &json!({})).await.unwrap();
            assert_eq!(meta["name"], "logs");
            let ann =
                host.call(&logs, "annotations", json!({"uri": "file:///a", "content": ""}), &json!({})).await.unwrap();
            assert_eq!(ann, json!([]));
            assert_eq!(host.stray_lines(), 0, "something other than answers reached stdout");

            // Everything ran in the one process.
            assert_eq!(host.pid(), Some(pid));
            host.shutdown().await;
            assert_eq!(host.pid(), None);
        })
        .await
        .expect("test timed out");
    }

    #[tokio::test]
    async fn node_host_blocked_by_a_busy_provider_is_replaced() {
        tokio::time::timeout(LIMIT, async {
            let host = host("busy");
            let busy = file_url(&fixture("provider-busy.mjs"));
            let basic = file_url(&fixture("provider-basic.mjs"));
            host.call(&basic, "meta", json!({}), &json!({})).await.unwrap();
            // Imported first, so that the call below spins at once: a
            // module still being imported leaves the host free to answer
            // (on a cold machine the import alone can outlast the 300 ms).
            host.call(&busy, "meta", json!({}), &json!({})).await.unwrap();
            let blocked_pid = host.pid().unwrap();
            // The busy call blocks the whole host; its caller gives up ...
            let r = tokio::time::timeout(
                Duration::from_millis(300),
                host.call(&busy, "annotations", json!({"uri": "file:///a", "content": ""}), &json!({})),
            )
            .await;
            assert!(r.is_err(), "{r:?}");
            // ... which makes the host answer a ping; it cannot, so it is
            // killed and the next call runs in a new process.
            let started = std::time::Instant::now();
            let meta = loop {
                match tokio::time::timeout(Duration::from_millis(500), host.call(&basic, "meta", json!({}), &json!({})))
                    .await
                {
                    Ok(Ok(meta)) => break meta,
                    _ => assert!(started.elapsed() < PING_TIMEOUT * 3, "the blocked host was not replaced"),
                }
            };
            assert_eq!(meta["name"], "basic");
            assert_ne!(host.pid(), Some(blocked_pid));
            assert!(!pid_exists(blocked_pid), "the blocked node process is still running");
            // A host that is merely slow to answer one call is left alone.
            let live_pid = host.pid().unwrap();
            let slow = file_url(&fixture("provider-hang.mjs"));
            let r = tokio::time::timeout(
                Duration::from_millis(200),
                host.call(&slow, "annotations", json!({}), &json!({})),
            )
            .await;
            assert!(r.is_err());
            tokio::time::sleep(Duration::from_millis(300)).await;
            host.call(&basic, "meta", json!({}), &json!({})).await.unwrap();
            assert_eq!(host.pid(), Some(live_pid), "a host that answers pings must not be restarted");
            host.shutdown().await;
        })
        .await
        .expect("test timed out");
    }

    fn pid_exists(pid: u32) -> bool {
        std::path::Path::new(&format!("/proc/{pid}")).exists()
    }

    #[tokio::test]
    async fn node_host_hanging_calls_and_restart() {
        tokio::time::timeout(LIMIT, async {
            let host = host("hang");
            let hang = file_url(&fixture("provider-hang.mjs"));
            let basic = file_url(&fixture("provider-basic.mjs"));

            // A call that never settles is cancelled by the caller's timeout ...
            let r = tokio::time::timeout(
                Duration::from_millis(300),
                host.call(&hang, "annotations", json!({"uri": "file:///a", "content": ""}), &json!({})),
            )
            .await;
            assert!(r.is_err(), "{r:?}");
            // ... and calls keep working meanwhile, concurrently with more hanging ones.
            let stuck: Vec<_> = (0..5)
                .map(|_| {
                    let host = host.clone();
                    let hang = hang.clone();
                    tokio::spawn(async move { host.call(&hang, "annotations", json!({}), &json!({})).await })
                })
                .collect();
            let meta = host.call(&hang, "meta", json!({}), &json!({})).await.unwrap();
            assert_eq!(meta["name"], "hang");
            let started = Instant::now();
            let meta = host.call(&basic, "meta", json!({}), &json!({})).await.unwrap();
            assert_eq!(meta["name"], "basic");
            assert!(started.elapsed() < Duration::from_secs(2));

            // Kill the process: every pending call fails with "node exited …",
            // and the next call starts a new process.
            let pid = host.pid().unwrap();
            kill9(pid);
            for call in stuck {
                let e = call.await.unwrap().unwrap_err();
                match e {
                    ProviderError::Transport(m) => assert!(m.starts_with("node exited"), "{m}"),
                    other => panic!("{other:?}"),
                }
            }
            let meta = host.call(&basic, "meta", json!({}), &json!({})).await.unwrap();
            assert_eq!(meta["name"], "basic");
            // A fresh process imported the module again.
            assert_eq!(meta["loads"], 1);
            let new_pid = host.pid().unwrap();
            assert_ne!(new_pid, pid);

            // Killed while idle, between calls: the next call restarts it as well.
            kill9(new_pid);
            tokio::time::sleep(Duration::from_millis(100)).await;
            let meta = host.call(&basic, "meta", json!({}), &json!({})).await.unwrap();
            assert_eq!(meta["name"], "basic");
            assert_ne!(host.pid().unwrap(), new_pid);

            // Many short timeouts in a row leave no debris behind.
            for _ in 0..20 {
                let _ =
                    tokio::time::timeout(Duration::from_micros(50), host.call(&basic, "meta", json!({}), &json!({})))
                        .await;
            }
            assert_eq!(host.call(&basic, "meta", json!({}), &json!({})).await.unwrap()["name"], "basic");

            host.shutdown().await;
        })
        .await
        .expect("test timed out");
    }

    #[tokio::test]
    async fn node_host_spawn_failure_is_a_transport_error() {
        let host = NodeHost::new(
            "/nonexistent/node-binary".into(),
            repo_root().join("node/openctx-host.mjs"),
            scratch_dir("nospawn"),
        );
        let e = host.call(&file_url(&fixture("provider-basic.mjs")), "meta", json!({}), &json!({})).await.unwrap_err();
        assert!(matches!(&e, ProviderError::Transport(m) if m.contains("failed to start node")), "{e:?}");
    }

    #[tokio::test]
    async fn node_host_loads_remote_modules() {
        tokio::time::timeout(LIMIT, async {
            let source = std::fs::read(fixture("provider-basic.mjs")).unwrap();
            let source2 = source.clone();
            let (base, mut seen) = serve(vec![
                (
                    "/provider.js",
                    Box::new(move |_: &Seen| Some(response("200 OK", "text/javascript", &source))) as Route,
                ),
                (
                    "/other/provider.js",
                    Box::new(move |_: &Seen| Some(response("200 OK", "text/javascript", &source2))) as Route,
                ),
                ("/missing.js", Box::new(|_: &Seen| Some(response("404 Not Found", "text/plain", b"no"))) as Route),
            ])
            .await;
            let cache = scratch_dir("remote");
            let host = NodeHost::new("node".into(), repo_root().join("node/openctx-host.mjs"), cache.clone());

            let url = format!("{base}/provider.js");
            let meta = host.call(&url, "meta", json!({}), &json!({})).await.unwrap();
            assert_eq!(meta["name"], "basic");
            let cached = cache_path(&cache, &url);
            assert!(cached.is_file(), "{} missing", cached.display());
            assert_eq!(seen.recv().await.unwrap().method, "GET");

            // Cached: the second call does not download again.
            host.call(&url, "meta", json!({}), &json!({})).await.unwrap();

            // http+js: strips +js and downloads the http: URL.
            let plus = format!("http+js{}", &base["http".len()..]) + "/other/provider.js";
            let mentions = host.call(&plus, "mentions", json!({}), &json!({})).await.unwrap();
            assert_eq!(mentions.as_array().unwrap().len(), 2);
            let cached2 = cache_path(&cache, &format!("{base}/other/provider.js"));
            assert!(cached2.is_file());
            let paths: Vec<String> = std::iter::from_fn(|| seen.try_recv().ok()).map(|s| s.path).collect();
            assert_eq!(paths, vec!["/other/provider.js".to_string()], "only the new module was fetched");

            let e = host.call(&format!("{base}/missing.js"), "meta", json!({}), &json!({})).await.unwrap_err();
            assert_eq!(e, ProviderError::Transport(format!("HTTP 404 from {base}/missing.js")));
            assert_eq!(seen.recv().await.unwrap().path, "/missing.js");

            // A new host (a new session) uses the file on disk without downloading.
            host.shutdown().await;
            let host2 = NodeHost::new("node".into(), repo_root().join("node/openctx-host.mjs"), cache.clone());
            assert_eq!(host2.call(&url, "meta", json!({}), &json!({})).await.unwrap()["name"], "basic");
            assert!(seen.try_recv().is_err());
            host2.shutdown().await;
        })
        .await
        .expect("test timed out");
    }

    /// The host script alone: one request in, exactly one JSON line out, even
    /// though the provider prints to stdout at import and call time.
    #[test]
    fn host_script_keeps_stdout_clean() {
        use std::io::Write;
        let mut child = std::process::Command::new("node")
            .arg(repo_root().join("node/openctx-host.mjs"))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let request =
            json!({"id": 7, "module": fixture("provider-logs.mjs"), "method": "meta", "params": {}, "settings": {}});
        {
            let mut stdin = child.stdin.take().unwrap();
            writeln!(stdin, "{request}").unwrap();
            // stdin closes here: the host answers, then exits.
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "host did not exit after stdin closed");
            std::thread::sleep(Duration::from_millis(20));
        }
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8(out.stdout).unwrap();
        let lines: Vec<&str> = stdout.lines().collect();
        assert_eq!(lines.len(), 1, "stdout: {stdout:?}");
        let answer: Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(answer["id"], 7);
        assert_eq!(answer["result"]["name"], "logs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        for text in [
            "log at import",
            "console.log in meta",
            "console.info in meta",
            "console.debug in meta",
            "direct stdout write",
        ] {
            assert!(stderr.contains(text), "{text:?} not on stderr: {stderr}");
        }
    }
}
