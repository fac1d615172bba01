//! The orders table's item layout and value limits: the order processor writes
//! items with these names, the Arrow worker reads them back. One place for both.

/// Attribute names of an order item.
pub mod attr {
    pub const ORDER_ID: &str = "order_id";
    pub const CUSTOMER_ID: &str = "customer_id";
    pub const ITEMS: &str = "items";
    pub const SKU: &str = "sku";
    pub const QUANTITY: &str = "quantity";
    pub const UNIT_PRICE_CENTS: &str = "unit_price_cents";
    pub const TOTAL_CENTS: &str = "total_cents";
    pub const TOTAL_QUANTITY: &str = "total_quantity";
    pub const CURRENCY: &str = "currency";
    pub const CREATED_AT: &str = "created_at";
    pub const CREATED_AT_MS: &str = "created_at_ms";
    pub const CONTENT_HASH: &str = "content_hash";
    /// The version of the canonical form `content_hash` was computed from
    /// (absent on items of the first release: version 0).
    pub const HASH_VERSION: &str = "hash_version";
    /// The order's UTC day and shard, `2026-11-21#3`: the partition key of
    /// [`DAY_INDEX`](super::DAY_INDEX) (see [`day_shard`](super::day_shard)).
    pub const DAY_SHARD: &str = "day_shard";
}

/// The global secondary index holding every order under its UTC day
/// ([`attr::DAY_SHARD`], sort key [`attr::CREATED_AT_MS`]): the daily report
/// reads one day through it instead of scanning the table.
pub const DAY_INDEX: &str = "by-day";
/// Shards per day in [`DAY_INDEX`]: a day's orders spread over this many index
/// partitions (each takes about 1,000 writes a second), read in parallel.
pub const DAY_SHARDS: u32 = 4;

/// The UTC day of `ms` since the epoch, as `YYYY-MM-DD`.
pub fn day_of(ms: i64) -> Option<String> {
    let at = time::OffsetDateTime::from_unix_timestamp(ms.div_euclid(1_000)).ok()?;
    let date = at.date();
    Some(format!(
        "{:04}-{:02}-{:02}",
        date.year(),
        u8::from(date.month()),
        date.day()
    ))
}

/// The [`attr::DAY_SHARD`] key of shard `shard` of `day` (`YYYY-MM-DD`).
pub fn day_shard_key(day: &str, shard: u32) -> String {
    format!("{day}#{shard}")
}

/// The [`attr::DAY_SHARD`] value of an order: its UTC day and a shard picked by
/// a hash of its id (FNV-1a: stable across releases and platforms), so one
/// order always lands in the same shard. `None` for a time outside `time`'s range.
pub fn day_shard(order_id: &str, created_at_ms: i64) -> Option<String> {
    let hash = order_id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let shard = u32::try_from(hash % u64::from(DAY_SHARDS)).unwrap_or(0);
    Some(day_shard_key(&day_of(created_at_ms)?, shard))
}

/// Identifier length limit (order, customer, SKU), in bytes.
pub const MAX_ID_LEN: usize = 64;
/// Most line items in one order.
pub const MAX_ITEMS: usize = 100;
/// Most units of one item.
pub const MAX_QUANTITY: u32 = 10_000;
/// Most units in one order.
pub const MAX_TOTAL_QUANTITY: u64 = MAX_ITEMS as u64 * MAX_QUANTITY as u64;
/// Largest unit price and total, in cents: far from overflow, exact as an f64
/// (below 2^53), so analytics can sum them safely.
pub const MAX_AMOUNT_CENTS: u64 = 1_000_000_000_000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_are_utc_and_shards_are_stable_and_spread() {
        assert_eq!(day_of(-1).as_deref(), Some("1969-12-31"));
        assert_eq!(day_of(1_795_166_100_000).as_deref(), Some("2026-11-20"));
        // Pinned: a change would move stored orders to another shard.
        assert_eq!(
            day_shard("ord-1", 1_795_166_100_000).as_deref(),
            Some("2026-11-20#2")
        );
        let mut per_shard = [0_u32; DAY_SHARDS as usize];
        for i in 0..4_000 {
            let key = day_shard(&format!("ord-{i}"), 0).unwrap_or_default();
            let shard: usize = key.rsplit('#').next().and_then(|s| s.parse().ok()).unwrap();
            per_shard[shard] += 1;
        }
        assert!(
            per_shard.iter().all(|&n| (800..=1_200).contains(&n)),
            "{per_shard:?}"
        );
    }
}
