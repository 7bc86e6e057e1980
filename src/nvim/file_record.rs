//! Neovim's own record of the file a buffer was read from or written to:
//! the timestamp, size and mode that `:checktime` and `:write` compare, and
//! the undo states' "differs from the file" flags.
//!
//! After an agent's change reaches the disk by a route other than `:write`
//! (a reload from disk, a temp file renamed into place) the buffer and the
//! file agree, but Neovim does not know it: the next `:w` would ask "The
//! file has been changed since reading it!!!" and `u` would not mark the
//! buffer modified. `:write` updates the record with two functions that the
//! nvim binary exports with the same signatures since Vim: `ml_timestamp()`
//! and `u_unchanged()`. They are looked up by name at run time (`dlsym`),
//! not declared in LuaJIT's FFI namespace, where another plugin's
//! declaration of the same names would clash. Like the rest of Neovim's C
//! API they are used only on the versions verified (`bulk::c_api`); where
//! they are not, the callers fall back to what the public API allows.

use std::ffi::{c_int, c_void};
use std::sync::OnceLock;

type FindBuffer = unsafe extern "C" fn(c_int) -> *mut c_void;
type BufferFn = unsafe extern "C" fn(*mut c_void);

struct Functions {
    buflist_findnr: FindBuffer,
    ml_timestamp: BufferFn,
    u_unchanged: BufferFn,
}

fn functions() -> Option<&'static Functions> {
    if !super::bulk::c_api() {
        return None;
    }
    static FUNCTIONS: OnceLock<Option<Functions>> = OnceLock::new();
    FUNCTIONS
        .get_or_init(|| {
            // SAFETY: dlsym with NUL-terminated names; a found symbol is a
            // function of nvim with the signature declared above (unchanged
            // since Vim: `buf_T *buflist_findnr(int)`, `void f(buf_T *)`).
            unsafe {
                let find = libc::dlsym(libc::RTLD_DEFAULT, c"buflist_findnr".as_ptr());
                let stamp = libc::dlsym(libc::RTLD_DEFAULT, c"ml_timestamp".as_ptr());
                let undo = libc::dlsym(libc::RTLD_DEFAULT, c"u_unchanged".as_ptr());
                if find.is_null() || stamp.is_null() || undo.is_null() {
                    return None;
                }
                Some(Functions {
                    buflist_findnr: std::mem::transmute::<*mut c_void, FindBuffer>(find),
                    ml_timestamp: std::mem::transmute::<*mut c_void, BufferFn>(stamp),
                    u_unchanged: std::mem::transmute::<*mut c_void, BufferFn>(undo),
                })
            }
        })
        .as_ref()
}

/// Whether Neovim's record can be updated here.
pub fn available() -> bool {
    functions().is_some()
}

fn with_buffer(buf: i32, f: impl FnOnce(&Functions, *mut c_void)) -> bool {
    let Some(fns) = functions() else { return false };
    // SAFETY: main thread (every editor call is); a null result means no
    // such buffer.
    let ptr = unsafe { (fns.buflist_findnr)(buf) };
    if ptr.is_null() {
        return false;
    }
    f(fns, ptr);
    true
}

/// Records the file's current timestamp, size and mode as the ones the
/// buffer was read from (what `:write` does after writing).
pub fn record_timestamp(buf: i32) -> bool {
    // SAFETY: a valid buffer pointer from buflist_findnr, main thread.
    with_buffer(buf, |fns, ptr| unsafe { (fns.ml_timestamp)(ptr) })
}

/// The buffer now matches its file: every undo state differs from the file
/// (so `u` sets 'modified'), and the file's timestamp is recorded.
pub fn record_saved(buf: i32) -> bool {
    // SAFETY: as above.
    with_buffer(buf, |fns, ptr| unsafe {
        (fns.u_unchanged)(ptr);
        (fns.ml_timestamp)(ptr);
    })
}
