//! SVG charts for the benchmark report (`BENCHMARKS.md` links them).
//!
//! Drawn with `plotters`' SVG backend and no font feature: text is emitted as
//! `<text>` elements for the viewer to render, so no system font is needed.
//! Point labels are placed beside their point where they overlap nothing
//! already drawn, and left out where no such place is free.

use std::error::Error;
use std::ops::Range;
use std::path::Path;

use plotters::coord::Shift;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// One curve (or point set) on a chart.
pub struct Series {
    /// Legend entry.
    pub name: String,
    /// The `(x, y)` data.
    pub points: Vec<(f64, f64)>,
    /// Optional text beside each point: empty for none, else one per point
    /// (an empty text labels nothing).
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
    /// A logarithmic horizontal axis (positive data only).
    pub log_x: bool,
    /// The data, one legend entry each.
    pub series: &'a [Series],
}

const SIZE: (u32, u32) = (900, 500);
const FONT: &str = "sans-serif";
/// Point labels: font size, and the box a character is assumed to take
/// (generous for sans-serif digits at that size).
const LABEL_FONT: f64 = 12.0;
const LABEL_CHAR: (i32, i32) = (7, 14);
/// Half the side of the square a point marker is assumed to cover.
const MARKER: i32 = 5;
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
        if chart.log_x && series.points.iter().any(|p| p.0 <= 0.0) {
            return Err(format!(
                "series \"{name}\" has an x of 0 or less on a logarithmic axis"
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
    let y = axis_range(points().map(|p| p.1), true, 0.05);
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    if chart.log_x {
        // Padded by a factor, as a linear axis is by a difference.
        let logs = axis_range(points().map(|p| p.0.log10()), false, x_pad);
        let x = 10f64.powf(logs.start)..10f64.powf(logs.end);
        if !(x.start > 0.0 && x.end.is_finite() && (y.end - y.start).is_finite()) {
            return Err("data range is too wide to plot".into());
        }
        let ticks = log_ticks(x.start, x.end);
        plot(
            &root,
            chart,
            x.log_scale().with_key_points(ticks),
            y,
            &significant,
        )?;
    } else {
        let x = axis_range(points().map(|p| p.0), false, x_pad);
        if !(x.end - x.start).is_finite() || !(y.end - y.start).is_finite() {
            return Err("data range is too wide to plot".into());
        }
        plot(&root, chart, x.clone(), y, &tick_format(x.end - x.start))?;
    }
    root.present()?;
    Ok(())
}

/// Draw `chart` on `root` with the horizontal axis `x` (linear or logarithmic).
fn plot<X>(
    root: &DrawingArea<SVGBackend<'_>, Shift>,
    chart: &Chart<'_>,
    x: X,
    y: Range<f64>,
    x_fmt: &dyn Fn(&f64) -> String,
) -> Result<(), Box<dyn Error>>
where
    X: AsRangedCoord<Value = f64>,
    X::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let mut ctx = axes(root, chart, x, y, x_fmt)?;
    series_and_legend(root, &mut ctx, chart)?;
    point_labels(root, &ctx, chart)
}

/// A chart's drawing context: the horizontal axis `XC`, a linear vertical one.
type Context<'a, 'b, XC> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<XC, RangedCoordf64>>;

/// The caption, the axes and their mesh, room left on the right for the legend.
fn axes<'a, 'b, X>(
    root: &'a DrawingArea<SVGBackend<'b>, Shift>,
    chart: &Chart<'_>,
    x: X,
    y: Range<f64>,
    x_fmt: &dyn Fn(&f64) -> String,
) -> Result<Context<'a, 'b, X::CoordDescType>, Box<dyn Error>>
where
    X: AsRangedCoord<Value = f64>,
    X::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let y_fmt = tick_format(y.end - y.start);
    let longest = chart.series.iter().map(|s| s.name.chars().count()).max();
    let legend_width = 50 + 7 * longest.unwrap_or(0) as u32;
    let mut ctx = ChartBuilder::on(root)
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
        .x_label_formatter(x_fmt)
        .y_label_formatter(&y_fmt)
        .light_line_style(TRANSPARENT)
        .bold_line_style(BLACK.mix(0.1))
        .draw()?;
    Ok(ctx)
}

