//! The library's global allocator: the system's `malloc` for ordinary
//! allocations, and pages of their own (`mmap`/`munmap`) for those of
//! [`BIG`] bytes or more.
//!
//! The big ones are an agent's messages and files (a 32 MiB `editFile`, its
//! decoded text, the lines of a 20 MiB buffer). Through `malloc` they would
//! raise glibc's dynamic mmap threshold after the first big free (up to
//! 32 MiB), and every later one under it would come from the arena of
//! whichever tokio thread asked: freed, it stays in that arena, and the next
//! message, on another thread, takes new memory. Sixteen 32 MiB edits left
//! Neovim 350-450 MiB bigger at their peak that way, against a bound of 448
//! (tests/integration/test_big_edits.py). Pages of their own go back to
//! the system when freed (but for a few kept for reuse, [`CACHE_BYTES`] in
//! all), and grow in place (`mremap`) on Linux.
//!
//! Not smaller blocks: a block of its own is new pages, each faulted in on
//! first touch, where `malloc` would hand back pages already touched. At
//! 1 MiB that cost a 20 MiB `editFile` ~9 ms more of Neovim's main thread
//! (its line tables and slices); at 8 MiB it costs ~0-2 ms
//! (`scripts/bench`, benchmark 4), and the sixteen edits grow Neovim by
//! 342-370 MiB.

use std::alloc::{GlobalAlloc, Layout, System};
use std::ptr::null_mut;
use std::sync::Mutex;

/// Allocations of this size or more get pages of their own (see above for
/// why not less).
pub const BIG: usize = 8 << 20;

/// The alignment `mmap` gives (a page, at least 4 KiB).
const PAGE_ALIGN: usize = 4096;

/// Freed blocks kept for the next big allocation of their class, at most
/// this many bytes in all: pages already faulted in cost nothing to reuse,
/// and new ones cost a fault each on first touch (a few ms of the main
/// thread for a 20 MiB `readFile`).
const CACHE_BYTES: usize = 32 << 20;

pub struct BigPages;

fn is_big(size: usize, align: usize) -> bool {
    size >= BIG && align <= PAGE_ALIGN
}

/// A big block's mapping: its size rounded up to a power of two (only the
/// pages touched are resident), so that a growing vector stays in its
/// mapping until it doubles and a freed block fits the next of its class.
fn class(size: usize) -> usize {
    size.checked_next_power_of_two().unwrap_or(size)
}

/// Freed mappings kept for reuse (address, length); no allocation here.
struct Cache {
    blocks: [(usize, usize); 8],
    bytes: usize,
}

impl Cache {
    const fn new() -> Self {
        Cache { blocks: [(0, 0); 8], bytes: 0 }
    }

    /// A kept mapping of exactly `len` bytes, taken out.
    fn take(&mut self, len: usize) -> Option<usize> {
        let slot = self.blocks.iter_mut().find(|(_, l)| *l == len)?;
        let (addr, _) = std::mem::take(slot);
        self.bytes -= len;
        Some(addr)
    }

    /// Keeps a freed mapping if there is room; whether it did.
    fn keep(&mut self, addr: usize, len: usize) -> bool {
        if self.bytes + len > CACHE_BYTES {
            return false;
        }
        let Some(slot) = self.blocks.iter_mut().find(|(_, l)| *l == 0) else { return false };
        *slot = (addr, len);
        self.bytes += len;
        true
    }
}

static CACHE: Mutex<Cache> = Mutex::new(Cache::new());

