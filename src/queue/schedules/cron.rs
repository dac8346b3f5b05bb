//! Cron patterns in a time zone and their fire times, with `croner` for
//! the pattern and `jiff` for the time zone's rules.

/// A cron pattern in a time zone.
#[derive(Debug, Clone)]
pub struct Cron {
    pattern: croner::Cron,
    zone: jiff::tz::TimeZone,
}

/// Why a pattern or a time zone was refused.
#[derive(Debug, thiserror::Error)]
pub enum CronError {
    #[error("{0}")]
    Pattern(String),
    #[error("not an IANA time zone name: {0}")]
    TimeZone(String),
}

impl Cron {
    /// Five fields (minute, hour, day of month, month, day of week) or six
    /// with seconds first, or a nickname (`@daily`); `timezone` an IANA
    /// name.
    pub fn parse(pattern: &str, timezone: &str) -> std::result::Result<Self, CronError> {
        let pattern = croner::parser::CronParser::builder()
            .seconds(croner::parser::Seconds::Optional)
            .year(croner::parser::Year::Disallowed)
            .build()
            .parse(pattern)
            .map_err(|error| CronError::Pattern(error.to_string()))?;
        let zone = jiff::tz::TimeZone::get(timezone)
            .map_err(|_| CronError::TimeZone(timezone.to_owned()))?;
        // A pattern no date matches (30 February): refused, rather than a
        // schedule that never fires.
        let cron = Self { pattern, zone };
        let now = jiff::Timestamp::now().as_millisecond();
        if cron.next_after(now).is_none() {
            return Err(CronError::Pattern("no date matches it".into()));
        }
        Ok(cron)
    }

    fn zoned(&self, ms: i64) -> Option<jiff::Zoned> {
        // Whole seconds: fire times are.
        let ts = jiff::Timestamp::from_second(ms.div_euclid(1000)).ok()?;
        Some(ts.to_zoned(self.zone.clone()))
    }

    /// The first fire time after `ms` (Unix ms), if there is one.
    pub fn next_after(&self, ms: i64) -> Option<i64> {
        let next = self
            .pattern
            .find_next_occurrence(&self.zoned(ms)?, false)
            .ok()?;
        Some(next.timestamp().as_millisecond())
    }

