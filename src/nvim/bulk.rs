//! Big data through the C API: a buffer's text a few thousand lines at a
//! time (the slices of a snapshot for `readFile` and `editFile` of big
//! buffers), lines set from Rust strings (an edit's replacements), and a
//! big string into a buffer variable (the OpenCtx annotations' list).
//!
//! Through Lua, `nvim_buf_get_lines` makes a Lua string per line and
//! `table.concat` copies them all again (about 35 ms for 20 MB). Calling the
//! C API with an arena of our own gives the lines in a few large blocks,
//! which are copied once and freed in one call: no Lua strings, and no leak
//! (nvim-oxi's wrapper passes no arena and never frees what Neovim
//! allocates). Neovim exports these functions; the struct layouts are those
//! of Neovim's `api/private/defs.h`, the same nvim-oxi's `neovim-0-11`
//! bindings rely on.
//!
//! Those layouts, the `ObjectType` numbers and these functions' signatures
//! are the same in Neovim 0.10.4, 0.11.4 and 0.12.4 (checked in their
//! sources, and the integration tests run on each). On any other version
//! (decided once, on first use, with `has()`), or with the environment
//! variable `AMP_NVIM_C_API=0`, every function here takes the slower path
//! through `vim.api` instead: a Neovim whose C API changed must not be
//! called with the wrong layout.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicU8, Ordering};

use super::lua;

/// Neovim minor versions (0.x) whose C API the layouts below were checked against.
const VERIFIED_MINORS: std::ops::RangeInclusive<i64> = 10..=12;

/// Whether the C API path is used: decided on the first call on the main
/// thread (not at load: start-up needs none of it).
static C_API: AtomicU8 = AtomicU8::new(UNDECIDED);
const UNDECIDED: u8 = 0;
const ON: u8 = 1;
const OFF: u8 = 2;

/// Whether big reads and writes go through the C API (else through
/// `vim.api`): whether the running Neovim's C API is one the layouts were
/// checked against, and `AMP_NVIM_C_API` is not `0`. Decided once, on the
/// main thread; `false` elsewhere until then (every caller is on the main
/// thread: they call Neovim).
pub fn c_api() -> bool {
    match C_API.load(Ordering::Relaxed) {
        ON => true,
        OFF => false,
        _ => match decide() {
            Some(on) => {
                C_API.store(if on { ON } else { OFF }, Ordering::Relaxed);
                on
            }
            None => false,
        },
    }
}

/// `has()` and not `vim.version()`, which builds all of `api_info()`; None
/// off the main thread.
fn decide() -> Option<bool> {
    let lua = lua::lua().ok()?;
    let vim: mlua::Table = lua.globals().get("vim").ok()?;
    let has: mlua::Function = vim.get::<mlua::Table>("fn").ok()?.get("has").ok()?;
    let has = |minor: i64| has.call::<i64>(format!("nvim-0.{minor}")).is_ok_and(|v| v == 1);
    let verified = has(*VERIFIED_MINORS.start()) && !has(VERIFIED_MINORS.end() + 1);
    let allowed = std::env::var("AMP_NVIM_C_API").map_or(true, |v| v != "0");
    Some(verified && allowed)
}

#[repr(C)]
struct Arena {
    cur_blk: *mut c_char,
    pos: usize,
    size: usize,
}

#[repr(C)]
struct RawString {
    data: *const u8,
    size: usize,
}

/// `Object`: a C enum tag, then a 24-byte union (a `String` is its first 16 bytes).
#[repr(C)]
struct RawObject {
    kind: c_int,
    string: RawString,
    _rest_of_union: usize,
}

#[repr(C)]
struct RawArray {
    size: usize,
    capacity: usize,
    items: *const RawObject,
}

#[repr(C)]
struct RawError {
    kind: c_int,
    msg: *mut c_char,
}

const _: () = assert!(std::mem::size_of::<RawObject>() == 32);
const _: () = assert!(std::mem::size_of::<RawArray>() == 24);

/// `ObjectType` of a string in Neovim 0.11.
const OBJECT_STRING: c_int = 4;
/// `ObjectType` of an integer in Neovim 0.11 (its value is the union's first 8 bytes).
const OBJECT_INTEGER: c_int = 2;
/// `kErrorTypeNone`.
const NO_ERROR: c_int = -1;
/// `LUA_INTERNAL_CALL`: not VimL, so NULs in lines come back as NUL bytes.
const LUA_INTERNAL_CALL: u64 = (1 << 63) + 1;

