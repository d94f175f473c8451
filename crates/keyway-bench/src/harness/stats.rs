//! Summary statistics over the runs of one system.

/// The median of `values` (mean of the two middle values for an even count);
/// `NaN` when empty.
pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    }
}

/// The smallest and largest of `values` (`NaN`s when empty).
pub fn min_max(values: &[f64]) -> (f64, f64) {
    values
        .iter()
        .fold((f64::NAN, f64::NAN), |(lo, hi), &v| (lo.min(v), hi.max(v)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_count_is_the_middle() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[5.0, 9.0, 1.0, 7.0, 3.0]), 5.0);
    }

    #[test]
    fn median_of_even_count_is_the_mean_of_the_middles() {
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
    }

    #[test]
    fn median_of_nothing_is_nan() {
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn min_max_works() {
        assert_eq!(min_max(&[2.0, 0.5, 7.0]), (0.5, 7.0));
    }
}
