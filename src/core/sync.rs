//! Locks that outlive a panic. A thread that panics while holding one of the
//! plugin's locks poisons it; the standard `lock()` would then fail for every
//! later caller, and one bad moment in a background task would take a
//! front-end, the OpenCtx client or the log down for the rest of the session.
//! The data behind these locks stays usable (plain maps, queues, options; a
//! writer that panicked leaves at worst one stale entry), so the poison is
//! ignored: [`LockExt::locked`], [`RwLockExt::read_locked`] and
//! [`RwLockExt::write_locked`] take the guard either way.

use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// `Mutex::lock` that ignores poisoning (see the module's doc).
pub trait LockExt<T: ?Sized> {
    fn locked(&self) -> MutexGuard<'_, T>;
}

impl<T: ?Sized> LockExt<T> for Mutex<T> {
    fn locked(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// `RwLock::read`/`write` that ignore poisoning (see the module's doc).
pub trait RwLockExt<T: ?Sized> {
    fn read_locked(&self) -> RwLockReadGuard<'_, T>;
    fn write_locked(&self) -> RwLockWriteGuard<'_, T>;
}

impl<T: ?Sized> RwLockExt<T> for RwLock<T> {
    fn read_locked(&self) -> RwLockReadGuard<'_, T> {
        self.read().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write_locked(&self) -> RwLockWriteGuard<'_, T> {
        self.write().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poisoned_mutex_still_hands_out_its_data() {
        static M: Mutex<Vec<u32>> = Mutex::new(Vec::new());
        let panicked = std::thread::spawn(|| {
            let mut guard = M.lock().unwrap();
            guard.push(1);
            panic!("poisoning the lock on purpose");
        })
        .join();
        assert!(panicked.is_err());
        assert!(M.is_poisoned());
        M.locked().push(2);
        assert_eq!(*M.locked(), vec![1, 2]);
    }

    #[test]
    fn a_poisoned_rwlock_still_reads_and_writes() {
        static R: RwLock<u32> = RwLock::new(1);
        let panicked = std::thread::spawn(|| {
            let _guard = R.write().unwrap();
            panic!("poisoning the lock on purpose");
        })
        .join();
        assert!(panicked.is_err());
        assert!(R.is_poisoned());
        *R.write_locked() += 1;
        assert_eq!(*R.read_locked(), 2);
    }
}
