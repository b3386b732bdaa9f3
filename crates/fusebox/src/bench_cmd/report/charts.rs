//! PNG charts of a `fusebox bench` run, laid out like the papers' figures: SNF Fig. 7 (Mpps
//! against chain length, naive and synthesized), SNF Fig. 8 (Mpps and Gbit/s against frame
//! size) and the single-NF scenarios against the reference loop.
//!
//! Text needs a TrueType font, read at run time from [`FONT`] (Debian's `fonts-dejavu-core`,
//! which `scripts/setup.sh` and `.ci/run` install); without it no chart is drawn and the
//! caller says so.

use super::Measured;
use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use std::path::{Path, PathBuf};

/// The font the charts' text is drawn with.
pub const FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

const COLORS: [RGBColor; 6] = [
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x7f, 0x7f, 0x7f),
];

/// Why no chart was drawn (the bench goes on without them and says why).
#[derive(Debug, thiserror::Error)]
pub enum ChartError {
    /// The font cannot be had.
    #[error(transparent)]
    Font(#[from] FontError),
    /// The chart directory cannot be created.
    #[error("{}: cannot create: {source}", .path.display())]
    Dir {
        /// The directory.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// plotters failed drawing or writing a chart.
    #[error("{0:?}")]
    Draw(#[source] DrawError),
}

/// Why [`FONT`] cannot be used (kept for the whole process: `Clone`).
#[derive(Debug, Clone, thiserror::Error)]
pub enum FontError {
    /// The font file cannot be read.
    #[error("cannot read the font {FONT} ({0}); install fonts-dejavu-core")]
    Missing(std::sync::Arc<std::io::Error>),
    /// The file is not a font plotters can use.
    #[error("{FONT}: not a usable TrueType font")]
    Unusable,
}

type ChartResult<T> = Result<T, ChartError>;

/// What plotters reports when drawing a bitmap chart fails.
type DrawError = DrawingAreaErrorKind<<BitMapBackend<'static> as DrawingBackend>::ErrorType>;

/// The legend box every chart has, upper right.
macro_rules! legend {
    ($chart:expr) => {
        $chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 14))
            .draw()
            .map_err(err)?
    };
}

/// A line through `pts` with a dot at each, in colour `c`, labelled in the legend.
macro_rules! line {
    ($chart:expr, $pts:expr, $c:expr, $label:expr) => {{
        let c = $c;
        $chart
            .draw_series(LineSeries::new($pts.clone(), c.stroke_width(2)))
            .map_err(err)?
            .label($label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        $chart
            .draw_series($pts.iter().map(|&p| Circle::new(p, 4, c.filled())))
            .map_err(err)?;
    }};
}

fn err(e: DrawError) -> ChartError {
    ChartError::Draw(e)
}

/// Registers [`FONT`] as plotters' `sans-serif` (once per process).
fn font() -> ChartResult<()> {
    static DONE: std::sync::OnceLock<Result<(), FontError>> = std::sync::OnceLock::new();
    DONE.get_or_init(|| {
        let bytes = std::fs::read(FONT).map_err(|e| FontError::Missing(std::sync::Arc::new(e)))?;
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
            .map_err(|_| FontError::Unusable)
    })
    .clone()
    .map_err(ChartError::Font)
}

/// Draws every chart the measurements allow into `dir`; returns the files written.
pub fn draw(m: &[Measured], dir: &Path) -> ChartResult<Vec<PathBuf>> {
    font()?;
    std::fs::create_dir_all(dir).map_err(|source| ChartError::Dir {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut files = Vec::new();
    for sc in ["routers", "napts", "blacklist"] {
        let rows: Vec<&Measured> = m.iter().filter(|x| x.scenario == sc).collect();
        if !rows.is_empty() {
            let f = dir.join(if sc == "blacklist" {
                "speedybox-blacklist.png".to_string()
            } else {
                format!("fig7-{sc}.png")
            });
            fig7(sc, &rows, &f)?;
            files.push(f);
        }
        let rows: Vec<&Measured> = m
            .iter()
            .filter(|x| x.scenario == "frame-sizes" && x.tag.as_deref() == Some(sc))
            .collect();
        if !rows.is_empty() {
            let f = dir.join(format!("fig8-{sc}.png"));
            fig8(sc, &rows, &f)?;
            files.push(f);
        }
    }
    let rows: Vec<&Measured> = m
        .iter()
        .filter(|x| x.scenario == "ttl" || x.scenario == "lpm")
        .collect();
    if !rows.is_empty() {
        let f = dir.join("ttl-lpm.png");
        bars(&rows, &f)?;
        files.push(f);
    }
    let rows: Vec<&Measured> = m.iter().filter(|x| x.scenario == "isp").collect();
    if !rows.is_empty() {
        let f = dir.join("fig10-isp.png");
        fig10(&rows, &f)?;
        files.push(f);
    }
    Ok(files)
}

fn ymax(v: impl Iterator<Item = f64>) -> f64 {
    (v.fold(0.0f64, f64::max) * 1.15).max(1e-3)
}

/// SNF Fig. 7: Mpps against the number of NFs, naive and synthesized, per batch size (the
/// reference loop, far above, is left to the table and the ratios).
fn fig7(sc: &str, rows: &[&Measured], file: &Path) -> ChartResult<()> {
    let root = BitMapBackend::new(file, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let top = ymax(
        rows.iter()
            .filter(|r| r.mode != "reference")
            .map(|r| r.mpps.1),
    );
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("{sc}: Mpps vs chain length (64-byte frames, one core)"),
            ("sans-serif", 22),
        )
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(0.5f64..10.5f64, 0f64..top)
        .map_err(err)?;
    chart
        .configure_mesh()
        .light_line_style(TRANSPARENT)
        .x_desc("NFs in the chain")
        .y_desc("Mpps (median)")
        .x_labels(10)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .draw()
        .map_err(err)?;
    let mut batches: Vec<usize> = rows.iter().map(|r| r.batch).collect();
    batches.sort_unstable();
    batches.dedup();
    let mut color = 0;
    for &batch in &batches {
        for mode in ["naive", "synth", "fastpath", "fastclick"] {
            let mut pts: Vec<(f64, f64)> = rows
                .iter()
                .filter(|r| r.batch == batch && r.mode == mode)
                .map(|r| (r.nfs as f64, r.mpps.1))
                .collect();
            if pts.is_empty() {
                continue;
            }
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            let c = COLORS[color % COLORS.len()];
            color += 1;
            let label = format!("{mode}, batch {batch}");
            line!(chart, pts, c, label);
        }
    }
    legend!(chart);
    root.present().map_err(err)?;
    Ok(())
}

/// SNF Fig. 8: Mpps (left) and Gbit/s (right) against frame size.
fn fig8(sc: &str, rows: &[&Measured], file: &Path) -> ChartResult<()> {
    let root = BitMapBackend::new(file, (1200, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let (title, body) = root.split_vertically(40);
    title
        .titled(
            &format!("{sc}: 10-NF chain over frame sizes (one core; Gbit/s with FCS + 20 B preamble/IFG)"),
            ("sans-serif", 20),
        )
        .map_err(err)?;
    let panels = body.split_evenly((1, 2));
    for (k, panel) in panels.iter().enumerate() {
        let value = |r: &Measured| if k == 0 { r.mpps.1 } else { r.gbps.1 };
        let top = ymax(rows.iter().map(|r| value(r)));
        let mut chart = ChartBuilder::on(panel)
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..1600f64, 0f64..top)
            .map_err(err)?;
        chart
            .configure_mesh()
            .light_line_style(TRANSPARENT)
            .x_desc("frame size (bytes)")
            .y_desc(if k == 0 {
                "Mpps (median)"
            } else {
                "Gbit/s (median)"
            })
            .draw()
            .map_err(err)?;
        for (i, (mode, nfs, label)) in [
            ("naive", 1, "naive, 1 NF"),
            ("naive", 10, "naive, 10 NFs"),
            ("synth", 10, "synth, 10 NFs"),
            ("reference", 0, "reference loop"),
        ]
        .into_iter()
        .enumerate()
        {
            let mut pts: Vec<(f64, f64)> = rows
                .iter()
                .filter(|r| r.mode == mode && r.nfs == nfs)
                .map(|r| (f64::from(r.frame), value(r)))
                .collect();
            if pts.is_empty() {
                continue;
            }
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            let c = COLORS[i % COLORS.len()];
            line!(chart, pts, c, label);
        }
        legend!(chart);
    }
    root.present().map_err(err)?;
    Ok(())
}

/// The single-NF scenarios: per scenario, one bar per mode (Mpps), the reference loop first,
/// the NF written with operators last.
fn bars(rows: &[&Measured], file: &Path) -> ChartResult<()> {
    let groups = ["ttl", "lpm"];
    grouped(
        file,
        (900, 520),
        "ttl and lpm: Mpps, Click (naive, synth) and operators vs the reference loop (64-byte frames)",
        &groups.map(String::from),
        &["reference", "naive", "synth", "operators", "operators-synth", "operators-loop"],
        3,
        |g, mode| {
            rows.iter()
                .find(|r| r.scenario == groups[g] && r.mode == mode)
                .map(|r| r.mpps.1)
        },
    )
}

/// SNF Fig. 10: the ISP chain's Mpps per rule list and frame size, naive and synthesized,
/// with and without the firewall's rules (the reference loop, tens of Mpps, left out).
fn fig10(rows: &[&Measured], file: &Path) -> ChartResult<()> {
    let mut groups: Vec<(String, u32)> = Vec::new();
    for r in rows {
        let g = (r.tag.clone().unwrap_or_default(), r.frame);
        if !groups.contains(&g) {
            groups.push(g);
        }
    }
    let names: Vec<String> = groups
        .iter()
        .map(|(list, frame)| format!("{list} rules, {frame} B"))
        .collect();
    grouped(
        file,
        (1400, 560),
        "isp (firewall -> router -> NAPT): Mpps per rule list and frame size",
        &names,
        &["naive", "synth", "naive-open", "synth-open"],
        0,
        |g, mode| {
            let (list, frame) = &groups[g];
            rows.iter()
                .find(|r| r.tag.as_ref() == Some(list) && r.frame == *frame && r.mode == mode)
                .map(|r| r.mpps.1)
        },
    )
}

/// A bar chart: per group (labelled), one bar per mode (its own colour, from `color`),
/// of height `value(group, mode)` when there is one.
fn grouped(
    file: &Path,
    size: (u32, u32),
    title: &str,
    groups: &[String],
    modes: &[&str],
    color: usize,
    value: impl Fn(usize, &str) -> Option<f64>,
) -> ChartResult<()> {
    let slots = modes.len() + 1;
    let n = groups.len() * slots;
    let root = BitMapBackend::new(file, size).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let value = &value;
    let top = ymax((0..groups.len()).flat_map(|g| modes.iter().filter_map(move |m| value(g, m))));
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d((0..n).into_segmented(), 0f64..top)
        .map_err(err)?;
    chart
        .configure_mesh()
        .light_line_style(TRANSPARENT)
        .disable_x_mesh()
        .y_desc("Mpps (median)")
        .x_labels(n)
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) | SegmentValue::Exact(i) if *i % slots == modes.len() / 2 => {
                groups.get(*i / slots).cloned().unwrap_or_default()
            }
            _ => String::new(),
        })
        .draw()
        .map_err(err)?;
    for (k, &mode) in modes.iter().enumerate() {
        let c = COLORS[(k + color) % COLORS.len()];
        let data: Vec<(usize, f64)> = (0..groups.len())
            .filter_map(|g| Some((g * slots + k, value(g, mode)?)))
            .collect();
        chart
            .draw_series(
                Histogram::vertical(&chart)
                    .style(c.filled())
                    .margin(2)
                    .data(data),
            )
            .map_err(err)?
            .label(mode)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], c.filled()));
    }
    legend!(chart);
    root.present().map_err(err)?;
    Ok(())
}

