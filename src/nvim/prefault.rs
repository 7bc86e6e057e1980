//! The library's own pages mapped into the process before the main thread
//! runs its code. A page of a mapped file costs a page fault the first time
//! the process touches it; the library is ~16 MB, and its first calls on
//! the main thread (the loader, the server's start, the first events) took
//! ~0.7 ms of faults there. Touched from the thread that maps the library
//! during start-up (`amp_core_prewarm`), the pages are in the process's
//! page tables before the main thread needs them: threads share them.

/// Reads one byte of every page of the library's loaded segments (the part
/// backed by the file; not .bss, which is zero pages made on first write).
/// Linux only (`dl_iterate_phdr`); elsewhere the main thread faults them in
/// as before.
#[cfg(target_os = "linux")]
pub fn library_pages() {
    // SAFETY: sysconf has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096).max(1);
    let mut segments: Vec<(usize, usize)> = Vec::new();
    // SAFETY: the callback only reads the program headers the loader hands
    // it, for the duration of the call, and writes to `segments`.
    unsafe {
        libc::dl_iterate_phdr(Some(collect), (&mut segments as *mut Vec<(usize, usize)>).cast());
    }
    for (start, len) in segments {
        let mut addr = start - start % page;
        while addr < start + len {
            // SAFETY: inside a PT_LOAD segment of this library, mapped
            // readable for the life of the process (it is never unloaded:
            // RTLD_NODELETE, see lua/amp/init.lua).
            unsafe { std::ptr::read_volatile(addr as *const u8) };
            addr += page;
        }
    }
}

#[cfg(not(target_os = "linux"))]
pub fn library_pages() {}

/// `dl_iterate_phdr`'s callback: when `info` is this library (the object
/// one of whose segments holds this function), its readable file-backed
/// PT_LOAD segments into `data` (a `Vec<(start, len)>`), and stops.
#[cfg(target_os = "linux")]
unsafe extern "C" fn collect(info: *mut libc::dl_phdr_info, _size: usize, data: *mut libc::c_void) -> libc::c_int {
    let (info, segments) = (&*info, &mut *data.cast::<Vec<(usize, usize)>>());
    if info.dlpi_phdr.is_null() {
        return 0;
    }
    let headers = std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum));
    let base = info.dlpi_addr as usize;
    let here = collect as *const () as usize;
    let loads = headers.iter().filter(|h| h.p_type == libc::PT_LOAD);
    if !loads.clone().any(|h| (base + h.p_vaddr as usize..base + (h.p_vaddr + h.p_memsz) as usize).contains(&here)) {
        return 0; // another object
    }
    for h in loads.filter(|h| h.p_flags & libc::PF_R != 0 && h.p_filesz > 0) {
        segments.push((base + h.p_vaddr as usize, h.p_filesz as usize));
    }
    1
}
