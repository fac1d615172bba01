//! Property test: the worker's answers (full scan, and segments + merge) equal a
//! straightforward row-by-row reference computation, on random orders with
//! extreme values, malformed items, empty windows and many or few groups.

use arrow_worker::answer::{Answer, Group, Money, Stats};
use arrow_worker::columns::{Item, day_of};
use arrow_worker::config::Config;
use arrow_worker::handler::Handler;
use arrow_worker::query::{GroupBy, MAX_LIMIT, Query, Segment};
use arrow_worker_testkit::orders::{MemoryStore, order_item};
use proptest::prelude::*;
use shared::orders::{MAX_AMOUNT_CENTS, MAX_TOTAL_QUANTITY};
use std::collections::BTreeMap;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

#[derive(Debug, Clone)]
struct Order {
    customer: u8,
    currency: u8,
    ms: i64,
    total: u64,
    qty: u64,
}

const CURRENCIES: [&str; 4] = ["EUR", "USD", "JPY", "CHF"];
const BASE_MS: i64 = 1_793_491_200_000;

fn order() -> impl Strategy<Value = Order> {
    let total = prop_oneof![Just(0), Just(MAX_AMOUNT_CENTS), 0..=MAX_AMOUNT_CENTS];
    let qty = prop_oneof![Just(1), Just(MAX_TOTAL_QUANTITY), 1..=MAX_TOTAL_QUANTITY];
    // Times around a base, plus the epoch and times before it.
    let ms = prop_oneof![
        BASE_MS - 3 * 86_400_000..BASE_MS + 3 * 86_400_000,
        Just(0i64),
        -86_400_000i64..0,
    ];
    (0u8..50, 0u8..4, ms, total, qty).prop_map(|(customer, currency, ms, total, qty)| Order {
        customer,
        currency,
        ms,
        total,
        qty,
    })
}

fn key(o: &Order, group_by: GroupBy) -> String {
    match group_by {
        GroupBy::Customer => format!("c{}", o.customer),
        GroupBy::Currency => CURRENCIES[o.currency as usize].to_owned(),
        GroupBy::Day => {
            let at = OffsetDateTime::from_unix_timestamp_nanos(i128::from(o.ms) * 1_000_000)
                .expect("in range");
            at.date().to_string()
        }
    }
}

fn item(o: &Order) -> Item {
    order_item(
        &format!("c{}", o.customer),
        CURRENCIES[o.currency as usize],
        o.ms,
        o.total,
        o.qty,
    )
}

/// Count, sum, min, max and mean of `f` over `members` (at least one).
fn stats(members: &[&Order], f: fn(&Order) -> u64) -> Stats {
    let values: Vec<u64> = members.iter().map(|o| f(o)).collect();
    let sum: u64 = values.iter().sum();
    Stats {
        sum,
        min: *values.iter().min().expect("non-empty"),
        max: *values.iter().max().expect("non-empty"),
        mean: sum as f64 / values.len() as f64,
    }
}

/// The reference: one pass over the rows into a map of groups, each a map
/// of currencies; money per currency, quantities over the group.
fn reference(
    orders: &[Order],
    group_by: GroupBy,
    from: Option<i64>,
    to: Option<i64>,
) -> Vec<Group> {
    let mut map: BTreeMap<String, Vec<&Order>> = BTreeMap::new();
    for o in orders {
        if from.is_some_and(|f| o.ms < f) || to.is_some_and(|t| o.ms >= t) {
            continue;
        }
        map.entry(key(o, group_by)).or_default().push(o);
    }
    map.into_iter()
        .map(|(key, members)| {
            let mut by_currency: BTreeMap<&str, Vec<&Order>> = BTreeMap::new();
            for o in &members {
                by_currency
                    .entry(CURRENCIES[o.currency as usize])
                    .or_default()
                    .push(o);
            }
            Group {
                key,
                count: members.len() as u64,
                money: by_currency
                    .into_iter()
                    .map(|(currency, paid)| Money {
                        currency: currency.to_owned(),
                        count: paid.len() as u64,
                        total_cents: stats(&paid, |o| o.total),
                    })
                    .collect(),
                quantity: stats(&members, |o| o.qty),
            }
        })
        .collect()
}

