//! Charts drawn on the server as SVG: no script, no inline style (colours come from classes in
//! ui.css), every number also written as text (`<title>` per bar and a caption) for readers
//! that do not see the picture.

use maud::{Markup, html};

/// A bar chart of `points` (label, value), `caption` saying what it shows.
pub fn bars(caption: &str, points: &[(String, f64)]) -> Markup {
    const WIDTH: f64 = 640.0;
    const HEIGHT: f64 = 160.0;
    const AXIS: f64 = 18.0;
    let max = points.iter().map(|(_, v)| *v).fold(0.0_f64, f64::max);
    let count = points.len().max(1) as f64;
    let slot = WIDTH / count;
    let bar = (slot * 0.8).clamp(1.0, 48.0);
    html! {
        figure.chart {
            svg viewBox=(format!("0 0 {WIDTH} {}", HEIGHT + AXIS)) role="img" aria-label=(caption) {
                line.axis x1="0" y1=(HEIGHT) x2=(WIDTH) y2=(HEIGHT) {}
                @for (index, (label, value)) in points.iter().enumerate() {
                    @let h = if max > 0.0 { value / max * (HEIGHT - 4.0) } else { 0.0 };
                    rect.bar x=(format!("{:.1}", index as f64 * slot + (slot - bar) / 2.0))
                        y=(format!("{:.1}", HEIGHT - h)) width=(format!("{bar:.1}"))
                        height=(format!("{h:.1}")) {
                        title { (label) ": " (trim(*value)) }
                    }
                }
                @if let (Some((first, _)), Some((last, _))) = (points.first(), points.last()) {
                    text.tick x="0" y=(HEIGHT + AXIS - 4.0) { (first) }
                    text.tick x=(WIDTH) y=(HEIGHT + AXIS - 4.0) text-anchor="end" { (last) }
                }
            }
            figcaption { (caption) @if max > 0.0 { " (highest " (trim(max)) ")" } }
        }
    }
}

/// A number without a needless fraction.
pub fn trim(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{}", value as i64)
    } else {
        format!("{value:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_has_a_bar_per_point_and_its_numbers_as_text() {
        let svg = bars(
            "records per day",
            &[("2026-01-01".into(), 2.0), ("2026-01-02".into(), 4.0)],
        )
        .into_string();
        assert_eq!(svg.matches("<rect").count(), 2);
        assert!(svg.contains("2026-01-02: 4"));
        assert!(svg.contains("(highest 4)"));
        assert!(!svg.contains("style="));
        let empty = bars("nothing", &[]).into_string();
        assert!(!empty.contains("<rect"));
    }
}
