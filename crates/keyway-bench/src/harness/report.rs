//! Results and their output: the human table and the JSON line.

use serde_json::{json, Map, Value};

use super::stats::{median, min_max};

/// One system's summary over its runs of a variant.
#[derive(Debug, Clone, PartialEq)]
pub struct SystemResult {
    /// Row name (`keyway` or the peer's name).
    pub system: &'static str,
    /// Median run time in seconds.
    pub median_s: f64,
    /// Fastest run in seconds.
    pub min_s: f64,
    /// Slowest run in seconds.
    pub max_s: f64,
    /// Tasks per second at the median.
    pub ops_per_s: f64,
    /// Most OS threads the process had while this system ran.
    pub threads: usize,
    /// Every counted run's time in seconds, in run order (the warm-up run
    /// is not counted).
    pub times_s: Vec<f64>,
    /// Median CPU time (user + system, every thread of the process) of a
    /// run's timed region, in seconds.
    pub cpu_s: Option<f64>,
    /// The most RSS the process had during a timed region of this system
    /// (KiB; the peak is reset before each region).
    pub peak_rss_kib: Option<u64>,
    /// The most a timed region of this system grew the RSS (peak minus the
    /// RSS at the start of the region; KiB).
    pub rss_growth_kib: Option<u64>,
    /// Each counted run's growth of the RSS in its timed region, in run order (KiB; empty where
    /// a run could not tell).
    pub rss_growth_runs_kib: Vec<u64>,
    /// The most a whole run of this system (setup, timed region and
    /// teardown) grew the RSS over what the process held before its setup
    /// (KiB): the memory of the system's threads, queues and handles plus
    /// the run's shared state.
    pub run_rss_growth_kib: Option<u64>,
    /// Whether every run took the harness's readiness step before its clock
    /// started.
    pub ready: bool,
    /// Allocations per task during the timed region (every thread of the process: producer,
    /// workers, the system's own threads), the median over runs; `None` where a run counts no
    /// tasks.
    pub allocs_per_task: Option<f64>,
    /// Bytes those allocations asked for, per task.
    pub alloc_bytes_per_task: Option<f64>,
    /// CPU seconds other processes used during a timed region (the machine's busy time less
    /// this process's), the median over runs: how much a run was disturbed.
    pub others_cpu_s: Option<f64>,
    /// Further named figures of a scenario that measures more than time
    /// (`latency`: rates and delays), printed in a second table.
    pub extra: Vec<(&'static str, f64)>,
}

impl SystemResult {
    /// Summarises run times `times` (seconds) of runs of `ops` tasks each.
    pub fn from_times(system: &'static str, times: &[f64], ops: u64, threads: usize) -> Self {
        let median_s = median(times);
        let (min_s, max_s) = min_max(times);
        Self {
            system,
            median_s,
            min_s,
            max_s,
            ops_per_s: ops as f64 / median_s,
            threads,
            times_s: times.to_vec(),
            cpu_s: None,
            peak_rss_kib: None,
            rss_growth_kib: None,
            rss_growth_runs_kib: Vec::new(),
            run_rss_growth_kib: None,
            ready: true,
            allocs_per_task: None,
            alloc_bytes_per_task: None,
            others_cpu_s: None,
            extra: Vec::new(),
        }
    }

    fn to_json(&self) -> Value {
        let mut row = self.base_json();
        if !self.extra.is_empty() {
            let extra: Map<String, Value> = self
                .extra
                .iter()
                .map(|&(k, v)| (k.to_string(), json!(v)))
                .collect();
            if let Value::Object(fields) = &mut row {
                fields.insert("extra".into(), Value::Object(extra));
            }
        }
        row
    }

    fn base_json(&self) -> Value {
        json!({
            "system": self.system,
            "median_s": self.median_s,
            "min_s": self.min_s,
            "max_s": self.max_s,
            "ops_per_s": self.ops_per_s,
            "threads": self.threads,
            "cpu_s": self.cpu_s,
            "peak_rss_kib": self.peak_rss_kib,
            "rss_growth_kib": self.rss_growth_kib,
            "run_rss_growth_kib": self.run_rss_growth_kib,
            "ready": self.ready,
            "allocs_per_task": self.allocs_per_task,
            "alloc_bytes_per_task": self.alloc_bytes_per_task,
            "others_cpu_s": self.others_cpu_s,
            "times_s": self.times_s,
            "rss_growth_runs_kib": self.rss_growth_runs_kib,
        })
    }

