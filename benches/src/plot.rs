//! SVG plots of a suite run (plotters' SVG backend: no system library, no font files): one per
//! workload, the median figure against message size, one line per system, both axes
//! logarithmic, with the baseline dashed.

use std::path::{Path, PathBuf};

use plotters::prelude::*;

use crate::coll::outcome::{COLLECTIVES, Outcome as CollOutcome};
use crate::error::{Error, Result};
use crate::report::REFERENCE;
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

/// Writes `PREFIX-<workload>.svg` for every series into `dir` and, for a series with Open MPI
/// measured, `PREFIX-<workload>-openmpi.svg` (every other system's median per-round ratio to Open
/// MPI by size, from the smallest message: the small-message window shows); returns the files
/// written.
pub fn write(o: &Outcome, dir: &Path, prefix: &str, title: &str) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for s in &o.series {
        let path = dir.join(format!("{prefix}-{}.svg", s.workload.file_stem()));
        draw(o, s, &path, title).map_err(|e| Error::Run(format!("plot {}: {e}", path.display())))?;
        files.push(path);
        let Some(rf) = s.members.iter().position(|&k| o.systems[k].name == REFERENCE) else { continue };
        let lines: Vec<(String, Vec<(f64, f64)>)> = (0..s.members.len())
            .filter(|&m| m != rf)
            .map(|m| {
                let pts = s
                    .sizes
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| **b > 0)
                    .filter_map(|(j, &b)| {
                        let r = crate::stats::paired_ratio(&s.values[m][j], &s.values[rf][j])?.median;
                        (r > 0.0).then(|| ((b as f64).log2(), r))
                    })
                    .collect();
                (o.systems[s.members[m]].name.clone(), pts)
            })
            .collect();
        let w = s.workload;
        let better = if w.higher_is_better() { "above 1 is better" } else { "below 1 is better" };
        let path = dir.join(format!("{prefix}-{}-openmpi.svg", w.file_stem()));
        let caption = format!(
            "{title}: {} / {}'s by message size (median of per-round ratios, {} rounds; {better})",
            w.title(),
            REFERENCE,
            o.rounds
        );
        let y = format!("{} / {}'s", w.title(), REFERENCE);
        panels(&path, &caption, &y, &[(String::new(), lines)], true, &size_label)
            .map_err(|e| Error::Run(format!("plot {}: {e}", path.display())))?;
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

/// Writes, for each rank count `N` of a `coll` run, `PREFIX-Nranks.svg` (time per call against the
/// size per rank, a panel per collective, a line per system) and, when Open MPI was measured,
/// `PREFIX-Nranks-ratio.svg` (every other system's median per-round ratio to it, 1 dashed);
/// returns the files written.
pub fn coll(o: &CollOutcome, dir: &Path, prefix: &str, title: &str) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let x = |bytes: usize| if bytes == 0 { 0.0 } else { (bytes as f64).log2() };
    for (k, r) in o.ranks.iter().enumerate() {
        let panel = |f: &dyn Fn(usize, usize) -> Option<f64>, members: &[usize]| -> Vec<Panel> {
            COLLECTIVES
                .iter()
                .map(|c| {
                    let lines = members
                        .iter()
                        .map(|&m| {
                            let pts = o
                                .rows
                                .iter()
                                .enumerate()
                                .filter(|(_, (rc, _))| rc == c)
                                .filter_map(|(j, (_, b))| f(m, j).filter(|y| *y > 0.0).map(|y| (x(*b), y)))
                                .collect();
                            (o.members[m].name.clone(), pts)
                        })
                        .collect();
                    (c.to_string(), lines)
                })
                .collect()
        };
        let all: Vec<usize> = (0..o.members.len()).collect();
        let times = panel(&|m, j| o.figure(m, k, j).map(|s| s.median), &all);
        let path = dir.join(format!("{prefix}-{r}ranks.svg"));
        let caption = format!("{title}: collectives on {r} ranks, us per call, medians of {} rounds", o.rounds);
        panels(&path, &caption, "us per call", &times, false, &coll_label)
            .map_err(|e| Error::Run(format!("plot {}: {e}", path.display())))?;
        files.push(path);
        if let Some(rf) = o.reference() {
            let others: Vec<usize> = all.iter().copied().filter(|&m| m != rf).collect();
            let ratios = panel(&|m, j| o.to_reference(m, k, j).map(|s| s.median), &others);
            let path = dir.join(format!("{prefix}-{r}ranks-ratio.svg"));
            let caption = format!(
                "{title}: time / {}'s on {r} ranks (median of per-round ratios, {} rounds)",
                REFERENCE, o.rounds
            );
            let y = format!("time / {}'s", REFERENCE);
            panels(&path, &caption, &y, &ratios, true, &coll_label)
                .map_err(|e| Error::Run(format!("plot {}: {e}", path.display())))?;
            files.push(path);
        }
    }
    Ok(files)
}