extern "C" {
    fn nvim_buf_get_lines(
        channel_id: u64,
        buffer: c_int,
        start: i64,
        end: i64,
        strict_indexing: bool,
        arena: *mut Arena,
        lstate: *mut c_void,
        err: *mut RawError,
    ) -> RawArray;
    fn nvim_buf_set_lines(
        channel_id: u64,
        buffer: c_int,
        start: i64,
        end: i64,
        strict_indexing: bool,
        replacement: RawArray,
        arena: *mut Arena,
        err: *mut RawError,
    );
    fn nvim_buf_set_var(buffer: c_int, name: RawString, value: RawObject, err: *mut RawError);
    fn nvim_win_get_cursor(window: c_int, arena: *mut Arena, err: *mut RawError) -> RawArray;
    fn nvim_get_current_line(arena: *mut Arena, err: *mut RawError) -> RawString;
    fn arena_finish(arena: *mut Arena) -> *mut c_void;
    fn arena_mem_free(mem: *mut c_void);
    fn api_clear_error(err: *mut RawError);
}

/// Replaces lines `start..end` (0-based, end exclusive) of buffer `buf` with
/// `lines` (none may hold a newline), as `vim.api.nvim_buf_set_lines` with
/// strict indexing does, from Rust strings: through Lua, a 20 MB edit made
/// a Lua string per line first (about 450 ms of hashing and GC). Neovim
/// copies the lines; `lines` is only read. Main thread only.
pub fn set_lines<'a>(
    buf: i32,
    start: usize,
    end: usize,
    lines: impl ExactSizeIterator<Item = &'a str>,
) -> Result<(), String> {
    if !c_api() {
        let set = || -> mlua::Result<()> {
            let lua = lua::lua()?;
            // One string at a time: mlua holds a reference per live value,
            // and a few thousand at once exhaust its stack.
            let list = lua.create_table_with_capacity(lines.len(), 0)?;
            for (i, line) in lines.enumerate() {
                list.raw_set(i + 1, lua.create_string(line)?)?;
            }
            lua::api("nvim_buf_set_lines", (buf, start as i64, end as i64, true, list))
        };
        return set().map_err(|e| format!("nvim_buf_set_lines: {e}"));
    }
    let items: Vec<RawObject> = lines
        .map(|line| RawObject {
            kind: OBJECT_STRING,
            string: RawString { data: line.as_ptr(), size: line.len() },
            _rest_of_union: 0,
        })
        .collect();
    let replacement = RawArray { size: items.len(), capacity: items.len(), items: items.as_ptr() };
    let mut arena = Arena { cur_blk: null_mut(), pos: 0, size: 0 };
    let mut err = RawError { kind: NO_ERROR, msg: null_mut() };
    // SAFETY: main thread; `items` and the strings it points to outlive the
    // call, which only reads them (Neovim copies each line); the arena and
    // error are ours and released below.
    unsafe {
        nvim_buf_set_lines(LUA_INTERNAL_CALL, buf, start as i64, end as i64, true, replacement, &mut arena, &mut err);
        let result = take_error(&mut err, "nvim_buf_set_lines").map_or(Ok(()), Err);
        arena_mem_free(arena_finish(&mut arena));
        result
    }
}

/// Takes an API error's message (or `what` failed) and frees it.
///
/// # Safety
/// `err` was filled by a C API call; main thread.
unsafe fn take_error(err: &mut RawError, what: &str) -> Option<String> {
    if err.kind == NO_ERROR {
        return None;
    }
    let message = if err.msg.is_null() {
        format!("{what} failed")
    } else {
        CStr::from_ptr(err.msg).to_string_lossy().into_owned()
    };
    api_clear_error(err);
    Some(message)
}

/// Sets `b:{name}` of `buf` to the string `value`. Neovim copies the text
/// once, into the variable. Through Lua the text would first become a Lua
/// string (a copy, and garbage that the collector pays for later: most of
/// the main thread's time for the 1.8 MB list of 5,000 annotations), then
/// an API object (another copy). Main thread only.
pub fn set_buffer_var(buf: i32, name: &str, value: &str) -> Result<(), String> {
    if !c_api() {
        let set = || -> mlua::Result<()> {
            let value = lua::lua()?.create_string(value)?;
            lua::api("nvim_buf_set_var", (buf, name, value))
        };
        return set().map_err(|e| format!("nvim_buf_set_var: {e}"));
    }
    let name = RawString { data: name.as_ptr(), size: name.len() };
    let value = RawObject {
        kind: OBJECT_STRING,
        string: RawString { data: value.as_ptr(), size: value.len() },
        _rest_of_union: 0,
    };
    let mut err = RawError { kind: NO_ERROR, msg: null_mut() };
    // SAFETY: main thread; `name` and `value` point into borrowed memory that
    // outlives the call, and Neovim only reads them (it copies the value).
    unsafe {
        nvim_buf_set_var(buf, name, value, &mut err);
        take_error(&mut err, "nvim_buf_set_var").map_or(Ok(()), Err)
    }
}

