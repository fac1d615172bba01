//! Combining the partial answers of a fan-out (one per scan segment) into the
//! answer one full scan would give. Works on groups, not rows: the partials are
//! already aggregated.
//!
//! Partials come from the caller, so each is checked before it is used: the
//! segments of one fan-out, each once, for the same query; counters that add
//! up (`rows.matched` is the groups' count, no counter sum overflows); groups
//! that can exist (in key order, at least one order, money per currency in
//! currency order with counts adding up to the group's, statistics possible
//! for their count and within the order schema's limits). Money is merged per
//! currency; every mean is recomputed.

use crate::answer::{Answer, Group, Rows, Stats};
use crate::columns::is_currency_code;
use crate::query::{BadRequest, MAX_SEGMENTS, Query, bad, quoted};
use shared::orders::{MAX_AMOUNT_CENTS, MAX_TOTAL_QUANTITY};
use std::collections::BTreeMap;

fn add(a: u64, b: u64, key: &str) -> Result<u64, BadRequest> {
    a.checked_add(b).ok_or_else(|| {
        bad(format!(
            "the sums of group {} overflow 64 bits",
            quoted(key)
        ))
    })
}

fn combine(a: &Stats, b: &Stats, count: u64, key: &str) -> Result<Stats, BadRequest> {
    Ok(Stats::new(
        count,
        add(a.sum, b.sum, key)?,
        a.min.min(b.min),
        a.max.max(b.max),
    ))
}

/// Refuse a group no scan can produce (see the module doc).
fn check_group(group: &Group) -> Result<(), String> {
    if group.count == 0 {
        return Err("count 0: a group has at least one order".into());
    }
    group
        .quantity
        .check(group.count, 1..=MAX_TOTAL_QUANTITY)
        .map_err(|e| format!("quantity: {e}"))?;
    if group.money.is_empty() {
        return Err("no money entry: every order has a currency".into());
    }
    let mut orders: u64 = 0;
    for (i, money) in group.money.iter().enumerate() {
        let currency = &money.currency;
        if !is_currency_code(currency) {
            return Err(format!(
                "money[{i}].currency {} is not a currency code",
                quoted(currency)
            ));
        }
        if i > 0 && group.money[i - 1].currency >= *currency {
            return Err("money is not in strictly ascending currency order".into());
        }
        if money.count == 0 {
            return Err(format!("money {currency}: count 0"));
        }
        money
            .total_cents
            .check(money.count, 0..=MAX_AMOUNT_CENTS)
            .map_err(|e| format!("money {currency}: total_cents: {e}"))?;
        orders = orders.saturating_add(money.count);
    }
    if orders != group.count {
        return Err(format!(
            "count {} differs from the money entries' counts ({orders})",
            group.count
        ));
    }
    Ok(())
}

/// Refuse a partial whose counters or groups cannot be one segment's answer.
fn check_partial(partial: &Answer) -> Result<(), String> {
    let mut matched: u64 = 0;
    for (i, group) in partial.groups.iter().enumerate() {
        if i > 0 && partial.groups[i - 1].key >= group.key {
            return Err("groups are not in strictly ascending key order".into());
        }
        check_group(group).map_err(|e| format!("group {}: {e}", quoted(&group.key)))?;
        matched = matched.saturating_add(group.count);
    }
    let rows = &partial.rows;
    if rows.matched != matched {
        return Err(format!(
            "rows.matched {} differs from the groups' count ({matched})",
            rows.matched
        ));
    }
    let counted = u128::from(rows.matched) + u128::from(rows.skipped.total());
    if u128::from(rows.scanned) < counted {
        return Err(format!(
            "rows.scanned {} is less than rows.matched plus the skipped ({counted})",
            rows.scanned
        ));
    }
    Ok(())
}

/// `group` merged into `into` (same key): counts, quantities and money per currency.
fn merge_group(into: &mut Group, group: Group) -> Result<(), BadRequest> {
    let key = &group.key;
    let count = add(into.count, group.count, key)?;
    into.quantity = combine(&into.quantity, &group.quantity, count, key)?;
    into.count = count;
    for money in group.money {
        match into
            .money
            .binary_search_by(|m| m.currency.cmp(&money.currency))
        {
            Ok(at) => {
                let mine = &mut into.money[at];
                let count = add(mine.count, money.count, key)?;
                mine.total_cents = combine(&mine.total_cents, &money.total_cents, count, key)?;
                mine.count = count;
            }
            Err(at) => into.money.insert(at, money),
        }
    }
    Ok(())
}

