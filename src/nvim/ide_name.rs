//! The editor's name as agents show it (`ideName` in Amp's lockfile, the
//! IDE companions' `ideInfo`): "Neovim (nvim 0.11.4)". Made here when
//! `start` is not given one, so the server's start loads no Lua module
//! for it.

use std::ffi::{c_char, CStr};

use super::{bulk, lua};

/// "Neovim (nvim X.Y.Z)" for the running Neovim; "Neovim (nvim)" when its
/// version cannot be read.
pub fn ide_name() -> String {
    match long_version().as_deref().and_then(parse).or_else(lua_version) {
        Some((major, minor, patch)) => format!("Neovim (nvim {major}.{minor}.{patch})"),
        None => "Neovim (nvim)".to_owned(),
    }
}

/// `:version`'s first line ("NVIM v0.11.4"): Neovim's `longVersion`, a
/// `char *` on the versions whose C API `bulk` was checked against (the
/// same test as `lua/amp/version.lua`'s through LuaJIT's FFI); None
/// elsewhere.
fn long_version() -> Option<String> {
    if !bulk::c_api() {
        return None;
    }
    // SAFETY: dlsym on the whole process with a NUL-terminated name; on
    // these versions the symbol is a `char *` pointing to a static
    // NUL-terminated string, read on the main thread.
    unsafe {
        let symbol = libc::dlsym(libc::RTLD_DEFAULT, c"longVersion".as_ptr()) as *const *const c_char;
        if symbol.is_null() || (*symbol).is_null() {
            return None;
        }
        Some(CStr::from_ptr(*symbol).to_string_lossy().into_owned())
    }
}

/// `lua/amp/version.lua`'s reading, where `longVersion` is not read here.
fn lua_version() -> Option<(u32, u32, u32)> {
    let version: mlua::Table = lua::global::<_, mlua::Table>("require", "amp.version")
        .ok()?
        .get::<mlua::Function>("nvim")
        .ok()?
        .call(())
        .ok()?;
    let field = |name: &str| version.get::<u32>(name).ok();
    Some((field("major")?, field("minor")?, field("patch")?))
}

/// The version in "NVIM v0.11.4" or "NVIM v0.12.0-dev-1234+gabcdef".
fn parse(text: &str) -> Option<(u32, u32, u32)> {
    let rest = &text[text.find("NVIM v")? + "NVIM v".len()..];
    let mut parts = rest.splitn(3, '.');
    let number = |part: &str| -> Option<u32> {
        let digits: String = part.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    };
    let major = number(parts.next()?)?;
    let minor = number(parts.next()?)?;
    let patch = number(parts.next()?)?;
    Some((major, minor, patch))
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn versions_from_long_version() {
        assert_eq!(parse("NVIM v0.11.4"), Some((0, 11, 4)));
        assert_eq!(parse("NVIM v0.12.0-dev-1234+gabcdef"), Some((0, 12, 0)));
        assert_eq!(parse("NVIM v10.2.33\nBuild type: Release"), Some((10, 2, 33)));
        assert_eq!(parse("NVIM v0.11"), None);
        assert_eq!(parse("VIM - Vi IMproved 9.1"), None);
        assert_eq!(parse("NVIM v.1.2"), None);
    }
}
