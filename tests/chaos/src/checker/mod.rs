//! The checker: a history in, the violations of prioq's promises out.
//! Pure: no I/O, no clock; the runner feeds it, the tests plant
//! violations into histories and see it answer them.
//!
//! - `facts`: what the history establishes, whatever the unknown
//!   outcomes did (leases and when they certainly held, acks, enqueues,
//!   final reads, the bound on the clocks' offset).
//! - `rules`: one function per promise, listed in `RULES`.

mod facts;
mod rules;

use std::fmt;

pub use facts::{Facts, Offset};
pub use rules::{RULES, Rule};

use crate::history::Op;

/// A broken promise and the operations that show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The rule's name (set by [`check`]).
    pub rule: &'static str,
    pub message: String,
    /// The operations involved, by their `op` number.
    pub ops: Vec<u64>,
}

impl Violation {
    fn new(message: String, ops: impl IntoIterator<Item = u64>) -> Self {
        Self {
            rule: "",
            message,
            ops: ops.into_iter().collect(),
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} [ops {:?}]", self.rule, self.message, self.ops)
    }
}

/// Every violation in `history`, rule by rule in [`RULES`] order.
pub fn check(history: &[Op]) -> Vec<Violation> {
    let facts = Facts::new(history);
    RULES
        .iter()
        .flat_map(|rule| {
            (rule.check)(&facts).into_iter().map(|mut v| {
                v.rule = rule.name;
                v
            })
        })
        .collect()
}
