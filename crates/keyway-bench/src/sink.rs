//! Where results go: tables, JSON lines or CSV on stdout, each preceded by
//! the environment and followed by the load average at the end; and, for
//! `all --out DIR`, a report folder (tables, JSON, CSV, plots and an
//! `index.html` that shows them).

use std::fmt::Write as _;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::json;

use crate::harness::env::Environment;
use crate::harness::report::CSV_HEADER;
use crate::harness::VariantReport;

/// The stdout format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Human tables.
    Table,
    /// One JSON object per line: the environment first and last
    /// (`"scenario": "environment"`), one per variant between.
    Json,
    /// CSV: one line per system per variant, after a header line; the
    /// environment as `#` comment lines.
    Csv,
}

/// Prints results as they come and keeps them for the report folder.
#[derive(Debug)]
pub struct Sink {
    format: Format,
    env: Environment,
    reports: Vec<VariantReport>,
}

/// "vs keyway", as every output explains it.
pub const VS_KEYWAY: &str = "vs keyway = the system's median time / keyway's median time \
     in the same variant: above 1× keyway is faster, below 1× the peer is faster";

impl Sink {
    /// Starts the output: prints the environment.
    pub fn new(format: Format, env: Environment) -> Self {
        let sink = Self {
            format,
            env,
            reports: Vec::new(),
        };
        sink.print(&sink.env_block("environment"));
        sink
    }

    fn env_block(&self, scenario: &str) -> String {
        match self.format {
            Format::Table => format!("{}{VS_KEYWAY}\n", self.env.text()),
            Format::Json => json!({
                "scenario": scenario,
                "params": self.env.to_json(),
                "results": [],
            })
            .to_string(),
            Format::Csv => {
                let mut out = String::new();
                for line in self.env.text().lines() {
                    let _ = writeln!(out, "# {line}");
                }
                if scenario == "environment" {
                    out.push_str(CSV_HEADER);
                } else {
                    out.pop();
                }
                out
            }
        }
    }

    fn print(&self, text: &str) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{text}");
        let _ = out.flush();
    }

    /// Prints one variant's results.
    pub fn emit(&mut self, report: &VariantReport) {
        self.print(&match self.format {
            Format::Table => report.table(),
            Format::Json => report.json_line(),
            Format::Csv => report.csv_rows().join("\n"),
        });
        self.reports.push(report.clone());
    }

    /// Ends the output: the load average after, and any warnings.
    pub fn finish(&mut self) {
        self.env.finish();
        self.print(&self.env_block("environment-after"));
    }

    /// Writes the report folder: `tables.txt`, `results.json` (JSON lines),
    /// `results.csv`, the plots already in `dir` (`plots`), and `index.html`.
    /// Returns the path of `index.html`.
    pub fn write_dir(&self, dir: &Path, plots: &[PathBuf]) -> Result<PathBuf, String> {
        let write = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))
        };
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let tables: Vec<String> = self.reports.iter().map(VariantReport::table).collect();
        let head = format!("{}{VS_KEYWAY}\n\n", self.env.text());
        write("tables.txt", &(head.clone() + &tables.join("\n")))?;
        let mut json = vec![
            json!({"scenario": "environment", "params": self.env.to_json(), "results": []})
                .to_string(),
        ];
        json.extend(self.reports.iter().map(VariantReport::json_line));
        write("results.json", &(json.join("\n") + "\n"))?;
        let mut csv = vec![CSV_HEADER.to_string()];
        csv.extend(self.reports.iter().flat_map(VariantReport::csv_rows));
        write("results.csv", &(csv.join("\n") + "\n"))?;
        write("index.html", &index_html(&head, &tables, plots))?;
        Ok(dir.join("index.html"))
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The report's page: environment, every plot, every table, and links to
/// the raw files.
pub fn index_html(head: &str, tables: &[String], plots: &[PathBuf]) -> String {
    let mut page = String::from(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>keyway-bench report</title>\n\
         <style>body{font-family:sans-serif;margin:2em}pre{font-size:12px;background:#f6f6f6;\
         padding:1em;overflow-x:auto}img{max-width:100%;border:1px solid #ddd;margin:1em 0}</style>\n\
         </head><body>\n<h1>keyway-bench report</h1>\n",
    );
    let _ = writeln!(page, "<h2>Environment</h2>\n<pre>{}</pre>", escape(head));
    if !plots.is_empty() {
        page.push_str("<h2>Cost curves</h2>\n");
        for plot in plots {
            let name = plot
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
            let _ = writeln!(page, "<div><img src=\"{name}\" alt=\"{name}\"></div>");
        }
        page.push_str("<p>Points: <a href=\"curves.csv\">curves.csv</a></p>\n");
    }
    page.push_str("<h2>Scenarios</h2>\n");
    for table in tables {
        let _ = writeln!(page, "<pre>{}</pre>", escape(table));
    }
    page.push_str(
        "<p>Raw data: <a href=\"results.json\">results.json</a> (one JSON object per line, \
         per-run times in <code>times_s</code>), <a href=\"results.csv\">results.csv</a>, \
         <a href=\"tables.txt\">tables.txt</a>.</p>\n</body></html>\n",
    );
    page
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_shows_plots_and_escaped_tables() {
        let page = index_html(
            "machine: x\n",
            &["t · a<b\n".to_string()],
            &[PathBuf::from("/tmp/r/time-vs-contexts.svg")],
        );
        assert!(page.contains("<img src=\"time-vs-contexts.svg\""));
        assert!(page.contains("t · a&lt;b"));
        assert!(page.contains("results.json"));
    }
}
