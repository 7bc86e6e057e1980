//! The session's settings as `start(opts)` receives them from Lua, checked
//! with messages that name the option (Lua validates too; this is the last
//! line, so a bad table never reaches the socket code).

use serde_json::Value;

use crate::core::editor::WriteAutocmds;

#[derive(Debug, Clone, PartialEq)]
pub struct ServerOptions {
    pub ide_name: String,
    pub workspace_folders: Vec<String>,
    /// 0 lets the OS choose.
    pub port: u16,
    pub port_range: Option<(u16, u16)>,
    /// The port of this editor's previous server (0 = none): tried before
    /// `port` / `port_range`, so an agent that reconnects to the port it
    /// knows finds the restarted server (the Amp CLI only ever re-reads the
    /// lockfile of that port).
    pub preferred_port: u16,
    pub max_frame_bytes: usize,
    pub max_clients: usize,
    pub send_queue: usize,
    pub ping_interval_ms: u64,
    /// Connections between accept and a finished handshake (the oldest is
    /// dropped when one more comes).
    pub max_pending_handshakes: usize,
    /// A handshake not finished within this long is dropped.
    pub handshake_timeout_ms: u64,
    /// Bytes of requests in flight across all clients, from the frame's read
    /// to its answer's send; past it connections are not read (back-pressure).
    pub max_inflight_bytes: usize,
    /// The log file's cap; past it the file is rotated to `<file>.1`.
    pub log_max_bytes: u64,
    /// At most one selection notification per client per this many ms.
    pub selection_interval_ms: u64,
    pub allowed_origins: Vec<String>,
    /// Reload buffers whose files change on disk (see `filewatch`).
    pub watch_files: bool,
    pub watch_debounce_ms: u64,
    pub plugin_version: String,
    pub plugin_directory: Option<String>,
    pub log_file: Option<String>,
    pub log_level: String,
    /// Which autocommands an agent's edit runs when it writes the file:
    /// "all", "post" (not BufWritePre/FileWritePre) or "none".
    pub write_autocmds: WriteAutocmds,
    /// `readFile` and `editFile` refuse files (and texts) bigger than this.
    pub max_file_bytes: u64,
    /// How Neovim would read a file (`'fileformats'`, `'fileencodings'`),
    /// for files no buffer has loaded.
    pub read_options: crate::core::filetext::ReadOptions,
    /// Which attach protocols are served (`agents` in setup()).
    pub agents: Agents,
    /// `editFile` waits for the user's review (`review.edit_file`).
    pub review_edit_file: bool,
    /// A review of an `editFile` not decided by then is closed, the agent
    /// told so.
    pub review_timeout_ms: u64,
    /// The tap gateway's address (`tap.url`), when `agents.tap` is on.
    pub tap_url: String,
    /// Codex's `/ide` is served (`codex.ide_context`: its private protocol).
    pub codex_ide_context: bool,
    /// This Neovim's program (`v:progpath`): Codex's hook runs it.
    pub nvim_program: Option<String>,
}

/// Which agents are served from the one editor state: each front-end's id
/// (`"amp"`, `"claude"`, `"gemini"`, ...) on or off, as `agents` in
/// setup() says. Amp is on unless turned off; every other agent is off
/// unless turned on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Agents(std::collections::BTreeMap<String, bool>);

impl Agents {
    pub fn enabled(&self, id: &str) -> bool {
        self.0.get(id).copied().unwrap_or(id == "amp")
    }

