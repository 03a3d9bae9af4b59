//! Output formats of a run: the seed's box table and periodic line
//! (`table`), the CSV row (`csv`) and the OpenMessaging-Benchmark-style JSON
//! with its `meta` block (`omb`).
//!
//! Must not: measure anything; every figure comes from `RunResult`.

pub mod csv;
pub mod omb;
pub mod table;

/// `1234567` → `"1,234,567"`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Bytes → the seed's "MB" (MiB).
pub fn mib(bytes: f64) -> f64 {
    bytes / (1024.0 * 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(6_222_848), "6,222,848");
    }
}