/// Every series, and its legend entry right of the plot (plotters clips its
/// own legend to the plot).
fn series_and_legend<XC>(
    root: &DrawingArea<SVGBackend<'_>, Shift>,
    ctx: &mut Context<'_, '_, XC>,
    chart: &Chart<'_>,
) -> Result<(), Box<dyn Error>>
where
    XC: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
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
    }
    Ok(())
}

/// The point labels, drawn last: each where it overlaps no marker and no
/// label placed before, or left out.
fn point_labels<XC>(
    root: &DrawingArea<SVGBackend<'_>, Shift>,
    ctx: &Context<'_, '_, XC>,
    chart: &Chart<'_>,
) -> Result<(), Box<dyn Error>>
where
    XC: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let (plot_x, plot_y) = ctx.plotting_area().get_pixel_range();
    let markers: Vec<(i32, i32)> = chart
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| ctx.backend_coord(p)))
        .collect();
    let area = Rect {
        left: plot_x.start,
        top: plot_y.start,
        right: plot_x.end,
        bottom: plot_y.end,
    };
    let mut placer = Placer::new(area, &markers);
    for (series, colour) in chart.series.iter().zip(PALETTE.iter().cycle()) {
        let font = (FONT, LABEL_FONT)
            .into_font()
            .color(colour)
            .pos(Pos::new(HPos::Left, VPos::Top));
        for (point, label) in series.points.iter().zip(&series.labels) {
            if label.is_empty() {
                continue;
            }
            if let Some(at) = placer.place(ctx.backend_coord(point), label) {
                root.draw(&Text::new(label.clone(), at, &font))?;
            }
        }
    }
    Ok(())
}

/// A pixel rectangle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Rect {
    left: i32,
    top: i32,
    right: i32,
    bottom: i32,
}

impl Rect {
    fn overlaps(&self, other: &Rect) -> bool {
        self.left < other.right
            && other.left < self.right
            && self.top < other.bottom
            && other.top < self.bottom
    }

    fn inside(&self, area: &Rect) -> bool {
        self.left >= area.left
            && self.right <= area.right
            && self.top >= area.top
            && self.bottom <= area.bottom
    }
}

/// Places labels one by one where they overlap no point marker and no label
/// placed before.
struct Placer {
    area: Rect,
    taken: Vec<Rect>,
}

impl Placer {
    fn new(area: Rect, markers: &[(i32, i32)]) -> Self {
        let taken = markers
            .iter()
            .map(|&(x, y)| Rect {
                left: x - MARKER,
                top: y - MARKER,
                right: x + MARKER,
                bottom: y + MARKER,
            })
            .collect();
        Self { area, taken }
    }

    /// The top-left corner for `label` beside the point at `(x, y)`: right,
    /// left, above, below, then the diagonals; `None` if all are taken.
    fn place(&mut self, (x, y): (i32, i32), label: &str) -> Option<(i32, i32)> {
        let chars = i32::try_from(label.chars().count()).unwrap_or(i32::MAX / 2);
        let (w, h) = (chars.saturating_mul(LABEL_CHAR.0), LABEL_CHAR.1);
        let gap = MARKER + 2;
        let candidates = [
            (x + gap, y - h / 2),
            (x - gap - w, y - h / 2),
            (x - w / 2, y - gap - h),
            (x - w / 2, y + gap),
            (x + gap, y - gap - h),
            (x + gap, y + gap),
            (x - gap - w, y - gap - h),
            (x - gap - w, y + gap),
        ];
        let rect = candidates
            .into_iter()
            .map(|(left, top)| Rect {
                left,
                top,
                right: left.saturating_add(w),
                bottom: top + h,
            })
            .find(|r| r.inside(&self.area) && !self.taken.iter().any(|t| t.overlaps(r)))?;
        self.taken.push(rect);
        Some((rect.left, rect.top))
    }
}

/// Ticks for a logarithmic axis over `lo..hi` (positive): 1, 2 and 5 times
/// the powers of ten, more steps where that gives fewer than four, only the
/// powers of ten where it gives more than twelve.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let decades = || (lo.log10().floor() as i32)..=(hi.log10().ceil() as i32);
    let ticks = |steps: &[f64]| -> Vec<f64> {
        decades()
            .flat_map(|k| steps.iter().map(move |s| s * 10f64.powi(k)))
            .filter(|t| (lo..=hi).contains(t))
            .collect()
    };
    let ticks_125 = ticks(&[1.0, 2.0, 5.0]);
    if ticks_125.len() < 4 {
        ticks(&[1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0])
    } else if ticks_125.len() > 12 {
        ticks(&[1.0])
    } else {
        ticks_125
    }
}

