//! Helpers for the crate's unit tests.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A unique temp directory, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let p =
            std::env::temp_dir().join(format!("amp-test-{}-{tag}-{n}-{:x}", std::process::id(), rand::random::<u32>()));
        fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// The permission bits of `p`.
pub fn mode(p: &Path) -> u32 {
    fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

/// Runs test `test` of `module` (pass `module_path!()`) again in a child
/// test process, where changing process-wide state such as the umask
/// cannot disturb tests running in parallel threads. Returns true in the
/// child, where the test body should run; false in the parent once the
/// child passed.
pub fn in_child(module: &str, test: &str) -> bool {
    if std::env::var_os("AMP_TEST_CHILD").is_some() {
        return true;
    }
    let module = module.split_once("::").map_or("", |(_, m)| m);
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([&format!("{module}::{test}"), "--exact", "--test-threads=1"])
        .env("AMP_TEST_CHILD", "1")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&child.stdout);
    assert!(child.status.success(), "child test {test} failed: {out}");
    assert!(out.contains("1 passed"), "child did not run {test}: {out}");
    false
}

/// The pid of a process that has exited (and been reaped).
pub fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}