    /// Turns `id` on or off.
    pub fn set(&mut self, id: &str, on: bool) {
        self.0.insert(id.to_owned(), on);
    }
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            ide_name: "Neovim (nvim)".into(),
            workspace_folders: Vec::new(),
            port: 0,
            port_range: None,
            preferred_port: 0,
            max_frame_bytes: 64 * 1024 * 1024,
            max_clients: 32,
            send_queue: 1024,
            ping_interval_ms: 30_000,
            max_pending_handshakes: 16,
            handshake_timeout_ms: 2_000,
            max_inflight_bytes: 256 * 1024 * 1024,
            log_max_bytes: crate::core::log::DEFAULT_MAX_BYTES,
            selection_interval_ms: 10,
            allowed_origins: Vec::new(),
            watch_files: true,
            watch_debounce_ms: 20,
            plugin_version: env!("CARGO_PKG_VERSION").into(),
            plugin_directory: None,
            log_file: None,
            log_level: "info".into(),
            write_autocmds: WriteAutocmds::Post,
            max_file_bytes: crate::core::checked_file::DEFAULT_MAX_FILE_BYTES,
            read_options: crate::core::filetext::ReadOptions::default(),
            agents: Agents::default(),
            review_edit_file: false,
            review_timeout_ms: 300_000,
            tap_url: "ws://localhost:9400".into(),
            codex_ide_context: false,
            nvim_program: None,
        }
    }
}

/// An option the Lua side let through that this side refuses (its checks
/// are the schema's, `lua/amp/config`; these guard the boundary). `got`:
/// the value given, shown as JSON.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OptionsError {
    #[error("start: options must be a table")]
    NotATable,
    #[error("start: port_range must be {{ min, max }}")]
    PortRangeNotAPair,
    #[error("start: port_range must be {{ min, max }} with min <= max, got {{ {lo}, {hi} }}")]
    PortRangeReversed { lo: u16, hi: u16 },
    #[error("start: workspace_folders must name at least one directory")]
    NoWorkspaceFolder,
    /// A field of a table option (`name` of `key`) that must be there.
    #[error("start: {key}.{name} is missing")]
    Missing { key: String, name: &'static str },
    #[error("start: {key} must be a string, got {got}")]
    NotAString { key: String, got: Value },
    #[error("start: {key} must be a list of strings, got {got}")]
    NotStrings { key: String, got: Value },
    #[error("start: {key} must be an integer from {min} to {max}, got {got}")]
    NotInRange { key: String, min: u64, max: u64, got: Value },
    #[error("start: {key} must be a boolean, got {got}")]
    NotABoolean { key: String, got: Value },
    #[error("start: {key} must be \"all\", \"post\" or \"none\", got {got}")]
    NotAWriteAutocmds { key: String, got: Value },
    #[error("start: agents must be a table like {{ amp = true, claude = true, gemini = true }}, got {got}")]
    AgentsNotATable { got: Value },
}