fn rfc3339(ms: i64) -> String {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .expect("in range")
        .format(&Rfc3339)
        .expect("formats")
}

fn handler(items: Vec<Item>, page_size: usize, workers: usize) -> Handler<MemoryStore> {
    let env = [("TABLE_NAME", "orders"), ("REPORTS_TABLE", "reports")];
    let config = Config::from_env(&env).expect("config");
    Handler::new(MemoryStore::new(items, page_size), config, workers, None)
}

fn run<T>(future: impl Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime")
        .block_on(future)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn answers_equal_the_reference(
        orders in proptest::collection::vec(order(), 0..300),
        malformed in 0usize..5,
        group_by in prop_oneof![Just(GroupBy::Customer), Just(GroupBy::Currency), Just(GroupBy::Day)],
        from in proptest::option::of(BASE_MS - 86_400_000..BASE_MS + 86_400_000),
        span in proptest::option::of(0i64..2 * 86_400_000),
        page_size in 1usize..64,
        workers in 1usize..5,
        total_segments in 1u32..6,
        on_edges in any::<bool>(),
    ) {
        // Half the time, the window's edges fall exactly on orders' times.
        let edge = |i: usize| orders.get(i % orders.len().max(1)).map(|o| o.ms);
        let (from, to) = match (on_edges, from) {
            (true, _) if !orders.is_empty() => (edge(0), edge(1).map(|t| t.max(edge(0).unwrap_or(t)))),
            _ => (from, span.map(|s| from.unwrap_or(BASE_MS) + s)),
        };
        let mut items: Vec<Item> = orders.iter().map(item).collect();
        // Malformed items, interleaved: no total, a string total.
        for i in 0..malformed {
            let mut bad = item(&orders.first().cloned().unwrap_or(Order { customer: 0, currency: 0, ms: 0, total: 1, qty: 1 }));
            if i % 2 == 0 {
                bad.remove("total_cents");
            } else {
                bad.insert("total_cents".into(), aws_sdk_dynamodb::types::AttributeValue::S("12".into()));
            }
            items.insert(i * 7 % (items.len() + 1), bad);
        }
        let query = Query { group_by, from: from.map(rfc3339), to: to.map(rfc3339), limit: Some(MAX_LIMIT) };
        let expected = reference(&orders, group_by, from, to);
        let w = handler(items, page_size, workers);

        let full: Answer = run(w.aggregate(query.clone(), None)).expect("full scan");
        prop_assert_eq!(&full.groups, &expected);
        prop_assert_eq!(full.rows.scanned, (orders.len() + malformed) as u64);
        prop_assert_eq!(full.rows.matched, expected.iter().map(|g| g.count).sum::<u64>());
        prop_assert_eq!(full.rows.skipped.total(), malformed as u64);

        let partials: Vec<Answer> = (0..total_segments)
            .map(|segment| run(w.aggregate(query.clone(), Some(Segment { segment, total_segments }))).expect("segment"))
            .collect();
        let merged = arrow_worker::merge::merge(partials).expect("merge");
        prop_assert_eq!(&merged.groups, &expected);
        prop_assert_eq!(merged.rows, full.rows);
    }
}

#[test]
fn the_reference_day_key_matches_the_worker_format() {
    assert_eq!(day_of(BASE_MS).as_deref(), Some("2026-11-01"));
    let o = Order {
        customer: 0,
        currency: 0,
        ms: BASE_MS,
        total: 0,
        qty: 1,
    };
    assert_eq!(key(&o, GroupBy::Day), "2026-11-01");
}
