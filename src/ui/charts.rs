//! Server-drawn SVG charts: no script, no external library, and they print.

use std::fmt::Write;

/// Bars for a series of `(label, value)` pairs, `width` x `height` pixels, with the
/// largest value written above the chart. Each bar has a `<title>` (hover text).
pub fn bars(series: &[(String, u64)], width: u32, height: u32, class: &str) -> String {
    let max = series.iter().map(|(_, v)| *v).max().unwrap_or(0).max(1);
    let n = series.len().max(1) as f64;
    let step = f64::from(width) / n;
    let plot = f64::from(height) - 14.0;
    let mut svg = String::with_capacity(128 + series.len() * 120);
    let _ = write!(
        svg,
        r#"<svg class="chart {class}" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" aria-label="max {max}"><text x="2" y="10" class="axis">max {max}</text>"#
    );
    for (i, (label, value)) in series.iter().enumerate() {
        let h = (*value as f64 / max as f64) * plot;
        let x = i as f64 * step;
        let _ = write!(
            svg,
            r#"<rect x="{x:.1}" y="{:.1}" width="{:.1}" height="{h:.1}"><title>{}: {value}</title></rect>"#,
            f64::from(height) - h,
            (step - 1.0).max(1.0),
            escape(label),
        );
    }
    svg.push_str("</svg>");
    svg
}

/// Two series stacked per slot (completed below, failed above), for throughput.
pub fn stacked(series: &[(u64, u64)], width: u32, height: u32) -> String {
    let max = series.iter().map(|(a, b)| a + b).max().unwrap_or(0).max(1);
    let n = series.len().max(1) as f64;
    let step = f64::from(width) / n;
    let plot = f64::from(height) - 14.0;
    let mut svg = String::with_capacity(128 + series.len() * 200);
    let _ = write!(
        svg,
        r#"<svg class="chart throughput" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" aria-label="completed and failed per minute"><text x="2" y="10" class="axis">max {max}/min</text>"#
    );
    let last = series.len();
    for (i, (done, failed)) in series.iter().enumerate() {
        let x = i as f64 * step;
        let w = (step - 1.0).max(1.0);
        let hd = (*done as f64 / max as f64) * plot;
        let hf = (*failed as f64 / max as f64) * plot;
        let ago = last - i - 1;
        let _ = write!(
            svg,
            r#"<g><title>{ago} min ago: {done} completed, {failed} failed</title><rect class="ok" x="{x:.1}" y="{:.1}" width="{w:.1}" height="{hd:.1}"/><rect class="bad" x="{x:.1}" y="{:.1}" width="{w:.1}" height="{hf:.1}"/></g>"#,
            f64::from(height) - hd,
            f64::from(height) - hd - hf,
        );
    }
    svg.push_str("</svg>");
    svg
}

/// Jobs put, completed and failed per minute, side by side in each minute's slot,
/// oldest first (the last slot is the current minute).
pub fn jobs_per_minute(series: &[(u64, u64, u64)], width: u32, height: u32) -> String {
    let max = series
        .iter()
        .map(|&(p, c, f)| p.max(c).max(f))
        .max()
        .unwrap_or(0)
        .max(1);
    let n = series.len().max(1) as f64;
    let step = f64::from(width) / n;
    let w = ((step - 1.0) / 3.0).max(0.5);
    let plot = f64::from(height) - 14.0;
    let mut svg = String::with_capacity(160 + series.len() * 300);
    let _ = write!(
        svg,
        r#"<svg class="chart jobs-per-minute" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" aria-label="jobs put, completed and failed per minute"><text x="2" y="10" class="axis">max {max}/min</text>"#
    );
    let last = series.len();
    for (i, &(put, completed, failed)) in series.iter().enumerate() {
        let x = i as f64 * step;
        let ago = last - i - 1;
        let _ = write!(
            svg,
            r#"<g><title>{ago} min ago: {put} put, {completed} completed, {failed} failed</title>"#
        );
        for (k, (class, value)) in [("put", put), ("ok", completed), ("bad", failed)]
            .into_iter()
            .enumerate()
        {
            let h = (value as f64 / max as f64) * plot;
            let _ = write!(
                svg,
                r#"<rect class="{class}" x="{:.1}" y="{:.1}" width="{w:.1}" height="{h:.1}"/>"#,
                x + k as f64 * w,
                f64::from(height) - h,
            );
        }
        svg.push_str("</g>");
    }
    svg.push_str("</svg>");
    svg
}

/// The median and 95th percentile wait (seconds) per minute, the median's bar over
/// the percentile's, oldest first; `None` for a minute in which nothing was popped.
pub fn waits_per_minute(series: &[Option<(u64, u64, u64)>], width: u32, height: u32) -> String {
    let max = series
        .iter()
        .flatten()
        .map(|&(_, p95, _)| p95)
        .max()
        .unwrap_or(0)
        .max(1);
    let n = series.len().max(1) as f64;
    let step = f64::from(width) / n;
    let w = (step - 1.0).max(1.0);
    let plot = f64::from(height) - 14.0;
    let mut svg = String::with_capacity(160 + series.len() * 260);
    let _ = write!(
        svg,
        r#"<svg class="chart waits-per-minute" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" aria-label="median and 95th percentile wait per minute"><text x="2" y="10" class="axis">max {}</text>"#,
        duration(max)
    );
    let last = series.len();
    for (i, slot) in series.iter().enumerate() {
        let x = i as f64 * step;
        let ago = last - i - 1;
        let Some((p50, p95, popped)) = *slot else {
            let _ = write!(
                svg,
                r#"<g><title>{ago} min ago: nothing popped</title></g>"#
            );
            continue;
        };
        // (At least a pixel: a minute whose jobs waited under a second still shows.)
        let h95 = ((p95 as f64 / max as f64) * plot).max(1.0);
        let h50 = ((p50 as f64 / max as f64) * plot).max(1.0);
        let _ = write!(
            svg,
            r#"<g><title>{ago} min ago: median {}, 95th percentile {} ({popped} popped)</title><rect class="p95" x="{x:.1}" y="{:.1}" width="{w:.1}" height="{h95:.1}"/><rect class="p50" x="{x:.1}" y="{:.1}" width="{w:.1}" height="{h50:.1}"/></g>"#,
            duration(p50),
            duration(p95),
            f64::from(height) - h95,
            f64::from(height) - h50,
        );
    }
    svg.push_str("</svg>");
    svg
}

