//! SVG charts for the benchmark report (`BENCHMARKS.md` links them).
//!
//! Drawn with `plotters`' SVG backend and no font feature: text is emitted as
//! `<text>` elements for the viewer to render, so no system font is needed.

use std::error::Error;
use std::ops::Range;
use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// One curve (or point set) on a chart.
pub struct Series {
    /// Legend entry.
    pub name: String,
    /// The `(x, y)` data.
    pub points: Vec<(f64, f64)>,
    /// Optional text beside each point: empty for none, else one per point.
    pub labels: Vec<String>,
}

/// How a chart draws its series.
pub enum Kind {
    /// One polyline per series, in point order.
    Lines,
    /// One dot per point.
    Points,
}

/// A chart: titles, axis labels and the series to draw.
pub struct Chart<'a> {
    /// Caption above the plot.
    pub title: &'a str,
    /// Caption of the horizontal axis.
    pub x_label: &'a str,
    /// Caption of the vertical axis.
    pub y_label: &'a str,
    /// Lines or points.
    pub kind: Kind,
    /// The data, one legend entry each.
    pub series: &'a [Series],
}

const SIZE: (u32, u32) = (900, 500);
const FONT: &str = "sans-serif";
/// Okabe-Ito colours (colour-blind friendly), without the low-contrast yellow.
const PALETTE: [RGBColor; 7] = [
    RGBColor(0x00, 0x72, 0xB2), // blue
    RGBColor(0xD5, 0x5E, 0x00), // vermillion
    RGBColor(0x00, 0x9E, 0x73), // bluish green
    RGBColor(0xCC, 0x79, 0xA7), // reddish purple
    RGBColor(0xE6, 0x9F, 0x00), // orange
    RGBColor(0x56, 0xB4, 0xE9), // sky blue
    RGBColor(0x00, 0x00, 0x00), // black
];

/// Write `chart` as an SVG file at `path` (creating parent dirs).
///
/// Errors (never panics) as a one-line message: no series, a series with no
/// points, a non-finite coordinate, a labels/points length mismatch, or I/O.
pub fn write_svg(path: &Path, chart: &Chart<'_>) -> Result<(), String> {
    validate(chart)?;
    if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    draw(path, chart).map_err(|e| format!("{}: {e}", path.display()))
}

fn validate(chart: &Chart<'_>) -> Result<(), String> {
    if chart.series.is_empty() {
        return Err(format!("chart \"{}\" has no series", chart.title));
    }
    for series in chart.series {
        let name = &series.name;
        if series.points.is_empty() {
            return Err(format!("series \"{name}\" has no points"));
        }
        if let Some((i, (x, y))) =
            (series.points.iter().enumerate()).find(|(_, (x, y))| !x.is_finite() || !y.is_finite())
        {
            return Err(format!(
                "series \"{name}\" point {i} is not finite: ({x}, {y})"
            ));
        }
        let (labels, points) = (series.labels.len(), series.points.len());
        if labels != 0 && labels != points {
            return Err(format!(
                "series \"{name}\" has {labels} labels for {points} points"
            ));
        }
    }
    Ok(())
}

