//! One entry of `openctx.providers` read into a [`ProviderSpec`]: which
//! transport its URI names (as the reference client decides it) and the
//! settings sent with every call. A bad entry is a [`SpecError`] that
//! disables that entry only.

use std::path::PathBuf;

use serde_json::{json, Value};

/// Why an entry of `openctx.providers` is skipped (shown to the user as is).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SpecError {
    #[error("openctx.providers[\"{uri}\"] must be true, false or a table, got {got}")]
    NotAnEntry { uri: String, got: Value },
    #[error("openctx.providers[\"{uri}\"]: an mcp: provider needs {{ command = \"…\" }}")]
    McpNeedsCommand { uri: String },
    #[error("openctx.providers[\"{uri}\"].args must be strings")]
    ArgNotAString { uri: String },
    #[error("openctx.providers[\"{uri}\"].args must be a list of strings")]
    ArgsNotAList { uri: String },
    #[error("openctx.providers[\"{uri}\"].env.{key} must be a string")]
    EnvNotAString { uri: String, key: String },
    #[error("openctx.providers[\"{uri}\"].env must be a table of strings")]
    EnvNotATable { uri: String },
    #[error("openctx.providers[\"{uri}\"]: not a valid URL ({reason})")]
    NotAUrl { uri: String, reason: String },
    /// `hint` says what was probably meant (a path, a package name).
    #[error("openctx.providers[\"{uri}\"]: not a provider URI{hint}")]
    NotAProviderUri { uri: String, hint: String },
}

/// One provider as configured by the user.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderSpec {
    pub uri: String,
    pub kind: ProviderKind,
    /// Sent unchanged as `settings` on every call (not for MCP entries).
    pub settings: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ProviderKind {
    Http,
    JsModule,
    Mcp { command: String, args: Vec<String>, env: Vec<(String, String)>, cwd: Option<PathBuf> },
}

impl ProviderSpec {
    /// Reads one entry of the `providers` map; `None` for a disabled one.
    pub fn from_entry(uri: &str, value: &Value) -> Result<Option<ProviderSpec>, SpecError> {
        let settings = match value {
            Value::Bool(false) | Value::Null => return Ok(None),
            Value::Bool(true) => json!({}),
            Value::Object(_) => value.clone(),
            Value::Array(a) if a.is_empty() => json!({}),
            other => return Err(SpecError::NotAnEntry { uri: uri.to_owned(), got: other.clone() }),
        };
        let kind = provider_kind(uri, &settings)?;
        let settings = if matches!(kind, ProviderKind::Mcp { .. }) { json!({}) } else { settings };
        Ok(Some(ProviderSpec { uri: uri.to_owned(), kind, settings }))
    }
}

