//! The times HAR writes (RFC 3339, with an offset or `Z`), as seconds
//! since the epoch, for the pauses between pages.

/// Seconds since the epoch of an RFC 3339 time (`2024-05-01T10:00:00.123Z`,
/// `...+02:00`), as HAR writes them; `None` if it is not one.
pub(super) fn rfc3339(text: &str) -> Option<f64> {
    let text = text.trim();
    let number = |s: &str| -> Option<i64> { s.bytes().all(|b| b.is_ascii_digit()).then(|| s.parse().ok())? };
    let (date, time) = text.split_once(['T', 't', ' '])?;
    let mut date = date.splitn(3, '-');
    let (year, month, day) = (
        number(date.next()?)?,
        number(date.next()?)?,
        number(date.next()?)?,
    );
    let (clock, offset) = match time.find(['Z', 'z', '+', '-']) {
        Some(at) => (&time[..at], &time[at..]),
        None => (time, "Z"),
    };
    let mut parts = clock.splitn(3, ':');
    let (hour, minute) = (number(parts.next()?)?, number(parts.next()?)?);
    let seconds: f64 = parts.next().unwrap_or("0").parse().ok()?;
    let offset_minutes = match offset {
        "Z" | "z" => 0,
        _ => {
            let sign = if offset.starts_with('-') { -1 } else { 1 };
            let (h, m) = offset[1..].split_once(':').unwrap_or((&offset[1..], "0"));
            sign * (number(h)? * 60 + number(m)?)
        }
    };
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((days * 86_400 + hour * 3600 + minute * 60 - offset_minutes * 60) as f64 + seconds)
}