    /// The latest fire time at or before `ms`, if there is one.
    pub fn latest_until(&self, ms: i64) -> Option<i64> {
        let latest = self
            .pattern
            .find_previous_occurrence(&self.zoned(ms)?, true)
            .ok()?;
        Some(latest.timestamp().as_millisecond())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Unix ms of an RFC 3339 instant.
    fn at(instant: &str) -> i64 {
        instant
            .parse::<jiff::Timestamp>()
            .expect("an instant")
            .as_millisecond()
    }

    fn instant(ms: i64) -> String {
        jiff::Timestamp::from_millisecond(ms)
            .expect("in range")
            .to_string()
    }

    fn next(cron: &str, zone: &str, after: &str) -> String {
        let cron = Cron::parse(cron, zone).expect("valid");
        instant(cron.next_after(at(after)).expect("a next fire time"))
    }

    #[test]
    fn next_fire_times_follow_the_time_zone() {
        // 09:00 in Berlin is 08:00 UTC in winter, 07:00 in summer.
        assert_eq!(
            next("0 9 * * *", "Europe/Berlin", "2026-01-10T12:00:00Z"),
            "2026-01-11T08:00:00Z"
        );
        assert_eq!(
            next("0 9 * * *", "Europe/Berlin", "2026-07-10T12:00:00Z"),
            "2026-07-11T07:00:00Z"
        );
        assert_eq!(
            next("30 18 * * FRI", "America/New_York", "2026-11-30T00:00:00Z"),
            "2026-12-04T23:30:00Z"
        );
        assert_eq!(
            next("@daily", "Asia/Kolkata", "2026-11-30T00:00:00Z"),
            "2026-11-30T18:30:00Z"
        );
        assert_eq!(
            next("*/15 * * * *", "UTC", "2026-11-30T10:07:59.999Z"),
            "2026-11-30T10:15:00Z"
        );
    }

    #[test]
    fn the_next_fire_time_is_strictly_after() {
        assert_eq!(
            next("0 * * * *", "UTC", "2026-11-30T10:00:00Z"),
            "2026-11-30T11:00:00Z"
        );
        // Seconds, when a sixth field gives them.
        assert_eq!(
            next("*/10 * * * * *", "UTC", "2026-11-30T10:00:00.500Z"),
            "2026-11-30T10:00:10Z"
        );
    }

    #[test]
    fn a_time_skipped_by_spring_forward_fires_just_after_the_gap() {
        // Berlin, 29 March 2026: 02:00 jumps to 03:00 (01:00 UTC).
        assert_eq!(
            next("30 2 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z"),
            "2026-03-29T01:00:00Z"
        );
        // And the day after, at 02:30 summer time again.
        assert_eq!(
            next("30 2 * * *", "Europe/Berlin", "2026-03-29T12:00:00Z"),
            "2026-03-30T00:30:00Z"
        );
        // An interval pattern skips the times that do not exist.
        assert_eq!(
            next("*/30 * * * *", "Europe/Berlin", "2026-03-29T00:45:00Z"),
            "2026-03-29T01:00:00Z"
        );
    }

    #[test]
    fn a_time_repeated_by_fall_back_fires_once_for_a_fixed_time() {
        // New York, 1 November 2026: 02:00 goes back to 01:00, so 01:30
        // happens at 05:30 and at 06:30 UTC.
        let cron = Cron::parse("30 1 * * *", "America/New_York").expect("valid");
        let first = cron
            .next_after(at("2026-11-01T00:00:00Z"))
            .expect("a fire time");
        assert_eq!(instant(first), "2026-11-01T05:30:00Z");
        assert_eq!(
            instant(cron.next_after(first).expect("a fire time")),
            "2026-11-02T06:30:00Z"
        );
        // An interval pattern runs in both halves of the repeated hour.
        let hourly = Cron::parse("0 * * * *", "America/New_York").expect("valid");
        let fires: Vec<String> =
            std::iter::successors(Some(at("2026-11-01T04:30:00Z")), |t| hourly.next_after(*t))
                .skip(1)
                .take(3)
                .map(instant)
                .collect();
        assert_eq!(
            fires,
            [
                "2026-11-01T05:00:00Z",
                "2026-11-01T06:00:00Z",
                "2026-11-01T07:00:00Z"
            ]
        );
    }

    #[test]
    fn the_latest_fire_time_covers_every_missed_one() {
        let cron = Cron::parse("*/5 * * * *", "UTC").expect("valid");
        assert_eq!(
            instant(
                cron.latest_until(at("2026-11-30T10:23:10Z"))
                    .expect("a fire time")
            ),
            "2026-11-30T10:20:00Z"
        );
        assert_eq!(
            instant(
                cron.latest_until(at("2026-11-30T10:20:00Z"))
                    .expect("a fire time")
            ),
            "2026-11-30T10:20:00Z"
        );
    }

    #[test]
    fn bad_patterns_and_zones_are_refused() {
        for pattern in [
            "",
            "* * * *",
            "61 * * * *",
            "* * * * * * 2026",
            "@often",
            "0 0 30 2 *",
        ] {
            assert!(
                matches!(Cron::parse(pattern, "UTC"), Err(CronError::Pattern(_))),
                "{pattern:?}"
            );
        }
        assert!(matches!(
            Cron::parse("* * * * *", "Mars/Olympus"),
            Err(CronError::TimeZone(_))
        ));
        assert!(Cron::parse("0 0 * JAN MON", "Europe/Berlin").is_ok());
    }
}