impl ServerOptions {
    /// Reads the options table; absent fields keep their defaults.
    pub fn from_json(value: &Value) -> Result<Self, OptionsError> {
        let mut o = Self::default();
        let empty = serde_json::Map::new();
        let map = match value {
            Value::Object(map) => map,
            // An empty Lua table may arrive as an empty list.
            Value::Null => &empty,
            Value::Array(a) if a.is_empty() => &empty,
            _ => return Err(OptionsError::NotATable),
        };
        for (key, v) in map {
            match key.as_str() {
                "ide_name" => o.ide_name = string(key, v)?,
                "workspace_folders" => o.workspace_folders = strings(key, v)?,
                "port" => o.port = int(key, v, 0, 65535)? as u16,
                "preferred_port" => o.preferred_port = int(key, v, 0, 65535)? as u16,
                "port_range" => {
                    o.port_range = match v {
                        Value::Null => None,
                        Value::Array(a) if a.len() == 2 => {
                            let lo = int("port_range[1]", &a[0], 1, 65535)? as u16;
                            let hi = int("port_range[2]", &a[1], 1, 65535)? as u16;
                            if lo > hi {
                                return Err(OptionsError::PortRangeReversed { lo, hi });
                            }
                            Some((lo, hi))
                        }
                        _ => return Err(OptionsError::PortRangeNotAPair),
                    }
                }
                "max_frame_bytes" => o.max_frame_bytes = int(key, v, 1024, u32::MAX as u64)? as usize,
                "max_clients" => o.max_clients = int(key, v, 1, 10_000)? as usize,
                "send_queue" => o.send_queue = int(key, v, 1, 1_000_000)? as usize,
                "ping_interval_ms" => o.ping_interval_ms = int(key, v, 100, 3_600_000)?,
                "max_pending_handshakes" => o.max_pending_handshakes = int(key, v, 1, 10_000)? as usize,
                "handshake_timeout_ms" => o.handshake_timeout_ms = int(key, v, 100, 60_000)?,
                "max_inflight_bytes" => o.max_inflight_bytes = int(key, v, 1024 * 1024, u32::MAX as u64)? as usize,
                "log_max_bytes" => o.log_max_bytes = int(key, v, 4096, u64::MAX >> 1)?,
                "selection_interval_ms" => o.selection_interval_ms = int(key, v, 0, 10_000)?,
                "allowed_origins" => o.allowed_origins = strings(key, v)?,
                "watch_files" => o.watch_files = boolean(key, v)?,
                "watch_debounce_ms" => o.watch_debounce_ms = int(key, v, 0, 10_000)?,
                "plugin_version" => o.plugin_version = string(key, v)?,
                "plugin_directory" => o.plugin_directory = Some(string(key, v)?),
                "log_file" => o.log_file = if v.is_null() { None } else { Some(string(key, v)?) },
                "log_level" => o.log_level = string(key, v)?,
                "write_autocmds" => {
                    o.write_autocmds = v
                        .as_str()
                        .and_then(WriteAutocmds::parse)
                        .ok_or_else(|| OptionsError::NotAWriteAutocmds { key: key.clone(), got: v.clone() })?
                }
                "max_file_bytes" => o.max_file_bytes = int(key, v, 1, 1 << 40)?,
                "read_options" => o.read_options = read_options(key, v)?,
                "agents" => o.agents = agents(v)?,
                "review_edit_file" => o.review_edit_file = boolean(key, v)?,
                "review_timeout_ms" => o.review_timeout_ms = int(key, v, 1000, 86_400_000)?,
                "tap_url" => o.tap_url = string(key, v)?,
                "codex_ide_context" => o.codex_ide_context = boolean(key, v)?,
                "nvim_program" => o.nvim_program = Some(string(key, v)?),
                // Options of later features pass through untouched.
                _ => {}
            }
        }
        if o.workspace_folders.is_empty() {
            return Err(OptionsError::NoWorkspaceFolder);
        }
        Ok(o)
    }

    /// The options that come from the user's configuration, under the
    /// names `from_json` reads (`agents`: each of `agent_ids` on or off):
    /// what the running server enforces, as `status().options` shows it.
    /// The session's own fields (folders, port tried first, paths, read
    /// options) are left out.
    pub fn config_json<'a>(&self, agent_ids: impl IntoIterator<Item = &'a str>) -> Value {
        let agents: serde_json::Map<String, Value> =
            agent_ids.into_iter().map(|id| (id.to_owned(), self.agents.enabled(id).into())).collect();
        serde_json::json!({
            "agents": agents,
            "allowed_origins": self.allowed_origins,
            "codex_ide_context": self.codex_ide_context,
            "handshake_timeout_ms": self.handshake_timeout_ms,
            "log_file": self.log_file,
            "log_level": self.log_level,
            "log_max_bytes": self.log_max_bytes,
            "max_clients": self.max_clients,
            "max_file_bytes": self.max_file_bytes,
            "max_frame_bytes": self.max_frame_bytes,
            "max_inflight_bytes": self.max_inflight_bytes,
            "max_pending_handshakes": self.max_pending_handshakes,
            "ping_interval_ms": self.ping_interval_ms,
            "port": self.port,
            "port_range": self.port_range.map(|(lo, hi)| [lo, hi]),
            "review_edit_file": self.review_edit_file,
            "review_timeout_ms": self.review_timeout_ms,
            "selection_interval_ms": self.selection_interval_ms,
            "send_queue": self.send_queue,
            "tap_url": self.tap_url,
            "watch_debounce_ms": self.watch_debounce_ms,
            "watch_files": self.watch_files,
            "write_autocmds": self.write_autocmds.name(),
        })
    }
}

