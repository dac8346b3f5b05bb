//! One event of a job's history, as the `history` function keeps it
//! ("<ms> <event> <detail>", see `lua/lib/history.lua`).

/// One event of a job's history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// When it happened, by Redis's clock (ms).
    pub at_ms: i64,
    /// `enqueued`, `claimed`, `acked`, `nacked`, `lease_expired`,
    /// `cancelled`, `expired`, `requeued` or `deleted`.
    pub event: String,
    /// The priority it was enqueued with (`enqueued`).
    pub priority: Option<u8>,
    /// The lease's fence and its worker (`claimed`).
    pub fence: Option<u64>,
    pub worker: Option<String>,
    /// The state the lease's end left the job in (`nacked`,
    /// `lease_expired`): pending, scheduled, dead or cancelled.
    pub state: Option<String>,
    /// The error it ended with (`nacked`, `lease_expired`), when any.
    pub error: Option<String>,
}

impl Event {
    /// An event from its stored text; `None` when it does not parse.
    pub fn parse(entry: &str) -> Option<Self> {
        let (at, rest) = entry.split_once(' ')?;
        let (event, detail) = rest.split_once(' ').unwrap_or((rest, ""));
        let text = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        let mut parsed = Self {
            at_ms: at.parse().ok()?,
            event: event.to_owned(),
            priority: None,
            fence: None,
            worker: None,
            state: None,
            error: None,
        };
        let (first, second) = detail.split_once(' ').unwrap_or((detail, ""));
        match event {
            "enqueued" => parsed.priority = first.parse().ok(),
            "claimed" => {
                parsed.fence = first.parse().ok();
                parsed.worker = text(second);
            }
            "nacked" | "lease_expired" => {
                parsed.state = text(first);
                parsed.error = text(second);
            }
            _ => {}
        }
        Some(parsed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_parse_with_their_details() {
        let claimed = Event::parse("1700000000123 claimed 1700000000123456 billing 7").unwrap();
        assert_eq!(claimed.at_ms, 1_700_000_000_123);
        assert_eq!(claimed.fence, Some(1_700_000_000_123_456));
        assert_eq!(claimed.worker.as_deref(), Some("billing 7"));
        let anonymous = Event::parse("5 claimed 9 ").unwrap();
        assert_eq!((anonymous.fence, anonymous.worker), (Some(9), None));
        let nacked = Event::parse("5 nacked scheduled timeout talking to SMTP").unwrap();
        assert_eq!(nacked.state.as_deref(), Some("scheduled"));
        assert_eq!(nacked.error.as_deref(), Some("timeout talking to SMTP"));
        let acked = Event::parse("5 acked").unwrap();
        assert_eq!((acked.event.as_str(), acked.error), ("acked", None));
        assert_eq!(Event::parse("5 enqueued 3").unwrap().priority, Some(3));
        assert_eq!(Event::parse("soon acked"), None);
    }
}