/// The transport a provider URI names, as the reference client decides it.
fn provider_kind(uri: &str, settings: &Value) -> Result<ProviderKind, SpecError> {
    let lower = uri.to_ascii_lowercase();
    if lower.starts_with("mcp:") {
        let command = settings
            .get("command")
            .and_then(Value::as_str)
            .ok_or_else(|| SpecError::McpNeedsCommand { uri: uri.to_owned() })?;
        let args = match settings.get("args") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| v.as_str().map(str::to_owned).ok_or_else(|| SpecError::ArgNotAString { uri: uri.to_owned() }))
                .collect::<Result<_, _>>()?,
            Some(Value::Object(o)) if o.is_empty() => Vec::new(),
            Some(_) => return Err(SpecError::ArgsNotAList { uri: uri.to_owned() }),
        };
        let env = match settings.get("env") {
            Some(Value::Object(map)) => map
                .iter()
                .map(|(k, v)| {
                    v.as_str()
                        .map(|s| (k.clone(), s.to_owned()))
                        .ok_or_else(|| SpecError::EnvNotAString { uri: uri.to_owned(), key: k.clone() })
                })
                .collect::<Result<_, _>>()?,
            Some(Value::Array(a)) if a.is_empty() => Vec::new(),
            None | Some(Value::Null) => Vec::new(),
            Some(_) => return Err(SpecError::EnvNotATable { uri: uri.to_owned() }),
        };
        let cwd = settings.get("cwd").and_then(Value::as_str).map(PathBuf::from);
        return Ok(ProviderKind::Mcp { command: command.to_owned(), args, env, cwd });
    }
    if lower.starts_with("http+js:") || lower.starts_with("https+js:") || lower.starts_with("file:") {
        return Ok(ProviderKind::JsModule);
    }
    if lower.starts_with("http:") || lower.starts_with("https:") {
        let url =
            reqwest::Url::parse(uri).map_err(|e| SpecError::NotAUrl { uri: uri.to_owned(), reason: e.to_string() })?;
        return Ok(if is_remote_module(&url) { ProviderKind::JsModule } else { ProviderKind::Http });
    }
    let hint = if uri.starts_with(['/', '~', '.']) {
        " (a path: write it as a file:///… URL)".to_owned()
    } else if !uri.contains(':') && !uri.trim().is_empty() {
        format!(" (a package name? write https://openctx.org/npm/{})", uri.trim())
    } else {
        " (use https://…, file:///abs/path.mjs, http+js:, https+js: or mcp:)".to_owned()
    };
    Err(SpecError::NotAProviderUri { uri: uri.to_owned(), hint })
}

