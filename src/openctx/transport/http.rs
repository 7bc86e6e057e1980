//! OpenCtx providers that are HTTP endpoints: `POST {method, params, settings}`,
//! answer `{result}` or `{error: {code, message}}`.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::{json, Value};

use super::{error_chain, outcome_of, ProviderError};

/// The largest response body read from a provider (or a remote module download).
pub(crate) const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The one HTTP client of the OpenCtx transports (a shared connection pool). No
/// overall timeout: callers apply their own deadline.
pub(crate) fn shared_client() -> Result<reqwest::Client, ProviderError> {
    static CLIENT: OnceLock<Result<reqwest::Client, String>> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            reqwest::Client::builder()
                .connect_timeout(CONNECT_TIMEOUT)
                .user_agent(concat!("amp.nvim-rs/", env!("CARGO_PKG_VERSION"), " (OpenCtx client)"))
                .build()
                .map_err(|e| error_chain(&e))
        })
        .clone()
        .map_err(|e| ProviderError::Transport(format!("cannot create the HTTP client: {e}")))
}

/// Reads a response body, refusing more than `cap` bytes.
pub(crate) async fn read_body_capped(
    mut response: reqwest::Response,
    cap: usize,
    url: &str,
) -> Result<Vec<u8>, ProviderError> {
    let too_big = || ProviderError::Transport(format!("response from {url} is larger than {} MiB", cap >> 20));
    if response.content_length().is_some_and(|n| n > cap as u64) {
        return Err(too_big());
    }
    let mut body = Vec::with_capacity(response.content_length().map_or(8 * 1024, |n| n as usize));
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| ProviderError::Transport(format!("reading the response from {url}: {}", error_chain(&e))))?
    {
        if body.len() + chunk.len() > cap {
            return Err(too_big());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// An HTTP endpoint provider. Cheap to clone.
#[derive(Clone, Debug)]
pub struct HttpTransport {
    url: Arc<str>,
}

impl HttpTransport {
    pub fn new(url: String) -> Self {
        HttpTransport { url: url.into() }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// One protocol call. Cancel-safe: dropping the future drops the request
    /// (its connection is discarded, the shared client stays usable).
    pub async fn call(&self, method: &str, params: Value, settings: &Value) -> Result<Value, ProviderError> {
        let url: &str = &self.url;
        let client = shared_client()?;
        let body = serde_json::to_vec(&json!({"method": method, "params": params, "settings": settings}))
            .map_err(|e| ProviderError::Protocol(format!("cannot encode the request: {e}")))?;
        let response = client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json; charset=utf-8")
            .header(reqwest::header::ACCEPT, "application/json")
            .body(body)
            .send()
            .await
            .map_err(|e| ProviderError::Transport(format!("{url}: {}", error_chain(&e))))?;
        let status = response.status();
        if !status.is_success() {
            return Err(ProviderError::Transport(format!("HTTP {} from {url}", status.as_u16())));
        }
        let bytes = read_body_capped(response, MAX_BODY_BYTES, url).await?;
        match serde_json::from_slice::<Value>(&bytes) {
            Ok(Value::Object(message)) => outcome_of(&message).map_err(|e| match e {
                ProviderError::Protocol(m) => ProviderError::Protocol(format!("{m} (from {url})")),
                other => other,
            }),
            Ok(_) => Err(ProviderError::Protocol(format!("the answer from {url} is not a JSON object"))),
            Err(e) => Err(ProviderError::Protocol(format!("the answer from {url} is not JSON: {e}"))),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};
    use tokio::sync::mpsc;

    /// What the test server saw of one request.
    #[derive(Debug, Clone)]
    pub(crate) struct Seen {
        pub method: String,
        pub path: String,
        pub headers: HashMap<String, String>,
        pub body: Vec<u8>,
    }

    /// A response the test server sends for a path; `None` never answers.
    pub(crate) type Route = Box<dyn Fn(&Seen) -> Option<Vec<u8>> + Send + Sync>;

    pub(crate) fn response(status: &str, content_type: &str, body: &[u8]) -> Vec<u8> {
        let mut out = format!(
            "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .into_bytes();
        out.extend_from_slice(body);
        out
    }

    /// A real HTTP/1.1 server on 127.0.0.1:0 (one request per connection).
    /// Returns its base URL and a channel of the requests it received.
    pub(crate) async fn serve(routes: Vec<(&'static str, Route)>) -> (String, mpsc::UnboundedReceiver<Seen>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = mpsc::unbounded_channel();
        let routes = Arc::new(routes);
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (tx, routes) = (tx.clone(), routes.clone());
                tokio::spawn(async move {
                    let _ = handle(stream, tx, routes).await;
                });
            }
        });
        (base, rx)
    }

    async fn handle(
        mut stream: TcpStream,
        tx: mpsc::UnboundedSender<Seen>,
        routes: Arc<Vec<(&'static str, Route)>>,
    ) -> std::io::Result<()> {
        let mut data = Vec::new();
        let mut buf = [0u8; 8192];
        let head_end = loop {
            if let Some(i) = data.windows(4).position(|w| w == b"\r\n\r\n") {
                break i;
            }
            let n = stream.read(&mut buf).await?;
            if n == 0 {
                return Ok(());
            }
            data.extend_from_slice(&buf[..n]);
        };
        let head = String::from_utf8_lossy(&data[..head_end]).to_string();
        let mut lines = head.split("\r\n");
        let mut request_line = lines.next().unwrap_or("").split(' ');
        let method = request_line.next().unwrap_or("").to_string();
        let path = request_line.next().unwrap_or("").to_string();
        let headers: HashMap<String, String> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        let length: usize = headers.get("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
        let mut body = data[head_end + 4..].to_vec();
        while body.len() < length {
            let n = stream.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&buf[..n]);
        }
        let seen = Seen { method, path: path.clone(), headers, body };
        let _ = tx.send(seen.clone());
        let route = routes.iter().find(|(p, _)| *p == path);
        match route.and_then(|(_, r)| r(&seen)) {
            Some(bytes) => {
                stream.write_all(&bytes).await?;
                stream.shutdown().await?;
            }
            None if route.is_some() => {
                // Never answer; hold the connection until the client gives up.
                let mut sink = [0u8; 64];
                while stream.read(&mut sink).await? > 0 {}
            }
            None => {
                stream.write_all(&response("404 Not Found", "text/plain", b"no such route")).await?;
            }
        }
        Ok(())
    }

    fn json_route(status: &'static str, body: &'static str) -> Route {
        Box::new(move |_| Some(response(status, "application/json", body.as_bytes())))
    }

    const LIMIT: Duration = Duration::from_secs(10);

    #[tokio::test]
    async fn http_transport_against_a_real_server() {
        tokio::time::timeout(LIMIT, async {
            let (base, mut seen) = serve(vec![
                (
                    "/ok",
                    Box::new(|s: &Seen| {
                        // Echo the method back, to show the body was read.
                        let req: Value = serde_json::from_slice(&s.body).unwrap();
                        let body = json!({"result": {"echo": req["method"], "items": [{"title": "T"}]}}).to_string();
                        Some(response("200 OK", "application/json; charset=utf-8", body.as_bytes()))
                    }) as Route,
                ),
                (
                    "/500",
                    Box::new(|_: &Seen| Some(response("500 Internal Server Error", "text/plain", b"oops"))) as Route,
                ),
                ("/garbage", json_route("200 OK", "<html>not json</html>")),
                ("/array", json_route("200 OK", "[1,2]")),
                ("/noresult", json_route("200 OK", r#"{"jsonrpc":"2.0"}"#)),
                (
                    "/error",
                    json_route("200 OK", r#"{"error":{"code":-32000,"message":"no such repo","data":{"x":1}}}"#),
                ),
                ("/null", json_route("200 OK", r#"{"result":null}"#)),
                ("/hang", Box::new(|_: &Seen| None) as Route),
            ])
            .await;

            // A valid {result}; check what the server received.
            let t = HttpTransport::new(format!("{base}/ok"));
            let settings = json!({"token": "abc", "nested": {"n": 1}});
            let params = json!({"uri": "file:///a.rs", "content": "fn main() {}\n// é 😀"});
            let r = t.call("annotations", params.clone(), &settings).await.unwrap();
            assert_eq!(r, json!({"echo": "annotations", "items": [{"title": "T"}]}));
            let s = seen.recv().await.unwrap();
            assert_eq!(s.method, "POST");
            assert_eq!(s.path, "/ok");
            assert_eq!(s.headers.get("content-type").map(String::as_str), Some("application/json; charset=utf-8"));
            let body: Value = serde_json::from_slice(&s.body).unwrap();
            assert_eq!(body, json!({"method": "annotations", "params": params, "settings": settings}));

            let e = HttpTransport::new(format!("{base}/500")).call("meta", json!({}), &json!({})).await.unwrap_err();
            assert_eq!(e, ProviderError::Transport(format!("HTTP 500 from {base}/500")));

            for path in ["/garbage", "/array", "/noresult"] {
                let e =
                    HttpTransport::new(format!("{base}{path}")).call("meta", json!({}), &json!({})).await.unwrap_err();
                assert!(matches!(e, ProviderError::Protocol(_)), "{path}: {e:?}");
            }

            let e = HttpTransport::new(format!("{base}/error")).call("meta", json!({}), &json!({})).await.unwrap_err();
            assert_eq!(e, ProviderError::Provider { code: -32000, message: "no such repo".into() });

            let r = HttpTransport::new(format!("{base}/null")).call("meta", json!({}), &json!({})).await.unwrap();
            assert_eq!(r, Value::Null);

            // A provider that never answers: the caller's timeout cancels the
            // call, and the same transport (and the shared client) still works.
            let hang = HttpTransport::new(format!("{base}/hang"));
            let started = std::time::Instant::now();
            let r = tokio::time::timeout(Duration::from_millis(300), hang.call("meta", json!({}), &json!({}))).await;
            assert!(r.is_err(), "the hanging call finished: {r:?}");
            assert!(started.elapsed() < Duration::from_secs(2));
            let r = t.call("mentions", json!({"query": "x"}), &json!({})).await.unwrap();
            assert_eq!(r["echo"], "mentions");

            // Nothing listening: a transport error, not a panic or a hang.
            let closed = {
                let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                l.local_addr().unwrap()
            };
            let e =
                HttpTransport::new(format!("http://{closed}/x")).call("meta", json!({}), &json!({})).await.unwrap_err();
            assert!(matches!(e, ProviderError::Transport(_)), "{e:?}");
        })
        .await
        .expect("test timed out");
    }

    #[tokio::test]
    async fn http_response_body_is_capped() {
        tokio::time::timeout(LIMIT, async {
            let (base, _seen) = serve(vec![
                (
                    // Declared too big: refused before reading.
                    "/declared",
                    Box::new(|_: &Seen| {
                        Some(
                            format!(
                                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{{",
                                MAX_BODY_BYTES + 1
                            )
                            .into_bytes(),
                        )
                    }) as Route,
                ),
                (
                    // No length, streamed until close: cut off at the cap.
                    "/streamed",
                    Box::new(|_: &Seen| {
                        let mut out = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{\"result\":\"".to_vec();
                        out.resize(out.len() + MAX_BODY_BYTES + 1024, b'a');
                        out.extend_from_slice(b"\"}");
                        Some(out)
                    }) as Route,
                ),
            ])
            .await;
            for path in ["/declared", "/streamed"] {
                let e = HttpTransport::new(format!("{base}{path}")).call("meta", json!({}), &json!({})).await.unwrap_err();
                match e {
                    ProviderError::Transport(m) => assert!(m.contains("larger than 16 MiB"), "{path}: {m}"),
                    other => panic!("{path}: {other:?}"),
                }
            }
        })
        .await
        .expect("test timed out");
    }
}