/// `group` with every mean recomputed from its sum and count (a partial's
/// means come from the caller).
fn with_means(mut group: Group) -> Group {
    let again = |s: &Stats, count| Stats::new(count, s.sum, s.min, s.max);
    group.quantity = again(&group.quantity, group.count);
    for money in &mut group.money {
        money.total_cents = again(&money.total_cents, money.count);
    }
    group
}

/// Why partials could not be merged.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// The partials are not the answers of one fan-out, or not possible.
    #[error(transparent)]
    Invalid(#[from] BadRequest),
    /// The merged answer would hold more groups than this function may.
    #[error(
        "the merged answer would hold more than {0} groups, more than this function's memory holds (MAX_ROWS): use a coarser group_by, a narrower time window, or more memory"
    )]
    TooManyGroups(usize),
}

/// Groups combined by key, refused as soon as they would be more than
/// `max_groups` (checked at each new key, so memory never runs past it).
#[derive(Debug)]
pub struct Totals {
    groups: BTreeMap<String, Group>,
    max_groups: usize,
}

impl Totals {
    /// No groups yet; at most `max_groups`.
    pub fn new(max_groups: usize) -> Self {
        Self {
            groups: BTreeMap::new(),
            max_groups,
        }
    }

    /// Combine `group` into the group of its key, or add it.
    pub fn add(&mut self, group: Group) -> Result<(), MergeError> {
        if let Some(into) = self.groups.get_mut(&group.key) {
            return Ok(merge_group(into, group)?);
        }
        if self.groups.len() >= self.max_groups {
            return Err(MergeError::TooManyGroups(self.max_groups));
        }
        self.groups.insert(group.key.clone(), group);
        Ok(())
    }

    /// Combine every group of `other`.
    pub fn join(&mut self, other: Totals) -> Result<(), MergeError> {
        other.groups.into_values().try_for_each(|g| self.add(g))
    }

    /// Groups held.
    pub fn len(&self) -> usize {
        self.groups.len()
    }

    /// Whether no group is held.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// The groups, in key order.
    pub fn into_groups(self) -> Vec<Group> {
        self.groups.into_values().collect()
    }
}

/// Partials combined one at a time, so a merge holds the combined groups and
/// one partial, never all of them.
#[derive(Debug)]
pub struct Merger {
    query: Query,
    total: u32,
    seen: Vec<bool>,
    rows: Rows,
    groups: Totals,
}

impl Merger {
    /// A merge of the `total_segments` partials answering `query`, refused
    /// once it would hold more than `max_groups` groups.
    pub fn new(query: Query, total_segments: u32, max_groups: usize) -> Result<Self, BadRequest> {
        if total_segments == 0 || total_segments > MAX_SEGMENTS {
            return Err(bad(format!(
                "total_segments {total_segments} must be 1 to {MAX_SEGMENTS}"
            )));
        }
        Ok(Self {
            query,
            total: total_segments,
            seen: vec![false; total_segments as usize],
            rows: Rows::default(),
            groups: Totals::new(max_groups),
        })
    }

    /// Combine `partial` (named `name` in errors) into the merge.
    pub fn add(&mut self, name: &str, partial: Answer) -> Result<(), MergeError> {
        let total = self.total;
        if partial.query != self.query {
            return Err(bad(format!("{name} answers a different query")).into());
        }
        let segment = partial
            .segment
            .filter(|s| s.total_segments == total && s.segment < total)
            .ok_or_else(|| bad(format!("{name} is not one of {total} segments")))?;
        if std::mem::replace(&mut self.seen[segment.segment as usize], true) {
            return Err(bad(format!("segment {} given twice", segment.segment)).into());
        }
        if partial.truncated {
            return Err(bad(format!("{name} is truncated")).into());
        }
        check_partial(&partial).map_err(|e| bad(format!("{name}: {e}")))?;
        self.rows
            .add(&partial.rows)
            .map_err(|e| bad(format!("merging the partials: {e}")))?;
        for group in partial.groups.into_iter().map(with_means) {
            self.groups.add(group)?;
        }
        Ok(())
    }

    /// The final answer, once every segment was added.
    pub fn finish(self) -> Result<Answer, BadRequest> {
        if let Some(missing) = self.seen.iter().position(|seen| !seen) {
            return Err(bad(format!(
                "segment {missing} of {} is missing",
                self.total
            )));
        }
        Answer::new(self.query, None, self.groups.into_groups(), self.rows)
    }
}

