//! Exponential backoff with equal jitter, an attempt cap and a total-wait ceiling.

use std::time::Duration;

/// When to send again, and when to stop: the schedule every retry layer of this crate shares.
///
/// * Retry `n` (the wait before attempt `n + 1`) waits a uniformly random time in
///   `[c/2, c]`, where `c = min(base · 2^(n−1), max_delay)` — "equal jitter": half of the
///   delay is fixed, half is random, so a crowd of clients spreads out without any of them
///   retrying at once.
/// * At most `max_attempts` attempts count against the allowance of the kind of failure the
///   layer re-sends after (the first one included; see
///   [`RetryLayer::max_attempts`](crate::retry::RetryLayer::max_attempts)).
/// * The waits of one call for that kind never add up to more than `max_total_wait`. A wait
///   that would pass it is not started: the last answer is delivered at once instead. A server-given
///   `Retry-After` takes the place of the computed delay (it is not capped by `max_delay`),
///   but never of this ceiling.
/// * The loop rounds every wait up to a whole millisecond, the resolution of tokio's timer, so
///   the wait recorded is the wait taken.
///
/// ```
/// use std::time::Duration;
/// use agentcore_tower::retry::Backoff;
///
/// let backoff = Backoff::new(Duration::from_millis(100))
///     .with_max_delay(Duration::from_secs(2))
///     .with_max_attempts(6)
///     .with_max_total_wait(Duration::from_secs(15));
/// let wait = backoff.delay(3); // the wait before the 4th attempt
/// assert!(wait >= Duration::from_millis(200) && wait <= Duration::from_millis(400));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    base: Duration,
    max_delay: Duration,
    max_attempts: u32,
    max_total_wait: Duration,
}

impl Backoff {
    /// A schedule starting at `base`, with at most 3 attempts, waits capped at 5 s each and
    /// 10 s in all. Every layer sets its own defaults; these are only a starting point.
    pub const fn new(base: Duration) -> Self {
        Self {
            base,
            max_delay: Duration::from_secs(5),
            max_attempts: 3,
            max_total_wait: Duration::from_secs(10),
        }
    }

    /// The delay the first retry is computed from (before jitter).
    pub const fn base(&self) -> Duration {
        self.base
    }

    /// The cap on one computed wait (before jitter).
    pub const fn max_delay(&self) -> Duration {
        self.max_delay
    }

    /// How many attempts of its kind a call makes at most, the first one included.
    pub const fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The ceiling on the time one call waits for its kind, in all.
    pub const fn max_total_wait(&self) -> Duration {
        self.max_total_wait
    }

    /// Sets the delay the first retry is computed from.
    pub const fn with_base(mut self, base: Duration) -> Self {
        self.base = base;
        self
    }

    /// Sets the cap on one computed wait.
    pub const fn with_max_delay(mut self, max_delay: Duration) -> Self {
        self.max_delay = max_delay;
        self
    }

    /// Sets how many attempts of its kind a call makes at most, the first one included. `0` is taken as `1`
    /// (send once, never again): a call always sends its request.
    pub const fn with_max_attempts(mut self, max_attempts: u32) -> Self {
        self.max_attempts = if max_attempts == 0 { 1 } else { max_attempts };
        self
    }

    /// Sets the ceiling on the time one call waits for its kind, in all.
    pub const fn with_max_total_wait(mut self, max_total_wait: Duration) -> Self {
        self.max_total_wait = max_total_wait;
        self
    }

    /// The ceiling of retry `retry` (1 for the wait before the second attempt):
    /// `min(base · 2^(retry−1), max_delay)`, without jitter. Never overflows.
    pub fn ceiling(&self, retry: u32) -> Duration {
        let exponent = retry.saturating_sub(1).min(63);
        let factor = 1u64 << exponent;
        // `checked_mul` takes a u32; multiply in nanoseconds to keep the whole range.
        let nanos = self.base.as_nanos().saturating_mul(u128::from(factor));
        let grown = u64::try_from(nanos).map_or(Duration::MAX, Duration::from_nanos);
        grown.min(self.max_delay)
    }

    /// A jittered wait for retry `retry` (1 for the wait before the second attempt), uniformly
    /// drawn from `[c/2, c]` where `c` is [`Backoff::ceiling`].
    pub fn delay(&self, retry: u32) -> Duration {
        self.delay_with(retry, fastrand::f64())
    }

    /// The wait for `retry` at the point `unit` (in `[0, 1]`) of the jitter range: `c/2 + unit·c/2`.
    pub(crate) fn delay_with(&self, retry: u32, unit: f64) -> Duration {
        let ceiling = self.ceiling(retry);
        let half = ceiling / 2;
        let spread = ceiling - half;
        half + spread.mul_f64(unit.clamp(0.0, 1.0))
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Self::new(Duration::from_millis(100))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceiling_doubles_then_caps() {
        let b = Backoff::new(Duration::from_millis(100)).with_max_delay(Duration::from_secs(2));
        let got: Vec<_> = (1..=7).map(|n| b.ceiling(n).as_millis()).collect();
        assert_eq!(got, vec![100, 200, 400, 800, 1600, 2000, 2000]);
    }

    #[test]
    fn ceiling_never_overflows() {
        let b = Backoff::new(Duration::from_secs(u64::MAX / 2)).with_max_delay(Duration::MAX);
        assert_eq!(b.ceiling(u32::MAX), Duration::MAX);
        let b = Backoff::new(Duration::from_millis(1)).with_max_delay(Duration::from_secs(60));
        assert_eq!(b.ceiling(u32::MAX), Duration::from_secs(60));
    }

    #[test]
    fn equal_jitter_bounds_are_exact() {
        let b = Backoff::new(Duration::from_millis(100)).with_max_delay(Duration::from_secs(2));
        assert_eq!(b.delay_with(1, 0.0), Duration::from_millis(50));
        assert_eq!(b.delay_with(1, 1.0), Duration::from_millis(100));
        assert_eq!(b.delay_with(3, 0.5), Duration::from_millis(300));
        for n in 1..10 {
            for _ in 0..200 {
                let d = b.delay(n);
                let c = b.ceiling(n);
                assert!(
                    d >= c / 2 && d <= c,
                    "retry {n}: {d:?} outside [{:?}, {c:?}]",
                    c / 2
                );
            }
        }
    }

    #[test]
    fn zero_attempts_means_one() {
        assert_eq!(Backoff::default().with_max_attempts(0).max_attempts(), 1);
    }
}