/// Calls `f` with the current window's cursor (1-based row, byte column) and
/// the text of its line, borrowed from Neovim: the per-keystroke read, with
/// no Lua table or string made (and none left for the collector). `None` if
/// Neovim reports an error. Main thread only.
pub fn with_cursor_line<R>(f: impl FnOnce(usize, usize, &[u8]) -> R) -> Option<R> {
    if !c_api() {
        let (row, col): (i64, i64) =
            lua::api::<_, mlua::Table>("nvim_win_get_cursor", 0).and_then(|t| Ok((t.get(1)?, t.get(2)?))).ok()?;
        let line: mlua::String = lua::api("nvim_get_current_line", ()).ok()?;
        return Some(f(row.max(0) as usize, col.max(0) as usize, &line.as_bytes()));
    }
    let mut arena = Arena { cur_blk: null_mut(), pos: 0, size: 0 };
    let mut err = RawError { kind: NO_ERROR, msg: null_mut() };
    // SAFETY: main thread; what the calls return lives in `arena` until it
    // is freed below, after `f` has run; `err` is checked after each call.
    unsafe {
        let cursor = nvim_win_get_cursor(0, &mut arena, &mut err);
        let position = match take_error(&mut err, "nvim_win_get_cursor") {
            None if cursor.size == 2 && !cursor.items.is_null() => {
                let items = std::slice::from_raw_parts(cursor.items, 2);
                items[0].integer().zip(items[1].integer())
            }
            _ => None,
        };
        let result = position.and_then(|(row, col)| {
            let line = nvim_get_current_line(&mut arena, &mut err);
            if take_error(&mut err, "nvim_get_current_line").is_some() {
                return None;
            }
            let text = if line.data.is_null() { &[][..] } else { std::slice::from_raw_parts(line.data, line.size) };
            Some(f(row.max(0) as usize, col.max(0) as usize, text))
        });
        arena_mem_free(arena_finish(&mut arena));
        result
    }
}

impl RawObject {
    fn integer(&self) -> Option<i64> {
        // The union's first 8 bytes hold an integer's value.
        (self.kind == OBJECT_INTEGER).then_some(self.string.data as usize as i64)
    }
}

/// Appends lines `start..end` (0-based) of the buffer to `out`, each one
/// after a `\n` except the buffer's first (the lines joined with `\n`, no
/// final end-of-line, a piece at a time). Main thread only.
pub fn append_lines(buf: i32, start: usize, end: usize, out: &mut Vec<u8>) -> Result<(), String> {
    if !c_api() {
        let joined = || -> mlua::Result<mlua::String> {
            lua::lua()?
                .load("local b, s, e = ... return table.concat(vim.api.nvim_buf_get_lines(b, s, e, true), '\\n')")
                .set_name("=amp_core/nvim/bulk.rs")
                .call((buf, start as i64, end as i64))
        };
        let text = joined().map_err(|e| format!("nvim_buf_get_lines: {e}"))?;
        if start > 0 && end > start {
            out.push(b'\n');
        }
        out.extend_from_slice(&text.as_bytes());
        return Ok(());
    }
    let mut arena = Arena { cur_blk: null_mut(), pos: 0, size: 0 };
    let mut err = RawError { kind: NO_ERROR, msg: null_mut() };
    // SAFETY: called on the main thread with a valid arena and error; the
    // returned array and its strings live in the arena until it is freed
    // below, after the copy.
    unsafe {
        let lines = nvim_buf_get_lines(
            LUA_INTERNAL_CALL,
            buf,
            start as i64,
            end as i64,
            true,
            &mut arena,
            null_mut(),
            &mut err,
        );
        let result = if let Some(message) = take_error(&mut err, "nvim_buf_get_lines") {
            Err(message)
        } else {
            let items: &[RawObject] = if lines.size == 0 || lines.items.is_null() {
                &[]
            } else {
                std::slice::from_raw_parts(lines.items, lines.size)
            };
            for (i, item) in items.iter().enumerate() {
                if start + i > 0 {
                    out.push(b'\n');
                }
                if item.kind == OBJECT_STRING && !item.string.data.is_null() && item.string.size > 0 {
                    out.extend_from_slice(std::slice::from_raw_parts(item.string.data, item.string.size));
                }
            }
            Ok(())
        };
        arena_mem_free(arena_finish(&mut arena));
        result
    }
}