/// `{ fileformats = "unix,dos", fileencodings = "ucs-bom,..." }`
pub fn read_options(key: &str, v: &Value) -> Result<crate::core::filetext::ReadOptions, OptionsError> {
    let field = |name: &'static str| v.get(name).ok_or_else(|| OptionsError::Missing { key: key.to_owned(), name });
    let ffs = string(&format!("{key}.fileformats"), field("fileformats")?)?;
    let fencs = string(&format!("{key}.fileencodings"), field("fileencodings")?)?;
    Ok(crate::core::filetext::ReadOptions::from_option_values(&ffs, &fencs))
}

fn string(key: &str, v: &Value) -> Result<String, OptionsError> {
    v.as_str().map(str::to_owned).ok_or_else(|| OptionsError::NotAString { key: key.to_owned(), got: v.clone() })
}

fn strings(key: &str, v: &Value) -> Result<Vec<String>, OptionsError> {
    match v {
        Value::Array(items) => items.iter().map(|i| string(key, i)).collect(),
        Value::Object(m) if m.is_empty() => Ok(Vec::new()),
        _ => Err(OptionsError::NotStrings { key: key.to_owned(), got: v.clone() }),
    }
}

fn int(key: &str, v: &Value, min: u64, max: u64) -> Result<u64, OptionsError> {
    match v.as_u64() {
        Some(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(OptionsError::NotInRange { key: key.to_owned(), min, max, got: v.clone() }),
    }
}

fn boolean(key: &str, v: &Value) -> Result<bool, OptionsError> {
    v.as_bool().ok_or_else(|| OptionsError::NotABoolean { key: key.to_owned(), got: v.clone() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_fill_missing_fields() {
        let o = ServerOptions::from_json(&json!({"workspace_folders": ["/w"], "allowed_origins": {}})).unwrap();
        assert_eq!(o.max_frame_bytes, 64 * 1024 * 1024);
        assert_eq!(o.max_clients, 32);
        assert!(o.allowed_origins.is_empty());
        assert_eq!(o.max_pending_handshakes, 16);
        assert_eq!(o.handshake_timeout_ms, 2000);
        assert_eq!(o.max_inflight_bytes, 256 * 1024 * 1024);
        let e = ServerOptions::from_json(&json!({"workspace_folders": ["/w"], "max_inflight_bytes": 10})).unwrap_err();
        assert_eq!(e.to_string(), "start: max_inflight_bytes must be an integer from 1048576 to 4294967295, got 10");
    }

    #[test]
    fn errors_name_the_option() {
        let e = ServerOptions::from_json(&json!({"workspace_folders": ["/w"], "max_clients": 0})).unwrap_err();
        assert_eq!(e.to_string(), "start: max_clients must be an integer from 1 to 10000, got 0");
        let e = ServerOptions::from_json(&json!({"workspace_folders": ["/w"], "port_range": [9, 3]})).unwrap_err();
        assert_eq!(e, OptionsError::PortRangeReversed { lo: 9, hi: 3 });
        assert_eq!(e.to_string(), "start: port_range must be { min, max } with min <= max, got { 9, 3 }");
        let e = ServerOptions::from_json(&json!({})).unwrap_err();
        assert_eq!(e.to_string(), "start: workspace_folders must name at least one directory");
        let e = ServerOptions::from_json(&json!({"workspace_folders": ["/w"], "write_autocmds": "pre"})).unwrap_err();
        assert_eq!(e.to_string(), r#"start: write_autocmds must be "all", "post" or "none", got "pre""#);
        let e = ServerOptions::from_json(&json!({"workspace_folders": ["/w"], "watch_files": 1})).unwrap_err();
        assert_eq!(e.to_string(), "start: watch_files must be a boolean, got 1");
    }

    #[test]
    fn config_json_reads_back_as_the_same_options() {
        let ids = ["amp", "claude", "gemini"];
        let session = |mut v: Value| {
            v["workspace_folders"] = json!(["/w"]);
            v
        };
        let defaults = ServerOptions { workspace_folders: vec!["/w".into()], ..Default::default() };
        let mut agents = Agents::default();
        for id in ids {
            agents.set(id, defaults.agents.enabled(id));
        }
        let read = ServerOptions::from_json(&session(defaults.config_json(ids))).unwrap();
        assert_eq!(read, ServerOptions { agents, ..defaults.clone() });
        // Every configuration field changed: one that config_json left out
        // or named differently would read back as its default.
        let mut agents = Agents::default();
        for (id, on) in [("amp", false), ("claude", true), ("gemini", true)] {
            agents.set(id, on);
        }
        let changed = ServerOptions {
            port: 4000,
            port_range: Some((4000, 4010)),
            max_frame_bytes: 4096,
            max_clients: 3,
            send_queue: 7,
            ping_interval_ms: 1000,
            max_pending_handshakes: 2,
            handshake_timeout_ms: 500,
            max_inflight_bytes: 2 * 1024 * 1024,
            log_max_bytes: 8192,
            selection_interval_ms: 5,
            allowed_origins: vec!["http://x".into()],
            watch_files: false,
            watch_debounce_ms: 7,
            log_file: Some("/l/amp.log".into()),
            log_level: "debug".into(),
            write_autocmds: WriteAutocmds::All,
            max_file_bytes: 9,
            agents,
            review_edit_file: true,
            review_timeout_ms: 5000,
            tap_url: "ws://localhost:1".into(),
            codex_ide_context: true,
            ..defaults.clone()
        };
        let default_config = defaults.config_json(ids);
        let changed_config = changed.config_json(ids);
        for (key, value) in changed_config.as_object().unwrap() {
            assert_ne!(&default_config[key], value, "{key} is not changed by this test");
        }
        assert_eq!(ServerOptions::from_json(&session(changed_config)).unwrap(), changed);
    }

    #[test]
    fn port_range_is_a_pair() {
        let o = ServerOptions::from_json(&json!({"workspace_folders": ["/w"], "port_range": [4000, 4010]})).unwrap();
        assert_eq!(o.port_range, Some((4000, 4010)));
    }
}

fn agents(v: &Value) -> Result<Agents, OptionsError> {
    let mut out = Agents::default();
    let map = match v {
        Value::Object(map) => map,
        Value::Array(a) if a.is_empty() => return Ok(out),
        _ => return Err(OptionsError::AgentsNotATable { got: v.clone() }),
    };
    for (name, on) in map {
        let on = boolean(&format!("agents.{name}"), on)?;
        out.set(name, on);
    }
    Ok(out)
}

#[cfg(test)]
mod agents_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn agents_default_to_amp_only_and_are_checked() {
        let on = |o: &ServerOptions| {
            ["amp", "claude", "gemini", "copilot"].into_iter().filter(|id| o.agents.enabled(id)).collect::<Vec<_>>()
        };
        let base = json!({ "workspace_folders": ["/w"] });
        assert_eq!(on(&ServerOptions::from_json(&base).unwrap()), ["amp"]);
        let both = json!({ "workspace_folders": ["/w"], "agents": { "claude": true } });
        assert_eq!(on(&ServerOptions::from_json(&both).unwrap()), ["amp", "claude"]);
        let gemini = json!({ "workspace_folders": ["/w"], "agents": { "amp": false, "gemini": true } });
        assert_eq!(on(&ServerOptions::from_json(&gemini).unwrap()), ["gemini"]);
        let bad = json!({ "workspace_folders": ["/w"], "agents": { "gemini": 1 } });
        assert_eq!(
            ServerOptions::from_json(&bad).unwrap_err().to_string(),
            "start: agents.gemini must be a boolean, got 1"
        );
        let bad = json!({ "workspace_folders": ["/w"], "agents": { "claude": "yes" } });
        assert_eq!(
            ServerOptions::from_json(&bad).unwrap_err().to_string(),
            r#"start: agents.claude must be a boolean, got "yes""#
        );
        let bad = json!({ "workspace_folders": ["/w"], "agents": "all" });
        assert_eq!(
            ServerOptions::from_json(&bad).unwrap_err().to_string(),
            r#"start: agents must be a table like { amp = true, claude = true, gemini = true }, got "all""#
        );
    }
}
