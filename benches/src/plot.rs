//! SVG plots of a suite run (plotters' SVG backend: no system library, no font files): one per
//! workload, the median figure against message size, one line per system, both axes
//! logarithmic, with the baseline dashed.

use std::path::{Path, PathBuf};

use plotters::prelude::*;

use crate::error::{Error, Result};
use crate::sizes::human;
use crate::stats::finite;
use crate::suite::{Outcome, Series};

/// The same colour for a system in every plot.
fn colour(name: &str, i: usize) -> RGBColor {
    match name {
        "nemesis-shm" => RGBColor(214, 39, 40),
        "nemesis-c-abi" => RGBColor(255, 127, 14),
        "nemesis-tcp" => RGBColor(140, 86, 75),
        "unix-socket" => RGBColor(31, 119, 180),
        "pipe" => RGBColor(23, 190, 207),
        "iceoryx2" => RGBColor(44, 160, 44),
        "openmpi" => RGBColor(148, 103, 189),
        "mpich" => RGBColor(227, 119, 194),
        _ => {
            let c = Palette99::pick(i).to_rgba();
            RGBColor(c.0, c.1, c.2)
        }
    }
}

/// The (size, median) points of a member (or of the baseline), for sizes above 0 with a figure.
fn points(sizes: &[usize], per_size: &[Vec<f64>]) -> Vec<(f64, f64)> {
    sizes
        .iter()
        .zip(per_size)
        .filter(|(s, _)| **s > 0)
        .filter_map(|(&s, v)| finite(v).map(|x| (s as f64, x.median)))
        .filter(|(_, y)| *y > 0.0)
        .collect()
}

/// Writes `PREFIX-<workload>.svg` for every series into `dir`; returns the files written.
pub fn write(o: &Outcome, dir: &Path, prefix: &str, title: &str) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for s in &o.series {
        let path = dir.join(format!("{prefix}-{}.svg", s.workload.file_stem()));
        draw(o, s, &path, title).map_err(|e| Error::Run(format!("plot {}: {e}", path.display())))?;
        files.push(path);
    }
    Ok(files)
}

/// Width of the legend column right of the chart.
const LEGEND: u32 = 220;

fn draw(o: &Outcome, s: &Series, path: &Path, title: &str) -> std::result::Result<(), Box<dyn std::error::Error>> {
    let lines: Vec<(String, Vec<(f64, f64)>)> =
        s.members.iter().zip(&s.values).map(|(&k, v)| (o.systems[k].name.clone(), points(&s.sizes, v))).collect();
    let base = points(&s.sizes, &s.baseline);
    let all = lines.iter().flat_map(|(_, p)| p.iter()).chain(base.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in all {
        (x0, x1, y0, y1) = (x0.min(x), x1.max(x), y0.min(y), y1.max(y));
    }
    if x0 > x1 {
        (x0, x1, y0, y1) = (1.0, 2.0, 1.0, 2.0); // nothing measured: an empty frame
    }
    // x is log2 of the size on a linear axis, so that labels fall on powers of two.
    let (lx0, lx1) = (x0.log2().floor(), x1.log2().ceil().max(x0.log2().floor() + 1.0));
    let (y0, y1) = (y0 / 1.5, y1 * 1.5);
    let root = SVGBackend::new(path, (960 + LEGEND, 600)).into_drawing_area();
    root.fill(&WHITE)?;
    let (plot, legend) = root.split_horizontally(960);
    let w = s.workload;
    let caption = format!("{title}: {} ({}), medians of {} rounds", w.title(), w.unit(), o.rounds);
    let mut chart = ChartBuilder::on(&plot)
        .caption(caption, ("sans-serif", 20))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(70)
        .build_cartesian_2d(lx0..lx1, (y0..y1).log_scale())?;
    let steps = (lx1 - lx0) as usize;
    chart
        .configure_mesh()
        .x_labels(steps + 1)
        .max_light_lines(1)
        .x_desc("message size, bytes")
        .y_desc(format!("{} ({})", w.title(), w.unit()))
        .x_label_formatter(&|x| if x.fract() == 0.0 { human(x.exp2() as usize) } else { String::new() })
        .y_label_formatter(&|y| crate::report::num(*y))
        .draw()?;
    let log = |pts: &[(f64, f64)]| -> Vec<(f64, f64)> { pts.iter().map(|&(x, y)| (x.log2(), y)).collect() };
    let mut keys: Vec<(String, RGBColor, bool)> = Vec::new();
    for (i, (name, pts)) in lines.iter().enumerate() {
        if pts.is_empty() {
            continue;
        }
        let c = colour(name, i);
        let pts = log(pts);
        chart.draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))?;
        chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, c.filled())))?;
        keys.push((name.clone(), c, false));
    }
    if !base.is_empty() {
        let label = match w {
            crate::workload::Workload::Latency => "cache-line limit",
            _ => "memcpy, one core",
        };
        chart.draw_series(DashedLineSeries::new(log(&base), 6, 4, BLACK.stroke_width(1)))?;
        keys.push((label.to_owned(), BLACK, true));
    }
    // The legend, in its own column: it never hides a line.
    for (i, (name, c, dashed)) in keys.iter().enumerate() {
        let y = 60 + 24 * i as i32;
        let style = if *dashed { c.stroke_width(1) } else { c.stroke_width(3) };
        if *dashed {
            for x in (8..36).step_by(8) {
                legend.draw(&PathElement::new(vec![(x, y), (x + 5, y)], style))?;
            }
        } else {
            legend.draw(&PathElement::new(vec![(8, y), (36, y)], style))?;
        }
        legend.draw(&Text::new(name.as_str(), (44, y - 8), ("sans-serif", 15)))?;
    }
    root.present()?;
    Ok(())
}
