//! A small TTL + LRU cache of provider results.
//!
//! The reference (`lib/client/src/providerClient/transport/cache.ts`) wraps
//! each provider's transport in an `LRUCache({max: 20, ttl: 5 min})` keyed by
//! `method:JSON.stringify([params, settings])` (this client keys annotation
//! results by provider, URI and a hash of the content instead, so a 1 MB
//! document is not part of its key); a rejected call never reaches
//! `cache.set`, so failures are not cached (callers here: insert only
//! successes). As in `lru-cache`, a hit refreshes recency but not the age, and
//! an entry is stale once its age is strictly greater than the TTL.
//!
//! Time is passed in (`get_at`, `insert_at`) so tests need no sleeping; `get`
//! and `insert` use `Instant::now()`.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

/// Least-recently-used eviction over `capacity`, expiry after `ttl`.
#[derive(Debug, Clone)]
pub struct TtlCache<V: Clone> {
    capacity: usize,
    ttl: Duration,
    entries: HashMap<String, Entry<V>>,
    /// Recency stamp -> key; the first entry is the least recently used.
    recency: BTreeMap<u64, String>,
    clock: u64,
}

#[derive(Debug, Clone)]
struct Entry<V> {
    value: V,
    inserted: Instant,
    stamp: u64,
}

impl<V: Clone> TtlCache<V> {
    /// A cache of at most `capacity` entries (0 stores nothing), each fresh for `ttl`.
    pub fn new(capacity: usize, ttl: Duration) -> Self {
        TtlCache { capacity, ttl, entries: HashMap::new(), recency: BTreeMap::new(), clock: 0 }
    }

    pub fn get(&mut self, key: &str) -> Option<V> {
        self.get_at(key, Instant::now())
    }

    pub fn insert(&mut self, key: String, value: V) {
        self.insert_at(key, value, Instant::now());
    }

    /// The value if present and fresh at `now`; a stale entry is dropped.
    pub fn get_at(&mut self, key: &str, now: Instant) -> Option<V> {
        let entry = self.entries.get(key)?;
        if self.is_stale(entry, now) {
            self.remove(key);
            return None;
        }
        let old = entry.stamp;
        let stamp = self.next_stamp();
        let entry = self.entries.get_mut(key)?;
        entry.stamp = stamp;
        let value = entry.value.clone();
        self.recency.remove(&old);
        self.recency.insert(stamp, key.to_string());
        Some(value)
    }

    /// Stores `value` as fresh at `now` and most recently used. Over capacity,
    /// stale entries go first, then the least recently used.
    pub fn insert_at(&mut self, key: String, value: V, now: Instant) {
        if self.capacity == 0 {
            return;
        }
        self.remove(&key);
        let stamp = self.next_stamp();
        self.recency.insert(stamp, key.clone());
        self.entries.insert(key, Entry { value, inserted: now, stamp });
        if self.entries.len() > self.capacity {
            let stale: Vec<String> =
                self.entries.iter().filter(|(_, e)| self.is_stale(e, now)).map(|(k, _)| k.clone()).collect();
            for k in stale {
                self.remove(&k);
            }
        }
        while self.entries.len() > self.capacity {
            let Some((_, oldest)) = self.recency.pop_first() else { break };
            self.entries.remove(&oldest);
        }
    }

    pub fn remove(&mut self, key: &str) -> Option<V> {
        let entry = self.entries.remove(key)?;
        self.recency.remove(&entry.stamp);
        Some(entry.value)
    }

    pub fn clear(&mut self) {
        self.entries.clear();
        self.recency.clear();
    }

