//! Points of the contexts curves measured in a fresh process per system
//! (`keyway-bench contexts … --systems NAME --json`, run as a child), so
//! that the peak RSS of a point is that system's alone: in one process,
//! memory an earlier system freed stays resident and is reused by the next
//! one, which hides what each one needs.

use std::process::Command;

use serde_json::{Map, Value};

use crate::harness::env::CHILD_ENV;
use crate::harness::{SystemResult, VariantReport};

/// Runs `contexts` with `contexts` × `tasks` tasks of work `work` for each
/// of `systems`, each in its own process, `runs` counted runs each; returns
/// one report with a row per system.
pub fn contexts_point(
    contexts: usize,
    tasks: u64,
    work: u64,
    systems: &[&'static str],
    runs: usize,
) -> Result<VariantReport, String> {
    let exe = std::env::current_exe().map_err(|e| format!("finding this program: {e}"))?;
    let mut results = Vec::new();
    let mut params = Map::new();
    for &system in systems {
        let out = Command::new(&exe)
            .env(CHILD_ENV, "1")
            .args(["contexts", "--json", "--systems", system])
            .args(["--contexts", &contexts.to_string()])
            .args(["--tasks", &tasks.to_string()])
            .args(["--work", &work.to_string()])
            .args(["--runs", &runs.to_string()])
            .output()
            .map_err(|e| format!("running {}: {e}", exe.display()))?;
        if !out.status.success() {
            return Err(format!(
                "the {system} process for {contexts} contexts failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let (row, p) = parse_row(&text, system)?;
        params = p;
        results.push(row);
    }
    params.insert("one_process_per_system".into(), Value::Bool(true));
    Ok(VariantReport {
        scenario: "contexts",
        title: format!(
            "curve point: {contexts} contexts × {tasks} tasks, work {work}, \
             each system in a process of its own ({runs} runs, median)"
        ),
        params,
        results,
    })
}

/// The row of `system` in a child's JSON output, and the variant's params.
pub fn parse_row(
    text: &str,
    system: &'static str,
) -> Result<(SystemResult, Map<String, Value>), String> {
    let variant = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["scenario"] == "contexts")
        .ok_or_else(|| format!("no contexts result from the {system} process"))?;
    let row = variant["results"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["system"] == system))
        .ok_or_else(|| format!("no {system} row from its process"))?;
    let times: Vec<f64> = row["times_s"]
        .as_array()
        .map(|t| t.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default();
    let ops = variant["params"]["total_tasks"].as_u64().unwrap_or(0);
    let threads = row["threads"].as_u64().unwrap_or(0) as usize;
    let mut result = SystemResult::from_times(system, &times, ops, threads);
    result.cpu_s = row["cpu_s"].as_f64();
    result.peak_rss_kib = row["peak_rss_kib"].as_u64();
    result.rss_growth_kib = row["rss_growth_kib"].as_u64();
    result.run_rss_growth_kib = row["run_rss_growth_kib"].as_u64();
    result.ready = row["ready"].as_bool().unwrap_or(false);
    let params = variant["params"].as_object().cloned().unwrap_or_default();
    Ok((result, params))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_childs_row() {
        let text = "{\"scenario\":\"environment\",\"params\":{},\"results\":[]}\n\
            {\"scenario\":\"contexts\",\"params\":{\"total_tasks\":100},\"results\":[{\"system\":\"keyway\",\
            \"median_s\":2.0,\"min_s\":1.0,\"max_s\":3.0,\"ops_per_s\":50.0,\"threads\":4,\"cpu_s\":0.5,\
            \"peak_rss_kib\":2048,\"rss_growth_kib\":10,\"run_rss_growth_kib\":20,\"ready\":true,\
            \"times_s\":[1.0,2.0,3.0]}]}\n";
        let (row, params) = parse_row(text, "keyway").unwrap();
        assert_eq!(row.median_s, 2.0);
        assert_eq!(row.peak_rss_kib, Some(2048));
        assert_eq!(row.threads, 4);
        assert!(row.ready);
        assert_eq!(params["total_tasks"], 100);
        assert!(parse_row(text, "ideal").is_err());
    }
}
