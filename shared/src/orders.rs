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
