//! Hand-written SVG: throughput (Gbit/s, inner) and cycles per packet
//! against packet size, one line per suite (worker layer, one worker;
//! solid = encrypt, dashed = decrypt; the raw cipher ceiling dotted and
//! faint in the same colour).

use std::fmt::Write;

use crate::layers::Layer;
use crate::options::{Direction, Size};
use crate::runner::{Report, Row};

const COLORS: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
];
const WIDTH: f64 = 860.0;
const CHART_H: f64 = 320.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 200.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;

/// One line of a chart.
#[derive(Debug, Clone)]
pub struct Series {
    pub label: String,
    pub color: &'static str,
    /// SVG stroke-dasharray ("" for solid).
    pub dash: &'static str,
    pub opacity: f64,
    /// (index on the x axis, value)
    pub points: Vec<(usize, f64)>,
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A "nice" upper bound for an axis holding `max`.
pub fn nice_max(max: f64) -> f64 {
    if max <= 0.0 || !max.is_finite() {
        return 1.0;
    }
    let mag = 10f64.powf(max.log10().floor());
    for step in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if step * mag >= max {
            return step * mag;
        }
    }
    10.0 * mag
}

/// One chart at vertical offset `y0`: categorical x axis, linear y axis.
pub fn chart(
    out: &mut String,
    y0: f64,
    title: &str,
    y_label: &str,
    x_labels: &[String],
    series: &[Series],
) {
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = CHART_H - TOP - BOTTOM;
    let top = y0 + TOP;
    let ymax = nice_max(
        series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .fold(0.0, f64::max),
    );
    let x = |i: usize| LEFT + plot_w * (i as f64 + 0.5) / x_labels.len().max(1) as f64;
    let y = |v: f64| top + plot_h * (1.0 - v / ymax);
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" font-size="15" font-weight="bold">{}</text>"#,
        LEFT,
        y0 + 22.0,
        escape(title)
    );
    for k in 0..=5 {
        let v = ymax * k as f64 / 5.0;
        let _ = writeln!(
            out,
            r##"<line x1="{LEFT}" x2="{}" y1="{yy:.1}" y2="{yy:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" font-size="11" text-anchor="end">{}</text>"##,
            LEFT + plot_w,
            LEFT - 6.0,
            y(v) + 4.0,
            if ymax >= 10.0 {
                format!("{v:.0}")
            } else {
                format!("{v:.1}")
            },
            yy = y(v)
        );
    }
    for (i, l) in x_labels.iter().enumerate() {
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="middle">{}</text>"#,
            x(i),
            top + plot_h + 16.0,
            escape(l)
        );
    }
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" font-size="12" text-anchor="middle">inner IP packet bytes</text>"#,
        LEFT + plot_w / 2.0,
        top + plot_h + 36.0
    );
    let _ = writeln!(
        out,
        r#"<text x="16" y="{:.1}" font-size="12" text-anchor="middle" transform="rotate(-90 16 {:.1})">{}</text>"#,
        top + plot_h / 2.0,
        top + plot_h / 2.0,
        escape(y_label)
    );
    let _ = writeln!(
        out,
        r##"<rect x="{LEFT}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#888"/>"##
    );
    let mut legend_y = top + 4.0;
    for s in series {
        if s.points.is_empty() {
            continue;
        }
        let pts: Vec<String> = s
            .points
            .iter()
            .map(|&(i, v)| format!("{:.1},{:.1}", x(i), y(v)))
            .collect();
        let _ = writeln!(
            out,
            r#"<polyline fill="none" stroke="{}" stroke-width="2" stroke-opacity="{}" stroke-dasharray="{}" points="{}"/>"#,
            s.color,
            s.opacity,
            s.dash,
            pts.join(" ")
        );
        for &(i, v) in &s.points {
            let _ = writeln!(
                out,
                r#"<circle cx="{:.1}" cy="{:.1}" r="2.5" fill="{}" fill-opacity="{}"/>"#,
                x(i),
                y(v),
                s.color,
                s.opacity
            );
        }
        if s.opacity >= 1.0 {
            let lx = LEFT + plot_w + 12.0;
            let _ = writeln!(
                out,
                r#"<line x1="{lx}" x2="{}" y1="{legend_y:.1}" y2="{legend_y:.1}" stroke="{}" stroke-width="2" stroke-dasharray="{}"/><text x="{}" y="{:.1}" font-size="11">{}</text>"#,
                lx + 24.0,
                s.color,
                s.dash,
                lx + 30.0,
                legend_y + 4.0,
                escape(&s.label)
            );
            legend_y += 16.0;
        }
    }
}

