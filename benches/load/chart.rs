//! `throughput.svg`: jobs/s against concurrency over HTTP/1.1, one panel
//! for single jobs and one for batches, next to raw Redis and BullMQ.

use anyhow::Result;
use plotters::prelude::*;

use crate::args::{Args, Op};
use crate::bullmq;
use crate::report::{Results, depth_label, find, human};

const WIDTH: u32 = 980;
const HEIGHT: u32 = 490;
/// The height of the legend and notes under the panels.
const NOTES: u32 = 90;
const FONT: &str = "sans-serif";

fn color(op: Op) -> RGBColor {
    match op {
        Op::EnqueueSingle | Op::EnqueueBatch => RGBColor(0x1f, 0x77, 0xb4),
        Op::ClaimAckSingle | Op::ClaimAckBatch => RGBColor(0xd6, 0x27, 0x28),
        Op::E2eSingle | Op::E2eBatch => RGBColor(0x2c, 0xa0, 0x2c),
        Op::WorkerLoop => RGBColor(0x94, 0x67, 0xbd),
    }
}

/// The chart of `results`, as SVG text.
pub fn svg(results: &Results, args: &Args) -> Result<String> {
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE)?;
        let root = root.titled(
            "prioq throughput over HTTP/1.1 against concurrency (jobs/s; dotted: same functions pipelined straight into Redis)",
            (FONT, 18),
        )?;
        let (panels, notes) = root.split_vertically(HEIGHT - NOTES - 30);
        let halves = panels.split_evenly((1, 2));
        for (half, batched) in halves.iter().zip([false, true]) {
            panel(half, results, args, batched)?;
        }
        legend(&notes, results, args)?;
        root.present()?;
    }
    text.push('\n');
    Ok(text)
}

/// One panel: the single-job operations, or the batched ones.
fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    results: &Results,
    args: &Args,
    batched: bool,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let runs = &results.runs;
    let in_panel = |op: Op| op.batched() == batched;
    let mut top = runs
        .iter()
        .filter(|r| r.path != "http2" && Op::parse(&r.op).is_some_and(in_panel))
        .map(|r| r.jobs_per_s)
        .fold(1.0, f64::max);
    if !batched {
        top = results
            .bullmq
            .runs
            .iter()
            .map(|b| b.jobs_per_s)
            .fold(top, f64::max);
    }
    // Concurrency on a log scale: a grid line at each power of two, a
    // label at each measured concurrency.
    let x = |c: usize| (c as f64).log2();
    let (first, last) = (
        args.concurrency.first().map_or(0.0, |&c| x(c)),
        args.concurrency.last().map_or(1.0, |&c| x(c)),
    );
    let (from, to) = if last > first {
        (first, last)
    } else {
        (first - 1.0, first + 1.0)
    };
    let mut chart = ChartBuilder::on(area)
        .caption(
            if batched {
                "batches of 100 jobs per request"
            } else {
                "one job per request"
            },
            (FONT, 15),
        )
        .margin(12)
        .margin_right(28)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d(from..to, 0.0..top * 1.08)?;
    let label = |v: &f64| {
        let c = v.exp2().round() as usize;
        let measured = (v - v.round()).abs() < 1e-9 && args.concurrency.contains(&c);
        if measured {
            c.to_string()
        } else {
            String::new()
        }
    };
    chart
        .configure_mesh()
        .bold_line_style(RGBColor(0xdd, 0xdd, 0xdd))
        .light_line_style(TRANSPARENT)
        .axis_style(RGBColor(0x88, 0x88, 0x88))
        .x_desc("concurrent HTTP clients (log scale)")
        .x_labels((to - from).round() as usize + 1)
        .x_label_formatter(&label)
        .y_labels(6)
        .y_label_formatter(&|v| human(*v))
        .label_style((FONT, 13))
        .draw()?;
    for op in Op::ALL.into_iter().filter(|&op| in_panel(op)) {
        let style = color(op).stroke_width(2);
        for (d, &depth) in args.depths.iter().enumerate() {
            let points: Vec<(f64, f64)> = args
                .concurrency
                .iter()
                .filter_map(|&c| {
                    find(runs, "http1", op, depth, Some(c)).map(|r| (x(c), r.jobs_per_s))
                })
                .collect();
            if d == 0 {
                chart.draw_series(LineSeries::new(points.clone(), style))?;
                if let Some(raw) = find(runs, "raw", op, depth, None) {
                    let level = [(from, raw.jobs_per_s), (to, raw.jobs_per_s)];
                    chart.draw_series(DashedLineSeries::new(
                        level,
                        2,
                        3,
                        color(op).stroke_width(1),
                    ))?;
                }
            } else {
                chart.draw_series(DashedLineSeries::new(points.clone(), 7, 4, style))?;
            }
            chart.draw_series(
                points
                    .iter()
                    .map(|&point| Circle::new(point, 3, color(op).filled())),
            )?;
        }
    }
    if !batched && args.concurrency.contains(&bullmq::CONCURRENCY) {
        // Diamonds: filled for the prioritized variant, hollow for FIFO.
        let corners = [(0, -6), (6, 0), (0, 6), (-6, 0), (0, -6)];
        for b in results.bullmq.runs.iter().filter(|b| b.variant != "mix") {
            let fill = if b.variant == "priority" {
                BLACK
            } else {
                WHITE
            };
            chart.draw_series(std::iter::once(
                EmptyElement::at((x(bullmq::CONCURRENCY), b.jobs_per_s))
                    + Polygon::new(corners.to_vec(), fill.filled())
                    + PathElement::new(corners.to_vec(), BLACK.stroke_width(1)),
            ))?;
        }
    }
    Ok(())
}

/// What the colours and dashes mean, and how the run was set up.
fn legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    results: &Results,
    args: &Args,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let style = (FONT, 13).into_font().color(&BLACK);
    let grey = (FONT, 13).into_font().color(&RGBColor(0x55, 0x55, 0x55));
    let mut left = 70;
    for (name, op) in [
        ("enqueue", Op::EnqueueSingle),
        ("claim + ack", Op::ClaimAckSingle),
        ("end to end", Op::E2eSingle),
        ("worker loop", Op::WorkerLoop),
    ] {
        area.draw(&PathElement::new(
            vec![(left, 10), (left + 24, 10)],
            color(op).stroke_width(3),
        ))?;
        area.draw(&Text::new(name, (left + 30, 4), style.clone()))?;
        left += 125;
    }
    let depth = |d: Option<&u64>| d.map_or(String::new(), |d| depth_label(*d));
    let lines = [
        (
            format!(
                "solid: {} pending; dashed: {} pending; dotted: raw Redis at {}",
                depth(args.depths.first()),
                depth(args.depths.last()),
                depth(args.depths.first())
            ),
            (left, 4),
            style.clone(),
        ),
        (
            format!(
                "Diamonds at c=64: BullMQ end to end (filled: prioritized, hollow: FIFO). Pinning: {}.",
                results.setup["pinning"].as_str().unwrap_or("?")
            ),
            (70, 28),
            grey.clone(),
        ),
        (
            format!(
                "Load generator, prioq and Redis share the machine's {} cores; see results.md beside this chart for CPU per process and the HTTP/2 runs.",
                results.machine["nproc"]
            ),
            (70, 48),
            grey,
        ),
    ];
    for (line, at, style) in lines {
        area.draw(&Text::new(line, at, style))?;
    }
    Ok(())
}
