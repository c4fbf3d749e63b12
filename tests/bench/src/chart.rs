//! The benchmarks' SVG charts (plotters' SVG backend): one panel per metric, one horizontal
//! bar per server or client, each labelled with its name and value, written next to the
//! table so that a reader sees at a glance who is near the floor.

use std::path::Path;

use plotters::prelude::*;

/// One panel: a metric and its value for each bar (in the same order in every panel).
pub struct Panel {
    /// What is measured, with its unit (`server CPU per call (µs)`).
    pub title: String,
    /// `(bar name, value)`.
    pub bars: Vec<(String, f64)>,
}

/// Bar colours, one per bar position (the same server has the same colour in every panel);
/// the floor is grey.
const FLOOR: RGBColor = RGBColor(150, 150, 150);
const COLOURS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// Writes `panels` stacked, under `title`, as an SVG file at `path`.
///
/// # Errors
///
/// When the file cannot be written.
pub fn write_svg(path: &Path, title: &str, panels: &[Panel]) -> Result<(), String> {
    let rows: usize = panels.iter().map(|p| p.bars.len()).max().unwrap_or(1);
    let panel_height = 60 + 26 * u32::try_from(rows).unwrap_or(8);
    let height = 50 + panel_height * u32::try_from(panels.len()).unwrap_or(1);
    let root = SVGBackend::new(path, (760, height)).into_drawing_area();
    let err = |e: DrawingAreaErrorKind<_>| format!("{}: {e:?}", path.display());
    root.fill(&WHITE).map_err(err)?;
    let root = root
        .titled(title, ("sans-serif", 20))
        .map_err(|e| format!("{}: {e:?}", path.display()))?;
    let areas = root.split_evenly((panels.len().max(1), 1));
    for (panel, area) in panels.iter().zip(areas) {
        draw_panel(&area, panel).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    root.present()
        .map_err(|e| format!("{}: {e:?}", path.display()))?;
    Ok(())
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    panel: &Panel,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let n = panel.bars.len().max(1);
    let max = panel
        .bars
        .iter()
        .map(|(_, v)| *v)
        .filter(|v| v.is_finite())
        .fold(0.0_f64, f64::max)
        .max(f64::MIN_POSITIVE);
    #[allow(clippy::cast_precision_loss)]
    let rows = n as f64;
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, ("sans-serif", 15))
        .margin(8)
        .x_label_area_size(24)
        .y_label_area_size(8)
        // Room on the right for the longest bar's label.
        .build_cartesian_2d(0.0..max * 1.45, 0.0..rows)
        .map_err(|e| format!("{e:?}"))?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .disable_y_axis()
        .x_labels(6)
        .x_label_style(("sans-serif", 11))
        .x_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(|e| format!("{e:?}"))?;
    for (i, (name, value)) in panel.bars.iter().enumerate() {
        #[allow(clippy::cast_precision_loss)]
        let top = rows - i as f64;
        let colour = if name.starts_with("floor") {
            FLOOR
        } else {
            COLOURS[i % COLOURS.len()]
        };
        let v = if value.is_finite() { *value } else { 0.0 };
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(0.0, top - 0.15), (v, top - 0.85)],
                colour.filled(),
            )))
            .map_err(|e| format!("{e:?}"))?;
        let label = if v >= 100.0 {
            format!("{name}: {v:.0}")
        } else {
            format!("{name}: {v:.1}")
        };
        chart
            .draw_series(std::iter::once(Text::new(
                label,
                (v + max * 0.02, top - 0.3),
                ("sans-serif", 13).into_font().color(&BLACK),
            )))
            .map_err(|e| format!("{e:?}"))?;
    }
    Ok(())
}