fn draw(path: &Path, chart: &Chart<'_>) -> Result<(), Box<dyn Error>> {
    let points = || chart.series.iter().flat_map(|s| s.points.iter().copied());
    let x_pad = if matches!(chart.kind, Kind::Points) {
        0.08
    } else {
        0.0
    };
    let x = axis_range(points().map(|p| p.0), false, x_pad);
    let y = axis_range(points().map(|p| p.1), true, 0.05);
    if !(x.end - x.start).is_finite() || !(y.end - y.start).is_finite() {
        return Err("data range is too wide to plot".into());
    }
    let (x_fmt, y_fmt) = (tick_format(x.end - x.start), tick_format(y.end - y.start));
    let longest = chart.series.iter().map(|s| s.name.chars().count()).max();
    let legend_width = 50 + 7 * longest.unwrap_or(0) as u32;

    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let mut ctx = ChartBuilder::on(&root)
        .caption(chart.title, (FONT, 22))
        .margin(12)
        .margin_right(legend_width)
        .x_label_area_size(45)
        .y_label_area_size(65)
        .build_cartesian_2d(x, y)?;
    ctx.configure_mesh()
        .x_desc(chart.x_label)
        .y_desc(chart.y_label)
        .axis_desc_style((FONT, 16))
        .label_style((FONT, 14))
        .x_labels(10)
        .y_labels(8)
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .light_line_style(TRANSPARENT)
        .bold_line_style(BLACK.mix(0.1))
        .draw()?;

    // The legend sits right of the plot (plotters clips its own legend to the plot).
    let (plot_x, plot_y) = ctx.plotting_area().get_pixel_range();
    let (key_x, key_y) = (plot_x.end + 15, plot_y.start + 10);
    let key_font = TextStyle::from((FONT, 15)).pos(Pos::new(HPos::Left, VPos::Center));
    for ((i, series), colour) in chart.series.iter().enumerate().zip(PALETTE.iter().cycle()) {
        let data = series.points.iter().copied();
        let key_y = key_y + 22 * i as i32;
        match chart.kind {
            Kind::Lines => {
                ctx.draw_series(LineSeries::new(data, colour.stroke_width(2)))?;
                let key = [(key_x, key_y), (key_x + 20, key_y)];
                root.draw(&PathElement::new(key, colour.stroke_width(2)))?;
            }
            Kind::Points => {
                ctx.draw_series(data.map(|p| Circle::new(p, 4, colour.filled())))?;
                root.draw(&Circle::new((key_x + 10, key_y), 4, colour.filled()))?;
            }
        }
        root.draw(&Text::new(
            series.name.as_str(),
            (key_x + 28, key_y),
            &key_font,
        ))?;
        let label_font = (FONT, 12).into_font().color(colour);
        let labels = series.points.iter().zip(&series.labels).map(|(&p, label)| {
            EmptyElement::at(p) + Text::new(label.clone(), (6, -14), label_font.clone())
        });
        ctx.draw_series(labels)?;
    }

    root.present()?;
    Ok(())
}

