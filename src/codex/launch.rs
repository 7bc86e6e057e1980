//! How `:Amp open codex` starts Codex attached to this Neovim for that run
//! only, the user's `~/.codex` untouched: `-c` overrides that install our
//! `PreToolUse` hook for `apply_patch` and mark it trusted, and the
//! environment that points Codex's `/ide` and our hook at this Neovim.
//!
//! Codex runs only hooks it trusts, silently skipping the others (0.169):
//! a hook is trusted when `hooks.state` holds, under the key of its place
//! (`/<session-flags>/config.toml:pre_tool_use:<group>:<hook>` for a `-c`
//! override), `trusted_hash = "sha256:<hex>"` of its definition as compact
//! JSON with sorted keys. Never `--dangerously-bypass-hook-trust`: it would
//! run the user's and the project's untrusted hooks too.
//!
//! Since any `-c` override is given, Codex 0.169's TUI serves itself in
//! process instead of through a shared `codex app-server` daemon, so the
//! hook and the `/ide` client run with this terminal's environment.

use serde_json::json;

/// The variable naming our hook's socket (`lua/amp/codex/hook.lua`).
pub const HOOK_SOCKET_VAR: &str = "AMP_CODEX_HOOK_SOCKET";
/// Only `apply_patch` goes through the hook.
pub const MATCHER: &str = "^apply_patch$";
/// Where Codex keeps the hooks of `-c` overrides.
const SESSION_FLAGS_KEY: &str = "/<session-flags>/config.toml:pre_tool_use:0:0";

/// The variable giving our hook its own deadline (ms), shorter than the
/// timeout Codex gives it: Codex lets a patch through when its hook times
/// out, our hook denies it.
pub const HOOK_TIMEOUT_VAR: &str = "AMP_CODEX_HOOK_TIMEOUT_MS";

/// The shell command Codex runs for the hook: Neovim itself running the
/// hook's Lua (`nvim --clean -l`: no user config, plugin or shada), each
/// path quoted for `sh`.
pub fn hook_command(nvim: &str, plugin_dir: &str) -> String {
    let script = format!("{}/lua/amp/codex/hook.lua", plugin_dir.trim_end_matches('/'));
    format!("{} --clean -l {}", sh_quote(nvim), sh_quote(&script))
}

/// `s` as one word for a POSIX shell.
pub fn sh_quote(s: &str) -> String {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"/._-+,:@%=".contains(&b)) {
        return s.to_owned();
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// `sha256:<hex>` of the hook's definition as Codex hashes it.
pub fn trusted_hash(command: &str, timeout_secs: u64) -> String {
    // serde_json's maps are sorted (no preserve_order here) and it writes
    // no `\/`: the compact form Codex hashes.
    let definition = json!({
        "event_name": "pre_tool_use",
        "hooks": [{ "async": false, "command": command, "timeout": timeout_secs, "type": "command" }],
        "matcher": MATCHER,
    });
    let digest = ring::digest::digest(&ring::digest::SHA256, definition.to_string().as_bytes());
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// A TOML basic string.
fn toml_string(s: &str) -> String {
    // JSON's escapes are TOML's (\" \\ \n \uXXXX ...).
    serde_json::Value::String(s.to_owned()).to_string()
}

/// The arguments added to Codex's command: the hook and its trust.
pub fn codex_args(command: &str, timeout_secs: u64) -> Vec<String> {
    let hooks = format!(
        "hooks.PreToolUse=[{{matcher={}, hooks=[{{type=\"command\", command={}, timeout={timeout_secs}}}]}}]",
        toml_string(MATCHER),
        toml_string(command),
    );
    let state = format!(
        "hooks.state={{{}={{trusted_hash={}}}}}",
        toml_string(SESSION_FLAGS_KEY),
        toml_string(&trusted_hash(command, timeout_secs))
    );
    vec!["-c".into(), hooks, "-c".into(), state]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hook_command_quotes_its_paths() {
        assert_eq!(
            hook_command("/usr/bin/nvim", "/p/amp.nvim/"),
            "/usr/bin/nvim --clean -l /p/amp.nvim/lua/amp/codex/hook.lua"
        );
        assert_eq!(
            hook_command("/opt/my nvim/nvim", "/home/o'neil/amp"),
            r"'/opt/my nvim/nvim' --clean -l '/home/o'\''neil/amp/lua/amp/codex/hook.lua'"
        );
        assert_eq!(sh_quote(""), "''");
        assert_eq!(sh_quote("$HOME"), "'$HOME'");
    }

    #[test]
    fn the_trust_hash_is_of_the_compact_sorted_definition() {
        // The definition Codex 0.169 trusted in a real run (its hash taken
        // with Python's json.dumps(sort_keys=True, separators=(",", ":"))).
        let command = "/tmp/cx/hook.sh";
        let compact = r#"{"event_name":"pre_tool_use","hooks":[{"async":false,"command":"/tmp/cx/hook.sh","timeout":600,"type":"command"}],"matcher":"^apply_patch$"}"#;
        let digest = ring::digest::digest(&ring::digest::SHA256, compact.as_bytes());
        let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(trusted_hash(command, 600), format!("sha256:{hex}"));
        // No escaped slashes, and quotes escaped as JSON does.
        let odd = trusted_hash("a/\"b\"", 1);
        let compact = r#"{"event_name":"pre_tool_use","hooks":[{"async":false,"command":"a/\"b\"","timeout":1,"type":"command"}],"matcher":"^apply_patch$"}"#;
        let digest = ring::digest::digest(&ring::digest::SHA256, compact.as_bytes());
        assert_eq!(odd, format!("sha256:{}", digest.as_ref().iter().map(|b| format!("{b:02x}")).collect::<String>()));
    }

    #[test]
    fn the_arguments_are_toml_overrides() {
        let args = codex_args("nvim -l 'x y'", 90);
        assert_eq!(args[0], "-c");
        assert_eq!(
            args[1],
            r#"hooks.PreToolUse=[{matcher="^apply_patch$", hooks=[{type="command", command="nvim -l 'x y'", timeout=90}]}]"#
        );
        assert!(args[3]
            .starts_with(r#"hooks.state={"/<session-flags>/config.toml:pre_tool_use:0:0"={trusted_hash="sha256:"#));
        assert!(args[3].ends_with("\"}}"));
    }
}
