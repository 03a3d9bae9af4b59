//! Compact sets of `u64` (sequence numbers, offsets) as sorted, disjoint,
//! non-adjacent inclusive ranges.
//!
//! Owns: [`IntervalSet`] and the set algebra the verifier and the report
//! merge need (union, difference, intersection, gaps). Inserting the next
//! value after the current maximum — the usual case for a partition's
//! offsets and a producer's sequences — is O(1); anything else is a binary
//! search plus, rarely, a `Vec` shift. Size follows the number of holes,
//! not the number of values: a billion in-order sequences are one range.
//! Must not: know what the numbers mean.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A set of `u64`. Invariant: `ranges` is sorted, every `[first, last]` has
/// `first <= last`, and consecutive ranges neither overlap nor touch
/// (`prev.last + 1 < next.first`); `len` is the number of values (saturating).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IntervalSet {
    ranges: Vec<[u64; 2]>,
    len: u64,
}

impl IntervalSet {
    pub fn new() -> IntervalSet {
        IntervalSet::default()
    }

    /// The set of every value in the given inclusive ranges, in any order,
    /// overlapping or not. Ranges with `first > last` are ignored.
    pub fn from_ranges(ranges: impl IntoIterator<Item = [u64; 2]>) -> IntervalSet {
        let mut sorted: Vec<[u64; 2]> = ranges.into_iter().filter(|r| r[0] <= r[1]).collect();
        sorted.sort_unstable();
        let mut set = IntervalSet::new();
        for r in sorted {
            set.push_sorted(r);
        }
        set
    }

    /// Appends a range starting at or after every range already present
    /// (overlap and adjacency allowed): the building block of the merges.
    fn push_sorted(&mut self, [first, last]: [u64; 2]) {
        match self.ranges.last_mut() {
            Some(prev) if first <= prev[1].saturating_add(1) => {
                if last > prev[1] {
                    self.len = self.len.saturating_add(last - prev[1]);
                    prev[1] = last;
                }
            }
            _ => {
                self.len = self.len.saturating_add(last - first).saturating_add(1);
                self.ranges.push([first, last]);
            }
        }
    }

    /// Adds `x`; returns false if it was already present.
    #[inline]
    pub fn insert(&mut self, x: u64) -> bool {
        if let Some(last) = self.ranges.last_mut() {
            if x > last[1] {
                // last[1] < x, so the +1 cannot overflow.
                if x == last[1] + 1 {
                    last[1] = x;
                } else {
                    self.ranges.push([x, x]);
                }
                self.len = self.len.saturating_add(1);
                return true;
            }
            self.insert_below_max(x)
        } else {
            self.ranges.push([x, x]);
            self.len = 1;
            true
        }
    }

    #[cold]
    fn insert_below_max(&mut self, x: u64) -> bool {
        // Index of the first range starting above x; the one before it (if
        // any) is the only one that can contain x or end just below it.
        let i = self.ranges.partition_point(|r| r[0] <= x);
        if i > 0 && self.ranges[i - 1][1] >= x {
            return false;
        }
        // ranges[i-1][1] < x < ranges[i][0]: neither +1 overflows.
        let joins_below = i > 0 && self.ranges[i - 1][1] + 1 == x;
        let joins_above = i < self.ranges.len() && x + 1 == self.ranges[i][0];
        match (joins_below, joins_above) {
            (true, true) => {
                self.ranges[i - 1][1] = self.ranges[i][1];
                self.ranges.remove(i);
            }
            (true, false) => self.ranges[i - 1][1] = x,
            (false, true) => self.ranges[i][0] = x,
            (false, false) => self.ranges.insert(i, [x, x]),
        }
        self.len = self.len.saturating_add(1);
        true
    }

    pub fn contains(&self, x: u64) -> bool {
        let i = self.ranges.partition_point(|r| r[0] <= x);
        i > 0 && self.ranges[i - 1][1] >= x
    }

    /// Number of values in the set (saturating at `u64::MAX`).
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The inclusive `[first, last]` ranges, ascending.
    pub fn ranges(&self) -> &[[u64; 2]] {
        &self.ranges
    }

    pub fn first(&self) -> Option<u64> {
        self.ranges.first().map(|r| r[0])
    }

    pub fn last(&self) -> Option<u64> {
        self.ranges.last().map(|r| r[1])
    }

    /// `self ∪ other`.
    pub fn union(&self, other: &IntervalSet) -> IntervalSet {
        let mut out = IntervalSet::new();
        let (mut a, mut b) = (
            self.ranges.iter().peekable(),
            other.ranges.iter().peekable(),
        );
        loop {
            let next = match (a.peek(), b.peek()) {
                (Some(x), Some(y)) if x[0] <= y[0] => a.next(),
                (Some(_), Some(_)) => b.next(),
                (Some(_), None) => a.next(),
                (None, Some(_)) => b.next(),
                (None, None) => break,
            };
            if let Some(&r) = next {
                out.push_sorted(r);
            }
        }
        out
    }