/// The span of `values`, widened by `pad` (a fraction of it) at both ends;
/// `from_zero` keeps 0 in range.
fn axis_range(values: impl Iterator<Item = f64>, from_zero: bool, pad: f64) -> Range<f64> {
    let (mut lo, mut hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    if from_zero {
        (lo, hi) = (lo.min(0.0), hi.max(0.0));
    }
    if hi == lo {
        let half = 0.5 * lo.abs().max(1.0);
        (lo, hi) = if from_zero {
            (0.0, 1.0)
        } else {
            (lo - half, hi + half)
        };
    }
    let pad = pad * (hi - lo);
    // Padding never takes non-negative data below zero.
    let lo = if lo >= 0.0 {
        (lo - pad).max(0.0)
    } else {
        lo - pad
    };
    lo..hi + pad
}

/// A tick formatter with just enough decimals for ~10 ticks over `span`.
fn tick_format(span: f64) -> impl Fn(&f64) -> String {
    let step = span / 10.0;
    let decimals = (-step.log10().floor()).clamp(0.0, 12.0) as usize;
    move |v| {
        let full = format!("{v:.decimals$}");
        let text = match full.contains('.') {
            true => full.trim_end_matches('0').trim_end_matches('.'),
            false => &full,
        };
        if text == "-0" {
            "0".into()
        } else {
            text.into()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(name: &str, points: Vec<(f64, f64)>, labels: &[&str]) -> Series {
        let labels = labels.iter().map(|l| l.to_string()).collect();
        Series {
            name: name.into(),
            points,
            labels,
        }
    }

    fn chart<'a>(kind: Kind, series: &'a [Series]) -> Chart<'a> {
        Chart {
            title: "RSS <over> time",
            x_label: "Invocation",
            y_label: "RSS (MiB)",
            kind,
            series,
        }
    }

    /// Writes `chart` into a fresh temp dir; returns the result and the SVG text.
    fn render(tag: &str, chart: &Chart<'_>) -> (Result<(), String>, String) {
        let dir = std::env::temp_dir().join(format!("plot-test-{tag}-{}", std::process::id()));
        let result = write_svg(&dir.join("sub/chart.svg"), chart);
        let svg = std::fs::read_to_string(dir.join("sub/chart.svg")).unwrap_or_default();
        let _ = std::fs::remove_dir_all(&dir);
        (result, svg)
    }

    #[test]
    fn line_chart_has_text_and_one_polyline_per_series() {
        let data = [
            series(
                "mimalloc",
                (1..=500)
                    .map(|i| (i as f64, 20.0 + (i % 7) as f64))
                    .collect(),
                &[],
            ),
            series(
                "jemalloc",
                (1..=500)
                    .map(|i| (i as f64, 30.0 + (i % 5) as f64))
                    .collect(),
                &[],
            ),
        ];
        let (result, svg) = render("lines", &chart(Kind::Lines, &data));
        assert_eq!(result, Ok(()));
        for text in [
            "RSS &lt;over&gt; time",
            "Invocation",
            "RSS (MiB)",
            "mimalloc",
            "jemalloc",
        ] {
            assert!(svg.contains(text), "missing {text}");
        }
        assert!(
            svg.contains(">\n0\n<") && svg.contains(">\n300\n<"),
            "tick labels"
        );
        for colour in ["#0072B2", "#D55E00"] {
            // The curve plus its legend key.
            let curve = format!("<polyline fill=\"none\" opacity=\"1\" stroke=\"{colour}\"");
            assert_eq!(svg.matches(&curve).count(), 2, "{colour}");
        }
    }

    #[test]
    fn point_chart_has_labels() {
        let data = [series(
            "arm64",
            vec![(120.0, 0.5), (80.0, 0.9)],
            &["1024 MB", "1769 MB"],
        )];
        let (result, svg) = render("points", &chart(Kind::Points, &data));
        assert_eq!(result, Ok(()));
        assert!(svg.contains("1769 MB") && svg.contains("arm64") && svg.contains("<circle"));
    }

    #[test]
    fn bad_input_is_an_error() {
        let err = |tag, data: &[Series]| render(tag, &chart(Kind::Lines, data)).0.unwrap_err();
        assert!(err("none", &[]).contains("no series"));
        assert!(err("empty", &[series("a", vec![], &[])]).contains("\"a\" has no points"));
        let nan = [series("b", vec![(0.0, 1.0), (1.0, f64::NAN)], &[])];
        assert!(err("nan", &nan).contains("\"b\" point 1 is not finite"));
        let inf = [series("c", vec![(f64::INFINITY, 1.0)], &[])];
        assert!(err("inf", &inf).contains("not finite"));
        let labels = [series("d", vec![(0.0, 1.0), (1.0, 2.0)], &["x"])];
        assert!(err("labels", &labels).contains("1 labels for 2 points"));
        let wide = [series("e", vec![(-f64::MAX, 0.0), (f64::MAX, 1.0)], &[])];
        assert!(err("wide", &wide).contains("too wide"));
    }

    #[test]
    fn io_failure_is_an_error() {
        let file = std::env::temp_dir().join(format!("plot-test-file-{}", std::process::id()));
        std::fs::write(&file, "not a directory").unwrap();
        let data = [series("a", vec![(0.0, 1.0)], &[])];
        let result = write_svg(&file.join("chart.svg"), &chart(Kind::Lines, &data));
        let _ = std::fs::remove_file(&file);
        assert!(result.unwrap_err().contains("plot-test-file"));
    }

    #[test]
    fn ranges_and_ticks() {
        assert_eq!(axis_range([3.0, 7.0].into_iter(), true, 0.05), 0.0..7.35);
        assert_eq!(axis_range([-2.0, 8.0].into_iter(), true, 0.0), -2.0..8.0);
        assert_eq!(
            axis_range([1.0, 1001.0].into_iter(), false, 0.0),
            1.0..1001.0
        );
        assert_eq!(axis_range([5.0].into_iter(), false, 0.0), 2.5..7.5);
        assert_eq!(axis_range([0.0].into_iter(), true, 0.0), 0.0..1.0);
        let fmt = tick_format(1.0);
        assert_eq!(
            (fmt(&0.30000000000000004), fmt(&2.0), fmt(&-0.0)),
            ("0.3".into(), "2".into(), "0".into())
        );
        assert_eq!(tick_format(5000.0)(&1500.0), "1500");
    }
}
