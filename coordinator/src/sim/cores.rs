//! The coordinator's CPU in virtual time.
//!
//! Every service call the simulation makes runs for real on this thread; its thread CPU time
//! (or a fixed charge, for deterministic tests) occupies a **virtual core** for that long, and
//! the call's effect happens when the core is done with it. Two kinds of cores, as the server
//! runs them:
//! * the **growth core** (one: the growth runner is one thread): a run applies every result
//!   that landed before it started, and the searches it plans can be leased only after it;
//!   results that land while it runs wait for the next run;
//! * the **RPC cores** (`rpc_cores` of them: the server's handler threads): submit, lease and
//!   heartbeat calls, each queued for the first free core.
//!
//! Approximation: a call runs (for real) when the simulation reaches the moment it starts, so a
//! lease made while a growth run is still busy in virtual time already sees what that run
//! planned (optimistic by at most one run's CPU). Utilisation near 1 means the coordinator, not
//! the farm, sets the pace.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

/// How service calls are charged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Charge {
    /// The calling thread's CPU time, measured around each call.
    Measured,
    /// Fixed costs (deterministic virtual time, for tests).
    Fixed {
        /// Each RPC call (submit, lease, heartbeat).
        per_call: Duration,
        /// Each growth run, plus `per_result` for each result it applies.
        per_run: Duration,
        /// Each result a growth run applies.
        per_result: Duration,
    },
}

/// The simulated coordinator's cores and how calls are charged to them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoordinatorModel {
    /// Cores serving RPCs (the growth runner has a core of its own).
    pub rpc_cores: usize,
    /// How calls are charged.
    pub charge: Charge,
}

impl Default for CoordinatorModel {
    /// Four RPC cores, measured CPU.
    fn default() -> CoordinatorModel {
        CoordinatorModel {
            rpc_cores: 4,
            charge: Charge::Measured,
        }
    }
}

impl CoordinatorModel {
    /// No charge at all (calls take no virtual time: the figures of the simulator before it
    /// charged the coordinator).
    pub fn free() -> CoordinatorModel {
        CoordinatorModel {
            rpc_cores: 1,
            charge: Charge::Fixed {
                per_call: Duration::ZERO,
                per_run: Duration::ZERO,
                per_result: Duration::ZERO,
            },
        }
    }

    /// Run `f` as an RPC call and return its result and charge.
    pub(crate) fn rpc<R>(&self, f: impl FnOnce() -> R) -> (R, Duration) {
        match self.charge {
            Charge::Measured => measured(f),
            Charge::Fixed { per_call, .. } => (f(), per_call),
        }
    }

    /// Run `f` as a growth run applying `results` results and return its result and charge.
    pub(crate) fn growth<R>(&self, results: usize, f: impl FnOnce() -> R) -> (R, Duration) {
        match self.charge {
            Charge::Measured => measured(f),
            Charge::Fixed {
                per_run,
                per_result,
                ..
            } => (
                f(),
                per_run + per_result * u32::try_from(results).unwrap_or(u32::MAX),
            ),
        }
    }
}

fn measured<R>(f: impl FnOnce() -> R) -> (R, Duration) {
    let t = cpu_time::ThreadTime::now();
    let r = f();
    (r, t.elapsed())
}

/// A pool of virtual cores: each call takes the first free one.
#[derive(Debug)]
pub(crate) struct Cores {
    /// When each core is free again.
    free_at: BinaryHeap<Reverse<Duration>>,
    /// CPU charged so far.
    pub(crate) busy: Duration,
    /// Calls charged so far.
    pub(crate) calls: u64,
}

impl Cores {
    pub(crate) fn new(n: usize) -> Cores {
        Cores {
            free_at: (0..n.max(1)).map(|_| Reverse(Duration::ZERO)).collect(),
            busy: Duration::ZERO,
            calls: 0,
        }
    }

    /// A call made at `at` that needs `cpu`: when it ends.
    pub(crate) fn run(&mut self, at: Duration, cpu: Duration) -> Duration {
        let Reverse(free) = self.free_at.pop().unwrap_or(Reverse(Duration::ZERO));
        let end = at.max(free) + cpu;
        self.free_at.push(Reverse(end));
        self.busy += cpu;
        self.calls += 1;
        end
    }

    /// When the first core is free (a call made now starts then).
    pub(crate) fn next_free(&self) -> Duration {
        self.free_at.peek().map_or(Duration::ZERO, |Reverse(t)| *t)
    }

    /// The share of `cores × wall` that was busy.
    pub(crate) fn utilisation(&self, wall: Duration) -> f64 {
        let capacity = wall.as_secs_f64() * self.free_at.len() as f64;
        if capacity > 0.0 {
            self.busy.as_secs_f64() / capacity
        } else {
            0.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_queue_for_the_first_free_core() {
        let ms = Duration::from_millis;
        let mut c = Cores::new(2);
        assert_eq!(c.run(ms(0), ms(10)), ms(10));
        assert_eq!(c.run(ms(0), ms(10)), ms(10));
        // Both busy until 10: the third waits.
        assert_eq!(c.run(ms(5), ms(10)), ms(20));
        assert_eq!(c.next_free(), ms(10));
        // A call after both are free starts at once.
        assert_eq!(c.run(ms(30), ms(1)), ms(31));
        assert_eq!(c.busy, ms(31));
        assert!((c.utilisation(ms(31)) - 0.5).abs() < 1e-9);
    }
}