    /// CPU time per second of wall-clock time: how many cores the system
    /// kept busy on average.
    pub fn cores_busy(&self) -> Option<f64> {
        self.cpu_s.map(|c| c / self.median_s)
    }
}

/// A figure with about three significant digits, thousands grouped.
fn figure(v: f64) -> String {
    if !v.is_finite() {
        "-".into()
    } else if v.abs() >= 100.0 {
        group_thousands(v.round() as u64)
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// The header of [`VariantReport::csv_rows`].
pub const CSV_HEADER: &str = "scenario,params,system,median_s,min_s,max_s,ops_per_s,threads,\
cpu_s,peak_rss_kib,rss_growth_kib,allocs_per_task,alloc_bytes_per_task,vs_keyway,times_s";

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

fn mib(kib: Option<u64>) -> String {
    kib.map_or_else(|| "-".to_string(), |k| format!("{:.1}", k as f64 / 1024.0))
}

/// The outcome of one variant of a scenario.
#[derive(Debug, Clone)]
pub struct VariantReport {
    /// Scenario name (`contexts`, `throughput`).
    pub scenario: &'static str,
    /// A human description of the variant, for the table heading.
    pub title: String,
    /// The variant's parameters, as printed in the JSON `params` object.
    pub params: Map<String, Value>,
    /// One row per system; keyway's row is named `keyway`.
    pub results: Vec<SystemResult>,
}

impl VariantReport {
    /// The JSON object:
    /// `{"scenario", "params", "results": [{"system", "median_s", "min_s", "max_s", "ops_per_s", "threads"}]}`.
    pub fn to_json(&self) -> Value {
        json!({
            "scenario": self.scenario,
            "params": Value::Object(self.params.clone()),
            "results": self.results.iter().map(SystemResult::to_json).collect::<Vec<_>>(),
        })
    }

    /// The JSON object on one line.
    pub fn json_line(&self) -> String {
        self.to_json().to_string()
    }

    /// The median of the row named `keyway`, if there is one.
    fn keyway_median(&self) -> Option<f64> {
        self.results
            .iter()
            .find(|r| r.system == "keyway")
            .map(|r| r.median_s)
    }

    /// Each system's ratio to keyway: its median / keyway's median (> 1
    /// means keyway is faster); `None` without a keyway row.
    pub fn vs_keyway(&self, r: &SystemResult) -> Option<f64> {
        self.keyway_median().map(|k| r.median_s / k)
    }

    /// The human table: median, min, max, ops/s, threads, CPU time (and the
    /// cores it kept busy), peak RSS and its growth, and each system's ratio
    /// to keyway (peer median / keyway median; > 1 means keyway is faster).
    pub fn table(&self) -> String {
        let mut out = format!("{} · {}\n", self.scenario, self.title);
        if self.results.iter().all(|r| r.median_s.is_nan()) {
            // A table of figures only (e.g. the ordering tax, each row a cell of the scenario):
            // no times to show, just the figures.
            out.push_str(&self.extra_table());
            return out;
        }
        out.push_str(&format!(
            "  {:<19} {:>9} {:>9} {:>9} {:>12} {:>7} {:>13} {:>8} {:>8} {:>13} {:>9}\n",
            "system",
            "median s",
            "min s",
            "max s",
            "ops/s",
            "threads",
            "cpu s (cores)",
            "RSS MiB",
            "+RSS MiB",
            "allocs/task (B)",
            "vs keyway"
        ));
        for r in &self.results {
            let ratio = self
                .vs_keyway(r)
                .map_or_else(|| "-".to_string(), |x| format!("{x:.2}×"));
            let cpu = match (r.cpu_s, r.cores_busy()) {
                (Some(c), Some(b)) => format!("{c:.3} ({b:.1})"),
                _ => "-".to_string(),
            };
            let allocs = match (r.allocs_per_task, r.alloc_bytes_per_task) {
                (Some(n), Some(b)) => format!("{} ({})", figure(n), figure(b)),
                _ => "-".to_string(),
            };
            out.push_str(&format!(
                "  {:<19} {:>9.4} {:>9.4} {:>9.4} {:>12} {:>7} {:>13} {:>8} {:>8} {:>13} {:>9}\n",
                r.system,
                r.median_s,
                r.min_s,
                r.max_s,
                group_thousands(r.ops_per_s.round() as u64),
                r.threads,
                cpu,
                mib(r.peak_rss_kib),
                mib(r.rss_growth_kib),
                allocs,
                ratio
            ));
        }
        out.push_str(&self.extra_table());
        for r in self.results.iter().filter(|r| !r.ready) {
            out.push_str(&format!(
                "  WARNING: {} did not take the readiness step before its clock started\n",
                r.system
            ));
        }
        out
    }

    /// The rows' further figures (none: empty), a column per name of the first row.
    fn extra_table(&self) -> String {
        let Some(first) = self.results.iter().find(|r| !r.extra.is_empty()) else {
            return String::new();
        };
        // The first column as wide as its longest name (a row may name a whole cell).
        let width = self
            .results
            .iter()
            .map(|r| r.system.chars().count())
            .fold(18, usize::max);
        let mut out = format!("  {:<width$}", "system");
        for (name, _) in &first.extra {
            out.push_str(&format!(" {name:>12}"));
        }
        out.push('\n');
        for r in &self.results {
            out.push_str(&format!("  {:<width$}", r.system));
            for (name, _) in &first.extra {
                let v = r.extra.iter().find(|(n, _)| n == name).map(|&(_, v)| v);
                out.push_str(&format!(" {:>12}", v.map_or_else(|| "-".into(), figure)));
            }
            out.push('\n');
        }
        out
    }

    /// One CSV line per system (see [`CSV_HEADER`]); `params` is the JSON
    /// object, quoted.
    pub fn csv_rows(&self) -> Vec<String> {
        let params = Value::Object(self.params.clone())
            .to_string()
            .replace('"', "\"\"");
        self.results
            .iter()
            .map(|r| {
                let times: Vec<String> = r.times_s.iter().map(|t| t.to_string()).collect();
                format!(
                    "{},\"{params}\",{},{},{},{},{},{},{},{},{},{},{},{},{}",
                    self.scenario,
                    r.system,
                    r.median_s,
                    r.min_s,
                    r.max_s,
                    r.ops_per_s,
                    r.threads,
                    opt(r.cpu_s),
                    opt(r.peak_rss_kib),
                    opt(r.rss_growth_kib),
                    opt(r.allocs_per_task),
                    opt(r.alloc_bytes_per_task),
                    opt(self.vs_keyway(r)),
                    times.join(" ")
                )
            })
            .collect()
    }
}

/// `1234567` → `1,234,567`.
pub fn group_thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> VariantReport {
        let mut params = Map::new();
        params.insert("variant".into(), json!("seed"));
        params.insert("contexts".into(), json!(16));
        VariantReport {
            scenario: "contexts",
            title: "seed".into(),
            params,
            results: vec![
                SystemResult::from_times("keyway", &[1.0, 2.0, 3.0], 100, 3),
                SystemResult::from_times("ideal", &[4.0, 4.0, 5.0], 100, 3),
            ],
        }
    }

    /// A table of figures only (its rows have no times, as the ordering tax's) shows the
    /// figures, each row's name whole, and no row of empty times.
    #[test]
    fn a_table_of_figures_only_shows_no_times() {
        let mut row = SystemResult::from_times("100 µs, 1,024 keys, zipf 1.1", &[f64::NAN], 0, 0);
        row.extra = vec![("keyway", 1.25), ("tokio", 0.5)];
        let report = VariantReport {
            scenario: "tax",
            title: "the ordering tax".into(),
            params: Map::new(),
            results: vec![row],
        };
        let table = report.table();
        assert!(!table.contains("NaN"), "{table}");
        assert!(!table.contains("median s"), "{table}");
        let line = table.lines().last().unwrap();
        assert!(
            line.starts_with("  100 µs, 1,024 keys, zipf 1.1 "),
            "{table}"
        );
        assert!(line.contains("1.25") && line.contains("0.50"), "{table}");
    }

    #[test]
    fn json_has_the_spec_shape() {
        let line = sample().json_line();
        assert!(!line.contains('\n'));
        let v: Value = serde_json::from_str(&line).unwrap();
        let obj = v.as_object().unwrap();
        assert_eq!(
            obj.keys().collect::<Vec<_>>(),
            ["scenario", "params", "results"]
        );
        assert_eq!(v["scenario"], "contexts");
        assert_eq!(v["params"]["contexts"], 16);
        let rows = v["results"].as_array().unwrap();
        assert_eq!(rows.len(), 2);
        let row = rows[0].as_object().unwrap();
        assert_eq!(
            row.keys().collect::<Vec<_>>(),
            [
                "system",
                "median_s",
                "min_s",
                "max_s",
                "ops_per_s",
                "threads",
                "cpu_s",
                "peak_rss_kib",
                "rss_growth_kib",
                "run_rss_growth_kib",
                "ready",
                "allocs_per_task",
                "alloc_bytes_per_task",
                "others_cpu_s",
                "times_s",
                "rss_growth_runs_kib"
            ]
        );
        assert_eq!(row["times_s"], json!([1.0, 2.0, 3.0]));
        assert_eq!(row["system"], "keyway");
        assert_eq!(row["median_s"], 2.0);
        assert_eq!(row["min_s"], 1.0);
        assert_eq!(row["max_s"], 3.0);
        assert_eq!(row["ops_per_s"], 50.0);
        assert_eq!(row["threads"], 3);
    }

    #[test]
    fn table_shows_ratio_to_keyway() {
        let table = sample().table();
        assert!(table.contains("1.00×"), "{table}");
        assert!(table.contains("2.00×"), "{table}");
    }

    #[test]
    fn csv_has_a_row_per_system_with_quoted_params() {
        let rows = sample().csv_rows();
        assert_eq!(rows.len(), 2);
        assert!(
            rows[1].starts_with(
                "contexts,\"{\"\"variant\"\":\"\"seed\"\",\"\"contexts\"\":16}\",ideal,4,4,5,"
            ),
            "{}",
            rows[1]
        );
        assert!(rows[1].ends_with(",4 4 5"), "{}", rows[1]);
        assert_eq!(
            CSV_HEADER.split(',').count(),
            rows[0].split(',').count() - 1
        );
    }

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(group_thousands(0), "0");
        assert_eq!(group_thousands(999), "999");
        assert_eq!(group_thousands(1000), "1,000");
        assert_eq!(group_thousands(12_345_678), "12,345,678");
    }
}