/// A wait of whole seconds in the unit of its histogram bucket: `12s`, `3m`, `2h`,
/// `1d`.
pub fn duration(seconds: u64) -> String {
    match seconds {
        0..60 => format!("{seconds}s"),
        60..3600 => format!("{}m", seconds / 60),
        3600..86_400 => format!("{}h", seconds / 3600),
        _ => format!("{}d", seconds / 86_400),
    }
}

/// The label of bucket `i` of the script's 148-bucket timing histogram: seconds
/// 0-59, minutes 1-59, hours 1-23, days 1-6.
pub fn bucket_label(i: usize) -> String {
    match i {
        0..=59 => format!("{i}s"),
        60..=118 => format!("{}m", i - 59),
        119..=141 => format!("{}h", i - 118),
        _ => format!("{}d", i - 141),
    }
}

/// A horizontal bar of `total`, filled left to right by `parts` (`(class, label,
/// count)`, coloured by the charts' classes), the rest left blank; each part has a
/// `<title>` (hover text). It stretches to its box (the charts' border is drawn
/// inside it) rather than shrink and leave margins that read as part of the bar.
pub fn progress(parts: &[(&str, &str, u64)], total: u64, width: u32, height: u32) -> String {
    let done: u64 = parts.iter().map(|p| p.2).sum();
    let scale = f64::from(width) / total.max(done).max(1) as f64;
    let mut svg = String::with_capacity(256 + parts.len() * 160);
    let _ = write!(
        svg,
        r#"<svg class="chart progress" viewBox="0 0 {width} {height}" width="{width}" height="{height}" preserveAspectRatio="none" role="img" aria-label="{done} of {total}"><rect class="rest" x="0" y="0" width="{width}" height="{height}"><title>{total} in all</title></rect>"#
    );
    let mut x = 0.0;
    for (class, label, count) in parts {
        let w = *count as f64 * scale;
        let _ = write!(
            svg,
            r#"<rect class="{class}" x="{x:.1}" y="0" width="{w:.1}" height="{height}"><title>{count} {}</title></rect>"#,
            escape(label),
        );
        x += w;
    }
    svg.push_str("</svg>");
    svg
}

/// Escapes text for an SVG's text and attribute values.
pub(super) fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_labelled_by_their_unit() {
        assert_eq!(bucket_label(0), "0s");
        assert_eq!(bucket_label(59), "59s");
        assert_eq!(bucket_label(60), "1m");
        assert_eq!(bucket_label(119), "1h");
        assert_eq!(bucket_label(147), "6d");
    }

    #[test]
    fn waits_are_shown_in_the_unit_of_their_bucket() {
        assert_eq!(duration(0), "0s");
        assert_eq!(duration(59), "59s");
        assert_eq!(duration(120), "2m");
        assert_eq!(duration(7200), "2h");
        assert_eq!(duration(86_400), "1d");
    }

    #[test]
    fn minutes_are_titled_with_their_counts_and_waits() {
        let jobs = jobs_per_minute(&[(3, 2, 1), (0, 0, 0)], 120, 40);
        assert!(jobs.contains("<title>1 min ago: 3 put, 2 completed, 1 failed</title>"));
        assert!(jobs.contains("<title>0 min ago: 0 put, 0 completed, 0 failed</title>"));
        assert!(jobs.contains("max 3/min"));
        let waits = waits_per_minute(&[Some((1, 120, 10)), None], 120, 40);
        assert!(
            waits.contains("<title>1 min ago: median 1s, 95th percentile 2m (10 popped)</title>")
        );
        assert!(waits.contains("<title>0 min ago: nothing popped</title>"));
        assert!(waits.contains("max 2m"));
    }

    #[test]
    fn bars_escape_their_labels_and_scale_to_the_largest() {
        let svg = bars(&[("<a>".into(), 2), ("b".into(), 4)], 100, 50, "x");
        assert!(svg.contains("&lt;a&gt;: 2"));
        assert!(svg.contains("max 4"));
        assert!(!svg.contains("<a>"));
    }

    #[test]
    fn a_progress_bar_fills_its_parts_in_order_of_the_total() {
        let svg = progress(&[("ok", "completed", 3), ("bad", "failed", 1)], 8, 200, 10);
        assert!(svg.contains(r#"aria-label="4 of 8""#));
        assert!(
            svg.contains(r#"<rect class="ok" x="0.0" y="0" width="75.0""#),
            "{svg}"
        );
        assert!(
            svg.contains(r#"<rect class="bad" x="75.0" y="0" width="25.0""#),
            "{svg}"
        );
        // Nothing to do draws an empty bar, not a division by zero.
        assert!(progress(&[("ok", "completed", 0)], 0, 200, 10).contains(r#"width="0.0""#));
    }
}
