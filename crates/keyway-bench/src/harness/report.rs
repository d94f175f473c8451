//! Results and their output: the human table and the SPEC §9 JSON line.

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
        }
    }

    fn to_json(&self) -> Value {
        json!({
            "system": self.system,
            "median_s": self.median_s,
            "min_s": self.min_s,
            "max_s": self.max_s,
            "ops_per_s": self.ops_per_s,
            "threads": self.threads,
        })
    }
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
    /// The SPEC §9 JSON object:
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

    /// The human table: median, min, max, ops/s, threads, and each system's
    /// ratio to keyway (peer median / keyway median; > 1 means keyway is faster).
    pub fn table(&self) -> String {
        let keyway = self.keyway_median();
        let mut out = format!("{} · {}\n", self.scenario, self.title);
        out.push_str(&format!(
            "  {:<20} {:>10} {:>10} {:>10} {:>14} {:>8} {:>12}\n",
            "system", "median s", "min s", "max s", "ops/s", "threads", "vs keyway"
        ));
        for r in &self.results {
            let ratio =
                keyway.map_or_else(|| "-".to_string(), |k| format!("{:.2}×", r.median_s / k));
            out.push_str(&format!(
                "  {:<20} {:>10.4} {:>10.4} {:>10.4} {:>14} {:>8} {:>12}\n",
                r.system,
                r.median_s,
                r.min_s,
                r.max_s,
                group_thousands(r.ops_per_s.round() as u64),
                r.threads,
                ratio
            ));
        }
        out
    }
}

/// `1234567` → `1,234,567`.
pub fn group_thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
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
                "threads"
            ]
        );
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
    fn thousands_are_grouped() {
        assert_eq!(group_thousands(0), "0");
        assert_eq!(group_thousands(999), "999");
        assert_eq!(group_thousands(1000), "1,000");
        assert_eq!(group_thousands(12_345_678), "12,345,678");
    }
}