/// The x labels of the collectives' panels: `0` (the barrier), then 8, 64, 512, ... bytes.
fn coll_label(x: f64) -> String {
    if x == 0.0 {
        "0".into()
    } else if x.fract() == 0.0 && x > 0.0 && (x as i64) % 3 == 0 {
        human(x.exp2() as usize)
    } else {
        String::new()
    }
}

/// The x labels of the message sizes of a suite's series (1 byte and up): every power of two.
fn size_label(x: f64) -> String {
    if x.fract() == 0.0 && x >= 0.0 { human(x.exp2() as usize) } else { String::new() }
}

/// A panel's title and its lines: (name, points (x = log2 of the size, or 0 for 0 bytes; y)).
type Panel = (String, Vec<(String, Vec<(f64, f64)>)>);

/// Draws `panels` in a grid of up to four columns, y logarithmic, x labelled by `label`, with the
/// legend in its own column; `unity` draws y = 1 dashed in every panel (ratio plots).
fn panels(
    path: &Path,
    caption: &str,
    y_desc: &str,
    panels: &[Panel],
    unity: bool,
    label: &dyn Fn(f64) -> String,
) -> std::result::Result<(), Box<dyn std::error::Error>> {
    let cols = panels.len().clamp(1, 4);
    let rows = panels.len().div_ceil(cols).max(1);
    let height = if rows == 1 && cols == 1 { 600 } else { 40 + 300 * rows as u32 };
    let root = SVGBackend::new(path, (1200 + LEGEND, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let (plot, legend) = root.split_horizontally(1200);
    let plot = plot.titled(caption, ("sans-serif", 20))?;
    let cells = plot.split_evenly((rows, cols));
    let mut names: Vec<String> = Vec::new();
    for ((title, lines), cell) in panels.iter().zip(cells.iter()) {
        let pts = lines.iter().flat_map(|(_, p)| p.iter());
        let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
        for &(x, y) in pts {
            (x0, x1, y0, y1) = (x0.min(x), x1.max(x), y0.min(y), y1.max(y));
        }
        if x0 > x1 {
            (x0, x1, y0, y1) = (0.0, 1.0, 1.0, 2.0); // nothing measured: an empty frame
        }
        if unity {
            (y0, y1) = (y0.min(1.0), y1.max(1.0));
        }
        let (x0, x1) = if x1 - x0 < 1.0 { (x0 - 1.0, x1 + 1.0) } else { (x0 - 0.5, x1 + 0.5) };
        let mut chart = ChartBuilder::on(cell)
            .caption(title.as_str(), ("sans-serif", 16))
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(56)
            .build_cartesian_2d(x0..x1, (y0 / 1.3..y1 * 1.3).log_scale())?;
        chart
            .configure_mesh()
            .max_light_lines(1)
            .x_labels(((x1 - x0) as usize + 1).max(2))
            .y_labels(8)
            .y_desc(y_desc)
            .x_label_formatter(&|x| label(*x))
            .y_label_formatter(&|y| crate::report::num(*y))
            .draw()?;
        if unity {
            chart.draw_series(DashedLineSeries::new(vec![(x0, 1.0), (x1, 1.0)], 6, 4, BLACK.stroke_width(1)))?;
        }
        for (name, pts) in lines {
            let i = match names.iter().position(|n| n == name) {
                Some(i) => i,
                None => {
                    names.push(name.clone());
                    names.len() - 1
                }
            };
            let c = colour(name, i);
            chart.draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))?;
            chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, c.filled())))?;
        }
    }
    for (i, name) in names.iter().enumerate() {
        let y = 60 + 24 * i as i32;
        legend.draw(&PathElement::new(vec![(8, y), (36, y)], colour(name, i).stroke_width(3)))?;
        legend.draw(&Text::new(name.as_str(), (44, y - 8), ("sans-serif", 15)))?;
    }
    if unity {
        let y = 60 + 24 * names.len() as i32;
        for x in (8..36).step_by(8) {
            legend.draw(&PathElement::new(vec![(x, y), (x + 5, y)], BLACK.stroke_width(1)))?;
        }
        legend.draw(&Text::new("same time", (44, y - 8), ("sans-serif", 15)))?;
    }
    root.present()?;
    Ok(())
}
