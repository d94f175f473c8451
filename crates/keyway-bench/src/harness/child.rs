//! Measurements in a child process: this program run again with `--json` for one system, and
//! its rows read back, so that a system's figures (above all its peak RSS) owe nothing to
//! memory another system left in the process.

use std::process::{Command, Stdio};

use serde_json::{Map, Value};

use super::env::CHILD_ENV;
use super::SystemResult;

/// Runs this program with `args` as a child (marked by [`CHILD_ENV`], so it skips measuring
/// the machine again); its stderr (progress) goes to ours. Returns its stdout, or what failed.
pub fn run(args: &[String], what: &str) -> Result<String, String> {
    let exe = std::env::current_exe().map_err(|e| format!("finding this program: {e}"))?;
    let out = Command::new(&exe)
        .env(CHILD_ENV, "1")
        .args(args)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("running {}: {e}", exe.display()))?;
    if !out.status.success() {
        return Err(format!("the {what} process failed ({})", out.status));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// One variant of a child's JSON output: its title-less params and the row of the system asked
/// for (`None`: the variant had no such row).
#[derive(Debug, Clone)]
pub struct ChildVariant {
    /// The variant's `params` object.
    pub params: Map<String, Value>,
    /// The system's row.
    pub row: Option<SystemResult>,
}

/// Every variant of `scenario` in a child's JSON output (`text`), in order, with the row of
/// `system`.
pub fn variants(text: &str, scenario: &str, system: &'static str) -> Vec<ChildVariant> {
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["scenario"] == scenario)
        .map(|v| ChildVariant {
            params: v["params"].as_object().cloned().unwrap_or_default(),
            row: v["results"]
                .as_array()
                .and_then(|rows| rows.iter().find(|r| r["system"] == system))
                .map(|r| row(r, system, v["params"]["total_tasks"].as_u64().unwrap_or(0))),
        })
        .collect()
}

/// A row of a report's JSON (see [`SystemResult`]) back as a result of `system`; `ops` tasks a
/// run.
pub fn row(row: &Value, system: &'static str, ops: u64) -> SystemResult {
    let list = |name: &str| -> Vec<&Value> {
        row[name]
            .as_array()
            .map(|a| a.iter().collect())
            .unwrap_or_default()
    };
    let times: Vec<f64> = list("times_s")
        .into_iter()
        .filter_map(Value::as_f64)
        .collect();
    let threads = row["threads"].as_u64().unwrap_or(0) as usize;
    let mut result = SystemResult::from_times(system, &times, ops, threads);
    result.cpu_s = row["cpu_s"].as_f64();
    result.peak_rss_kib = row["peak_rss_kib"].as_u64();
    result.rss_growth_kib = row["rss_growth_kib"].as_u64();
    result.rss_growth_runs_kib = list("rss_growth_runs_kib")
        .into_iter()
        .filter_map(Value::as_u64)
        .collect();
    result.run_rss_growth_kib = row["run_rss_growth_kib"].as_u64();
    result.ready = row["ready"].as_bool().unwrap_or(false);
    result.allocs_per_task = row["allocs_per_task"].as_f64();
    result.alloc_bytes_per_task = row["alloc_bytes_per_task"].as_f64();
    result.others_cpu_s = row["others_cpu_s"].as_f64();
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::VariantReport;

    /// A row written as JSON reads back the same, every field.
    #[test]
    fn a_row_reads_back_as_written() {
        let mut written = SystemResult::from_times("keyway", &[1.0, 2.0, 3.0], 100, 4);
        written.cpu_s = Some(0.5);
        written.peak_rss_kib = Some(2048);
        written.rss_growth_kib = Some(30);
        written.rss_growth_runs_kib = vec![10, 30, 20];
        written.run_rss_growth_kib = Some(40);
        written.allocs_per_task = Some(1.5);
        written.alloc_bytes_per_task = Some(48.0);
        written.others_cpu_s = Some(0.01);
        let other = SystemResult::from_times("ideal", &[1.0], 100, 2);
        let mut params = Map::new();
        params.insert("total_tasks".into(), 100.into());
        let report = VariantReport {
            scenario: "contexts",
            title: "t".into(),
            params,
            results: vec![other, written.clone()],
        };
        let text = format!(
            "{{\"scenario\":\"environment\"}}\nnot json\n{}\n{{\"scenario\":\"latency\",\"results\":[]}}\n{}\n",
            report.json_line(),
            VariantReport {
                results: Vec::new(),
                ..report.clone()
            }
            .json_line()
        );
        let found = variants(&text, "contexts", "keyway");
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].row.as_ref(), Some(&written));
        assert_eq!(found[0].params["total_tasks"], 100);
        assert!(found[1].row.is_none());
    }
}
