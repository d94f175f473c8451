//! One plotted curve: its file, title, axes and a line of points per system.

use crate::harness::{SystemResult, VariantReport};

/// One plotted curve: a line per system.
#[derive(Debug, Clone)]
pub struct Curve {
    /// File stem of its SVG.
    pub file: &'static str,
    /// What it shows.
    pub title: String,
    /// The x axis.
    pub x_label: String,
    /// The y axis.
    pub y_label: String,
    /// (system, points) in the order systems first appeared.
    pub series: Vec<(String, Vec<(f64, f64)>)>,
}

impl Curve {
    /// An empty curve drawn to `file`.svg.
    pub fn new(file: &'static str, title: &str, x_label: &str, y_label: &str) -> Self {
        Self {
            file,
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            series: Vec::new(),
        }
    }

    /// Adds one point for `system`.
    pub fn add(&mut self, system: &str, x: f64, y: f64) {
        match self.series.iter_mut().find(|(s, _)| s == system) {
            Some((_, pts)) => pts.push((x, y)),
            None => self.series.push((system.to_string(), vec![(x, y)])),
        }
    }

    /// Adds `f(row)` of every system of `report` at `x`, where defined.
    pub fn add_report(
        &mut self,
        report: &VariantReport,
        x: f64,
        f: impl Fn(&SystemResult) -> Option<f64>,
    ) {
        for r in &report.results {
            if let Some(y) = f(r) {
                self.add(r.system, x, y);
            }
        }
    }
}
