//! Parsing of the Prometheus / OpenMetrics text exposition served at /metrics.
//!
//! Only what the tests need: samples as (name, labels, value), lookups that
//! sum every sample of a name whose labels include the given pairs, and a
//! name finder so a test can adapt to the exact metric name the broker chose.

use std::collections::BTreeSet;

#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

impl Sample {
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn has_labels(&self, wanted: &[(&str, &str)]) -> bool {
        wanted.iter().all(|(k, v)| self.label(k) == Some(*v))
    }
}

/// Parses every sample line; comment lines and unparsable lines are skipped.
pub fn parse(text: &str) -> Vec<Sample> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<Sample> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let name_end = line.find(|c: char| c == '{' || c.is_whitespace())?;
    let name = line[..name_end].to_string();
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if rest.starts_with('{') {
        let (parsed, after) = parse_labels(&rest[1..])?;
        labels = parsed;
        rest = after;
    }
    let value_text = rest.split_whitespace().next()?;
    let value = match value_text {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        other => other.parse().ok()?,
    };
    Some(Sample {
        name,
        labels,
        value,
    })
}

/// Parses `a="x",b="y"}` and returns the labels plus the text after `}`.
fn parse_labels(mut s: &str) -> Option<(Vec<(String, String)>, &str)> {
    let mut labels = Vec::new();
    loop {
        s = s.trim_start_matches([',', ' ']);
        if let Some(after) = s.strip_prefix('}') {
            return Some((labels, after));
        }
        let eq = s.find('=')?;
        let key = s[..eq].trim().to_string();
        s = s[eq + 1..].strip_prefix('"')?;
        let mut value = String::new();
        let mut chars = s.char_indices();
        let end = loop {
            let (i, c) = chars.next()?;
            match c {
                '\\' => {
                    let (_, escaped) = chars.next()?;
                    value.push(match escaped {
                        'n' => '\n',
                        other => other,
                    });
                }
                '"' => break i,
                other => value.push(other),
            }
        };
        labels.push((key, value));
        s = &s[end + 1..];
    }
}

/// Sum of all samples named `name` whose labels include `labels`;
/// `None` when no sample matches.
pub fn sum(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let mut found = false;
    let mut total = 0.0;
    for s in samples
        .iter()
        .filter(|s| s.name == name && s.has_labels(labels))
    {
        found = true;
        total += s.value;
    }
    found.then_some(total)
}

/// Distinct sample names, for failure messages.
pub fn names(samples: &[Sample]) -> BTreeSet<String> {
    samples.iter().map(|s| s.name.clone()).collect()
}

/// First sample name (sorted) containing every one of `fragments`.
pub fn find_name(samples: &[Sample], fragments: &[&str]) -> Option<String> {
    names(samples)
        .into_iter()
        .find(|n| fragments.iter().all(|f| n.contains(f)))
}