/// Merge `partials`, which must be the answers to the same query for every
/// segment `0..total_segments` of one fan-out, each exactly once.
pub fn merge(partials: Vec<Answer>) -> Result<Answer, BadRequest> {
    let Some(first) = partials.first() else {
        return Err(bad(
            "merge needs the partial answers of every segment; none given",
        ));
    };
    let total = first
        .segment
        .map(|s| s.total_segments)
        .ok_or_else(|| bad("partials[0] is a final answer, not one segment's"))?;
    if partials.len() != total as usize {
        return Err(bad(format!(
            "{} partials given for {total} segments",
            partials.len()
        )));
    }
    let mut merger = Merger::new(first.query.clone(), total, usize::MAX)?;
    for (i, partial) in partials.into_iter().enumerate() {
        // Without a group bound, every refusal is of the partials themselves.
        merger
            .add(&format!("partials[{i}]"), partial)
            .map_err(|e| match e {
                MergeError::Invalid(e) => e,
                e @ MergeError::TooManyGroups(_) => bad(e.to_string()),
            })?;
    }
    merger.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::answer::Money;
    use crate::query::{GroupBy, Segment};

    fn money(currency: &str, count: u64, sum: u64, min: u64, max: u64) -> Money {
        Money {
            currency: currency.into(),
            count,
            total_cents: Stats::new(count, sum, min, max),
        }
    }

    /// A group of `count` orders of one unit, in EUR.
    fn group(key: &str, count: u64, sum: u64, min: u64, max: u64) -> Group {
        Group {
            key: key.into(),
            count,
            money: vec![money("EUR", count, sum, min, max)],
            quantity: Stats::new(count, count, 1, 1),
        }
    }

    fn partial(segment: u32, total: u32, groups: Vec<Group>) -> Answer {
        let query = Query {
            group_by: GroupBy::Customer,
            from: None,
            to: None,
            limit: None,
        };
        let seg = Segment {
            segment,
            total_segments: total,
        };
        let matched = groups.iter().map(|g| g.count).sum();
        let rows = Rows {
            scanned: matched,
            matched,
            ..Rows::default()
        };
        Answer::new(query, Some(seg), groups, rows).unwrap()
    }

    #[test]
    fn groups_present_in_several_partials_combine() {
        let merged = merge(vec![
            partial(
                1,
                2,
                vec![group("a", 1, 10, 10, 10), group("c", 1, 5, 5, 5)],
            ),
            partial(0, 2, vec![group("a", 3, 30, 2, 20), group("b", 1, 1, 1, 1)]),
        ])
        .unwrap();
        assert_eq!(merged.segment, None);
        assert_eq!(merged.rows.matched, 6);
        let a = &merged.groups[0];
        assert_eq!((a.key.as_str(), a.count), ("a", 4));
        assert_eq!(a.money, [money("EUR", 4, 40, 2, 20)]);
        assert_eq!(a.money[0].total_cents.mean, 10.0);
        assert_eq!(a.quantity, Stats::new(4, 4, 1, 1));
        let keys: Vec<_> = merged.groups.iter().map(|g| g.key.as_str()).collect();
        assert_eq!(keys, ["a", "b", "c"]);
    }

    #[test]
    fn money_merges_per_currency_and_never_across() {
        let mut eur = group("a", 2, 300, 100, 200);
        eur.quantity = Stats::new(2, 5, 2, 3);
        let mut mixed = group("a", 3, 0, 0, 0);
        mixed.money = vec![
            money("EUR", 1, 50, 50, 50),
            money("JPY", 2, 9_000, 4_000, 5_000),
        ];
        mixed.quantity = Stats::new(3, 3, 1, 1);
        let merged = merge(vec![partial(0, 2, vec![eur]), partial(1, 2, vec![mixed])]).unwrap();
        let a = &merged.groups[0];
        assert_eq!(a.count, 5);
        assert_eq!(
            a.money,
            [
                money("EUR", 3, 350, 50, 200),
                money("JPY", 2, 9_000, 4_000, 5_000)
            ]
        );
        assert_eq!(a.quantity, Stats::new(5, 8, 1, 3));
    }

    #[test]
    fn incomplete_or_inconsistent_fan_outs_are_refused() {
        let cases = [
            vec![],
            vec![partial(0, 2, vec![])],
            vec![partial(0, 2, vec![]), partial(0, 2, vec![])],
            vec![partial(0, 2, vec![]), partial(1, 3, vec![])],
        ];
        for partials in cases {
            assert!(merge(partials).is_err());
        }
        let mut other = partial(1, 2, vec![]);
        other.query.group_by = GroupBy::Day;
        let err = merge(vec![partial(0, 2, vec![]), other]).unwrap_err();
        assert!(err.0.contains("different query"), "{err}");
        // Ten million orders of the largest total in each partial: each sum
        // fits in 64 bits, their sum does not.
        let big = || {
            group(
                "a",
                10_000_000,
                10_000_000 * MAX_AMOUNT_CENTS,
                MAX_AMOUNT_CENTS,
                MAX_AMOUNT_CENTS,
            )
        };
        let huge = vec![partial(0, 2, vec![big()]), partial(1, 2, vec![big()])];
        assert!(merge(huge).unwrap_err().0.contains("overflow"));
    }

    #[test]
    fn row_counters_that_overflow_are_refused_naming_the_field() {
        let mut a = partial(0, 2, vec![]);
        let mut b = partial(1, 2, vec![]);
        (a.rows.scanned, b.rows.scanned) = (u64::MAX, 1);
        let err = merge(vec![a, b]).expect_err("overflow");
        assert!(
            err.0.contains("rows.scanned") && err.0.contains("overflow"),
            "{err}"
        );
    }

    #[test]
    fn impossible_partial_groups_are_refused() {
        type Spoil = fn(&mut Group);
        let cases: [(&str, Spoil); 10] = [
            ("count", |g| g.count = 0),
            ("min", |g| {
                let t = &mut g.money[0].total_cents;
                (t.min, t.max) = (9, 3);
            }),
            ("sum", |g| g.money[0].total_cents.sum = 1_000),
            ("sum", |g| g.money[0].total_cents.sum = 0),
            ("quantity", |g| g.quantity = Stats::new(2, 0, 0, 0)),
            ("max", |g| g.money[0].total_cents.max = MAX_AMOUNT_CENTS + 1),
            ("no money", |g| g.money.clear()),
            ("counts", |g| g.money[0] = money("EUR", 1, 5, 5, 5)),
            ("currency", |g| g.money[0].currency = "eur".into()),
            ("ascending", |g| g.money.push(g.money[0].clone())),
        ];
        for (what, spoil) in cases {
            let mut bad = group("a", 2, 10, 3, 7);
            spoil(&mut bad);
            let partials = vec![partial(0, 2, vec![bad]), partial(1, 2, vec![])];
            let err = merge(partials).expect_err(what);
            assert!(err.0.contains(what), "{what}: {err}");
        }
    }

    #[test]
    fn partial_counters_must_add_up() {
        let mut unmatched = partial(0, 2, vec![group("a", 2, 10, 3, 7)]);
        unmatched.rows.matched = 3;
        let mut unscanned = partial(0, 2, vec![group("a", 2, 10, 3, 7)]);
        unscanned.rows.scanned = 1;
        let mut twice = partial(0, 2, vec![group("a", 1, 5, 5, 5)]);
        twice.groups.push(group("a", 1, 5, 5, 5));
        twice.rows.matched = 2;
        for (what, bad) in [
            ("rows.matched", unmatched),
            ("rows.scanned", unscanned),
            ("ascending key", twice),
        ] {
            let err = merge(vec![bad, partial(1, 2, vec![])]).expect_err(what);
            assert!(err.0.contains(what), "{what}: {err}");
        }
    }

    #[test]
    fn means_are_recomputed() {
        let mut lying = group("a", 2, 10, 3, 7);
        lying.money[0].total_cents.mean = 99.0;
        lying.quantity.mean = 99.0;
        let merged = merge(vec![partial(0, 2, vec![lying]), partial(1, 2, vec![])]).unwrap();
        assert_eq!(merged.groups[0].money[0].total_cents.mean, 5.0);
        assert_eq!(merged.groups[0].quantity.mean, 1.0);
    }

    #[test]
    fn the_group_bound_holds_at_every_new_key_not_after_a_partial() {
        let mut merger = Merger::new(partial(0, 2, vec![]).query, 2, 2).unwrap();
        let three = vec![
            group("a", 1, 1, 1, 1),
            group("b", 1, 1, 1, 1),
            group("c", 1, 1, 1, 1),
        ];
        let err = merger.add("partials[0]", partial(0, 2, three)).unwrap_err();
        assert!(matches!(err, MergeError::TooManyGroups(2)), "{err}");
        assert_eq!(merger.groups.len(), 2, "held past the bound");
        // Known keys still combine at the bound.
        let mut totals = Totals::new(1);
        totals.add(group("a", 1, 1, 1, 1)).unwrap();
        totals.add(group("a", 2, 4, 2, 2)).unwrap();
        assert!(totals.add(group("b", 1, 1, 1, 1)).is_err());
        let groups = totals.into_groups();
        assert_eq!((groups.len(), groups[0].count), (1, 3));
    }
}
