//! The edges (the contract's "The edges: faults, limits, hostile
//! clients"): Redis restarts and a full Redis, retry-safe claims,
//! browsers from other sites, queues that come and go, bounded schedules,
//! slow and idle connections, paging through ties, a failing queue's
//! sweep, and what is warned of at start.

mod browsers;
mod claims;
mod connections;
mod full;
mod paging;
mod queues;
mod restart;
mod schedules;
mod sweeper;
mod warnings;

use reqwest::StatusCode;

use crate::support::Answer;

/// Asserts that `answer` is the problem `status` with `code`, and with
/// `effect` when given; answers its body.
fn assert_problem(answer: &Answer, status: StatusCode, code: &str, effect: Option<&str>) {
    assert_eq!(answer.status, status, "{answer:?}");
    assert_eq!(answer.problem_code(), code, "{answer:?}");
    if let Some(effect) = effect {
        assert_eq!(answer.body["effect"], effect, "{answer:?}");
    }
}
