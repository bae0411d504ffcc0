//! The two-sample Kolmogorov–Smirnov distance: the largest gap between the
//! empirical distribution functions of two samples,
//! D = sup_x |F₁(x) − F₂(x)| (what `scipy.stats.ks_2samp` reports as its
//! statistic). Ties are stepped over together: both functions jump at a
//! shared value before the gap is measured.

/// D of samples `a` and `b`; None when either is empty.
pub fn ks_distance(a: &[u64], b: &[u64]) -> Option<f64> {
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let mut a = a.to_vec();
    let mut b = b.to_vec();
    a.sort_unstable();
    b.sort_unstable();
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let (mut i, mut j, mut d) = (0usize, 0usize, 0f64);
    while i < a.len() && j < b.len() {
        let x = a[i].min(b[j]);
        while i < a.len() && a[i] == x {
            i += 1;
        }
        while j < b.len() && b[j] == x {
            j += 1;
        }
        d = d.max((i as f64 / na - j as f64 / nb).abs());
    }
    Some(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(x: f64, y: f64) -> bool {
        (x - y).abs() < 1e-12
    }

    #[test]
    fn known_distances() {
        // Identical samples: 0; disjoint: 1.
        assert_eq!(ks_distance(&[1, 2, 3], &[3, 2, 1]), Some(0.0));
        assert_eq!(ks_distance(&[1, 2, 3, 4], &[5, 6, 7, 8]), Some(1.0));
        // scipy.stats.ks_2samp([1,2,3,4,5], [3,4,5,6,7]).statistic == 0.4:
        // at 2, F₁ = 0.4 and F₂ = 0; the shared 3, 4, 5 step together.
        assert!(close(
            ks_distance(&[1, 2, 3, 4, 5], &[3, 4, 5, 6, 7]).unwrap(),
            0.4
        ));
        // ks_2samp([10, 20, 30], [25]).statistic == 2/3 (at 20: 2/3 − 0).
        assert!(close(ks_distance(&[10, 20, 30], &[25]).unwrap(), 2.0 / 3.0));
        // ks_2samp([1,1,1,2], [1,2,2,2]).statistic == 0.5 (at 1: 3/4 − 1/4).
        assert!(close(
            ks_distance(&[1, 1, 1, 2], &[1, 2, 2, 2]).unwrap(),
            0.5
        ));
        assert_eq!(ks_distance(&[], &[1]), None);
    }

    #[test]
    fn symmetric_and_shift_sensitive() {
        let a: Vec<u64> = (0..1000).collect();
        let b: Vec<u64> = (100..1100).collect();
        let d = ks_distance(&a, &b).unwrap();
        assert!(close(d, 0.1), "{d}");
        assert_eq!(ks_distance(&b, &a), Some(d));
    }
}
