//! The log file `start` uses when it is given none: the schema's default,
//! `stdpath("log")/amp.log`, as `lua/amp/config/defaults.lua` resolves it
//! (tests/integration/test_config.py checks that `status().options` and
//! `get_config()` name the same file). Made here so that `setup({})`
//! starts the server without loading the configuration's Lua modules.

use super::lua;

/// `stdpath("log")/amp.log`; the Lua configuration's own resolution when
/// that path is not already normal (e.g. `$XDG_STATE_HOME` with `//`), so
/// one rule decides every unusual case. None when neither can be read.
pub fn default_log_file() -> Option<String> {
    let dir: String = lua::global("vim.fn.stdpath", "log").ok()?;
    let file = format!("{dir}/amp.log");
    if is_plain(&file) {
        return Some(file);
    }
    let defaults: mlua::Table = lua::global("require", "amp.config.defaults").ok()?;
    let resolved: mlua::Table = defaults.get::<mlua::Function>("resolved").ok()?.call(()).ok()?;
    resolved.get("log_file").ok()
}

/// Whether `path` is already what normalizing it gives: absolute, with no
/// `//`, `.` or `..` parts, no trailing `/`, and no `~`, `$` or `\` (the
/// test `M.normalize` in lua/amp/config/defaults.lua makes).
fn is_plain(path: &str) -> bool {
    path.starts_with('/')
        && !path.contains("//")
        && !path.contains("/./")
        && !path.contains("/../")
        && !path.ends_with('/')
        && !path.ends_with("/.")
        && !path.ends_with("/..")
        && !path.contains(['\\', '~', '$'])
}

#[cfg(test)]
mod tests {
    use super::is_plain;

    #[test]
    fn only_normal_absolute_paths_are_plain() {
        assert!(is_plain("/home/u/.local/state/nvim/amp.log"));
        assert!(is_plain("/a/b.c/amp.log"));
        assert!(!is_plain("state/nvim/amp.log"));
        assert!(!is_plain("/a//b/amp.log"));
        assert!(!is_plain("/a/./b/amp.log"));
        assert!(!is_plain("/a/../b/amp.log"));
        assert!(!is_plain("/a/b/"));
        assert!(!is_plain("/a/b/."));
        assert!(!is_plain("/a/b/.."));
        assert!(!is_plain("~/amp.log"));
        assert!(!is_plain("/$HOME/amp.log"));
        assert!(!is_plain("/a\\b/amp.log"));
    }
}