/// SpeedyBox's per-flow processing time: the CDF of each (chain, mode) series, time in µs
/// on a log axis.
pub fn cdf(series: &[(String, Vec<u64>)], file: &Path) -> ChartResult<()> {
    font()?;
    let root = BitMapBackend::new(file, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let lo = series
        .iter()
        .filter_map(|(_, v)| v.first())
        .map(|&x| (x as f64 / 1000.0).max(0.1))
        .fold(f64::MAX, f64::min)
        .min(1.0);
    let hi = series
        .iter()
        .filter_map(|(_, v)| v.last())
        .map(|&x| x as f64 / 1000.0)
        .fold(1.0f64, f64::max)
        * 1.2;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "SpeedyBox chains: per-flow processing time (CDF)",
            ("sans-serif", 22),
        )
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d((lo..hi).log_scale(), 0f64..1f64)
        .map_err(err)?;
    chart
        .configure_mesh()
        .light_line_style(TRANSPARENT)
        .x_desc("µs per flow (log)")
        .y_desc("fraction of flows")
        .draw()
        .map_err(err)?;
    for (k, (label, v)) in series.iter().enumerate() {
        if v.is_empty() {
            continue;
        }
        let n = v.len() as f64;
        let step = (v.len() / 200).max(1);
        let pts: Vec<(f64, f64)> = v
            .iter()
            .enumerate()
            .filter(|(i, _)| i % step == 0 || *i + 1 == v.len())
            .map(|(i, &x)| ((x as f64 / 1000.0).max(lo), (i + 1) as f64 / n))
            .collect();
        let c = COLORS[k % COLORS.len()];
        chart
            .draw_series(LineSeries::new(pts, c.stroke_width(2)))
            .map_err(err)?
            .label(label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}
