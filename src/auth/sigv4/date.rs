//! The UTC time a signature is dated by, as SigV4 writes it (`YYYYMMDD'T'HHMMSS'Z'`, the date
//! being its first eight characters), written on the stack: no formatter, no allocation.

use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds in a UTC day (SigV4 dates ignore leap seconds, as `SystemTime` does).
const DAY: u64 = 86_400;

/// A signature's time, `YYYYMMDD'T'HHMMSS'Z'`, its fraction of a second dropped as aws-sigv4
/// drops it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Stamp([u8; 16]);

impl Stamp {
    /// The stamp of `time`, for times from 1970 to the end of year 9999; `None` outside (the
    /// reference signer dates those).
    pub(super) fn of(time: SystemTime) -> Option<Self> {
        let seconds = time.duration_since(UNIX_EPOCH).ok()?.as_secs();
        let (year, month, day) = civil(seconds / DAY);
        if year > 9999 {
            return None;
        }
        let of_day = seconds % DAY;
        let mut stamp = *b"00000000T000000Z";
        digits(&mut stamp[0..4], year);
        digits(&mut stamp[4..6], month);
        digits(&mut stamp[6..8], day);
        digits(&mut stamp[9..11], of_day / 3600);
        digits(&mut stamp[11..13], of_day / 60 % 60);
        digits(&mut stamp[13..15], of_day % 60);
        Some(Stamp(stamp))
    }

    /// `YYYYMMDD'T'HHMMSS'Z'`: the `x-amz-date` header's value.
    pub(super) fn date_time(&self) -> &[u8; 16] {
        &self.0
    }

    /// `YYYYMMDD`: the date of the credential scope and of the signing key.
    pub(super) fn date(&self) -> [u8; 8] {
        let mut date = [0; 8];
        date.copy_from_slice(&self.0[..8]);
        date
    }
}

/// Writes `value`'s last `out.len()` decimal digits into `out`, zero-padded.
fn digits(out: &mut [u8], mut value: u64) {
    for at in out.iter_mut().rev() {
        *at = b'0' + (value % 10) as u8;
        value /= 10;
    }
}

/// The proleptic Gregorian (year, month, day) of `days` since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`, for days on or after the epoch).
fn civil(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(seconds: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(seconds)
    }

    fn text(stamp: Stamp) -> String {
        String::from_utf8(stamp.date_time().to_vec()).unwrap()
    }

    #[test]
    fn known_instants() {
        let cases = [
            (0, "19700101T000000Z"),
            (951_782_400, "20000229T000000Z"),
            (1_735_689_599, "20241231T235959Z"),
            (1_735_689_600, "20250101T000000Z"),
            (253_402_300_799, "99991231T235959Z"),
        ];
        for (seconds, expected) in cases {
            assert_eq!(text(Stamp::of(at(seconds)).unwrap()), expected, "{seconds}");
        }
        let stamp = Stamp::of(at(1_735_689_599) + Duration::from_millis(999)).unwrap();
        assert_eq!(text(stamp), "20241231T235959Z", "the fraction is dropped");
        assert_eq!(&stamp.date(), b"20241231");
    }

    #[test]
    fn outside_1970_to_9999_is_left_to_the_reference() {
        assert_eq!(Stamp::of(at(253_402_300_800)), None);
        assert_eq!(Stamp::of(UNIX_EPOCH - Duration::from_secs(1)), None);
    }

    /// Every day from 1970 to 2200 against a calendar counted day by day.
    #[test]
    fn every_day_agrees_with_a_counted_calendar() {
        let leap =
            |y: u64| (y.is_multiple_of(4) && !y.is_multiple_of(100)) || y.is_multiple_of(400);
        let (mut year, mut month, mut day) = (1970, 1, 1);
        for days in 0..84_000 {
            assert_eq!(civil(days), (year, month, day), "day {days}");
            let length = match month {
                2 if leap(year) => 29,
                2 => 28,
                4 | 6 | 9 | 11 => 30,
                _ => 31,
            };
            day += 1;
            if day > length {
                (day, month) = (1, month + 1);
            }
            if month > 12 {
                (month, year) = (1, year + 1);
            }
        }
    }
}
