//! Time in UTC minutes: when reserved capacity starts and ends, the one-time schedules derived
//! from it, and their spelling in RFC 3339 and EventBridge cron. Civil dates by H. Hinnant's
//! algorithms; no clock is ever read.

/// The years an end time may fall in: Capacity Blocks and training plans came in 2023 and
/// 2024, so an earlier year is a mistake (or a past end), and EventBridge's cron years end in
/// 2199.
pub const END_YEARS: (i64, i64) = (2024, 2199);

/// Days from 1970-01-01 to the proleptic Gregorian date `y-m-d` (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date `(y, m, d)` of day `z` counted from 1970-01-01.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Minutes since 1970-01-01T00:00Z of an RFC 3339 time in UTC (`2027-01-31T11:30:00Z`,
/// fractional seconds and `+00:00` allowed; seconds are dropped, so the warning is never
/// late), in [`END_YEARS`]. The error completes "end time `...` ".
pub fn parse_utc_minutes(text: &str) -> Result<i64, &'static str> {
    let b = text.as_bytes();
    let digits = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = b.get(range)?;
        if part.is_empty() || !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(part).ok()?.parse().ok()
    };
    const SHAPE: &str = "is not RFC 3339 (`YYYY-MM-DDTHH:MM:SSZ`)";
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't')
        || b[13] != b':'
        || b[16] != b':'
    {
        return Err(SHAPE);
    }
    let (Some(y), Some(mo), Some(d), Some(h), Some(mi), Some(s)) = (
        digits(0..4),
        digits(5..7),
        digits(8..10),
        digits(11..13),
        digits(14..16),
        digits(17..19),
    ) else {
        return Err(SHAPE);
    };
    let mut rest = &text[19..];
    if let Some(frac) = rest.strip_prefix('.') {
        let n = frac.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return Err(SHAPE);
        }
        rest = &frac[n..];
    }
    match rest {
        "Z" | "z" | "+00:00" | "-00:00" => {}
        _ if rest.starts_with(['+', '-']) => {
            return Err("is not in UTC (end it with `Z`)");
        }
        _ => return Err(SHAPE),
    }
    if !(1..=12).contains(&mo) || d < 1 || d > days_in_month(y, mo) {
        return Err("is not a calendar date");
    }
    if h > 23 || mi > 59 || s > 60 {
        return Err("is not a time of day");
    }
    if !(END_YEARS.0..=END_YEARS.1).contains(&y) {
        return Err("is outside the years reserved capacity can end in");
    }
    days_from_civil(y, mo, d)
        .checked_mul(1440)
        .and_then(|m| m.checked_add(h * 60 + mi))
        .ok_or(SHAPE)
}

/// EventBridge's one-time cron expression (`cron(M H D Mon ? YYYY)`, UTC) for the minute
/// `minutes` since 1970-01-01T00:00Z, when its year is in [`END_YEARS`].
pub fn cron_at(minutes: i64) -> Option<String> {
    let (y, _, _) = civil_from_days(minutes.div_euclid(1440));
    (END_YEARS.0..=END_YEARS.1)
        .contains(&y)
        .then(|| cron_once(minutes))
}

/// The cron expression (`cron(M H D Mon ? YYYY)`) matching only the minute `minutes` since
/// 1970-01-01T00:00Z, read in UTC: EventBridge rules' and EventBridge Scheduler's.
pub fn cron_once(minutes: i64) -> String {
    let (y, m, d) = civil_from_days(minutes.div_euclid(1440));
    let in_day = minutes.rem_euclid(1440);
    format!("cron({} {} {d} {m} ? {y})", in_day % 60, in_day / 60)
}

/// A Kubernetes CronJob's schedule (`M H D Mon *`, five fields, read in the CronJob's
/// `timeZone`, `Etc/UTC`) that fires at the minute `minutes` since 1970-01-01T00:00Z, and on
/// the same date of every later year (a CronJob has no year field).
pub fn kubernetes_cron(minutes: i64) -> String {
    let (_, m, d) = civil_from_days(minutes.div_euclid(1440));
    let in_day = minutes.rem_euclid(1440);
    format!("{} {} {d} {m} *", in_day % 60, in_day / 60)
}

/// `minutes` since 1970-01-01T00:00Z as RFC 3339 to the minute (`2026-12-10T04:55Z`).
pub fn format_utc(minutes: i64) -> String {
    let (y, m, d) = civil_from_days(minutes.div_euclid(1440));
    let in_day = minutes.rem_euclid(1440);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}Z",
        in_day / 60,
        in_day % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cron_jobs_schedule_names_the_minute_and_the_date_without_the_year() {
        let at = parse_utc_minutes("2027-01-15T10:54:00Z").unwrap();
        assert_eq!(kubernetes_cron(at), "54 10 15 1 *");
        let midnight = parse_utc_minutes("2026-12-31T00:00:00Z").unwrap();
        assert_eq!(kubernetes_cron(midnight), "0 0 31 12 *");
    }

    #[test]
    fn civil_days_round_trip() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        for z in [-1, 0, 59, 11_016, 11_017, 19_000, 20_000, 60_000, 83_000] {
            let (y, m, d) = civil_from_days(z);
            assert_eq!(days_from_civil(y, m, d), z, "{z}");
        }
    }

    #[test]
    fn cron_expressions_roll_over_days_months_and_years() {
        let at = |t: &str, hours: i64| cron_at(parse_utc_minutes(t).unwrap() - hours * 60);
        assert_eq!(
            at("2027-01-01T00:30:00Z", 1).unwrap(),
            "cron(30 23 31 12 ? 2026)"
        );
        assert_eq!(
            at("2028-03-01T11:30:59Z", 24).unwrap(),
            "cron(30 11 29 2 ? 2028)"
        );
        assert_eq!(
            at("2027-03-01T11:30:00.5+00:00", 24).unwrap(),
            "cron(30 11 28 2 ? 2027)"
        );
        assert_eq!(
            at("2027-06-15T08:05:00Z", 0).unwrap(),
            "cron(5 8 15 6 ? 2027)"
        );
        assert!(at("2024-01-01T00:00:00Z", 1).is_none());
    }

    #[test]
    fn end_times_are_rfc3339_utc_in_range() {
        for bad in [
            "",
            "2027-01-31",
            "2027-01-31 11:30:00Z",
            "2027-01-31T11:30:00",
            "2027-01-31T11:30:00+01:00",
            "2027-02-29T00:00:00Z",
            "2027-13-01T00:00:00Z",
            "2027-01-31T24:00:00Z",
            "2023-12-31T23:59:59Z",
            "2200-01-01T00:00:00Z",
            "2027-01-31T11:30:00.Z",
            "२०२७-01-31T11:30:00Z",
        ] {
            assert!(parse_utc_minutes(bad).is_err(), "{bad}");
        }
        assert!(parse_utc_minutes("2028-02-29T23:59:60z").is_ok());
    }
    #[test]
    fn minutes_are_written_back_as_rfc3339() {
        let t = parse_utc_minutes("2026-12-10T04:55:00Z").unwrap();
        assert_eq!(format_utc(t), "2026-12-10T04:55Z");
        assert_eq!(format_utc(t + 95), "2026-12-10T06:30Z");
        assert_eq!(
            format_utc(parse_utc_minutes("2029-01-01T00:00:00Z").unwrap() - 1),
            "2028-12-31T23:59Z"
        );
    }
}
