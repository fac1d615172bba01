//! A bounded LRU cache of recently stored orders (id and content hash), so a
//! duplicate delivery to this container skips the DynamoDB write.
//!
//! Memory bound: an entry holds the id (at most 64 bytes, in a `String`), a
//! 32-byte hash and the LRU's links and hash-table slot, about 200 bytes in all.
//! The default capacity of 10,000 entries is therefore about 2 MiB; the largest
//! allowed capacity (100,000) about 20 MiB.

use lru::LruCache;
use std::num::NonZeroUsize;
use std::sync::{Mutex, PoisonError};

/// Recently stored orders, shared by every invocation of the environment (on
/// Lambda Managed Instances, several at once). The lock is held for one
/// lookup or insert, never across an await.
#[derive(Debug)]
pub struct StoredOrders {
    entries: Mutex<LruCache<String, [u8; 32]>>,
}

impl StoredOrders {
    /// A cache holding at most `capacity` orders.
    pub fn new(capacity: NonZeroUsize) -> Self {
        Self {
            entries: Mutex::new(LruCache::new(capacity)),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LruCache<String, [u8; 32]>> {
        // A panic elsewhere cannot leave the cache inconsistent in a way that
        // matters: at worst an entry is missing and the store is asked again.
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether this exact order (same id, same content) was stored recently.
    pub fn contains(&self, order_id: &str, hash: &[u8; 32]) -> bool {
        self.lock().get(order_id) == Some(hash)
    }

    /// Remember that this order is stored.
    pub fn insert(&self, order_id: &str, hash: [u8; 32]) {
        self.lock().put(order_id.to_owned(), hash);
    }

    /// Entries now.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_grows_past_capacity_and_evicts_the_oldest() {
        let cache = StoredOrders::new(NonZeroUsize::new(3).expect("non-zero"));
        for i in 0..1_000u32 {
            cache.insert(&format!("o-{i}"), [i as u8; 32]);
            assert!(cache.len() <= 3);
        }
        assert!(cache.contains("o-999", &[999u32 as u8; 32]));
        assert!(!cache.contains("o-0", &[0; 32]));
    }

    #[test]
    fn a_different_hash_is_not_a_hit() {
        let cache = StoredOrders::new(NonZeroUsize::new(3).expect("non-zero"));
        cache.insert("o-1", [1; 32]);
        assert!(cache.contains("o-1", &[1; 32]));
        assert!(!cache.contains("o-1", &[2; 32]));
    }
}