/// Whether an `http(s):` provider URL names a JavaScript module to download
/// and run rather than an HTTP endpoint to POST to: exactly the reference's
/// rule (`@openctx/client` 0.0.30, `createTransport.js`): the URL's path
/// (without query or fragment, case-sensitive) ends in `.js`, `.mjs`, `.cjs`,
/// `.ts`, `.mts` or `.cts` (`/\.[cm]?[jt]s$/`), or it is the well-known npm
/// service every provider's README names, `https://openctx.org/npm/…`.
pub fn is_remote_module(url: &reqwest::Url) -> bool {
    let path = url.path();
    let js_ext = [".js", ".mjs", ".cjs", ".ts", ".mts", ".cts"].iter().any(|ext| path.ends_with(ext));
    let well_known_npm = url.scheme() == "https"
        && url.host_str() == Some("openctx.org")
        && url.port().is_none()
        && path.starts_with("/npm/");
    js_ext || well_known_npm
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_kinds_follow_the_reference() {
        let kind = |uri: &str| ProviderSpec::from_entry(uri, &json!(true)).unwrap().unwrap().kind;
        assert_eq!(kind("https://example.com/openctx"), ProviderKind::Http);
        assert_eq!(kind("http://127.0.0.1:9/p"), ProviderKind::Http);
        assert_eq!(kind("https://example.com/dist/p.js"), ProviderKind::JsModule);
        assert_eq!(kind("https://example.com/p.mjs?v=1"), ProviderKind::JsModule);
        assert_eq!(kind("https+js://example.com/p"), ProviderKind::JsModule);
        assert_eq!(kind("file:///abs/p.mjs"), ProviderKind::JsModule);
        assert!(ProviderSpec::from_entry("ftp://x", &json!(true)).is_err());
        // The reference's exact rule (createTransport.js): /\.[cm]?[jt]s$/ on the
        // path, case-sensitive; https://openctx.org/npm/… is a module too.
        assert_eq!(kind("https://example.com/p.mts"), ProviderKind::JsModule);
        assert_eq!(kind("https://example.com/p.cts"), ProviderKind::JsModule);
        assert_eq!(kind("https://example.com/p.ts#x"), ProviderKind::JsModule);
        assert_eq!(kind("https://example.com/P.JS"), ProviderKind::Http);
        assert_eq!(kind("https://example.com/p.json"), ProviderKind::Http);
        assert_eq!(kind("https://example.com/api?f=p.js"), ProviderKind::Http);
        assert_eq!(kind("https://openctx.org/npm/@openctx/provider-links"), ProviderKind::JsModule);
        assert_eq!(kind("https://OpenCtx.org:443/npm/@openctx/provider-links"), ProviderKind::JsModule);
        assert_eq!(kind("http://openctx.org/npm/@openctx/provider-links"), ProviderKind::Http);
        assert_eq!(kind("https://openctx.org:8443/npm/x"), ProviderKind::Http);
        assert_eq!(kind("https://openctx.org/docs"), ProviderKind::Http);
        assert_eq!(kind("https://www.openctx.org/npm/x"), ProviderKind::Http);
        let err = |uri: &str| ProviderSpec::from_entry(uri, &json!(true)).unwrap_err().to_string();
        assert!(err("/abs/p.mjs").contains("file:///"), "{}", err("/abs/p.mjs"));
        assert!(err("@openctx/provider-links").contains("https://openctx.org/npm/@openctx/provider-links"));
        assert_eq!(ProviderSpec::from_entry("https://x", &json!(false)).unwrap(), None);
    }

    #[test]
    fn mcp_entries_need_a_command_and_send_no_settings() {
        let spec = ProviderSpec::from_entry(
            "mcp:everything",
            &json!({"command": "node", "args": ["a.js"], "env": {"K": "v"}}),
        )
        .unwrap()
        .unwrap();
        assert_eq!(spec.settings, json!({}));
        assert_eq!(
            spec.kind,
            ProviderKind::Mcp {
                command: "node".into(),
                args: vec!["a.js".into()],
                env: vec![("K".into(), "v".into())],
                cwd: None
            }
        );
        let e = ProviderSpec::from_entry("mcp:x", &json!(true)).unwrap_err();
        assert_eq!(e, SpecError::McpNeedsCommand { uri: "mcp:x".into() });
        assert!(e.to_string().contains("command"), "{e}");
    }

    #[test]
    fn settings_pass_through() {
        let spec = ProviderSpec::from_entry("https://x/api", &json!({"token": "t"})).unwrap().unwrap();
        assert_eq!(spec.settings, json!({"token": "t"}));
    }

    #[test]
    fn bad_entries_say_what_is_wrong() {
        let err = |uri: &str, v: Value| ProviderSpec::from_entry(uri, &v).unwrap_err().to_string();
        assert_eq!(
            err("https://x", json!(3)),
            "openctx.providers[\"https://x\"] must be true, false or a table, got 3"
        );
        assert_eq!(err("mcp:x", json!({})), "openctx.providers[\"mcp:x\"]: an mcp: provider needs { command = \"…\" }");
        assert_eq!(
            err("mcp:x", json!({"command": "c", "args": [1]})),
            "openctx.providers[\"mcp:x\"].args must be strings"
        );
        assert_eq!(
            err("mcp:x", json!({"command": "c", "args": "a"})),
            "openctx.providers[\"mcp:x\"].args must be a list of strings"
        );
        assert_eq!(
            err("mcp:x", json!({"command": "c", "env": {"K": 1}})),
            "openctx.providers[\"mcp:x\"].env.K must be a string"
        );
        assert_eq!(
            err("mcp:x", json!({"command": "c", "env": "K=v"})),
            "openctx.providers[\"mcp:x\"].env must be a table of strings"
        );
        let e = err("https://exa mple.com/p", json!(true));
        assert!(e.starts_with("openctx.providers[\"https://exa mple.com/p\"]: not a valid URL ("), "{e}");
        assert_eq!(
            err("ftp://x", json!(true)),
            "openctx.providers[\"ftp://x\"]: not a provider URI (use https://…, file:///abs/path.mjs, http+js:, https+js: or mcp:)"
        );
        assert_eq!(
            err("./p.mjs", json!(true)),
            "openctx.providers[\"./p.mjs\"]: not a provider URI (a path: write it as a file:///… URL)"
        );
    }
}
