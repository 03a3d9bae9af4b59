//! Table tests of the `uniform` and `range` assignors.

use std::collections::{BTreeMap, BTreeSet};

use crate::assignor::{Assignment, Assignor, TopicId};

fn tid(name: &str) -> TopicId {
    let mut id = [0u8; 16];
    for (i, b) in name.bytes().take(16).enumerate() {
        id[i] = b;
    }
    id
}

fn subs(members: &[(&str, &[&str])]) -> BTreeMap<String, BTreeSet<TopicId>> {
    members
        .iter()
        .map(|(m, ts)| (m.to_string(), ts.iter().map(|t| tid(t)).collect()))
        .collect()
}

fn parts(topics: &[(&str, i32)]) -> BTreeMap<TopicId, i32> {
    topics.iter().map(|(t, n)| (tid(t), *n)).collect()
}

fn assignment(list: &[(&str, &[i32])]) -> Assignment {
    list.iter()
        .filter(|(_, ps)| !ps.is_empty())
        .map(|(t, ps)| (tid(t), ps.iter().copied().collect()))
        .collect()
}

fn count(a: &Assignment) -> usize {
    a.values().map(BTreeSet::len).sum()
}

type Case<'a> = (
    &'a str,
    Assignor,
    &'a [(&'a str, &'a [&'a str])],
    &'a [(&'a str, i32)],
    &'a [(&'a str, &'a [(&'a str, &'a [i32])])],
);

#[test]
fn assignors_produce_the_expected_targets() {
    let cases: &[Case] = &[
        (
            "range splits each topic in contiguous ranges by member id",
            Assignor::Range,
            &[("a", &["t", "u"]), ("b", &["t", "u"])],
            &[("t", 3), ("u", 2)],
            &[
                ("a", &[("t", &[0, 1]), ("u", &[0])]),
                ("b", &[("t", &[2]), ("u", &[1])]),
            ],
        ),
        (
            "range gives a topic only to its subscribers",
            Assignor::Range,
            &[("a", &["t"]), ("b", &["u"])],
            &[("t", 2), ("u", 2)],
            &[("a", &[("t", &[0, 1])]), ("b", &[("u", &[0, 1])])],
        ),
        (
            "range leaves a member without partitions when there are too few",
            Assignor::Range,
            &[("a", &["t"]), ("b", &["t"])],
            &[("t", 1)],
            &[("a", &[("t", &[0])]), ("b", &[])],
        ),
        (
            "uniform balances one topic",
            Assignor::Uniform,
            &[("a", &["t"]), ("b", &["t"]), ("c", &["t"])],
            &[("t", 6)],
            &[
                ("a", &[("t", &[0, 3])]),
                ("b", &[("t", &[1, 4])]),
                ("c", &[("t", &[2, 5])]),
            ],
        ),
        (
            "uniform ignores topics missing from the metadata",
            Assignor::Uniform,
            &[("a", &["t", "gone"])],
            &[("t", 2)],
            &[("a", &[("t", &[0, 1])])],
        ),
    ];
    for (name, assignor, members, topics, expected) in cases {
        let got = assignor.assign(&subs(members), &parts(topics), &BTreeMap::new());
        let want: BTreeMap<String, Assignment> = expected
            .iter()
            .map(|(m, a)| (m.to_string(), assignment(a)))
            .collect();
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn uniform_is_sticky_and_balanced_when_a_member_joins() {
    let current: BTreeMap<String, Assignment> = [
        ("a".to_string(), assignment(&[("t", &[0, 1, 2, 3])])),
        ("b".to_string(), assignment(&[("t", &[4, 5, 6])])),
    ]
    .into();
    let got = Assignor::Uniform.assign(
        &subs(&[("a", &["t"]), ("b", &["t"]), ("c", &["t"])]),
        &parts(&[("t", 7)]),
        &current,
    );
    let mut counts: Vec<usize> = got.values().map(count).collect();
    counts.sort();
    assert_eq!(counts, vec![2, 2, 3], "{got:?}");
    for (member, before) in &current {
        let kept = before[&tid("t")]
            .intersection(&got[member][&tid("t")])
            .count();
        assert!(kept >= 2, "{member} kept only {kept}: {got:?}");
    }
    let all: BTreeSet<i32> = got
        .values()
        .flat_map(|a| a[&tid("t")].iter().copied())
        .collect();
    assert_eq!(all, (0..7).collect(), "every partition exactly once");
}

#[test]
fn uniform_respects_heterogeneous_subscriptions() {
    let got = Assignor::Uniform.assign(
        &subs(&[("a", &["t", "u"]), ("b", &["u"])]),
        &parts(&[("t", 4), ("u", 4)]),
        &BTreeMap::new(),
    );
    assert!(!got["b"].contains_key(&tid("t")), "{got:?}");
    assert_eq!(count(&got["a"]) + count(&got["b"]), 8);
    assert_eq!(count(&got["a"]), 4, "{got:?}");
}

#[test]
fn assignor_names() {
    assert_eq!(Assignor::from_name("uniform"), Some(Assignor::Uniform));
    assert_eq!(Assignor::from_name("range"), Some(Assignor::Range));
    assert_eq!(Assignor::from_name("sticky"), None);
    assert_eq!(Assignor::DEFAULT.name(), "uniform");
}

#[test]
fn uniform_at_the_member_bound_stays_balanced() {
    let members: Vec<String> = (0..1000).map(|i| format!("m{i:04}")).collect();
    let topics: Vec<String> = (0..100).map(|i| format!("t{i:03}")).collect();
    let subscriptions: BTreeMap<String, BTreeSet<TopicId>> = members
        .iter()
        .map(|m| (m.clone(), topics.iter().map(|t| tid(t)).collect()))
        .collect();
    let partitions: BTreeMap<TopicId, i32> = topics.iter().map(|t| (tid(t), 100)).collect();
    let started = std::time::Instant::now();
    let first = Assignor::Uniform.assign(&subscriptions, &partitions, &BTreeMap::new());
    let mut grown = subscriptions.clone();
    grown.insert("new".into(), topics.iter().map(|t| tid(t)).collect());
    let second = Assignor::Uniform.assign(&grown, &partitions, &first);
    eprintln!(
        "two assignments of 10,000 partitions to 1,000 members: {:?}",
        started.elapsed()
    );
    let counts: BTreeSet<usize> = second.values().map(count).collect();
    assert_eq!(counts, [9, 10].into(), "balanced within one");
    let total: usize = second.values().map(count).sum();
    assert_eq!(total, 10_000);
}
