//! Drawing one curve as an SVG line chart (plotters, SVG backend only).

use std::path::Path;

use plotters::prelude::*;

use super::curve::Curve;

/// Plot size in pixels.
const SIZE: (u32, u32) = (900, 560);

/// Draws `curve` to `path`: one line (with points) per system, log-scaled
/// axes where the curve asks for them, a legend naming every system.
pub fn draw(curve: &Curve, path: &Path) -> Result<(), String> {
    draw_inner(curve, path).map_err(|e| format!("plotting {}: {e}", path.display()))
}

fn draw_inner(curve: &Curve, path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let points: Vec<(f64, f64)> = curve
        .series
        .iter()
        .flat_map(|(_, pts)| pts.iter().copied())
        .filter(|&(x, y)| x > 0.0 && y > 0.0 && y.is_finite())
        .collect();
    if points.is_empty() {
        return Err("no points to plot".into());
    }
    let (x0, x1) = bounds(points.iter().map(|p| p.0));
    let (y0, y1) = bounds(points.iter().map(|p| p.1));
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(&curve.title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(80)
        .build_cartesian_2d(
            (x0 / 1.3..x1 * 1.3).log_scale(),
            (y0 / 1.5..y1 * 1.5).log_scale(),
        )?;
    chart
        .configure_mesh()
        .x_desc(curve.x_label.as_str())
        .y_desc(curve.y_label.as_str())
        .x_label_formatter(&|x| short(*x))
        .y_label_formatter(&|y| short(*y))
        .draw()?;
    for (i, (system, pts)) in curve.series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let pts: Vec<(f64, f64)> = pts.iter().copied().filter(|&(_, y)| y > 0.0).collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))?
            .label(system.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart.draw_series(pts.into_iter().map(|p| Circle::new(p, 3, color.filled())))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

fn bounds(values: impl Iterator<Item = f64>) -> (f64, f64) {
    values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    })
}

/// An axis label: 1, 10, 1k, 10k, 1M; 0.5, 0.05 for small values.
fn short(v: f64) -> String {
    if v >= 1e6 {
        format!("{}M", trim(v / 1e6))
    } else if v >= 1e3 {
        format!("{}k", trim(v / 1e3))
    } else {
        trim(v)
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_short() {
        assert_eq!(short(1_000_000.0), "1M");
        assert_eq!(short(65_536.0), "65.54k");
        assert_eq!(short(16.0), "16");
        assert_eq!(short(0.05), "0.05");
    }

    #[test]
    fn draws_an_svg_with_title_axes_and_a_line_per_system() {
        let curve = Curve {
            file: "test",
            title: "time per task vs contexts".into(),
            x_label: "contexts".into(),
            y_label: "ns per task".into(),
            series: vec![
                ("keyway".into(), vec![(16.0, 100.0), (1024.0, 120.0)]),
                ("ideal".into(), vec![(16.0, 50.0), (1024.0, 55.0)]),
            ],
        };
        let dir = std::env::temp_dir().join(format!("kb-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.svg");
        draw(&curve, &path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        for text in [
            "time per task vs contexts",
            "contexts",
            "ns per task",
            "keyway",
            "ideal",
        ] {
            assert!(svg.contains(text), "{text} missing");
        }
        // Series are drawn 2 px wide, axes 1 px: two lines and two legend marks.
        assert_eq!(svg.matches("stroke-width=\"2\" points").count(), 2 + 2);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