    /// Entries held, stale ones included until they are touched or evicted.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn is_stale(&self, entry: &Entry<V>, now: Instant) -> bool {
        now.saturating_duration_since(entry.inserted) > self.ttl
    }

    fn next_stamp(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: Duration = Duration::from_secs(300);

    #[test]
    fn hit_and_miss() {
        let mut c = TtlCache::new(20, TTL);
        assert!(c.is_empty());
        c.insert("a".into(), 1);
        assert_eq!(c.get("a"), Some(1));
        assert_eq!(c.get("b"), None);
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn entries_expire_after_the_ttl() {
        let t0 = Instant::now();
        let mut c = TtlCache::new(20, TTL);
        c.insert_at("a".into(), "x".to_string(), t0);
        assert_eq!(c.get_at("a", t0 + TTL - Duration::from_millis(1)).as_deref(), Some("x"));
        assert_eq!(c.get_at("a", t0 + TTL).as_deref(), Some("x")); // stale only when age > ttl
        assert_eq!(c.get_at("a", t0 + TTL + Duration::from_millis(1)), None);
        assert!(c.is_empty(), "a stale entry is dropped when seen");
    }

    #[test]
    fn a_hit_does_not_extend_the_ttl_but_a_reinsert_does() {
        let t0 = Instant::now();
        let mut c = TtlCache::new(20, TTL);
        c.insert_at("a".into(), 1, t0);
        assert_eq!(c.get_at("a", t0 + Duration::from_secs(200)), Some(1));
        assert_eq!(c.get_at("a", t0 + Duration::from_secs(301)), None);
        c.insert_at("a".into(), 2, t0 + Duration::from_secs(301));
        assert_eq!(c.get_at("a", t0 + Duration::from_secs(600)), Some(2));
    }

    #[test]
    fn least_recently_used_is_evicted() {
        let t0 = Instant::now();
        let mut c = TtlCache::new(3, TTL);
        c.insert_at("a".into(), 1, t0);
        c.insert_at("b".into(), 2, t0);
        c.insert_at("c".into(), 3, t0);
        assert_eq!(c.get_at("a", t0), Some(1)); // a is now the most recent
        c.insert_at("d".into(), 4, t0);
        assert_eq!(c.len(), 3);
        assert_eq!(c.get_at("b", t0), None);
        assert_eq!(c.get_at("a", t0), Some(1));
        assert_eq!(c.get_at("c", t0), Some(3));
        assert_eq!(c.get_at("d", t0), Some(4));
    }

    #[test]
    fn replacing_a_key_refreshes_it_and_does_not_grow() {
        let t0 = Instant::now();
        let mut c = TtlCache::new(2, TTL);
        c.insert_at("a".into(), 1, t0);
        c.insert_at("b".into(), 2, t0);
        c.insert_at("a".into(), 10, t0);
        assert_eq!(c.len(), 2);
        c.insert_at("c".into(), 3, t0); // evicts b, the least recent
        assert_eq!(c.get_at("a", t0), Some(10));
        assert_eq!(c.get_at("b", t0), None);
        assert_eq!(c.get_at("c", t0), Some(3));
    }

    #[test]
    fn stale_entries_are_evicted_before_fresh_ones() {
        let t0 = Instant::now();
        let later = t0 + TTL + Duration::from_secs(1);
        let mut c = TtlCache::new(2, TTL);
        c.insert_at("fresh".into(), 1, later);
        c.insert_at("old".into(), 2, t0); // inserted "in the past": stale at `later`
        c.get_at("old", t0); // and the most recently used
        c.insert_at("new".into(), 3, later);
        assert_eq!(c.get_at("fresh", later), Some(1));
        assert_eq!(c.get_at("new", later), Some(3));
        assert_eq!(c.len(), 2);
    }

    #[test]
    fn reference_capacity_of_twenty() {
        let t0 = Instant::now();
        let mut c = TtlCache::new(20, TTL);
        for i in 0..25 {
            c.insert_at(format!("k{i}"), i, t0);
        }
        assert_eq!(c.len(), 20);
        assert_eq!(c.get_at("k4", t0), None);
        assert_eq!(c.get_at("k5", t0), Some(5));
        assert_eq!(c.get_at("k24", t0), Some(24));
    }

    #[test]
    fn zero_capacity_stores_nothing_and_remove_clear_work() {
        let mut c = TtlCache::new(0, TTL);
        c.insert("a".into(), 1);
        assert_eq!(c.get("a"), None);
        let mut c = TtlCache::new(5, TTL);
        c.insert("a".into(), 1);
        c.insert("b".into(), 2);
        assert_eq!(c.remove("a"), Some(1));
        assert_eq!(c.remove("a"), None);
        c.clear();
        assert!(c.is_empty());
        c.insert("c".into(), 3);
        assert_eq!(c.get("c"), Some(3));
    }

    #[test]
    fn time_going_backwards_is_not_a_panic() {
        let t0 = Instant::now() + Duration::from_secs(10);
        let mut c = TtlCache::new(2, TTL);
        c.insert_at("a".into(), 1, t0);
        assert_eq!(c.get_at("a", t0 - Duration::from_secs(5)), Some(1));
    }
}
