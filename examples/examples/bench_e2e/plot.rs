//! The scale sweep's plot: CPU-s per million records and peak RSS against the partition count
//! (the partitions axis: `p12`, `p1000`, `p10000`), one line per producer, as SVG (plotters'
//! SVG backend; the text is laid out by the viewer).

use crate::scale::PointResult;
use crate::Error;
use plotters::prelude::*;

/// The figure a panel shows.
type Metric = fn(&crate::coordinator::Figures) -> f64;

/// Line colours, one per producer in turn.
const COLOURS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// Draws the two panels into `path`. Points without figures are left out of their line.
pub(crate) fn draw(
    path: &std::path::Path,
    results: &[PointResult],
    producers: &[String],
) -> Result<(), Error> {
    let on_axis: Vec<&PointResult> = results
        .iter()
        .filter(|r| r.point.axes.contains(&"partitions"))
        .collect();
    if on_axis.is_empty() {
        return Err("--plot: no point of the partitions axis ran (p12, p1000, p10000)".into());
    }
    let root = SVGBackend::new(path, (1100, 450)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let (left, right) = root.split_horizontally(550);
    let panels: [(_, &str, Metric); 2] = [
        (left, "producer CPU-s per million records", |f| f.cpu_per_m),
        (right, "producer peak RSS (MB)", |f| f.rss_mb),
    ];
    for (area, title, get) in panels {
        let lines: Vec<(&String, Vec<(f64, f64)>)> = producers
            .iter()
            .map(|p| {
                let pts = on_axis
                    .iter()
                    .filter_map(|r| {
                        r.figures(p)
                            .map(|f| (r.point.total_partitions() as f64, get(f)))
                    })
                    .collect();
                (p, pts)
            })
            .collect();
        let y_max = lines
            .iter()
            .flat_map(|(_, pts)| pts.iter().map(|&(_, y)| y))
            .fold(0.0f64, f64::max)
            .max(1e-3)
            * 1.15;
        let mut chart = ChartBuilder::on(&area)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d((8f64..20_000f64).log_scale(), 0f64..y_max)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc("partitions (log scale)")
            .x_label_formatter(&|x| format!("{x:.0}"))
            .draw()
            .map_err(|e| e.to_string())?;
        for (k, (producer, pts)) in lines.into_iter().enumerate() {
            let colour = COLOURS[k % COLOURS.len()];
            chart
                .draw_series(LineSeries::new(pts.clone(), colour.stroke_width(2)))
                .map_err(|e| e.to_string())?
                .label(producer.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour));
            chart
                .draw_series(pts.into_iter().map(|p| Circle::new(p, 4, colour.filled())))
                .map_err(|e| e.to_string())?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| e.to_string())?;
    }
    root.present().map_err(|e| e.to_string())?;
    Ok(())
}