fn cache() -> std::sync::MutexGuard<'static, Cache> {
    CACHE.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A mapping of `len` bytes: a cached one (its pages resident, their bytes
/// left over) or new zeroed pages; null when there is no memory.
fn take(len: usize) -> (*mut u8, bool) {
    if let Some(addr) = cache().take(len) {
        return (addr as *mut u8, false);
    }
    // SAFETY: an anonymous private mapping; nothing else refers to it.
    let p = unsafe {
        libc::mmap(null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANON, -1, 0)
    };
    if p == libc::MAP_FAILED {
        (null_mut(), true)
    } else {
        (p.cast(), true)
    }
}

/// Keeps a freed mapping for reuse while the cache has room, else unmaps it.
fn give_back(ptr: *mut u8, len: usize) {
    if cache().keep(ptr as usize, len) {
        return;
    }
    // SAFETY: `ptr` is a mapping of `len` bytes made by `take`, no longer used.
    unsafe { libc::munmap(ptr.cast(), len) };
}

// SAFETY: every pointer handed out is either malloc's (sizes under BIG, or
// alignments above a page) or the start of a mapping of `class(size)` bytes,
// and each is returned the same way, decided by the same layout test.
unsafe impl GlobalAlloc for BigPages {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if is_big(layout.size(), layout.align()) {
            take(class(layout.size())).0
        } else {
            System.alloc(layout)
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if is_big(layout.size(), layout.align()) {
            let (p, fresh) = take(class(layout.size()));
            if !fresh && !p.is_null() {
                std::ptr::write_bytes(p, 0, layout.size()); // new pages are zeroed already
            }
            p
        } else {
            System.alloc_zeroed(layout)
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if is_big(layout.size(), layout.align()) {
            give_back(ptr, class(layout.size()));
        } else {
            System.dealloc(ptr, layout)
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let align = layout.align();
        match (is_big(layout.size(), align), is_big(new_size, align)) {
            (false, false) => System.realloc(ptr, layout, new_size),
            (true, true) if class(layout.size()) == class(new_size) => ptr,
            #[cfg(target_os = "linux")]
            (true, true) => {
                let p = libc::mremap(ptr.cast(), class(layout.size()), class(new_size), libc::MREMAP_MAYMOVE);
                if p == libc::MAP_FAILED {
                    null_mut()
                } else {
                    p.cast()
                }
            }
            _ => {
                // Across the threshold (or no mremap): a new block, the
                // bytes both hold copied, the old one freed.
                let new = self.alloc(Layout::from_size_align_unchecked(new_size, align));
                if !new.is_null() {
                    std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                    self.dealloc(ptr, layout);
                }
                new
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Cache, BIG, CACHE_BYTES};

    #[test]
    fn the_cache_keeps_freed_mappings_up_to_its_bytes_and_hands_back_exact_lengths() {
        let mut cache = Cache::new();
        assert!(cache.keep(0x1000, BIG));
        assert!(cache.keep(0x9000_0000, 2 * BIG));
        assert_eq!(cache.take(4 * BIG), None, "only a mapping of the length asked for");
        assert_eq!(cache.take(2 * BIG), Some(0x9000_0000));
        assert_eq!(cache.take(2 * BIG), None, "taken once");
        // At its limit and one past it.
        assert!(cache.keep(0x2000_0000, CACHE_BYTES - BIG));
        assert_eq!(cache.bytes, CACHE_BYTES);
        assert!(!cache.keep(0x3000_0000, 4096), "one page past the limit is not kept");
        assert_eq!(cache.take(BIG), Some(0x1000));
        assert!(cache.keep(0x3000_0000, BIG), "room again");
    }

    #[test]
    fn vectors_grow_and_shrink_across_the_threshold_with_their_bytes() {
        let mut v: Vec<u8> = Vec::with_capacity(16);
        for i in 0..(3 * BIG + 17) {
            v.push((i % 251) as u8);
        }
        assert!(v.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
        v.truncate(BIG / 2);
        v.shrink_to_fit();
        assert!(v.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
        let zeroed = vec![0u64; BIG / 4]; // 2 BIG, alloc_zeroed
        assert!(zeroed.iter().all(|&x| x == 0));
        let mut s = String::from("x").repeat(BIG - 1); // just under
        s.push_str("yz"); // across
        assert_eq!(s.len(), BIG + 1);
        assert!(s.ends_with("xyz"));
    }

    #[test]
    fn a_big_block_is_pages_of_its_own() {
        // Page-aligned: glibc's blocks start past a 16-byte chunk header (an
        // mmap'd chunk's always; an arena's unless by chance). Whether they
        // go back to the system is tests/integration/test_big_edits.py's.
        for size in [BIG, 3 * BIG + 5, 4 * BIG] {
            let big = vec![1u8; size];
            assert_eq!(big.as_ptr() as usize % 4096, 0, "{size} bytes");
        }
        let mut grown = vec![1u8; BIG];
        grown.resize(5 * BIG, 2);
        assert_eq!(grown.as_ptr() as usize % 4096, 0);
        assert!(grown[..BIG].iter().all(|&b| b == 1) && grown[BIG..].iter().all(|&b| b == 2));
    }
}