    /// `self ∩ other`.
    pub fn intersection(&self, other: &IntervalSet) -> IntervalSet {
        let mut out = IntervalSet::new();
        let (mut i, mut j) = (0, 0);
        while i < self.ranges.len() && j < other.ranges.len() {
            let (a, b) = (self.ranges[i], other.ranges[j]);
            let first = a[0].max(b[0]);
            let last = a[1].min(b[1]);
            if first <= last {
                out.push_sorted([first, last]);
            }
            if a[1] < b[1] {
                i += 1;
            } else {
                j += 1;
            }
        }
        out
    }

    /// `self ∖ other`.
    pub fn difference(&self, other: &IntervalSet) -> IntervalSet {
        let mut out = IntervalSet::new();
        let mut j = 0;
        for &[first, last] in &self.ranges {
            let mut from = first;
            // Skip the ranges of `other` wholly below this range.
            while j < other.ranges.len() && other.ranges[j][1] < from {
                j += 1;
            }
            let mut k = j;
            let mut exhausted = false;
            while k < other.ranges.len() && other.ranges[k][0] <= last {
                let [o_first, o_last] = other.ranges[k];
                if o_first > from {
                    out.push_sorted([from, o_first - 1]);
                }
                if o_last >= last {
                    exhausted = true;
                    break;
                }
                from = o_last + 1;
                k += 1;
            }
            if !exhausted {
                out.push_sorted([from, last]);
            }
        }
        out
    }

    /// The values in `[lo, hi]` that are not in the set.
    pub fn complement_within(&self, lo: u64, hi: u64) -> IntervalSet {
        if lo > hi {
            return IntervalSet::new();
        }
        IntervalSet::from_ranges([[lo, hi]]).difference(self)
    }

    /// How many values the holes between the smallest and the largest value
    /// hold, without building them.
    pub fn gap_count(&self) -> u64 {
        match (self.first(), self.last()) {
            (Some(lo), Some(hi)) => (hi - lo).saturating_add(1).saturating_sub(self.len),
            _ => 0,
        }
    }

    /// The holes between the smallest and the largest value.
    pub fn gaps(&self) -> IntervalSet {
        match (self.first(), self.last()) {
            (Some(lo), Some(hi)) => self.complement_within(lo, hi),
            _ => IntervalSet::new(),
        }
    }
}

impl Serialize for IntervalSet {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.ranges.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for IntervalSet {
    /// Accepts any list of `[first, last]` pairs and normalises it.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<IntervalSet, D::Error> {
        let ranges = Vec::<[u64; 2]>::deserialize(deserializer)?;
        if let Some(bad) = ranges.iter().find(|r| r[0] > r[1]) {
            return Err(serde::de::Error::custom(format!(
                "range [{}, {}] has first > last",
                bad[0], bad[1]
            )));
        }
        Ok(IntervalSet::from_ranges(ranges))
    }
}

#[cfg(test)]
#[allow(clippy::type_complexity)] // test tables
mod tests {
    use super::*;

    fn set(ranges: &[[u64; 2]]) -> IntervalSet {
        IntervalSet::from_ranges(ranges.iter().copied())
    }

    #[test]
    fn inserts_merge_in_any_order() {
        // (inserts, expected ranges, values rejected as already present)
        let table: &[(&[u64], &[[u64; 2]], usize)] = &[
            (&[], &[], 0),
            (&[0, 1, 2], &[[0, 2]], 0),
            (&[2, 1, 0], &[[0, 2]], 0),
            (&[0, 2], &[[0, 0], [2, 2]], 0),
            (&[0, 2, 1], &[[0, 2]], 0),
            (&[5, 9, 7, 6, 8], &[[5, 9]], 0),
            (&[10, 3, 11, 4, 20], &[[3, 4], [10, 11], [20, 20]], 0),
            (&[1, 1, 2, 1], &[[1, 2]], 2),
            (&[0, 10, 5, 5, 10, 0], &[[0, 0], [5, 5], [10, 10]], 3),
            (
                &[u64::MAX, u64::MAX - 1, 0],
                &[[0, 0], [u64::MAX - 1, u64::MAX]],
                0,
            ),
        ];
        for (inserts, expected, rejected) in table {
            let mut s = IntervalSet::new();
            let refused = inserts.iter().filter(|&&x| !s.insert(x)).count();
            assert_eq!(s.ranges(), *expected, "inserts {inserts:?}");
            assert_eq!(refused, *rejected, "inserts {inserts:?}");
            assert_eq!(
                s.len(),
                (inserts.len() - rejected) as u64,
                "inserts {inserts:?}"
            );
            assert!(inserts.iter().all(|&x| s.contains(x)));
        }
    }

