//! Points of the contexts curves measured in a fresh process per system
//! (`keyway-bench contexts … --systems NAME --json`, run as a child), so
//! that the peak RSS of a point is that system's alone: in one process,
//! memory an earlier system freed stays resident and is reused by the next
//! one, which hides what each one needs.

use serde_json::{Map, Value};

use crate::harness::{child, VariantReport};

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
    let mut results = Vec::new();
    let mut params = Map::new();
    for &system in systems {
        let args: Vec<String> = [
            "contexts",
            "--json",
            "--systems",
            system,
            "--contexts",
            &contexts.to_string(),
            "--tasks",
            &tasks.to_string(),
            "--work",
            &work.to_string(),
            "--runs",
            &runs.to_string(),
        ]
        .map(String::from)
        .to_vec();
        let text = child::run(&args, &format!("{system} ({contexts} contexts)"))?;
        let variant = child::variants(&text, "contexts", system)
            .into_iter()
            .next()
            .ok_or_else(|| format!("no contexts result from the {system} process"))?;
        params = variant.params;
        results.push(
            variant
                .row
                .ok_or_else(|| format!("no {system} row from its process"))?,
        );
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
