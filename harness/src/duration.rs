//! How the tools' duration flags and environment variables are written
//! (`--duration`, `--until-idle`, `--commit-interval`, ...): plain seconds
//! ("2", "0.5") or humantime ("500ms", "1m"), the same in chronik-bench and
//! chronik-consumer.
//! Must not: know any flag.

use std::time::Duration;

/// `text` as a duration: seconds (finite, not negative) or humantime; the
/// error names the text and shows the forms accepted.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if let Ok(secs) = text.parse::<f64>() {
        return Duration::try_from_secs_f64(secs).map_err(|e| format!("{text}: {e}"));
    }
    humantime::parse_duration(text)
        .map_err(|e| format!("{text}: {e} (examples: 20s, 500ms, 2m, 0.5)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_accept_seconds_and_humantime() {
        let table = [
            ("2", Some(2_000)),
            ("0.5", Some(500)),
            (" 0.5 ", Some(500)),
            ("500ms", Some(500)),
            ("1m", Some(60_000)),
            ("x", None),
            ("-1", None),
            ("NaN", None),
        ];
        for (text, ms) in table {
            assert_eq!(
                parse_duration(text).ok().map(|d| d.as_millis() as u64),
                ms,
                "{text}"
            );
        }
        assert!(parse_duration("soon").is_err_and(|e| e.contains("examples")));
    }
}