fn sizes_in_order(report: &Report) -> Vec<Size> {
    let mut sizes = report.options.sizes.clone();
    sizes.sort_by(|a, b| a.mean().total_cmp(&b.mean()));
    sizes
}

fn series_for(report: &Report, sizes: &[Size], metric: fn(&Row) -> f64) -> Vec<Series> {
    let mut out = Vec::new();
    for (k, suite) in report.options.suites.iter().enumerate() {
        let color = COLORS[k % COLORS.len()];
        for &dir in &report.options.directions {
            for layer in [Layer::Worker, Layer::Cipher] {
                let points = sizes
                    .iter()
                    .enumerate()
                    .filter_map(|(i, size)| {
                        report
                            .rows
                            .iter()
                            .find(|r| {
                                r.suite == *suite
                                    && r.size == *size
                                    && r.direction == dir
                                    && r.layer == layer
                                    && r.workers == 1
                            })
                            .map(|r| (i, metric(r)))
                    })
                    .collect();
                let (dash, opacity) = match (dir, layer) {
                    (_, Layer::Cipher) => ("2 3", 0.35),
                    (Direction::Encrypt, _) => ("", 1.0),
                    (Direction::Decrypt, _) => ("7 4", 1.0),
                };
                out.push(Series {
                    label: format!("{} {}", suite.name(), dir.name()),
                    color,
                    dash,
                    opacity,
                    points,
                });
            }
        }
    }
    out
}

/// The two charts of a report, one SVG document.
pub fn render(report: &Report) -> String {
    let sizes = sizes_in_order(report);
    let labels: Vec<String> = sizes.iter().map(|s| s.label()).collect();
    let mut s = String::new();
    let height = 2.0 * CHART_H + 30.0;
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    chart(
        &mut s,
        0.0,
        "espgw bench: worker throughput per core (dotted: raw cipher ceiling)",
        "Gbit/s (inner)",
        &labels,
        &series_for(report, &sizes, |r| r.rates.gbps_inner),
    );
    chart(
        &mut s,
        CHART_H,
        "TSC cycles per packet through the worker (dotted: raw cipher)",
        "cycles / packet",
        &labels,
        &series_for(report, &sizes, |r| r.rates.cycles_per_packet),
    );
    let _ = writeln!(
        s,
        r##"<text x="{LEFT}" y="{:.0}" font-size="11" fill="#555">{}</text>"##,
        2.0 * CHART_H + 18.0,
        escape(&format!(
            "{} | {} | solid: encrypt, dashed: decrypt | {}",
            report.machine.cpu_model,
            report.options.command,
            report
                .machine
                .build_commit
                .as_deref()
                .or(report.machine.git_commit.as_deref())
                .unwrap_or("no git commit")
        ))
    );
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_max_rounds_up_to_1_2_2_5_5() {
        assert_eq!(nice_max(37.0), 50.0);
        assert_eq!(nice_max(0.8), 1.0);
        assert_eq!(nice_max(1800.0), 2000.0);
        assert_eq!(nice_max(0.0), 1.0);
        assert_eq!(nice_max(230.0), 250.0);
    }

    #[test]
    fn chart_draws_one_polyline_per_series_with_points_and_escapes_text() {
        let mut out = String::new();
        let series = vec![
            Series {
                label: "a<b".into(),
                color: "#000",
                dash: "",
                opacity: 1.0,
                points: vec![(0, 1.0), (1, 2.0)],
            },
            Series {
                label: "empty".into(),
                color: "#111",
                dash: "",
                opacity: 1.0,
                points: vec![],
            },
        ];
        chart(
            &mut out,
            0.0,
            "t",
            "y",
            &["64".into(), "imix".into()],
            &series,
        );
        assert_eq!(out.matches("<polyline").count(), 1);
        assert_eq!(out.matches("<circle").count(), 2);
        assert!(out.contains("a&lt;b"));
        assert!(!out.contains("a<b"));
    }
}