/// A tick label for a logarithmic axis: at most three significant digits.
fn significant(v: &f64) -> String {
    if *v >= 100.0 {
        format!("{v:.0}")
    } else {
        let decimals = (2.0 - v.abs().log10().floor()).clamp(0.0, 12.0) as usize;
        let full = format!("{v:.decimals$}");
        match full.contains('.') {
            true => full.trim_end_matches('0').trim_end_matches('.').to_owned(),
            false => full,
        }
    }
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
            log_x: false,
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

    /// `(x, y, text)` of every `<text>` element in `svg`.
    fn texts(svg: &str) -> Vec<(f64, f64, String)> {
        svg.split("<text ")
            .skip(1)
            .map(|element| format!(" {element}"))
            .filter_map(|element| {
                let attr = |name: &str| -> Option<f64> {
                    let start = element.find(&format!(" {name}=\""))? + name.len() + 3;
                    let rest = element.get(start..)?;
                    rest.get(..rest.find('"')?)?.parse().ok()
                };
                let body = element.get(element.find('>')? + 1..element.find("</text>")?)?;
                Some((attr("x")?, attr("y")?, body.trim().to_owned()))
            })
            .collect()
    }

    #[test]
    fn point_labels_never_overlap() {
        // A dozen points bunched at short durations, a few far apart: the
        // power tuning's shape.
        let mut points: Vec<(f64, f64)> = (0..12)
            .map(|i| (20.0 + i as f64, 0.5 + 0.01 * i as f64))
            .collect();
        points.extend([(900.0, 2.0), (2_000.0, 3.0), (5_000.0, 5.0)]);
        let labels: Vec<String> = (0..points.len())
            .map(|i| format!("{} MB", 1000 + i))
            .collect();
        let data = [Series {
            name: "x86_64".into(),
            points,
            labels: labels.clone(),
        }];
        let (result, svg) = render("crowded", &chart(Kind::Points, &data));
        assert_eq!(result, Ok(()));
        // 12 px text: about 7 px a character, 12 px high.
        let boxes: Vec<(f64, f64, f64, f64)> = texts(&svg)
            .into_iter()
            .filter(|(_, _, text)| labels.contains(text))
            .map(|(x, y, text)| (x, y, x + 7.0 * text.chars().count() as f64, y + 12.0))
            .collect();
        assert!(
            boxes.len() >= 4,
            "the far points keep their labels: {boxes:?}"
        );
        for (i, a) in boxes.iter().enumerate() {
            for b in &boxes[i + 1..] {
                let apart = a.2 <= b.0 || b.2 <= a.0 || a.3 <= b.1 || b.3 <= a.1;
                assert!(apart, "labels overlap: {a:?} and {b:?}");
            }
        }
    }

    #[test]
    fn a_log_axis_has_decade_ticks_and_refuses_non_positive_x() {
        let data = [series(
            "x86_64",
            vec![(12.0, 0.3), (150.0, 0.5), (2_100.0, 3.0), (40_000.0, 9.0)],
            &[],
        )];
        let mut log = chart(Kind::Points, &data);
        log.log_x = true;
        let (result, svg) = render("log", &log);
        assert_eq!(result, Ok(()));
        for tick in ["10", "100", "1000", "10000"] {
            assert!(svg.contains(&format!(">\n{tick}\n<")), "tick {tick}");
        }
        let zero = [series("z", vec![(0.0, 1.0), (10.0, 2.0)], &[])];
        let mut log = chart(Kind::Points, &zero);
        log.log_x = true;
        assert!(
            render("log-zero", &log)
                .0
                .unwrap_err()
                .contains("logarithmic")
        );
        assert_eq!(significant(&0.25), "0.25");
        assert_eq!(log_ticks(12.0, 40_000.0).len(), 10);
        assert_eq!(
            log_ticks(40.0, 330.0),
            [40.0, 50.0, 60.0, 80.0, 100.0, 150.0, 200.0, 300.0]
        );
        assert_eq!(significant(&2_000.0), "2000");
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
