//! Combining the partial answers of a fan-out (one per scan segment) into the
//! answer one full scan would give. Works on groups, not rows: the partials are
//! already aggregated.

use crate::answer::{Answer, Group, Rows, Stats};
use crate::query::{BadRequest, bad, quoted};
use std::collections::BTreeMap;
use std::collections::btree_map::Entry;

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

/// Merge `partials`, which must be the answers to the same query for every
/// segment `0..total_segments` of one fan-out, each exactly once.
pub fn merge(partials: Vec<Answer>) -> Result<Answer, BadRequest> {
    let Some(first) = partials.first() else {
        return Err(bad(
            "merge needs the partial answers of every segment; none given",
        ));
    };
    let query = first.query.clone();
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
    let mut seen = vec![false; total as usize];
    let mut rows = Rows::default();
    let mut groups: BTreeMap<String, Group> = BTreeMap::new();
    for (i, partial) in partials.into_iter().enumerate() {
        if partial.query != query {
            return Err(bad(format!("partials[{i}] answers a different query")));
        }
        let segment = partial
            .segment
            .filter(|s| s.total_segments == total && s.segment < total)
            .ok_or_else(|| bad(format!("partials[{i}] is not one of {total} segments")))?;
        if std::mem::replace(&mut seen[segment.segment as usize], true) {
            return Err(bad(format!("segment {} given twice", segment.segment)));
        }
        if partial.truncated {
            return Err(bad(format!("partials[{i}] is truncated")));
        }
        rows.add(&partial.rows);
        for group in partial.groups {
            match groups.entry(group.key.clone()) {
                Entry::Vacant(slot) => {
                    slot.insert(group);
                }
                Entry::Occupied(mut slot) => {
                    let merged = slot.get_mut();
                    let count = add(merged.count, group.count, &group.key)?;
                    merged.total_cents =
                        combine(&merged.total_cents, &group.total_cents, count, &group.key)?;
                    merged.quantity =
                        combine(&merged.quantity, &group.quantity, count, &group.key)?;
                    merged.count = count;
                }
            }
        }
    }
    Answer::new(query, None, groups.into_values().collect(), rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::{GroupBy, Query, Segment};

    fn group(key: &str, count: u64, sum: u64, min: u64, max: u64) -> Group {
        Group {
            key: key.into(),
            count,
            total_cents: Stats::new(count, sum, min, max),
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
        assert_eq!(
            (a.total_cents.sum, a.total_cents.min, a.total_cents.max),
            (40, 2, 20)
        );
        assert_eq!(a.total_cents.mean, 10.0);
        let keys: Vec<_> = merged.groups.iter().map(|g| g.key.as_str()).collect();
        assert_eq!(keys, ["a", "b", "c"]);
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
        let huge = vec![
            partial(0, 2, vec![group("a", 1, u64::MAX, 1, 1)]),
            partial(1, 2, vec![group("a", 1, 1, 1, 1)]),
        ];
        assert!(merge(huge).unwrap_err().0.contains("overflow"));
    }
}