    #[test]
    fn contains_only_members() {
        let s = set(&[[3, 5], [9, 9]]);
        let table = [
            (2, false),
            (3, true),
            (5, true),
            (6, false),
            (8, false),
            (9, true),
            (10, false),
        ];
        for (x, expected) in table {
            assert_eq!(s.contains(x), expected, "{x}");
        }
    }

    #[test]
    fn from_ranges_normalises() {
        let table: &[(&[[u64; 2]], &[[u64; 2]], u64)] = &[
            (&[[5, 9], [0, 2]], &[[0, 2], [5, 9]], 8),
            (&[[0, 2], [3, 4]], &[[0, 4]], 5),
            (&[[0, 5], [2, 3]], &[[0, 5]], 6),
            (&[[0, 5], [4, 8], [8, 8]], &[[0, 8]], 9),
            (&[[3, 1]], &[], 0),
        ];
        for (input, expected, len) in table {
            let s = set(input);
            assert_eq!(s.ranges(), *expected, "{input:?}");
            assert_eq!(s.len(), *len, "{input:?}");
        }
    }

    #[test]
    fn set_algebra() {
        // (a, b, a ∪ b, a ∩ b, a ∖ b)
        type R = &'static [[u64; 2]];
        let table: &[(R, R, R, R, R)] = &[
            (&[], &[], &[], &[], &[]),
            (&[[0, 9]], &[], &[[0, 9]], &[], &[[0, 9]]),
            (&[], &[[0, 9]], &[[0, 9]], &[], &[]),
            (
                &[[0, 9]],
                &[[3, 4]],
                &[[0, 9]],
                &[[3, 4]],
                &[[0, 2], [5, 9]],
            ),
            (&[[0, 4]], &[[5, 9]], &[[0, 9]], &[], &[[0, 4]]),
            (
                &[[0, 4], [10, 14]],
                &[[3, 11]],
                &[[0, 14]],
                &[[3, 4], [10, 11]],
                &[[0, 2], [12, 14]],
            ),
            (&[[0, 9]], &[[0, 9]], &[[0, 9]], &[[0, 9]], &[]),
            (
                &[[2, 3], [6, 7]],
                &[[0, 2], [7, 100]],
                &[[0, 3], [6, 100]],
                &[[2, 2], [7, 7]],
                &[[3, 3], [6, 6]],
            ),
            (
                &[[0, 100]],
                &[[0, 0], [50, 50], [100, 100]],
                &[[0, 100]],
                &[[0, 0], [50, 50], [100, 100]],
                &[[1, 49], [51, 99]],
            ),
        ];
        for (a, b, union, inter, diff) in table {
            let (sa, sb) = (set(a), set(b));
            assert_eq!(sa.union(&sb).ranges(), *union, "{a:?} ∪ {b:?}");
            assert_eq!(sa.intersection(&sb).ranges(), *inter, "{a:?} ∩ {b:?}");
            let d = sa.difference(&sb);
            assert_eq!(d.ranges(), *diff, "{a:?} ∖ {b:?}");
            assert_eq!(
                d.len() + sa.intersection(&sb).len(),
                sa.len(),
                "{a:?}, {b:?}"
            );
        }
    }

    #[test]
    fn gaps_are_the_holes_between_min_and_max() {
        let table: &[(&[[u64; 2]], &[[u64; 2]])] = &[
            (&[], &[]),
            (&[[0, 9]], &[]),
            (&[[0, 2], [5, 9]], &[[3, 4]]),
            (&[[1, 1], [3, 3], [5, 5]], &[[2, 2], [4, 4]]),
        ];
        for (input, expected) in table {
            let s = set(input);
            assert_eq!(s.gaps().ranges(), *expected, "{input:?}");
            assert_eq!(s.gap_count(), s.gaps().len(), "{input:?}");
        }
        assert_eq!(
            set(&[[2, 3]]).complement_within(0, 5).ranges(),
            &[[0, 1], [4, 5]]
        );
        assert!(set(&[]).complement_within(5, 4).is_empty());
    }

    #[test]
    fn serde_round_trip_and_validation() {
        let s = set(&[[0, 2], [7, 7]]);
        let text = serde_json::to_string(&s).expect("serialises");
        assert_eq!(text, "[[0,2],[7,7]]");
        let back: IntervalSet = serde_json::from_str("[[7,7],[0,1],[2,2]]").expect("parses");
        assert_eq!(back, s);
        assert!(serde_json::from_str::<IntervalSet>("[[3,1]]").is_err());
    }
}
